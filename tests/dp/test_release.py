"""The one release order (dpkps_core.dp.release; docs/DESIGN.md §2.0): admit → statistic on the admitted → charge →
noise, and the one cap check (dpkps_core.dp.ledger.within_cap).

A recording ledger and noise source log the order of calls; the persistent ledger shows that an over-cap unit is
left out of the statistic and that a failure after the admission leaves the admitted units charged."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.dp.count import count_event
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger, require_public, within_cap, SubLedger
from dpkps_core.dp.release import AdmittedUnits, ReleaseContext, admit_units, release
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError, ParameterTypeError, PrivacyBudgetError
from dpkps_core.ledger_store.units import document_units

UNITS = document_units([f"note {i} about the river" for i in range(6)], ["a"] * 6)
EVENT = count_event(epsilon=0.5)


class Crash(RuntimeError):
    """Raised from a statistic or a noise draw (a crashed step)."""


class RecordingLedger(PrivacyLedger):
    """An in-memory ledger that logs admissions and charges, and leaves out the positions in ``deny``."""

    def __init__(self, log: list[str], *, cap: float | None = None, deny: Sequence[int] = ()) -> None:
        super().__init__(cap)
        self.log, self.deny = log, set(deny)

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        mask = super().admit(units, epsilon, what=what)
        mask[list(self.deny)] = False
        self.log.append("admit")
        return mask

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        self.log.append("charge")
        return super().charge(event)


class RecordingNoise(NoiseSource):
    def __init__(self, log: list[str], *, crash: bool = False) -> None:
        super().__init__(0, sampler="numpy")
        self.log, self.crash = log, crash

    def laplace(self, scale: float, size: Any = None, *, integer_valued: bool = False) -> np.ndarray:
        self.log.append("noise")
        if self.crash:
            raise Crash("the sampler crashed")
        return super().laplace(scale, size, integer_valued=integer_valued)


def _count(log: list[str], seen: list[list[str]], noise: NoiseSource, *, fail_statistic: bool = False):
    """The helper's four steps around a Laplace count of the admitted units (each step logged)."""
    def statistic(admitted: AdmittedUnits) -> int:
        log.append("statistic")
        seen.append(admitted.take(UNITS))
        if fail_statistic:
            raise Crash("the statistic failed")
        return len(admitted.index)

    def draw(admitted: AdmittedUnits, n: int) -> float:
        return n + float(noise.laplace(2.0, 1)[0])
    return statistic, draw


def test_the_helper_admits_computes_on_the_admitted_charges_then_draws() -> None:
    log: list[str] = []
    seen: list[list[str]] = []
    ledger = RecordingLedger(log, cap=3.0, deny=[2])
    statistic, draw = _count(log, seen, RecordingNoise(log))
    done = release(lambda: admit_units(ledger, UNITS, epsilon=0.5, what="a count"), statistic=statistic,
                   event=EVENT, draw=draw)
    assert log == ["admit", "statistic", "charge", "noise"]
    assert seen == [[u for i, u in enumerate(UNITS) if i != 2]]  # the left-out position never reaches the statistic
    assert done.statistic == 5 and done.admitted.left_out == 1 and done.events == (EVENT,)
    assert ledger.events == (EVENT,) and done.admitted.ticket.events == (EVENT,)


def test_a_failure_after_the_charge_leaves_the_event_charged() -> None:
    log: list[str] = []
    ledger = RecordingLedger(log, cap=3.0)
    statistic, draw = _count(log, [], RecordingNoise(log, crash=True))
    with pytest.raises(Crash):
        release(lambda: admit_units(ledger, UNITS, epsilon=0.5, what="a count"), statistic=statistic, event=EVENT,
                draw=draw)
    assert log == ["admit", "statistic", "charge", "noise"] and ledger.events == (EVENT,)


def test_a_statistic_failure_leaves_the_admitted_units_charged_and_draws_no_noise() -> None:
    """The persistent ledger charges the admitted units at admission: a statistic that fails afterwards cannot undo
    that (charge first), and no event is recorded nor noise drawn for the failed release."""
    store = ls.LedgerStore()
    ledger = ls.open_corpus_ledger(UNITS, tool="test", store=store, cap=1.0)
    log: list[str] = []
    statistic, draw = _count(log, [], RecordingNoise(log), fail_statistic=True)
    with pytest.raises(Crash):
        release(lambda: admit_units(ledger, UNITS, epsilon=0.75, what="a count"), statistic=statistic, event=EVENT,
                draw=draw)
    assert log == ["statistic"] and ledger.events == ()
    assert ls.open_corpus_ledger(UNITS, tool="test", store=store).view().largest_spend == pytest.approx(0.75)


