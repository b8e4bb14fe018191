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
import unicodedata
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Sequence

from dpkps_core.corpus.model import Corpus, LoadReport, check_class_names
from dpkps_core.errors import CorpusError, ParameterError

#: Accepted values of ``file_format``.
FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "zip", "folder")

# Column names the loader recognises, in tiers (DESIGN §2.0: the columns are chosen from their NAMES only, never
# from the values, so that one added row cannot switch them). A name is compared after _name_key (case, accents
# and separators ignored: "Clinical Notes" → "clinical_notes"). The first tier with a match decides; two matches in
# that tier are ambiguous and the loader asks the user (--text-column / --label-column, or the choice on page 1).
#: Text column tiers; a name ending in "_text" ("review_text", "note_text") also belongs to the first tier.
TEXT_COLUMN_TIERS: tuple[tuple[str, ...], ...] = (
    ("text", "texts", "document", "documents", "doc", "full_text", "document_text"),
    ("note", "notes", "clinical_note", "clinical_notes", "body", "content", "contents", "review", "reviews",
     "summary", "abstract", "description", "article", "report", "message", "comment", "comments", "narrative",
     "transcript", "transcription", "sentence", "passage", "post", "tweet", "email", "letter", "essay", "story"),
)
#: Label column tiers.
LABEL_COLUMN_TIERS: tuple[tuple[str, ...], ...] = (
    ("label", "labels", "class_label", "label_name", "gold_label"),
    ("class", "class_name", "category", "category_name", "target"),
    ("specialty", "medical_specialty", "topic", "condition", "genre", "sentiment", "intent", "department"),
)
TEXT_COLUMN_NAMES = tuple(n for tier in TEXT_COLUMN_TIERS for n in tier)
LABEL_COLUMN_NAMES = tuple(n for tier in LABEL_COLUMN_TIERS for n in tier)

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
    # the whole file, not a sample of its first bytes: whether a file is refused must not depend on which rows
    # come first (DESIGN §2.0)
    if b"\x00" in data:
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


