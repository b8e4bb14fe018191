"""The formats' chunked readers (docs/DESIGN.md §1; issue 31): each input is a :class:`Table` — its column names, known
before any row is read, and its rows as chunks of raw cell values (column → list), in file order.

- CSV / TSV: pandas' C parser (the parser the loader has always used) fed the file's text a block at a time
  (``read_csv(chunksize=…)``): the same tokens, quoting, short-row filling and errors as one whole-file parse, so
  every row reads exactly as before whatever the chunk size.
- JSON Lines: line by line, in two passes — the column names are the keys of ALL records (the loader chooses
  columns from the names of the whole file, never of its first chunk: docs/DESIGN.md §2.0), then the rows.
- a JSON array: parsed whole (one value; bounded by ``max_bytes``).
- Parquet: ``ParquetFile.iter_batches``, each batch converted as the whole table was (``to_pandas``).
- a folder of parts (Parquet as a data platform exports them, or CSV / TSV / JSONL): every part in the order of
  its path, each read as above; every part must have the same columns (Parquet: hive ``key=value`` folders become
  columns, through ``pyarrow.dataset``).
- a folder / ZIP of ``.txt`` files: (text, label = the folder holding each file) in the order of their paths.

Nothing here cleans, drops or chooses anything, and nothing logs or keeps document text.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator, Sequence

from dpkps_core.corpus.formats import _check_header, _skip_member, decode_text, read_zip_member
from dpkps_core.corpus.textstream import ByteSource, check_text, header_delimiter, iter_lines, open_text
from dpkps_core.errors import CorpusError

Chunk = dict[str, list[Any]]


class Meter:
    """How much of the input the current pass has read, from 0 to 1 (bytes of a text file, rows of a Parquet file,
    files of a folder): a progress bar's fraction and an ETA's basis, with no private count in it."""

    def __init__(self) -> None:
        self.value = 0.0

    def of_bytes(self, handle: Any, size: int) -> None:
        """The fraction of ``size`` bytes ``handle`` (a binary file) has read (1 once it is closed)."""
        try:
            self.value = min(1.0, handle.tell() / size) if size else 1.0
        except (ValueError, OSError):
            self.value = 1.0


@dataclass
class Table:
    """A tabular input: ``columns`` in file order and ``read(columns, chunk_rows)``, a fresh pass over its rows
    as chunks of the requested columns' raw values (each pass reads the input again); ``meter`` says how far the
    current pass has read."""

    columns: list[str]
    read: Callable[[Sequence[str], int], Iterator[Chunk]]
    meter: Meter = field(default_factory=Meter)


# ---------------------------------------------------------------------------------------------- CSV / TSV


def _csv_error(exc: Exception, fmt: str) -> CorpusError:
    m = re.search(r"line (\d+)", str(exc))
    where = f" near line {m.group(1)}" if m else ""
    kind = "TSV" if fmt == "tsv" else "CSV"
    return CorpusError(f"The {kind} file could not be parsed{where} (rows have different numbers of fields or "
                       "broken quotes); check the delimiter and quoting, or export it again from your spreadsheet.")


def _csv_frames(source: ByteSource, fmt: str, encoding: str, sep: str, chunk_rows: int,
                meter: Meter | None = None) -> Iterator[Any]:
    """The file's rows as DataFrames of at most ``chunk_rows`` rows (at least one, maybe empty: the header)."""
    import pandas as pd

    meter = meter or Meter()
    size = source.size
    with open_text(source, encoding=encoding) as text:
        try:
            reader = pd.read_csv(text, sep=sep, dtype=str, keep_default_na=False, na_values=[],
                                 chunksize=max(1, chunk_rows))
            with reader:
                for df in reader:
                    meter.of_bytes(text.buffer, size)
                    yield df
            meter.value = 1.0
        except pd.errors.EmptyDataError:
            raise CorpusError("The file is empty; choose a file that contains documents.") from None
        except (pd.errors.ParserError, csv.Error) as exc:
            raise _csv_error(exc, fmt) from None


