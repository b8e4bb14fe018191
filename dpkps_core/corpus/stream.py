"""The one reading path of a private corpus: chunks of cleaned documents, in bounded memory (docs/DESIGN.md §1, §2.0;
issue 31).

:class:`CorpusStream` opens an input — a CSV / TSV / JSONL / JSON / Parquet file, a folder of such parts (Parquet
parts as a data platform exports them), a folder or ZIP of .txt files; a path, raw bytes or an upload — decides
its columns from their NAMES (:func:`~dpkps_core.corpus.columns.choose_columns`) before any row is read, and yields
:class:`DocumentChunk` after :class:`DocumentChunk` of documents cleaned by
:class:`~dpkps_core.corpus.cleaning.RowFilter`. Every decision is per row, exactly as the whole-file loader made it,
so the documents do not depend on the chunk size, and D ± one row streams as D's documents ± that document. The
in-memory loader (:func:`~dpkps_core.corpus.load_corpus`) is this stream read to its end.

Memory: one chunk of rows (``chunk_rows``, default :func:`default_chunk_rows`) at a time, plus one
de-duplication digest per kept row (:data:`~dpkps_core.corpus.cleaning.DIGEST_BYTES`) during the first pass and one
bit per row after it. A JSON array and a ZIP of
.txt files are held whole (one value; bounded by ``max_bytes``). Each call of :meth:`CorpusStream.chunks` is a
fresh pass over the input. The limits (:mod:`.limits`) are checked as the rows come: a refusal names its setting.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from dpkps_core.corpus.cleaning import RowFilter, as_str, check_int
from dpkps_core.corpus.columns import choose_columns
from dpkps_core.corpus.formats import (check_encoding, check_file_format, guess_format, txt_zip_members,
                                       zip_unpacked_size)
from dpkps_core.corpus.limits import DEFAULT_LIMIT, LoadLimits
from dpkps_core.corpus.model import LoadReport
from dpkps_core.corpus.tables import (Chunk, Meter, PART_FORMATS, Table, part_files, parts_table, table_of,
                                      txt_files, txt_folder_chunks, txt_zip_chunks)
from dpkps_core.corpus.textstream import ByteSource
from dpkps_core.errors import CorpusError, ParameterError

#: Rows per chunk unless chosen (or set by ``$DPKPS_CHUNK_ROWS``): ~20 MB of text at 1 KB per row.
DEFAULT_CHUNK_ROWS = 20_000
ENV_CHUNK_ROWS = "DPKPS_CHUNK_ROWS"


def default_chunk_rows() -> int:
    """Rows per chunk: ``$DPKPS_CHUNK_ROWS`` where set (a whole number ≥ 1), else :data:`DEFAULT_CHUNK_ROWS`."""
    value = os.environ.get(ENV_CHUNK_ROWS, "").strip()
    if not value:
        return DEFAULT_CHUNK_ROWS
    if not value.isdigit() or int(value) < 1:
        raise ParameterError(f"${ENV_CHUNK_ROWS} must be a whole number ≥ 1, got {value!r}.")
    return int(value)


@dataclass(frozen=True)
class DocumentChunk:
    """One chunk of cleaned documents (PRIVATE: never shown, logged or written): texts, labels and, with a person
    column, the person of each; ``first`` is how many documents earlier chunks of the same pass held."""

    texts: list[str]
    labels: list[str]
    persons: list[str] | None
    first: int = 0

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:  # never show document text
        return f"DocumentChunk(documents={len(self.texts)}, first={self.first})"


@dataclass
class InputTable:
    """An opened input: where it came from (public), its format, its columns, and how its rows are read."""

    display: str
    fmt: str
    columns: list[str]
    table: Table | None = None       # tabular inputs
    folder: Path | None = None       # a folder of .txt files
    txt: list[Any] | None = None     # the .txt files (paths in a folder, member names in a ZIP)
    zip_data: bytes | None = None    # a ZIP of .txt files
    files: tuple[Path, ...] = ()     # the files on disk it reads (checked for changes before each pass)
    stamp: tuple[Any, ...] = ()      # their (size, modification time) when it was opened
    txt_meter: Meter = field(default_factory=Meter)  # how far a pass over .txt files has read

    @property
    def fraction_read(self) -> float:
        """How much of the input the current pass has read, from 0 to 1."""
        return self.table.meter.value if self.table is not None else self.txt_meter.value

    def check_unchanged(self) -> None:
        """Refuse a pass when a file it reads changed on disk since the input was opened: every pass of the
        streaming DP steps must read the same rows."""
        if self.files and _stamp(self.files) != self.stamp:
            raise CorpusError(f"The corpus '{Path(self.display).name}' changed on disk while it was being read; "
                              "load it again once it is no longer being written.")

    @property
    def tabular(self) -> bool:
        """Whether the input is a table (its columns are chosen by name) rather than .txt files."""
        return self.table is not None

    def read(self, columns: Sequence[str], chunk_rows: int, encoding: str) -> Iterator[Chunk]:
        """A fresh pass over the rows: chunks of the requested columns' raw values."""
        if self.table is not None:
            return self.table.read(columns, chunk_rows)
        self.txt_meter.value = 0.0
        if self.zip_data is not None:
            return txt_zip_chunks(self.zip_data, self.txt or [], encoding, chunk_rows, self.txt_meter)
        assert self.folder is not None
        return txt_folder_chunks(self.folder, self.txt or [], encoding, chunk_rows, self.txt_meter)


