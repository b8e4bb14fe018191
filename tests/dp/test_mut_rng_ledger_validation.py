"""Mutation-testing kills for dpkps_core.dp.rng, dp.ledger and dp.validation (docs/TESTING.md "Mutation testing").

* ledger (docs/DESIGN.md §2, §2.0): a privacy event's refusals and its float ε/δ (what the report and bundle serialise),
  its params as a plain dict, the cap's refusal, and every budget refusal's message naming the release, the total
  it would reach and the cap; the filter's mask is boolean.
* noise source (docs/PRIVACY.md, "noise comes from the OS entropy source"): the seed and sampler refusals, the
  seeded streams a reproducible demo run is built from (the generator and each child, in order), float64 releases
  whatever the statistic's dtype, the per-kind draw counts the report records, and the refusals of bad shapes,
  scales and non-numeric statistics.
* validation: whole numbers given as floats (2.0) are accepted, fractions refused, and each refusal names its
  parameter (the user-facing message).
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_epsilon, check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError, PrivacyBudgetError


def _event(eps: float, step: str = "kde", mechanism: str = "m", **kwargs: object) -> PrivacyEvent:
    return PrivacyEvent(mechanism=mechanism, step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0,
                        released="x", **kwargs)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ ledger

def test_event_refusals_name_the_bad_value() -> None:
    with pytest.raises(ParameterError, match=r"^A privacy event needs a finite ε > 0, got 0\.$"):
        _event(0)
    for delta in (1.0, 1.5):
        with pytest.raises(ParameterError, match=rf"^A privacy event needs 0 ≤ δ < 1, got {delta}\.$"):
            _event(1.0, delta=delta)


def test_event_stores_float_epsilon_and_delta_and_serialises_params_as_a_dict() -> None:
    ev = _event(2, delta=0, params={"features": 4})
    assert type(ev.epsilon) is float and type(ev.delta) is float  # noqa: E721 - the serialised form is 2.0, not 2
    d = ev.to_dict()
    assert (repr(d["epsilon"]), repr(d["delta"])) == ("2.0", "0.0")
    assert type(d["params"]) is dict and d["params"] == {"features": 4}  # noqa: E721


def test_cap_refusal_names_the_value() -> None:
    with pytest.raises(ParameterError, match=r"^The budget cap must be a finite ε > 0, got 0\.$"):
        PrivacyLedger(cap=0)


def test_budget_refusals_name_the_release_the_total_and_the_cap() -> None:
    ledger = PrivacyLedger(cap=1.0, events=[_event(0.5)])
    tail = r"taking the total to 1\.5, over the budget cap of 1; nothing was spent\. Raise the cap or lower ε\.$"
    with pytest.raises(PrivacyBudgetError, match=r"^Running this step would spend ε = 1, " + tail):
        ledger.require(1.0)
    with pytest.raises(PrivacyBudgetError, match=r"^Running vocabulary \(laplace\) would spend ε = 1, " + tail):
        ledger.charge(_event(1.0, step="vocabulary", mechanism="laplace"))
    with pytest.raises(PrivacyBudgetError, match=r"^Running this release would spend ε = 1, " + tail):
        ledger.admit(["u1", "u2"], 1.0)
    assert len(ledger) == 1  # nothing was recorded by the refusals


def test_admit_returns_a_boolean_mask() -> None:
    mask = PrivacyLedger(cap=1.0).admit(["u1", "u2", "u1"], 0.5)
    assert mask.dtype == np.bool_ and mask.tolist() == [True, True, True]


# ------------------------------------------------------------------------------------------- noise source

@pytest.mark.parametrize("seed", [True, 1.5, -1, "3"])
def test_seed_must_be_a_non_negative_integer(seed: object) -> None:
    with pytest.raises(ParameterError, match=r"^The seed must be a non-negative integer, got "):
        NoiseSource(seed=seed)  # type: ignore[arg-type]


def test_unknown_sampler_lists_the_choices() -> None:
    with pytest.raises(ParameterError, match=r"^Unknown noise sampler 'gpu'; choose one of opendp, numpy\.$"):
        NoiseSource(sampler="gpu")


def test_seeded_children_are_the_seed_sequence_spawns_in_order() -> None:
    """A seeded demo run is reproducible (its bundle is compared byte for byte): the noise generator is the seed
    sequence's first spawn and each ``child()`` the next one, so the random features of a rerun are the same."""
    spawns = np.random.SeedSequence(21).spawn(3)
    source = NoiseSource(seed=21)
    children = [source.child().random(4) for _ in range(2)]
    for got, spawn in zip(children, spawns[1:]):
        np.testing.assert_array_equal(got, np.random.default_rng(spawn).random(4))
    assert not np.array_equal(children[0], children[1])
    again = NoiseSource(seed=21)
    np.testing.assert_array_equal(again.child().random(4), children[0])


def test_laplace_scale_refusal_names_the_laplace() -> None:
    with pytest.raises(ParameterError, match=r"^The Laplace noise scale must be finite and > 0, got 0\.$"):
        NoiseSource().add_laplace(np.zeros(2), scale=0)


def test_seeded_releases_are_float64_whatever_the_statistic_dtype() -> None:
    """``add_laplace`` / ``add_gaussian`` return float64 (docstrings), also for an object-dtype statistic."""
    values = np.array([1.0, 2.5], dtype=object)
    lap = NoiseSource(seed=3).add_laplace(values, scale=1.0)
    gau = NoiseSource(seed=3).add_gaussian(values, sigma=1.0)
    rng = np.random.default_rng(np.random.SeedSequence(3).spawn(1)[0])
    assert lap.dtype == np.float64 and gau.dtype == np.float64
    np.testing.assert_allclose(lap, [1.0, 2.5] + rng.laplace(0.0, 1.0, size=2))


def test_draw_counts_add_up_per_kind() -> None:
    source = NoiseSource(seed=0)
    source.add_laplace(np.zeros(2), scale=1.0)
    source.laplace(1.0, 3)
    source.laplace(1.0, (2, 2), integer_valued=True)
    assert source.describe()["noisy_values_drawn"] == {"integer_laplace": 4, "float_laplace": 5}


@pytest.mark.parametrize("size", [(2.5,), (True,), (-1,)])
def test_noise_shape_must_be_non_negative_integers(size: tuple) -> None:
    with pytest.raises(ParameterError, match=r"^The noise shape must be non-negative integers, got "):
        NoiseSource(seed=0).laplace(1.0, size)


def test_opendp_gaussian_refuses_a_non_numeric_statistic() -> None:
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be numeric\.$"):
        NoiseSource().add_gaussian(np.array(["a", "b"]), sigma=1.0)


# ------------------------------------------------------------------------------------------------ validation

def test_whole_number_floats_are_accepted_and_fractions_refused() -> None:
    assert check_positive_int(2.0, "I") == 2 and type(check_positive_int(2.0, "I")) is int  # noqa: E721
    assert check_positive_int(np.int64(3), "I") == 3
    with pytest.raises(ParameterError, match=r"^I \(random features\) must be a whole number ≥ 1, got 2\.5\.$"):
        check_positive_int(2.5, "I (random features)")


def test_non_numbers_are_refused_naming_the_parameter() -> None:
    with pytest.raises(ParameterError, match=r"^ε_kde must be a number > 0, got 'lots'\.$"):
        check_epsilon("lots", "ε_kde")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^σ \(bandwidth\) must be a number, got 'wide'\.$"):
        check_positive_float("wide", "σ (bandwidth)")  # type: ignore[arg-type]
