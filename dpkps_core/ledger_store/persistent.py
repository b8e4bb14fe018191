"""The persistent ledger as a :class:`~dpkps_core.dp.ledger.PrivacyLedger` (DESIGN §2.0; see
:mod:`dpkps_core.ledger_store`): the run's view of the corpus's units and the one way to open it."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Sequence

import numpy as np

from dpkps_core.config import DEFAULT_EPSILON_CAP
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import _FLOAT_SLACK, PrivacyLedger
from dpkps_core.errors import ParameterError
from dpkps_core.ledger_store.folder import unique_keys
from dpkps_core.ledger_store.records import CorpusView, RecordedEvent, _check_cap, _check_epsilon, _check_label
from dpkps_core.ledger_store.store import LedgerStore


# ------------------------------------------------------------------------------------------ ledger

@dataclasses.dataclass
class _Pending:
    release_id: int
    remaining: float


class PersistentLedger(PrivacyLedger):
    """A :class:`PrivacyLedger` backed by the persistent unit ledger (drop-in for every mechanism).

    * :meth:`admit` is the individual filter (module docstring): it charges the admitted units at once and returns
      the per-document mask; :meth:`charge` attaches the frozen event to the admission before it (or, with none,
      charges every unit the ledger was opened with).
    * ``cap`` is this run's cap setting (public): the cap of units new to the ledger and the bound of
      :meth:`require` on this run's own total. ``events``, ``total_epsilon``, ``by_step`` and ``to_dict()`` are
      this run's own events (what its privacy report lists).
    * :meth:`view` (and ``corpus_epsilon``, ``corpus_releases``, ``unit_caps``) describe the opened corpus's
      units across every release — PRIVATE, local figures, never part of ``to_dict()``.

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
        self._units = list(units)
        self._corpus_keys: np.ndarray | None = None
        self._view_cache: tuple[Any, CorpusView] | None = None
        self._pending: list[_Pending] = []
        self._pending_lock = threading.Lock()
        self.tool = _check_label(tool, "tool", optional=False)
        self.run = run
        self.unit_name = unit_name  # "document" or "person": the unit's name in messages

    @property
    def run(self) -> str | None:
        return self._run

    @run.setter
    def run(self, value: str | None) -> None:
        self._run = _check_label(value, "run name", optional=True)

    @property
    def store(self) -> LedgerStore:
        return self._store

    @property
    def new_unit_cap(self) -> float:
        """The cap a unit never seen before gets from this run: its cap setting, else the default."""
        return DEFAULT_EPSILON_CAP if self.cap is None else float(self.cap)

    def _keys_of_corpus(self) -> np.ndarray:
        if self._corpus_keys is None:
            self._corpus_keys = unique_keys(self._store.keys(self._units))[0]
        return self._corpus_keys

    # ---- the filter
    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        """Leave out the units whose spend + ``epsilon`` would exceed their cap; charge the others now (DESIGN
        §2.0). A whole release is refused only on public input: an invalid ``epsilon``, or one that would take
        this run's own total over its cap setting. Repeated strings are one unit (a person's documents), charged
        once; the mask is per position of ``units``."""
        epsilon = _check_epsilon(epsilon)
        self.require(epsilon, what)
        if isinstance(units, str):
            raise ParameterError("admit needs one unit string per document, not one string.")
        keys, inverse = unique_keys(self._store.keys(list(units)))
        rid, ok = self._store.admit(keys, epsilon, new_cap=self.new_unit_cap, tool=self.tool, run=self.run, what=what)
        with self._pending_lock:
            self._pending.append(_Pending(rid, epsilon))
        self._view_cache = None
        return ok[inverse] if len(inverse) else np.zeros(0, dtype=bool)

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        """Record ``event`` now, before its noise is drawn: attached to this run's admission it belongs to (the
        oldest one with ε left for it), or — with no admission — charged to every unit the ledger was opened with.
        Refused only on public input (this run's cap setting); an event larger than its admission is a programming
        error (:class:`ParameterError`; the admitted units stay charged)."""
        if not isinstance(event, PrivacyEvent):
            raise ParameterError("Only a PrivacyEvent can be charged to a ledger.")
        self.require(event.epsilon, f"{event.step} ({event.mechanism})")
        with self._pending_lock:
            target = next((p for p in self._pending if event.epsilon <= p.remaining + _FLOAT_SLACK), None)
            if target is None and self._pending:
                raise ParameterError(
                    f"{event.step} ({event.mechanism}) charges ε = {event.epsilon:g}, more than its admission "
                    f"reserved ({max(p.remaining for p in self._pending):g}); admit the release's ε first.")
            if target is not None:
                target.remaining -= event.epsilon
                if target.remaining <= _FLOAT_SLACK:
                    self._pending.remove(target)
        if target is None:
            rid, _ = self._store.admit(self._keys_of_corpus(), event.epsilon, new_cap=self.new_unit_cap, tool=self.tool,
                                       run=self.run, what=f"{event.step} ({event.mechanism})", force=True)
        else:
            rid = target.release_id
        self._store.record_event(rid, event, tool=self.tool, run=self.run)
        self._events.append(event)
        self._view_cache = None
        return event

    # ---- caps
    def set_unit_cap(self, cap: float | None) -> int:
        """Set the cap of every unit of the opened corpus (recorded with this ledger's tool and run); ``None``
        removes it. Returns how many units' cap changed."""
        changed = self._store.set_cap(self._keys_of_corpus(), cap, tool=self.tool, run=self.run)
        self._view_cache = None
        return changed

    # ---- views (PRIVATE, local)
    def view(self) -> CorpusView:
        """The opened corpus's units as the ledger knows them now (cached until the store changes)."""
        changes = self._store.changes()
        key = (changes, self.cap)
        if self._view_cache is None or self._view_cache[0] != key:
            self._view_cache = (key, self._store.view(self._keys_of_corpus(), new_unit_cap=self.new_unit_cap))
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
    :func:`dpkps_core.budget.unit_strings`, by person when ``by_person`` — by default when it has a person
    column) or a sequence of unit strings; ``units`` overrides both. ``cap`` is the run's cap setting (module
    docstring: it caps the units new to the ledger and this run's own total; it changes no stored cap — use
    :meth:`PersistentLedger.set_unit_cap` for that)."""
    person = bool(by_person)
    if units is None:
        if hasattr(corpus, "texts") and hasattr(corpus, "labels"):
            from dpkps_core.budget import unit_strings

            person = getattr(corpus, "persons", None) is not None if by_person is None else bool(by_person)
            units = unit_strings(corpus, by_person=person)
        elif isinstance(corpus, str):
            raise ParameterError("open_corpus_ledger needs a corpus or its unit strings, not one string.")
        else:
            units = list(corpus)
    return PersistentLedger(store or LedgerStore(), units, tool=tool, run=run, cap=cap,
                            unit_name="person" if person else "document")
