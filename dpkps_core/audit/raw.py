"""The audited corpus as RAW rows, before loading, and its neighbours built on those rows (docs/DESIGN.md §2.0;
docs/PRIVACY.md "Empirical audit").

The guarantee is stated for the file on disk: D ± one row (all rows of one person) must load as D ± that document
(that person's documents). So the audit builds its neighbouring corpora on the raw table — it removes a row (every
row of one person) or appends canary rows — and loads each of them through the public loader
(:func:`dpkps_core.corpus.load_corpus`) with the user's own loading choices. A loader whose decisions depend on
other rows (cross-label or cross-person de-duplication, a column guessed from the values) then changes the loaded
neighbours by more than one unit, and the audit sees it.

Rows stay in memory: each neighbour is serialised to JSON Lines bytes and handed to the loader as an in-memory
upload (``load_corpus(bytes, filename=…)``); nothing is written to disk.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import DEMO_SPECS, Corpus, demo_rows, load_corpus, load_demo_corpus, read_rows
from dpkps_core.corpus.cleaning import as_str
from dpkps_core.errors import CorpusError, ParameterError

#: Loader options a :class:`RawTable` passes through unchanged (the user's own loading choices).
_LOAD_OPTIONS = ("text_column", "label_column", "person_column", "classes", "min_chars", "drop_duplicates",
                 "max_documents", "truncate", "min_class_size")

#: The person id of the audit's canary person (D⁺ under the person unit).
CANARY_PERSON = "audit-canary-person"


def _plain(value: Any) -> Any:
    """A cell as a JSON value the loader reads back as the same string (numpy scalars → Python, NaN → null)."""
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            value = str(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


@dataclasses.dataclass(frozen=True)
class RawTable:
    """A PRIVATE corpus as raw rows (a table of columns) with the loader options that turn it into a
    :class:`~dpkps_core.corpus.Corpus` (docs/DESIGN.md §2.0).

    Attributes:
        columns: column names, in file order.
        rows: one tuple of raw cell values per row, in file order (never shown, logged or written).
        text_column / label_column / person_column: the columns the loader selects (``text_column`` and
            ``label_column`` as the loader resolved them on the original file; they tell the audit where a
            canary row's cells go). The loader itself receives the user's choices in ``load``.
        load: the keyword arguments of :func:`~dpkps_core.corpus.load_corpus` (the user's choices).
        origin: where the rows came from, in words (public: a file name or a demo spec).
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...] = dataclasses.field(repr=False)
    text_column: str
    label_column: str
    person_column: str | None
    load: Mapping[str, Any]
    origin: str

    def __post_init__(self) -> None:
        for col in (self.text_column, self.label_column) + ((self.person_column,) if self.person_column else ()):
            if col not in self.columns:
                raise ParameterError(f"The raw table has no column '{col}'.")
        if any(len(r) != len(self.columns) for r in self.rows):
            raise ParameterError("Every raw row needs one value per column.")

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:  # never show cell values
        return f"RawTable(origin={self.origin!r}, rows={len(self.rows)}, columns={len(self.columns)})"

    # ------------------------------------------------------------------------------------------ neighbours
    def without(self, indices: Iterable[int]) -> "RawTable":
        """The table without the rows at ``indices`` (D⁻: one row, or every row of one person)."""
        drop = set(int(i) for i in indices)
        return dataclasses.replace(self, rows=tuple(r for i, r in enumerate(self.rows) if i not in drop))

    def plus(self, rows: Sequence[Mapping[str, Any]]) -> "RawTable":
        """The table with ``rows`` (column → value; missing columns empty) appended (D⁺, D+k)."""
        extra = tuple(tuple(row.get(c) for c in self.columns) for row in rows)
        return dataclasses.replace(self, rows=self.rows + extra)

    def before(self, rows: Sequence[Mapping[str, Any]]) -> "RawTable":
        """The table with ``rows`` inserted before every other row (a neighbour too: where a row sits in the file
        must not change what the loader keeps, docs/DESIGN.md §2.0)."""
        extra = tuple(tuple(row.get(c) for c in self.columns) for row in rows)
        return dataclasses.replace(self, rows=extra + self.rows)

    def row(self, text: str, label: str, person: str | None = None) -> dict[str, Any]:
        """A new row with ``text`` and ``label`` (and ``person`` under the person unit) in the loader's columns."""
        out: dict[str, Any] = {self.text_column: text, self.label_column: label}
        if self.person_column:
            out[self.person_column] = person if person is not None else CANARY_PERSON
        return out

    # ------------------------------------------------------------------------------------------ the loader
    def to_jsonl(self) -> bytes:
        """The rows as JSON Lines (in memory), the form handed to the loader."""
        lines = [json.dumps({c: _plain(v) for c, v in zip(self.columns, r)}, ensure_ascii=False) for r in self.rows]
        return ("\n".join(lines) + "\n").encode("utf-8")

    def load_corpus(self) -> Corpus:
        """These rows through the public loader with the user's loading choices (docs/DESIGN.md §2.0)."""
        if not self.rows:
            raise CorpusError("The audit's neighbouring table has no rows left.")
        data = self.to_jsonl()
        options = dict(self.load)
        options.setdefault("max_bytes", max(len(data) + 1, 200 * 1024 * 1024))
        return load_corpus(data, filename="audit-neighbour.jsonl", name="audit", **options)

    def cells(self, column: str) -> list[str]:
        """A column's cells as the loader reads them (stripped strings; missing → "")."""
        j = self.columns.index(column)
        return [as_str(r[j]).strip() for r in self.rows]

    def row_keys(self) -> list[tuple[str, str, str | None]]:
        """(text, label, person) of every raw row as the loader reads its cells — the key of the document it
        loads as (compare :func:`dpkps_core.audit.neighbours.document_keys`)."""
        texts, labels = self.cells(self.text_column), self.cells(self.label_column)
        persons = self.cells(self.person_column) if self.person_column else [None] * len(self.rows)
        return list(zip(texts, labels, persons))

    def rows_of(self, text: str, label: str, person: str | None = None) -> list[int]:
        """Indices of the raw rows that load as the document (``text``, ``label``[, ``person``])."""
        texts, labels = self.cells(self.text_column), self.cells(self.label_column)
        persons = self.cells(self.person_column) if self.person_column else [None] * len(self.rows)
        return [i for i, (t, y, p) in enumerate(zip(texts, labels, persons))
                if t == text and y == label and (person is None or p == person)]

    def rows_of_person(self, person: str) -> list[int]:
        """Indices of every raw row of ``person`` (the person unit's D⁻ removes them all)."""
        if not self.person_column:
            raise ParameterError("The raw table has no person column.")
        return [i for i, p in enumerate(self.cells(self.person_column)) if p == person]

    # ------------------------------------------------------------------------------------------ constructors
    @classmethod
    def from_corpus(cls, corpus: Corpus, config: SamplingConfig | None = None) -> "RawTable":
        """Rows rebuilt from an already loaded corpus (text, label, person): the fallback when the original file
        is not at hand. Its neighbours still go through the loader, but a loader decision that already acted on
        the original file (a collapsed duplicate) can no longer show."""
        person = "person" if corpus.persons is not None else None
        columns = ("text", "label") + (("person",) if person else ())
        rows = tuple(zip(corpus.texts, corpus.labels, corpus.persons) if person else zip(corpus.texts, corpus.labels))
        classes = getattr(config, "classes", None) or corpus.public_classes
        return cls(columns, rows, "text", "label", person,
                   {"text_column": "text", "label_column": "label", "person_column": person, "min_chars": 0,
                    "classes": tuple(classes) if classes else None, "max_documents": max(len(rows) + 1000, 200_000)},
                   f"the loaded corpus '{corpus.name}' (its original rows were not available)")


def read_raw_table(
    source: str | os.PathLike[str] | bytes, *, filename: str | None = None, text_column: str | None = None,
    label_column: str | None = None, person_column: str | None = None, classes: Sequence[str] | None = None,
    encoding: str = "utf-8", **load_options: Any,
) -> RawTable:
    """The raw rows of a corpus file (CSV, TSV, JSON Lines/JSON, Parquet, a ZIP or folder of .txt files) and the
    loader options the user loaded it with (docs/DESIGN.md §2.0). Nothing is cleaned or dropped here: that is the loader's
    job on each neighbour. A ZIP or folder of .txt files becomes a table (text, label = its folder). ``encoding`` is
    the file's text encoding, as the release path reads it (``--encoding``, e.g. latin-1; issue 35 §7): the rows
    are decoded once here, and each neighbour is handed to the loader as UTF-8 JSON Lines."""
    unknown = set(load_options) - set(_LOAD_OPTIONS)
    if unknown:
        raise ParameterError(f"Unknown loader option(s) for the audit: {', '.join(sorted(unknown))}.")
    limits = {"max_documents": load_options["max_documents"]} if "max_documents" in load_options else {}
    raw = read_rows(source, filename=filename, text_column=text_column, label_column=label_column,
                    person_column=person_column, encoding=encoding,
                    **limits)  # else the deployment's limits (corpus/limits.py)
    display = Path(str(filename or raw.source)).name
    options = {"text_column": text_column, "label_column": label_column, "person_column": person_column,
               "classes": tuple(classes) if classes else None, **load_options}
    if not raw.tabular:  # a ZIP or folder of .txt files: a table (text, label = its folder)
        options.update(text_column="text", label_column="label")
    # text_column / label_column: the columns the loader chooses (the user's, or by name) — where a canary row's
    # cells go
    return RawTable(raw.columns, raw.rows(), raw.text_column, raw.label_column, raw.person_column, options, display)


def raw_table_for(config: SamplingConfig) -> RawTable:
    """The raw rows of the corpus ``config`` names (a file path or a ``demo:…`` spec), with its loading choices.

    Demo corpora have no file: their rows are the demo's public records (BBC News: text, category; Drugs.com:
    review, label, and the drug as the person column), loaded with the demo's public class list."""
    spec = config.corpus
    if spec.startswith("demo:"):
        if spec not in DEMO_SPECS:
            raise CorpusError(f"Unknown demo corpus {spec!r}; choose one of {', '.join(DEMO_SPECS)}.")
        name, label = DEMO_SPECS[spec]
        public = load_demo_corpus(name, label=label or None, person_column=config.person_column)
        classes = tuple(config.classes) if config.classes else public.public_classes
        raw = demo_rows(name, label=label or None, person_column=config.person_column)
        rows = raw.rows()
        options = {"text_column": "text", "label_column": "label", "person_column": raw.person_column,
                   "classes": classes, "min_chars": 20, "max_documents": len(rows) + 1000}
        return RawTable(raw.columns, rows, "text", "label", raw.person_column, options, spec)
    if not Path(spec).exists():
        raise CorpusError(f"The corpus file {spec!r} does not exist.")
    limits = {"max_documents": config.max_documents} if config.max_documents is not None else {}
    return read_raw_table(spec, text_column=config.text_column, label_column=config.label_column,
                          person_column=config.person_column, classes=config.classes, encoding=config.encoding,
                          **limits)
