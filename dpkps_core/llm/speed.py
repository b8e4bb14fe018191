"""The measured speed of the writing step, retries included: ONE model shared by the before-the-run estimate
(:mod:`dpkps_core.llm.estimate`) and the runner's ETA (:mod:`dpkps_core.llm.runner`) (docs/ARCHITECTURE.md, llm/).

Retries. The runner sends every item once and again after each retryable failure — a transient error or a reply
the non-document screen refuses (:func:`dpkps_core.llm.quality.screen`) — at most ``retries`` more times. With a
rejection rate r per attempt, taking attempts as independent (the stated assumption), an item takes
E = (1 − r^(R+1)) / (1 − r) attempts on average (:func:`expected_attempts`) and still fails with probability
r^(R+1). Local backends write batches and retried items rejoin the queue first, so a run is a sequence of batches
whose sizes :func:`expected_batches` follows in expectation.

Speed. A batch lasts as long as its longest row: :class:`BatchTimes` takes the measured seconds of a full batch
and scales a batch of m rows by the engine's measured seconds per decoding step at 1 and at ``size`` rows
(:func:`step_share`; CTranslate2 measures it, other backends fall back to ``batch_cost``).

What is measured (:class:`Measured`, one record per backend and (max_tokens, temperature), in memory only): the
replies judged and refused, and the seconds of each batch — by the calibration batch of the estimate and by every
run as it goes (:class:`RunMeter`). Every figure is a count or a time of replies to prompts rendered from the DP
keyphrase sequences and the public prompt settings (post-processing, docs/DESIGN.md §2.5); no text is kept.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import weakref
from typing import Any, Mapping, Sequence

#: A rejection rate is capped below 1 so that the expected attempts stay finite and the ETA meaningful.
MAX_REJECTION = 0.95
#: Replies a record needs before its rejection rate replaces a calibration batch (one default batch).
MIN_REPLIES = 16


def expected_attempts(rejection: float, retries: int) -> float:
    """Mean attempts of one item: Σ_{a=0..R} r^a = (1 − r^(R+1)) / (1 − r), r = ``rejection``, R = ``retries``."""
    r = min(max(float(rejection), 0.0), MAX_REJECTION)
    return float(retries + 1) if r >= 1.0 else (1.0 - r ** (retries + 1)) / (1.0 - r)


def expected_batches(waiting: Sequence[float], size: int, rejection: float) -> list[tuple[float, float]]:
    """The batches a batched run still sends, in expectation, as ``(rows, weight)`` pairs.

    ``waiting[a]`` items wait for attempt a + 1 (``len(waiting)`` = attempts allowed). Each batch takes up to
    ``size`` items, retried ones first (as the runner does); a share ``rejection`` of each level comes back one level
    up while attempts are left. A tail batch of less than one expected item stands for "a batch of one row, with that
    probability": its rows are 1 and its weight the expected count (so its time counts pro rata)."""
    levels = [max(0.0, float(x)) for x in waiting]
    r = min(max(float(rejection), 0.0), MAX_REJECTION)
    out: list[tuple[float, float]] = []
    for _ in range(100_000):
        total = sum(levels)
        if total < 1e-3:
            break
        take = min(float(size), total)
        out.append((max(1.0, take), min(1.0, take)))
        left, back = take, [0.0] * len(levels)
        for a in range(len(levels) - 1, -1, -1):  # retried items go first
            t = min(levels[a], left)
            levels[a] -= t
            left -= t
            if a + 1 < len(levels):
                back[a + 1] += r * t
        levels = [x + y for x, y in zip(levels, back)]
    return out


@dataclasses.dataclass(frozen=True)
class BatchTimes:
    """Seconds of one batched call: ``full`` for ``size`` rows; m rows take ``full · share(m)``, the share linear
    from ``single_share`` (one row) to 1 (``size`` rows): a batch lasts as long as its longest row, and a decoding
    step over m rows costs between one row's step and a full batch's (measured, :func:`step_share`)."""

    size: int
    full: float
    single_share: float = 1.0

    def seconds(self, rows: float) -> float:
        """Seconds of a batch of ``rows`` rows (1 ≤ rows ≤ size)."""
        if self.size <= 1:
            return self.full * max(1.0, rows)
        m = min(max(float(rows), 1.0), float(self.size))
        return self.full * (self.single_share + (1.0 - self.single_share) * (m - 1.0) / (self.size - 1.0))

    def run_seconds(self, waiting: Sequence[float], rejection: float) -> float:
        """Seconds of the batches :func:`expected_batches` expects for ``waiting``."""
        return sum(w * self.seconds(m) for m, w in expected_batches(waiting, self.size, rejection))


