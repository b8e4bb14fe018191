"""Background jobs of the app: a long step runs in a daemon thread, the page polls its progress, ``cancel`` stops
it after the item in flight; errors become one line (the traceback, without its message, goes to the server log)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator


from dpkps_core.errors import DPKPSError, ParameterError
from dpkps_core.progress import format_duration
from studio.state import SessionState

log = logging.getLogger("dpkps.studio")

@dataclasses.dataclass
class Job:
    """A long step running in a thread. The page polls it; ``cancel`` stops it after the item in flight."""

    kind: str
    cancel: threading.Event = dataclasses.field(default_factory=threading.Event)
    fraction: float = 0.0
    message: str = "starting…"
    started: float = dataclasses.field(default_factory=time.time)
    finished: float | None = None
    error: str | None = None
    result: Any = None
    partial: list[Any] = dataclasses.field(default_factory=list)
    thread: threading.Thread | None = None
    #: what the session does with the result once the job ended, in a script run (:func:`finish`); called once
    on_finish: Callable[["Job"], None] | None = None
    finished_seen: bool = False
    meter: "ChunkMeter | None" = None
    #: how far the job was asked to go, in the page's own unit (a generation: write documents for the first
    #: ``target`` sequences) — a session that reattaches after a reload shows the running job's setting, not its own
    target: int | None = None

    @property
    def running(self) -> bool:
        return self.finished is None

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def report(self, fraction: float, message: str) -> None:
        self.fraction = float(min(max(fraction, 0.0), 1.0))
        self.message = message


class StepCancelled(DPKPSError):
    """A DP step's pass stopped between two chunks at the user's Cancel (docs/DESIGN.md §2.0: the ε it admitted
    before its first chunk stays charged; nothing was released)."""


@dataclasses.dataclass
class ChunkMeter:
    """Per-chunk progress of a streamed pass for a :class:`Job` — documents done, rows per second and an ETA — and
    its Cancel, checked between chunks (:meth:`wrap` raises :class:`StepCancelled` before the next chunk is read).

    ``chunks`` counts the chunks handed to the pass (a test reads it); messages carry counts only, never text."""

    job: Job
    chunks: int = 0
    in_pass: bool = False

    def wrap(self, chunks: Iterator[Any], total: int, what: str) -> Iterator[Any]:
        """``chunks`` (a pass over ``total`` training documents) with a progress report after each chunk and the
        Cancel checked before each next one."""
        start = time.monotonic()
        done = 0
        self.in_pass = True
        self.job.report(0.0, f"{what}: starting the pass over {total:,} training documents")
        try:
            for chunk in chunks:
                if self.job.cancelled:
                    raise StepCancelled(f"Cancelled between chunks after {done:,} of {total:,} training documents: "
                                        "nothing was released, and the ε this step admitted before its first chunk "
                                        "stays charged (docs/PRIVACY.md: a cancelled release is not refunded).")
                yield chunk
                self.chunks += 1
                done += len(chunk.texts)
                self.job.report(done / max(total, 1), rate_text(what, done, total, time.monotonic() - start))
        finally:
            self.in_pass = False

    def phase(self, fraction: float, message: str) -> None:
        """The core's own progress (``dpkps_core.progress.Progress``): its step names between the passes."""
        if not self.in_pass:
            self.job.report(self.job.fraction, message)


def rate_text(what: str, done: int, total: int, seconds: float) -> str:
    """``what``'s progress as shown: documents read of total (handed to the pass, whose last chunks may still be
    counted), rows per second and the time left at that rate."""
    rate = done / seconds if seconds > 0 else 0.0
    left = (total - done) / rate if rate > 0 else float("nan")
    eta = format_duration(left, approximate=True) + " left" if rate > 0 else "time left: measuring"
    return f"{what}: {done:,} of {total:,} training documents read · {rate:,.0f} rows/s · {eta}"


def finish(state: SessionState, name: str) -> Job | None:
    """In a script run: the session's job in slot ``name`` (``studio.state.Jobs``) once it ended, its
    :attr:`Job.on_finish` run once (the session learns its result); ``None`` while it runs or without one."""
    job = state.jobs.get(name)
    if not isinstance(job, Job) or job.running:
        return None
    if not job.finished_seen:
        job.finished_seen = True
        if job.on_finish is not None:
            job.on_finish(job)
    return job


