"""Mutation-testing kills for dpkps_core.dp.forecast's release side (docs/TESTING.md "Mutation testing").

The DP forecast release (docs/DESIGN.md §2, §6; module docstring of dp/forecast.py): the public thresholds' checks, the
count curve G and the class sizes n it noises (undeclared labels count nowhere, every declared class has an entry,
a person's documents weigh 1 in total), the noise scales S/(a·ε) and 1/((1 − a)·ε), the one event charged before
the noise, the released record's public fields, the refusals naming their parameter, and the sampler: integer
statistics (the curve; document-unit class sizes) go through OpenDP's discrete Laplace, so they stay whole.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.dp import forecast as fc
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError
from dp_stats import PassThroughNoise

PERSON = "add/remove one person"
THRESHOLD_MESSAGE = r"^The forecast thresholds must be strictly increasing integers starting at 1 or more\.$"


# ------------------------------------------------------------------------------------------------ thresholds

def test_thresholds_are_returned_as_int64() -> None:
    t = fc.check_thresholds([1.0, 2.0, 5.0])
    assert t.dtype == np.int64 and t.tolist() == [1, 2, 5]
    assert fc.check_thresholds((7,)).tolist() == [7]  # a single public threshold is a valid curve


@pytest.mark.parametrize("thresholds", [[], [0, 1], [1, 1, 2], [3, 2], [[1]], [[1, 2]]])
def test_bad_thresholds_are_refused(thresholds: list) -> None:
    with pytest.raises(ParameterError, match=THRESHOLD_MESSAGE):
        fc.check_thresholds(thresholds)


def test_count_curve_counts_entries_at_or_above_each_threshold() -> None:
    g = fc.count_curve(np.array([0, 1, 3, 3, 9]), [1, 2, 3, 4, 10])
    assert g.dtype == np.int64 and g.tolist() == [4, 3, 3, 1, 0]


# ------------------------------------------------------------------------------------------------ class sizes

def test_class_sizes_skip_undeclared_labels_and_keep_empty_classes() -> None:
    sizes = fc.class_sizes(["a", "zz", "a", "b"], ["a", "b", "c"])
    assert sizes.dtype == np.float64 and sizes.tolist() == [2.0, 1.0, 0.0]
    assert fc.class_sizes(["zz"], ["a", "b"]).tolist() == [0.0, 0.0]


def test_class_sizes_weigh_a_persons_documents_to_one() -> None:
    sizes = fc.class_sizes(["a", "b", "a", "zz"], ["a", "b"], groups=["p", "p", "q", "r"])
    np.testing.assert_allclose(sizes, [1.5, 0.5])
    with pytest.raises(ParameterError, match=r"^Give one person per document\.$"):
        fc.class_sizes(["a", "b"], ["a", "b"], groups=["p"])


def test_noise_scales_split_epsilon_between_curve_and_classes() -> None:
    assert fc.noise_scales(0.2, 3, 0.5) == pytest.approx((30.0, 10.0))
    assert fc.noise_scales(2.0, 4, 0.25) == pytest.approx((8.0, 1.0 / 1.5))


# ------------------------------------------------------------------------------------------------ the release

def test_release_charges_its_event_and_returns_the_public_record() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    counts = np.array([0, 1, 3, 5, 5, 2])
    stats = fc.release_forecast_statistics(counts, ["a", "b", "a", "zz"], classes=["a", "b", "c"], epsilon=0.5,
                                           terms_per_doc=2, noise=noise, ledger=ledger, public_vocabulary="glove",
                                           thresholds=[1, 3, 6], curve_share=0.25)
    b_curve, b_class = 2 / (0.25 * 0.5), 1 / (0.75 * 0.5)
    (event,) = ledger.events
    d = event.to_dict()
    assert (d["mechanism"], d["step"], d["epsilon"], d["sensitivity"], d["noise_scale"], d["neighbouring"]) == (
        fc.MECHANISM, fc.STEP, 0.5, 1.0, 2.0, ADD_REMOVE_ONE_DOCUMENT)
    assert d["released"] == ("Laplace-noised count curve of V's term counts at 3 public thresholds (sensitivity S = 2, "
                             "share 0.25 of ε) and per-class document counts (sensitivity 1), as one vector of L1 "
                             "sensitivity 1")
    assert d["params"] == pytest.approx({"thresholds": 3, "terms_per_doc": 2, "curve_share": 0.25,
                                         "curve_noise_scale": b_curve, "class_noise_scale": b_class, "classes": 3,
                                         "public_vocabulary_size": 6})
    assert [c[0].tolist() for c in noise.calls] == [[5.0, 3.0, 0.0], [2.0, 1.0, 0.0]]
    assert [c[1] for c in noise.calls] == pytest.approx([b_curve, b_class])
    assert (stats.thresholds, stats.classes, stats.public_vocabulary, stats.public_vocabulary_size) == (
        (1, 3, 6), ("a", "b", "c"), "glove", 6)
    assert (stats.terms_per_doc, stats.epsilon, stats.curve_share, stats.neighbouring) == (
        2, 0.5, 0.25, ADD_REMOVE_ONE_DOCUMENT)
    assert (stats.curve_noise_scale, stats.class_noise_scale) == pytest.approx((b_curve, b_class))
    assert stats.curve.tolist() == [5.0, 3.0, 0.0] and stats.class_counts.tolist() == [2.0, 1.0, 0.0]


def test_release_defaults_and_the_person_unit() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    stats = fc.release_forecast_statistics(np.array([2, 1]), ["a", "a", "a"], classes=["a"], epsilon=1.0,
                                           terms_per_doc=1, noise=noise, ledger=ledger, thresholds=[1, 2],
                                           groups=["p", "p", "q"], neighbouring=PERSON)
    assert stats.public_vocabulary == "" and stats.classes == ("a",)  # one declared class is enough
    assert stats.neighbouring == PERSON and ledger.events[0].neighbouring == PERSON
    assert noise.calls[1][0].tolist() == [2.0]  # persons p (2 documents) and q (1 document), one each


@pytest.mark.parametrize("kwargs,message", [
    (dict(epsilon=0.0), r"^ε_forecast must be a finite number > 0"),
    (dict(terms_per_doc=0), r"^S \(terms per document\) must be ≥ 1, got 0\.$"),
    (dict(curve_share=0.0), r"^The forecast's curve share must lie strictly between 0 and 1\.$"),
    (dict(curve_share=1.0), r"^The forecast's curve share must lie strictly between 0 and 1\.$"),
    (dict(classes=[]), r"^The forecast needs the declared class names\.$"),
])
def test_release_refusals_name_their_parameter(kwargs: dict[str, object], message: str) -> None:
    settings: dict[str, object] = dict(classes=["a"], epsilon=1.0, terms_per_doc=2, curve_share=0.5)
    settings.update(kwargs)
    ledger = PrivacyLedger()
    with pytest.raises(ParameterError, match=message):
        fc.release_forecast_statistics(np.array([1]), ["a"], noise=PassThroughNoise(), ledger=ledger,
                                       thresholds=[1], **settings)  # type: ignore[arg-type]
    assert len(ledger) == 0  # refused before anything is charged


def test_opendp_release_keeps_integer_statistics_whole() -> None:
    """The curve and the document-unit class sizes are counts: OpenDP's discrete Laplace (integer_valued) keeps
    them whole; person-unit sizes (Σ 1/k) are fractional and take the float Laplace."""
    docs = fc.release_forecast_statistics(np.arange(40), ["a", "b"] * 5, classes=["a", "b"], epsilon=1.0,
                                          terms_per_doc=2, noise=NoiseSource(), ledger=PrivacyLedger(),
                                          thresholds=range(1, 30))
    assert all(float(v).is_integer() for v in docs.curve) and docs.curve.dtype == np.float64
    assert all(float(v).is_integer() for v in docs.class_counts) and docs.class_counts.dtype == np.float64
    persons = fc.release_forecast_statistics(np.arange(4), ["a", "b", "a"], classes=["a", "b"], epsilon=1.0,
                                             terms_per_doc=1, noise=NoiseSource(), ledger=PrivacyLedger(),
                                             thresholds=[1, 2], groups=["p", "p", "q"], neighbouring=PERSON)
    assert persons.class_counts.shape == (2,) and np.isfinite(persons.class_counts).all()
    assert all(float(v).is_integer() for v in persons.curve)
