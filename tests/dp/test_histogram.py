"""Exact smoothed DP histogram (docs/DESIGN.md §6): sensitivity 1, noise scale, σ → 0 = unsmoothed."""

import numpy as np
import pytest

from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.histogram import build_smoothed_histogram_density
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder

CLASSES = ("a", "b")
KP = [[0, 1, 1], [2], [3, 0], [4, 4, 4, 1]]
LABELS = ["a", "a", "b", "b"]
EMB = HashingEmbedder(dim=16).encode([f"t{i}" for i in range(6)])


def test_sensitivity_is_one_even_for_a_spammy_document():
    base = class_keyphrase_histograms(KP, LABELS, CLASSES, 6, max_per_doc=10)
    for doc in ([5] * 1000, [0, 1, 2, 3, 4, 5], [2]):
        with_doc = class_keyphrase_histograms(KP + [doc], LABELS + ["b"], CLASSES, 6, max_per_doc=10)
        assert np.abs(with_doc - base).sum() == pytest.approx(1.0)
    empty = class_keyphrase_histograms(KP + [[]], LABELS + ["a"], CLASSES, 6)
    assert np.array_equal(empty, base)


# The smoothed histogram's DP guarantee is tested on the released noise itself in tests/dp/test_mech_histogram.py
# (the test that stood here added its own noise at the reported scale).


def test_noise_variance_matches_formula():
    eps = 2.0
    noise = NoiseSource(seed=1)
    draws = np.stack([
        build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=eps, bandwidth=0,
                                         noise=noise).noisy_histograms
        for _ in range(3000)
    ])
    assert draws.var(axis=0).mean() == pytest.approx(2 / eps**2, rel=0.06)


def test_zero_bandwidth_equals_unsmoothed_noisy_histogram():
    d0 = build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=1, bandwidth=0,
                                          noise=NoiseSource(seed=5))
    assert np.array_equal(d0.scores(), d0.noisy_histograms)
    tiny = build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=1, bandwidth=1e-4,
                                            noise=NoiseSource(seed=5))
    assert np.allclose(tiny.scores(), d0.noisy_histograms, atol=1e-12)
    wide = build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=1, bandwidth=2.0,
                                            noise=NoiseSource(seed=5))
    assert not np.allclose(wide.scores(), wide.noisy_histograms)


def test_every_entry_of_every_class_gets_noise():
    d = build_smoothed_histogram_density([[0]], ["a"], classes=("a", "b", "c"), embeddings=EMB, epsilon=1,
                                         bandwidth=0, noise=NoiseSource(seed=2))
    assert np.count_nonzero(d.noisy_histograms) == 3 * 6
