"""Statistical DP test of the smoothed keyphrase histogram density (docs/DESIGN.md §6; dp/histogram.py).

The release: per class, Σ over documents of 1/m per keyphrase occurrence (L1 sensitivity 1: every document's
weights sum to 1), plus Laplace(1/ε_kde) on every entry of every class. Neighbours: D' = D plus one document whose
only keyphrase is term j, so entry (class, j) moves by the full sensitivity 1. Event: that entry of the released
``noisy_histograms`` lands above its D' value plus a margin (the upper tail of the noise on both sides), where
the likelihood ratio is exactly e^ε. Each test also runs with the noise halved and must then flag a violation.
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_stats import CONSISTENT, VIOLATION, dp_verdict, scale_noise
from dpkps_core.dp.histogram import build_smoothed_histogram_density
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource

EPS = 1.0
CLASSES = ("a", "b")
EMBEDDINGS = np.eye(4)  # |Ṽ| = 4; bandwidth 0: the release is the noisy histogram itself (no smoothing)
KEYPHRASES_D = [[0, 1], [1, 1, 2], [3], [0, 2]]
LABELS_D = ["a", "a", "b", "b"]
ADDED = ([2], "a")  # one keyphrase: entry (a, 2) moves by 1 = the stated sensitivity
MOVED = (0, 2)
MARGIN = 0.05


def _statistic(keyphrases: list[list[int]], labels: list[str]) -> np.ndarray:
    """The exact per-class histogram (the noiseless statistic), to place the event's threshold."""
    hist = np.zeros((len(CLASSES), EMBEDDINGS.shape[0]))
    for k, lab in zip(keyphrases, labels):
        for v in k:
            hist[CLASSES.index(lab), v] += 1.0 / len(k)
    return hist


def _hits(trials: int, *, seed: int, bandwidth: float = 0.0) -> tuple[int, int]:
    noise = NoiseSource(seed)
    neighbours = [(KEYPHRASES_D, LABELS_D), (KEYPHRASES_D + [ADDED[0]], LABELS_D + [ADDED[1]])]
    threshold = _statistic(*neighbours[1])[MOVED] + MARGIN
    hits = []
    for keyphrases, labels in neighbours:
        n = 0
        for _ in range(trials):
            density = build_smoothed_histogram_density(
                keyphrases, labels, classes=CLASSES, embeddings=EMBEDDINGS, epsilon=EPS, bandwidth=bandwidth,
                context=ReleaseContext(noise=noise, ledger=PrivacyLedger()))
            n += bool(density.noisy_histograms[MOVED] > threshold)
        hits.append(n)
    return hits[0], hits[1]


def test_neighbour_statistics_differ_by_the_full_sensitivity() -> None:
    d = _statistic(KEYPHRASES_D, LABELS_D)
    d2 = _statistic(KEYPHRASES_D + [ADDED[0]], LABELS_D + [ADDED[1]])
    assert np.abs(d2 - d).sum() == pytest.approx(1.0) and (d2 - d)[MOVED] == pytest.approx(1.0)


@pytest.mark.parametrize("bandwidth", [0.0, 0.5])
def test_smoothed_histogram_is_eps_dp_on_a_full_sensitivity_neighbour(bandwidth: float) -> None:
    trials = 4_000
    verdict, eps_lb = dp_verdict(*_hits(trials, seed=21, bandwidth=bandwidth), trials, EPS)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed ε = {EPS}"
    assert eps_lb > 0.6 * EPS


def test_smoothed_histogram_with_half_the_noise_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    trials = 4_000
    verdict, eps_lb = dp_verdict(*_hits(trials, seed=21), trials, EPS)
    assert verdict == VIOLATION, f"half the noise went unnoticed: ε lower bound {eps_lb:.3f} ≤ {EPS}"
