"""The private labelled corpus as the core sees it (docs/DESIGN.md §1, §2): :class:`Corpus`, :class:`LoadReport` and the
declared public class names.

The corpus is PRIVATE: its ``repr`` never shows text; ``public_classes`` (declared by the user) and the person
column's NAME are the only public parts; the labels found in the data and the person identifiers are private.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Sequence

import numpy as np

from dpkps_core.errors import CorpusError, ParameterError


@dataclass(frozen=True)
class LoadReport:
    """What loading did: rows read, documents dropped (and why) and kept. Counts only, never text.

    Every count is a PRIVATE, local figure (shown to the data owner, never released). Each row's fate depends
    on that row alone (docs/DESIGN.md §2.0): empty text, too short, no label, no person id, or an identical copy (same
    text, label and person) of an earlier row."""

    n_read: int
    n_empty: int
    n_too_short: int
    n_duplicates: int
    n_kept: int
    truncated: bool = False
    n_dropped_classes: int = 0
    notes: tuple[str, ...] = ()
    n_no_label: int = 0
    n_no_person: int = 0

    def summary(self) -> str:
        """One-line human summary for the UI/CLI."""
        parts = [f"{self.n_kept:,} documents kept of {self.n_read:,} read"]
        if self.n_empty:
            parts.append(f"{self.n_empty:,} empty")
        if self.n_too_short:
            parts.append(f"{self.n_too_short:,} too short")
        if self.n_no_label:
            parts.append(f"{self.n_no_label:,} without a label")
        if self.n_no_person:
            parts.append(f"{self.n_no_person:,} without a person id")
        if self.n_duplicates:
            parts.append(f"{self.n_duplicates:,} identical cop{'y' if self.n_duplicates == 1 else 'ies'}")
        if self.n_dropped_classes:
            parts.append(f"{self.n_dropped_classes:,} in classes that were too small")
        if self.truncated:
            parts.append("input truncated to the document limit")
        return "; ".join(parts) + "."


@dataclass(frozen=True)
class Corpus:
    """A labelled PRIVATE corpus (ARCHITECTURE: Corpus). ``report`` is not part of equality.

    ``public_classes`` are the class names the user declared public (docs/DESIGN.md §2): they, not the
    labels found in the data, decide which classes the DP steps release. Demo corpora carry theirs; a loaded
    file has none until the user declares them (:meth:`with_classes`)."""

    texts: tuple[str, ...]
    labels: tuple[str, ...]
    name: str
    source: str
    report: LoadReport | None = field(default=None, compare=False, repr=False)
    public_classes: tuple[str, ...] | None = None
    persons: tuple[str, ...] | None = field(default=None, repr=False)  # PRIVATE person id per document
    person_column: str | None = None  # the (public) name of the column the persons came from
    # the (public) names of the columns the texts and labels were read from (None: not a table)
    text_column: str | None = field(default=None, compare=False)
    label_column: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.texts, tuple):
            object.__setattr__(self, "texts", tuple(self.texts))
        if not isinstance(self.labels, tuple):
            object.__setattr__(self, "labels", tuple(self.labels))
        if len(self.texts) != len(self.labels):
            raise CorpusError("A corpus needs exactly one label per document.")
        if not all(isinstance(t, str) for t in self.texts) or not all(isinstance(x, str) for x in self.labels):
            raise CorpusError("Corpus texts and labels must all be strings.")
        if self.public_classes is not None:
            object.__setattr__(self, "public_classes", check_class_names(self.public_classes))
        if self.persons is not None:
            object.__setattr__(self, "persons", tuple(str(p) for p in self.persons))
            if len(self.persons) != len(self.texts):
                raise CorpusError("A corpus with a person column needs exactly one person per document.")

    def __len__(self) -> int:
        return len(self.texts)

    def __repr__(self) -> str:  # never show document text
        declared = "undeclared" if self.public_classes is None else str(len(self.public_classes))
        return f"Corpus(name={self.name!r}, documents={len(self.texts)}, public classes={declared})"

    @property
    def declared(self) -> bool:
        """True when the public class names have been declared."""
        return self.public_classes is not None

    @property
    def classes(self) -> list[str]:
        """The declared PUBLIC class names, in declaration order (what the DP steps release per class).

        Raises :class:`ParameterError` when none were declared: the set of labels found in the data is
        private and must never decide what is released."""
        if self.public_classes is None:
            raise ParameterError(
                "Declare the public class names first (app: confirm the class list on the Corpus page; CLI: "
                "--classes a,b,c or --classes-file FILE). The labels found in the data are private and are "
                "never released on their own."
            )
        return list(self.public_classes)

    @property
    def observed_classes(self) -> list[str]:
        """Sorted distinct labels found in the data (PRIVATE: local suggestions for the data owner only)."""
        return sorted(set(self.labels))

    @property
    def class_counts(self) -> dict[str, int]:
        """Label -> number of documents, in sorted label order (PRIVATE: do not release without DP)."""
        counts = Counter(self.labels)
        return {c: counts[c] for c in sorted(counts)}

    @property
    def undeclared_count(self) -> int:
        """Documents whose label is not a declared class (PRIVATE count; they enter no DP step)."""
        if self.public_classes is None:
            return 0
        declared = set(self.public_classes)
        return sum(1 for y in self.labels if y not in declared)

    @property
    def privacy_unit(self) -> str:
        """The neighbouring relation the guarantees are stated for (one document, or one person)."""
        if self.persons is None:
            return "add/remove one document"
        return f"add/remove all documents of one person (identified by column '{self.person_column or 'person'}')"

    def with_persons(self, persons: Sequence[str] | None, column: str | None = None) -> Corpus:
        """The same corpus with one (private) person identifier per document; ``None`` removes them."""
        return replace(self, persons=None if persons is None else tuple(map(str, persons)),
                       person_column=None if persons is None else (column or self.person_column or "person"))

    def capped_per_person(self, k: int = 1) -> Corpus:
        """Each person's first ``k`` documents in corpus order (all documents without a person column).

        For methods that need whole documents (private prediction, AugPE+Ṽ; docs/DESIGN.md §2, the person unit): with k = 1, adding or
        removing a person changes the capped corpus by at most one document, so a per-document guarantee on it
        is a per-person guarantee (k > 1 would cost k·ε by group privacy)."""
        if self.persons is None:
            return self
        seen: Counter[str] = Counter()
        keep = []
        for i, p in enumerate(self.persons):
            if seen[p] < k:
                keep.append(i)
            seen[p] += 1
        return self.subset(keep)

    def with_classes(self, classes: Sequence[str] | None) -> Corpus:
        """The same corpus with ``classes`` declared as its public class names (``None`` clears them)."""
        return replace(self, public_classes=None if classes is None else check_class_names(classes))

    def declared_only(self) -> Corpus:
        """The documents whose label is a declared class (those that may enter the DP steps)."""
        declared = set(self.classes)
        return self.subset(i for i, y in enumerate(self.labels) if y in declared)

    def subset(self, indices: Iterable[int]) -> Corpus:
        """The documents at ``indices`` (in that order) as a new corpus with the same name, source and classes."""
        idx = [int(i) for i in indices]
        n = len(self.texts)
        if any(i < 0 or i >= n for i in idx):
            raise ParameterError(f"Subset indices must lie between 0 and {n - 1}.")
        return Corpus(
            texts=tuple(self.texts[i] for i in idx),
            labels=tuple(self.labels[i] for i in idx),
            name=self.name,
            source=self.source,
            public_classes=self.public_classes,
            persons=None if self.persons is None else tuple(self.persons[i] for i in idx),
            person_column=self.person_column,
            text_column=self.text_column,
            label_column=self.label_column,
        )


def corpus_summary(corpus: Corpus) -> dict[str, Any]:
    """Counts and length statistics of the PRIVATE corpus (shown locally, never exported)."""
    words = np.array([len(t.split()) for t in corpus.texts], dtype=np.int64)
    return {
        "documents": len(corpus),
        "classes": len(corpus.observed_classes),
        "class_counts": corpus.class_counts,
        "words_min": int(words.min()) if words.size else 0,
        "words_median": float(np.median(words)) if words.size else 0.0,
        "words_mean": float(words.mean()) if words.size else 0.0,
        "words_max": int(words.max()) if words.size else 0,
        "words": words,
    }


def check_class_names(classes: Sequence[str] | str, *, minimum: int = 2) -> tuple[str, ...]:
    """Validate declared public class names: a non-empty list of distinct, non-empty strings (order kept).

    A comma-separated string is split. At least two classes are needed for a labelled synthetic corpus
    (``minimum=1`` where a method runs for a chosen subset of the declared classes)."""
    if isinstance(classes, str):
        classes = [c for c in classes.split(",")]
    names = tuple(str(c).strip() for c in classes)
    if any(not c for c in names):
        raise ParameterError("Public class names must not be empty; remove the empty entry from the class list.")
    dupes = sorted({c for c in names if names.count(c) > 1})
    if dupes:
        raise ParameterError(f"The class list names {dupes[0]!r} twice; list each public class once.")
    if not names:
        raise ParameterError("Declare at least one public class name.")
    if len(names) < minimum:
        raise ParameterError(
            "Declare at least two public class names: a synthetic corpus of one class needs no labels. "
            "Add the other classes to the list."
        )
    return names


def require_declared(corpus: Corpus) -> Corpus:
    """Refuse a corpus without declared public classes, with the labels found in it as a LOCAL suggestion: the
    data owner reads them on their own terminal; nothing is released or spent."""
    if not corpus.declared:
        found = corpus.observed_classes
        shown = ", ".join(found[:20]) + (f" … ({len(found)} in all)" if len(found) > 20 else "")
        raise ParameterError(
            "Declare the public class names with --classes a,b,c or --classes-file FILE: they are released with "
            f"the synthetic data, so they must be public. Labels found in your file (private, shown only to you): "
            f"{shown}."
        )
    return corpus
