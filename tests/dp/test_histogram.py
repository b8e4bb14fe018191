"""Exact smoothed DP histogram (docs/DESIGN.md §6): sensitivity 1, noise scale, σ → 0 = unsmoothed.

Exact behaviour pinned (mutation testing, docs/TESTING.md): a recording noise source (adds nothing, keeps the scale) exposes the statistic each release sends through the sampler — the truncation to M, the person weighting, the ledger event's public fields.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_stats import PassThroughNoise
from dpkps_core.dp import contributions, histogram, kde, rff
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.histogram import build_smoothed_histogram_density
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError


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


def test_noise_variance_matches_formula():
    eps = 2.0
    noise = NoiseSource(seed=1)
    draws = np.stack([
        build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=eps, bandwidth=0,
                                         context=ReleaseContext(noise=noise)).noisy_histograms
        for _ in range(3000)
    ])
    assert draws.var(axis=0).mean() == pytest.approx(2 / eps**2, rel=0.06)


def test_zero_bandwidth_equals_unsmoothed_noisy_histogram():
    d0 = build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=1, bandwidth=0,
                                          context=ReleaseContext(noise=NoiseSource(seed=5)))
    assert np.array_equal(d0.scores(), d0.noisy_histograms)
    tiny = build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=1, bandwidth=1e-4,
                                            context=ReleaseContext(noise=NoiseSource(seed=5)))
    assert np.allclose(tiny.scores(), d0.noisy_histograms, atol=1e-12)
    wide = build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=1, bandwidth=2.0,
                                            context=ReleaseContext(noise=NoiseSource(seed=5)))
    assert not np.allclose(wide.scores(), wide.noisy_histograms)


def test_every_entry_of_every_class_gets_noise():
    d = build_smoothed_histogram_density([[0]], ["a"], classes=("a", "b", "c"), embeddings=EMB, epsilon=1,
                                         bandwidth=0, context=ReleaseContext(noise=NoiseSource(seed=2)))
    assert np.count_nonzero(d.noisy_histograms) == 3 * 6


PERSON = "add/remove one person"


def _emb(n: int, d: int = 3, seed: int = 1) -> np.ndarray:
    e = np.random.default_rng(seed).normal(size=(n, d))
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def test_smoothed_histogram_truncates_each_document_to_m_keyphrases() -> None:
    noise = PassThroughNoise()
    dens = histogram.build_smoothed_histogram_density(
        [[0, 1, 2, 3]], ["a"], classes=["a"], embeddings=_emb(4), epsilon=1.0, bandwidth=0.0,
        context=ReleaseContext(noise=noise),
        max_per_doc=2)
    np.testing.assert_allclose(noise.calls[0][0], [[0.5, 0.5, 0.0, 0.0]])
    np.testing.assert_allclose(dens.noisy_histograms, [[0.5, 0.5, 0.0, 0.0]])


def test_smoothed_histogram_weighs_a_persons_documents_to_one_in_total() -> None:
    noise = PassThroughNoise()
    histogram.build_smoothed_histogram_density(
        [[0], [1], [2, 2]], ["a", "a", "b"], classes=["a", "b"], embeddings=_emb(3), epsilon=1.0, bandwidth=0.0,
        context=ReleaseContext(noise=noise), groups=["p", "p", "q"], neighbouring=PERSON)
    stat = noise.calls[0][0]
    np.testing.assert_allclose(stat, [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert noise.calls[0][1] == 1.0  # sensitivity 1 per person → Laplace(1/ε)


def test_smoothed_histogram_event_and_result_carry_the_public_settings() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    dens = histogram.build_smoothed_histogram_density(
        [[0, 1]], ["a"], classes=["a", "b"], embeddings=_emb(3), epsilon=0.5, bandwidth=0.3,
        context=ReleaseContext(noise=noise, ledger=ledger), max_per_doc=4, groups=["p"], neighbouring=PERSON)
    (event,) = ledger.events
    assert event.step == "kde" and event.mechanism == histogram.MECHANISM
    assert event.neighbouring == PERSON
    assert event.epsilon == 0.5 and event.sensitivity == 1.0 and event.noise_scale == 2.0
    assert event.released == ("Laplace-noised keyphrase histograms over all 3 terms of Ṽ, one per class "
                              "(2 classes, parallel composition)")
    assert dict(event.params) == {"classes": 2, "private_vocabulary_size": 3, "bandwidth": 0.3,
                                  "max_keyphrases_per_doc": 4}
    assert (dens.epsilon, dens.bandwidth, dens.noise_scale, dens.classes) == (0.5, 0.3, 2.0, ("a", "b"))
    assert dens.kernel is not None
    np.testing.assert_allclose(dens.class_scores("b"), dens.scores()[1])
    np.testing.assert_allclose(dens.class_scores("a"), dens.noisy_histograms[0] @ dens.kernel)


def test_smoothed_histogram_validators_name_their_argument() -> None:
    kw = dict(classes=["a"], embeddings=_emb(2), context=ReleaseContext(noise=PassThroughNoise()))
    with pytest.raises(ParameterError, match=r"^ε_kde must be a finite number > 0"):
        histogram.build_smoothed_histogram_density([[0]], ["a"], epsilon=0.0, bandwidth=0.0, **kw)
    with pytest.raises(ParameterError, match=r"^σ \(bandwidth\) must be a finite number ≥ 0"):
        histogram.build_smoothed_histogram_density([[0]], ["a"], epsilon=1.0, bandwidth=-1.0, **kw)