def _stamp(files: Sequence[Path]) -> tuple[Any, ...]:
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            out.append(None)
        else:
            out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def _stamped(table: InputTable, files: Sequence[Path]) -> InputTable:
    table.files, table.stamp = tuple(files), _stamp(files)
    return table


def _open_folder(path: Path, file_format: str | None, limits: LoadLimits, encoding: str) -> InputTable:
    total = 0
    for p in path.rglob("*"):
        if p.is_file():
            total += p.stat().st_size
            limits.check_bytes(total, "folder")
    files = txt_files(path) if file_format in (None, "folder") else []
    if files:
        limits.check_documents(len(files))
        return _stamped(InputTable(str(path), "folder", ["text", "label"], folder=path, txt=files), files)
    parts = part_files(path)
    if file_format not in (None, "folder"):
        parts = [p for p in parts if PART_FORMATS[p.suffix.lower()] == file_format]
    if not parts:
        if file_format not in (None, "folder"):
            raise ParameterError(f"'{path.name}' is a folder without {file_format} parts; choose its format or "
                                 "give a file.")
        raise CorpusError("The folder contains no .txt files and no data parts (.parquet, .csv, .tsv, .jsonl); put "
                          "one document per .txt file in class sub-folders, or the table's parts in the folder.")
    table = parts_table(path, parts, encoding)
    return _stamped(InputTable(str(path), PART_FORMATS[parts[0].suffix.lower()], table.columns, table=table), parts)


def open_input(source: Any, *, filename: str | None = None, file_format: str | None = None,
               encoding: str = "utf-8", limits: LoadLimits | None = None, columns_only: bool = False) -> InputTable:
    """Open ``source`` (a path, raw bytes or a file-like object): its size checked against ``limits``, its format
    (given, else from the file name's extension, else from its first bytes) and its column names read.
    ``columns_only``: a ZIP of .txt files is not opened (it has no columns)."""
    encoding = check_encoding(encoding)
    fmt = check_file_format(file_format)
    limits = limits or LoadLimits.resolve()
    if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
        return _open_folder(Path(source), fmt, limits, encoding)
    src = ByteSource.of(source, filename=filename, encoding=encoding)
    if src.path is not None and not src.path.exists():
        raise CorpusError(f"The file '{src.path}' was not found; check the path.")
    limits.check_bytes(src.size, "file")
    if src.is_blank():
        raise CorpusError("The file is empty; choose a file that contains documents.")
    display = str(src.path) if src.path is not None else src.display
    fmt = fmt or guess_format(src.head(4096), src.filename)
    if fmt == "folder":
        raise ParameterError("file_format='folder' needs a folder path.")
    if fmt == "zip" and columns_only:
        return InputTable(display, "zip", ["text", "label"])
    if fmt == "zip":
        data = src.data if src.data is not None else src.path.read_bytes()  # type: ignore[union-attr]
        names = txt_zip_members(data)
        limits.check_documents(len(names))
        limits.check_bytes(zip_unpacked_size(data, names), "unpacked ZIP content")
        return InputTable(display, "zip", ["text", "label"], txt=names, zip_data=data)
    table = table_of(src, fmt, encoding)
    return _stamped(InputTable(display, fmt, table.columns, table=table), [src.path] if src.path else [])


