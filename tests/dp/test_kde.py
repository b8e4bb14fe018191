"""RFF DP-KDE (docs/DESIGN.md §2.2, §2.4): kernel approximation, sensitivity, noise split, fast GEMM path.

Exact behaviour pinned (mutation testing) for the density mechanisms: dpkps_core.dp.histogram, kde, contributions, rff
(docs/TESTING.md "Mutation testing").

A recording noise source (adds nothing, keeps the scale) exposes the exact statistic each release sends through
the sampler, so the tests pin what docs/DESIGN.md §2.2 / §2.4 and the person-level relation (docs/PRIVACY.md) say it is:
the truncation to M, the person weighting, the ledger event's public fields, the ensemble's member choice.

Exact behaviour pinned (mutation testing) for dpkps_core.dp.kde (docs/TESTING.md "Mutation testing").

Pins what docs/DESIGN.md §2.2 / §2.4 and [DP-KPS] Appendix B say the RFF DP-KDE releases: the ensemble layout
(blocks, √u) of each kind, the statistic Σ_docs φ(doc) of the independent method (mean of f over a document's at
most M keyphrases) and of a sequence member (f of the first b blocks, documents with fewer left out, a person's
documents weighted to 1), chunked sums that cover every row, the one ledger event charged for the whole ensemble,
the density's public fields, the progress reports and the refusals naming their parameter.

A recording noise source (adds nothing, keeps the scale) exposes the exact statistic each member sends through the
sampler, so the expected values are recomputed from the member's own (public) random features.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_stats import PassThroughNoise
from dpkps_core.dp import contributions, histogram, kde, rff
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.kde import build_rff_density, ensemble_blocks, rff_feature_sums
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rff import RandomFourierFeatures, SQRT2, exact_gaussian_kernel, optimal_features, rff_expected_error
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.method.sampling import IterativeScorer, reference_extension_scores


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


def test_ensemble_splits_epsilon_and_noise_variance_matches():
    eps, features = 2.0, 8
    led = PrivacyLedger()
    noise = NoiseSource(seed=3)
    dens = build_rff_density(KP, LABELS, classes=("x", "y"), embeddings=EMB, kind="iterative-log", epsilon=eps,
                             bandwidth=0.5, features=features, length=5,
                             context=ReleaseContext(noise=noise, ledger=led))
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
                             features=64, length=length, context=ReleaseContext(noise=NoiseSource(seed=6)))
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


PERSON = "add/remove one person"


def _emb(n: int, d: int = 3, seed: int = 1) -> np.ndarray:
    e = np.random.default_rng(seed).normal(size=(n, d))
    return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)


def _phi(member: kde.RFFMember, emb: np.ndarray, doc: list[int]) -> np.ndarray:
    """f(concat_b(√u · e[doc[:b]])) of one document for ``member`` (docs/DESIGN.md §2.4)."""
    z = np.concatenate([emb[t] for t in doc[:member.blocks]]) * member.block_scale
    return member.features.transform(z[None])[0].astype(np.float64)


def _features(dim: int, n: int = 4, seed: int = 5) -> RandomFourierFeatures:
    return RandomFourierFeatures.draw(dim=dim, features=n, bandwidth=0.9, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("kind,length,layout", [
    ("independent", 4, [(1, 1.0)]),
    ("iterative-linear", 3, [(1, 1.0), (2, 1 / math.sqrt(2)), (3, 1 / math.sqrt(3))]),
    ("iterative-log", 1, [(1, 1.0)]),
    ("iterative-log", 2, [(1, 1.0), (2, 1 / math.sqrt(2))]),
    ("iterative-log", 5, [(1, 1.0), (2, 1 / math.sqrt(2)), (4, 0.5), (5, 1 / math.sqrt(8))]),
])
def test_ensemble_layout_is_appendix_b(kind: str, length: int, layout: list[tuple[int, float]]) -> None:
    """Linear: member i over i blocks, u = 1/i; log: member j over min(2^j, L) blocks, u = 1/2^j (√u returned)."""
    got = kde.ensemble_blocks(kind, length)
    assert [b for b, _ in got] == [b for b, _ in layout]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in layout], rtol=1e-12)


def test_unknown_kind_is_refused_with_the_choices() -> None:
    with pytest.raises(ParameterError, match=r"^Unknown density kind 'sideways'; choose one of independent, "
                                             r"iterative-linear, iterative-log\.$"):
        kde.ensemble_blocks("sideways", 3)


def test_independent_statistic_is_the_mean_feature_of_at_most_m_keyphrases() -> None:
    """Independent method: φ(doc) = mean of f(x) over the document's first M keyphrases (docs/DESIGN.md §2.2)."""
    emb, noise = _emb(3), PassThroughNoise()
    dens = kde.build_rff_density([[0, 1, 2], [2]], ["a", "b"], classes=["a", "b"], embeddings=emb, kind="independent",
                                 epsilon=1.0, bandwidth=0.8, features=5, length=3, context=ReleaseContext(noise=noise),
                                 max_per_doc=2)
    (m,) = dens.members
    want = np.stack([(_phi(m, emb, [0]) + _phi(m, emb, [1])) / 2, _phi(m, emb, [2])])
    np.testing.assert_allclose(noise.calls[0][0], want, rtol=1e-5, atol=1e-6)


