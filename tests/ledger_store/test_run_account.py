"""A run's account and its reservation in the persistent ledger (docs/DESIGN.md §2.0; issue 35 parts 4, 7 and 8).

* Every charged event has a store id; a run's ledger record names the ids of the events its outputs carry, and its
  report is rebuilt from them (``events_ledger``) in any process — an id the store does not hold is refused.
* A run reserves its planned ε (ε_voc + ε_kde) for its units at its first release: two runs that interleave on the
  same documents can no longer starve each other's later step (without the reservation, the second run's first
  release takes the room the first run's densities needed).
* The DP forecast that steered a run made elsewhere (CLI, another session) is found from public facts only.
"""

from __future__ import annotations

import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.method.budget import admit
from dpkps_core.corpus import Corpus
from dpkps_core.dp.events import ForecastStatisticsEvent, PrivacyEvent
from dpkps_core.errors import PrivacyBudgetError

TEXTS = tuple(f"note {i}: the patient reported a symptom number {i}" for i in range(8))


def _corpus() -> Corpus:
    return Corpus(texts=TEXTS, labels=tuple("ab"[i % 2] for i in range(8)), name="notes", source="test",
                  public_classes=("a", "b"))


def _event(eps: float, step: str = "vocabulary") -> PrivacyEvent:
    return PrivacyEvent(mechanism="test_mechanism", step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0 / eps,
                        released="a test release")


def _release(led: ls.PersistentLedger, eps: float, step: str) -> int:
    """One release through the real entry (admit → charge the ticket); returns how many documents took part."""
    adm = admit(_corpus(), led, eps, by_person=False, what=f"the {step} step")
    adm.ticket.charge(_event(eps, step))
    return len(adm.corpus)


def test_event_ids_rebuild_a_runs_account_in_another_process() -> None:
    led = ls.open_corpus_ledger(_corpus(), tool="app", run="run-a", cap=20.0)
    _release(led, 5.0, "vocabulary")
    _release(led, 4.0, "kde")
    ids = led.recorded_event_ids
    assert len(ids) == 2 and ids[0] < ids[1]
    other = ls.open_corpus_ledger(_corpus(), tool="cli ledger", cap=20.0)          # another process
    account = other.events_ledger(ids)
    assert account.total_epsilon == 9.0 and [e.step for e in account.events] == ["vocabulary", "kde"]
    assert other.events_ledger(ids[:1]).total_epsilon == 5.0                     # a run that carries only Ṽ
    with pytest.raises(PrivacyBudgetError, match="no event"):
        other.events_ledger([ids[-1] + 100])                                    # a record of another ledger


def test_a_twin_in_the_session_counts_for_the_session_and_keeps_its_own_ids() -> None:
    session = ls.open_corpus_ledger(_corpus(), tool="app", run="session x", cap=20.0)
    job = session.for_run("compare-1", tool="app compare", in_session=True)
    _release(job, 1.0, "kde")
    assert session.total_epsilon == 1.0 and session.recorded_event_ids == job.recorded_event_ids
    assert [e.run for e in session.run_events("compare-1")] == ["compare-1"]
    assert session.run_events("session x") == ()                              # not filed under the session's run


def _interleave(reserve: bool) -> tuple[int, int, int, int]:
    """Two runs on the same documents, cap 10, ε_voc 5 and ε_kde 5 each, their steps interleaved."""
    a = ls.open_corpus_ledger(_corpus(), tool="app", run="run-a", cap=10.0)
    b = ls.open_corpus_ledger(_corpus(), tool="app", run="run-b", cap=10.0)
    if reserve:
        a.reserve_next(10.0)
    a_voc = _release(a, 5.0, "vocabulary")
    if reserve:
        b.reserve_next(10.0)
    b_voc = _release(b, 5.0, "vocabulary")
    a_kde = _release(a, 5.0, "kde")
    b_kde = _release(b, 5.0, "kde")
    return a_voc, a_kde, b_voc, b_kde


def test_without_a_reservation_a_concurrent_run_starves_the_first_runs_densities() -> None:
    assert _interleave(reserve=False) == (8, 0, 8, 0)   # both Ṽ landed first: no density admitted anyone


