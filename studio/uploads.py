"""This session's PUBLIC uploads (a vocabulary file): a private temp folder that lives as long as the session, and the
upload saved under its own sanitised file name (the run folder and the bundle name it as the user knows it)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from studio.state import SessionState


def session_tmp(state: SessionState) -> Path:
    """A private temp folder of this session (owner-only) for PUBLIC uploads such as a vocabulary file.

    It is a ``tempfile.TemporaryDirectory`` held only by this session's state: when the session ends, Streamlit
    drops the state, the object is garbage-collected and its finalizer deletes the folder (also at exit)."""
    holder = state.uploads.tmp
    if not isinstance(holder, tempfile.TemporaryDirectory) or not Path(holder.name).is_dir():
        holder = tempfile.TemporaryDirectory(prefix="dpkps-session-")
        os.chmod(holder.name, 0o700)
        state.uploads.tmp = holder
    return Path(holder.name)


def vocabulary_file_name(filename: str) -> str:
    """A PUBLIC vocabulary upload's own file name, made safe to save: letters, digits, ``-``, ``_`` and ``.`` only
    (no folders), the extension kept (``.txt`` when it has none), at most 80 characters."""
    base = Path(str(filename).replace("\\", "/")).name
    keep = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in base).strip("._") or "vocabulary"
    stem, dot, ext = keep.rpartition(".")
    if not dot or not stem or not ext.isalnum() or len(ext) > 8:
        stem, ext = keep, "txt"
    return f"{stem[:70]}.{ext.lower()}"


def save_vocabulary_upload(state: SessionState, data: bytes, filename: str) -> Path:
    """Save a PUBLIC vocabulary upload in this session's temp folder under its own (sanitised) file name, so that
    the run folder and the bundle name it as the user knows it — ``to_run_dict`` writes the file name and its
    SHA-256, never the path (docs/PRIVACY.md). Another file of the same name gets a short ``-2``, ``-3``… suffix;
    the same bytes again reuse their file."""
    name = vocabulary_file_name(filename)
    folder = session_tmp(state)
    stem, ext = name.rsplit(".", 1)
    path, n = folder / name, 1
    while path.exists() and path.read_bytes() != data:
        n += 1
        path = folder / f"{stem}-{n}.{ext}"
    path.write_bytes(data)
    state.uploads.vocab_upload_path = str(path)
    state.uploads.vocab_upload_name = path.name
    state.uploads.vocab_upload_sha256 = hashlib.sha256(data).hexdigest()
    return path
