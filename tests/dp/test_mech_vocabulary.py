"""Statistical DP test of the private vocabulary (docs/DESIGN.md §2.1; docs/PRIVACY.md, mechanism table).

The release: Laplace(S/ε_voc) on every count of the first-S-distinct term histogram over all of V (L1
sensitivity S). Neighbours: D' = D plus one document whose S distinct terms are all in V, so S counts move by 1 —
the full stated sensitivity. Event: every moved count lands above its D' value plus a margin (in the upper tail of
the noise on both sides), where the likelihood ratio of the two releases is exactly e^{S/b} = e^ε. Verdict: a
one-sided Clopper–Pearson lower bound on the privacy loss (tests/dp_stats.py) against the claimed ε; each test
also runs with the noise halved and must then report a violation.
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_stats import CONSISTENT, VIOLATION, dp_verdict, scale_noise
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import privatize_vocabulary, noisy_term_histogram

TERMS = tuple(f"term{i}" for i in range(8))
S = 3
EPS = 1.5
COUNTS_D = np.array([6, 5, 4, 2, 0, 0, 0, 0], dtype=np.int64)
MOVED = np.array([3, 4, 5])  # the added document's S distinct terms (one of them never seen in D)
COUNTS_D2 = COUNTS_D.copy()
COUNTS_D2[MOVED] += 1
MARGIN = 0.5  # half-integer thresholds: the same event for the continuous and the discrete Laplace


def _event(noisy: np.ndarray) -> np.ndarray:
    """Per trial: every moved count exceeds its D' count + ½ (the likelihood-ratio region of the release)."""
    return (noisy[:, MOVED] > COUNTS_D2[MOVED] + MARGIN).all(axis=1)


def _histogram_hits(trials: int, *, seed: int | None, sampler: str = "numpy") -> tuple[int, int]:
    """Hits of the event for D and D': ``trials`` releases of each, drawn in ONE call of the release function
    (``noisy_term_histogram`` adds the noise to an array of any shape)."""
    noise = NoiseSource(seed, sampler=sampler)
    hits = []
    for counts in (COUNTS_D, COUNTS_D2):
        noisy = noisy_term_histogram(np.tile(counts, (trials, 1)), epsilon=EPS, terms_per_doc=S, noise=noise)
        hits.append(int(_event(noisy).sum()))
    return hits[0], hits[1]


def _vocabulary_hits(trials: int, *, seed: int) -> tuple[int, int]:
    """Hits of the event through ``privatize_vocabulary`` end to end (N = |V|: every noisy count is released),
    one call per trial, each charging a fresh in-memory ledger."""
    noise = NoiseSource(seed)
    position = {t: i for i, t in enumerate(TERMS)}
    hits = []
    for counts in (COUNTS_D, COUNTS_D2):
        noisy = np.empty((trials, len(TERMS)))
        for k in range(trials):
            pv = privatize_vocabulary(counts, TERMS, epsilon=EPS, terms_per_doc=S, size=len(TERMS),
                                      context=ReleaseContext(noise=noise, ledger=PrivacyLedger()))
            noisy[k, [position[t] for t in pv.terms]] = pv.noisy_counts
        hits.append(int(_event(noisy).sum()))
    return hits[0], hits[1]


def test_histogram_release_is_eps_dp_on_a_full_sensitivity_neighbour() -> None:
    trials = 40_000
    verdict, eps_lb = dp_verdict(*_histogram_hits(trials, seed=11), trials, EPS)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed ε = {EPS}"
    assert eps_lb > 0.6 * EPS  # the event has power: it certifies most of the claimed loss


def test_histogram_release_with_half_the_noise_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    trials = 40_000
    verdict, eps_lb = dp_verdict(*_histogram_hits(trials, seed=11), trials, EPS)
    assert verdict == VIOLATION, f"half the noise went unnoticed: ε lower bound {eps_lb:.3f} ≤ {EPS}"


def test_private_vocabulary_end_to_end_is_eps_dp() -> None:
    trials = 10_000
    verdict, eps_lb = dp_verdict(*_vocabulary_hits(trials, seed=12), trials, EPS)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed ε = {EPS}"
    assert eps_lb > 0.5 * EPS


def test_private_vocabulary_end_to_end_with_half_the_noise_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    trials = 10_000
    verdict, eps_lb = dp_verdict(*_vocabulary_hits(trials, seed=12), trials, EPS)
    assert verdict == VIOLATION, f"half the noise went unnoticed: ε lower bound {eps_lb:.3f} ≤ {EPS}"


@pytest.mark.slow
def test_opendp_discrete_laplace_release_is_eps_dp() -> None:
    """The default sampler (OpenDP's discrete Laplace, unseedable: α = 10⁻⁶ keeps a false alarm negligible)."""
    trials = 40_000
    hits_d, hits_d2 = _histogram_hits(trials, seed=None, sampler="opendp")
    verdict, eps_lb = dp_verdict(hits_d, hits_d2, trials, EPS, alpha=1e-6)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed ε = {EPS}"
    assert eps_lb > 0.5 * EPS
