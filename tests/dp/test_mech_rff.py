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

The RFF phases √2·ωᵀz/σ + β (docs/DESIGN.md §2.2) are pinned for their value and for running the GEMM in the features' dtype.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from dp_stats import CONSISTENT, PassThroughNoise, VIOLATION, dp_verdict, scale_noise
from dpkps_core.dp import accounting as acc, contributions, histogram, kde, rff
from dpkps_core.dp.kde import build_rff_density, ensemble_blocks
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rff import RandomFourierFeatures, SQRT2
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError


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
                                        context=ReleaseContext(noise=noise, ledger=PrivacyLedger()))
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
                                    epsilon=1e9, bandwidth=1.0, features=FEATURES, length=length,
                                    context=ReleaseContext(noise=noise))
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


def test_rff_phases_value_and_dtype() -> None:
    """phases(z) = √2·ωᵀz/σ + β (docs/DESIGN.md §2.2), computed in the features' dtype: float32 features turn float64
    (or integer) embeddings into float32 phases, as one float32 GEMM; float64 features keep float64."""
    rng = np.random.default_rng(20261124)
    z64 = rng.standard_normal((7, 5))
    f32 = RandomFourierFeatures.draw(dim=5, features=11, bandwidth=0.8, rng=np.random.default_rng(3))
    assert f32.omega.dtype == np.float32
    out = f32.phases(z64)
    assert out.dtype == np.float32 and out.shape == (7, 11)
    ref = (z64.astype(np.float32) @ f32.omega.T) * np.float32(math.sqrt(2.0) / 0.8) + f32.beta
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    exact = math.sqrt(2.0) / 0.8 * (z64 @ f32.omega.astype(np.float64).T) + f32.beta.astype(np.float64)
    np.testing.assert_allclose(out, exact, rtol=1e-4, atol=1e-4)
    assert f32.phases(np.arange(10).reshape(2, 5)).dtype == np.float32
    assert f32.phases(z64.tolist()).dtype == np.float32

    f64 = RandomFourierFeatures.draw(dim=5, features=11, bandwidth=0.8, rng=np.random.default_rng(3),
                                     dtype=np.float64)
    out64 = f64.phases(z64.astype(np.float32))
    assert out64.dtype == np.float64
    np.testing.assert_allclose(out64, math.sqrt(2.0) / 0.8 * (z64.astype(np.float32).astype(np.float64)
                                                              @ f64.omega.T) + f64.beta, rtol=1e-12)


PERSON = "add/remove one person"


def _emb(n: int, d: int = 3, seed: int = 1) -> np.ndarray:
    e = np.random.default_rng(seed).normal(size=(n, d))
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def test_rff_release_weighs_a_persons_prefixes_and_charges_one_event() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    kp = [[0, 1], [1, 2], [2, 0, 1]]
    dens = kde.build_rff_density(kp, ["a", "a", "b"], classes=["a", "b"], embeddings=_emb(3), kind="iterative-linear",
                                 epsilon=1.0, bandwidth=0.8, features=6, length=2,
                                 context=ReleaseContext(noise=noise, ledger=ledger),
                                 groups=["p", "p", "q"], neighbouring=PERSON)
    (event,) = ledger.events
    assert event.neighbouring == PERSON and event.sensitivity == pytest.approx(math.sqrt(2) * 6 * 2)
    assert [m.blocks for m in dens.members] == [1, 2]
    # member 2 (two blocks): person p's two documents weigh 1/2 each, q's one document weighs 1
    m = dens.members[1]
    e = _emb(3).astype(np.float32)
    z = lambda doc: np.concatenate([e[doc[0]], e[doc[1]]]) * m.block_scale  # noqa: E731
    want_a = 0.5 * m.features.transform(z(kp[0])[None])[0] + 0.5 * m.features.transform(z(kp[1])[None])[0]
    want_b = m.features.transform(z(kp[2])[None])[0]
    np.testing.assert_allclose(noise.calls[1][0], np.stack([want_a, want_b]), rtol=1e-5, atol=1e-6)


def test_rff_draw_validates_and_draws_the_documented_features() -> None:
    f = rff.RandomFourierFeatures.draw(dim=4, features=1000, bandwidth=2.0, rng=np.random.default_rng(0))
    assert f.omega.shape == (1000, 4) and f.beta.shape == (1000,) and f.omega.dtype == np.float32
    assert f.bandwidth == 2.0 and f.projection_scale == pytest.approx(math.sqrt(2) / 2.0)
    assert 0.0 <= f.beta.min() and f.beta.max() < 2 * np.pi and f.beta.mean() == pytest.approx(np.pi, rel=0.1)
    assert abs(float(f.omega.mean())) < 0.1 and float(f.omega.std()) == pytest.approx(1.0, rel=0.1)
    assert rff.RandomFourierFeatures.draw(dim=1, features=1, bandwidth=1.0, rng=np.random.default_rng(0),
                                          dtype=np.float64).omega.dtype == np.float64
    for kwargs, msg in [(dict(dim=0, features=1, bandwidth=1.0), r"^embedding dimension must be ≥ 1"),
                        (dict(dim=1, features=0, bandwidth=1.0), r"^I \(random features\) must be ≥ 1"),
                        (dict(dim=1, features=1, bandwidth=0.0), r"^σ \(bandwidth\) must be a finite number > 0")]:
        with pytest.raises(ParameterError, match=msg):
            rff.RandomFourierFeatures.draw(rng=np.random.default_rng(0), **kwargs)


def test_rff_error_model_and_feature_choice() -> None:
    err = rff.rff_expected_error(n_documents=100, epsilon=2.0, features=400)
    assert err == {"rff_error": pytest.approx(0.05), "noise_error": pytest.approx(2 * 20 / 200),
                   "total_error": pytest.approx(0.05 + 0.2)}
    assert rff.rff_expected_error(n_documents=0, epsilon=1.0, features=4)["noise_error"] == pytest.approx(4.0)
    assert rff.optimal_features(n_documents=1000, epsilon=1.0) == 500
    assert rff.optimal_features(n_documents=0.5, epsilon=1.0, minimum=1) == 1  # n clamped to 1, I clipped up to the minimum
    assert rff.optimal_features(n_documents=0.5, epsilon=4.0, minimum=1) == 2  # n clamped up to 1, not more
    assert rff.optimal_features(n_documents=10, epsilon=1.0) == 16
    assert rff.optimal_features(n_documents=10**9, epsilon=1.0) == 20_000