def test_an_over_cap_unit_is_left_out_of_the_statistic_and_not_charged() -> None:
    store = ls.LedgerStore()
    first = ls.open_corpus_ledger(UNITS[:1], tool="test", store=store, cap=1.0)
    release(lambda: admit_units(first, UNITS[:1], epsilon=0.75, what="a count"), statistic=lambda a: len(a.index),
            event=count_event(epsilon=0.75), draw=lambda a, n: n)
    ledger = ls.open_corpus_ledger(UNITS, tool="test", store=store, cap=1.0)
    seen: list[list[str]] = []
    statistic, draw = _count([], seen, NoiseSource(1))
    done = release(lambda: admit_units(ledger, UNITS, epsilon=0.5, what="a count"), statistic=statistic,
                   event=EVENT, draw=draw)
    assert seen == [UNITS[1:]] and done.admitted.left_out == 1  # 0.75 + 0.5 would pass the unit's cap of 1
    assert ls.open_corpus_ledger(UNITS[:1], tool="test", store=store).view().largest_spend == pytest.approx(0.75)
    assert ls.open_corpus_ledger(UNITS[1:], tool="test", store=store).view().largest_spend == pytest.approx(0.5)
    assert ledger.events == (EVENT,)


def test_without_a_ledger_everyone_takes_part_and_nothing_is_charged() -> None:
    log: list[str] = []
    statistic, draw = _count(log, [], RecordingNoise(log))
    done = release(lambda: admit_units(None, UNITS, epsilon=0.5, what="a count"), statistic=statistic, event=EVENT,
                   draw=draw)
    assert log == ["statistic", "noise"] and done.events == () and done.admitted.everyone
    assert AdmittedUnits.every(3).index.tolist() == [0, 1, 2]


def test_admission_refusals_are_specific() -> None:
    with pytest.raises(ParameterError, match="one unit string per row"):
        admit_units(PrivacyLedger(), "document\x1fone text", epsilon=1.0, what="a count")
    with pytest.raises(ParameterError, match="through a PrivacyLedger"):
        admit_units(object(), UNITS, epsilon=1.0, what="a count")  # type: ignore[arg-type]
    with pytest.raises(PrivacyBudgetError, match="over the budget cap of 1"):  # the run's cap: public, nothing spent
        admit_units(PrivacyLedger(1.0), UNITS, epsilon=2.0, what="a count")
    with pytest.raises(ParameterError, match="values for an input of 6"):
        AdmittedUnits.every(6).take([1, 2])
    with pytest.raises(ParameterError, match="2 values for an input of 6"):
        AdmittedUnits.every(6).rows(UNITS, [1, 2])


def test_rows_keeps_the_columns_uncopied_when_nobody_is_left_out() -> None:
    texts, labels = list(UNITS), ["a", "b"] * 3
    everyone = AdmittedUnits.every(6)
    kept_texts, kept_labels = everyone.rows(texts, labels)
    assert kept_texts is texts and kept_labels is labels
    some = AdmittedUnits(np.array([1, 4]), 6, None)
    assert some.rows(texts, labels) == ([UNITS[1], UNITS[4]], ["b", "a"]) and some.left_out == 4


def test_several_events_are_charged_in_order_from_one_admission_before_the_noise() -> None:
    log: list[str] = []
    ledger = RecordingLedger(log)
    second = count_event(epsilon=0.25, step="size again")
    statistic, draw = _count(log, [], RecordingNoise(log))
    done = release(lambda: admit_units(ledger, UNITS, epsilon=0.75, what="a count and more"), statistic=statistic,
                   event=(EVENT, second), draw=draw)
    assert log == ["admit", "statistic", "charge", "charge", "noise"]
    assert ledger.events == (EVENT, second) == done.events and done.admitted.ticket.remaining_epsilon == 0


