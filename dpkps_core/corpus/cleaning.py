"""Cleaning the rows read from a corpus file (docs/DESIGN.md §2.0: loading keeps neighbours neighbours).

Each row is dropped for a reason of its own (empty text, fewer than ``min_chars`` characters, empty label, empty
person id) and a row collapses only with an IDENTICAL earlier row — same text (as
:func:`normalise_document_text` reads it: the normalisation of the ledger's document key), same label and same person
(no person column: same text and label). So the corpus loaded from D plus one row is D's corpus plus that document
(or D's, when the row repeats an identical row), and removing one person's rows removes exactly their documents.
Never "the first copy of a text" across labels or persons: that would turn an added row into a label swap, or make
one person's rows decide which of another person's rows survive. Counts only, never text, leave this module.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from dpkps_core.corpus.model import LoadReport
from dpkps_core.errors import CorpusError, ParameterError


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


def normalise_document_text(text: str) -> str:
    """The one text normalisation of docs/DESIGN.md §2.0 ("one text normalisation serves the loader's de-duplication and
    the document key"): Unicode NFKC (the form every statistic reads a text in, §2.1 step 1), then every run of
    whitespace collapsed to one space and the ends stripped. Case is kept. Two rows whose texts normalise alike are
    the same text to the loader (they collapse when label and person agree too) and to the privacy ledger (one
    document key, :func:`dpkps_core.ledger_store.units.unit_strings`)."""
    return " ".join(unicodedata.normalize("NFKC", str(text)).split())


def as_str(value: Any) -> str:
    """A raw cell as the loader reads it: missing → "", bytes decoded, a whole float without its ".0"."""
    if type(value) is str:  # the common case, as str(value) would give it
        return value
    if _is_missing(value):
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def check_int(value: Any, name: str, minimum: int) -> int:
    """``value`` as a whole number of at least ``minimum`` (a :class:`ParameterError` otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ParameterError(f"{name} must be a whole number of at least {minimum}.")
    return value


#: Bytes of one row's de-duplication digest (BLAKE2b-128 of its normalised text, label and person). The loader
#: keeps one per kept row across chunks — about 90 bytes of memory per document with Python's set (measured in
#: benchmarks/scale.py); a collision (two different rows alike) has probability ≈ n²/2¹²⁹, 6·10⁻²⁶ at 2·10⁶ rows.
DIGEST_BYTES = 16


def row_digest(key: tuple[str, str, str]) -> bytes:
    """The de-duplication digest of a row's (normalised text, label, person): each part length-prefixed, so no two
    different keys share their bytes."""
    parts = [part.encode("utf-8", "surrogatepass") for part in key]
    return hashlib.blake2b(b"".join(len(p).to_bytes(8, "little") + p for p in parts),
                           digest_size=DIGEST_BYTES).digest()


@dataclass
class _Kept:
    """The rows that survive the per-row checks, and how many each check dropped (private, local counts); the
    digests of the kept rows (``seen``) and the kept labels' counts carry over from chunk to chunk."""

    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    persons: list[str] = field(default_factory=list)
    n_empty: int = 0
    n_short: int = 0
    n_dup: int = 0
    n_no_label: int = 0
    n_no_person: int = 0
    n_read: int = 0
    n_kept: int = 0
    seen: set[bytes] = field(default_factory=set, repr=False)
    label_counts: Counter[str] = field(default_factory=Counter, repr=False)
    indices: list[int] = field(default_factory=list, repr=False)  # the kept rows' positions in the last chunk


def _filter_rows(raw_texts: Sequence[Any], raw_labels: Sequence[Any], persons: Sequence[Any] | None, *,
                 min_chars: int, drop_duplicates: bool, kept: _Kept | None = None) -> _Kept:
    """Each row's fate from that row alone (and its identical earlier copies, remembered by digest in ``kept``
    from earlier chunks): see the module docstring."""
    kept = kept if kept is not None else _Kept()
    seen = kept.seen
    kept.n_read += len(raw_texts)
    for i, (t, y) in enumerate(zip(raw_texts, raw_labels)):
        text = as_str(t).strip()
        if not text:
            kept.n_empty += 1
            continue
        if len(text) < min_chars:
            kept.n_short += 1
            continue
        label = as_str(y).strip()
        if not label:
            kept.n_no_label += 1
            continue
        person = ""
        if persons is not None:
            person = as_str(persons[i]).strip()
            if not person:
                kept.n_no_person += 1
                continue
        if drop_duplicates:
            key = (normalise_document_text(text), label, person)
            digest = row_digest(key)
            if digest in seen:
                kept.n_dup += 1
                continue
            seen.add(digest)
        if persons is not None:
            kept.persons.append(person)
        kept.texts.append(text)
        kept.labels.append(label)
        kept.label_counts[label] += 1
        kept.n_kept += 1
        kept.indices.append(i)
    return kept


def _refuse_when_empty(kept: _Kept, n_read: int, min_chars: int) -> None:
    """Nothing left after cleaning: say which checks dropped the rows (counts only)."""
    if kept.n_kept:
        return
    if n_read == 0:
        raise CorpusError("The file has no documents, only a header (or nothing at all): put one document per "
                          "row under the header and upload the file again.")
    extra = (f", {kept.n_no_label:,} without a label" if kept.n_no_label else "") + (
        f", {kept.n_no_person:,} without a person id" if kept.n_no_person else "")
    raise CorpusError(
        f"No documents are left after cleaning ({n_read:,} read: {kept.n_empty:,} empty, {kept.n_short:,} shorter "
        f"than {min_chars} characters{extra}, {kept.n_dup:,} identical copies); choose the column that holds the "
        f"documents' text, or upload documents of at least {min_chars} characters each"
        + ("; give every document a label (a .txt file takes the name of the folder holding it)"
           if kept.n_no_label else "") + "."
    )


def _drop_small_classes(kept: _Kept, min_class_size: int, with_persons: bool) -> int:
    """Demo corpora only (their public class lists are fixed): drop classes under ``min_class_size``; return how
    many documents went. A public decision, since the demo data are public."""
    counts = Counter(kept.labels)
    small = {c for c, k in counts.items() if k < min_class_size}
    if not small:
        return 0
    keep = [i for i, y in enumerate(kept.labels) if y not in small]
    n_dropped = len(kept.labels) - len(keep)
    kept.texts = [kept.texts[i] for i in keep]
    kept.labels = [kept.labels[i] for i in keep]
    if with_persons:
        kept.persons = [kept.persons[i] for i in keep]
    if len(Counter(kept.labels)) < 2:
        raise ParameterError(f"Fewer than two classes have at least {min_class_size} documents; lower min_class_size.")
    return n_dropped


def _label_notes(labels: Sequence[str] | Mapping[str, int], min_class_size: int) -> tuple[str, ...]:
    """Checks on the labels found in the data (the labels, or their counts): local warnings, never refusals —
    whether anything is released must not depend on one private document (docs/DESIGN.md §2). The declared public class
    list decides."""
    counts = Counter(labels)
    notes: list[str] = []
    if len(counts) < 2:
        notes.append("All kept documents carry the same label: check that the label column is the right one.")
    small_found = sorted((c for c, k in counts.items() if k < min_class_size), key=lambda c: (counts[c], c))
    if small_found:
        more = f" and {len(small_found) - 1} more" if len(small_found) > 1 else ""
        notes.append(f"{len(small_found)} label(s) have fewer than {min_class_size} documents (e.g. "
                     f"'{small_found[0]}'{more}); their documents still count, and a declared class with few or no "
                     "documents gets a noise-dominated density.")
    return tuple(notes)


def clean_rows(
    raw_texts: Sequence[Any],
    raw_labels: Sequence[Any],
    *,
    min_chars: int,
    drop_duplicates: bool,
    min_class_size: int,
    drop_small_classes: bool = False,
    persons: Sequence[Any] | None = None,
) -> tuple[list[str], list[str], LoadReport, list[str] | None]:
    """Drop empty / too-short / unlabelled / person-less rows and identical copies; note label checks (counts only).

    Returns (texts, labels, the :class:`LoadReport`, persons as strings or None). ``persons`` (optional, one per raw
    row) is filtered alongside. No row is a reason to refuse the whole corpus (see the module docstring)."""
    n_read = len(raw_texts)
    kept = _filter_rows(raw_texts, raw_labels, persons, min_chars=min_chars, drop_duplicates=drop_duplicates)
    _refuse_when_empty(kept, n_read, min_chars)
    n_dropped_classes = (_drop_small_classes(kept, min_class_size, persons is not None)
                         if drop_small_classes else 0)
    report = LoadReport(
        n_read=n_read,
        n_empty=kept.n_empty,
        n_too_short=kept.n_short,
        n_duplicates=kept.n_dup,
        n_kept=len(kept.texts),
        truncated=False,
        n_dropped_classes=n_dropped_classes,
        notes=_label_notes(kept.labels, min_class_size),
        n_no_label=kept.n_no_label,
        n_no_person=kept.n_no_person,
    )
    return kept.texts, kept.labels, report, (kept.persons if persons is not None else None)


class RowFilter:
    """The loader's per-row cleaning over a stream of chunks (issue 31: one reading path for any size).

    :meth:`feed` takes one chunk of raw cells and returns the rows it keeps, each decided exactly as
    :func:`clean_rows` decides it on the whole file (see the module docstring): by that row alone, or by an
    identical EARLIER row of the same person — remembered across chunks by its digest (:data:`DIGEST_BYTES`
    bytes; the only state that grows with the corpus). :meth:`report` ends the pass: the counts (private, local),
    the label notes, and the refusal when no row was kept."""

    def __init__(self, *, min_chars: int, drop_duplicates: bool, with_persons: bool) -> None:
        self.min_chars = check_int(min_chars, "min_chars", 0)
        if not isinstance(drop_duplicates, bool):
            raise ParameterError("drop_duplicates must be True or False.")
        self.drop_duplicates = drop_duplicates
        self.with_persons = bool(with_persons)
        self._kept = _Kept()

    def feed(self, raw_texts: Sequence[Any], raw_labels: Sequence[Any], persons: Sequence[Any] | None = None
             ) -> tuple[list[str], list[str], list[str] | None]:
        """The (texts, labels, persons or None) this chunk keeps, in its order."""
        if self.with_persons and persons is None:
            raise ParameterError("This filter reads a person column: give each chunk's persons.")
        kept = self._kept
        kept.indices = []
        _filter_rows(raw_texts, raw_labels, persons if self.with_persons else None, min_chars=self.min_chars,
                     drop_duplicates=self.drop_duplicates, kept=kept)
        out = (kept.texts, kept.labels, kept.persons if self.with_persons else None)
        kept.texts, kept.labels, kept.persons = [], [], []
        return out

    @property
    def last_kept(self) -> list[int]:
        """The positions, in the last chunk fed, of the rows it kept."""
        return self._kept.indices

    @property
    def n_read(self) -> int:
        """Rows fed so far."""
        return self._kept.n_read

    @property
    def n_kept(self) -> int:
        """Rows kept so far."""
        return self._kept.n_kept

    @property
    def digests(self) -> int:
        """How many row digests the de-duplication holds (one per kept row when it is on)."""
        return len(self._kept.seen)

    def report(self, *, min_class_size: int) -> LoadReport:
        """The pass's :class:`LoadReport` (counts only); a :class:`CorpusError` when no row was kept."""
        kept = self._kept
        _refuse_when_empty(kept, kept.n_read, self.min_chars)
        return LoadReport(
            n_read=kept.n_read, n_empty=kept.n_empty, n_too_short=kept.n_short, n_duplicates=kept.n_dup,
            n_kept=kept.n_kept, truncated=False, n_dropped_classes=0,
            notes=_label_notes(kept.label_counts, check_int(min_class_size, "min_class_size", 1)),
            n_no_label=kept.n_no_label, n_no_person=kept.n_no_person,
        )
