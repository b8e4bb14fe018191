"""Mutation-testing kills for dpkps_core.dp.count and dpkps_core.dp.forecast (docs/TESTING.md "Mutation testing").

The DP count's frozen event and its unit count (docs/DESIGN.md §2.0: admit, count the admitted units, charge, then draw),
and the forecast's post-processing (pool-adjacent-violators fit, clamping to [0, |V|] and to the noisy number of
units, docs/DESIGN.md §6) and its serialised form.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.dp import count as cnt
from dpkps_core.dp import forecast as fc
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError, PrivacyBudgetError


# --------------------------------------------------------------------------------------------------- count

def test_count_event_defaults_describe_the_training_part() -> None:
    ev = cnt.count_event(epsilon=0.5)
    assert (ev.mechanism, ev.step, ev.epsilon, ev.sensitivity, ev.noise_scale) == (cnt.MECHANISM, "size", 0.5, 1.0, 2.0)
    assert ev.released == "Laplace-noised number of documents in the training part"
    assert ev.neighbouring == ADD_REMOVE_ONE_DOCUMENT
    assert dict(ev.params) == {"noise": "Laplace(1/ε), integer-valued", "charged": "before the noise was drawn"}
    person = cnt.count_event(epsilon=1.0, what="persons", step="classes", neighbouring="add/remove one person")
    assert (person.step, person.released, person.neighbouring) == ("classes", "Laplace-noised number of persons",
                                                                   "add/remove one person")
    with pytest.raises(ParameterError, match=r"^ε \(count\) must be a finite number > 0"):
        cnt.count_event(epsilon=0.0)


def test_unit_count_counts_distinct_admitted_units_then_charges() -> None:
    ledger = PrivacyLedger(cap=5.0)
    released, left_out = cnt.release_unit_count(["p1", "p2", "p1", "p3"], epsilon=2.0, noise=NoiseSource(seed=4),
                                                ledger=ledger, what="persons", step="persons",
                                                neighbouring="add/remove one person")
    noise = NoiseSource(seed=4).laplace(0.5, 1, integer_valued=True)[0]
    assert released.value == pytest.approx(3 + noise) and left_out == 0
    assert (released.epsilon, released.noise_scale) == (2.0, 0.5)
    (ev,) = ledger.events
    assert (ev.step, ev.released, ev.neighbouring, ev.epsilon) == ("persons", "Laplace-noised number of persons",
                                                                   "add/remove one person", 2.0)
    alone, none_left = cnt.release_unit_count(["a", "a"], epsilon=1.0, noise=NoiseSource(seed=1))
    assert alone.value == pytest.approx(1 + NoiseSource(seed=1).laplace(1.0, 1, integer_valued=True)[0])
    assert none_left == 0


def test_release_defaults_name_the_training_part() -> None:
    for release in (lambda led: cnt.release_count(4, epsilon=1.0, noise=NoiseSource(seed=0), ledger=led),
                    lambda led: cnt.release_unit_count(["a", "b"], epsilon=1.0, noise=NoiseSource(seed=0),
                                                       ledger=led)):
        ledger = PrivacyLedger()
        release(ledger)
        (ev,) = ledger.events
        assert (ev.step, ev.released) == ("size", "Laplace-noised number of documents in the training part")
    with pytest.raises(ParameterError, match=r"^ε \(count\) must be a finite number > 0"):
        cnt.release_count(1, epsilon=0.0, noise=NoiseSource(seed=0))


def test_unit_count_refusal_names_the_count() -> None:
    with pytest.raises(PrivacyBudgetError, match=r"^Running the DP count of persons would spend ε = 2"):
        cnt.release_unit_count(["a"], epsilon=2.0, noise=NoiseSource(seed=0), ledger=PrivacyLedger(cap=1.0),
                               what="persons")
    with pytest.raises(ParameterError, match=r"^ε \(count\) must be a finite number > 0"):
        cnt.release_unit_count(["a"], epsilon=-1.0, noise=NoiseSource(seed=0))


def test_noisy_count_clamps_to_one() -> None:
    assert cnt.NoisyCount(value=-3.0, epsilon=1.0, noise_scale=1.0).clamped == 1.0
    assert cnt.NoisyCount(value=7.5, epsilon=1.0, noise_scale=1.0).clamped == 7.5


# ------------------------------------------------------------------------------------------------ forecast

@pytest.mark.parametrize("values,fit", [
    ([1.0, 3.0, 5.0], [3.0, 3.0, 3.0]),
    ([1.0, 0.0, 4.0], [5 / 3] * 3),
    ([5.0, 4.0, 4.0, 1.0], [5.0, 4.0, 4.0, 1.0]),
    ([3, 1, 2], [3.0, 1.5, 1.5]),
    ([], []),
])
def test_monotone_fit_is_the_weighted_pool_of_violators(values: list[float], fit: list[float]) -> None:
    got = fc.monotone_non_increasing(np.asarray(values))
    assert got.shape == (len(values),)
    np.testing.assert_allclose(got, fit)


def _stats(curve: list[float], thresholds: list[int], class_counts: list[float], v: int = 10) -> fc.ForecastStatistics:
    return fc.ForecastStatistics(thresholds=tuple(thresholds), curve=np.asarray(curve, dtype=float), classes=("a", "b"),
                                 class_counts=np.asarray(class_counts, dtype=float), public_vocabulary="g",
                                 public_vocabulary_size=v, terms_per_doc=3, epsilon=0.2, curve_share=0.5,
                                 curve_noise_scale=30.0, class_noise_scale=10.0)


def test_smoothed_curve_is_clamped_to_the_vocabulary_and_the_noisy_units() -> None:
    # 5 noisy units: thresholds above 5 are zeroed, a threshold equal to 5 is kept
    np.testing.assert_allclose(_stats([12.0, 6.0, 4.0, 3.0], [1, 5, 6, 9], [2.0, 3.0]).smoothed_curve(),
                               [10.0, 6.0, 0.0, 0.0])
    np.testing.assert_allclose(_stats([3.0, -2.0], [1, 2], [0.0, -4.0]).smoothed_curve(), [3.0, 0.0])
    np.testing.assert_allclose(_stats([3.0, -2.0], [1, 2], [5.0, 0.0]).smoothed_curve(), [3.0, 0.0])
    np.testing.assert_allclose(_stats([3.0, 2.0], [1, 2], [0.0, 0.5]).smoothed_curve(), [3.0, 0.0])


def test_class_sizes_are_clamped_at_zero_only() -> None:
    assert _stats([1.0], [1], [-2.0, 0.5]).class_sizes() == {"a": 0.0, "b": 0.5}


def test_forecast_statistics_serialise_rounded() -> None:
    d = _stats([1.234, 0.5], [1, 2], [3.456, 7.0]).to_dict()
    assert d == {"thresholds": [1, 2], "curve": [1.23, 0.5], "classes": ["a", "b"], "class_counts": [3.46, 7.0],
                 "public_vocabulary": "g", "public_vocabulary_size": 10, "terms_per_doc": 3, "epsilon": 0.2,
                 "curve_share": 0.5, "curve_noise_scale": 30.0, "class_noise_scale": 10.0,
                 "neighbouring": ADD_REMOVE_ONE_DOCUMENT}


def test_count_noise_is_integer_valued_with_opendp() -> None:
    """The event says "Laplace(1/ε), integer-valued": OpenDP's discrete Laplace keeps the released count whole."""
    values = [cnt.release_count(10, epsilon=1.0, noise=NoiseSource()).value for _ in range(5)]
    assert all(float(v).is_integer() for v in values)
