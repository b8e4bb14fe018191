"""The estimate and the ETA come from measured speed, retries included (dpkps_core/llm/estimate.py, speed.py and
the runner's ETA): scripted batched backends whose non-document share and batch time are known."""

from __future__ import annotations

import threading
import time
import types
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
from llm_fakes import make_sequences, term_index

from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend
from dpkps_core.llm.estimate import estimate_cost
from dpkps_core.llm.prompts import PromptConfig, render_prompt
from dpkps_core.llm.runner import run_generation
from dpkps_core.llm.settings import GenerationSettings, Progress
from dpkps_core.llm.speed import BatchTimes, RunMeter, expected_attempts, expected_batches, measured

CFG = PromptConfig(doc_type="a news article")
DOCUMENT = "The council met on Monday to discuss the new budget for local schools, roads and the library."
LOOP = "St. Regina, St. Regina, St. Regina, Adreno, Adreno, Adreno, Adreno, Adreno, Adreno, Adreno."


class Clock:
    """A monotonic clock that only moves when a batch is written (deterministic times)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class ScriptedBatches(LLMBackend):
    """A batched backend: ``refuse(prompt_number, messages)`` says which replies are loops (refused by the screen);
    each call advances ``clock`` by ``batch_seconds`` or sleeps ``sleep`` seconds. A decoding step costs the same
    over any number of rows (``batch_cost`` 1), so a batch lasts as long as one row."""

    name = "scripted"
    model = "scripted-model"
    max_batch_size = 8
    max_concurrency = 1

    def __init__(self, refuse: Callable[[int, Any], bool], *, clock: Clock | None = None,
                 batch_seconds: float = 0.0, sleep: float = 0.0) -> None:
        self.refuse = refuse
        self.clock, self.batch_seconds, self.sleep = clock, batch_seconds, sleep
        self.batches: list[int] = []
        self.prompts: list[str] = []

    def batch_cost(self, batch_size: int) -> float:
        return 1.0

    def generate(self, messages: Any, *, max_tokens: int, temperature: float, timeout: float) -> str:
        raise AssertionError("a batched backend is called in batches")

    def generate_batch(self, batch: Sequence[Any], *, max_tokens: int, temperature: float, timeout: float,
                       cancel: threading.Event | None = None, on_step: Any = None) -> list[Any]:
        self.batches.append(len(batch))
        if self.clock is not None:
            self.clock.now += self.batch_seconds
        if self.sleep:
            time.sleep(self.sleep)
        out = []
        for m in batch:
            self.prompts.append(m[-1]["content"])
            out.append(LOOP if self.refuse(len(self.prompts), m) else DOCUMENT)
        return out


# ---- the model ---------------------------------------------------------------------------------------------------


def test_expected_attempts_and_batches_follow_the_retry_cap() -> None:
    assert expected_attempts(0.0, 4) == 1.0
    assert expected_attempts(0.25, 2) == pytest.approx(1 + 0.25 + 0.0625)
    assert expected_attempts(0.5, 0) == 1.0
    # No refusals: full batches and the rest.
    assert expected_batches([20.0, 0.0], 8, 0.0) == [(8.0, 1.0), (8.0, 1.0), (4.0, 1.0)]
    # With refusals the expected rows sent are the items × expected attempts; a tail of less than one expected item
    # is a one-row batch counted pro rata.
    batches = expected_batches([16.0, 0.0, 0.0], 8, 0.25)
    assert sum(m * w for m, w in batches) == pytest.approx(16 * expected_attempts(0.25, 2))
    assert sum(w for _, w in batches) == pytest.approx(4.0)
    assert batches[-1] == (1.0, pytest.approx(0.125))


def test_a_small_batch_costs_its_share_of_a_full_one() -> None:
    times = BatchTimes(16, 20.0, single_share=0.55)
    assert times.seconds(16) == 20.0 and times.seconds(1) == pytest.approx(11.0)
    assert times.seconds(8.5) == pytest.approx(20.0 * (0.55 + 0.45 * 0.5))


# ---- the estimate --------------------------------------------------------------------------------------------------


def test_the_estimate_includes_retries_at_the_measured_rejection_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr("dpkps_core.llm.estimate.time", types.SimpleNamespace(monotonic=clock.monotonic))
    backend = ScriptedBatches(lambda k, m: k % 4 == 0, clock=clock, batch_seconds=2.0)  # every 4th reply loops
    seqs = make_sequences(16)
    est = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=50, batch_size=8, retries=2)
    # ONE calibration batch of the job's first 8 prompts measured r = 2/8 and a batch's 2 s.
    assert backend.batches == [8] and est.measure_seconds == pytest.approx(2.0)
    assert est.rejection_rate == pytest.approx(0.25)
    assert est.attempts_per_document == pytest.approx(1.3125)  # 1 + r + r², at most 2 retries
    # Expected batches of 16 items: 8, 8, 4, then a tail of 1 expected item → 4 batches of 2 s (a batch costs the
    # same at any size with this backend).
    assert est.seconds == pytest.approx(8.0)
    assert est.completion_tokens == 21 * 50  # 16 × 1.3125 attempts, each at most max_tokens
    assert "retries included: 25% of replies refused" in est.summary()
    assert "8 calibration replies" in est.summary() and "1.31 attempts per document" in est.summary()
    # Without retries the same backend's estimate is one attempt per document: two batches.
    plain = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=50, batch_size=8)
    assert plain.attempts_per_document == 1.0 and plain.seconds == pytest.approx(4.0)
    assert backend.batches == [8] and "(no retries)" in plain.summary()


def test_calibration_sends_the_jobs_first_prompts_once(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = ScriptedBatches(lambda k, m: False)
    seqs = make_sequences(10)
    estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=20, batch_size=8, retries=3)
    estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=20, batch_size=8, retries=3)
    assert backend.batches == [8]  # measured once per backend and settings
    # The prompts the run sends first (DP sequences, public settings), nothing else.
    assert backend.prompts == [render_prompt(s, CFG)[-1]["content"] for s in seqs[:8]]
    # Other settings are other measurements.
    estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=30, batch_size=8, retries=3)
    assert backend.batches == [8, 8]
    assert estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=40, batch_size=8, retries=3,
                         calibrate=False).rejection_rate is None
    with pytest.raises(ParameterError):
        estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=20, rejection_rate=1.0, retries=1)


def test_a_run_measures_the_rate_for_the_next_estimate(tmp_path: Path) -> None:
    first = {i for i in range(1, 33) if i % 2 == 0}  # even items loop on their first attempt

    def refuse(k: int, m: Any) -> bool:
        i = term_index(m)
        if i in first:
            first.discard(i)
            return True
        return False

    backend = ScriptedBatches(refuse)
    run_generation(make_sequences(32), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                   settings=GenerationSettings(max_tokens=60, retries=2, batch_size=8, backoff_base=0.0,
                                               backoff_max=0.01))
    record = measured(backend, 60, 0.7)
    assert (record.replies, record.rejected) == (48, 16) and record.batch_seconds(8) is not None
    calls = len(backend.batches)
    est = estimate_cost(make_sequences(32), prompt_config=CFG, backend=backend, max_tokens=60, batch_size=8,
                        retries=2)
    assert len(backend.batches) == calls  # no calibration: the run measured it
    assert est.rejection_rate == pytest.approx(1 / 3) and "48 replies of runs on this backend" in est.summary()


def test_remote_backends_are_never_calibrated_but_take_a_given_rate() -> None:
    from llm_fakes import FakeBackend

    backend = FakeBackend(max_concurrency=2)
    seqs = make_sequences(4)
    unknown = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=100, concurrency=2, retries=3)
    assert backend.calls == [] and unknown.rejection_rate is None and "retries not included" in unknown.summary()
    given = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=100, concurrency=2, retries=1,
                          rejection_rate=0.5)
    # 4 items × 1.5 attempts, 2 at a time → 3 rounds of (latency + max_tokens / tokens_per_s).
    assert given.attempts_per_document == 1.5
    assert given.seconds == pytest.approx(3 * (backend.latency_s + 100 / backend.tokens_per_s))


# ---- the ETA -----------------------------------------------------------------------------------------------------


def test_the_eta_uses_this_runs_batch_seconds_and_rejection_rate() -> None:
    meter = RunMeter(None, retries=2, size=8)
    assert meter.eta([8.0, 0.0, 0.0], in_flight=0, fraction=0.0, elapsed=1.0) is None  # nothing measured yet
    meter.batch(8, 2.0)
    for ok in [True] * 6 + [False] * 2:
        meter.reply(ok)
    # 8 items at r = 0.25: batches of 8, 2 and a tail of 0.5 expected item, 2 s each → 5 s.
    assert meter.eta([8.0, 0.0, 0.0], in_flight=0, fraction=0.0, elapsed=2.0) == pytest.approx(5.0)
    # A batch in flight: its remaining share, and a share r of its items come back.
    assert meter.eta([0.0, 0.0, 0.0], in_flight=8, fraction=0.5, elapsed=3.0) == pytest.approx(
        1.0 + BatchTimes(8, 2.0).run_seconds([0.0, 2.0, 0.0], 0.25))
    assert meter.fill_wait() == pytest.approx(2.0)
    # Concurrent requests: the judged replies per second of this run, retried attempts included.
    remote = RunMeter(None, retries=1, size=None)
    for ok in (True, False, True, True):
        remote.reply(ok)
    assert remote.eta([6.0, 0.0], in_flight=0, fraction=0.0, elapsed=2.0) == pytest.approx(6 * 1.25 / 2.0)


def test_the_runs_eta_is_close_to_the_time_it_then_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    fake_time = types.SimpleNamespace(monotonic=clock.monotonic)
    for module in ("dpkps_core.llm.runner", "dpkps_core.llm.speed"):
        monkeypatch.setattr(f"{module}.time", fake_time)
    first = {i for i in range(1, 41) if i % 3 != 0}  # two items in three loop on their first attempt

    def refuse(k: int, m: Any) -> bool:
        i = term_index(m)
        if i in first:
            first.discard(i)
            return True
        return False

    backend = ScriptedBatches(refuse, clock=clock, batch_seconds=10.0)
    events: list[tuple[float, Progress]] = []
    run_generation(make_sequences(40), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                   progress=lambda p: events.append((clock.now, p)),
                   settings=GenerationSettings(max_tokens=60, retries=2, batch_size=8, backoff_base=0.0,
                                               backoff_max=0.01))
    assert backend.batches == [8] * 8 + [3] and clock.now == 1090.0
    # After three batches (30 s, 10 documents): 60 s are left. The ETA at this run's measured rejection rate and
    # 10 s a batch, retries included, says 65 s; documents per second alone (10 in 30 s, 30 to go) would say 90 s.
    eta = [p.eta_s for t, p in events if t == 1030.0][0]
    assert eta == pytest.approx(60.0, rel=0.15)
    assert events[-1][1].eta_s == 0
    # Results of a written batch still being handled count: the ETA never says 0 while a batch is left.
    assert all(p.eta_s > 0 for t, p in events[1:-1])


def test_a_partial_batch_waits_for_retries_due_sooner_than_a_batch_of_their_own(tmp_path: Path) -> None:
    first = {1, 2, 3, 4}

    def refuse(k: int, m: Any) -> bool:
        i = term_index(m)
        if i in first:
            first.discard(i)
            return True
        return False

    backend = ScriptedBatches(refuse, sleep=0.3)
    summary = run_generation(make_sequences(8), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                             settings=GenerationSettings(max_tokens=60, retries=2, batch_size=8, backoff_base=0.1,
                                                         backoff_max=0.2))
    # The four retried items (backoff ≤ 0.1 s, a batch 0.3 s) go together, not one batch as each becomes due.
    assert backend.batches == [8, 4] and summary.written == 8


def test_no_calibration_while_a_run_writes_on_the_backend() -> None:
    backend = ScriptedBatches(lambda k, m: False)
    record = measured(backend, 20, 0.7)
    record.run_started(+1)  # a run is writing (the app re-renders its page meanwhile)
    est = estimate_cost(make_sequences(4), prompt_config=CFG, backend=backend, max_tokens=20, batch_size=8, retries=2)
    assert backend.batches == [] and est.rejection_rate is None
    record.add_reply(False)
    record.add_reply(True)  # the run's own replies so far
    est = estimate_cost(make_sequences(4), prompt_config=CFG, backend=backend, max_tokens=20, batch_size=8, retries=2)
    assert backend.batches == [] and est.rejection_rate == 0.5 and "2 replies of runs on this backend" in est.summary()
    record.run_started(-1)


def test_drafts_refuse_an_attempt_only_when_every_draft_is_refused() -> None:
    backend = ScriptedBatches(lambda k, m: False)
    seqs = [s for s in make_sequences(4) for _ in range(2)]  # 2 drafts: each sequence twice
    est = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=20, batch_size=8, retries=1, drafts=2,
                        rejection_rate=0.5)
    assert est.attempts_per_document == pytest.approx(1.25)  # an attempt fails with 0.5² = 0.25


class RepetitionAware(ScriptedBatches):
    """A local-model-like backend that applies repetition control: with ``no_repeat_ngram`` > 0 no reply loops,
    without it every other reply does; it records the keywords each batch was written with."""

    repetition_control = True

    def __init__(self) -> None:
        super().__init__(lambda k, m: False)
        self.kwargs: list[dict[str, Any]] = []

    def generate_batch(self, batch: Sequence[Any], *, max_tokens: int, temperature: float, timeout: float,
                       cancel: threading.Event | None = None, on_step: Any = None, **repetition: Any) -> list[Any]:
        self.kwargs.append(dict(repetition))
        self.refuse = (lambda k, m: False) if repetition.get("no_repeat_ngram", 0) else (lambda k, m: k % 2 == 0)
        return super().generate_batch(batch, max_tokens=max_tokens, temperature=temperature, timeout=timeout)


def test_each_repetition_setting_is_calibrated_and_estimated_on_its_own() -> None:
    """The estimate calibrates with the run's repetition control and keeps each setting's record apart: turning the
    control off is not estimated at the default's refusal rate (llm/speed.py ``measured``)."""
    backend = RepetitionAware()
    seqs = make_sequences(16)
    on = GenerationSettings(max_tokens=40, retries=2).repetition_kwargs()
    off = GenerationSettings(max_tokens=40, retries=2, no_repeat_ngram=0, repetition_penalty=1.0).repetition_kwargs()
    est_on = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=40, batch_size=8, retries=2,
                           repetition=on)
    est_off = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=40, batch_size=8, retries=2,
                            repetition=off)
    assert backend.kwargs == [on, off]                        # one calibration batch per setting, with its keywords
    assert est_on.rejection_rate == 0.0 and est_off.rejection_rate == pytest.approx(0.5)
    assert est_off.attempts_per_document > est_on.attempts_per_document
    assert measured(backend, 40, 0.7, on) is not measured(backend, 40, 0.7, off)
    # a backend without repetition control ignores the setting, as the runner does
    plain = ScriptedBatches(lambda k, m: False)
    estimate_cost(seqs, prompt_config=CFG, backend=plain, max_tokens=40, batch_size=8, retries=2, repetition=on)
    assert measured(plain, 40, 0.7).replies == 8