def test_a_malformed_event_is_refused_before_anything_is_admitted() -> None:
    log: list[str] = []
    with pytest.raises(ParameterError, match="charges one PrivacyEvent or more"):
        release(lambda: admit_units(RecordingLedger(log), UNITS, epsilon=0.5, what="a count"),
                statistic=lambda a: 0, event=EVENT.to_dict(), draw=lambda a, n: n)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="charges one PrivacyEvent or more"):
        release(lambda: admit_units(RecordingLedger(log), UNITS, epsilon=0.5, what="a count"),
                statistic=lambda a: 0, event=(), draw=lambda a, n: n)
    assert log == []


def test_the_ticket_refuses_an_event_over_what_the_admission_reserved() -> None:
    ledger = PrivacyLedger()
    with pytest.raises(ParameterError, match="more than its admission reserved"):
        release(lambda: admit_units(ledger, UNITS, epsilon=0.25, what="a count"), statistic=lambda a: 0,
                event=EVENT, draw=lambda a, n: n)
    assert ledger.events == ()


# ------------------------------------------------------------------------------------------ the one cap check

def test_within_cap_is_the_one_comparison_for_scalars_arrays_and_no_cap() -> None:
    assert within_cap(0.5, 0.5, 1.0) is True and within_cap(0.5, 0.5 + 1e-12, 1.0) is True  # float slack
    assert within_cap(0.5, 0.6, 1.0) is False and within_cap(1e9, 1e9, None) is True
    spent, caps = np.array([0.0, 0.9, 0.2]), np.array([1.0, 1.0, np.inf])
    assert within_cap(spent, 0.5, caps).tolist() == [True, False, True]
    ledger = PrivacyLedger(1.0, [count_event(epsilon=0.75)])
    assert ledger.can_afford(0.25) and not ledger.can_afford(0.5)


def test_require_public_checks_every_cap_up_a_chain_of_sub_ledgers() -> None:
    parent = PrivacyLedger(1.0, [count_event(epsilon=0.75)])
    part = SubLedger(parent, cap=5.0)
    require_public(part, 0.25, "a step")
    with pytest.raises(PrivacyBudgetError, match="taking the total to 1.25, over the budget cap of 1"):
        require_public(part, 0.5, "a step")
    with pytest.raises(PrivacyBudgetError, match="over the budget cap of 0.1"):  # the part's own cap
        require_public(SubLedger(PrivacyLedger(), cap=0.1), 0.5, "a step")
    with pytest.raises(PrivacyBudgetError, match="taking its part's total to 0.5, over the budget cap of 0.1"):
        SubLedger(PrivacyLedger(), cap=0.1).require(0.5, "a step")


# ------------------------------------------------------------------------------------------ the release context

def test_a_release_context_is_frozen_keyword_only_and_typed() -> None:
    """What every release needs besides its statistic travels as one frozen object (issue 32 §4): a NoiseSource and
    a PrivacyLedger or None, by keyword only; anything else is refused by type, before any release starts."""
    noise, ledger = NoiseSource(1), PrivacyLedger()
    ctx = ReleaseContext(noise=noise, ledger=ledger)
    assert ctx.noise is noise and ctx.ledger is ledger and ReleaseContext(noise=noise).ledger is None
    with pytest.raises(AttributeError):
        ctx.ledger = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        ReleaseContext(noise, ledger)  # type: ignore[misc]
    for bad in (dict(noise=None), dict(noise=np.random.default_rng(0)), dict(noise=noise, ledger="ledger"),
                dict(noise=noise, ledger=[])):
        with pytest.raises(ParameterTypeError, match="release context's"):
            ReleaseContext(**bad)  # type: ignore[arg-type]
    assert issubclass(ParameterTypeError, ParameterError) and issubclass(ParameterTypeError, TypeError)


def test_a_release_contexts_draw_step_has_the_same_noise_and_no_ledger() -> None:
    """Step 4 runs the mechanism without a ledger: the event is already charged (charging it twice would count the
    release twice); the noise source is the same object, so the draws continue in the same order."""
    noise, ledger = NoiseSource(1), PrivacyLedger()
    drawing = ReleaseContext(noise=noise, ledger=ledger).for_draw()
    assert drawing.noise is noise and drawing.ledger is None and drawing.for_draw() is drawing
    assert ReleaseContext(noise=noise, ledger=ledger).require_ledger("a report") is ledger
    with pytest.raises(ParameterError, match="^a report needs the ledger"):
        drawing.require_ledger("a report")
