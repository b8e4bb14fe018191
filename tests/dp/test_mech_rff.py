"""Statistical DP test of the RFF DP-KDE, every member of every ensemble (docs/DESIGN.md §2.2, §2.4; dp/kde.py).

The release, per member j of J: F̃ = Σ_docs φ(doc) + Laplace(√2·I·J/ε_kde) per class and feature, with
φ ∈ [−√2, √2]^I (L1 sensitivity √2·I per member, ε_kde/J each). The random features are public randomness, so the
guarantee must hold for EVERY draw of them; the sensitivity √2·I is reached only when every feature of the added
document sits at a peak of its cosine. The test therefore fixes the worst-case draw (ω = 0, β = 0: every
f_i ≡ √2), so one added document moves each member's I sums of its class by √2 each — the full stated
sensitivity — while ``build_rff_density`` still runs end to end with its own seeded noise. (With random
features a document moves the sums by ≈ (2/π)·√2·I only, which is why a test on real features could not tell
half the noise from the right noise.)

Event per member: all I sums of the document's class above their D' values plus a margin (the noise's upper tail
on both sides): likelihood ratio exactly e^{ε_kde/J}. Each member is judged against its own ε_kde/J, so halving
the noise of ANY one member is a violation of that member.
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_stats import CONSISTENT, VIOLATION, dp_verdict, scale_noise
from dpkps_core.dp.kde import build_rff_density, ensemble_blocks
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rff import SQRT2, RandomFourierFeatures
from dpkps_core.dp.rng import NoiseSource

FEATURES = 2
CLASSES = ("a", "b")
EMBEDDINGS = np.eye(5)[:, :3]  # |Ṽ| = 5 terms in 3 dimensions (the worst-case features ignore them)
KEYPHRASES_D = [[0, 1, 2, 3], [1, 2], [4], [0, 1, 2, 3]]
LABELS_D = ["a", "a", "b", "b"]
ADDED = ([4, 3, 2, 1], "a")  # L keyphrases: qualifies for every member
MARGIN = 0.05  # just above the D' sums: the largest event in the noise's upper tail on both sides
KINDS = [("independent", 4), ("iterative-linear", 3), ("iterative-log", 4)]


@pytest.fixture
def worst_case_features(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every feature drawn as ω = 0, β = 0, so f_i(z) = √2 for every input: φ(doc) = (√2, …, √2)."""

    def draw(cls, *, dim, features, bandwidth, rng, dtype=np.float32):  # type: ignore[no-untyped-def]
        return cls(omega=np.zeros((features, dim), dtype=dtype), beta=np.zeros(features, dtype=dtype),
                   bandwidth=bandwidth)

    monkeypatch.setattr(RandomFourierFeatures, "draw", classmethod(draw))


def _qualifying(keyphrases: list[list[int]], labels: list[str], blocks: int, length: int) -> np.ndarray:
    """Per class, how many documents take part in a member of ``blocks`` blocks (≥ blocks keyphrases of ≤ L)."""
    return np.array([sum(1 for k, lab in zip(keyphrases, labels) if lab == c and min(len(k), length) >= blocks)
                     for c in CLASSES], dtype=np.float64)


def _member_hits(kind: str, length: int, trials: int, *, seed: int) -> tuple[list[int], list[int], float]:
    """Per member, the event's hits for D and D' over ``trials`` runs of ``build_rff_density``; and ε_kde."""
    layout = ensemble_blocks(kind, length)
    epsilon = float(len(layout))  # ε_kde/J = 1 per member
    noise = NoiseSource(seed)
    d = (KEYPHRASES_D, LABELS_D)
    d2 = (KEYPHRASES_D + [ADDED[0]], LABELS_D + [ADDED[1]])
    # worst-case features: each qualifying document adds √2 to every feature sum of its class
    thresholds = [SQRT2 * _qualifying(*d2, blocks, length)[0] + MARGIN for blocks, _ in layout]
    hits: list[list[int]] = []
    for keyphrases, labels in (d, d2):
        counts = [0] * len(layout)
        for _ in range(trials):
            density = build_rff_density(keyphrases, labels, classes=CLASSES, embeddings=EMBEDDINGS, kind=kind,
                                        epsilon=epsilon, bandwidth=1.0, features=FEATURES, length=length,
                                        noise=noise, ledger=PrivacyLedger())
            for j, member in enumerate(density.members):
                counts[j] += bool((member.noisy_sums[0] > thresholds[j]).all())
        hits.append(counts)
    return hits[0], hits[1], epsilon


@pytest.mark.usefixtures("worst_case_features")
@pytest.mark.parametrize("kind, length", KINDS)
def test_every_member_moves_by_the_full_sensitivity(kind: str, length: int) -> None:
    noise = NoiseSource(0)
    sums = []
    for keyphrases, labels in ((KEYPHRASES_D, LABELS_D), (KEYPHRASES_D + [ADDED[0]], LABELS_D + [ADDED[1]])):
        density = build_rff_density(keyphrases, labels, classes=CLASSES, embeddings=EMBEDDINGS, kind=kind,
                                    epsilon=1e9, bandwidth=1.0, features=FEATURES, length=length, noise=noise)
        sums.append(np.stack([m.noisy_sums for m in density.members]))
    moved = np.abs(sums[1] - sums[0]).sum(axis=(1, 2))  # L1 move per member (noise ≈ 0 at ε = 10⁹)
    assert moved == pytest.approx(np.full(len(ensemble_blocks(kind, length)), SQRT2 * FEATURES), abs=1e-6)


@pytest.mark.usefixtures("worst_case_features")
@pytest.mark.parametrize("kind, length", KINDS)
def test_every_member_is_eps_over_j_dp(kind: str, length: int) -> None:
    trials = 2_000
    hits_d, hits_d2, epsilon = _member_hits(kind, length, trials, seed=41)
    per_member = epsilon / len(hits_d)
    for j, (h, h2) in enumerate(zip(hits_d, hits_d2)):
        verdict, eps_lb = dp_verdict(h, h2, trials, per_member)
        assert verdict == CONSISTENT, f"{kind} member {j}: ε lower bound {eps_lb:.3f} > ε_kde/J = {per_member}"
        assert eps_lb > 0.4 * per_member, f"{kind} member {j}: the event has no power ({eps_lb:.3f})"


@pytest.mark.usefixtures("worst_case_features")
@pytest.mark.parametrize("kind, length", KINDS)
def test_every_member_with_half_the_noise_is_flagged(kind: str, length: int, monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    trials = 2_000
    hits_d, hits_d2, epsilon = _member_hits(kind, length, trials, seed=41)
    per_member = epsilon / len(hits_d)
    for j, (h, h2) in enumerate(zip(hits_d, hits_d2)):
        verdict, eps_lb = dp_verdict(h, h2, trials, per_member)
        assert verdict == VIOLATION, f"{kind} member {j}: half the noise went unnoticed ({eps_lb:.3f})"