def _name_key(name: str) -> str:
    """A column name compared by the name rule: NFKC, accents dropped, lower-case, separators as one "_"."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", str(name)))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()
    return re.sub(r"[^0-9a-z]+", "_", plain).strip("_")


def _tier_of(name: str, tiers: Sequence[Sequence[str]], *, text_suffix: bool) -> int | None:
    key = _name_key(name)
    for rank, names in enumerate(tiers):
        if key in names or (rank == 0 and text_suffix and key.endswith("_text")):
            return rank
    return None


def _match_by_name(columns: Sequence[str], tiers: Sequence[Sequence[str]], *, text_suffix: bool,
                   exclude: Sequence[str | None] = ()) -> tuple[str | None, list[str]]:
    """(the column chosen by the name rule, the tied candidates when it is ambiguous).

    Only the column NAMES are read (DESIGN §2.0): the first tier with a match decides; one match is the choice,
    several are ambiguous (returned, nothing chosen)."""
    ranked: dict[int, list[str]] = {}
    for c in columns:
        if c in exclude:
            continue
        rank = _tier_of(c, tiers, text_suffix=text_suffix)
        if rank is not None:
            ranked.setdefault(rank, []).append(c)
    if not ranked:
        return None, []
    best = ranked[min(ranked)]
    return (best[0], []) if len(best) == 1 else (None, best)


def guess_columns(columns: Sequence[str], *, person_column: str | None = None
                  ) -> tuple[str | None, str | None]:
    """The (text, label) columns the name rule picks from ``columns`` (either None when no name or several
    names match; see :data:`TEXT_COLUMN_TIERS`, :data:`LABEL_COLUMN_TIERS`). Names only, never values."""
    cols = [str(c) for c in columns]
    text, _ = _match_by_name(cols, TEXT_COLUMN_TIERS, text_suffix=True, exclude=(person_column,))
    label, _ = _match_by_name(cols, LABEL_COLUMN_TIERS, text_suffix=False, exclude=(text, person_column))
    return text, label


def _columns_of(df: Any) -> list[str]:
    return [str(c) for c in df.columns]


_ASK_TEXT = "(CLI: --text-column NAME; app: the “Text column” choice on page 1)"
_ASK_LABEL = "(CLI: --label-column NAME; app: the “Label column” choice on page 1)"


def _select_columns(
    df: Any, text_column: str | None, label_column: str | None, person_column: str | None = None
) -> tuple[list[Any], list[Any], str, str]:
    """Resolve the text and label columns (given, or chosen from the column names alone) and return their values.

    A column chosen from the values (e.g. the longest one) would let one added row switch it and change every
    release (DESIGN §2.0), so when no name or several names match, the user is asked instead."""
    cols = _columns_of(df)
    if not cols:
        raise CorpusError("The file has no columns; check that it has a header row.")
    listed = ", ".join(cols)
    if text_column is None:
        text_column, tied = _match_by_name(cols, TEXT_COLUMN_TIERS, text_suffix=True, exclude=(person_column,))
        if tied:
            raise CorpusError(
                f"Several columns could hold the document text ({', '.join(tied)}); choose the text column "
                f"{_ASK_TEXT} from: {listed}."
            )
        if text_column is None:
            raise CorpusError(
                "No text column was found (the column is chosen from its name, e.g. text, document, notes, body, "
                f"content, review, summary); choose the text column {_ASK_TEXT} from: {listed}."
            )
    elif text_column not in cols:
        raise CorpusError(f"Column '{text_column}' was not found; available columns: {listed}.")
    if label_column is None:
        label_column, tied = _match_by_name(cols, LABEL_COLUMN_TIERS, text_suffix=False,
                                            exclude=(text_column, person_column))
        if tied:
            raise CorpusError(
                f"Several columns could hold the class label ({', '.join(tied)}); choose the label column "
                f"{_ASK_LABEL} from: {listed}."
            )
        if label_column is None:
            raise CorpusError(
                "No label column was found (looked for names such as label, class, category, target, specialty, "
                f"topic); choose the label column {_ASK_LABEL} from: {listed}."
            )
    elif label_column not in cols:
        raise CorpusError(f"Column '{label_column}' was not found; available columns: {listed}.")
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
    """Drop empty / too-short / unlabelled / person-less rows and identical copies; note label checks (counts only).

    Loading keeps neighbours neighbours (DESIGN §2.0): each row is dropped for a reason of its own (empty text,
    fewer than ``min_chars`` characters, empty label, empty person id) and a row collapses only with an IDENTICAL
    earlier row — same text (stripped), same label and same person (no person column: same text and label). So
    the corpus loaded from D plus one row is D's corpus plus that document (or D's, when the row repeats an
    identical row), and removing one person's rows removes exactly their documents. Never "the first copy of a
    text" across labels or persons: that would turn an added row into a label swap, or make one person's rows
    decide which of another person's rows survive.

    ``persons`` (optional, one per raw row) is filtered alongside and returned as strings (4th element).
    ``where`` and ``label_desc`` are kept for callers; no row is a reason to refuse the whole corpus."""
    del where, label_desc  # no per-row refusals any more (an empty label drops that row alone)
    n_read = len(raw_texts)
    n_empty = n_short = n_dup = n_no_label = n_no_person = 0
    texts: list[str] = []
    labels: list[str] = []
    kept_persons: list[str] = []
    seen: set[tuple[str, str, str]] = set()
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
            n_no_label += 1
            continue
        person = ""
        if persons is not None:
            person = _as_str(persons[i]).strip()
            if not person:
                n_no_person += 1
                continue
        if drop_duplicates:
            key = (text, label, person)
            if key in seen:
                n_dup += 1
                continue
            seen.add(key)
        if persons is not None:
            kept_persons.append(person)
        texts.append(text)
        labels.append(label)

    if not texts:
        if n_read == 0:
            raise CorpusError("The file has no documents, only a header (or nothing at all): put one document per "
                              "row under the header and upload the file again.")
        extra = (f", {n_no_label:,} without a label" if n_no_label else "") + (
            f", {n_no_person:,} without a person id" if n_no_person else "")
        raise CorpusError(
            f"No documents are left after cleaning ({n_read:,} read: {n_empty:,} empty, {n_short:,} shorter than "
            f"{min_chars} characters{extra}, {n_dup:,} identical copies); choose the column that holds the "
            f"documents' text, or upload documents of at least {min_chars} characters each"
            + ("; give every document a label (a .txt file takes the name of the folder holding it)"
               if n_no_label else "") + "."
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
        n_no_label=n_no_label,
        n_no_person=n_no_person,
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
    .txt files, folder of .txt files (chosen by the file name's extension, else by the file's first bytes).

    Loading keeps neighbours neighbours (DESIGN §2.0; docs/PRIVACY.md "Loading and de-duplication"): what it
    decides depends on public input or on each row alone. Columns not given are chosen from their NAMES only
    (:data:`TEXT_COLUMN_TIERS`, :data:`LABEL_COLUMN_TIERS`); when no name or several names match, a
    :class:`CorpusError` lists the columns and asks for the choice. A row is dropped, and counted in
    ``corpus.report`` (private, local figures), when its text is empty or shorter than ``min_chars``
    characters, its label is empty or its person id is empty; it collapses only with an identical earlier row of
    the same person (same text, label and person; ``drop_duplicates=False`` keeps every row).
    More than ``max_documents`` rows is an error (a local refusal: nothing is computed, released or charged).
    ``truncate=True`` is refused: keeping the first N rows would let one row push out another.
    ``person_column``: optional column identifying the person each document is about (the unit of privacy
    becomes the person; the identifiers are private and never released; never guessed).
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
    if truncate:
        # DESIGN §2.0: keeping the first max_documents rows makes a row's fate depend on the rows before it (one
        # added row would push another out), so a truncated corpus has no neighbour guarantee.
        raise ParameterError(
            "truncate=True is not supported: keeping the first rows would let one added row push out another. "
            "Split the file, sample it yourself, or raise max_documents."
        )
    for col, what in ((text_column, "text_column"), (label_column, "label_column"), (person_column, "person_column")):
        if col is not None and not isinstance(col, str):
            raise ParameterError(f"{what} must be a column name.")

    inp = _resolve_input(source, filename=filename, file_format=file_format, max_bytes=max_bytes)
    if inp.fmt in ("folder", "zip"):
        if text_column is not None or label_column is not None or person_column is not None:
            raise ParameterError("Column names apply to tabular files only; .txt files are labelled by their folder.")
        if inp.fmt == "folder":
            if inp.folder is None:
                raise ParameterError("The folder format needs a folder path.")
            texts, labels, names = _read_txt_folder(inp.folder, max_documents)
        else:
            texts, labels, names = _read_txt_zip(inp.data or b"", max_documents, max_bytes)
        # a .txt file outside every class folder has no label: it is dropped alone and counted (n_no_label)
        where: Callable[[int], str] = lambda i: f"file '{names[i]}'"  # noqa: E731
        label_desc = ""
        text_column = label_column = None
    else:
        df, where = _read_table(inp)
        if person_column is not None and person_column not in _columns_of(df):
            raise CorpusError(f"Person column '{person_column}' was not found; available columns: "
                              f"{', '.join(_columns_of(df))}.")
        texts, labels, text_column, label_column = _select_columns(df, text_column, label_column, person_column)
        label_desc = f" in column '{label_column}'"
    persons: list[Any] | None = None
    if person_column is not None:
        if person_column in (text_column, label_column):
            raise CorpusError("The person column must differ from the text and the label column.")
        persons = df.loc[:, ~df.columns.duplicated()][person_column].tolist()
    _check_count(len(texts), max_documents)

    clean_texts, clean_labels, report, clean_persons = _clean(
        texts,
        labels,
        where=where,
        label_desc=label_desc,
        min_chars=min_chars,
        drop_duplicates=drop_duplicates,
        min_class_size=min_class_size,
        truncated=False,
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
        text_column=text_column,
        label_column=label_column,
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
    return _input_columns(inp)


def _input_columns(inp: _Input) -> list[str]:
    """Column names of a resolved tabular input."""
    if inp.fmt == "parquet":
        try:
            import pyarrow.parquet as pq

            return [str(n) for n in pq.read_schema(io.BytesIO(inp.data or b"")).names]
        except Exception:  # noqa: BLE001
            raise CorpusError("The Parquet file could not be read (it may be damaged); export it again and retry.") from None
    # CSV/TSV: the header names the columns, so the first rows suffice; JSON records each carry their own keys,
    # so every record is read (the same columns load_corpus sees)
    df, _ = _read_table(inp, nrows=1000 if inp.fmt in ("csv", "tsv") else None)
    return _columns_of(df)


def suggest_columns(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    file_format: str | None = None,
    person_column: str | None = None,
) -> tuple[str | None, str | None]:
    """The (text, label) columns :func:`load_corpus` would choose for a tabular file: from the column NAMES only
    (DESIGN §2.0; :func:`guess_columns`); either is None when no name or several names match (the user chooses)."""
    inp = _resolve_input(source, filename=filename, file_format=file_format, max_bytes=200 * 1024 * 1024)
    if inp.fmt in ("folder", "zip"):
        return None, None
    return guess_columns(_input_columns(inp), person_column=person_column)