def csv_table(source: ByteSource, fmt: str, encoding: str) -> Table:
    """A CSV (delimiter from the header line alone) or TSV file as a :class:`Table` (the whole file's bytes are
    checked first: :func:`~dpkps_core.corpus.textstream.check_text`)."""
    check_text(source, encoding=encoding)
    sep = "\t" if fmt == "tsv" else header_delimiter(source, encoding=encoding)
    first = next(_csv_frames(source, fmt, encoding, sep, 1000))
    _check_header(first)
    columns = [str(c) for c in first.columns]

    meter = Meter()

    def read(cols: Sequence[str], chunk_rows: int) -> Iterator[Chunk]:
        meter.value = 0.0
        for df in _csv_frames(source, fmt, encoding, sep, chunk_rows, meter):
            df = df.loc[:, ~df.columns.duplicated()]
            yield {c: df[c].tolist() for c in cols}

    return Table(columns, read, meter)


# ---------------------------------------------------------------------------------------------- JSON


def _jsonl_records(source: ByteSource, encoding: str, meter: Meter | None = None) -> Iterator[dict[str, Any]]:
    """The objects of a JSON Lines file, one per non-blank line (its line number in every error)."""
    size = source.size
    with open_text(source, encoding=encoding) as text:
        for lineno, line in enumerate(iter_lines(text), start=1):
            if meter is not None:
                meter.of_bytes(text.buffer, size)
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise CorpusError(
                    f"Line {lineno} of the JSONL file is not valid JSON; put one JSON object per line.") from None
            if not isinstance(obj, dict):
                raise CorpusError(f"Line {lineno} of the JSONL file is not a JSON object; put one object per line.")
            yield obj
    if meter is not None:
        meter.value = 1.0


def _records_chunks(records: Iterator[dict[str, Any]], cols: Sequence[str], chunk_rows: int) -> Iterator[Chunk]:
    chunk: Chunk = {c: [] for c in cols}
    n = 0
    for rec in records:
        for c in cols:
            chunk[c].append(rec.get(c))
        n += 1
        if n >= chunk_rows:
            yield chunk
            chunk, n = {c: [] for c in cols}, 0
    if n or not cols:
        yield chunk


def _key_union(records: Iterator[dict[str, Any]]) -> list[str]:
    """Every key of every record, in order of first appearance (the columns a table of the records has)."""
    keys: dict[str, None] = {}
    n = 0
    for rec in records:
        n += 1
        for k in rec:
            if k not in keys:
                keys[k] = None
    if not n:
        raise CorpusError("The file is empty; choose a file that contains documents.")
    return [str(k) for k in keys]


def json_table(source: ByteSource, fmt: str, encoding: str) -> Table:
    """A JSON Lines file (streamed, two passes) or a JSON array of objects (parsed whole) as a :class:`Table`."""
    check_text(source, encoding=encoding)
    head = source.head(4096).lstrip()
    if fmt == "json" and head.lstrip(b"\xef\xbb\xbf").lstrip()[:1] == b"[":
        with open_text(source, encoding=encoding) as text:
            raw = text.read()
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise CorpusError(
                f"The JSON file is not valid JSON (line {exc.lineno}); fix it or save it as JSON Lines.") from None
        del raw
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise CorpusError("The JSON file must be an array of objects, one per document.")
        columns = _key_union(iter(data))
        whole = Meter()

        def read_array(cols: Sequence[str], n: int) -> Iterator[Chunk]:
            for k, chunk in enumerate(_records_chunks(iter(data), cols, n), start=1):
                whole.value = min(1.0, k * n / max(len(data), 1))
                yield chunk

        return Table(columns, read_array, whole)
    columns = _key_union(_jsonl_records(source, encoding))
    lines = Meter()
    return Table(columns, lambda cols, n: _records_chunks(_jsonl_records(source, encoding, lines), cols, n), lines)


# ---------------------------------------------------------------------------------------------- Parquet


def _parquet_error(head: bytes) -> CorpusError:
    if b"\x00" not in head[:8192] and not head.startswith(b"PAR1"):
        return CorpusError("The file is not a Parquet file; check its type or choose the matching format.")
    return CorpusError("The Parquet file could not be read (it may be damaged); export it again and retry.")


