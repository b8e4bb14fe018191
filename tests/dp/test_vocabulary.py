"""ε_voc mechanism (docs/DESIGN.md §2.1): statistical DP test, noise scale, zero-count terms, sensitivity S.

Exact behaviour pinned (mutation testing) for dpkps_core.dp.vocabulary and dp.validation (docs/TESTING.md "Mutation testing").

Pins the ε_voc release of docs/DESIGN.md §2.1 beyond its DP guarantee: the order of Ṽ (decreasing noisy count), the
noise-floor rule's exact threshold (floor_fraction × (S/ε)·ln(|V|/2), docs/DESIGN.md §6), the event's public fields, the
released object's fields and serialisation, and the messages of the public-settings refusals (docs/DESIGN.md §2.0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dp_stats import assert_ratio_within, tail_event
from dpkps_core.dp import vocabulary as voc
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_delta
from dpkps_core.dp.vocabulary import noise_floor, noisy_term_histogram, privatize_vocabulary, select_top_terms
from dpkps_core.errors import ParameterError, PrivacyBudgetError, VocabularyError
from dpkps_core.method.matching import TermMatcher


TERMS = ["goal", "match", "bank", "shares", "phone", "chip", "rain", "snow"]


BASE_DOCS = ["goal match goal", "bank shares", "phone chip phone", "goal bank", "match"]


EXTRA_DOC = "rain snow goal"  # the neighbouring document: S = 3 distinct terms


def _counts(docs, s=3):
    return TermMatcher(TERMS).counts_first_distinct(docs, s)


def test_empirical_privacy_ratio_on_neighbouring_corpora():
    eps, s, trials = 1.0, 3, 200_000
    c_d = _counts(BASE_DOCS, s).astype(float)
    c_d2 = _counts(BASE_DOCS + [EXTRA_DOC], s).astype(float)
    changed = np.flatnonzero(c_d2 != c_d)
    assert changed.size == 3 and np.abs(c_d2 - c_d).sum() == 3
    noise = NoiseSource(seed=123)
    out_d = noisy_term_histogram(np.broadcast_to(c_d, (trials, len(TERMS))), epsilon=eps, terms_per_doc=s, noise=noise)
    out_d2 = noisy_term_histogram(np.broadcast_to(c_d2, (trials, len(TERMS))), epsilon=eps, terms_per_doc=s, noise=noise)
    # The tightest event for Laplace: every changed coordinate above its larger value (ratio e^{ε/S} each).
    thresholds = c_d2[changed]
    hits_d = tail_event(out_d, changed, thresholds).sum()
    hits_d2 = tail_event(out_d2, changed, thresholds).sum()
    ratio = assert_ratio_within(hits_d2, hits_d, trials, eps)
    # ... and the bound is tight: the noise is not larger than stated (ratio ≈ e^ε).
    assert ratio == pytest.approx(math.e ** eps, rel=0.1)


def test_noise_scale_matches_formula():
    eps, s = 2.0, 10
    noisy = noisy_term_histogram(np.zeros(400_000), epsilon=eps, terms_per_doc=s, noise=NoiseSource(seed=1))
    b = s / eps
    assert noisy.var() == pytest.approx(2 * b * b, rel=0.02)
    assert np.mean(np.abs(noisy)) == pytest.approx(b, rel=0.02)


def test_zero_count_terms_can_enter_private_vocabulary():
    terms = [f"t{i}" for i in range(2000)]
    counts = np.zeros(len(terms), dtype=int)
    counts[:5] = 3  # only 5 terms occur
    pv = privatize_vocabulary(counts, terms, epsilon=0.5, terms_per_doc=10, size=50,
                              context=ReleaseContext(noise=NoiseSource(seed=0)))
    assert len(pv) == 50
    assert sum(t not in {"t0", "t1", "t2", "t3", "t4"} for t in pv.terms) >= 40


def test_repeated_term_moves_histogram_by_at_most_s():
    s = 3
    spam = " ".join(["goal"] * 1000) + " rain snow bank phone chip"
    diff = _counts(BASE_DOCS + [spam], s) - _counts(BASE_DOCS, s)
    assert diff.min() >= 0 and diff.sum() <= s and diff[TERMS.index("goal")] == 1


def test_records_frozen_ledger_event_and_respects_cap():
    counts = _counts(BASE_DOCS)
    ledger = PrivacyLedger(cap=1.5)
    pv = privatize_vocabulary(counts, TERMS, epsilon=1.0, terms_per_doc=3, size=4,
                              context=ReleaseContext(noise=NoiseSource(seed=0), ledger=ledger))
    (event,) = ledger.events
    assert event.step == "vocabulary" and event.sensitivity == 3 and event.noise_scale == pytest.approx(3.0)
    assert event.neighbouring == "add/remove one document" and len(pv) == 4
    with pytest.raises(PrivacyBudgetError):
        privatize_vocabulary(counts, TERMS, epsilon=1.0, terms_per_doc=3, size=4,
                             context=ReleaseContext(noise=NoiseSource(seed=0), ledger=ledger))
    assert ledger.total_epsilon == 1.0


@pytest.mark.parametrize("eps", [0, -2, float("nan")])
def test_rejects_bad_epsilon(eps):
    with pytest.raises(ParameterError, match="ε_voc"):
        privatize_vocabulary(np.ones(3), ["a", "b", "c"], epsilon=eps, context=ReleaseContext(noise=NoiseSource()))


def test_noise_floor_rule_uses_only_noisy_counts_and_public_inputs():
    rng = np.random.default_rng(0)
    noisy = rng.laplace(0, 10, 5000)
    noisy[:20] += 500
    floor = noise_floor(epsilon=1, terms_per_doc=10, vocabulary_size=5000)
    kept = select_top_terms(noisy, size=100, rule="noise-floor", floor=floor)
    assert set(kept.tolist()) >= set(range(20)) and len(kept) < 100
    assert (noisy[kept] >= floor).all()


def test_os_entropy_by_default_and_seed_policy():
    a = NoiseSource().laplace(1.0, 5)
    b = NoiseSource().laplace(1.0, 5)
    assert not np.allclose(a, b)
    assert NoiseSource().policy == "os-entropy"
    assert NoiseSource(seed=3).policy == "seeded-demo-not-for-release"
    assert np.allclose(NoiseSource(seed=3).laplace(1.0, 5), NoiseSource(seed=3).laplace(1.0, 5))


def test_opendp_sampler_has_the_stated_scale():
    noisy = NoiseSource(sampler="opendp").laplace(4.0, 20_000, integer_valued=True)
    assert np.all(noisy == np.round(noisy))
    assert noisy.var() == pytest.approx(2 * 16, rel=0.08)


@settings(max_examples=60, deadline=None)
@given(
    counts_a=st.lists(st.integers(0, 500), min_size=30, max_size=30),
    counts_b=st.lists(st.integers(0, 500), min_size=30, max_size=30),
    size=st.integers(1, 30),
    rule=st.sampled_from(["top-n", "noise-floor"]),
    eps=st.floats(0.1, 20),
)
def test_kept_set_depends_only_on_noisy_counts_and_public_inputs(counts_a, counts_b, size, rule, eps):
    """Property (issue 8): whatever the private counts, the same noisy release gives the same Ṽ under every rule."""
    import dpkps_core.dp.vocabulary as vocab_mod

    terms = [f"w{i}" for i in range(30)]
    noisy = np.random.default_rng(size).laplace(0, 10, 30) + np.arange(30)
    original = vocab_mod.noisy_term_histogram
    vocab_mod.noisy_term_histogram = lambda counts, **kw: noisy.copy()
    try:
        picks = []
        for counts in (counts_a, counts_b):
            try:
                pv = privatize_vocabulary(np.array(counts), terms, epsilon=eps, terms_per_doc=5, size=size,
                                          context=ReleaseContext(noise=NoiseSource(seed=0)), selection_rule=rule,
                                          floor_fraction=0.01)
                picks.append(pv.terms)
            except Exception as exc:  # noqa: BLE001 - an empty selection must then be empty for both
                picks.append(type(exc).__name__)
    finally:
        vocab_mod.noisy_term_histogram = original
    assert picks[0] == picks[1]


def _terms(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


def test_top_terms_come_in_decreasing_noisy_count() -> None:
    c = np.array([3.0, 9.0, 1.0, 5.0])
    assert voc.select_top_terms(c, size=4).tolist() == [1, 3, 0, 2]
    assert voc.select_top_terms(c, size=3).tolist() == [1, 3, 0]
    assert voc.select_top_terms(c, size=1).tolist() == [1]


def test_top_terms_match_a_full_sort_on_random_counts() -> None:
    rng = np.random.default_rng(5)
    for n in (50, 1000):
        for size in (1, 2, 3, 7, 49, 50, 333):
            c = rng.normal(size=n) if size <= n else None
            if c is not None:
                assert voc.select_top_terms(c, size=size).tolist() == np.argsort(-c, kind="stable")[:size].tolist()


def test_tied_noisy_counts_keep_the_public_vocabulary_order() -> None:
    c = np.repeat(np.array([4.0, 2.0, 7.0]), 200)  # integer noisy counts tie often (discrete Laplace)
    got = voc.select_top_terms(c, size=600)
    assert got.tolist() == np.argsort(-c, kind="stable").tolist()


def test_noise_floor_keeps_counts_at_the_floor() -> None:
    c = np.array([2.0, 1.0, 3.0])
    assert voc.select_top_terms(c, size=3, rule="noise-floor", floor=2.0).tolist() == [2, 0]
    with pytest.raises(ParameterError, match=r"^The noise-floor rule needs a floor value\.$"):
        voc.select_top_terms(c, size=3, rule="noise-floor")
    with pytest.raises(ParameterError, match=r"^Unknown vocabulary selection rule 'best'; choose top-n or "
                                             r"noise-floor\.$"):
        voc.select_top_terms(c, size=3, rule="best")


def test_settings_refusals_name_the_setting() -> None:
    ok = dict(epsilon=1.0, terms_per_doc=2, size=2, vocabulary_size=3)
    for change, exc, msg in [
        (dict(epsilon=0.0), ParameterError, r"^ε_voc must be a finite number > 0"),
        (dict(terms_per_doc=0), ParameterError, r"^S \(terms per document\) must be ≥ 1"),
        (dict(size=0), ParameterError, r"^N \(private vocabulary size\) must be ≥ 1"),
        (dict(selection_rule="best"), ParameterError,
         r"^Unknown vocabulary selection rule 'best'; choose top-n or noise-floor\.$"),
        (dict(vocabulary_size=0, size=1), VocabularyError, r"^The public vocabulary is empty\.$"),
        (dict(size=4), ParameterError, r"^N \(private vocabulary size\) = 4 is larger than the public vocabulary "
                                        r"\(\|V\| = 3 terms\); choose N ≤ \|V\|\. Nothing was spent\.$"),
    ]:
        with pytest.raises(exc, match=msg):
            voc.check_vocabulary_settings(**{**ok, **change})
    assert voc.check_vocabulary_settings(epsilon=2, terms_per_doc=1, size=1, vocabulary_size=1) == (2.0, 1, 1)


def test_noise_floor_formula() -> None:
    assert voc.noise_floor(epsilon=0.5, terms_per_doc=2, vocabulary_size=400) == pytest.approx(4.0 * math.log(200.0))
    assert voc.noise_floor(epsilon=1.0, terms_per_doc=1, vocabulary_size=2) == 0.0
    assert voc.noise_floor(epsilon=1.0, terms_per_doc=1, vocabulary_size=1) == 0.0
    with pytest.raises(ParameterError, match=r"^ε_voc must be a finite number > 0"):
        voc.noise_floor(epsilon=0.0, terms_per_doc=1, vocabulary_size=10)


def test_release_checks_the_rule_before_spending_and_records_the_relation() -> None:
    ledger = PrivacyLedger()
    with pytest.raises(ParameterError, match=r"^Unknown vocabulary selection rule 'best'"):
        voc.privatize_vocabulary(np.zeros(3), ["a", "b", "c"], epsilon=1.0, size=2,
                                 context=ReleaseContext(noise=NoiseSource(seed=0), ledger=ledger),
                                 selection_rule="best")
    assert len(ledger) == 0
    voc.privatize_vocabulary(np.zeros(3), ["a", "b", "c"], epsilon=1.0, size=2,
                             context=ReleaseContext(noise=NoiseSource(seed=0), ledger=ledger),
                             neighbouring="add/remove one person")
    assert ledger.events[0].neighbouring == "add/remove one person"
    ev = voc.vocabulary_event(epsilon=1.0, terms_per_doc=1, size=1, vocabulary_name="v", vocabulary_size=1,
                              selection_rule="top-n", sampler="numpy", neighbouring="add/remove one person")
    assert ev.neighbouring == "add/remove one person"


def test_noisy_histogram_refusals_name_the_setting() -> None:
    with pytest.raises(ParameterError, match=r"^ε_voc must be a finite number > 0"):
        voc.noisy_term_histogram(np.zeros(2), epsilon=-1.0, terms_per_doc=1, noise=NoiseSource(seed=0))
    with pytest.raises(ParameterError, match=r"^S \(terms per document\) must be ≥ 1"):
        voc.noisy_term_histogram(np.zeros(2), epsilon=1.0, terms_per_doc=0, noise=NoiseSource(seed=0))


@pytest.mark.parametrize("rule,fewer", [("top-n", ""), ("noise-floor", " (fewer under the noise-floor rule)")])
def test_vocabulary_event_holds_the_public_settings(rule: str, fewer: str) -> None:
    ev = voc.vocabulary_event(epsilon=0.5, terms_per_doc=4, size=1200, vocabulary_name="glove", vocabulary_size=40000,
                              selection_rule=rule, sampler="opendp")
    assert ev.released == (f"the top N = 1,200 terms{fewer} of a Laplace-noised histogram over all 40,000 terms "
                           "of glove")
    assert dict(ev.params) == {"vocabulary": "glove", "vocabulary_size": 40000, "terms_per_doc": 4,
                               "requested_size": 1200, "selection_rule": rule, "laplace_sampler": "opendp"}
    assert (ev.step, ev.epsilon, ev.sensitivity, ev.noise_scale) == ("vocabulary", 0.5, 4.0, 8.0)


def test_release_defaults_and_fields() -> None:
    counts = np.zeros(1001, dtype=np.int64)
    ledger = PrivacyLedger()
    pv = voc.privatize_vocabulary(counts, _terms(1001), epsilon=2.0,
                                  context=ReleaseContext(noise=NoiseSource(seed=3), ledger=ledger))
    assert (pv.terms_per_doc, pv.requested_size, pv.public_vocabulary) == (10, 1000, "custom")
    assert (pv.public_vocabulary_size, pv.epsilon, pv.noise_scale, pv.selection_rule) == (1001, 2.0, 5.0, "top-n")
    noisy = NoiseSource(seed=3).add_laplace(counts, scale=5.0, integer_valued=True)
    assert pv.noisy_total == pytest.approx(float(noisy.sum()))
    assert len(pv) == 1000
    (ev,) = ledger.events
    assert dict(ev.params)["vocabulary"] == "custom" and dict(ev.params)["selection_rule"] == "top-n"
    assert dict(ev.params)["laplace_sampler"] == "numpy"


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_noise_floor_rule_keeps_exactly_the_terms_at_or_over_its_threshold(fraction: float) -> None:
    counts = np.zeros(400, dtype=np.int64)
    counts[:40] = np.arange(40)
    kw = dict(epsilon=0.5, terms_per_doc=1, size=300, selection_rule="noise-floor")
    if fraction != 1.0:
        kw["floor_fraction"] = fraction
    pv = voc.privatize_vocabulary(counts, _terms(400), context=ReleaseContext(noise=NoiseSource(seed=9)), **kw)
    noisy = NoiseSource(seed=9).add_laplace(counts, scale=2.0, integer_valued=True)
    floor = fraction * voc.noise_floor(epsilon=0.5, terms_per_doc=1, vocabulary_size=400)
    assert floor == pytest.approx(fraction * 2.0 * math.log(200.0))
    top = np.argsort(-noisy, kind="stable")[:300]
    want = [f"t{i}" for i in top if noisy[i] >= floor]
    assert 0 < len(want) < 300 and list(pv.terms) == want
    assert pv.selection_rule == "noise-floor"


def test_a_single_kept_term_is_a_valid_release_and_none_is_a_spent_refusal() -> None:
    pv = voc.privatize_vocabulary(np.array([50, 0]), ["a", "b"], epsilon=5.0, terms_per_doc=1, size=1,
                                  context=ReleaseContext(noise=NoiseSource(seed=1)))
    assert pv.terms == ("a",)
    ledger = PrivacyLedger()
    with pytest.raises(VocabularyError, match=r"^No term of the public vocabulary cleared the noise floor at "
                                              r"ε_voc = 0\.01; ε_voc was spent \(the noisy counts were drawn\)\. "
                                              r"Raise ε_voc, use the top-N rule, or use a smaller vocabulary\.$"):
        voc.privatize_vocabulary(np.zeros(1000, dtype=np.int64), _terms(1000), epsilon=0.01, terms_per_doc=1,
                                 size=1, context=ReleaseContext(noise=NoiseSource(seed=2), ledger=ledger),
                                 selection_rule="noise-floor",
                                 floor_fraction=1e6)
    assert len(ledger) == 1


def test_counts_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ParameterError, match=r"^counts has shape \(3,\), expected \(2,\) — one per term of V\.$"):
        voc.privatize_vocabulary(np.zeros(3), ["a", "b"], epsilon=1.0, size=1,
                                 context=ReleaseContext(noise=NoiseSource(seed=0)))


def test_private_vocabulary_round_trips_through_its_dict() -> None:
    pv = voc.PrivateVocabulary(terms=("a", "b"), noisy_counts=np.array([3.14159, 2.0]), public_vocabulary="g",
                               public_vocabulary_size=5, epsilon=1.5, terms_per_doc=3, requested_size=2,
                               noise_scale=2.0, selection_rule="noise-floor", noisy_total=10.456)
    d = pv.to_dict()
    assert d == {"terms": ["a", "b"], "noisy_counts": [3.14, 2.0], "public_vocabulary": "g",
                 "public_vocabulary_size": 5, "epsilon": 1.5, "terms_per_doc": 3, "requested_size": 2,
                 "noise_scale": 2.0, "selection_rule": "noise-floor", "noisy_total": 10.46}
    back = voc.PrivateVocabulary.from_dict(d)
    assert back == voc.PrivateVocabulary(terms=("a", "b"), noisy_counts=np.zeros(0), public_vocabulary="g",
                                         public_vocabulary_size=5, epsilon=1.5, terms_per_doc=3, requested_size=2,
                                         noise_scale=2.0, selection_rule="noise-floor", noisy_total=10.46)
    assert back.noisy_counts.dtype == np.float64 and back.noisy_counts.tolist() == [3.14, 2.0]
    assert voc.PrivateVocabulary.from_dict({**d, "noisy_counts": [3, 2]}).noisy_counts.dtype == np.float64
    old = {k: v for k, v in d.items() if k not in ("selection_rule", "noisy_total")}
    old.update(public_vocabulary_size="5", epsilon="1.5", terms_per_doc="3", requested_size="2", noise_scale="2")
    legacy = voc.PrivateVocabulary.from_dict(old)
    assert (legacy.selection_rule, legacy.noisy_total) == ("top-n", 0.0)
    assert (legacy.public_vocabulary_size, legacy.epsilon, legacy.terms_per_doc, legacy.requested_size,
            legacy.noise_scale) == (5, 1.5, 3, 2, 2.0)


def test_documents_estimated_from_the_noisy_total() -> None:
    assert voc.estimate_documents_from_noisy_total(50.0, terms_per_doc=5) == 10.0
    assert voc.estimate_documents_from_noisy_total(-7.0, terms_per_doc=5) == 1.0
    assert voc.estimate_documents_from_noisy_total(1.5, terms_per_doc=1) == 1.5


def test_delta_refusals_say_what_delta_must_be() -> None:
    with pytest.raises(ParameterError, match=r"^δ must be a number in \(0, 1\), got 'x'\.$"):
        check_delta("x")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^δ must be in \(0, 1\) \(e\.g\. 1e-6, well below 1/n\), got 0\.$"):
        check_delta(0)
