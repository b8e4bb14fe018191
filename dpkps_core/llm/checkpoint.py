"""The run folder as one generation run holds it (docs/ARCHITECTURE.md, llm/): the lock that lets one generation
write into a folder at a time, and the three append-only files a run writes — the audit log, the documents and
the failures (:mod:`dpkps_core.records.runfolder` owns their names and the fsynced JSONL writer; docs/DESIGN.md §2.5: every prompt
sent is in the audit log, never a key)."""

from __future__ import annotations

import contextlib
import datetime as _dt
from pathlib import Path
from typing import Iterator

from dpkps_core.errors import LLMError
from dpkps_core.records.runfolder import AUDIT_FILE, DOCUMENTS_FILE, FAILURES_FILE, LOCK_FILE, JsonlAppender


def utc_now() -> str:
    """The current UTC time in ISO 8601 with milliseconds (audit log, failures)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


@contextlib.contextmanager
def run_lock(run: Path) -> Iterator[None]:
    """One generation per run folder at a time (an OS lock, released by the kernel if the process dies)."""
    path = run / LOCK_FILE
    fh = path.open("a+b")
    try:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        except OSError:
            raise LLMError(f"Another generation is already writing into the run {run.name!r} (in another tab, "
                           "session or command); wait for it or cancel it there.") from None
        yield
    finally:
        fh.close()


class RunWriters:
    """The run folder's three append-only files, open for the duration of a run."""

    def __init__(self, run_dir: Path) -> None:
        self.audit = JsonlAppender(run_dir / AUDIT_FILE)
        self.docs = JsonlAppender(run_dir / DOCUMENTS_FILE)
        self.fails = JsonlAppender(run_dir / FAILURES_FILE)

    def close(self) -> None:
        """Close all three (each line was already flushed and fsynced)."""
        for w in (self.audit, self.docs, self.fails):
            w.close()
