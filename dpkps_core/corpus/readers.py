"""Reading a private corpus from the user's file (DESIGN §1): formats, column guessing, cleaning, limits.

Supported inputs: CSV, TSV, JSONL (or a JSON array of objects), Parquet, a folder of ``.txt`` files and a
ZIP of ``.txt`` files (label = the folder that holds each file). ``source`` may be a path, raw bytes (with
``filename=``) or a file-like object such as a Streamlit upload. Nothing here logs, prints or caches document
text; every error message names at most a line/row number, a column name or a file name inside the upload.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Sequence

from dpkps_core.corpus.model import Corpus, LoadReport, check_class_names
from dpkps_core.errors import CorpusError, ParameterError

#: Accepted values of ``file_format``.
FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "zip", "folder")

TEXT_COLUMN_NAMES = ("text", "document", "review", "body", "content")
LABEL_COLUMN_NAMES = ("label", "class", "category", "condition", "target")

_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".zip": "zip",
}


# --------------------------------------------------------------------------------------------------------
# Raw input handling
# --------------------------------------------------------------------------------------------------------


@dataclass
class _Input:
    """A source resolved to bytes (or a folder) plus its display name and format."""

    data: bytes | None
    folder: Path | None
    display: str
    fmt: str


def _resolve_input(
    source: Any, *, filename: str | None, file_format: str | None, max_bytes: int
) -> _Input:
    """Turn a path / bytes / file-like into bytes or a folder, checking size and emptiness."""
    if file_format is not None:
        if not isinstance(file_format, str) or file_format.lower().lstrip(".") not in FORMATS:
            raise ParameterError(f"file_format must be one of: {', '.join(FORMATS)}.")
        file_format = file_format.lower().lstrip(".")
        if file_format == "ndjson":
            file_format = "jsonl"

    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        display = filename or "upload"
        folder = None
    elif hasattr(source, "read") and not isinstance(source, (str, os.PathLike)):
        if hasattr(source, "seek"):
            try:
                source.seek(0)
            except (OSError, ValueError):
                pass
        data = source.read()
        if isinstance(data, str):
            data = data.encode("utf-8")
        display = filename or str(getattr(source, "name", "") or "upload")
        folder = None
    elif isinstance(source, (str, os.PathLike)):
        path = Path(source)
        display = filename or path.name or str(path)
        if path.is_dir():
            total = 0
            for p in path.rglob("*"):
                if p.is_file():
                    total += p.stat().st_size
                    if total > max_bytes:
                        raise CorpusError(_too_big_message(total, max_bytes, "folder"))
            if file_format not in (None, "folder"):
                raise ParameterError(f"'{path.name}' is a folder; use file_format='folder' or give a file.")
            return _Input(None, path, str(path), "folder")
        if not path.exists():
            raise CorpusError(f"The file '{path}' was not found; check the path.")
        size = path.stat().st_size
        if size > max_bytes:
            raise CorpusError(_too_big_message(size, max_bytes, "file"))
        data = path.read_bytes()
        folder = None
        display = str(path)
        filename = filename or path.name
    else:
        raise ParameterError("The corpus source must be a file path, a folder path or the file's bytes.")

    if len(data) > max_bytes:
        raise CorpusError(_too_big_message(len(data), max_bytes, "file"))
    if not data.strip():
        raise CorpusError("The file is empty; choose a file that contains documents.")

    fmt = file_format or _guess_format(data, filename)
    return _Input(data, folder, display, fmt)


def _fmt_size(n: int) -> str:
    if n >= 1024 * 1024:
        return f"{n / 1024 / 1024:,.1f} MB".replace(".0 MB", " MB")
    if n >= 1024:
        return f"{n / 1024:,.1f} KB".replace(".0 KB", " KB")
    return f"{n:,} bytes"


def _too_big_message(size: int, limit: int, what: str) -> str:
    return (
        f"The {what} is {_fmt_size(size)}, over the {_fmt_size(limit)} limit; split it or use a sample of the "
        "documents."
    )


def _guess_format(data: bytes, filename: str | None) -> str:
    """Format from the file name's extension, else from the content's magic bytes."""
    if filename:
        ext = PurePosixPath(str(filename).replace("\\", "/")).suffix.lower()
        if ext in _EXTENSIONS:
            return _EXTENSIONS[ext]
    if data[:4] == b"PAR1":
        return "parquet"
    if data[:4] == b"PK\x03\x04":
        return "zip"
    if filename and PurePosixPath(str(filename)).suffix:
        raise CorpusError(
            f"Files of type '{PurePosixPath(str(filename)).suffix}' are not supported; use CSV, TSV, JSONL, "
            "Parquet, a ZIP of .txt files or a folder of .txt files."
        )
    head = data[:4096].lstrip()
    if head[:1] in (b"{", b"["):
        return "jsonl" if head[:1] == b"{" else "json"
    return "csv"


def _decode_text(data: bytes, what: str = "file") -> str:
    """Decode UTF-8 (BOM allowed) with specific errors for binary and non-UTF-8 input."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise CorpusError(f"The {what} is encoded as UTF-16; re-save it as UTF-8 and upload it again.")
    if b"\x00" in data[:8192]:
        raise CorpusError(
            f"The {what} looks binary, not text; upload a CSV, TSV, JSONL, Parquet or ZIP of .txt files."
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorpusError(
            f"The {what} is not valid UTF-8 (first bad byte at line {line}, byte offset {exc.start}); "
            "re-save it as UTF-8 and upload it again."
        ) from None


# --------------------------------------------------------------------------------------------------------
# Tabular readers
# --------------------------------------------------------------------------------------------------------


def _read_table(inp: _Input, *, nrows: int | None = None) -> tuple[Any, Callable[[int], str]]:
    """Read a tabular input into a pandas DataFrame; return it with a row -> location describer."""
    import pandas as pd

    assert inp.data is not None
    if inp.fmt in ("csv", "tsv"):
        text = _decode_text(inp.data)
        sep = "\t" if inp.fmt == "tsv" else _sniff_delimiter(text)
        try:
            df = pd.read_csv(
                io.StringIO(text),
                sep=sep,
                dtype=str,
                keep_default_na=False,
                na_values=[],
                nrows=nrows,
            )
        except pd.errors.EmptyDataError:
            raise CorpusError("The file is empty; choose a file that contains documents.") from None
        except (pd.errors.ParserError, csv.Error) as exc:
            m = re.search(r"line (\d+)", str(exc))
            where = f" near line {m.group(1)}" if m else ""
            kind = "TSV" if inp.fmt == "tsv" else "CSV"
            raise CorpusError(
                f"The {kind} file could not be parsed{where} (rows have different numbers of fields or broken "
                "quotes); check the delimiter and quoting, or export it again from your spreadsheet."
            ) from None
        _check_header(df)
        return df, lambda i: f"row {i + 1} (not counting the header)"
    if inp.fmt in ("jsonl", "json"):
        text = _decode_text(inp.data)
        records, lines = _parse_json_records(text, inp.fmt, nrows)
        df = pd.DataFrame.from_records(records)
        return df, (lambda i: f"line {lines[i]}") if lines else (lambda i: f"record {i + 1}")
    if inp.fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            table = pq.read_table(io.BytesIO(inp.data))
        except ImportError as exc:
            raise CorpusError("Reading Parquet needs the package 'pyarrow'; install it or upload a CSV.") from exc
        except Exception:  # noqa: BLE001 - any pyarrow failure means an unreadable file
            if b"\x00" not in inp.data[:8192] and not inp.data.startswith(b"PAR1"):
                raise CorpusError(
                    "The file is not a Parquet file; check its type or choose the matching format."
                ) from None
            raise CorpusError(
                "The Parquet file could not be read (it may be damaged); export it again and retry."
            ) from None
        df = table.to_pandas()
        if nrows is not None:
            df = df.head(nrows)
        return df, lambda i: f"row {i + 1}"
    raise CorpusError(f"The {inp.fmt} format has no columns; column choices apply to CSV, TSV, JSONL and Parquet.")


def _check_header(df: Any) -> None:
    """Reject header rows with blank or duplicated column names (pandas renames them silently)."""
    cols = [str(c) for c in df.columns]
    dup = [c for c in cols if re.search(r"\.\d+$", c) and c.rsplit(".", 1)[0] in cols]
    if dup:
        raise CorpusError(
            f"The header repeats the column name '{dup[0].rsplit('.', 1)[0]}'; give every column a distinct name."
        )


def _sniff_delimiter(text: str) -> str:
    """Delimiter of a CSV: the most frequent of , ; | TAB in the header line (default ',')."""
    header = text.split("\n", 1)[0]
    counts = {d: header.count(d) for d in (",", ";", "\t", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > 0 else ","


def _parse_json_records(text: str, fmt: str, nrows: int | None) -> tuple[list[dict[str, Any]], list[int]]:
    """Records of a JSONL file (one object per line) or of a JSON array; with line numbers for JSONL."""
    stripped = text.lstrip()
    if fmt == "json" and stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"The JSON file is not valid JSON (line {exc.lineno}); fix it or save it as JSON Lines."
            ) from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise CorpusError("The JSON file must be an array of objects, one per document.")
        return (data[:nrows] if nrows else data), []
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise CorpusError(
                f"Line {lineno} of the JSONL file is not valid JSON; put one JSON object per line."
            ) from None
        if not isinstance(obj, dict):
            raise CorpusError(f"Line {lineno} of the JSONL file is not a JSON object; put one object per line.")
        records.append(obj)
        lines.append(lineno)
        if nrows is not None and len(records) >= nrows:
            break
    if not records:
        raise CorpusError("The file is empty; choose a file that contains documents.")
    return records, lines


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    try:
        import pandas as pd

        return bool(pd.isna(value)) if not isinstance(value, (list, dict, tuple)) else False
    except (TypeError, ValueError):
        return False


def _as_str(value: Any) -> str:
    if _is_missing(value):
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _guess_text_column(df: Any) -> str | None:
    """A column named like text/document/review/body/content, else the string column with longest mean length."""
    cols = [str(c) for c in df.columns]
    lower = {c.lower(): c for c in cols}
    for name in TEXT_COLUMN_NAMES:
        if name in lower:
            return lower[name]
    best, best_len = None, 0.0
    for c in df.columns:
        series = df[c]
        values = [v for v in series.head(2000).tolist() if isinstance(v, str)]
        if not values or len(values) < 0.5 * min(len(series), 2000):
            continue
        mean_len = sum(len(v) for v in values) / len(values)
        if mean_len > best_len:
            best, best_len = str(c), mean_len
    return best


def _guess_label_column(df: Any, text_column: str) -> str | None:
    cols = [str(c) for c in df.columns]
    lower = {c.lower(): c for c in cols if c != text_column}
    for name in LABEL_COLUMN_NAMES:
        if name in lower:
            return lower[name]
    return None


def _columns_of(df: Any) -> list[str]:
    return [str(c) for c in df.columns]


def _select_columns(
    df: Any, text_column: str | None, label_column: str | None
) -> tuple[list[Any], list[Any], str, str]:
    """Resolve (or guess) the text and label columns and return their values."""
    cols = _columns_of(df)
    if not cols:
        raise CorpusError("The file has no columns; check that it has a header row.")
    if text_column is None:
        text_column = _guess_text_column(df)
        if text_column is None:
            raise CorpusError(
                f"No text column could be found; choose the text column from: {', '.join(cols)}."
            )
    elif text_column not in cols:
        raise CorpusError(f"Column '{text_column}' was not found; available columns: {', '.join(cols)}.")
    if label_column is None:
        label_column = _guess_label_column(df, text_column)
        if label_column is None:
            raise CorpusError(
                "No label column was found (looked for label, class, category, condition, target); choose the "
                f"label column from: {', '.join(cols)}."
            )
    elif label_column not in cols:
        raise CorpusError(f"Column '{label_column}' was not found; available columns: {', '.join(cols)}.")
    if label_column == text_column:
        raise CorpusError("The text column and the label column must be different columns.")
    df = df.loc[:, ~df.columns.duplicated()]
    return df[text_column].tolist(), df[label_column].tolist(), text_column, label_column


# --------------------------------------------------------------------------------------------------------
# Folders and ZIPs of .txt files
# --------------------------------------------------------------------------------------------------------


def _skip_member(parts: Sequence[str]) -> bool:
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


def _read_txt_folder(folder: Path, max_documents: int) -> tuple[list[str], list[str], list[str]]:
    """Texts, labels (parent folder name) and relative paths of the .txt files under ``folder``."""
    texts: list[str] = []
    labels: list[str] = []
    names: list[str] = []
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".txt")
    files = [p for p in files if not _skip_member(p.relative_to(folder).parts)]
    if not files:
        raise CorpusError("The folder contains no .txt files; put one document per .txt file in class sub-folders.")
    _check_count(len(files), max_documents)
    for p in files:
        rel = p.relative_to(folder)
        texts.append(_decode_text(p.read_bytes(), what=f"file '{rel.as_posix()}'") if p.stat().st_size else "")
        labels.append(rel.parts[-2] if len(rel.parts) > 1 else "")
        names.append(rel.as_posix())
    return texts, labels, names


def _read_txt_zip(data: bytes, max_documents: int, max_bytes: int) -> tuple[list[str], list[str], list[str]]:
    """Texts, labels (name of the folder holding each file) and member names of the .txt files in a ZIP."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise CorpusError("The ZIP file could not be opened (it may be damaged); create it again and retry.") from None
    with zf:
        members = [
            m
            for m in zf.infolist()
            if not m.is_dir()
            and m.filename.lower().endswith(".txt")
            and not _skip_member(PurePosixPath(m.filename).parts)
        ]
        if not members:
            raise CorpusError("The ZIP file contains no .txt files; put one document per .txt file in class folders.")
        _check_count(len(members), max_documents)
        total = sum(m.file_size for m in members)
        if total > max_bytes:
            raise CorpusError(_too_big_message(total, max_bytes, "unpacked ZIP content"))
        members.sort(key=lambda m: m.filename)
        texts, labels, names = [], [], []
        for m in members:
            parts = PurePosixPath(m.filename).parts
            if m.compress_type not in _READABLE_ZIP_METHODS:
                raise CorpusError(
                    f"The file '{m.filename}' in the ZIP uses a compression method this reader does not support; "
                    "recreate the ZIP with standard (deflate) compression."
                )
            try:
                raw = zf.read(m)
            except (zipfile.BadZipFile, RuntimeError):
                raise CorpusError(
                    f"The file '{m.filename}' in the ZIP could not be read (damaged or encrypted); recreate the ZIP."
                ) from None
            texts.append(_decode_text(raw, what=f"file '{m.filename}'") if raw else "")
            labels.append(parts[-2] if len(parts) > 1 else "")
            names.append(m.filename)
    return texts, labels, names


_READABLE_ZIP_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})


def _check_count(n: int, max_documents: int) -> None:
    if n > max_documents:
        raise CorpusError(
            f"The input has {n:,} documents, over the limit of {max_documents:,}; use a sample or raise the limit."
        )


# --------------------------------------------------------------------------------------------------------
# Cleaning and validation
# --------------------------------------------------------------------------------------------------------


def _clean(
    raw_texts: Sequence[Any],
    raw_labels: Sequence[Any],
    *,
    where: Callable[[int], str],
    label_desc: str,
    min_chars: int,
    drop_duplicates: bool,
    min_class_size: int,
    truncated: bool,
    drop_small_classes: bool = False,
    persons: Sequence[Any] | None = None,
) -> tuple[list[str], list[str], LoadReport, list[str] | None]:
    """Drop empty / too-short / duplicate documents, check labels and class sizes (counts only).

    ``persons`` (optional, one per raw row) is filtered alongside and returned as strings (4th element)."""
    n_read = len(raw_texts)
    n_empty = n_short = n_dup = 0
    texts: list[str] = []
    labels: list[str] = []
    kept_persons: list[str] = []
    seen: set[str] = set()
    for i, (t, y) in enumerate(zip(raw_texts, raw_labels)):
        text = _as_str(t).strip()
        if not text:
            n_empty += 1
            continue
        if len(text) < min_chars:
            n_short += 1
            continue
        label = _as_str(y).strip()
        if not label:
            raise CorpusError(
                f"The document at {where(i)} has an empty label{label_desc}; fill in or remove documents "
                "without a label."
            )
        if drop_duplicates:
            if text in seen:
                n_dup += 1
                continue
            seen.add(text)
        if persons is not None:
            person = _as_str(persons[i]).strip()
            if not person:
                raise CorpusError(
                    f"The document at {where(i)} has an empty person identifier; fill it in (each person's "
                    "documents share one identifier) or remove the document."
                )
            kept_persons.append(person)
        texts.append(text)
        labels.append(label)

    if not texts:
        if n_read == 0:
            raise CorpusError("The file has no documents, only a header (or nothing at all): put one document per "
                              "row under the header and upload the file again.")
        raise CorpusError(
            f"No documents are left after cleaning ({n_read:,} read: {n_empty:,} empty, {n_short:,} shorter than "
            f"{min_chars} characters, {n_dup:,} duplicates); choose the column that holds the documents' text, or "
            f"upload documents of at least {min_chars} characters each."
        )
    counts = Counter(labels)
    n_dropped_classes = 0
    if drop_small_classes:  # demo corpora only: their public class lists are fixed (DEMO_PUBLIC_CLASSES)
        small = {c for c, k in counts.items() if k < min_class_size}
        if small:
            keep = [i for i, y in enumerate(labels) if y not in small]
            n_dropped_classes = len(labels) - len(keep)
            texts = [texts[i] for i in keep]
            labels = [labels[i] for i in keep]
            kept_persons = [kept_persons[i] for i in keep] if persons is not None else kept_persons
            counts = Counter(labels)
            if len(counts) < 2:  # a public decision: the demo data are public
                raise ParameterError(
                    f"Fewer than two classes have at least {min_class_size} documents; lower min_class_size."
                )
    # Checks on the labels found in the data are local warnings, never refusals: whether anything is released
    # must not depend on one private document (issue 11 §2). The declared public class list decides.
    notes: list[str] = []
    if len(counts) < 2:
        notes.append("All kept documents carry the same label: check that the label column is the right one.")
    small_found = sorted((c for c, k in counts.items() if k < min_class_size), key=lambda c: (counts[c], c))
    if small_found:
        more = f" and {len(small_found) - 1} more" if len(small_found) > 1 else ""
        notes.append(f"{len(small_found)} label(s) have fewer than {min_class_size} documents (e.g. "
                     f"'{small_found[0]}'{more}); their documents still count, and a declared class with few or no "
                     "documents gets a noise-dominated density.")
    report = LoadReport(
        n_read=n_read,
        n_empty=n_empty,
        n_too_short=n_short,
        n_duplicates=n_dup,
        n_kept=len(texts),
        truncated=truncated,
        n_dropped_classes=n_dropped_classes,
        notes=tuple(notes),
    )
    return texts, labels, report, (kept_persons if persons is not None else None)


def _check_int(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParameterError(f"{name} must be a whole number of at least {minimum}.")
    return value


# --------------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------------


def load_corpus(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    file_format: str | None = None,
    name: str | None = None,
    min_chars: int = 20,
    max_bytes: int = 200 * 1024 * 1024,
    max_documents: int = 200_000,
    min_class_size: int = 2,
    drop_duplicates: bool = True,
    truncate: bool = False,
    classes: Sequence[str] | str | None = None,
    person_column: str | None = None,
) -> Corpus:
    """Load and validate a labelled private corpus; ``corpus.report`` says what was dropped.

    ``source``: a path (file or folder of class sub-folders of .txt files), raw bytes with ``filename=``
    (e.g. a Streamlit upload) or a binary file-like object. Formats: CSV, TSV, JSONL/JSON, Parquet, ZIP of
    .txt files, folder of .txt files. Columns are guessed when not given (text: text/document/review/body/
    content or the longest string column; label: label/class/category/condition/target). Documents shorter
    than ``min_chars`` characters and exact duplicates are dropped and counted. More than ``max_documents``
    documents is an error unless ``truncate=True`` (then the first ``max_documents`` are kept).
    ``person_column``: optional column identifying the person each document is about (the unit of privacy
    becomes the person; the identifiers are private and never released).
    ``classes``: the public class names the user declares (see :meth:`Corpus.with_classes`); labels found in
    the data are only local suggestions. Checks on the labels (one label only, tiny classes) are local notes in
    ``corpus.report.notes``, not errors, so that whether anything is released never hinges on one document.
    Raises :class:`CorpusError` with one actionable sentence for every bad input.
    """
    min_chars = _check_int(min_chars, "min_chars", 0)
    max_bytes = _check_int(max_bytes, "max_bytes", 1)
    max_documents = _check_int(max_documents, "max_documents", 1)
    min_class_size = _check_int(min_class_size, "min_class_size", 1)
    if not isinstance(drop_duplicates, bool) or not isinstance(truncate, bool):
        raise ParameterError("drop_duplicates and truncate must be True or False.")
    for col, what in ((text_column, "text_column"), (label_column, "label_column"), (person_column, "person_column")):
        if col is not None and not isinstance(col, str):
            raise ParameterError(f"{what} must be a column name.")

    inp = _resolve_input(source, filename=filename, file_format=file_format, max_bytes=max_bytes)
    limit = max_documents if not truncate else 2**62
    truncated = False
    if inp.fmt in ("folder", "zip"):
        if text_column is not None or label_column is not None or person_column is not None:
            raise ParameterError("Column names apply to tabular files only; .txt files are labelled by their folder.")
        if inp.fmt == "folder":
            if inp.folder is None:
                raise ParameterError("The folder format needs a folder path.")
            texts, labels, names = _read_txt_folder(inp.folder, limit)
        else:
            texts, labels, names = _read_txt_zip(inp.data or b"", limit, max_bytes)
        missing = sum(1 for y in labels if not y)
        if missing:
            raise CorpusError(
                f"{missing} .txt file(s) are not inside a class folder, so they have no label; put each class's "
                "files in a folder named after the class."
            )
        where: Callable[[int], str] = lambda i: f"file '{names[i]}'"  # noqa: E731
        label_desc = ""
    else:
        df, where = _read_table(inp)
        texts, labels, text_column, label_column = _select_columns(df, text_column, label_column)
        label_desc = f" in column '{label_column}'"
    persons: list[Any] | None = None
    if person_column is not None:
        cols = _columns_of(df)
        if person_column not in cols:
            raise CorpusError(f"Person column '{person_column}' was not found; available columns: {', '.join(cols)}.")
        if person_column in (text_column, label_column):
            raise CorpusError("The person column must differ from the text and the label column.")
        persons = df.loc[:, ~df.columns.duplicated()][person_column].tolist()
    if len(texts) > max_documents:
        if not truncate:
            _check_count(len(texts), max_documents)
        texts, labels, truncated = texts[:max_documents], labels[:max_documents], True
        persons = persons[:max_documents] if persons is not None else None

    clean_texts, clean_labels, report, clean_persons = _clean(
        texts,
        labels,
        where=where,
        label_desc=label_desc,
        min_chars=min_chars,
        drop_duplicates=drop_duplicates,
        min_class_size=min_class_size,
        truncated=truncated,
        persons=persons,
    )
    display_name = name or (PurePosixPath(str(filename)).stem if filename else Path(inp.display).stem) or "corpus"
    return Corpus(
        texts=tuple(clean_texts),
        labels=tuple(clean_labels),
        name=display_name,
        source=inp.display,
        report=report,
        public_classes=None if classes is None else check_class_names(classes),
        persons=None if clean_persons is None else tuple(clean_persons),
        person_column=person_column,
    )


def list_columns(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    file_format: str | None = None,
    max_bytes: int = 200 * 1024 * 1024,
) -> list[str]:
    """Column names of a tabular corpus file (CSV, TSV, JSONL/JSON, Parquet), for the UI's column pickers."""
    inp = _resolve_input(source, filename=filename, file_format=file_format, max_bytes=max_bytes)
    if inp.fmt in ("folder", "zip"):
        raise CorpusError(
            "Folders and ZIPs of .txt files have no columns; each file is a document labelled by its folder."
        )
    if inp.fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            return [str(n) for n in pq.read_schema(io.BytesIO(inp.data or b"")).names]
        except Exception:  # noqa: BLE001
            raise CorpusError("The Parquet file could not be read (it may be damaged); export it again and retry.") from None
    df, _ = _read_table(inp, nrows=1000 if inp.fmt in ("csv", "tsv", "jsonl") else None)
    return _columns_of(df)


def suggest_columns(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    file_format: str | None = None,
) -> tuple[str | None, str | None]:
    """The (text, label) columns :func:`load_corpus` would guess for a tabular file (either may be None)."""
    inp = _resolve_input(source, filename=filename, file_format=file_format, max_bytes=200 * 1024 * 1024)
    if inp.fmt in ("folder", "zip"):
        return None, None
    df, _ = _read_table(inp, nrows=2000 if inp.fmt in ("csv", "tsv", "jsonl") else None)
    text = _guess_text_column(df)
    return text, (_guess_label_column(df, text) if text else None)