def _pyarrow() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pyarrow is pinned
        raise CorpusError("Reading Parquet needs the package 'pyarrow'; install it or upload a CSV.") from exc
    return pq


def _batch_chunk(batch: Any, cols: Sequence[str]) -> Chunk:
    """A record batch's cells converted as the whole table was (``to_pandas``, then each column's values)."""
    df = batch.to_pandas()
    df = df.loc[:, ~df.columns.duplicated()]
    return {c: df[c].tolist() for c in cols}


def parquet_table(source: ByteSource) -> Table:
    """A Parquet file as a :class:`Table`, read a row group batch at a time."""
    pq = _pyarrow()
    head = source.head(8192)
    try:
        with source.open() as fh:
            columns = [str(n) for n in pq.ParquetFile(fh).schema_arrow.names]
    except Exception:  # noqa: BLE001 - any pyarrow failure means an unreadable file
        raise _parquet_error(head) from None

    meter = Meter()

    def read(cols: Sequence[str], chunk_rows: int) -> Iterator[Chunk]:
        meter.value = 0.0
        with source.open() as fh:
            try:
                pf = pq.ParquetFile(fh)
                total, done = pf.metadata.num_rows, 0
                if total == 0:
                    meter.value = 1.0
                    yield {c: [] for c in cols}
                    return
                for batch in pf.iter_batches(batch_size=max(1, chunk_rows), columns=list(dict.fromkeys(cols))):
                    done += batch.num_rows
                    meter.value = done / total
                    yield _batch_chunk(batch, cols)
            except CorpusError:
                raise
            except Exception:  # noqa: BLE001
                raise _parquet_error(head) from None

    return Table(columns, read, meter)


def table_of(source: ByteSource, fmt: str, encoding: str) -> Table:
    """The :class:`Table` of one tabular file of format ``fmt`` (csv, tsv, jsonl, json, parquet)."""
    if fmt in ("csv", "tsv"):
        return csv_table(source, fmt, encoding)
    if fmt in ("jsonl", "json"):
        return json_table(source, fmt, encoding)
    if fmt == "parquet":
        return parquet_table(source)
    raise CorpusError(f"The {fmt} format has no columns; column choices apply to CSV, TSV, JSONL and Parquet.")


# ---------------------------------------------------------------------------------------------- folders of parts

#: A part's format by its extension (a folder of parts).
PART_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "tsv", ".tab": "tsv",
                ".jsonl": "jsonl", ".ndjson": "jsonl"}


def part_files(folder: Path) -> list[Path]:
    """The data parts under ``folder`` in path order (hidden files, ``_SUCCESS`` / ``_metadata`` markers and
    ``.crc`` checksums skipped, as data platforms write them)."""
    files = [p for p in sorted(folder.rglob("*")) if p.is_file() and p.suffix.lower() in PART_FORMATS]
    return [p for p in files if not any(x.startswith((".", "_")) for x in p.relative_to(folder).parts)]


def parts_table(folder: Path, parts: list[Path], encoding: str) -> Table:
    """A folder of parts as one :class:`Table`: every part in path order, with the same columns."""
    formats = {PART_FORMATS[p.suffix.lower()] for p in parts}
    if len(formats) > 1:
        raise CorpusError(f"The folder mixes {' and '.join(sorted(formats))} parts; keep one format per folder.")
    fmt = formats.pop()
    if fmt == "parquet":
        return _parquet_dataset(folder, parts)
    tables = [(p, table_of(ByteSource.of(p), fmt, encoding)) for p in parts]
    columns = tables[0][1].columns
    for p, t in tables[1:]:
        if t.columns != columns:
            raise CorpusError(f"The part '{p.relative_to(folder).as_posix()}' has other columns than "
                              f"'{parts[0].relative_to(folder).as_posix()}'; every part needs the same columns.")

    meter = Meter()

    def read(cols: Sequence[str], chunk_rows: int) -> Iterator[Chunk]:
        meter.value = 0.0
        for k, (_, t) in enumerate(tables):
            for chunk in t.read(cols, chunk_rows):
                meter.value = (k + t.meter.value) / len(tables)
                yield chunk
        meter.value = 1.0

    return Table(columns, read, meter)