def engine_tokens_per_second(backend: Any, size: int) -> float:
    """Tokens/s of a batch of ``size`` rows as the backend's inference engine measures it (CTranslate2's
    ``batch_tokens_per_second``), 0 when it has no such engine or cannot say now.

    It never waits for the model: a backend whose model is shared (``model_queue``, llm/model_queue.py) answers
    from what its engine measured, and runs a calibration batch of public text only while nobody uses the model or
    waits for it — an estimate on page 6 never queues behind other sessions' runs (issue 35 §8)."""
    engine = getattr(backend, "engine", None)
    rate = getattr(engine, "batch_tokens_per_second", None)
    if not callable(rate):
        return 0.0
    from dpkps_core.llm.model_queue import model_queue_of

    line = model_queue_of(backend)
    if line is None:
        return float(rate(size))
    known = getattr(engine, "measured_tokens_per_second", None)
    if callable(known):
        value = float(known(size))
        if value > 0:
            return value
    if getattr(engine, "building", False):  # being loaded by another thread (the warm-up): no waiting for it
        return 0.0
    with line.try_turn("speed calibration") as ours:
        return float(rate(size)) if ours else 0.0


def step_share(backend: Any, size: int) -> float:
    """Seconds of a decoding step over one row relative to one over ``size`` rows: from the inference engine's
    measured tokens/s at 1 and ``size`` rows when it has them (CTranslate2, :func:`engine_tokens_per_second`: a
    calibration on public input while the model is free, else 0), else from ``backend.batch_cost``."""
    size = max(1, int(size))
    if size == 1:
        return 1.0
    rate = getattr(getattr(backend, "engine", None), "batch_tokens_per_second", None)
    if callable(rate):
        one, full = engine_tokens_per_second(backend, 1), engine_tokens_per_second(backend, size)
        if one > 0 and full > 0 and math.isfinite(one) and math.isfinite(full):
            return min(1.0, max(1.0 / size, full / (size * one)))  # step(1)/step(b) = (1/tps1) / (b/tpsb)
    cost = getattr(backend, "batch_cost", None)
    if callable(cost):
        return min(1.0, max(1.0 / size, float(cost(1)) / float(cost(size))))
    return 1.0


