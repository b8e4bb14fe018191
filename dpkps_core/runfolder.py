"""The run folder: the central contract between the steps, the CLI, the app and the export (docs/ARCHITECTURE.md).

This module is its ONE owner (issue 12): the file names, which files are private and which may be released,
owner-only creation, the runs root, and the reading and writing of every file. Layout::

    sequences.jsonl           DP keyphrase sequences (release)
    privacy_report.json       ledger events and public parameters (release)
    private_vocabulary.json   Ṽ and its noisy counts — DP outputs (release)
    run_config.json           the public parameters, re-runnable; the corpus path stays local (the bundle scrubs it)
    split.json                PRIVATE: the held-out split's indices
    documents.jsonl           LLM documents, one fsync'd line each (release)
    generation_failures.jsonl prompts that failed for good (release: ids and reasons only)
    audit_log.jsonl           every prompt sent (release)
    evaluation.json           PRIVATE: accuracies on real data
    .generation.lock          the generation lock (local)
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from dpkps_core.errors import ParameterError

log = logging.getLogger(__name__)

SEQUENCES_FILE = "sequences.jsonl"
PRIVACY_REPORT_FILE = "privacy_report.json"
VOCABULARY_FILE = "private_vocabulary.json"
RUN_CONFIG_FILE = "run_config.json"
SPLIT_FILE = "split.json"
DOCUMENTS_FILE = "documents.jsonl"
FAILURES_FILE = "generation_failures.jsonl"
AUDIT_FILE = "audit_log.jsonl"
EVALUATION_FILE = "evaluation.json"
LOCK_FILE = ".generation.lock"

#: Files that may leave the machine in a release bundle (the export copies only these, after scrubbing).
RELEASABLE_FILES: tuple[str, ...] = (SEQUENCES_FILE, PRIVACY_REPORT_FILE, VOCABULARY_FILE, RUN_CONFIG_FILE,
                                     DOCUMENTS_FILE, FAILURES_FILE, AUDIT_FILE)
#: Files that never leave the machine.
PRIVATE_FILES: tuple[str, ...] = (SPLIT_FILE, EVALUATION_FILE, LOCK_FILE)
#: What a sampling run must have written before anything can read it back.
SAMPLING_FILES: tuple[str, ...] = (RUN_CONFIG_FILE, SPLIT_FILE, VOCABULARY_FILE, SEQUENCES_FILE)


def runs_root(env: Mapping[str, str] | None = None) -> Path:
    """Root of the run folders: ``$DPKPS_RUNS_DIR``, else ``~/.local/share/dpkps/runs``, else a temp folder.

    The root is created owner-only (0o700) when missing."""
    env = os.environ if env is None else env
    candidates = [Path(env["DPKPS_RUNS_DIR"]).expanduser()] if env.get("DPKPS_RUNS_DIR") else []
    candidates += [Path.home() / ".local" / "share" / "dpkps" / "runs", Path(tempfile.gettempdir()) / "dpkps-runs"]
    for root in candidates:
        try:
            root.mkdir(parents=True, exist_ok=True, mode=0o700)
            if os.access(root, os.W_OK):
                return root
        except OSError:
            continue
    return Path(tempfile.mkdtemp(prefix="dpkps-runs-"))


def create_run_dir(root: Path, token: str, *, prefix: str = "run") -> Path:
    """A fresh folder ``<prefix>-<UTC time>-<token>-<random>`` under ``root``, owner-only (0o700). The name holds
    no corpus name: a file name must not carry anything derived from the private corpus."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = Path(root) / f"{prefix}-{stamp}-{token}-{secrets.token_hex(3)}"
    path.mkdir(parents=True, exist_ok=False, mode=0o700)
    os.chmod(path, 0o700)
    return path


def ensure_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and parents) if needed and make it owner-only (0o700)."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    return out


def is_releasable(name: str) -> bool:
    """True for a run-folder file that may go into a release bundle."""
    return name in RELEASABLE_FILES


# ----------------------------------------------------------------------------------------------- JSON / JSONL

