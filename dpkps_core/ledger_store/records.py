"""What the persistent ledger returns (docs/DESIGN.md §2.0; see :mod:`dpkps_core.ledger_store`): recorded events,
releases, cap changes and a corpus's view — PRIVATE, local figures — and the checks of the public labels and caps."""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from typing import Any

import numpy as np

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import MAX_ROW_FACTOR, within_cap
from dpkps_core.dp.validation import check_cap, check_epsilon
from dpkps_core.errors import ParameterError
from dpkps_core.ledger_store.folder import _NO_CAP


# ------------------------------------------------------------------------------------------ records

@dataclasses.dataclass(frozen=True)
class RecordedEvent:
    """One charged privacy event: what was spent, when it was recorded, and which tool/run spent it."""

    event: PrivacyEvent
    recorded: str
    tool: str
    run: str | None = None
    id: int | None = None  # the store's id of the event (a run's ledger record names it)

    def to_dict(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "tool": self.tool, "run": self.run, "event": self.event.to_dict()}


@dataclasses.dataclass(frozen=True)
class Release:
    """One admission to a release: when, by whom, for what and at which ε; how many units took part in all and how
    many of the viewed corpus's units (``in_corpus``, PRIVATE); the events charged to it (none when the release
    failed or was cancelled after admission — it stays charged). ``filtered`` is False for a charge that came
    with no admission (every unit of the opened corpus charged)."""

    id: int
    recorded: str
    tool: str
    run: str | None
    what: str
    epsilon: float
    units: int
    left_out: int
    filtered: bool
    in_corpus: int
    events: tuple[RecordedEvent, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "tool": self.tool, "run": self.run, "what": self.what,
                "epsilon": self.epsilon, "units_in_corpus": self.in_corpus, "filtered": self.filtered,
                "events": [e.to_dict() for e in self.events]}


@dataclasses.dataclass(frozen=True)
class CapChange:
    """One recorded cap change that applied to some of the viewed corpus's units (``in_corpus``)."""

    recorded: str
    tool: str
    run: str | None
    cap: float | None
    previous_min: float | None
    previous_max: float | None
    in_corpus: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CorpusView:
    """What the ledger knows about one corpus's units (PRIVATE, local: never export it).

    ``spent`` / ``caps`` / ``in_ledger`` hold one entry per distinct unit of the corpus (a unit never seen has
    spent 0 and the cap it would get now, ``new_unit_cap``; ``inf`` = no cap). For persons, ``spent`` is the
    person's loss L(p) and ``row_room`` the smallest room per row left among their rows' document keys
    ((cap − spent) / the key's rows in the corpus; ``inf`` without rows) — what a person-unit release charges each
    row must fit it (:mod:`~dpkps_core.ledger_store.rules`)."""

    units: int
    known: int
    spent: np.ndarray
    caps: np.ndarray
    in_ledger: np.ndarray
    new_unit_cap: float | None
    releases: tuple[Release, ...]
    cap_history: tuple[CapChange, ...]
    row_room: np.ndarray | None = None

    @property
    def largest_spend(self) -> float:
        return float(self.spent.max()) if self.units else 0.0

    @property
    def cap_range(self) -> tuple[float | None, float | None]:
        """(smallest, largest) cap among the corpus's units already in the ledger (``new_unit_cap`` when none is);
        ``None`` stands for no cap."""
        if not self.known:
            return self.new_unit_cap, self.new_unit_cap
        caps = self.caps[self.in_ledger]
        lo, hi = float(caps.min()), float(caps.max())
        return (None if math.isinf(lo) else lo), (None if math.isinf(hi) else hi)

    def left_out(self, epsilon: float, *, row_factor: float = MAX_ROW_FACTOR) -> int:
        """How many of the corpus's units could not take part in a release of ``epsilon`` now (for persons, also
        when a row cannot take ``row_factor`` × ``epsilon``)."""
        out = ~within_cap(self.spent, float(epsilon), self.caps)
        if self.row_room is not None:
            out |= ~within_cap(0.0, float(row_factor) * float(epsilon), self.row_room)
        return int(np.count_nonzero(out))

    @property
    def events(self) -> tuple[RecordedEvent, ...]:
        return tuple(e for r in self.releases for e in r.events)


def _check_label(value: str | None, what: str, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ParameterError(f"The ledger's {what} must be a short non-empty text, got {value!r}.")
    if "/" in value or "\\" in value:
        raise ParameterError(f"The ledger's {what} is a name, not a path (paths are never recorded): {value!r}.")
    return value.strip()


def _check_cap(cap: float | None) -> float | None:
    return check_cap(cap)


def _check_epsilon(epsilon: float) -> float:
    return check_epsilon(epsilon, "A release's ε")


def _stored_cap(cap: float | None) -> float:
    return _NO_CAP if cap is None else float(cap)


def _shown_cap(cap: float | None) -> float | None:
    return None if cap is None or math.isinf(cap) else float(cap)



def _normalise_legacy(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(str(text).split()))


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "items"):
        return dict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)

