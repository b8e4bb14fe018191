"""The persistent ledger as a :class:`~dpkps_core.dp.ledger.PrivacyLedger` (docs/DESIGN.md §2.0; see
:mod:`dpkps_core.ledger_store`): the run's view of the corpus's units and the one way to open it."""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any, Sequence

import numpy as np

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import DEFAULT_EPSILON_CAP, MAX_ROW_FACTOR, AdmissionTicket, PrivacyLedger, within_cap
from dpkps_core.errors import ParameterError
from dpkps_core.ledger_store.records import CorpusView, RecordedEvent, _check_cap, _check_epsilon, _check_label
from dpkps_core.ledger_store.rules import (PERSON_KIND, ReleaseRows, check_row_factor, distinct, is_key_source,
                                          keyed_rows)
from dpkps_core.ledger_store.store import LedgerStore
from dpkps_core.ledger_store.units import unit_strings


# ------------------------------------------------------------------------------------------ ledger

_SLACK = 1e-9


def _digest(keys: np.ndarray, rows: ReleaseRows) -> bytes:
    """A digest of a release's input (its row keys in order), to recognise the same input again (memory only)."""
    import hashlib

    h = hashlib.sha256(rows.kind.encode() + b"\x00" + np.ascontiguousarray(keys).tobytes())
    h.update(np.ascontiguousarray(rows.document, dtype=np.int64).tobytes())
    h.update(np.ascontiguousarray(rows.person, dtype=np.int64).tobytes())
    return h.digest()

@dataclasses.dataclass(frozen=True)
class _CorpusKeys:
    """The opened corpus's keys: its units' keys first (``primary`` of them), then their linked keys; ``links``
    pairs a unit's position with a linked key's (a person with their rows' document keys, or a document with its
    known person); ``rows`` the parsed rows (for a charge to every unit)."""

    keys: np.ndarray
    primary: int
    links: tuple[np.ndarray, np.ndarray]
    persons: bool
    rows: ReleaseRows
    row_keys: np.ndarray
    key_rows: np.ndarray | None = None  # the corpus's rows per position of ``keys`` (persons' document keys)


@dataclasses.dataclass
class Reservation:
    """ε a run reserved for its units at its first release, for its later steps (docs/DESIGN.md §2.0; issue 35 part 8):
    the units admitted then were charged the run's planned total at once, so that no concurrent run can take their
    room before this run's later steps. ``remaining`` is what later releases on the same input (``digest`` of its
    keys) may still draw, up to ``row_factor`` per row of a person; they take part exactly as admitted then
    (``mask``), and their events are recorded with the reserving release (``release_id``). What is never drawn
    stays charged (a reservation is spent, like a release that failed after admission)."""

    digest: bytes
    release_id: int
    mask: np.ndarray
    remaining: float
    row_factor: float
    run: str | None


