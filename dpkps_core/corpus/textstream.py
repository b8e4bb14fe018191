"""A corpus file read as a stream of bytes or text, never whole (docs/DESIGN.md §1; issue 31: bounded memory).

:class:`ByteSource` is a path, raw bytes or a file-like object that can be opened again and again (each pass of the
streaming reader opens it afresh). :func:`check_text` reads a text file once, block by block, and raises exactly the
errors the whole-file decoder raised (UTF-16, binary, not valid in the chosen encoding with the first bad byte's line
and offset) — so whether a file is refused never depends on where a chunk boundary falls, and never on which rows
come first (docs/DESIGN.md §2.0: the WHOLE file is checked before any row is read). :func:`open_text` then yields its text
without newline translation, and :func:`iter_lines` splits it exactly as ``str.splitlines`` splits the whole text.

Nothing here logs, prints or keeps document text; an error names a line number, a byte offset or a file name.
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from dpkps_core.corpus.formats import NotUTF8Error, check_encoding
from dpkps_core.errors import CorpusError, ParameterError

#: Bytes read at a time by the checks and the text reader.
BLOCK_BYTES = 1 << 20
_BOM = b"\xef\xbb\xbf"
# str.splitlines() line boundaries: a line ending in one of these may continue ("\r" + "\n") or is complete
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(frozen=True)
class ByteSource:
    """One input file, openable any number of times: ``path`` (read from disk at each opening) or ``data``.

    ``display`` names it in messages (a file name or path: public); ``filename`` is the name its format is guessed
    from. A non-seekable file-like object is read once into ``data`` (an upload is in memory already)."""

    display: str
    filename: str | None
    path: Path | None = None
    data: bytes | None = None

    @classmethod
    def of(cls, source: Any, *, filename: str | None = None, encoding: str = "utf-8") -> "ByteSource":
        """A path, raw bytes or a binary (or text) file-like object as a :class:`ByteSource` (already decoded text
        is encoded in ``encoding``, the one it will be decoded with)."""
        if isinstance(source, (bytes, bytearray, memoryview)):
            return cls(filename or "upload", filename, data=bytes(source))
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            return cls(filename or str(path), filename or path.name, path=path)
        if hasattr(source, "read"):
            if hasattr(source, "seek"):
                try:
                    source.seek(0)
                except (OSError, ValueError):
                    pass
            data = source.read()
            if isinstance(data, str):
                try:
                    data = data.encode(check_encoding(encoding))
                except UnicodeEncodeError:
                    raise CorpusError(f"The text holds characters that {encoding} cannot hold; choose UTF-8 as "
                                      "its encoding.") from None
            name = filename or str(getattr(source, "name", "") or "upload")
            return cls(name, filename or (name if name != "upload" else None), data=bytes(data))
        raise ParameterError("The corpus source must be a file path, a folder path or the file's bytes.")

    @property
    def size(self) -> int:
        """The file's size in bytes."""
        if self.path is not None:
            return self.path.stat().st_size
        return len(self.data or b"")

    def open(self) -> IO[bytes]:
        """A fresh binary stream over the whole file (the caller closes it)."""
        if self.path is not None:
            try:
                return self.path.open("rb")
            except FileNotFoundError:
                raise CorpusError(f"The file '{self.path}' was not found; check the path.") from None
        return io.BytesIO(self.data or b"")

    def head(self, n: int = 4096) -> bytes:
        """The first ``n`` bytes (format guessing, the emptiness check)."""
        with self.open() as fh:
            return fh.read(n)

    def is_blank(self) -> bool:
        """Whether the file holds nothing but whitespace (read until the first other byte)."""
        with self.open() as fh:
            while block := fh.read(BLOCK_BYTES):
                if block.strip():
                    return False
        return True


def _codec(encoding: str) -> str:
    return "utf-8-sig" if encoding == "utf-8" else encoding


def check_text(source: ByteSource, *, encoding: str, what: str = "file") -> None:
    """Refuse a text file the whole-file decoder would refuse, reading it block by block: a UTF-16 byte-order mark,
    a NUL byte anywhere (binary), then the first byte not valid in ``encoding`` (its line and byte offset from the
    file's start; :class:`~dpkps_core.corpus.formats.NotUTF8Error`)."""
    encoding = check_encoding(encoding)
    with source.open() as fh:
        first = fh.read(BLOCK_BYTES)
        if first[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise CorpusError(f"The {what} is encoded as UTF-16; re-save it as UTF-8 and upload it again.")
        block = first
        while block:
            if b"\x00" in block:
                raise CorpusError(
                    f"The {what} looks binary, not text; upload a CSV, TSV, JSONL, Parquet or ZIP of .txt files.")
            block = fh.read(BLOCK_BYTES)
    if encoding == "latin-1":
        return  # every byte is a Latin-1 character
    with source.open() as fh:
        offset, lines, carry = 0, 0, b""
        block = fh.read(BLOCK_BYTES)
        if encoding == "utf-8" and block.startswith(_BOM):
            block, offset = block[len(_BOM):], len(_BOM)
        while True:
            buf = carry + block
            final = not block
            try:
                buf.decode(encoding)
                carry = b""
            except UnicodeDecodeError as exc:
                if not final and exc.reason == "unexpected end of data":
                    carry = buf[exc.start:]  # a character cut by the block boundary: decode it with the next block
                    buf = buf[:exc.start]
                else:
                    bad = offset + exc.start
                    raise NotUTF8Error(what, encoding, lines + buf.count(b"\n", 0, exc.start) + 1, bad) from None
            if final:
                return
            offset += len(buf)
            lines += buf.count(b"\n")
            block = fh.read(BLOCK_BYTES)


def open_text(source: ByteSource, *, encoding: str) -> IO[str]:
    """The file's text (a UTF-8 byte-order mark dropped; no newline translation, so a "\\r\\n" inside a quoted
    value stays as it is). Call :func:`check_text` first: this reader assumes the bytes decode."""
    return io.TextIOWrapper(source.open(), encoding=_codec(check_encoding(encoding)), newline="")


def iter_lines(text: IO[str]) -> Iterator[str]:
    """The lines of a text stream exactly as ``whole_text.splitlines()`` gives them (every boundary it knows,
    "\\r\\n" as one), read a block at a time."""
    carry = ""
    while block := text.read(BLOCK_BYTES):
        buf = carry + block
        parts = buf.splitlines(keepends=True)
        last = parts.pop() if parts else ""
        # the last piece may go on in the next block (no boundary yet, or a "\r" whose "\n" has not been read)
        if last and last[-1] in _LINE_BREAKS and last[-1] != "\r":
            parts.append(last)
            last = ""
        for line in parts:
            yield line.splitlines()[0]
        carry = last
    yield from carry.splitlines()


def header_delimiter(source: ByteSource, *, encoding: str) -> str:
    """The CSV delimiter, from the header line alone (text up to the first "\\n"): the most frequent of
    , ; | TAB (',' when none occurs) — read without keeping more than one block."""
    counts = {d: 0 for d in (",", ";", "\t", "|")}
    with open_text(source, encoding=encoding) as text:
        while block := text.read(BLOCK_BYTES):
            head, newline, _ = block.partition("\n")
            for d in counts:
                counts[d] += head.count(d)
            if newline:
                break
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > 0 else ","
