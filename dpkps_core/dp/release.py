"""One release, in the one order (docs/DESIGN.md §2.0 "charge first"; [Filter]): admit → compute on the admitted →
charge → noise.

Every release of a private statistic — the DP-KPS steps (Ṽ, the densities), the DP count, private prediction and
AugPE+Ṽ — goes through :func:`release`, which alone decides the order of its four steps:

1. **admit**: the ledger (an individual privacy filter) admits the units of the release's input for its ε —
   a unit whose spent ε plus this ε would pass its cap is left out, the others are charged now
   (:meth:`~dpkps_core.dp.ledger.PrivacyLedger.admission`; :func:`admit_units` for a list of unit strings);
2. **statistic**: the caller's statistic, computed on the admitted rows only;
3. **charge**: the release's frozen event (built from public input only, before step 1, so it can be recorded
   before any noise exists) is charged through the admission's ticket — it belongs to this admission and no other;
4. **draw**: the noise is drawn (the mechanism run with no ledger of its own: its event is already recorded).

Nothing is caught: a failure in step 2 leaves the admission charged (a persistent ledger charged the admitted units
in step 1), and a failure in step 4 — a crash in the sampler, a cancelled run, a refusal decided from the noisy
values — leaves the event charged too. Refusals on public input belong before step 1 (they cost nothing).

An admitted input without a ticket (no ledger: the caller accounts for the release elsewhere, e.g. an ε sweep or an
event a caller charged for a larger release) is computed and drawn with nothing charged here.

What every release needs besides its statistic travels as one :class:`ReleaseContext`: the ledger that admits and
charges (or None) and the noise source that draws. A release function takes ``context=`` instead of a ledger and a
noise source apart; its draw step runs under :meth:`ReleaseContext.for_draw` (the same noise, no ledger).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Generic, Protocol, Sequence, TypeVar

import numpy as np

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import MAX_ROW_FACTOR, AdmissionTicket, PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError, ParameterTypeError


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseContext:
    """What every release needs besides its statistic (docs/DESIGN.md §2.0 "charge first"): the ledger that admits
    the release's units and is charged its event BEFORE the noise is drawn, and the noise source that draws it.

    One frozen object, handed down from the caller that owns the ledger and the noise (the app's session, a CLI
    command, a comparison) to the mechanism that draws, so that no function takes the two apart.

    Args:
        noise: all randomness of the run (:class:`~dpkps_core.dp.rng.NoiseSource`: the DP noise, random features,
            sequence sampling).
        ledger: the privacy ledger (an individual privacy filter, docs/DESIGN.md §2.0) that admits and is charged;
            None when the release is accounted elsewhere — an ε sweep, or an event a caller has already charged
            (e.g. :func:`release` charged it before the draw: :meth:`for_draw`).

    Raises:
        ParameterTypeError: ``noise`` is not a NoiseSource, or ``ledger`` is neither a PrivacyLedger nor None.
    """

    noise: NoiseSource
    ledger: PrivacyLedger | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.noise, NoiseSource):
            raise ParameterTypeError(f"A release context's noise must be a NoiseSource, got "
                                     f"{type(self.noise).__name__}.")
        if self.ledger is not None and not isinstance(self.ledger, PrivacyLedger):
            raise ParameterTypeError(f"A release context's ledger must be a PrivacyLedger or None, got "
                                     f"{type(self.ledger).__name__}.")

    def for_draw(self) -> "ReleaseContext":
        """The context of a release's step 4 (the draw): the same noise source, no ledger — the release's event is
        already charged, and charging it again would count the release twice."""
        return self if self.ledger is None else ReleaseContext(noise=self.noise)

    def require_ledger(self, what: str) -> PrivacyLedger:
        """The ledger of a release that must be accounted here (``what``: the release, for the message)."""
        if self.ledger is None:
            raise ParameterError(f"{what} needs the ledger that records its releases.")
        return self.ledger


class Admitted(Protocol):
    """What step 1 hands on: anything that carries the release's admission ticket (None: nothing to charge here)."""

    @property
    def ticket(self) -> AdmissionTicket | None: ...


_A = TypeVar("_A", bound=Admitted)
_S = TypeVar("_S")
_R = TypeVar("_R")


