"""The privacy ledger (dpkps_core.dp.ledger; docs/DESIGN.md §2): frozen events, composition, caps and sub-ledgers.

Exact behaviour pinned (mutation testing) for dpkps_core.dp.ledger and dpkps_core.dp.rng (docs/TESTING.md "Mutation testing").

The ledger's composition and sub-ledger refusals (docs/DESIGN.md §2, §2.0) and the noise source's input checks and
reports (docs/PRIVACY.md, "noise comes from the OS entropy source") are pinned: totals per step, the parent
deciding a sub-ledger's admission, messages that name what was refused, and the samplers' count/lattice limits.

Exact behaviour pinned (mutation testing) for dpkps_core.dp.rng, dp.ledger and dp.validation (docs/TESTING.md "Mutation testing").

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

import json

import numpy as np
import pytest

from dpkps_core.dp import rng as rng_mod
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_epsilon, check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError, PrivacyBudgetError


def _event(eps: float, step: str = "vocabulary") -> PrivacyEvent:
    return PrivacyEvent(mechanism="m", step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0, released="x")


def test_events_compose_and_serialise():
    ledger = PrivacyLedger(cap=10)
    ledger.charge(_event(1.5))
    ledger.charge(_event(2.5, "kde"))
    assert ledger.total_epsilon == pytest.approx(4.0)
    assert ledger.by_step() == {"vocabulary": 1.5, "kde": 2.5}
    data = json.loads(json.dumps(ledger.to_dict()))
    again = PrivacyLedger.from_dict(data)
    assert again.total_epsilon == pytest.approx(4.0) and again.cap == 10
    assert [e.step for e in again.events] == ["vocabulary", "kde"]


def test_cap_refuses_before_spending():
    ledger = PrivacyLedger(cap=3)
    ledger.charge(_event(2))
    with pytest.raises(PrivacyBudgetError, match="over the budget cap"):
        ledger.charge(_event(1.5))
    assert ledger.total_epsilon == 2 and len(ledger) == 1
    assert ledger.can_afford(1.0) and not ledger.can_afford(1.01)


def test_events_are_immutable():
    e = _event(1)
    with pytest.raises(Exception):
        e.epsilon = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        e.params["x"] = 1  # type: ignore[index]


@pytest.mark.parametrize("eps", [0, -1, float("inf"), float("nan")])
def test_event_rejects_bad_epsilon(eps):
    with pytest.raises(ParameterError):
        _event(eps)


def test_cap_must_be_positive():
    with pytest.raises(ParameterError):
        PrivacyLedger(cap=0)


def _kde_event(eps: float, step: str = "kde", mechanism: str = "m") -> PrivacyEvent:
    return PrivacyEvent(mechanism=mechanism, step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0 / eps,
                        released="x")


def test_by_step_sums_the_events_of_one_step() -> None:
    ledger = PrivacyLedger(events=[_kde_event(0.5, "kde"), _kde_event(0.25, "kde"), _kde_event(1.0, "vocabulary")])
    assert ledger.by_step() == {"kde": 0.75, "vocabulary": 1.0}


def test_from_dict_without_events_is_an_empty_ledger() -> None:
    ledger = PrivacyLedger.from_dict({"epsilon_cap": 2.0})
    assert ledger.cap == 2.0 and len(ledger) == 0


def test_copy_and_repr() -> None:
    ledger = PrivacyLedger(3.0, [_kde_event(0.5)])
    twin = ledger.copy()
    assert twin is not ledger and twin.cap == 3.0 and twin.events == ledger.events
    twin.charge(_kde_event(1.0))
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
    sub.charge(_kde_event(0.75, "vocabulary", "lap"))
    own = (r"^Running {} would spend ε = 0\.5, taking its part's total to 1\.25, over the budget cap of 1; "
           r"nothing was spent\. Raise the cap or lower ε\.$")
    with pytest.raises(PrivacyBudgetError, match=own.format(r"kde \(rff\)")):
        sub.charge(_kde_event(0.5, "kde", "rff"))
    with pytest.raises(PrivacyBudgetError, match=own.format(r"kde \(rff\)")):
        sub.reuse(_kde_event(0.5, "kde", "rff"))
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


def _event_with(eps: float, step: str = "kde", mechanism: str = "m", **kwargs: object) -> PrivacyEvent:
    return PrivacyEvent(mechanism=mechanism, step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0,
                        released="x", **kwargs)  # type: ignore[arg-type]


def test_event_refusals_name_the_bad_value() -> None:
    with pytest.raises(ParameterError, match=r"^A privacy event's ε must be a finite number > 0 .*, got 0\.$"):
        _event_with(0)
    for delta in (1.0, 1.5, -0.1):
        with pytest.raises(ParameterError, match=rf"^A privacy event's δ must be in \[0, 1\), got {delta}\.$"):
            _event_with(1.0, delta=delta)
    for bad in (True, "2", None):
        with pytest.raises(TypeError, match=r"^A privacy event's ε must be a number > 0"):
            _event_with(bad)


def test_event_stores_float_epsilon_and_delta_and_serialises_params_as_a_dict() -> None:
    ev = _event_with(2, delta=0, params={"features": 4})
    assert type(ev.epsilon) is float and type(ev.delta) is float  # noqa: E721 - the serialised form is 2.0, not 2
    d = ev.to_dict()
    assert (repr(d["epsilon"]), repr(d["delta"])) == ("2.0", "0.0")
    assert type(d["params"]) is dict and d["params"] == {"features": 4}  # noqa: E721


def test_cap_refusal_names_the_value() -> None:
    with pytest.raises(ParameterError, match=r"^The budget cap must be a finite ε > 0, got 0\.$"):
        PrivacyLedger(cap=0)


def test_budget_refusals_name_the_release_the_total_and_the_cap() -> None:
    ledger = PrivacyLedger(cap=1.0, events=[_event_with(0.5)])
    tail = r"taking the total to 1\.5, over the budget cap of 1; nothing was spent\. Raise the cap or lower ε\.$"
    with pytest.raises(PrivacyBudgetError, match=r"^Running this step would spend ε = 1, " + tail):
        ledger.require(1.0)
    with pytest.raises(PrivacyBudgetError, match=r"^Running vocabulary \(laplace\) would spend ε = 1, " + tail):
        ledger.charge(_event_with(1.0, step="vocabulary", mechanism="laplace"))
    with pytest.raises(PrivacyBudgetError, match=r"^Running this release would spend ε = 1, " + tail):
        ledger.admit(["u1", "u2"], 1.0)
    assert len(ledger) == 1  # nothing was recorded by the refusals


def test_admit_returns_a_boolean_mask() -> None:
    mask = PrivacyLedger(cap=1.0).admit(["u1", "u2", "u1"], 0.5)
    assert mask.dtype == np.bool_ and mask.tolist() == [True, True, True]