class Measured:
    """What one backend measured at one (max_tokens, temperature): replies judged, replies refused (retryable
    failures: non-documents and transient errors) and batch seconds by batch size. Thread-safe; counts only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.replies = 0
        self.rejected = 0
        self.calibration_replies = 0
        self._batches: dict[int, list[float]] = {}  # rows → [batches, seconds]
        self._shares: dict[int, float] = {}  # rows → step share of one row (step_share), measured once
        self.active_runs = 0

    def add_reply(self, accepted: bool, *, calibration: bool = False) -> None:
        """Count one judged reply."""
        with self._lock:
            self.replies += 1
            self.rejected += 0 if accepted else 1
            self.calibration_replies += 1 if calibration else 0

    def add_batch(self, rows: int, seconds: float) -> None:
        """Count one batched call of ``rows`` rows that took ``seconds``."""
        if rows < 1 or not seconds > 0:
            return
        with self._lock:
            entry = self._batches.setdefault(int(rows), [0.0, 0.0])
            entry[0] += 1
            entry[1] += float(seconds)

    def step_share(self, backend: Any, rows: int) -> float:
        """:func:`step_share` of ``backend`` at ``rows`` rows, measured once (while the engine is free: a run's
        estimate or ETA does not fall back to the rough ``batch_cost`` when the engine is busy writing)."""
        with self._lock:
            cached = self._shares.get(int(rows))
        if cached is None:
            cached = step_share(backend, rows)
            with self._lock:
                self._shares.setdefault(int(rows), cached)
        return cached

    def run_started(self, change: int) -> None:
        """Count a run that starts (+1) or ends (−1) on this backend at these settings."""
        with self._lock:
            self.active_runs = max(0, self.active_runs + change)

    def rejection(self) -> float | None:
        """The measured share of refused replies (None before any reply)."""
        with self._lock:
            return min(self.rejected / self.replies, MAX_REJECTION) if self.replies else None

    def batch_seconds(self, rows: int) -> float | None:
        """Mean seconds of a batch of exactly ``rows`` rows (None when none was measured)."""
        with self._lock:
            entry = self._batches.get(int(rows))
            return entry[1] / entry[0] if entry else None

    def full_batch_seconds(self, size: int, single_share: float) -> float | None:
        """Seconds of a FULL batch of ``size`` rows from every batch measured at these settings, whatever its rows:
        a batch of m rows that took t seconds stands for t / share(m) at ``size`` rows (:class:`BatchTimes`' linear
        step share), pooled over all measured batches (each batch counts once). None when none was measured.

        One model for every row count keeps the estimate monotonic in the number of documents (it read only the
        batches of exactly the estimate's row count before, and jumped between measured and modelled speeds)."""
        times = BatchTimes(max(1, int(size)), 1.0, single_share)
        with self._lock:
            entries = [(rows, n, total) for rows, (n, total) in self._batches.items() if n > 0]
        if not entries:
            return None
        batches = sum(n for _, n, _ in entries)
        return sum(total / times.seconds(min(rows, times.size)) for rows, _, total in entries) / batches

    def source(self) -> str:
        """Where the rejection rate comes from, in words."""
        runs = self.replies - self.calibration_replies
        parts = [f"{self.calibration_replies} calibration replies"] if self.calibration_replies else []
        parts += [f"{runs} replies of runs on this backend"] if runs else []
        return " and ".join(parts) or "no replies"


_RECORDS: "weakref.WeakKeyDictionary[Any, dict[tuple[Any, ...], Measured]]" = weakref.WeakKeyDictionary()
_RECORDS_LOCK = threading.Lock()


def measured(backend: Any, max_tokens: int, temperature: float,
             repetition: Mapping[str, Any] | None = None) -> Measured:
    """The record of ``backend`` at (``max_tokens``, ``temperature``, repetition control) (created empty; lives as long
    as the backend). ``repetition``: the ``generate_batch`` keywords of llm/repetition.py the run passes (none = what
    the backend does by default) — they change how often replies loop, so each setting is measured on its own."""
    key = (int(max_tokens), round(float(temperature), 3), tuple(sorted((repetition or {}).items())))
    with _RECORDS_LOCK:
        return _RECORDS.setdefault(backend, {}).setdefault(key, Measured())


class RunMeter:
    """The measured throughput of ONE run, for its ETA: replies judged (retried attempts included), batches and
    their seconds, written through to the backend's :class:`Measured` record as they come.

    ``size`` is the items per batch (None for concurrent requests); ``retries`` the retry cap; ``share`` the
    one-row step share of :func:`step_share` (measured before the run when the engine can); ``drafts`` the prompts
    per item (the record counts prompts per batch)."""

    def __init__(self, record: Measured | None, *, retries: int, size: int | None, share: float = 1.0,
                 drafts: int = 1) -> None:
        self.record = record
        self.drafts = max(1, int(drafts))
        self.retries = retries
        self.size = size
        self.share = share
        self.replies = 0
        self.rejected = 0
        self._prior = (record.replies, record.rejected) if record is not None else (0, 0)
        self._full: list[float] = []  # this run's batches, each scaled to a full batch's seconds
        self.batch_started: float | None = None
        self._lock = threading.Lock()

    def measure_share(self, backend: Any) -> None:
        """Set the one-row step share of this run's batches (:func:`step_share`, the record's when there is one)."""
        rows = self.size or 1
        self.share = self.record.step_share(backend, rows) if self.record is not None else step_share(backend, rows)

    def open(self) -> None:
        """The run starts: while it writes, an estimate reads its record instead of calibrating on the busy engine."""
        if self.record is not None:
            self.record.run_started(+1)

    def close(self) -> None:
        """The run ends (finished, cancelled or failed)."""
        if self.record is not None:
            self.record.run_started(-1)

    def fill_wait(self) -> float:
        """How long a partial batch may wait for retried items still in their backoff: the measured seconds of a
        one-row batch, what sending them on their own later would cost (0 before a batch was measured)."""
        with self._lock:
            full = sum(self._full) / len(self._full) if self._full else 0.0
        return self._times(full).seconds(1) if full > 0 else 0.0

    def reply(self, accepted: bool) -> None:
        """One judged reply of this run (a document, or a refused / failed attempt)."""
        with self._lock:
            self.replies += 1
            self.rejected += 0 if accepted else 1
        if self.record is not None:
            self.record.add_reply(accepted)

    def batch(self, rows: int, seconds: float) -> None:
        """One batched call of ``rows`` items done in ``seconds``."""
        self.batch_started = None
        if self.size and rows >= 1 and seconds > 0:
            with self._lock:
                self._full.append(seconds / self._times(1.0).seconds(rows))
            if self.record is not None:
                self.record.add_batch(rows * self.drafts, seconds)

    def rejection(self) -> float:
        """This run's share of refused replies, the record's earlier replies counted as a prior (0 before any)."""
        n, k = self.replies + self._prior[0], self.rejected + self._prior[1]
        return min(k / n, MAX_REJECTION) if n else 0.0

    def _times(self, full: float) -> BatchTimes:
        return BatchTimes(int(self.size or 1), full, self.share)

    def eta(self, waiting: Sequence[float], *, in_flight: int, fraction: float, elapsed: float) -> float | None:
        """Seconds left: the expected batches (or attempts) of the items still ``waiting`` (per attempt level) and
        of the batch in flight, at the speed this run measured — full-batch seconds from its finished batches or
        the batch in flight, else its judged replies per second. None before anything was measured."""
        r = self.rejection()
        levels = list(waiting) + [0.0] * max(0, self.retries + 1 - len(waiting))
        if in_flight and len(levels) > 1:  # the batch in flight sends a share r of its items back
            levels[1] += r * in_flight
        full = None
        if self.size:
            with self._lock:
                full = sum(self._full) / len(self._full) if self._full else None
            if full is None and self.batch_started is not None and in_flight and fraction > 0:
                full = (time.monotonic() - self.batch_started) / fraction / self._times(1.0).seconds(in_flight)
        if full is not None:
            times = self._times(full)
            return (1.0 - fraction) * times.seconds(in_flight) * bool(in_flight) + times.run_seconds(levels, r)
        worked = self.replies + in_flight * fraction
        if worked <= 0 or elapsed <= 0:
            return None
        left = sum(n * expected_attempts(r, self.retries - a) for a, n in enumerate(levels))
        return max(0.0, (left + in_flight * (1.0 - fraction)) / (worked / elapsed))