def _parquet_dataset(folder: Path, parts: list[Path]) -> Table:
    """Parquet parts through ``pyarrow.dataset`` (hive ``key=value`` folders as columns), in path order."""
    _pyarrow()
    import pyarrow.dataset as ds

    try:
        dataset = ds.dataset([str(p) for p in parts], format="parquet", partitioning="hive",
                             partition_base_dir=str(folder))
        fragments = list(dataset.get_fragments())
        names = [f.physical_schema.names for f in fragments]
    except Exception:  # noqa: BLE001
        raise CorpusError("A Parquet part in the folder could not be read (it may be damaged); export it again.") \
            from None
    for part, n in zip(parts[1:], names[1:]):
        if n != names[0]:
            raise CorpusError(f"The part '{part.relative_to(folder).as_posix()}' has other columns than "
                              f"'{parts[0].relative_to(folder).as_posix()}'; every part needs the same columns.")
    columns = [str(n) for n in dataset.schema.names]

    meter = Meter()

    def read(cols: Sequence[str], chunk_rows: int) -> Iterator[Chunk]:
        wanted = list(dict.fromkeys(cols))
        meter.value = 0.0
        try:
            for k, fragment in enumerate(fragments):  # in path order, one after the other
                rows, done = max(fragment.metadata.num_rows, 1), 0
                for batch in fragment.to_batches(schema=dataset.schema, columns=wanted,
                                                 batch_size=max(1, chunk_rows), use_threads=False):
                    done += batch.num_rows
                    meter.value = (k + min(done / rows, 1.0)) / len(fragments)
                    yield _batch_chunk(batch, cols)
        except Exception:  # noqa: BLE001
            raise CorpusError("A Parquet part in the folder could not be read (it may be damaged); export it "
                              "again.") from None

    return Table(columns, read, meter)


# ---------------------------------------------------------------------------------------------- .txt files


def txt_files(folder: Path) -> list[Path]:
    """The .txt files under ``folder`` in path order (hidden files and macOS folders skipped)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() == ".txt")
    return [p for p in files if not _skip_member(p.relative_to(folder).parts)]


def txt_folder_chunks(folder: Path, files: list[Path], encoding: str, chunk_rows: int,
                      meter: Meter | None = None) -> Iterator[Chunk]:
    """(text, label = the folder holding each file) of the .txt files, each decoded with ``encoding``."""
    meter = meter or Meter()
    for start in range(0, len(files), max(1, chunk_rows)):
        chunk: Chunk = {"text": [], "label": []}
        for p in files[start:start + chunk_rows]:
            rel = p.relative_to(folder)
            raw = p.read_bytes()
            chunk["text"].append(decode_text(raw, what=f"file '{rel.as_posix()}'", encoding=encoding) if raw else "")
            chunk["label"].append(rel.parts[-2] if len(rel.parts) > 1 else "")
        meter.value = min(start + chunk_rows, len(files)) / len(files)
        yield chunk


def txt_zip_chunks(data: bytes, names: Sequence[str], encoding: str, chunk_rows: int,
                   meter: Meter | None = None) -> Iterator[Chunk]:
    """(text, label = the folder holding each file) of the ZIP's .txt members ``names``, in that order."""
    meter = meter or Meter()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for start in range(0, len(names), max(1, chunk_rows)):
            chunk: Chunk = {"text": [], "label": []}
            for name in names[start:start + chunk_rows]:
                raw = read_zip_member(zf, name)
                parts = PurePosixPath(name).parts
                chunk["text"].append(decode_text(raw, what=f"file '{name}'", encoding=encoding) if raw else "")
                chunk["label"].append(parts[-2] if len(parts) > 1 else "")
            meter.value = min(start + chunk_rows, len(names)) / len(names)
            yield chunk
