"""A run's account (docs/DESIGN.md §2.0; issue 35 parts 4, 5, 7 and 8): which recorded events a run's outputs carry,
its report's account derived from them, the DP forecast that steered it, its reservation of the planned ε, and how
many training documents (persons) a release would leave out — PRIVATE, local figures for the data owner.

* A release's events are named by the store's ids (taken before and after it, :func:`recorded_event_ids`) in the run
  folder's ledger record (``dpkps_core.records.run_record``, written through ``studio.run_writes.record_events``).
* :func:`run_account` rebuilds the run's account from that record against the ledger — never from a session's
  memory — and never below what the run's report already states: reopening, re-sampling or rebuilding never lowers
  a run's ε.
* :func:`reserve_plan`: a run's first release (Ṽ) reserves ε_voc + ε_kde for its units, so that concurrent runs on
  the same ledger cannot starve its densities (``PersistentLedger.reserve_next``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from dpkps_core.records import runfolder
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.errors import DPKPSError, PrivacyBudgetError
from dpkps_core.ledger_store import PersistentLedger
from dpkps_core.records.run_record import read_ledger_record
from dpkps_core.records.runfolder import RunFolder
from studio.run_writes import record_events
from studio.session import person_column, train_part
from studio.ledger_view import ledger
from studio.streamed import is_streamed
from studio.state import SessionState


def recorded_event_ids(led: PrivacyLedger) -> tuple[int, ...]:
    """The store's ids of ``led``'s events so far (none for an in-memory ledger): taken before and after a release,
    they name the events the release recorded (its run's ledger record, ``studio.run_writes.record_events``)."""
    return led.recorded_event_ids if isinstance(led, PersistentLedger) else ()


def remember_forecast_events(state: SessionState, led: PrivacyLedger, before: Sequence[int]) -> None:
    """Keep the ids of the events the DP forecast just recorded (those of ``led`` not in ``before``): the forecast that
    steers this session's next run (its ε belongs in that run's total, docs/PRIVACY.md "Previews that steer
    choices"), as (corpus id, ledger id, event ids) in ``Results.dp_forecast_events``."""
    if isinstance(led, PersistentLedger):
        new = [i for i in led.recorded_event_ids if i not in set(before)]
        state.results.dp_forecast_events = (state.loaded.corpus_id, led.ledger_id, tuple(new))


def forecast_event_ids(state: SessionState, led: PrivacyLedger, *, terms_per_doc: int, public_vocabulary_size: int,
                       classes: int) -> list[int]:
    """The events of the DP forecast that steered the run being built on ``led`` (the corpus's ledger): this session's
    forecast on this corpus, else the latest forecast in this account's ledger for the same public settings (made
    with the CLI or in another session; chosen from public facts only, ``PersistentLedger.steering_forecast``). []
    without one, or without a persistent ledger."""
    if not isinstance(led, PersistentLedger):
        return []
    kept = state.results.dp_forecast_events
    if kept and kept[0] == state.loaded.corpus_id and kept[1] == led.ledger_id and kept[2]:
        return list(kept[2])
    found = led.steering_forecast(terms_per_doc=terms_per_doc, public_vocabulary_size=public_vocabulary_size,
                                  classes=classes)
    return [] if found is None else [found]


def would_leave_out(state: SessionState, epsilon: float, *, step: str) -> tuple[int, int] | None:
    """(units of the training part a release of ``epsilon`` would leave out now, units of the training part) —
    PRIVATE, local (docs/DESIGN.md §2.0: shown to the data owner before a spend, never exported); ``None`` without a
    persistent ledger. A release that draws on the run's reservation (``step`` "density" after Ṽ) takes the units
    the reservation admitted."""
    from dpkps_core.ledger_store.units import release_unit, unit_strings

    led = ledger(state)
    if not isinstance(led, PersistentLedger) or is_streamed(state):  # a streamed corpus's units are keys: no estimate
        return None
    key = (state.loaded.corpus_id, state.loaded.split_key, person_column(state), id(led.store))
    held = state.results.train_ledger  # (corpus, split, unit, store) → a ledger over the training part's units (PRIVATE)
    if not held or held[0] != key:  # the training part's units, keyed once per corpus and split (session memory)
        units = unit_strings(train_part(state), by_person=person_column(state) is not None)
        held = (key, PersistentLedger(led.store, units, tool="app", cap=led.cap),
                len({release_unit(u) for u in units}))
        state.results.train_ledger = held
    _, train_ledger, distinct = held
    train_ledger.cap = led.cap
    if step == "density":
        units = train_ledger.units
        mask = led.reservation_for(units, epsilon)
        if mask is not None:
            kept = {release_unit(u) for u, ok in zip(units, mask) if ok}
            return distinct - len(kept), distinct
    return train_ledger.view().left_out(epsilon), distinct  # cached until the store changes


def reserve_plan(state: SessionState) -> bool:
    """Does the next Ṽ reserve the run's planned ε (ε_voc + ε_kde) for its units (docs/DESIGN.md §2.0; issue 35 part 8;
    page 3's switch)? On by default with login (a shared server: an account's sessions share its ledger and run at
    the same time), off without login (one local user; page 3 then says that another session or a CLI run on the
    same documents could take the room the densities need)."""
    from studio import tenancy

    if state.settings.reserve_plan is None:
        state.settings.reserve_plan = bool(tenancy.current().signed_in)
    return bool(state.settings.reserve_plan)


def record_step(out: Path, led: Any, before: Sequence[int], step: str, steering: Sequence[int] = ()) -> None:
    """The run folder's ledger record gains the events ``step`` just recorded (``led``'s ids not in ``before``) and
    the DP forecast that steered it (``steering``): what its privacy report is derived from (issue 35 part 4)."""
    if not isinstance(led, PersistentLedger):
        return
    done = set(before)
    if steering:
        record_events(out, led.ledger_id, "forecast", steering)
    record_events(out, led.ledger_id, step, [i for i in recorded_event_ids(led) if i not in done])


def run_account(out: Path, led: PrivacyLedger) -> PrivacyLedger:
    """The run's account, derived from the events recorded for it — its folder's ledger record read against the
    ledger (any session, the app or the CLI), never a session's memory — and never below what its report already
    states (docs/DESIGN.md §2.0; issue 35 part 4: no action lowers a run's ε). A folder made before the record existed
    takes the events the ledger recorded under its name. ``led``: the corpus's ledger (``studio.ledger_view.ledger``)."""
    if isinstance(led, PersistentLedger):
        record = read_ledger_record(out)
        if record is None:
            account = led.run_ledger(out.name)
        elif record["ledger_id"] != led.ledger_id:
            raise PrivacyBudgetError(f"The run {out.name} was admitted by another privacy ledger (id "
                                     f"{record['ledger_id']}; this session's is {led.ledger_id}): its report cannot be "
                                     "derived here. Point $DPKPS_LEDGER_DIR at that ledger's folder.")
        else:
            account = led.events_ledger([i for ids in record["steps"].values() for i in ids])
    else:
        account = led.copy()
    return _not_below_report(account, out)


def _not_below_report(account: PrivacyLedger, out: Path) -> PrivacyLedger:
    """``account``, with each step whose ε the folder's existing report states higher taken from that report."""
    report = RunFolder(out).privacy_report
    if not report.is_file():
        return account
    try:
        stated = [PrivacyEvent.from_dict(e) for e in (runfolder.read_json(report).get("events") or [])]
    except (OSError, ValueError, TypeError, AttributeError, DPKPSError):
        return account
    events = list(account.events)
    for name in {e.step for e in stated}:
        old = [e for e in stated if e.step == name]
        if sum(e.epsilon for e in old) > sum(e.epsilon for e in events if e.step == name) + 1e-9:
            events = [e for e in events if e.step != name] + old
    return PrivacyLedger(account.cap, events)