def json_default(obj: Any) -> Any:
    """JSON for numpy scalars and arrays and read-only mappings."""
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "items"):
        return dict(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False, default=json_default), encoding="utf-8")


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_jsonl(path: str | os.PathLike[str], rows: Iterable[Mapping[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False, default=json_default) + "\n")


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file, skipping blank, damaged (a crash mid-line) or non-object lines."""
    p = Path(path)
    if not p.is_file():
        return
    with p.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                log.warning("Skipping damaged line %d of %s", lineno, p.name)  # the line number only, never text
                continue
            if isinstance(obj, dict):
                yield obj


# ------------------------------------------------------------------------- append-only JSONL (the LLM step)


def repair_jsonl_tail(path: str | os.PathLike[str]) -> int:
    """Cut off a truncated last line (no trailing newline, e.g. after a kill). Returns bytes removed."""
    p = Path(path)
    if not p.is_file():
        return 0
    size = p.stat().st_size
    if size == 0:
        return 0
    with p.open("rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        keep = 0
        pos = size
        block = 65536
        while pos > 0:
            start = max(0, pos - block)
            fh.seek(start)
            chunk = fh.read(pos - start)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("Removed a truncated last line from %s (%d bytes)", p.name, size - keep)
    return size - keep


def read_documents(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Finished documents of a run folder, first occurrence per id, in file order."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for obj in iter_jsonl(Path(run_dir) / DOCUMENTS_FILE):
        sid = obj.get("id")
        if isinstance(sid, str) and isinstance(obj.get("text"), str) and sid not in seen:
            seen.add(sid)
            out.append(obj)
    return out


def read_failures(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Current failures of a run folder (last entry per id, ids that have a document left out)."""
    done = {d["id"] for d in read_documents(run_dir)}
    last: dict[str, dict[str, Any]] = {}
    for obj in iter_jsonl(Path(run_dir) / FAILURES_FILE):
        sid = obj.get("id")
        if isinstance(sid, str) and sid not in done:
            last[sid] = obj
    return list(last.values())


class JsonlAppender:
    """Append-only JSONL writer: one line per object, flushed and fsynced at once, under a lock."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_jsonl_tail(self.path)
        self._lock = threading.Lock()
        self._fh = self.path.open("ab")

    def append(self, obj: Mapping[str, Any]) -> None:
        line = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def __enter__(self) -> "JsonlAppender":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rewrite_jsonl(path: Path, objs: Iterable[Mapping[str, Any]]) -> None:
    """Replace a JSONL file atomically (temporary file, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        for obj in objs:
            fh.write((json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunFolder:
    """One run folder: paths of its files and typed reads (the writes are the steps' own, via this module)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def __repr__(self) -> str:
        return f"RunFolder({self.path.name!r})"

    @property
    def sequences(self) -> Path:
        return self.path / SEQUENCES_FILE

    @property
    def privacy_report(self) -> Path:
        return self.path / PRIVACY_REPORT_FILE

    @property
    def vocabulary(self) -> Path:
        return self.path / VOCABULARY_FILE

    @property
    def config(self) -> Path:
        return self.path / RUN_CONFIG_FILE

    @property
    def split(self) -> Path:
        return self.path / SPLIT_FILE

    @property
    def documents(self) -> Path:
        return self.path / DOCUMENTS_FILE

    @property
    def failures(self) -> Path:
        return self.path / FAILURES_FILE

    @property
    def audit(self) -> Path:
        return self.path / AUDIT_FILE

    @property
    def evaluation(self) -> Path:
        return self.path / EVALUATION_FILE

    def require_sampling(self) -> None:
        """Refuse a folder that is not a finished sampling run, naming the command that makes one."""
        for name in SAMPLING_FILES:
            if not (self.path / name).is_file():
                raise ParameterError(f"The run folder {self.path} has no {name}; run `python -m dpkps_core sample "
                                     f"--out {self.path}` first.")

    def read_config(self) -> dict[str, Any]:
        return read_json(self.config) if self.config.is_file() else {}

    def read_sequences(self) -> list[dict[str, Any]]:
        return list(iter_jsonl(self.sequences))

    def private_corpus_hints(self) -> tuple[str | None, list[str]]:
        """The private corpus's local path and SHA-256 recorded by the sampling step (``corpus_path``,
        ``corpus_sha256`` of ``run_config.json``), so the LLM step can refuse it as a few-shot file."""
        try:
            cfg = self.read_config()
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None, []
        if not isinstance(cfg, dict):
            return None, []
        path = cfg.get("corpus_path") if isinstance(cfg.get("corpus_path"), str) else None
        digest = cfg.get("corpus_sha256")
        return path, [digest] if isinstance(digest, str) else []

    def read_report(self) -> dict[str, Any]:
        return read_json(self.privacy_report) if self.privacy_report.is_file() else {}