def _rows(chunk: Chunk) -> int:
    return len(next(iter(chunk.values()))) if chunk else 0


class CorpusStream:
    """A private corpus as a stream of :class:`DocumentChunk` (see the module docstring).

    Construction checks the public options, opens the input (size limit, format, column names) and chooses the
    columns — the user's, or from the names alone — so a bad column choice is refused before any row is read.
    :meth:`chunks` is one pass over the documents (:attr:`report` holds its :class:`LoadReport` once it ends);
    :meth:`raw_chunks` a pass over the raw cells. Nothing here logs or keeps document text beyond the chunk read."""

    def __init__(self, source: Any, *, filename: str | None = None, file_format: str | None = None,
                 text_column: str | None = None, label_column: str | None = None,
                 person_column: str | None = None, encoding: str = "utf-8", min_chars: int = 20,
                 drop_duplicates: bool = True, min_class_size: int = 2, max_bytes: Any = DEFAULT_LIMIT,
                 max_documents: Any = DEFAULT_LIMIT, chunk_rows: int | None = None) -> None:
        for col, what in ((text_column, "text_column"), (label_column, "label_column"),
                          (person_column, "person_column")):
            if col is not None and not isinstance(col, str):
                raise ParameterError(f"{what} must be a column name.")
        self.min_chars = check_int(min_chars, "min_chars", 0)
        self.min_class_size = check_int(min_class_size, "min_class_size", 1)
        self.chunk_rows = default_chunk_rows() if chunk_rows is None else check_int(chunk_rows, "chunk_rows", 1)
        if not isinstance(drop_duplicates, bool):
            raise ParameterError("drop_duplicates must be True or False.")
        self.drop_duplicates = drop_duplicates
        self.encoding = check_encoding(encoding)
        self.limits = LoadLimits.resolve(max_bytes=max_bytes, max_documents=max_documents)
        self.input = open_input(source, filename=filename, file_format=file_format, encoding=self.encoding,
                                limits=self.limits)
        self.person_column = person_column
        self.report: LoadReport | None = None
        self.digests = 0  # de-duplication digests the last pass held (one per kept row)
        self._kept_bits: list[tuple[int, Any]] | None = None  # each row's fate, from the first complete pass
        if not self.input.tabular:
            if text_column is not None or label_column is not None or person_column is not None:
                raise ParameterError("Column names apply to tabular files only; .txt files are labelled by their "
                                     "folder.")
            self.text_column, self.label_column = "text", "label"
            return
        cols = self.input.columns
        if person_column is not None and person_column not in cols:
            raise CorpusError(f"Person column '{person_column}' was not found; available columns: {', '.join(cols)}.")
        self.text_column, self.label_column = choose_columns(cols, text_column, label_column, person_column)
        if person_column is not None and person_column in (self.text_column, self.label_column):
            raise CorpusError("The person column must differ from the text and the label column.")

    @property
    def display(self) -> str:
        """Where the rows come from (a file name or path: public)."""
        return self.input.display

    @property
    def fmt(self) -> str:
        """The input's format (see :data:`~dpkps_core.corpus.formats.FORMATS`)."""
        return self.input.fmt

    @property
    def tabular(self) -> bool:
        """Whether the rows come from a table (CSV, TSV, JSON, Parquet, parts) rather than .txt files."""
        return self.input.tabular

    @property
    def columns(self) -> list[str]:
        """The input's column names, in file order (each once)."""
        return list(dict.fromkeys(self.input.columns))

    @property
    def fraction_read(self) -> float:
        """How much of the input the current pass has read, from 0 to 1 (bytes of a text file, rows of a Parquet
        file, files of a folder): with the documents done and the time taken, a pass's rate and ETA — a fraction,
        never a private count."""
        return self.input.fraction_read

    def raw_chunks(self, columns: Sequence[str] | None = None) -> Iterator[Chunk]:
        """One pass over the raw cells of ``columns`` (default: every column), nothing cleaned or dropped. Past
        ``max_documents`` rows the rest is counted, not kept, and the refusal names the total."""
        cols = list(columns) if columns is not None else self.columns
        self.input.check_unchanged()
        n = 0
        it = self.input.read(cols, self.chunk_rows, self.encoding)
        for chunk in it:
            n += _rows(chunk)
            if self.limits.over_documents(n):
                n += sum(_rows(rest) for rest in it)  # the rest is only counted, so the message says the total
                self.limits.check_documents(n)
            yield chunk

    def chunks(self) -> Iterator[DocumentChunk]:
        """One pass over the cleaned documents, chunk by chunk (empty chunks skipped); when it ends,
        :attr:`report` holds the pass's counts (and a corpus with no document left is refused).

        The first complete pass decides each row's fate with :class:`~dpkps_core.corpus.cleaning.RowFilter` and
        remembers it as one bit per row; a later pass over the same, unchanged input replays those bits (the same
        rows, stripped the same way) instead of digesting every row again."""
        if self._kept_bits is not None:
            yield from self._replay()
            return
        self.report = None
        persons = self.person_column
        rows = RowFilter(min_chars=self.min_chars, drop_duplicates=self.drop_duplicates,
                         with_persons=persons is not None)
        bits: list[tuple[int, np.ndarray]] = []
        first = 0
        for chunk in self.raw_chunks(self._document_columns()):
            texts, labels, kept_persons = rows.feed(chunk[self.text_column], chunk[self.label_column],
                                                    chunk[persons] if persons else None)
            mask = np.zeros(_rows(chunk), dtype=bool)
            mask[rows.last_kept] = True
            bits.append((len(mask), np.packbits(mask)))
            if texts:
                yield DocumentChunk(texts, labels, kept_persons, first)
                first += len(texts)
        self.report = rows.report(min_class_size=self.min_class_size)
        self.digests = rows.digests
        self._kept_bits = bits

    def _document_columns(self) -> list[str]:
        return [self.text_column, self.label_column] + ([self.person_column] if self.person_column else [])

    def _replay(self) -> Iterator[DocumentChunk]:
        """A pass that keeps the rows the first pass kept (see :meth:`chunks`)."""
        bits = self._kept_bits or []
        persons = self.person_column
        first = k = 0
        for chunk in self.raw_chunks(self._document_columns()):
            n, packed = bits[k] if k < len(bits) else (-1, None)
            if n != _rows(chunk) or packed is None:
                raise CorpusError(f"The corpus '{Path(self.display).name}' changed on disk while it was being "
                                  "read; load it again once it is no longer being written.")
            k += 1
            keep = np.flatnonzero(np.unpackbits(packed, count=n)).tolist()
            if not keep:
                continue
            raw_t, raw_l = chunk[self.text_column], chunk[self.label_column]
            texts = [as_str(raw_t[i]).strip() for i in keep]
            labels = [as_str(raw_l[i]).strip() for i in keep]
            kept_persons = [as_str(chunk[persons][i]).strip() for i in keep] if persons else None
            yield DocumentChunk(texts, labels, kept_persons, first)
            first += len(texts)

    def read_all(self) -> tuple[list[str], list[str], list[str] | None, LoadReport]:
        """Every chunk concatenated: (texts, labels, persons or None, the report) — the in-memory loader."""
        texts: list[str] = []
        labels: list[str] = []
        persons: list[str] | None = [] if self.person_column else None
        for chunk in self.chunks():
            texts.extend(chunk.texts)
            labels.extend(chunk.labels)
            if persons is not None and chunk.persons is not None:
                persons.extend(chunk.persons)
        assert self.report is not None
        return texts, labels, persons, self.report
