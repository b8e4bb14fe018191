"""The session's view of the privacy ledger (docs/DESIGN.md §2.0): the ledger of the loaded corpus — the persistent
unit ledger shared with every session and CLI run on the same documents (the tenant's own with login) — the notice
of a new, empty ledger, and the figures the sidebar shows (:class:`LedgerStatus`; PRIVATE, local)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.ledger_store import PersistentLedger, open_corpus_ledger
from studio import tenancy
from studio.session import notice, person_column
from studio.streamed import StreamedView
from studio.state import SessionState


def ledger(state: SessionState) -> PrivacyLedger:
    """The privacy ledger of the current corpus: the persistent unit ledger (``dpkps_core.ledger_store``; docs/DESIGN.md
    §2.0), opened with the corpus's unit strings — its documents, or its persons when a person column is chosen —
    and shared with every session and CLI run on the same documents, whatever the file. With login, the store is
    the signed-in tenant's own (``studio.tenancy``: its own folder, key and caps), shared with that tenant's
    sessions only. ``events`` are this session's releases; :func:`ledger_status` reads the corpus's units
    (PRIVATE, local).

    The session's cap field is this run's cap setting (public): the cap of documents new to the ledger and the bound
    on this session's own ε. Changing it while a corpus is loaded sets the cap of that corpus's documents (persons)
    in the ledger, recorded with who and when."""
    cid = state.loaded.corpus_id or "(no corpus)"
    ledgers: dict[str, PrivacyLedger] = state.ledgers
    cap = float(state.settings.epsilon_cap) if state.settings.cap_enabled else None
    if cid not in ledgers:
        c = state.loaded.corpus
        units = c.prepared.units if isinstance(c, StreamedView) else None  # a streamed corpus's: its pass's keys
        ledgers[cid] = (open_corpus_ledger(c, tool="app", cap=cap, by_person=person_column(state) is not None,
                                           store=tenancy.ledger_store(), units=units)
                        if c is not None and state.loaded.corpus_id else PrivacyLedger(cap))
        new_ledger_notice(state, ledgers[cid])
    led = ledgers[cid]
    if led.cap != cap:
        led.cap = cap
    if not isinstance(led, PersistentLedger):
        return led
    rd = state.run.run_dir
    led.run = Path(rd).name if rd else f"session {state.token}"
    seen = state.ledger_caps
    if cid not in seen:
        seen[cid] = cap                     # opened under this setting: it applies to documents new to the ledger
    elif seen[cid] != cap:
        led.set_unit_cap(cap)               # changed while this corpus is loaded: its documents' cap (recorded)
        seen[cid] = cap
    return led


def new_ledger_notice(state: SessionState, led: PrivacyLedger) -> None:
    """On first use of a new ledger folder (a new ``$DPKPS_LEDGER_DIR``, or a new account's ledger): say that a new,
    empty ledger was created, which knows no earlier release, with its id — never its path (issue 35 part 7)."""
    if isinstance(led, PersistentLedger) and led.created and not state.ledger_created_said:
        state.ledger_created_said = True
        notice(state, f"A new, empty privacy ledger was created (ledger id {led.ledger_id}): it knows no release made "
               "before. If these documents were released under another ledger, point $DPKPS_LEDGER_DIR at that "
               "ledger's folder instead before spending anything here.")


@dataclasses.dataclass(frozen=True)
class LedgerStatus:
    """What the sidebar shows about the ledger (the corpus's figures are PRIVATE, local: never exported).

    ``largest``: the largest ε spent by one document (person) of the corpus over every release, app and CLI;
    ``cap_low``/``cap_high``: the caps of its documents already in the ledger (``None``: no cap); ``cap_setting``:
    this session's cap field; ``session``: ε spent by this session's releases."""

    unit: str
    largest: float
    cap_low: float | None
    cap_high: float | None
    cap_setting: float | None
    session: float
    releases: int
    persistent: bool

    @property
    def cap_text(self) -> str:
        fmt = lambda c: "no cap" if c is None else f"{c:g}"  # noqa: E731
        if self.cap_low == self.cap_high:
            return fmt(self.cap_low)
        return f"{fmt(self.cap_low)}–{fmt(self.cap_high)}"


def ledger_status(state: SessionState) -> LedgerStatus:
    """The ledger figures of the sidebar (raises :class:`~dpkps_core.errors.PrivacyBudgetError` when the ledger
    cannot be used: shown as an error, nothing spent)."""
    led = ledger(state)
    unit = "person" if person_column(state) else "document"
    if not isinstance(led, PersistentLedger):
        return LedgerStatus(unit, led.total_epsilon, led.cap, led.cap, led.cap, led.total_epsilon, len(led.events), False)
    view = led.view()
    low, high = view.cap_range
    charged = float(sum(led.charged_by_step().values()))  # a release that left every unit out charged no one
    return LedgerStatus(unit, view.largest_spend, low, high, led.cap, charged, len(view.releases), True)