def test_the_estimate_is_monotonic_in_the_documents_whatever_batch_sizes_were_measured() -> None:
    """Page 6's estimates jumped (6 prompts 5 s, 8 → 8 s, 10 → 3.0 min, 16 → 1.5 min): only a batch of exactly the
    estimate's rows was read, else a modelled speed. Now every measured batch is scaled to the run's batch."""

    class Costly(ScriptedBatches):
        def batch_cost(self, batch_size: int) -> float:  # a step over m rows costs 0.5 + m/16 of a one-row step
            return 0.5 + batch_size / 16

        tokens_per_s = 0.1  # a modelled speed far from the measured one: mixing the two would jump

    backend = Costly(lambda k, m: False)
    record = measured(backend, 50, 0.7, {})
    record.add_batch(6, 12.0)  # one measured batch of 6 rows (as a first short job would leave)
    seqs = make_sequences(40)
    times = [estimate_cost(seqs[:n], prompt_config=CFG, backend=backend, max_tokens=50, batch_size=8, retries=0,
                           calibrate=False).seconds for n in range(1, 41)]
    assert all(b >= a - 1e-9 for a, b in zip(times, times[1:])), times
    assert times[5] == pytest.approx(12.0)  # 6 documents: the measured batch itself
    share_1 = (0.5 + 1 / 16) / (0.5 + 8 / 16)  # one row's step against a full batch's
    assert times[7] == pytest.approx(12.0 / (share_1 + (1 - share_1) * 5 / 7))  # 8: the full batch, scaled
    assert times[15] == pytest.approx(2 * times[7])  # two full batches


def test_no_calibration_batch_when_asked_not_to() -> None:
    backend = ScriptedBatches(lambda k, m: False)
    est = estimate_cost(make_sequences(4), prompt_config=CFG, backend=backend, max_tokens=50, batch_size=8,
                        retries=2, calibrate=False)
    assert backend.batches == [] and est.measure_seconds == 0.0 and est.rejection_rate is None
    assert "no measured share" in est.summary()