def test_independent_statistic_weighs_a_persons_documents_to_one() -> None:
    emb = _emb(3)
    feats = _features(3)
    got = kde.rff_feature_sums([[0], [1, 2], [2]], ["a", "a", "b"], classes=["a", "b"], embeddings=emb, features=feats,
                               blocks=1, block_scale=1.0, kind="independent", max_per_doc=3, groups=["p", "p", "q"])
    f = feats.transform(emb).astype(np.float64)
    # person p: 3 occurrences over two documents, each 1/3; person q: one occurrence, weight 1
    np.testing.assert_allclose(got, np.stack([(f[0] + f[1] + f[2]) / 3, f[2]]), rtol=1e-6, atol=1e-7)


def test_a_member_leaves_out_keyphrases_beyond_m() -> None:
    """M < L: the member over L blocks gets no document (each is truncated to M keyphrases first)."""
    emb, noise = _emb(3), PassThroughNoise()
    dens = kde.build_rff_density([[0, 1, 2]], ["a"], classes=["a"], embeddings=emb, kind="iterative-linear",
                                 epsilon=3.0, bandwidth=0.8, features=4, length=3, context=ReleaseContext(noise=noise),
                                 max_per_doc=2)
    sums = [c[0] for c in noise.calls]
    np.testing.assert_allclose(sums[0], _phi(dens.members[0], emb, [0])[None], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sums[1], _phi(dens.members[1], emb, [0, 1])[None], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(sums[2], np.zeros((1, 4)))


def test_person_weighted_member_skips_short_documents_and_empty_classes() -> None:
    """A document with fewer than b keyphrases gets weight 0 in that member; a declared class without a
    qualifying document gets a zero row (its release is noise only, docs/DESIGN.md §2)."""
    emb = _emb(2)
    feats = _features(6)
    got = kde.rff_feature_sums([[0], [0, 1]], ["a", "a"], classes=["a", "b"], embeddings=emb, features=feats, blocks=2,
                               block_scale=0.5, kind="iterative-linear", max_per_doc=2, groups=["p", "q"])
    z = np.concatenate([emb[0], emb[1]]) * np.float32(0.5)
    np.testing.assert_allclose(got, np.stack([feats.transform(z[None])[0], np.zeros(4)]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("groups", [False, True])
def test_member_sums_cover_every_chunk_of_documents(groups: bool) -> None:
    """More documents than one GEMM chunk (kde._CHUNK rows): every chunk is added to the sum."""
    n, v = 5000, 7
    assert n > kde._CHUNK
    emb = _emb(v)
    feats = _features(6)
    kp = [[i % v, (3 * i + 1) % v] for i in range(n)]
    got = kde.rff_feature_sums(kp, ["a"] * n, classes=["a"], embeddings=emb, features=feats, blocks=2,
                               block_scale=1 / math.sqrt(2), kind="iterative-linear", max_per_doc=2,
                               groups=[f"p{i}" for i in range(n)] if groups else None)
    z = np.concatenate([emb[[k[0] for k in kp]], emb[[k[1] for k in kp]]], axis=1) * (1 / math.sqrt(2))
    want = feats.transform(z).astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(got[0], want, rtol=1e-5)


def test_rff_release_charges_one_event_with_its_public_settings() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    kde.build_rff_density([[0, 1, 2]], ["a"], classes=["a", "b"], embeddings=_emb(3), kind="iterative-log",
                          epsilon=1.5, bandwidth=0.7, features=4, length=3,
                          context=ReleaseContext(noise=noise, ledger=ledger), max_per_doc=2)
    (event,) = ledger.events
    d = event.to_dict()
    scale = SQRT2 * 4 / (1.5 / 3)  # three members (1, 2, 3 blocks), ε_kde/3 each
    assert (d["mechanism"], d["step"], d["epsilon"], d["neighbouring"], d["delta"]) == (
        kde.MECHANISM, "kde", 1.5, ADD_REMOVE_ONE_DOCUMENT, 0.0)
    assert d["sensitivity"] == pytest.approx(SQRT2 * 4 * 3) and d["noise_scale"] == pytest.approx(scale)
    assert d["released"] == ("Laplace-noised sums of 4 random Fourier features per class (2 classes, parallel "
                             "composition), 3 ensemble member(s) (iterative-log)")
    assert d["params"] == {"kind": "iterative-log", "features": 4, "bandwidth": 0.7, "members": 3,
                           "member_blocks": [1, 2, 3], "length": 3, "max_keyphrases_per_doc": 2, "classes": 2}
    assert [s for _, s in noise.calls] == pytest.approx([scale] * 3)


def test_rff_release_defaults_m_to_l_and_names_the_relation() -> None:
    ledger = PrivacyLedger()
    kde.build_rff_density([[0, 1]], ["a"], classes=["a"], embeddings=_emb(2), kind="independent", epsilon=1.0,
                          bandwidth=1.0, features=2, length=2,
                          context=ReleaseContext(noise=PassThroughNoise(), ledger=ledger), groups=["p"],
                          neighbouring=PERSON)
    (event,) = ledger.events
    assert event.to_dict()["params"]["max_keyphrases_per_doc"] == 2 and event.neighbouring == PERSON


def test_rff_density_carries_its_public_fields_and_reports_progress() -> None:
    progress: list[tuple[float, str]] = []
    dens = kde.build_rff_density([[0, 1]], ["a"], classes=("a", "b"), embeddings=_emb(2), kind="iterative-linear",
                                 epsilon=2.0, bandwidth=0.6, features=3, length=2,
                                 context=ReleaseContext(noise=PassThroughNoise()),
                                 progress=lambda f, msg: progress.append((f, msg)))
    assert (dens.kind, dens.classes, dens.bandwidth, dens.n_features, dens.length, dens.epsilon) == (
        "iterative-linear", ("a", "b"), 0.6, 3, 2, 2.0)
    assert [(m.blocks, m.epsilon) for m in dens.members] == [(1, 1.0), (2, 1.0)]
    assert [m.noise_scale for m in dens.members] == pytest.approx([SQRT2 * 3] * 2)
    assert progress == [(0.5, "DP-KDE member 1/2 (1 block(s))"), (1.0, "DP-KDE member 2/2 (2 block(s))")]


@pytest.mark.parametrize("kwargs,message", [
    (dict(epsilon=0.0), r"^ε_kde must be a finite number > 0"),
    (dict(bandwidth=0.0), r"^σ \(bandwidth\) must be a finite number > 0"),
    (dict(features=0), r"^I \(random features\) must be ≥ 1, got 0\.$"),
    (dict(length=0), r"^L \(sequence length\) must be ≥ 1, got 0\.$"),
    (dict(max_per_doc=0), r"^M \(keyphrases per document\) must be ≥ 1, got 0\.$"),
])
def test_rff_release_refusals_name_their_parameter(kwargs: dict[str, float], message: str) -> None:
    settings: dict[str, object] = dict(epsilon=1.0, bandwidth=1.0, features=2, length=2)
    settings.update(kwargs)
    ledger = PrivacyLedger()
    with pytest.raises(ParameterError, match=message):
        kde.build_rff_density([[0]], ["a"], classes=["a"], embeddings=_emb(1), kind="independent",
                              context=ReleaseContext(noise=PassThroughNoise(), ledger=ledger),
                              **settings)  # type: ignore[arg-type]
    assert len(ledger) == 0  # refused before anything is charged
