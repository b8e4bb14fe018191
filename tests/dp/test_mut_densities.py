"""Mutation-testing kills for the density mechanisms: dpkps_core.dp.histogram, kde, contributions, rff
(docs/TESTING.md "Mutation testing").

A recording noise source (adds nothing, keeps the scale) exposes the exact statistic each release sends through
the sampler, so the tests pin what docs/DESIGN.md §2.2 / §2.4 and the person-level relation (docs/PRIVACY.md) say it is:
the truncation to M, the person weighting, the ledger event's public fields, the ensemble's member choice.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkps_core.dp import contributions, histogram, kde, rff
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.errors import ParameterError
from dp_stats import PassThroughNoise

PERSON = "add/remove one person"


def _emb(n: int, d: int = 3, seed: int = 1) -> np.ndarray:
    e = np.random.default_rng(seed).normal(size=(n, d))
    return e / np.linalg.norm(e, axis=1, keepdims=True)


# ------------------------------------------------------------------------------------- smoothed histogram

def test_smoothed_histogram_truncates_each_document_to_m_keyphrases() -> None:
    noise = PassThroughNoise()
    dens = histogram.build_smoothed_histogram_density(
        [[0, 1, 2, 3]], ["a"], classes=["a"], embeddings=_emb(4), epsilon=1.0, bandwidth=0.0, noise=noise,
        max_per_doc=2)
    np.testing.assert_allclose(noise.calls[0][0], [[0.5, 0.5, 0.0, 0.0]])
    np.testing.assert_allclose(dens.noisy_histograms, [[0.5, 0.5, 0.0, 0.0]])


def test_smoothed_histogram_weighs_a_persons_documents_to_one_in_total() -> None:
    noise = PassThroughNoise()
    histogram.build_smoothed_histogram_density(
        [[0], [1], [2, 2]], ["a", "a", "b"], classes=["a", "b"], embeddings=_emb(3), epsilon=1.0, bandwidth=0.0,
        noise=noise, groups=["p", "p", "q"], neighbouring=PERSON)
    stat = noise.calls[0][0]
    np.testing.assert_allclose(stat, [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert noise.calls[0][1] == 1.0  # sensitivity 1 per person → Laplace(1/ε)


def test_smoothed_histogram_event_and_result_carry_the_public_settings() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    dens = histogram.build_smoothed_histogram_density(
        [[0, 1]], ["a"], classes=["a", "b"], embeddings=_emb(3), epsilon=0.5, bandwidth=0.3, noise=noise,
        ledger=ledger, max_per_doc=4, groups=["p"], neighbouring=PERSON)
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
    kw = dict(classes=["a"], embeddings=_emb(2), noise=PassThroughNoise())
    with pytest.raises(ParameterError, match=r"^ε_kde must be a finite number > 0"):
        histogram.build_smoothed_histogram_density([[0]], ["a"], epsilon=0.0, bandwidth=0.0, **kw)
    with pytest.raises(ParameterError, match=r"^σ \(bandwidth\) must be a finite number ≥ 0"):
        histogram.build_smoothed_histogram_density([[0]], ["a"], epsilon=1.0, bandwidth=-1.0, **kw)


# --------------------------------------------------------------------------------------- RFF DP-KDE

@pytest.mark.parametrize("kind,steps,members", [
    ("independent", [1, 2, 5], [0, 0, 0]),
    ("iterative-linear", [1, 2, 5], [0, 1, 4]),
    ("iterative-log", [1, 2, 3, 4, 5, 8, 9], [0, 1, 2, 2, 3, 3, 4]),
])
def test_member_for_each_step(kind: str, steps: list[int], members: list[int]) -> None:
    dens = kde.RFFDensity(kind, ("a",), (), 1.0, 4, 9, 1.0)
    assert [dens.member_index_for_step(s) for s in steps] == members


def test_single_term_scores_use_member_zero_with_its_block_scale() -> None:
    feats = rff.RandomFourierFeatures.draw(dim=3, features=8, bandwidth=0.7, rng=np.random.default_rng(3))
    sums = np.random.default_rng(4).normal(size=(2, 8))
    member = kde.RFFMember(feats, 1, 0.5, sums, 1.0, 1.0)
    other = kde.RFFMember(feats, 2, 1.0, -sums, 1.0, 1.0)
    dens = kde.RFFDensity("iterative-linear", ("a", "b"), (member, other), 0.7, 8, 2, 1.0)
    e = _emb(5)
    np.testing.assert_allclose(dens.single_term_scores(e), sums @ feats.transform(e * 0.5).T, rtol=1e-6)


def test_group_weights_give_zero_to_documents_without_contributions() -> None:
    np.testing.assert_array_equal(contributions.group_weights(np.array([2, 0, 4, 0]), None), [0.5, 0.0, 0.25, 0.0])
    np.testing.assert_array_equal(contributions.group_weights(np.array([1, 0, 3]), ["p", "q", "p"]),
                                  [0.25, 0.0, 0.25])


def test_prefix_weights_count_qualifying_documents_once_per_person() -> None:
    kp, labels = [[0, 1], [2], [0, 1, 2], [1, 1]], ["a", "a", "b", "z"]
    np.testing.assert_array_equal(contributions.prefix_weights(kp, labels, ["a", "b"], 2), [1.0, 0.0, 1.0, 0.0])
    w = contributions.prefix_weights(kp, labels, ["a", "b"], 2, groups=["p", "p", "p", "q"])
    np.testing.assert_allclose(w, [0.5, 0.0, 0.5, 0.0])


def test_rff_release_weighs_a_persons_prefixes_and_charges_one_event() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    kp = [[0, 1], [1, 2], [2, 0, 1]]
    dens = kde.build_rff_density(kp, ["a", "a", "b"], classes=["a", "b"], embeddings=_emb(3), kind="iterative-linear",
                                 epsilon=1.0, bandwidth=0.8, features=6, length=2, noise=noise, ledger=ledger,
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