def test_a_reservation_at_the_first_release_keeps_the_later_step_of_its_run() -> None:
    a_voc, a_kde, b_voc, b_kde = _interleave(reserve=True)
    assert (a_voc, a_kde) == (8, 8)                      # run A keeps its densities' documents
    assert (b_voc, b_kde) == (0, 0)                      # run B is told at its first step, not half-way
    led = ls.open_corpus_ledger(_corpus(), tool="cli ledger", cap=10.0)
    assert led.view().largest_spend == pytest.approx(10.0)          # nobody past the cap
    release = [r for r in led.view().releases if r.run == "run-a"][0]
    assert release.epsilon == 10.0 and "reserved" in release.what
    assert [e.event.step for e in release.events] == ["vocabulary", "kde"]  # both steps on the reservation


def test_a_reservation_serves_only_its_own_input_and_what_remains() -> None:
    led = ls.open_corpus_ledger(_corpus(), tool="app", run="run-a", cap=20.0)
    led.reserve_next(8.0)
    _release(led, 3.0, "vocabulary")
    assert led.reserved() == pytest.approx(5.0)
    _release(led, 6.0, "kde")                       # more than reserved: a fresh admission, the reservation stays
    assert led.reserved() == pytest.approx(5.0)
    assert led.view().largest_spend == pytest.approx(14.0)
    twin = led.for_run("run-a", in_session=True)
    _release(twin, 5.0, "kde")                      # a twin draws on the session's reservation: nothing new charged
    assert led.reserved() == 0.0 and led.view().largest_spend == pytest.approx(14.0)
    led.reserve_next(4.0)
    led.run = "run-b"                               # the label of the run whose first release reserves
    _release(led, 1.0, "vocabulary")
    assert led.reserved(run="run-b") == pytest.approx(3.0) and led.reserved(run="run-a") == 0.0


def test_the_forecast_that_steered_a_run_is_found_by_public_settings() -> None:
    cli = ls.open_corpus_ledger(_corpus(), tool="cli forecast", run="fc", cap=20.0)
    adm = admit(_corpus(), cli, 0.2, by_person=False, what="the DP forecast")
    ev = ForecastStatisticsEvent(mechanism="laplace_forecast_statistics", step="forecast", epsilon=0.2,
                                 sensitivity=1.0, noise_scale=5.0, released="the forecast", thresholds=4,
                                 terms_per_doc=10, curve_share=0.5, curve_noise_scale=100.0, class_noise_scale=10.0,
                                 classes=2, public_vocabulary_size=500)
    adm.ticket.charge(ev)
    app = ls.open_corpus_ledger(_corpus(), tool="app", run="run-z", cap=20.0)
    found = app.steering_forecast(terms_per_doc=10, public_vocabulary_size=500, classes=2)
    assert found == cli.recorded_event_ids[0]
    assert app.events_ledger([found]).total_epsilon == pytest.approx(0.2)
    assert app.steering_forecast(terms_per_doc=5, public_vocabulary_size=500, classes=2) is None
    assert app.steering_forecast(terms_per_doc=10, public_vocabulary_size=500, classes=2, before=found) is None


def test_a_reservation_under_the_person_unit_keeps_the_persons_and_their_rows_within_the_cap() -> None:
    people = Corpus(texts=TEXTS, labels=tuple("ab"[i % 2] for i in range(8)), name="notes", source="test",
                    public_classes=("a", "b"), persons=tuple(f"p{i // 2}" for i in range(8)), person_column="patient")

    def release(led: ls.PersistentLedger, eps: float, step: str) -> int:
        adm = admit(people, led, eps, by_person=True, what=f"the {step} step")
        adm.ticket.charge(_event(eps, step))
        return len(adm.corpus)

    a = ls.open_corpus_ledger(people, tool="app", run="run-a", cap=12.0)
    b = ls.open_corpus_ledger(people, tool="app", run="run-b", cap=12.0)
    a.reserve_next(6.0)
    assert release(a, 3.0, "vocabulary") == 8
    assert release(b, 3.0, "vocabulary") == 0          # a row of a person carries 2 × 6 = 12 already
    assert release(a, 3.0, "kde") == 8                 # on the reservation: every person, nothing charged twice
    view = ls.open_corpus_ledger(people, tool="cli ledger", cap=12.0).view()
    assert view.largest_spend <= 12.0 + 1e-9
