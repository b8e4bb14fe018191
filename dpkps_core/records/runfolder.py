"""The run folder: the central contract between the steps, the CLI, the app and the export (docs/ARCHITECTURE.md).

This module is its ONE owner (docs/ARCHITECTURE.md): the file names, which files are private and which may be released,
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
    densities.json            the per-class DP density scores over Ṽ (a DP output; local: the app reopens from it)
    run_state.json            the app's public settings of each step (local: the app reopens from it)
    ledger_record.json        LOCAL: the admitting ledger's id, the events the report derives from (run_record.py)
    .generation.lock          the generation lock (local)

The run folder is the state of a run: :func:`list_runs` lists the run folders, :func:`open_run` reads one back, so a
run is reopened after a reload and continued, evaluated and exported without a new release (post-processing)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
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
DENSITY_FILE = "densities.json"
RUN_STATE_FILE = "run_state.json"
LEDGER_RECORD_FILE = "ledger_record.json"
DOSSIER_FILES: tuple[str, ...] = ("dossier.html", "dossier.json", "reproduce.md", "reproduce_config.json")
INTERNAL_DOSSIER_FILES: tuple[str, ...] = ("dossier_internal.html", "dossier_internal.json", "dossier_internal.pdf")

#: Files that may leave the machine in a release bundle (the export copies only these, after scrubbing).
RELEASABLE_FILES: tuple[str, ...] = (SEQUENCES_FILE, PRIVACY_REPORT_FILE, VOCABULARY_FILE, RUN_CONFIG_FILE,
                                     DOCUMENTS_FILE, FAILURES_FILE, AUDIT_FILE)
#: Files that never leave the machine, the internal dossier among them (the release one, DOSSIER_FILES, is built).
PRIVATE_FILES: tuple[str, ...] = (SPLIT_FILE, EVALUATION_FILE, LOCK_FILE, LEDGER_RECORD_FILE) + INTERNAL_DOSSIER_FILES
#: Files kept on this machine that hold no private data (DP outputs, public settings the app reopens a run from).
LOCAL_FILES: tuple[str, ...] = (DENSITY_FILE, RUN_STATE_FILE)
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

    @property
    def densities(self) -> Path:
        return self.path / DENSITY_FILE

    @property
    def state(self) -> Path:
        return self.path / RUN_STATE_FILE

    def read_state(self) -> dict[str, Any]:
        """The app's public settings of each step (``run_state.json``); {} when absent or unreadable."""
        return _read_mapping(self.state)

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        """(name, mtime in ns, size) of the files a reopened run is read from: a cache key that moves whenever one
        of them is rewritten or appended to (documents while the LLM writes)."""
        out = []
        for name in (VOCABULARY_FILE, DENSITY_FILE, SEQUENCES_FILE, PRIVACY_REPORT_FILE, RUN_STATE_FILE,
                     RUN_CONFIG_FILE, DOCUMENTS_FILE, FAILURES_FILE):
            try:
                st = (self.path / name).stat()
            except OSError:
                continue
            out.append((name, st.st_mtime_ns, st.st_size))
        return tuple(out)


# ----------------------------------------------------------------------------------------------- reopening a run

#: The names :func:`create_run_dir` gives (``<prefix>-<UTC date>-<UTC time>-<token>-<random>``).
RUN_NAME = re.compile(r"^(?P<prefix>[a-z]+)-(?P<date>\d{8})-(?P<time>\d{6})-(?P<token>[0-9A-Za-z]+)-[0-9a-f]{6}$")


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        log.warning("Skipping an unreadable %s", path.name)
        return {}
    return data if isinstance(data, dict) else {}


def _created(path: Path) -> str:
    """The run's creation time (UTC) from its name, else from the folder's modification time."""
    m = RUN_NAME.match(path.name)
    if m:
        d, t = m["date"], m["time"]
        return f"{d[:4]}-{d[4:6]}-{d[6:]} {t[:2]}:{t[2:4]}:{t[4:]} UTC"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(path.stat().st_mtime))
    except OSError:
        return "?"


def _count_lines(path: Path) -> int:
    return sum(1 for _ in iter_jsonl(path))


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """One row of the list of run folders (public settings and DP-output counts only)."""

    path: Path
    name: str
    created: str
    corpus: str
    method: str | None
    epsilon_total: float | None
    sequences: int
    documents: int
    has_vocabulary: bool
    has_densities: bool

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "path": str(self.path)}


