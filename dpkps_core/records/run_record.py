"""A run folder's ledger record (``ledger_record.json``; docs/ARCHITECTURE.md "Run folder"): the id of the ledger
that admitted the run's units (never its path) and the ids of the events its outputs carry, per step — what the run's
privacy report is derived from (docs/DESIGN.md §2.0: from the events recorded for that run, never from a session's
memory; issue 35 parts 4 and 7). LOCAL: the file is among :data:`~dpkps_core.records.runfolder.PRIVATE_FILES`, never
exported."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from dpkps_core.errors import ParameterError
from dpkps_core.records.runfolder import LEDGER_RECORD_FILE, read_json, write_json

LEDGER_RECORD_FORMAT = "dpkps-run-ledger"

def read_ledger_record(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run folder's ledger record (docs/DESIGN.md §2.0: a run's report is derived from the events recorded for that
    run): ``{"ledger_id": str, "steps": {step: [event id, …]}}``, or ``None`` when the folder has none (a run made
    before the record existed). A malformed record is refused, never read as empty (it would lower the run's ε)."""
    file = Path(path) / LEDGER_RECORD_FILE
    if not file.is_file():
        return None
    try:
        data = read_json(file)
        steps = data["steps"]
        ok = (data.get("format") == LEDGER_RECORD_FORMAT and isinstance(data.get("ledger_id"), str)
              and isinstance(steps, dict)
              and all(isinstance(k, str) and isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool)
                                                                       for i in v) for k, v in steps.items()))
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise ParameterError(f"The ledger record of the run folder {Path(path).name} is damaged; its privacy report "
                             "cannot be derived from it. Restore the folder from a backup.")
    return {"ledger_id": data["ledger_id"], "steps": {k: list(v) for k, v in steps.items()}}


def write_ledger_record(path: str | os.PathLike[str], ledger_id: str, steps: Mapping[str, Iterable[int]]) -> None:
    """Write the run folder's ledger record (LOCAL, owner-only; never exported: :data:`PRIVATE_FILES`). ``steps``:
    step → the ids of the events of that step the run's outputs carry, each id once."""
    clean: dict[str, list[int]] = {}
    for step, ids in steps.items():
        seen: list[int] = []
        for i in ids:
            if int(i) not in seen:
                seen.append(int(i))
        clean[str(step)] = seen
    write_json(Path(path) / LEDGER_RECORD_FILE, {"format": LEDGER_RECORD_FORMAT, "version": 1,
                                                 "ledger_id": str(ledger_id), "steps": clean})


#: a ledger event's step → the step it is filed under in a run's record
RECORD_STEP_OF_EVENT: dict[str, str] = {"forecast": "forecast", "vocabulary": "vocabulary", "kde": "density"}


def with_steering_forecast(run: Any, ledger: Any) -> tuple[Any, list[int]]:
    """A run made in one go (the CLI's ``sample``) with the DP forecast that steered it in its account: the latest
    forecast in ``ledger`` made before the run for the same public settings — S, |V| and the number of classes
    (``PersistentLedger.steering_forecast``; the CLI's ``forecast`` or an app session) — so that its ε is in the run's
    total (issue 35 part 7). Returns the run (its ``ledger`` a copy holding the forecast's event first) and the
    forecast's event ids ([] and the run unchanged when none is found, or the run charged a forecast itself)."""
    import dataclasses

    from dpkps_core.dp.ledger import PrivacyLedger

    ids = list(getattr(ledger, "recorded_event_ids", ()) or ())
    if not ids or any(e.step == "forecast" for e in run.ledger.events):
        return run, []
    found = ledger.steering_forecast(terms_per_doc=run.config.terms_per_doc,
                                     public_vocabulary_size=run.private_vocabulary.public_vocabulary_size,
                                     classes=len(run.classes), before=min(ids))
    if found is None:
        return run, []
    forecast = ledger.events_ledger([found]).events
    return dataclasses.replace(run, ledger=PrivacyLedger(run.ledger.cap, [*forecast, *run.ledger.events])), [found]


def record_ledger(path: str | os.PathLike[str], ledger: Any, *, forecast: Iterable[int] = ()) -> bool:
    """Write the ledger record of a run made in one go (the CLI's ``sample``): every event ``ledger`` charged, filed by
    step, and the DP forecast that steered it (``forecast``: event ids), with the ledger's id (issue 35 part 7: each
    run's local report names the ledger that admitted its units). False (nothing written) for a ledger that is not
    the persistent one."""
    ids = getattr(ledger, "recorded_event_ids", None)
    if ids is None or not getattr(ledger, "ledger_id", None):
        return False
    steps: dict[str, list[int]] = {"forecast": [int(i) for i in forecast]} if forecast else {}
    for event, eid in zip(ledger.events, ids):
        steps.setdefault(RECORD_STEP_OF_EVENT.get(event.step, str(event.step)), []).append(int(eid))
    write_ledger_record(path, ledger.ledger_id, steps)
    return True
