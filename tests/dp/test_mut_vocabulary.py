"""Mutation-testing kills for dpkps_core.dp.vocabulary and dp.validation (docs/TESTING.md "Mutation testing").

Pins the ε_voc release of docs/DESIGN.md §2.1 beyond its DP guarantee: the order of Ṽ (decreasing noisy count), the
noise-floor rule's exact threshold (floor_fraction × (S/ε)·ln(|V|/2), docs/DESIGN.md §6), the event's public fields, the
released object's fields and serialisation, and the messages of the public-settings refusals (docs/DESIGN.md §2.0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkps_core.dp import vocabulary as voc
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_delta
from dpkps_core.errors import ParameterError, VocabularyError


def _terms(n: int) -> list[str]:
    return [f"t{i}" for i in range(n)]


# ---------------------------------------------------------------------------------------- selection of Ṽ

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


# ------------------------------------------------------------------------------------------ public settings

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
        voc.privatize_vocabulary(np.zeros(3), ["a", "b", "c"], epsilon=1.0, size=2, noise=NoiseSource(seed=0),
                                 ledger=ledger, selection_rule="best")
    assert len(ledger) == 0
    voc.privatize_vocabulary(np.zeros(3), ["a", "b", "c"], epsilon=1.0, size=2, noise=NoiseSource(seed=0),
                             ledger=ledger, neighbouring="add/remove one person")
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


# ----------------------------------------------------------------------------------------------- release

def test_release_defaults_and_fields() -> None:
    counts = np.zeros(1001, dtype=np.int64)
    ledger = PrivacyLedger()
    pv = voc.privatize_vocabulary(counts, _terms(1001), epsilon=2.0, noise=NoiseSource(seed=3), ledger=ledger)
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
    pv = voc.privatize_vocabulary(counts, _terms(400), noise=NoiseSource(seed=9), **kw)
    noisy = NoiseSource(seed=9).add_laplace(counts, scale=2.0, integer_valued=True)
    floor = fraction * voc.noise_floor(epsilon=0.5, terms_per_doc=1, vocabulary_size=400)
    assert floor == pytest.approx(fraction * 2.0 * math.log(200.0))
    top = np.argsort(-noisy, kind="stable")[:300]
    want = [f"t{i}" for i in top if noisy[i] >= floor]
    assert 0 < len(want) < 300 and list(pv.terms) == want
    assert pv.selection_rule == "noise-floor"


def test_a_single_kept_term_is_a_valid_release_and_none_is_a_spent_refusal() -> None:
    pv = voc.privatize_vocabulary(np.array([50, 0]), ["a", "b"], epsilon=5.0, terms_per_doc=1, size=1,
                                  noise=NoiseSource(seed=1))
    assert pv.terms == ("a",)
    ledger = PrivacyLedger()
    with pytest.raises(VocabularyError, match=r"^No term of the public vocabulary cleared the noise floor at "
                                              r"ε_voc = 0\.01; ε_voc was spent \(the noisy counts were drawn\)\. "
                                              r"Raise ε_voc, use the top-N rule, or use a smaller vocabulary\.$"):
        voc.privatize_vocabulary(np.zeros(1000, dtype=np.int64), _terms(1000), epsilon=0.01, terms_per_doc=1,
                                 size=1, noise=NoiseSource(seed=2), ledger=ledger, selection_rule="noise-floor",
                                 floor_fraction=1e6)
    assert len(ledger) == 1


def test_counts_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ParameterError, match=r"^counts has shape \(3,\), expected \(2,\) — one per term of V\.$"):
        voc.privatize_vocabulary(np.zeros(3), ["a", "b"], epsilon=1.0, size=1, noise=NoiseSource(seed=0))


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
