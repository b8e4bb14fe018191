"""Cleaning the rows read from a corpus file (DESIGN §2.0: loading keeps neighbours neighbours).

Each row is dropped for a reason of its own (empty text, fewer than ``min_chars`` characters, empty label, empty
person id) and a row collapses only with an IDENTICAL earlier row — same text (stripped), same label and same person
(no person column: same text and label). So the corpus loaded from D plus one row is D's corpus plus that document
(or D's, when the row repeats an identical row), and removing one person's rows removes exactly their documents.
Never "the first copy of a text" across labels or persons: that would turn an added row into a label swap, or make
one person's rows decide which of another person's rows survive. Counts only, never text, leave this module.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Sequence

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


def as_str(value: Any) -> str:
    """A raw cell as the loader reads it: missing → "", bytes decoded, a whole float without its ".0"."""
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


@dataclass
class _Kept:
    """The rows that survive the per-row checks, and how many each check dropped (private, local counts)."""

    texts: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    persons: list[str] = field(default_factory=list)
    n_empty: int = 0
    n_short: int = 0
    n_dup: int = 0
    n_no_label: int = 0
    n_no_person: int = 0


def _filter_rows(raw_texts: Sequence[Any], raw_labels: Sequence[Any], persons: Sequence[Any] | None, *,
                 min_chars: int, drop_duplicates: bool) -> _Kept:
    """Each row's fate from that row alone (and its identical earlier copies): see the module docstring."""
    kept = _Kept()
    seen: set[tuple[str, str, str]] = set()
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
            key = (text, label, person)
            if key in seen:
                kept.n_dup += 1
                continue
            seen.add(key)
        if persons is not None:
            kept.persons.append(person)
        kept.texts.append(text)
        kept.labels.append(label)
    return kept


def _refuse_when_empty(kept: _Kept, n_read: int, min_chars: int) -> None:
    """Nothing left after cleaning: say which checks dropped the rows (counts only)."""
    if kept.texts:
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


def _label_notes(labels: Sequence[str], min_class_size: int) -> tuple[str, ...]:
    """Checks on the labels found in the data: local warnings, never refusals — whether anything is released must
    not depend on one private document (DESIGN §2). The declared public class list decides."""
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