#: Every job started in this server process (weak: a finished job is forgotten with its session), for
#: :func:`poll_interval`, which counts the running ones.
_LIVE: "weakref.WeakValueDictionary[int, Job]" = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


def track(job: "Job") -> None:
    """Count ``job`` among the server's jobs (:func:`running_jobs`) while it runs; :func:`start_job` does it."""
    with _LIVE_LOCK:
        _LIVE[id(job)] = job

#: Progress polling of a running job's page fragment (issue 35 §8): every poll reruns the fragment's script on the
#: server, so the interval grows with the jobs running on the server (their progress moves that much slower, as
#: they share the model and the cores) and with the job's age (a batch takes seconds; the first ones are watched
#: closely): POLL_MIN_S alone, POLL_PER_JOB_S more per other running job, at least POLL_LATER_S after
#: POLL_LATER_AFTER_S seconds, never more than POLL_MAX_S.
POLL_MIN_S = 1.0
POLL_PER_JOB_S = 1.0
POLL_LATER_S = 2.0
POLL_LATER_AFTER_S = 30.0
POLL_MAX_S = 5.0


def running_jobs() -> int:
    """The jobs running now in this server process (every session's)."""
    with _LIVE_LOCK:
        return sum(1 for j in list(_LIVE.values()) if j.running)


def poll_interval(job: "Job", *, now: float | None = None) -> float | None:
    """Seconds between two progress polls of ``job``'s page fragment (None once it finished: no polling)."""
    if not job.running:
        return None
    others = max(0, running_jobs() - 1)
    interval = POLL_MIN_S + POLL_PER_JOB_S * others
    if (time.time() if now is None else now) - job.started > POLL_LATER_AFTER_S:
        interval = max(interval, POLL_LATER_S)
    return float(min(POLL_MAX_S, interval))


#: The running jobs that write into a run folder, by (kind, the folder's resolved path): a job outlives the session
#: that started it (a reload opens a new session while the thread keeps writing), so a session that opens the same
#: run finds it again (:func:`running_job_of_run`) with its progress and its Cancel. Only run folders the session
#: could open are ever looked up, so the registry shows no tenant another's job.
_RUN_JOBS: dict[tuple[str, str], Job] = {}
_RUN_JOBS_LOCK = threading.Lock()


def _run_key(kind: str, run: str | Path) -> tuple[str, str]:
    return kind, str(Path(run).resolve())


def running_job_of_run(kind: str, run: str | Path) -> Job | None:
    """The job of ``kind`` still running on the run folder ``run`` (started by any session), or ``None``."""
    with _RUN_JOBS_LOCK:
        for key in [k for k, j in _RUN_JOBS.items() if not j.running]:  # forget the finished ones
            del _RUN_JOBS[key]
        return _RUN_JOBS.get(_run_key(kind, run))


def start_job(state: SessionState, name: str, kind: str, work: Callable[[Job], Any], *, run: str | Path | None = None,
              on_finish: Callable[[Job], None] | None = None, meter: bool = False) -> Job:
    """Run ``work(job)`` in a daemon thread; the Job is kept in the session's job slot ``name`` (``studio.state.Jobs``)
    and, with ``run``
    (the run folder it writes into), registered so that a reloaded session can reattach to it. ``on_finish``: what
    a later script run does once it ended (:func:`finish`); ``meter``: give the job a :class:`ChunkMeter`."""
    old = state.jobs.get(name)
    if isinstance(old, Job) and old.running:
        raise ParameterError("This step is already running; wait for it or cancel it.")
    if run is not None and running_job_of_run(kind, run) is not None:
        raise ParameterError("This run is already being written by another tab or session; it is shown here — "
                             "wait for it or cancel it.")
    job = Job(kind=kind, on_finish=on_finish)
    if meter:
        job.meter = ChunkMeter(job)

    def target() -> None:
        try:
            job.result = work(job)
        except DPKPSError as exc:
            job.error = str(exc)
        except Exception as exc:  # noqa: BLE001 - shown as one line; traceback (no message) to the server log
            job.error = f"Unexpected {type(exc).__name__} while running {kind}; the server log has the details."
            log.error("job %s failed: %s\n%s", kind, type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)))
        finally:
            job.finished = time.time()

    job.thread = threading.Thread(target=target, name=f"dpkps-{kind}", daemon=True)
    state.jobs.set(name, job)
    track(job)
    if run is not None:
        with _RUN_JOBS_LOCK:
            _RUN_JOBS[_run_key(kind, run)] = job
    job.thread.start()
    return job


