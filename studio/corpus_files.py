"""Page 1's corpus files: an upload or a corpus of the server's data folder (``$DPKPS_DATA_DIR``), their columns and
their loading through the one (streaming) loader — whole into the session, or, above ``$DPKPS_STREAM_ABOVE_BYTES``,
as a :class:`~studio.streamed.StreamedView` prepared by one pass (docs/OPERATIONS.md "Server-side data folder").
The session's corpus is then set by ``studio.steps.set_corpus`` (the demo corpora are loaded there too).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable

from dpkps_core.corpus import Corpus, check_encoding, list_columns, load_corpus, suggest_columns
from dpkps_core.corpus.data_folder import data_root, list_data_entries, resolve_data_entry, streams
from dpkps_core.errors import ParameterError
from dpkps_core.method.config import build_sampling_config
from dpkps_core.progress import format_duration
from studio.defaults import MAX_UPLOAD_BYTES
from studio.steps import refuse_while_stepping, set_corpus
from studio.streamed import UNDECLARED_CLASSES, StreamedView, SummarisingStream, open_streamed
from studio.state import SessionState


def upload_columns(data: bytes, filename: str, *, encoding: str = "utf-8"
                   ) -> tuple[list[str], str | None, str | None]:
    """Columns of an uploaded table and the loader's guesses; ([], None, None) for a ZIP of .txt files.
    ``encoding``: the user's choice on page 1 (the whole file is decoded with it; docs/DESIGN.md §1)."""
    if filename.lower().endswith(".zip") or data[:4] == b"PK\x03\x04":
        return [], None, None
    cols = list_columns(data, filename=filename, max_bytes=MAX_UPLOAD_BYTES, encoding=encoding)
    text, label = suggest_columns(data, filename=filename, encoding=encoding)
    return cols, text, label


def load_upload(state: SessionState, data: bytes, filename: str, *, text_column: str | None, label_column: str | None,
                person_column: str | None = None, encoding: str = "utf-8") -> Corpus:
    """Load and validate an uploaded PRIVATE corpus (kept in this session's memory only). With
    ``person_column`` the unit of privacy is the person (docs/DESIGN.md §2); ``encoding`` is the user's choice on page 1."""
    refuse_while_stepping(state)
    c = load_corpus(data, filename=filename, text_column=text_column, label_column=label_column,
                    max_bytes=MAX_UPLOAD_BYTES, person_column=person_column or None, encoding=encoding)
    _set_file_corpus(state, c, "upload", Path(filename).name, hashlib.sha256(data).hexdigest(), text_column=text_column,
                     label_column=label_column, person_column=person_column, encoding=encoding)
    return c


def server_data_dir() -> Path | None:
    """The deployment's data folder (``$DPKPS_DATA_DIR``), or None when this server has none."""
    return data_root()


def server_entries() -> list[Any]:
    """The corpora of the server's data folder (names, kinds, sizes; nothing is read)."""
    root = data_root()
    return list_data_entries(root) if root is not None else []


def server_entry(name: str) -> Path:
    """The entry ``name`` of the deployment's data folder (``$DPKPS_DATA_DIR``; names only, no traversal)."""
    root = data_root()
    if root is None:
        raise ParameterError("This server has no data folder (the deployment sets $DPKPS_DATA_DIR).")
    return resolve_data_entry(root, name)


def server_columns(name: str, *, encoding: str = "utf-8") -> tuple[list[str], str | None, str | None]:
    """Columns of a corpus in the server's data folder and the loader's guesses (names only); ([], None, None) for
    a ZIP of .txt files."""
    path = server_entry(name)
    if path.is_file() and path.suffix.lower() == ".zip":
        return [], None, None
    text, label = suggest_columns(path, encoding=encoding)
    return list_columns(path, encoding=encoding), text, label


def load_server(state: SessionState, name: str, *, text_column: str | None, label_column: str | None,
                person_column: str | None = None,
                encoding: str = "utf-8", progress: Callable[[float, str], None] | None = None
                ) -> Corpus | StreamedView:
    """Load a PRIVATE corpus from the server's data folder through the one (streaming) loader, under the
    deployment's limits ($DPKPS_MAX_CORPUS_BYTES / $DPKPS_MAX_DOCUMENTS), not the browser's upload cap. A corpus
    above ``$DPKPS_STREAM_ABOVE_BYTES`` (``dpkps_core.corpus.data_folder.streams``) is not held whole: one
    preparing pass (``progress`` hears it) decides its split, units and summary, and each DP step reads it again
    in chunks (:func:`load_streamed`)."""
    refuse_while_stepping(state)
    path = server_entry(name)
    if streams(path):
        return load_streamed(state, path, name, text_column=text_column, label_column=label_column,
                             person_column=person_column, encoding=encoding, progress=progress)
    c = load_corpus(path, text_column=text_column, label_column=label_column, person_column=person_column or None,
                    encoding=encoding)
    _set_file_corpus(state, c, "server", name, _content_sha256(path), text_column=text_column,
                     label_column=label_column,
                     person_column=person_column, encoding=encoding)
    return c


