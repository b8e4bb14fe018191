import json

import pytest

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
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
