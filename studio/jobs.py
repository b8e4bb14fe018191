"""Background jobs of the app: a long step runs in a daemon thread, the page polls its progress, ``cancel`` stops
it after the item in flight; errors become one line (the traceback, without its message, goes to the server log)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import traceback
from typing import Any, Callable

import streamlit as st

from dpkps_core.errors import DPKPSError, ParameterError

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

    @property
    def running(self) -> bool:
        return self.finished is None

    @property
    def cancelled(self) -> bool:
        return self.cancel.is_set()

    def report(self, fraction: float, message: str) -> None:
        self.fraction = float(min(max(fraction, 0.0), 1.0))
        self.message = message


def start_job(key: str, kind: str, work: Callable[[Job], Any]) -> Job:
    """Run ``work(job)`` in a daemon thread; the Job is stored under ``st.session_state[key]``."""
    s = st.session_state
    old = s.get(key)
    if isinstance(old, Job) and old.running:
        raise ParameterError("This step is already running; wait for it or cancel it.")
    job = Job(kind=kind)

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
    s[key] = job
    job.thread.start()
    return job