def _content_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, or of a folder's parts in name order (read in 1 MiB blocks; PRIVATE)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    for f in files:
        h.update(str(f.relative_to(path) if f != path else f.name).encode("utf-8", "surrogatepass") + b"\x00")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def load_streamed(state: SessionState, path: Path, name: str, *, text_column: str | None, label_column: str | None,
                  person_column: str | None = None, encoding: str = "utf-8",
                  progress: Callable[[float, str], None] | None = None) -> StreamedView:
    """A data-folder corpus as a :class:`~studio.session.StreamedView`: one pass — the core's preparing pass
    (:meth:`StreamedCorpus.open`: split, units, labels) with page 1's summary gathered on the way — and no document
    text kept. Its public classes are declared afterwards (:func:`declare_classes`, no new read)."""
    fp = _content_sha256(path)
    cid = _corpus_id("server", fp, text_column, label_column, person_column, encoding)
    if state.loaded.corpus_id == cid and isinstance(state.loaded.corpus, StreamedView):
        return state.loaded.corpus
    person = person_column or None
    stream = SummarisingStream(path, text_column=text_column, label_column=label_column, person_column=person,
                                encoding=encoding)
    tf = float(state.settings.test_fraction)
    cfg = build_sampling_config(classes=UNDECLARED_CLASSES, test_fraction=tf, person_column=person)
    start = time.monotonic()

    def report(fraction: float, message: str) -> None:  # documents, rows/s and the time left at that rate
        if progress is None:
            return
        seconds = time.monotonic() - start
        rate = stream.rows / seconds if seconds > 0 else 0.0
        left = seconds * (1 - fraction) / fraction if fraction > 0 else float("nan")
        progress(fraction, f"Reading the corpus (split, units, summary): {stream.rows:,} documents · "
                           f"{rate:,.0f} rows/s · " + (format_duration(left, approximate=True) + " left"
                                                        if fraction > 0 else "time left: measuring"))

    prepared = open_streamed(stream, cfg, report)
    view = StreamedView(prepared=prepared, name=Path(stream.display).stem or "corpus", source=stream.display,
                        summary=stream.summary(), long=stream.long_flags(), content_sha256=stream.digest.hexdigest(),
                        test_fraction=tf, person_column=person,
                        text_column=stream.text_column if stream.tabular else None,
                        label_column=stream.label_column if stream.tabular else None)
    _set_file_corpus(state, view, "server", name, fp, text_column=text_column, label_column=label_column,
                     person_column=person_column, encoding=encoding)
    return view


def _corpus_id(source: str, fp: str, text_column: str | None, label_column: str | None,
               person_column: str | None, encoding: str) -> str:
    """A file corpus's id: its content (SHA-256), the columns and the decoding."""
    cid = f"{source}:{fp[:16]}:{text_column}:{label_column}:{person_column or ''}"
    if check_encoding(encoding) != "utf-8":  # another decoding is another corpus (UTF-8 ids stay as they were)
        cid += f":{check_encoding(encoding)}"
    return cid


def _set_file_corpus(state: SessionState, c: Corpus | StreamedView, source: str, name: str, fp: str, *,
                     text_column: str | None,
                     label_column: str | None, person_column: str | None, encoding: str) -> None:
    """The session's corpus from a file: its id names the content (SHA-256), the columns and the decoding."""
    cid = _corpus_id(source, fp, text_column, label_column, person_column, encoding)
    set_corpus(state, c, cid=cid, spec=f"{source}:{name}", fingerprint=fp, text_column=text_column,
                label_column=label_column, filename=name)
    state.loaded.encoding = check_encoding(encoding)
    if not state.settings.doc_type:
        state.settings.doc_type = "a document"


def corpus_summary_of(state: SessionState, c: Corpus | StreamedView) -> dict[str, Any]:
    """Page 1's PRIVATE summary of ``c`` (``dpkps_core.corpus.corpus_summary``; a streamed corpus's from its
    preparing pass), computed once per corpus and kept in the session — a page-1 rerun of a large corpus would
    otherwise count every document's words again."""
    from dpkps_core.corpus import corpus_summary

    memo = state.loaded.summary
    key = (state.loaded.corpus_id, len(c))  # the declared classes do not change it
    if not memo or memo[0] != key:
        info = dict(c.summary) if isinstance(c, StreamedView) else corpus_summary(c)
        state.loaded.summary = memo = (key, info)
    return memo[1]
