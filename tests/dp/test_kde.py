"""RFF DP-KDE (docs/DESIGN.md §2.2, §2.4): kernel approximation, sensitivity, noise split, fast GEMM path."""

import numpy as np
import pytest

from dpkps_core.dp.kde import build_rff_density, ensemble_blocks, rff_feature_sums
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rff import SQRT2, RandomFourierFeatures, exact_gaussian_kernel, optimal_features, rff_expected_error
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.sampling import IterativeScorer, reference_extension_scores

D = 16
EMB = HashingEmbedder(dim=D).encode([f"term{i}" for i in range(12)])
RNG = np.random.default_rng(0)
KP = [list(RNG.integers(0, 12, size=RNG.integers(1, 9))) for _ in range(40)]
LABELS = ["x" if i % 2 else "y" for i in range(40)]


def test_rff_without_noise_approximates_exact_kernel_and_improves_with_more_features():
    x = EMB[:6]
    exact = exact_gaussian_kernel(x, x, 0.8)
    errors = []
    for features in (64, 4096):
        rff = RandomFourierFeatures.draw(dim=D, features=features, bandwidth=0.8, rng=np.random.default_rng(1))
        f = rff.transform(x).astype(np.float64)
        errors.append(np.abs(f @ f.T / features - exact).max())
    assert errors[1] < errors[0] / 3 and errors[1] < 0.08


@pytest.mark.parametrize("kind", ["independent", "iterative-linear", "iterative-log"])
def test_one_document_moves_each_member_by_at_most_sqrt2_times_I(kind):
    features = 32
    for blocks, scale in ensemble_blocks(kind, 4):
        rff = RandomFourierFeatures.draw(dim=D * blocks, features=features, bandwidth=0.5, rng=np.random.default_rng(2))
        args = dict(classes=("x", "y"), embeddings=EMB, features=rff, blocks=blocks, block_scale=scale, kind=kind, max_per_doc=4)
        base = rff_feature_sums(KP, LABELS, **args)
        spam = rff_feature_sums(KP + [[3] * 1000], LABELS + ["x"], **args)
        assert np.abs(spam - base).sum() <= SQRT2 * features + 1e-6


# The RFF density's DP guarantee is tested on the released noise itself, every ensemble member, in
# tests/dp/test_mech_rff.py (the test that stood here added its own noise at the reported scale and so could not
# see a release that draws less noise than it reports).


def test_ensemble_splits_epsilon_and_noise_variance_matches():
    eps, features = 2.0, 8
    led = PrivacyLedger()
    noise = NoiseSource(seed=3)
    dens = build_rff_density(KP, LABELS, classes=("x", "y"), embeddings=EMB, kind="iterative-log", epsilon=eps,
                             bandwidth=0.5, features=features, length=5, noise=noise, ledger=led)
    n_members = len(ensemble_blocks("iterative-log", 5))
    assert n_members == 4 and len(dens.members) == 4  # j = 0..⌈log2 5⌉
    assert [m.blocks for m in dens.members] == [1, 2, 4, 5]
    assert led.total_epsilon == pytest.approx(eps)
    assert all(m.noise_scale == pytest.approx(SQRT2 * features * n_members / eps) for m in dens.members)
    samples = NoiseSource(seed=4).laplace(dens.members[0].noise_scale, 200_000)
    assert samples.var() == pytest.approx(2 * dens.members[0].noise_scale**2, rel=0.03)


@pytest.mark.parametrize("kind,length", [("iterative-log", 7), ("iterative-linear", 4)])
def test_fast_gemm_path_matches_padded_vector_computation(kind, length):
    dens = build_rff_density(KP, LABELS, classes=("x", "y"), embeddings=EMB, kind=kind, epsilon=5, bandwidth=0.7,
                             features=64, length=length, noise=NoiseSource(seed=6))
    scorer = IterativeScorer(dens, EMB)
    rng = np.random.default_rng(1)
    for prefix_len in range(length):
        prefixes = rng.integers(0, 12, size=(3, prefix_len))
        fast = scorer.scores(prefixes, 1)
        for row in range(3):
            slow = reference_extension_scores(dens, EMB, prefixes[row].tolist(), 1)
            np.testing.assert_allclose(fast[row], slow, rtol=2e-3, atol=2e-3 * np.abs(slow).max())


def test_feature_choice_and_expected_error():
    assert optimal_features(n_documents=400, epsilon=5) == 1000
    assert optimal_features(n_documents=1, epsilon=0.1) == 16
    err = rff_expected_error(n_documents=400, epsilon=5, features=1000)
    assert err["rff_error"] == pytest.approx(1 / np.sqrt(1000))
    assert err["noise_error"] == pytest.approx(2 * np.sqrt(1000) / 2000)
