"""Mutation-testing kills for the persistent ledger's filter (docs/TESTING.md "Mutation testing"; docs/DESIGN.md §2.0;
docs/PRIVACY.md): LedgerStore.admit and PersistentLedger.admit/charge — the user-facing refusals naming what is
wrong, forced charges, the float slack at the cap, what a release row records, and what the store holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import _FLOAT_SLACK
from dpkps_core.errors import ParameterError, PrivacyBudgetError

POOL = [f"document\x1fmutation text {i}\x1fx" for i in range(6)]


def _event(eps: float, step: str = "vocabulary") -> PrivacyEvent:
    return PrivacyEvent(mechanism="test_mechanism", step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0,
                        released="a test release")


def _store(tmp_path: Path) -> ls.LedgerStore:
    return ls.LedgerStore(tmp_path / "ledgers")


def _keys(store: ls.LedgerStore, units: list[str]) -> np.ndarray:
    return ls.unique_keys(store.keys(units))[0]


def _spent(led: ls.PersistentLedger) -> list[float]:
    """The opened corpus's spends, in POOL order (the view holds its units in their first-seen order)."""
    return [float(x) for x in led.view().spent]


# ------------------------------------------------------------------------------------------ LedgerStore.admit

def test_store_admit_refuses_a_missing_tool_and_a_path_as_run_name(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL)
    for bad in (None, " "):
        with pytest.raises(ParameterError, match=r"^The ledger's tool must be a short non-empty text, got "):
            store.admit(keys, 1.0, new_cap=5.0, tool=bad, run=None, what="x")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^The ledger's run name is a name, not a path"):
        store.admit(keys, 1.0, new_cap=5.0, tool="test", run="runs/a", what="x")
    assert store.totals()["releases"] == 0  # nothing recorded by a refusal


def test_forced_admission_charges_every_unit_even_over_its_cap(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL)
    _, ok = store.admit(keys[:3], 4.0, new_cap=5.0, tool="test", run=None, what="first")
    assert ok.tolist() == [True] * 3
    _, ok = store.admit(keys, 2.0, new_cap=5.0, tool="test", run=None, what="filtered")
    assert ok.tolist() == [False] * 3 + [True] * 3
    _, ok = store.admit(keys, 2.0, new_cap=5.0, tool="test", run=None, what="forced", force=True)
    assert ok.tolist() == [True] * 6
    view = store.view(keys, new_unit_cap=5.0)
    assert sorted(view.spent.tolist()) == [4.0, 4.0, 4.0, 6.0, 6.0, 6.0]
    rel = {r.what: r for r in view.releases}
    assert (rel["filtered"].units, rel["filtered"].left_out, rel["filtered"].filtered) == (3, 3, True)
    assert (rel["forced"].units, rel["forced"].left_out, rel["forced"].filtered) == (6, 0, False)


def test_a_spend_that_reaches_the_cap_within_the_slack_still_fits(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL[:1])
    eps = 1.0 + _FLOAT_SLACK  # spent + ε equals cap + slack exactly
    assert 0.0 + eps == 1.0 + _FLOAT_SLACK
    _, ok = store.admit(keys, eps, new_cap=1.0, tool="test", run=None, what="at the cap")
    assert ok.tolist() == [True]


def test_the_release_row_keeps_300_characters_of_what(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL)
    store.admit(keys, 1.0, new_cap=5.0, tool="test", run="r1", what="w" * 400)
    (release,) = store.view(keys, new_unit_cap=5.0).releases
    assert release.what == "w" * 300 and release.run == "r1" and release.tool == "test"


# ------------------------------------------------------------------------------------------ PersistentLedger.admit

def test_ledger_admit_refusals_name_the_release(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=1.0)
    with pytest.raises(PrivacyBudgetError, match=r"^Running the vocabulary would spend ε = 2"):
        led.admit(POOL, 2.0, what="the vocabulary")
    with pytest.raises(ParameterError, match=r"^admit needs one unit string per document, not one string\.$"):
        led.admit("document\x1fone\x1fx", 0.5)
    assert led.store.totals()["releases"] == 0


def test_ledger_admit_of_no_units_is_an_empty_boolean_mask(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    mask = led.admit([], 0.5)
    assert mask.tolist() == [] and mask.dtype == np.bool_


def test_the_view_after_an_admission_shows_its_charge(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    assert _spent(led) == [0.0] * 6  # the view is cached…
    led.admit(POOL[:2], 1.5)
    assert _spent(led) == [1.5, 1.5, 0.0, 0.0, 0.0, 0.0]  # …and the admission drops the cache


# ------------------------------------------------------------------------------------------ PersistentLedger.charge

def test_ledger_charge_refusals(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=1.0)
    with pytest.raises(ParameterError, match=r"^vocabulary is charged through its admission's ticket"):
        led.charge(_event(0.5))  # an event belongs to its admission (issue 35 part 7)
    with pytest.raises(ParameterError, match=r"^Only a PrivacyEvent can be charged to a ledger\.$"):
        led.charge_every_unit({"epsilon": 0.5})  # type: ignore[arg-type]
    with pytest.raises(PrivacyBudgetError, match=r"^Running vocabulary \(test_mechanism\) would spend ε = 2"):
        led.charge_every_unit(_event(2.0))
    ticket = led.admit(POOL, 0.5)
    with pytest.raises(ParameterError, match=r"^Only a PrivacyEvent can be charged to a ledger\.$"):
        ticket.charge({"epsilon": 0.5})  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^vocabulary \(test_mechanism\) charges ε = 0\.75, more than its "
                                             r"admission reserved \(0\.5\)"):
        ticket.charge(_event(0.75))
    with pytest.raises(ParameterError, match=r"^An admission ticket charges one release"):
        ticket.admit(POOL, 0.1)
    assert led.store.totals() == {"units": 6, "releases": 1, "events": 0} and led.events == ()


def test_an_event_within_the_slack_of_its_admission_is_attached_to_it(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    led.admit(POOL, 1.0).charge(_event(1.0 + _FLOAT_SLACK))  # ε = reserved + slack exactly: still this admission's
    totals = led.store.totals()
    assert totals["releases"] == 1 and totals["events"] == 1


def test_an_admission_used_up_to_the_slack_is_closed(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    ticket = led.admit(POOL[:2], 2 * _FLOAT_SLACK)
    ticket.charge(_event(_FLOAT_SLACK))  # leaves exactly the slack: the admission is used up
    with pytest.raises(ParameterError, match="more than its admission reserved"):
        ticket.charge(_event(0.5, step="density"))
    led.charge_every_unit(_event(0.5, step="density"))  # charged to the whole corpus, explicitly
    totals = led.store.totals()
    assert totals["releases"] == 2 and totals["events"] == 2
    assert _spent(led) == pytest.approx([0.5 + 2 * _FLOAT_SLACK] * 2 + [0.5] * 4, abs=1e-15)


def test_a_charge_without_admission_records_the_run_and_the_new_units_cap(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="cli sample", run="run-1", cap=3.0)
    led.charge_every_unit(_event(0.5))
    view = led.view()
    assert view.cap_range == (3.0, 3.0) and view.known == 6
    (release,) = view.releases
    assert (release.tool, release.run, release.what, release.filtered) == ("cli sample", "run-1",
                                                                            "vocabulary (test_mechanism)", False)
    (recorded,) = view.events
    assert recorded.to_dict()["run"] == "run-1" and recorded.tool == "cli sample"
    assert recorded.event.to_dict()["epsilon"] == 0.5