@dataclasses.dataclass(frozen=True)
class AdmittedUnits:
    """A release's input after the filter: the admitted positions (ascending), the input's size and the ticket.
    PRIVATE and local: which rows took part, and how many were left out, are never released."""

    index: np.ndarray
    size: int
    ticket: AdmissionTicket | None

    @classmethod
    def every(cls, size: int) -> "AdmittedUnits":
        """All ``size`` positions, no ticket: a release whose ε is accounted elsewhere (no ledger here)."""
        return cls(np.arange(int(size)), int(size), None)

    @property
    def left_out(self) -> int:
        """How many positions of the input were left out (a PRIVATE, local figure)."""
        return self.size - len(self.index)

    @property
    def everyone(self) -> bool:
        """Whether no position was left out (then the input can be used as it is, without a copy)."""
        return len(self.index) == self.size

    def take(self, values: Sequence[_S]) -> list[_S]:
        """The admitted entries of ``values`` (one per position of the input), in order."""
        if len(values) != self.size:
            raise ParameterError(f"{len(values)} values for an input of {self.size} positions.")
        return [values[i] for i in self.index.tolist()]

    def rows(self, *columns: Sequence[Any]) -> tuple[Sequence[Any], ...]:
        """The admitted entries of each of ``columns`` (each one value per position of the input) — the columns
        themselves, uncopied, when nobody was left out."""
        for column in columns:
            if len(column) != self.size:
                raise ParameterError(f"{len(column)} values for an input of {self.size} positions.")
        return columns if self.everyone else tuple(self.take(column) for column in columns)


def admit_units(ledger: PrivacyLedger | None, units: Sequence[str], *, epsilon: float, what: str,
                row_factor: float = MAX_ROW_FACTOR) -> AdmittedUnits:
    """Step 1 for an input given as one unit string per row: the ledger's admission of ``units`` to a release of
    ``epsilon`` (over-cap units left out, the admitted ones charged now). ``row_factor``: what a person-unit release
    can cost one row of the person, per ε (docs/PRIVACY.md "Units and group privacy"). Without a ledger every row
    takes part and there is no ticket. ``units`` is handed to the ledger as it is (no copy of the private strings is
    made here); a single string is refused (it is not one unit per row)."""
    if isinstance(units, (str, bytes)):
        raise ParameterError("A release is admitted with one unit string per row, not one string.")
    size = len(units)
    if ledger is None:
        return AdmittedUnits.every(size)
    if not isinstance(ledger, PrivacyLedger):
        raise ParameterError("A release is admitted through a PrivacyLedger.")
    ticket = ledger.admission(units, float(epsilon), what=what, row_factor=row_factor)
    if np.shape(ticket.mask) != (size,):
        raise ParameterError("The ledger's admission mask does not match the release's input.")
    return AdmittedUnits(np.flatnonzero(ticket.mask), size, ticket)


@dataclasses.dataclass(frozen=True)
class Release(Generic[_A, _S, _R]):
    """A release's outcome: what was admitted and the statistic computed on it (both PRIVATE, local: never shown,
    logged or written), the events charged for it (none when nothing was charged here) and the drawn value (the DP
    output)."""

    admitted: _A
    statistic: _S
    events: tuple[PrivacyEvent, ...]
    value: _R


def release(admit: Callable[[], _A], *, statistic: Callable[[_A], _S], event: PrivacyEvent | Sequence[PrivacyEvent],
            draw: Callable[[_A, _S], _R]) -> Release[_A, _S, _R]:
    """Run one release in the order of docs/DESIGN.md §2.0 (module docstring): ``admit()``; ``statistic(admitted)``
    on the admitted rows only; ``event`` charged through ``admitted.ticket`` (several events — e.g. a DP count and
    the generation it sizes, admitted once for their sum — in order); then ``draw(admitted, statistic)``, the noise.
    The events are built by the caller from public input only, before anything is admitted (a malformed one is
    refused here before the admission, at no cost).

    ``draw`` runs the mechanism WITHOUT a ledger: the event is already charged, and charging it again would count
    the release twice."""
    events = (event,) if isinstance(event, PrivacyEvent) else tuple(event)
    if not events or not all(isinstance(e, PrivacyEvent) for e in events):
        raise ParameterError("A release charges one PrivacyEvent or more.")
    admitted = admit()
    ticket = admitted.ticket
    if ticket is not None and not isinstance(ticket, AdmissionTicket):
        raise ParameterError("A release charges its events through its admission's ticket.")
    value = statistic(admitted)
    if ticket is None:
        events = ()
    for e in events:
        ticket.charge(e)  # type: ignore[union-attr]
    return Release(admitted, value, events, draw(admitted, value))