class PersistentLedger(PrivacyLedger):
    """A :class:`PrivacyLedger` backed by the persistent unit ledger (drop-in for every mechanism).

    * :meth:`admit` (= :meth:`admission`) is the individual filter under the unit rules
      (:mod:`~dpkps_core.ledger_store.rules`): it charges every key the release touches at once and returns the
      release's :class:`~dpkps_core.dp.ledger.AdmissionTicket`, the only object that charges the release's events
      (issue 35 part 7). :meth:`charge` without a ticket is refused; :meth:`charge_every_unit` charges every unit
      the ledger was opened with, explicitly (a release that did not filter its input).
    * ``cap`` is this run's cap setting (public): the cap of units new to the ledger and the bound of
      :meth:`require` on this run's own total. ``events``, ``total_epsilon``, ``by_step`` and ``to_dict()`` are
      this run's own events (what its privacy report lists).
    * :meth:`view` (and ``corpus_epsilon``, ``corpus_releases``, ``unit_caps``) describe the opened corpus's
      units across every release — PRIVATE, local figures, never part of ``to_dict()``.
    * ``ledger_id`` (the store's random id, never its path) and ``created`` (this process made the ledger: it
      knows no earlier release) are for the run's local report and the first-use notice.

    ``tool`` (``"app"``, ``"cli sample"``…) and ``run`` (a run folder *name* or a session label) are recorded with
    every release and may be updated."""

    def __init__(self, store: LedgerStore, units: Sequence[str] = (), *, tool: str, run: str | None = None,
                 cap: float | None = DEFAULT_EPSILON_CAP, unit_name: str = "document") -> None:
        super().__init__(_check_cap(cap))
        if not isinstance(store, LedgerStore):
            raise ParameterError("PersistentLedger needs a LedgerStore.")
        if isinstance(units, str):
            raise ParameterError("PersistentLedger needs the corpus's unit strings, not one string.")
        self._store = store
        # unit strings, or precomputed keys (a streamed corpus's: 32 bytes per document, issue 31)
        self._units: Any = units if is_key_source(units) else list(units)
        self._corpus_keys: _CorpusKeys | None = None
        self._view_cache: tuple[Any, CorpusView] | None = None
        self._lock = threading.Lock()
        self.tool = _check_label(tool, "tool", optional=False)
        self.run = run
        self.unit_name = unit_name  # "document" or "person": the unit's name in messages
        self._recorded: list[int] = []          # the store's ids of this ledger's events, in order
        self._charged: list[bool] = []          # per event: did its release charge any unit (PRIVATE, local)
        self._parent: PersistentLedger | None = None
        self._reservations: list[Reservation] = []
        self._reserve_next: float | None = None

    @property
    def run(self) -> str | None:
        return self._run

    @run.setter
    def run(self, value: str | None) -> None:
        self._run = _check_label(value, "run name", optional=True)

    @property
    def units(self) -> Any:
        """The unit strings this ledger was opened with, as a tuple — or the precomputed keys it was opened with
        (:func:`~dpkps_core.ledger_store.rules.is_key_source`) as they are (PRIVATE: never log or show them)."""
        return self._units if is_key_source(self._units) else tuple(self._units)

    @property
    def store(self) -> LedgerStore:
        return self._store

    @property
    def ledger_id(self) -> str:
        """The ledger's stable random id (never its path), for the run's LOCAL report."""
        return self._store.ledger_id

    @property
    def created(self) -> bool:
        """True when opening this ledger created it: a new, empty ledger that knows no earlier release."""
        return self._store.created

    @property
    def new_unit_cap(self) -> float:
        """The cap a unit never seen before gets from this run: its cap setting, else the default."""
        return DEFAULT_EPSILON_CAP if self.cap is None else float(self.cap)

    def _corpus(self) -> _CorpusKeys:
        if self._corpus_keys is None:
            rows, row_keys = keyed_rows(self._units, self._store.keys)
            n = len(row_keys)
            linked = rows.document if rows.kind == PERSON_KIND else rows.person
            first = np.full(n, len(rows), dtype=np.int64)  # the units in first-seen order, then the linked keys
            np.minimum.at(first, rows.primary, np.arange(len(rows), dtype=np.int64))
            primary = np.flatnonzero(first < len(rows))
            primary = primary[np.argsort(first[primary], kind="stable")]
            if not (linked >= 0).any():
                empty = np.zeros(0, dtype=np.int64)
                self._corpus_keys = _CorpusKeys(row_keys[primary], len(primary), (empty, empty),
                                                rows.kind == PERSON_KIND, rows, row_keys)
                return self._corpus_keys
            is_primary = np.zeros(n, dtype=bool)
            is_primary[primary] = True
            order = np.concatenate([primary, np.flatnonzero(~is_primary)])
            position = np.empty(n, dtype=np.int64)
            position[order] = np.arange(n)
            both = (linked >= 0) & (rows.primary >= 0)
            codes = distinct(position[rows.primary[both]] * n + position[linked[both]])
            per_string = np.bincount(linked[linked >= 0], minlength=n)
            self._corpus_keys = _CorpusKeys(row_keys[order], len(primary), (codes // n, codes % n),
                                            rows.kind == PERSON_KIND, rows, row_keys, per_string[order])
        return self._corpus_keys

    # ---- the filter
    def admission(self, units: Sequence[str], epsilon: float, *, what: str = "this release",
                  row_factor: float = MAX_ROW_FACTOR) -> AdmissionTicket:
        """Leave out the rows whose keys cannot take this release (the unit rules); charge every key of the others
        now (docs/DESIGN.md §2.0). A whole release is refused only on public input: an invalid ``epsilon`` or
        ``row_factor``, or an ``epsilon`` that would take this run's own total over its cap setting. Returns the
        release's ticket (its mask is per position of ``units``)."""
        epsilon = _check_epsilon(epsilon)
        row_factor = check_row_factor(row_factor)
        self.require(epsilon, what)
        if isinstance(units, str):
            raise ParameterError("admit needs one unit string per document, not one string.")
        rows, keys = keyed_rows(units, self._store.keys)
        digest = _digest(keys, rows)
        planned, self._reserve_next = self._reserve_next, None
        for held in reversed(self._reservations if planned is None else ()):  # the newest reservation first
            if (held.digest == digest and within_cap(0.0, epsilon, held.remaining)
                    and row_factor <= held.row_factor + _SLACK):
                # a later step of the run that reserved its ε: the same units, charged at the reservation
                held.remaining = max(held.remaining - epsilon, 0.0)
                return AdmissionTicket(self, held.mask, epsilon, what=what,
                                       record=functools.partial(self._record, held.release_id, self.tool, self.run,
                                                                charged=bool(held.mask.any())))
        total = epsilon if planned is None or planned <= epsilon + _SLACK else float(planned)
        label = what if total == epsilon else \
            f"{what} (and ε {total - epsilon:g} reserved for the run's later steps)"
        rid, ok = self._store.admit(keys, total, new_cap=self.new_unit_cap, tool=self.tool, run=self.run,
                                    what=label, rows=rows, row_factor=row_factor)
        self._view_cache = None
        if total > epsilon:
            ok.setflags(write=False)
            self._reservations.append(Reservation(digest, rid, ok, total - epsilon, row_factor, self.run))
        # the ticket records its events under the tool and run of its admission, whatever the labels are later
        return AdmissionTicket(self, ok, epsilon, what=what,
                               record=functools.partial(self._record, rid, self.tool, self.run,
                                                        charged=bool(np.any(ok))))

    def reserve_next(self, planned: float) -> None:
        """The next admission through this ledger reserves ``planned`` ε (the run's ε_voc + ε_kde) for its units at
        once — charged now, so that concurrent runs cannot starve this run's later steps — and charges its own
        release's ε from it; a later admission of the same input for at most what remains draws on the reservation
        (the same units, nothing charged twice). Refused only on public input (``planned``)."""
        self._reserve_next = _check_epsilon(planned)

    def drop_planned(self) -> None:
        """Forget a :meth:`reserve_next` that no admission took (its step failed before reading any data)."""
        self._reserve_next = None

    def reservation_for(self, units: Sequence[str], epsilon: float) -> np.ndarray | None:
        """The admitted mask a release of ``epsilon`` on ``units`` would take from a reservation of this ledger (the
        newest that covers it), or None when it would be admitted afresh. PRIVATE, local (which rows took part)."""
        rows, keys = keyed_rows(units, self._store.keys)
        digest = _digest(keys, rows)
        for held in reversed(self._reservations):
            if held.digest == digest and within_cap(0.0, float(epsilon), held.remaining):
                return held.mask
        return None

    def reserved(self, units: Sequence[str] | None = None, *, run: str | None = None) -> float:
        """The ε still reserved for later steps (for the input ``units`` and/or the run labelled ``run``; default:
        every reservation of this ledger and its twins). Public: a run's planned ε less what its steps drew."""
        held = [r for r in self._reservations if run is None or r.run == run]
        if units is None:
            return float(sum(r.remaining for r in held))
        rows, keys = keyed_rows(units, self._store.keys)
        digest = _digest(keys, rows)
        return float(sum(r.remaining for r in held if r.digest == digest))

    @property
    def recorded_event_ids(self) -> tuple[int, ...]:
        """The store's ids of this ledger's events, in the order charged: what a run's local ledger record names
        (docs/DESIGN.md §2.0: a run's report is derived from the events recorded for that run)."""
        with self._lock:
            return tuple(self._recorded)

    def events_ledger(self, event_ids: Sequence[int]) -> PrivacyLedger:
        """The account of the events ``event_ids`` (a run folder's ledger record), rebuilt from the store, whichever
        session or process charged them — never from a session's memory (issue 35 part 4)."""
        return PrivacyLedger(self.cap, [e.event for e in self._store.events_by_id(list(event_ids))])

    def steering_forecast(self, *, terms_per_doc: int, public_vocabulary_size: int, classes: int,
                          before: int | None = None) -> int | None:
        """The id of the latest DP forecast release in this ledger (any session, the app or the CLI) made for the same
        public settings — S, |V| and the number of declared classes — before event ``before``: the forecast that
        steered a run that did not make one itself, so that its ε is in that run's total (issue 35 part 7). The choice
        reads public facts of the ledger's own events only, never which units a release touched."""
        for eid, rec in self._store.recent_events("laplace_forecast_statistics", before=before):
            p = rec.event.params
            if (p.get("terms_per_doc"), p.get("public_vocabulary_size"), p.get("classes")) == \
                    (int(terms_per_doc), int(public_vocabulary_size), int(classes)):
                return eid
        return None

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> AdmissionTicket:  # type: ignore[override]
        """:meth:`admission` (the ticket reads as the admitted mask)."""
        return self.admission(units, epsilon, what=what)

    def _record(self, release_id: int, tool: str, run: str | None, event: PrivacyEvent, *,
                charged: bool = True) -> None:
        self.require(event.epsilon, f"{event.step} ({event.mechanism})")
        eid = self._store.record_event(release_id, event, tool=tool, run=run)
        for led in (self, self._parent):
            if led is not None:
                with led._lock:
                    led._events.append(event)
                    led._recorded.append(eid)
                    led._charged.append(charged)
                led._view_cache = None

    def charged_by_step(self) -> dict[str, float]:
        """ε per step of this ledger's events whose release charged at least one unit (PRIVATE, local: a release that
        left every unit out charged no one, and the sidebar does not count it as spent; issue 35 part 5)."""
        out: dict[str, float] = {}
        with self._lock:
            pairs = list(zip(self._events, self._charged))
        for event, charged in pairs:
            if charged:
                out[event.step] = out.get(event.step, 0.0) + event.epsilon
        return out

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        """Refused: an event is charged through its admission's ticket (:func:`dpkps_core.method.budget.admit`), or to
        every unit explicitly (:meth:`charge_every_unit`)."""
        raise ParameterError(
            f"{getattr(event, 'step', 'a release')} is charged through its admission's ticket "
            "(dpkps_core.method.budget.admit(...).ticket), or to every unit with charge_every_unit; nothing was charged.")

    def charge_every_unit(self, event: PrivacyEvent) -> PrivacyEvent:
        """Charge ``event`` to every unit the ledger was opened with (a mechanism that did not filter its input
        used all of it): every key is charged, caps notwithstanding, and the release is recorded (unfiltered).
        Refused only on public input (this run's cap setting)."""
        if not isinstance(event, PrivacyEvent):
            raise ParameterError("Only a PrivacyEvent can be charged to a ledger.")
        self.require(event.epsilon, f"{event.step} ({event.mechanism})")
        corpus = self._corpus()
        rid, _ = self._store.admit(corpus.row_keys, event.epsilon, new_cap=self.new_unit_cap, tool=self.tool,
                                   run=self.run, what=f"{event.step} ({event.mechanism})", force=True,
                                   rows=corpus.rows)
        self._record(rid, self.tool, self.run, event, charged=len(corpus.row_keys) > 0)
        return event

    def for_run(self, run: str | None, *, tool: str | None = None, in_session: bool = False) -> "PersistentLedger":
        """A ledger on the same store and corpus for one run (its own run label, tool and events; the cap setting,
        the corpus's keys and the reservations shared): what a job of a session that runs several things at once
        admits through, so that no other job's label can move under it (issue 35 part 4). ``in_session``: its events
        are also this ledger's (the session's own spend, as the sidebar counts it)."""
        twin = PersistentLedger(self._store, (), tool=self.tool if tool is None else tool, run=run, cap=self.cap,
                                unit_name=self.unit_name)
        twin._units = self._units
        twin._corpus_keys = self._corpus()
        twin._reservations = self._reservations
        twin._parent = self if in_session else None
        return twin

    def run_events(self, run: str | None = None) -> tuple[RecordedEvent, ...]:
        """Every event recorded for the run named ``run`` (default: this ledger's run label), from any process, in
        the order recorded: what a run's report is derived from (issue 35 part 4). Events hold public quantities
        only; empty without a run name."""
        name = self.run if run is None else _check_label(run, "run name", optional=False)
        return () if name is None else self._store.run_events(name)

    def run_ledger(self, run: str | None = None) -> PrivacyLedger:
        """The run's account rebuilt from the ledger: an in-memory :class:`PrivacyLedger` (this ledger's cap setting)
        holding every event recorded for ``run`` (:meth:`run_events`), whichever session or process charged them —
        the ledger a run's privacy report is derived from, so that reopening or re-sampling never lowers it."""
        return PrivacyLedger(self.cap, [e.event for e in self.run_events(run)])

    # ---- caps
    def set_unit_cap(self, cap: float | None) -> int:
        """Set the cap of every unit of the opened corpus (recorded with this ledger's tool and run); ``None``
        removes it. Returns how many units' cap changed."""
        changed = self._store.set_cap(self._corpus().keys, cap, tool=self.tool, run=self.run)
        self._view_cache = None
        return changed

    # ---- views (PRIVATE, local)
    def view(self) -> CorpusView:
        """The opened corpus's units as the ledger knows them now (cached until the store changes)."""
        changes = self._store.changes()
        key = (changes, self.cap)
        if self._view_cache is None or self._view_cache[0] != key:
            corpus = self._corpus()
            self._view_cache = (key, self._store.view(corpus.keys, new_unit_cap=self.new_unit_cap,
                                                      primary=corpus.primary, links=corpus.links,
                                                      persons=corpus.persons, key_rows=corpus.key_rows))
        return self._view_cache[1]

    @property
    def corpus_epsilon(self) -> float:
        """The largest ε spent by one unit of the opened corpus, over every release (PRIVATE, local)."""
        return self.view().largest_spend

    @property
    def corpus_releases(self) -> tuple[RecordedEvent, ...]:
        """Every event charged to a release that touched the opened corpus's units (PRIVATE, local)."""
        return self.view().events

    @property
    def unit_caps(self) -> tuple[float | None, float | None]:
        """(smallest, largest) cap among the opened corpus's units (``None``: no cap)."""
        return self.view().cap_range

    def copy(self) -> PrivacyLedger:
        """A detached in-memory snapshot of this run's events under this run's cap setting."""
        return PrivacyLedger(self.cap, self._events)

    def __repr__(self) -> str:
        cap = "∞" if self.cap is None else f"{self.cap:g}"
        return f"PersistentLedger(run ε={self.total_epsilon:g} / {cap}, events={len(self._events)}, units={len(self._units)})"


def open_corpus_ledger(corpus: Any, *, tool: str, run: str | None = None, cap: float | None = DEFAULT_EPSILON_CAP,
                       store: LedgerStore | None = None, by_person: bool | None = None,
                       units: Sequence[str] | None = None) -> PersistentLedger:
    """The persistent ledger seen from one run on ``corpus``: a :class:`~dpkps_core.corpus.Corpus` (its units are
    :func:`dpkps_core.ledger_store.units.unit_strings`, by person when ``by_person`` — by default when it has a person
    column), a sequence of unit strings, or their precomputed keys (a streamed corpus's ``units``:
    :func:`~dpkps_core.ledger_store.rules.is_key_source`); ``units`` overrides them. ``cap`` is the run's cap
    setting (module docstring: it caps the units new to the ledger and this run's own total; it changes no stored
    cap — use :meth:`PersistentLedger.set_unit_cap` for that)."""
    person = bool(by_person)
    if units is None:
        if hasattr(corpus, "texts") and hasattr(corpus, "labels"):
            person = getattr(corpus, "persons", None) is not None if by_person is None else bool(by_person)
            units = unit_strings(corpus, by_person=person)
        elif isinstance(corpus, str):
            raise ParameterError("open_corpus_ledger needs a corpus or its unit strings, not one string.")
        elif is_key_source(corpus):
            units = corpus
        else:
            units = list(corpus)
    return PersistentLedger(store or LedgerStore(), units, tool=tool, run=run, cap=cap,
                            unit_name="person" if person else "document")
