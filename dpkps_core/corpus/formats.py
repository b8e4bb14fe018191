"""Corpus file formats (DESIGN §1): a path, bytes or upload resolved to bytes or a folder, decoded, and read as a
table (CSV, TSV, JSONL/JSON, Parquet) or as a folder / ZIP of ``.txt`` files (label = the folder holding each file).

Nothing here cleans, drops or chooses anything (that is :mod:`.cleaning` and :mod:`.columns`), and nothing logs,
prints or caches document text: every error names at most a line/row number, a column name or a file name inside
the upload.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Sequence

from dpkps_core.corpus.limits import LoadLimits
from dpkps_core.errors import CorpusError, ParameterError

#: Accepted values of ``file_format``.
FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "zip", "folder")

#: Accepted text encodings (public user input): the whole file is decoded with the one chosen, never guessed from
#: a sample of its bytes (DESIGN §2.0: what the loader decides depends on public input or on each row alone).
ENCODINGS = ("utf-8", "latin-1", "cp1252")

_ENCODING_ALIASES = {
    "utf8": "utf-8", "utf-8": "utf-8", "utf-8-sig": "utf-8",
    "latin-1": "latin-1", "latin1": "latin-1", "iso-8859-1": "latin-1", "iso8859-1": "latin-1",
    "cp1252": "cp1252", "windows-1252": "cp1252",
}

#: How each encoding is named to a user.
ENCODING_LABELS = {"utf-8": "UTF-8", "latin-1": "Latin-1 (ISO-8859-1)", "cp1252": "Windows-1252"}


def check_encoding(encoding: Any) -> str:
    """The canonical name (one of :data:`ENCODINGS`) of a user's encoding choice; a
    :class:`ParameterError` for anything else (public input: refused before any data is read)."""
    key = encoding.strip().lower().replace("_", "-") if isinstance(encoding, str) else None
    if key not in _ENCODING_ALIASES:
        raise ParameterError(f"encoding must be one of: {', '.join(ENCODINGS)}; got {encoding!r}.")
    return _ENCODING_ALIASES[key]


class NotUTF8Error(CorpusError):
    """A file is not valid in the chosen encoding (DESIGN §1). The message names the first bad byte's line and
    offset only (never text) and how to choose another encoding; :meth:`with_hint` words that choice for the
    CLI (``--encoding latin-1``) or the app ("choose Latin-1 under Encoding")."""

    def __init__(self, what: str, encoding: str, line: int, offset: int,
                 hint: str = "load it with encoding='latin-1'") -> None:
        self.what, self.encoding, self.line, self.offset, self.hint = what, encoding, line, offset, hint
        super().__init__(self._message())

    def _message(self) -> str:
        label = ENCODING_LABELS.get(self.encoding, self.encoding)
        other = "re-save it as UTF-8" if self.encoding == "utf-8" else "choose the encoding it was saved in"
        return (f"The {self.what} is not valid {label} (first bad byte at line {self.line}, byte offset "
                f"{self.offset}); {other}, or, if it was saved as Latin-1 / Windows-1252, {self.hint}.")

    def with_hint(self, hint: str) -> "NotUTF8Error":
        """The same error, its way to choose an encoding worded as ``hint`` (e.g. "add `--encoding latin-1`")."""
        return NotUTF8Error(self.what, self.encoding, self.line, self.offset, hint)

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
class ResolvedInput:
    """A source resolved to bytes (or a folder) plus its display name and format."""

    data: bytes | None
    folder: Path | None
    display: str
    fmt: str
    encoding: str = "utf-8"


def resolve_input(
    source: Any, *, filename: str | None, file_format: str | None, max_bytes: int | None, encoding: str = "utf-8"
) -> ResolvedInput:
    """Turn a path / bytes / file-like into bytes or a folder, checking size (``max_bytes``; None = no limit:
    :class:`~dpkps_core.corpus.limits.LoadLimits`) and emptiness; ``encoding`` (one of :data:`ENCODINGS`) is how
    its text will be decoded."""
    encoding = check_encoding(encoding)
    limits = LoadLimits(max_bytes=max_bytes, max_documents=None)
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
        if isinstance(data, str):  # already decoded text: re-encode it in the encoding it will be decoded with
            try:
                data = data.encode(encoding)
            except UnicodeEncodeError:
                raise CorpusError(f"The text holds characters that {encoding} cannot hold; choose UTF-8 as its "
                                  "encoding.") from None
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
                    limits.check_bytes(total, "folder")
            if file_format not in (None, "folder"):
                raise ParameterError(f"'{path.name}' is a folder; use file_format='folder' or give a file.")
            return ResolvedInput(None, path, str(path), "folder", encoding)
        if not path.exists():
            raise CorpusError(f"The file '{path}' was not found; check the path.")
        limits.check_bytes(path.stat().st_size, "file")
        data = path.read_bytes()
        folder = None
        display = str(path)
        filename = filename or path.name
    else:
        raise ParameterError("The corpus source must be a file path, a folder path or the file's bytes.")

    limits.check_bytes(len(data), "file")
    if not data.strip():
        raise CorpusError("The file is empty; choose a file that contains documents.")

    fmt = file_format or _guess_format(data, filename)
    return ResolvedInput(data, folder, display, fmt, encoding)


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


def decode_text(data: bytes, what: str = "file", *, encoding: str = "utf-8") -> str:
    """Decode the whole of ``data`` with the chosen ``encoding`` (UTF-8 with or without a BOM by default; Latin-1
    or Windows-1252 when the user chooses it), with specific errors for binary, UTF-16 and undecodable input."""
    encoding = check_encoding(encoding)
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise CorpusError(f"The {what} is encoded as UTF-16; re-save it as UTF-8 and upload it again.")
    # the whole file, not a sample of its first bytes: whether a file is refused must not depend on which rows
    # come first (DESIGN §2.0)
    if b"\x00" in data:
        raise CorpusError(
            f"The {what} looks binary, not text; upload a CSV, TSV, JSONL, Parquet or ZIP of .txt files."
        )
    try:
        return data.decode("utf-8-sig" if encoding == "utf-8" else encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise NotUTF8Error(what, encoding, line, exc.start) from None


# --------------------------------------------------------------------------------------------------------
# Tabular readers
# --------------------------------------------------------------------------------------------------------


def read_table(inp: ResolvedInput, *, nrows: int | None = None) -> tuple[Any, Callable[[int], str]]:
    """Read a tabular input into a pandas DataFrame; return it with a row -> location describer."""
    import pandas as pd

    assert inp.data is not None
    if inp.fmt in ("csv", "tsv"):
        text = decode_text(inp.data, encoding=inp.encoding)
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
        text = decode_text(inp.data, encoding=inp.encoding)
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


# --------------------------------------------------------------------------------------------------------
# Folders and ZIPs of .txt files
# --------------------------------------------------------------------------------------------------------


def _skip_member(parts: Sequence[str]) -> bool:
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


def read_txt_folder(folder: Path, max_documents: int | None, *, encoding: str = "utf-8"
                    ) -> tuple[list[str], list[str], list[str]]:
    """Texts, labels (parent folder name) and relative paths of the .txt files under ``folder`` (each decoded
    with ``encoding``)."""
    texts: list[str] = []
    labels: list[str] = []
    names: list[str] = []
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".txt")
    files = [p for p in files if not _skip_member(p.relative_to(folder).parts)]
    if not files:
        raise CorpusError("The folder contains no .txt files; put one document per .txt file in class sub-folders.")
    check_count(len(files), max_documents)
    for p in files:
        rel = p.relative_to(folder)
        texts.append(decode_text(p.read_bytes(), what=f"file '{rel.as_posix()}'", encoding=encoding) if p.stat().st_size else "")
        labels.append(rel.parts[-2] if len(rel.parts) > 1 else "")
        names.append(rel.as_posix())
    return texts, labels, names


def read_txt_zip(data: bytes, max_documents: int | None, max_bytes: int | None, *, encoding: str = "utf-8"
                 ) -> tuple[list[str], list[str], list[str]]:
    """Texts, labels (name of the folder holding each file) and member names of the .txt files in a ZIP (each
    decoded with ``encoding``)."""
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
        check_count(len(members), max_documents)
        LoadLimits(max_bytes=max_bytes, max_documents=None).check_bytes(sum(m.file_size for m in members),
                                                                         "unpacked ZIP content")
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
            texts.append(decode_text(raw, what=f"file '{m.filename}'", encoding=encoding) if raw else "")
            labels.append(parts[-2] if len(parts) > 1 else "")
            names.append(m.filename)
    return texts, labels, names


_READABLE_ZIP_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})


def check_count(n: int, max_documents: int | None) -> None:
    """Refuse more than ``max_documents`` rows or files (None = no limit; a local refusal on the input's size:
    nothing is computed, released or charged; the message names the setting: :mod:`.limits`)."""
    LoadLimits(max_bytes=None, max_documents=max_documents).check_documents(n)

