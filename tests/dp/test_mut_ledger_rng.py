"""Mutation-testing kills for dpkps_core.dp.ledger and dpkps_core.dp.rng (docs/TESTING.md "Mutation testing").

The ledger's composition and sub-ledger refusals (docs/DESIGN.md §2, §2.0) and the noise source's input checks and
reports (docs/PRIVACY.md, "noise comes from the OS entropy source") are pinned: totals per step, the parent
deciding a sub-ledger's admission, messages that name what was refused, and the samplers' count/lattice limits.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.dp import rng as rng_mod
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError, PrivacyBudgetError


def _event(eps: float, step: str = "kde", mechanism: str = "m") -> PrivacyEvent:
    return PrivacyEvent(mechanism=mechanism, step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0 / eps,
                        released="x")


# ------------------------------------------------------------------------------------------------ ledger

def test_by_step_sums_the_events_of_one_step() -> None:
    ledger = PrivacyLedger(events=[_event(0.5, "kde"), _event(0.25, "kde"), _event(1.0, "vocabulary")])
    assert ledger.by_step() == {"kde": 0.75, "vocabulary": 1.0}


def test_from_dict_without_events_is_an_empty_ledger() -> None:
    ledger = PrivacyLedger.from_dict({"epsilon_cap": 2.0})
    assert ledger.cap == 2.0 and len(ledger) == 0


def test_copy_and_repr() -> None:
    ledger = PrivacyLedger(3.0, [_event(0.5)])
    twin = ledger.copy()
    assert twin is not ledger and twin.cap == 3.0 and twin.events == ledger.events
    twin.charge(_event(1.0))
    assert len(ledger) == 1 and len(twin) == 2
    assert repr(ledger) == "PrivacyLedger(ε=0.5 / 3, events=1)"
    assert repr(PrivacyLedger()) == "PrivacyLedger(ε=0 / ∞, events=0)"


def test_sub_ledger_needs_no_parent_but_refuses_a_wrong_one() -> None:
    sub = SubLedger(cap=1.0)
    mask = sub.admit(["a", "b", "a"], 0.5)
    assert mask.dtype == bool and mask.tolist() == [True, True, True]
    with pytest.raises(ParameterError, match=r"^A sub-ledger's parent must be a PrivacyLedger\.$"):
        SubLedger(parent="ledger")  # type: ignore[arg-type]


def test_sub_ledger_refusals_name_the_release_and_the_totals() -> None:
    sub = SubLedger(PrivacyLedger(), cap=1.0)
    sub.charge(_event(0.75, "vocabulary", "lap"))
    own = (r"^Running {} would spend ε = 0\.5, taking its part's total to 1\.25, over the budget cap of 1; "
           r"nothing was spent\. Raise the cap or lower ε\.$")
    with pytest.raises(PrivacyBudgetError, match=own.format(r"kde \(rff\)")):
        sub.charge(_event(0.5, "kde", "rff"))
    with pytest.raises(PrivacyBudgetError, match=own.format(r"kde \(rff\)")):
        sub.reuse(_event(0.5, "kde", "rff"))
    with pytest.raises(PrivacyBudgetError, match=own.format("this release")):
        sub.admit(["a"], 0.5)
    with pytest.raises(PrivacyBudgetError, match=own.format("the counts")):
        sub.require(0.5, "the counts")
    assert sub.can_afford(0.25) and not sub.can_afford(0.5)


def test_sub_ledger_passes_its_release_name_to_the_parent() -> None:
    parent = PrivacyLedger(cap=1.0)
    sub = SubLedger(parent)  # no own cap: the parent refuses
    with pytest.raises(PrivacyBudgetError, match=r"^Running this release would spend ε = 2,"):
        sub.admit(["a"], 2.0)
    with pytest.raises(PrivacyBudgetError, match=r"^Running the forecast would spend ε = 2,"):
        sub.admit(["a"], 2.0, what="the forecast")
    with pytest.raises(PrivacyBudgetError, match=r"^Running the forecast would spend ε = 2,"):
        sub.require(2.0, "the forecast")
    with pytest.raises(PrivacyBudgetError, match=r"^Running this step would spend ε = 2,"):
        sub.require(2.0)
    assert not sub.can_afford(2.0) and sub.can_afford(1.0)
    assert sub.admit(["a", "b"], 1.0).tolist() == [True, True]


# --------------------------------------------------------------------------------------------- noise source

def test_seeded_gaussian_is_numpys_normal_from_the_seed() -> None:
    v = np.array([1.0, -2.0, 3.0])
    got = NoiseSource(seed=11).add_gaussian(v, sigma=2.0)
    rng = np.random.default_rng(np.random.SeedSequence(11).spawn(1)[0])
    np.testing.assert_array_equal(got, v + rng.normal(0.0, 2.0, size=3))


def test_opendp_gaussian_accepts_integer_statistics() -> None:
    out = NoiseSource().add_gaussian(np.array([[1, 2], [3, 4]]), sigma=1e-3)
    assert out.dtype == np.float64 and out.shape == (2, 2)
    np.testing.assert_allclose(out, [[1, 2], [3, 4]], atol=0.05)


def test_gaussian_scale_refusal_names_the_gaussian() -> None:
    with pytest.raises(ParameterError, match=r"^The Gaussian noise scale must be finite and > 0, got 0\.$"):
        NoiseSource().add_gaussian(np.zeros(2), sigma=0)


def test_describe_names_the_requested_sampler_and_explains_the_choice() -> None:
    seeded = NoiseSource(seed=1).describe()
    assert seeded["sampler_requested"] == "opendp"
    assert seeded["sampler_note"] == ("Reproducible demo seed: NumPy's seeded sampler was used for all noise "
                                      "(OpenDP's samplers cannot be seeded). NOT FOR RELEASE.")
    fast = NoiseSource(sampler="numpy").describe()
    assert fast["sampler_requested"] == "numpy"
    assert fast["sampler_note"] == ("NumPy's floating-point samplers were chosen (fast option); OpenDP's vetted "
                                    "samplers are the default.")


@pytest.mark.parametrize("counts", [np.array([2**62], dtype=np.int64), np.array([-(2**62)], dtype=np.int64)])
def test_discrete_laplace_refuses_integer_counts_at_the_i64_limit(counts: np.ndarray) -> None:
    with pytest.raises(ParameterError, match=r"^The discrete Laplace sampler needs counts with \|count\| < 2\^62\.$"):
        NoiseSource().add_laplace(counts, scale=1.0, integer_valued=True)


@pytest.mark.parametrize("counts", [np.array([2.0**62]), np.array([0.5]), np.array([np.nan])])
def test_discrete_laplace_refuses_float_counts_that_are_not_small_whole_numbers(counts: np.ndarray) -> None:
    with pytest.raises(ParameterError, match=r"^The discrete Laplace sampler needs integer counts \(finite, whole, "
                                             r"\|count\| < 2\^62\)\.$"):
        NoiseSource().add_laplace(counts, scale=1.0, integer_valued=True)


def test_non_numeric_statistics_are_refused_clearly() -> None:
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be numeric\.$"):
        NoiseSource().add_laplace(np.array(["a", "b"]), scale=1.0)
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be numeric\.$"):
        NoiseSource().add_laplace(np.array(["a"]), scale=1.0, integer_valued=True)
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be finite \(no NaN or infinity\) for "
                                             r"OpenDP's sampler\.$"):
        NoiseSource().add_gaussian(np.array([np.inf]), sigma=1.0)


def test_a_single_count_gets_its_noise() -> None:
    out = NoiseSource().add_laplace(np.array([7]), scale=1e-3, integer_valued=True)
    assert out.tolist() == [7.0]


def test_lattice_granularity_is_forty_bits_below_the_scale() -> None:
    assert rng_mod._granularity(1.0) == -40
    assert rng_mod._granularity(3.0) == -39
    assert rng_mod._granularity(0.25) == -42