def summarize_run(path: str | os.PathLike[str]) -> RunSummary | None:
    """What the list of runs shows about one folder; ``None`` for a folder that holds no run (no Ṽ, no sequences)."""
    folder = RunFolder(path)
    if not folder.path.is_dir() or not (folder.vocabulary.is_file() or folder.sequences.is_file()):
        return None
    state, config, report = folder.read_state(), _read_mapping(folder.config), _read_mapping(folder.privacy_report)
    corpus = state.get("corpus_name") or state.get("corpus_spec") or config.get("corpus") or "?"
    method = (state.get("density_meta") or {}).get("method") or report.get("method") or config.get("method")
    eps = report.get("epsilon_total")
    if not isinstance(eps, (int, float)):
        eps = state.get("epsilon_total") if isinstance(state.get("epsilon_total"), (int, float)) else None
    return RunSummary(path=folder.path, name=folder.path.name, created=_created(folder.path), corpus=str(corpus),
                      method=str(method) if method else None, epsilon_total=float(eps) if eps is not None else None,
                      sequences=_count_lines(folder.sequences), documents=len(read_documents(folder.path)),
                      has_vocabulary=folder.vocabulary.is_file(), has_densities=folder.densities.is_file())


def list_runs(root: str | os.PathLike[str] | None = None) -> list[RunSummary]:
    """The run folders under ``root`` (default :func:`runs_root`), newest first. Folders that hold no run, links and
    unreadable entries are skipped."""
    base = Path(root) if root is not None else runs_root()
    try:
        entries = [p for p in base.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    out = [s for s in (summarize_run(p) for p in entries) if s is not None]
    return sorted(out, key=lambda s: (s.created, s.name), reverse=True)


def resolve_run_name(name: str, root: str | os.PathLike[str] | None = None) -> Path:
    """The run folder called ``name`` under ``root`` (default :func:`runs_root`) — a bare folder name as
    :func:`create_run_dir` makes it (e.g. from the app's URL), never a path."""
    if not isinstance(name, str) or not RUN_NAME.match(name):
        raise ParameterError("That is not the name of a run folder.")
    base = Path(root) if root is not None else runs_root()
    path = base / name
    if path.is_symlink() or not path.is_dir():
        raise ParameterError(f"The run folder {name} does not exist on this machine (any more).")
    return path


@dataclasses.dataclass(frozen=True)
class ReopenedRun:
    """A run read back from its folder: DP outputs, public settings and the LLM's documents — everything the app
    shows and continues from, at no new ε (post-processing). Nothing here is private."""

    path: Path
    config: dict[str, Any]
    state: dict[str, Any]
    report: dict[str, Any]
    vocabulary: dict[str, Any] | None
    densities: dict[str, Any] | None
    sequences: list[dict[str, Any]]
    documents: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    signature: tuple[tuple[str, int, int], ...]

    @property
    def name(self) -> str:
        return self.path.name

    def density(self) -> Any:
        """The run's per-class densities read back as per-term scores over Ṽ (post-processing of its ε_kde release),
        in the form the independent sampler takes (:class:`~dpkps_core.dp.histogram.SmoothedHistogramDensity` whose
        scores are the stored ones); ``None`` when the run holds no densities."""
        from dpkps_core.dp.histogram import SmoothedHistogramDensity

        if self.densities is None:
            return None
        meta = self.state.get("density_meta") or {}
        info = self.state.get("density_info") or {}
        return SmoothedHistogramDensity(classes=tuple(str(c) for c in self.densities["classes"]),
                                        noisy_histograms=np.asarray(self.densities["scores"], dtype=np.float64),
                                        bandwidth=float(info.get("bandwidth") or 0.0),
                                        epsilon=float(meta.get("eps_kde") or 0.0), noise_scale=0.0)


def open_run(path: str | os.PathLike[str]) -> ReopenedRun:
    """Read a run folder back (:class:`ReopenedRun`); a folder without Ṽ is refused with a plain sentence."""
    folder = RunFolder(path)
    if not folder.path.is_dir():
        raise ParameterError(f"The run folder {folder.path.name} does not exist (any more).")
    vocabulary = _read_mapping(folder.vocabulary) or None
    if vocabulary is None or not isinstance(vocabulary.get("terms"), list):
        raise ParameterError(f"The run folder {folder.path.name} holds no private vocabulary Ṽ, so there is nothing "
                             "to reopen.")
    densities = _read_mapping(folder.densities) or None
    if densities is not None and not (isinstance(densities.get("scores"), list)
                                      and isinstance(densities.get("classes"), list)):
        log.warning("Ignoring a malformed %s", DENSITY_FILE)
        densities = None
    return ReopenedRun(path=folder.path, config=_read_mapping(folder.config), state=folder.read_state(),
                       report=_read_mapping(folder.privacy_report), vocabulary=vocabulary, densities=densities,
                       sequences=folder.read_sequences(), documents=read_documents(folder.path),
                       failures=read_failures(folder.path), signature=folder.signature())
