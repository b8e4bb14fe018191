"""Reading a private corpus from the user's file (docs/DESIGN.md §1): the loader's public entry points.

Supported inputs: CSV, TSV, JSONL (or a JSON array of objects), Parquet, a folder of their parts (Parquet parts as
a data platform exports them), a folder of ``.txt`` files and a ZIP of ``.txt`` files (label = the folder that
holds each file). ``source`` may be a path, raw bytes (with ``filename=``) or a file-like object such as a
Streamlit upload. There is ONE reading path (issue 31): :class:`~dpkps_core.corpus.stream.CorpusStream` reads any
input in chunks (formats in :mod:`.tables`, columns chosen by name in :mod:`.columns`, per-row cleaning in
:mod:`.cleaning`); the in-memory loader below reads all its chunks and concatenates them. Nothing here logs,
prints or caches document text; every error message names at most a line/row number, a column name or a file
name inside the upload.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path, PurePosixPath
from typing import Any, Mapping, Sequence

from dpkps_core.corpus.cleaning import check_int
from dpkps_core.corpus.columns import guess_columns
from dpkps_core.corpus.limits import DEFAULT_LIMIT, LoadLimits
from dpkps_core.corpus.model import Corpus, check_class_names
from dpkps_core.corpus.stream import CorpusStream, open_input
from dpkps_core.errors import CorpusError, ParameterError


@dataclasses.dataclass(frozen=True)
class RawRows:
    """A corpus file's rows as read, before any cleaning (PRIVATE: never shown, logged or written).

    Attributes:
        columns: column names in file order (a ZIP or folder of .txt files reads as ``("text", "label")``).
        table: the rows — a mapping column → values (each column once, as the loader reads them).
        text_column / label_column: the columns the loader selects (the user's, or chosen by name: docs/DESIGN.md §2.0).
        person_column: the person column the user gave, or None.
        source: where the rows came from (a file name or path, or a demo spec: public).
        fmt: the file format read (see :data:`dpkps_core.corpus.formats.FORMATS`; ``"demo"`` for a demo corpus).
    """

    columns: tuple[str, ...]
    table: Mapping[str, Sequence[Any]] = dataclasses.field(repr=False)
    text_column: str
    label_column: str
    person_column: str | None
    source: str
    fmt: str

    def __len__(self) -> int:
        return len(self.table[self.text_column])

    @property
    def tabular(self) -> bool:
        """Whether the rows came from a table (CSV, TSV, JSON, Parquet) rather than .txt files or a demo."""
        return self.fmt not in ("folder", "zip", "demo")

    def column(self, name: str) -> list[Any]:
        """The raw values of one column, in file order."""
        if name not in self.columns:
            raise ParameterError(f"The rows have no column '{name}'.")
        return list(self.table[name])

    def rows(self) -> tuple[tuple[Any, ...], ...]:
        """One tuple of raw cell values per row (in :attr:`columns` order), in file order."""
        return tuple(zip(*(self.table[c] for c in self.columns)))


def read_rows(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    file_format: str | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    person_column: str | None = None,
    max_bytes: int | None | Any = DEFAULT_LIMIT,
    max_documents: int | None | Any = DEFAULT_LIMIT,
    encoding: str = "utf-8",
) -> RawRows:
    """The raw rows of a corpus file, read exactly as :func:`load_corpus` reads them, before any cleaning.

    Same formats, same columns (the user's, or chosen from the NAMES only: docs/DESIGN.md §2.0), same errors and limits;
    nothing is dropped or collapsed (that is the cleaning's job, per row). The empirical audit builds its
    neighbouring corpora on these rows (docs/PRIVACY.md "Empirical audit"); they are held in memory."""
    stream = CorpusStream(source, filename=filename, file_format=file_format, text_column=text_column,
                          label_column=label_column, person_column=person_column, encoding=encoding,
                          max_bytes=max_bytes, max_documents=max_documents)
    columns = stream.columns
    table: dict[str, list[Any]] = {c: [] for c in columns}
    for chunk in stream.raw_chunks(columns):
        for c in columns:
            table[c].extend(chunk[c])
    return RawRows(tuple(columns), table, stream.text_column, stream.label_column, person_column, stream.display,
                   stream.fmt)


def _check_load_options(*, min_chars: Any, max_bytes: Any, max_documents: Any, min_class_size: Any,
                        drop_duplicates: Any, truncate: Any, columns: Sequence[tuple[Any, str]]
                        ) -> tuple[int, LoadLimits, int]:
    """The loader's own settings checked (public input: a refusal here reads no data); returns min_chars, the
    size limits (:class:`LoadLimits`, the deployment's defaults where not given) and min_class_size."""
    limits = (check_int(min_chars, "min_chars", 0),
              LoadLimits.resolve(max_bytes=max_bytes, max_documents=max_documents),
              check_int(min_class_size, "min_class_size", 1))
    if not isinstance(drop_duplicates, bool) or not isinstance(truncate, bool):
        raise ParameterError("drop_duplicates and truncate must be True or False.")
    if truncate:
        # docs/DESIGN.md §2.0: keeping the first max_documents rows makes a row's fate depend on the rows before it (one
        # added row would push another out), so a truncated corpus has no neighbour guarantee.
        raise ParameterError(
            "truncate=True is not supported: keeping the first rows would let one added row push out another. "
            "Raise max_documents instead (0 = no limit)."
        )
    for col, what in columns:
        if col is not None and not isinstance(col, str):
            raise ParameterError(f"{what} must be a column name.")
    return limits


def load_corpus(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    text_column: str | None = None,
    label_column: str | None = None,
    file_format: str | None = None,
    name: str | None = None,
    min_chars: int = 20,
    max_bytes: int | None | Any = DEFAULT_LIMIT,
    max_documents: int | None | Any = DEFAULT_LIMIT,
    min_class_size: int = 2,
    drop_duplicates: bool = True,
    truncate: bool = False,
    classes: Sequence[str] | str | None = None,
    person_column: str | None = None,
    encoding: str = "utf-8",
    chunk_rows: int | None = None,
) -> Corpus:
    """Load and validate a labelled private corpus; ``corpus.report`` says what was dropped.

    ``source``: a path (file or folder of class sub-folders of .txt files), raw bytes with ``filename=``
    (e.g. a Streamlit upload) or a binary file-like object. Formats: CSV, TSV, JSONL/JSON, Parquet, ZIP of
    .txt files, folder of .txt files (chosen by the file name's extension, else by the file's first bytes).

    Loading keeps neighbours neighbours (docs/DESIGN.md §2.0; docs/PRIVACY.md "Loading and de-duplication"): what it
    decides depends on public input or on each row alone. Columns not given are chosen from their NAMES only
    (:data:`TEXT_COLUMN_TIERS`, :data:`LABEL_COLUMN_TIERS`); when no name or several names match, a
    :class:`CorpusError` lists the columns and asks for the choice. A row is dropped, and counted in
    ``corpus.report`` (private, local figures), when its text is empty or shorter than ``min_chars``
    characters, its label is empty or its person id is empty; it collapses only with an identical earlier row of
    the same person (same text, label and person; ``drop_duplicates=False`` keeps every row).
    More than ``max_documents`` rows, or a file over ``max_bytes``, is an error (a local refusal: nothing is
    computed, released or charged); both are settings (:class:`~dpkps_core.corpus.limits.LoadLimits`): left out,
    the deployment's defaults ($DPKPS_MAX_DOCUMENTS, $DPKPS_MAX_CORPUS_BYTES, else 200,000 and 200 MB); ``0`` or
    None = no limit.
    ``truncate=True`` is refused: keeping the first N rows would let one row push out another.
    ``person_column``: optional column identifying the person each document is about (the unit of privacy
    becomes the person; the identifiers are private and never released; never guessed).
    ``encoding``: how the file's text is decoded — ``"utf-8"`` (default; a BOM is allowed), ``"latin-1"`` or
    ``"cp1252"`` (public user input, :data:`~dpkps_core.corpus.formats.ENCODINGS`); the WHOLE file is decoded with
    it, never guessed from a sample, so no row's fate depends on another row's bytes (docs/DESIGN.md §2.0).
    ``classes``: the public class names the user declares (see :meth:`Corpus.with_classes`); labels found in
    the data are only local suggestions. Checks on the labels (one label only, tiny classes) are local notes in
    ``corpus.report.notes``, not errors, so that whether anything is released never hinges on one document.
    ``chunk_rows``: rows read at a time (default ``$DPKPS_CHUNK_ROWS``, else 20,000; the result does not depend
    on it: every decision is per row).
    Raises :class:`CorpusError` with one actionable sentence for every bad input.
    """
    min_chars, limits, min_class_size = _check_load_options(
        min_chars=min_chars, max_bytes=max_bytes, max_documents=max_documents, min_class_size=min_class_size,
        drop_duplicates=drop_duplicates, truncate=truncate,
        columns=((text_column, "text_column"), (label_column, "label_column"), (person_column, "person_column")))
    stream = CorpusStream(source, filename=filename, file_format=file_format, text_column=text_column,
                          label_column=label_column, person_column=person_column, encoding=encoding,
                          min_chars=min_chars, drop_duplicates=drop_duplicates, min_class_size=min_class_size,
                          max_bytes=limits.max_bytes or 0, max_documents=limits.max_documents or 0,
                          chunk_rows=chunk_rows)
    clean_texts, clean_labels, clean_persons, report = stream.read_all()
    display_name = name or (PurePosixPath(str(filename)).stem if filename else Path(stream.display).stem) or "corpus"
    return Corpus(
        texts=tuple(clean_texts),
        labels=tuple(clean_labels),
        name=display_name,
        source=stream.display,
        report=report,
        public_classes=None if classes is None else check_class_names(classes),
        persons=None if clean_persons is None else tuple(clean_persons),
        person_column=person_column,
        text_column=stream.text_column if stream.tabular else None,
        label_column=stream.label_column if stream.tabular else None,
    )


def list_columns(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    file_format: str | None = None,
    max_bytes: int | None | Any = DEFAULT_LIMIT,
    encoding: str = "utf-8",
) -> list[str]:
    """Column names of a tabular corpus file (CSV, TSV, JSONL/JSON, Parquet), for the UI's column pickers; the
    file is decoded with ``encoding`` as :func:`load_corpus` decodes it."""
    inp = open_input(source, filename=filename, file_format=file_format, encoding=encoding,
                     limits=LoadLimits.resolve(max_bytes=max_bytes, max_documents=None), columns_only=True)
    if not inp.tabular:
        raise CorpusError(
            "Folders and ZIPs of .txt files have no columns; each file is a document labelled by its folder."
        )
    return list(dict.fromkeys(inp.columns))


def suggest_columns(
    source: str | os.PathLike[str] | bytes | Any,
    *,
    filename: str | None = None,
    file_format: str | None = None,
    person_column: str | None = None,
    encoding: str = "utf-8",
) -> tuple[str | None, str | None]:
    """The (text, label) columns :func:`load_corpus` would choose for a tabular file: from the column NAMES only
    (docs/DESIGN.md §2.0; :func:`guess_columns`); either is None when no name or several names match (the user chooses)."""
    inp = open_input(source, filename=filename, file_format=file_format, encoding=encoding,
                     limits=LoadLimits.resolve(max_documents=None), columns_only=True)
    if not inp.tabular:
        return None, None
    return guess_columns(list(dict.fromkeys(inp.columns)), person_column=person_column)
