"""A server-side data folder for corpora too large for a browser upload (issue 31 §2; docs/DESIGN.md §1).

The deployment names ONE folder, ``$DPKPS_DATA_DIR`` (unset: no such source). The app lists its entries — corpus
files (CSV, TSV, JSONL, JSON, Parquet, a ZIP of ``.txt`` files) and folders of parts (Parquet parts as a data
platform exports them, or CSV/JSONL parts) — and the user picks one by NAME; nothing else on the server can be
reached: a name is a bare entry name (no separator, no ``..``, no absolute path), and an entry whose real path
(symbolic links resolved) lies outside the folder is refused. Reading then goes through the one loader
(:func:`dpkps_core.corpus.load_corpus`, the streaming reader) with the deployment's limits (:mod:`.limits`), not the
browser's upload cap.

A corpus of the folder larger than ``$DPKPS_STREAM_ABOVE_BYTES`` (default: the browser upload cap, 200 MB) is
streamed by the app — read chunk by chunk for each release and never held whole, like ``dpkps sample`` on a file —
instead of loaded into the session's memory (:func:`streams`).

Only names and sizes are listed; no file is read to list it. The names of the files are the deployment's: they are
shown to signed-in users of the app, so the folder should hold only corpora those users may load.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Mapping

from dpkps_core.errors import CorpusError, ParameterError

#: The deployment setting that names the server-side data folder.
DATA_DIR_ENV = "DPKPS_DATA_DIR"
#: The file types the loader reads, by suffix.
CORPUS_SUFFIXES = (".csv", ".tsv", ".tab", ".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".zip")
#: Suffixes of the parts a folder entry may hold (a folder of parts is one corpus).
PART_SUFFIXES = (".csv", ".tsv", ".jsonl", ".ndjson", ".parquet", ".pq")
#: The deployment setting above which (in bytes on disk) the app streams a data-folder corpus; 0 streams them all.
STREAM_ABOVE_ENV = "DPKPS_STREAM_ABOVE_BYTES"
#: Its default: the browser upload cap (Streamlit's ``server.maxUploadSize``, the loader's default size limit). A
#: corpus an upload could hold costs the session about what an upload costs and keeps every in-memory feature (the
#: exact previews, the no-LLM check, the evaluation); above it, holding the corpus whole costs gigabytes (1,000,000
#: rows of ~670 characters: 3.1 GB at page 1 alone, docs/OPERATIONS.md), so it is streamed.
DEFAULT_STREAM_ABOVE_BYTES = 200 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class DataEntry:
    """One corpus of the data folder: ``name`` (the entry's name), ``kind`` ("file" or "folder of N parts") and its
    size in bytes (a folder: the sum of its parts)."""

    name: str
    kind: str
    size_bytes: int
    parts: int = 1

    @property
    def label(self) -> str:
        """The entry as a user reads it (name, kind, size)."""
        size = self.size_bytes
        text = f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size:,} B"
        return f"{self.name} ({'folder of ' + format(self.parts, ',') + ' parts, ' if self.kind == 'folder' else ''}" \
               f"{text})"


def data_root(environ: Mapping[str, str] | None = None) -> Path | None:
    """The deployment's data folder (``$DPKPS_DATA_DIR``), or None when it is not set. A set but unusable folder is
    a clear error (the deployment asked for it)."""
    value = (os.environ if environ is None else environ).get(DATA_DIR_ENV, "").strip()
    if not value:
        return None
    root = Path(value).expanduser()
    if not root.is_dir():
        raise CorpusError(f"The server's data folder (${DATA_DIR_ENV}) is not a folder this server can read; ask "
                          "whoever runs it to fix the setting.")
    return root.resolve()


def _parts(folder: Path) -> list[Path]:
    """The corpus parts directly or in sub-folders (hive ``key=value`` folders) of ``folder``, links excluded."""
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and not (Path(dirpath) / d).is_symlink())
        for f in sorted(filenames):
            p = Path(dirpath) / f
            if not f.startswith(".") and p.suffix.lower() in PART_SUFFIXES and not p.is_symlink():
                out.append(p)
    return out


def list_data_entries(root: Path) -> list[DataEntry]:
    """The corpora of the data folder ``root``: its corpus files and its folders that hold parts, by name; links,
    hidden entries and anything else are left out."""
    entries = []
    try:
        children = sorted(root.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        raise CorpusError(f"The server's data folder cannot be listed ({type(exc).__name__}).") from None
    for p in children:
        if p.name.startswith(".") or p.is_symlink():
            continue
        if p.is_file() and p.suffix.lower() in CORPUS_SUFFIXES:
            entries.append(DataEntry(p.name, "file", p.stat().st_size))
        elif p.is_dir():
            parts = _parts(p)
            if parts:
                entries.append(DataEntry(p.name, "folder", sum(q.stat().st_size for q in parts), len(parts)))
    return entries


def resolve_data_entry(root: Path, name: str) -> Path:
    """The entry called ``name`` of the data folder ``root`` — a bare entry name as :func:`list_data_entries` gives
    it, never a path: names with a separator, ``.``/``..``, or whose real path lies outside ``root`` are refused,
    with one message for every name that is not an entry (so a refusal says nothing about the server's files)."""
    root = Path(root).resolve()
    refused = ParameterError(f"There is no corpus called {name!r} in the server's data folder.")
    if (not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\\" in name
            or "\x00" in name or name != name.strip() or name.startswith(".")):
        raise refused
    path = root / name
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise refused from None
    if path.is_symlink() or real.parent != root:
        raise refused
    if not any(e.name == name for e in list_data_entries(root)):
        raise refused
    return real


def stream_above_bytes(environ: Mapping[str, str] | None = None) -> int:
    """``$DPKPS_STREAM_ABOVE_BYTES`` (a whole number of bytes ≥ 0; 0 streams every data-folder corpus), else
    :data:`DEFAULT_STREAM_ABOVE_BYTES`."""
    value = (os.environ if environ is None else environ).get(STREAM_ABOVE_ENV, "").strip()
    if not value:
        return DEFAULT_STREAM_ABOVE_BYTES
    if not value.isdigit():
        raise ParameterError(f"${STREAM_ABOVE_ENV} must be a whole number of bytes ≥ 0 (0 streams every corpus of "
                             f"the data folder), got {value!r}; ask whoever runs the server to fix the setting.")
    return int(value)


def entry_bytes(path: Path) -> int:
    """The size on disk of a data-folder entry: a file's bytes, or the sum of a folder's parts."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in _parts(path))


def streams(path: Path, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the app streams the data-folder entry at ``path`` (its size above :func:`stream_above_bytes`)
    rather than loading it whole (docs/OPERATIONS.md "Server-side data folder")."""
    return entry_bytes(path) > stream_above_bytes(environ) or stream_above_bytes(environ) == 0
