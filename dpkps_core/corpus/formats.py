"""Corpus file formats (docs/DESIGN.md §1): the formats and encodings a user may choose, the format guessed from a file's
name or first bytes, a .txt file's decoding, and the checks on a table's header and a ZIP's members. The chunked
readers of each format are in :mod:`.tables` (text streams in :mod:`.textstream`).

Nothing here cleans, drops or chooses anything (that is :mod:`.cleaning` and :mod:`.columns`), and nothing logs,
prints or caches document text: every error names at most a line/row number, a column name or a file name inside
the upload.
"""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import PurePosixPath
from typing import Any, Sequence

from dpkps_core.errors import CorpusError, ParameterError

#: Accepted values of ``file_format``.
FORMATS = ("csv", "tsv", "jsonl", "json", "parquet", "zip", "folder")

#: Accepted text encodings (public user input): the whole file is decoded with the one chosen, never guessed from
#: a sample of its bytes (docs/DESIGN.md §2.0: what the loader decides depends on public input or on each row alone).
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
    """A file is not valid in the chosen encoding (docs/DESIGN.md §1). The message names the first bad byte's line and
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
# Format and text
# --------------------------------------------------------------------------------------------------------


def check_file_format(file_format: Any) -> str | None:
    """A user's ``file_format`` (one of :data:`FORMATS`, or None to guess it), normalised; anything else is a
    :class:`ParameterError` (public input: refused before any data is read)."""
    if file_format is None:
        return None
    if not isinstance(file_format, str) or file_format.lower().lstrip(".") not in FORMATS + ("ndjson",):
        raise ParameterError(f"file_format must be one of: {', '.join(FORMATS)}.")
    fmt = file_format.lower().lstrip(".")
    return "jsonl" if fmt == "ndjson" else fmt


def guess_format(data: bytes, filename: str | None) -> str:
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
    # come first (docs/DESIGN.md §2.0)
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
# Tables and .txt files (the chunked readers are in .tables)
# --------------------------------------------------------------------------------------------------------


def _check_header(df: Any) -> None:
    """Reject header rows with blank or duplicated column names (pandas renames them silently)."""
    cols = [str(c) for c in df.columns]
    dup = [c for c in cols if re.search(r"\.\d+$", c) and c.rsplit(".", 1)[0] in cols]
    if dup:
        raise CorpusError(
            f"The header repeats the column name '{dup[0].rsplit('.', 1)[0]}'; give every column a distinct name."
        )


def _skip_member(parts: Sequence[str]) -> bool:
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


def txt_zip_members(data: bytes) -> list[str]:
    """The names of the ZIP's .txt members, in name order (hidden files and macOS folders skipped); a damaged ZIP,
    a ZIP without .txt files or a member in a compression method this reader cannot read is a clear error."""
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
        for m in members:
            if m.compress_type not in _READABLE_ZIP_METHODS:
                raise CorpusError(
                    f"The file '{m.filename}' in the ZIP uses a compression method this reader does not support; "
                    "recreate the ZIP with standard (deflate) compression."
                )
        return sorted(m.filename for m in members)


def zip_unpacked_size(data: bytes, names: Sequence[str]) -> int:
    """The unpacked size of the ZIP members ``names`` (checked against ``max_bytes`` before any is read)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return sum(zf.getinfo(n).file_size for n in names)


def read_zip_member(zf: zipfile.ZipFile, name: str) -> bytes:
    """One member's bytes (a damaged or encrypted member is a clear error naming it)."""
    try:
        return zf.read(name)
    except (zipfile.BadZipFile, RuntimeError):
        raise CorpusError(
            f"The file '{name}' in the ZIP could not be read (damaged or encrypted); recreate the ZIP."
        ) from None


_READABLE_ZIP_METHODS = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA})
