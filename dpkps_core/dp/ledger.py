"""Privacy ledger: immutable privacy events composed by an accountant (docs/DESIGN.md §2).

In the style of Google's ``dp_accounting``: each mechanism run produces a frozen, typed event
(:mod:`dpkps_core.dp.events`); the :class:`PrivacyLedger` composes them with basic (sequential) composition.
Parallel composition over disjoint documents (e.g. one DP-KDE per class) is a single event whose ε is that of one
part.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.validation import check_cap
from dpkps_core.errors import ParameterError, PrivacyBudgetError

_FLOAT_SLACK = 1e-9
#: The one default cap on the ε any one document (or person, with a person column) may spend over all releases, app
#: and CLI (docs/DESIGN.md §2.0: the persistent ledger is an individual privacy filter). The app's cap field and the CLI's
#: --epsilon-cap start from it; 20 covers a few runs at the paper's totals of 6–15 (docs/PRIVACY.md "Per-document
#: budgets").
DEFAULT_EPSILON_CAP = 20.0
MAX_ROW_FACTOR = 2.0  # the most a person-unit release can cost one row of the person (docs/PRIVACY.md)


def within_cap(spent: Any, epsilon: Any, cap: Any) -> Any:
    """THE cap check (docs/DESIGN.md §2.0): whether spending ``epsilon`` on top of ``spent`` stays within ``cap``,
    up to floating-point slack (ε's are computed, not typed in). ``cap`` None means no cap.

    Every "would this spend exceed the cap" asks it: a run's ledger against its cap, an admission against the ε it
    reserved, the persistent filter per unit key (``dpkps_core.ledger_store``: arrays of spent ε and caps, one per
    key). Scalars give a bool; arrays give the element-wise boolean array (a unit whose stored cap is ∞ always fits).
    """
    if cap is None:
        return True
    out = np.add(spent, epsilon) <= np.add(cap, _FLOAT_SLACK)
    return bool(out) if np.ndim(out) == 0 else out


def _over_cap(what: str, epsilon: float, total: float, cap: float | None,
              whose: str = "the total") -> PrivacyBudgetError:
    """The refusal of a spend over a run's (or a part's) cap: nothing was spent."""
    return PrivacyBudgetError(
        f"Running {what} would spend ε = {epsilon:g}, taking {whose} to {total + epsilon:g}, over the budget cap "
        f"of {cap:g}; nothing was spent. Raise the cap or lower ε.")


class PrivacyLedger:
    """Accountant for one run: basic composition of :class:`PrivacyEvent` s under an optional ε cap.

    ``charge`` refuses (raises :class:`PrivacyBudgetError`) *before* anything is recorded when the event would
    take the total over the cap, so a caller checks affordability, runs the mechanism, then charges — or uses
    :meth:`require` first and :meth:`charge` after the release.
    """

    def __init__(self, cap: float | None = None, events: Iterable[PrivacyEvent] = ()) -> None:
        self._cap = check_cap(cap)
        self._events: list[PrivacyEvent] = list(events)

    @property
    def cap(self) -> float | None:
        return self._cap

    @cap.setter
    def cap(self, value: float | None) -> None:
        self._cap = check_cap(value)

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        return tuple(self._events)

    @property
    def total_epsilon(self) -> float:
        return float(sum(e.epsilon for e in self._events))

    @property
    def total_delta(self) -> float:
        return float(sum(e.delta for e in self._events))

    @property
    def remaining(self) -> float | None:
        return None if self._cap is None else max(self._cap - self.total_epsilon, 0.0)

    def can_afford(self, epsilon: float) -> bool:
        return within_cap(self.total_epsilon, epsilon, self._cap)

    def require(self, epsilon: float, what: str = "this step") -> None:
        """Raise :class:`PrivacyBudgetError` if spending ``epsilon`` would exceed the cap."""
        if not self.can_afford(epsilon):
            raise _over_cap(what, epsilon, self.total_epsilon, self._cap)

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        self.require(event.epsilon, f"{event.step} ({event.mechanism})")
        self._events.append(event)
        return event

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        """Individual privacy filter, charge first (docs/DESIGN.md §2.0; Feldman & Zrnic 2021).

        ``units`` holds one identifying string per document of the release's input, in order (the documents of
        one person share the person's string; see ``dpkps_core.ledger_store.units.unit_strings``). Returns a boolean mask
        over ``units``: the documents that take part in a release of ``epsilon``. The admitted units are charged
        NOW, before the caller computes any statistic or draws noise; the caller then drops the others from the
        release's input and records the release's :class:`PrivacyEvent` with :meth:`charge`, also before noise.

        A whole release may be refused here only on public input (this run's own events and cap, ``epsilon``).
        This in-memory ledger keeps no per-unit history (a unit's spend within a run is at most the run's total,
        which the run's cap already bounds), so it admits every unit once :meth:`require` passes. The persistent
        ledger (``dpkps_core.ledger_store``) leaves out the units whose spend plus ``epsilon`` would exceed their
        cap, and charges the rest."""
        self.require(epsilon, what)
        return np.ones(len(units), dtype=bool)

    def admission(self, units: Sequence[str], epsilon: float, *, what: str = "this release",
                  row_factor: float = MAX_ROW_FACTOR) -> "AdmissionTicket":
        """The filter (:meth:`admit`) as one :class:`AdmissionTicket`: the admitted mask and the only object that
        charges this release's events (docs/DESIGN.md §2.0 charge first; issue 35 part 7). ``row_factor`` is what a
        person-unit release can cost one row of a person, per ε (≤ 2; a persistent ledger charges it to the rows'
        document keys). An in-memory ledger keeps no per-unit history: its ticket charges the ledger itself."""
        mask = np.asarray(self.admit(units, epsilon, what=what), dtype=bool)
        return AdmissionTicket(self, mask, epsilon, what=what, record=self.charge)

    def by_step(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self._events:
            out[e.step] = out.get(e.step, 0.0) + e.epsilon
        return out

    def copy(self) -> "PrivacyLedger":
        return PrivacyLedger(self._cap, self._events)

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon_total": self.total_epsilon,
            "delta_total": self.total_delta,
            "epsilon_cap": self._cap,
            "epsilon_by_step": self.by_step(),
            "events": [e.to_dict() for e in self._events],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PrivacyLedger":
        """Read :meth:`to_dict`'s output; each event comes back as its family's type (``PrivacyEvent.from_dict``)."""
        return cls(data.get("epsilon_cap"), [PrivacyEvent.from_dict(e) for e in data.get("events", [])])

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        cap = "∞" if self._cap is None else f"{self._cap:g}"
        return f"PrivacyLedger(ε={self.total_epsilon:g} / {cap}, events={len(self._events)})"


class SubLedger(PrivacyLedger):
    """One part of a larger account (e.g. one method of a comparison): its own events and cap, and every charge
    is also charged to ``parent`` (say the corpus's persistent ledger), whose cap is enforced too.

    :meth:`reuse` counts here an event the parent already holds (a release shared by two parts, such as one Ṽ
    used by two methods), so the parent — the joint cost — counts it once."""

    def __init__(self, parent: PrivacyLedger | None = None, cap: float | None = None) -> None:
        super().__init__(cap)
        if parent is not None and not isinstance(parent, PrivacyLedger):
            raise ParameterError("A sub-ledger's parent must be a PrivacyLedger.")
        self.parent = parent

    def can_afford(self, epsilon: float) -> bool:
        return super().can_afford(epsilon) and (self.parent is None or self.parent.can_afford(epsilon))

    def _require_own(self, epsilon: float, what: str) -> None:
        if not PrivacyLedger.can_afford(self, epsilon):
            raise _over_cap(what, epsilon, self.total_epsilon, self._cap, "its part's total")

    def require(self, epsilon: float, what: str = "this step") -> None:
        self._require_own(epsilon, what)
        if self.parent is not None:
            self.parent.require(epsilon, what)

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        self._require_own(event.epsilon, f"{event.step} ({event.mechanism})")
        if self.parent is not None:
            self.parent.charge(event)  # enforces the parent's cap (atomically for a persistent ledger)
        self._events.append(event)
        return event

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        """This part's own (public) cap, then the parent's filter: the parent decides and charges the units. The
        result is this part's :class:`AdmissionTicket` (read as the admitted mask; charge through it)."""
        return self.admission(units, epsilon, what=what)

    def admission(self, units: Sequence[str], epsilon: float, *, what: str = "this release",
                  row_factor: float = MAX_ROW_FACTOR) -> AdmissionTicket:
        """This part's own (public) cap, then the parent's admission; the ticket charges the parent's ticket and
        counts the event in this part."""
        self._require_own(epsilon, what)
        if self.parent is None:
            return AdmissionTicket(self, np.ones(len(units), dtype=bool), epsilon, what=what, record=self._own)
        outer = self.parent.admission(units, epsilon, what=what, row_factor=row_factor)

        def record(event: PrivacyEvent) -> None:
            self._require_own(event.epsilon, f"{event.step} ({event.mechanism})")
            outer.charge(event)
            self._events.append(event)

        return AdmissionTicket(self, outer.mask, epsilon, what=what, record=record)

    def _own(self, event: PrivacyEvent) -> None:
        self._require_own(event.epsilon, f"{event.step} ({event.mechanism})")
        self._events.append(event)

    def reuse(self, event: PrivacyEvent) -> PrivacyEvent:
        """Count ``event`` (already charged to the parent) in this part without charging the parent again."""
        self._require_own(event.epsilon, f"{event.step} ({event.mechanism})")
        self._events.append(event)
        return event


def require_public(ledger: PrivacyLedger, epsilon: float, what: str) -> None:
    """Refuse ``epsilon`` on PUBLIC facts only (docs/DESIGN.md §2.0): each ledger's own events against its own cap,
    up a chain of sub-ledgers (:class:`SubLedger`'s ``parent``). A corpus's history in a persistent ledger is not
    consulted here: whether a unit still has budget is the individual filter's business (admission), unit by unit.
    Raises :class:`PrivacyBudgetError` (nothing spent) where :func:`within_cap` says no."""
    current: PrivacyLedger | None = ledger
    while current is not None:
        if not PrivacyLedger.can_afford(current, epsilon):
            PrivacyLedger.require(current, epsilon, what)
        current = getattr(current, "parent", None)


class AdmissionTicket(PrivacyLedger):
    """One admission to one release (docs/DESIGN.md §2.0; issue 35 part 7): which input positions take part (``mask``),
    for how much ε, and the only way to charge the release's events — an event belongs to its admission by
    construction, never to another release's. Pass it as the ``ledger`` of the mechanism that computes the
    release on the admitted input: :meth:`charge` records the event with the admission (a persistent ledger's
    release row), refusing events beyond the ε the admission reserved. ``events`` are this release's events.

    A ticket admits nothing itself (:meth:`admit` and :meth:`admission` are refused)."""

    def __init__(self, owner: PrivacyLedger, mask: np.ndarray, epsilon: float, *, what: str,
                 record: Callable[[PrivacyEvent], Any]) -> None:
        super().__init__(None)
        if not isinstance(owner, PrivacyLedger):
            raise ParameterError("An admission ticket belongs to a PrivacyLedger.")
        self.owner = owner
        self.mask = np.asarray(mask, dtype=bool)
        self.mask.setflags(write=False)
        self.epsilon = float(epsilon)
        self.what = what
        self._record = record
        self._left = float(epsilon)
        self._lock = threading.Lock()

    @property
    def remaining_epsilon(self) -> float:
        """The ε this admission reserved that no event has been charged yet."""
        return max(self._left, 0.0)

    @property
    def cap(self) -> float | None:  # type: ignore[override]
        return self.owner.cap

    @cap.setter
    def cap(self, value: float | None) -> None:
        raise ParameterError("An admission ticket's cap is its ledger's; change the ledger's cap.")

    def can_afford(self, epsilon: float) -> bool:
        return within_cap(0.0, epsilon, self._left) and self.owner.can_afford(epsilon)

    def require(self, epsilon: float, what: str = "this step") -> None:
        if not within_cap(0.0, epsilon, self._left):
            raise ParameterError(f"{what} charges ε = {epsilon:g}, more than its admission reserved "
                                 f"({self.remaining_epsilon:g}); admit the release's ε first.")
        self.owner.require(epsilon, what)

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        """Record ``event`` with this admission (before its noise is drawn)."""
        if not isinstance(event, PrivacyEvent):
            raise ParameterError("Only a PrivacyEvent can be charged to a ledger.")
        with self._lock:
            if not within_cap(0.0, event.epsilon, self._left):
                raise ParameterError(
                    f"{event.step} ({event.mechanism}) charges ε = {event.epsilon:g}, more than its admission "
                    f"reserved ({self.remaining_epsilon:g}); admit the release's ε first.")
            self._record(event)
            self._left -= event.epsilon
            self._events.append(event)
        return event

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        raise ParameterError("An admission ticket charges one release; admit a new release through its ledger.")

    def admission(self, units: Sequence[str], epsilon: float, *, what: str = "this release",
                  row_factor: float = MAX_ROW_FACTOR) -> "AdmissionTicket":
        raise ParameterError("An admission ticket charges one release; admit a new release through its ledger.")

    def copy(self) -> PrivacyLedger:
        return PrivacyLedger(self.owner.cap, self._events)

    # the admitted mask, read like the boolean array ``admit`` returns
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.mask if dtype is None else self.mask.astype(dtype)

    def __iter__(self) -> Iterator[bool]:
        return iter(self.mask.tolist())

    def __getitem__(self, index: Any) -> Any:
        return self.mask[index]

    @property
    def dtype(self) -> np.dtype:
        return self.mask.dtype

    def tolist(self) -> list[bool]:
        return self.mask.tolist()

    def all(self) -> bool:
        return bool(self.mask.all())

    def any(self) -> bool:
        return bool(self.mask.any())

    def sum(self) -> int:
        return int(self.mask.sum())

    def __len__(self) -> int:
        return len(self.mask)

    def __repr__(self) -> str:
        return (f"AdmissionTicket({self.what!r}, ε={self.epsilon:g}, admitted={int(self.mask.sum())}/"
                f"{len(self.mask)}, events={len(self._events)})")
