"""Per-unit budgets at release time: which documents take part in a release (DESIGN §2.0).

The ledger is an individual privacy filter (Feldman & Zrnic, NeurIPS 2021): every release first asks the ledger
which of its input's units still have budget for its ε (:meth:`~dpkps_core.dp.ledger.PrivacyLedger.admit`,
which charges them at once), then runs on those units only. A unit is one document, or all the documents of one
person when the privacy unit is a person.

The unit strings built here never leave the process: the persistent ledger stores only keyed HMACs of them.
"""

from __future__ import annotations

import dataclasses
import unicodedata
from typing import Sequence

import numpy as np

from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger

_SEP = "\x1f"


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(str(text).split()))


def unit_strings(corpus: Corpus, *, by_person: bool) -> list[str]:
    """One identifying string per document of ``corpus`` (PRIVATE; only ever HMAC-ed by the ledger).

    Document unit: the normalised text and the label (identical rows have already collapsed into one document
    at load time, so each document is one unit). Person unit: the person id, shared by all their documents."""
    if by_person:
        if corpus.persons is None:
            raise ValueError("The privacy unit is a person, but the corpus has no person column.")
        return [f"person{_SEP}{p}" for p in corpus.persons]
    return document_units(corpus.texts, corpus.labels)


def document_units(texts: Sequence[str], labels: Sequence[str]) -> list[str]:
    """The document-unit strings (DESIGN §2.0) of a plain list of documents and their labels, as
    :func:`unit_strings` makes them for a corpus (PRIVATE; only ever HMAC-ed by the ledger)."""
    if len(texts) != len(labels):
        raise ValueError("document_units needs one label per text.")
    return [f"document{_SEP}{_normalise(t)}{_SEP}{lab}" for t, lab in zip(texts, labels)]


@dataclasses.dataclass(frozen=True)
class Admission:
    """A release's admitted input: the documents whose units had budget left (and were charged for it), and
    how many documents were left out (a PRIVATE, local count: show it to the data owner, never release it)."""

    corpus: Corpus
    left_out: int


def admit(corpus: Corpus, ledger: PrivacyLedger, epsilon: float, *, by_person: bool,
          what: str = "this release") -> Admission:
    """Charge-first admission of ``corpus``'s units to a release of ``epsilon`` (see the module docstring).

    Call it before computing any statistic of ``corpus`` for the release and before drawing noise; then compute
    the release from ``Admission.corpus`` only."""
    mask = np.asarray(ledger.admit(unit_strings(corpus, by_person=by_person), float(epsilon), what=what), dtype=bool)
    if mask.shape != (len(corpus),):
        raise ValueError("The ledger's admission mask does not match the release's input.")
    if mask.all():
        return Admission(corpus, 0)
    return Admission(corpus.subset(np.flatnonzero(mask).tolist()), int((~mask).sum()))


def admitted_indices(units: Sequence[str], ledger: PrivacyLedger, epsilon: float, *,
                     what: str = "this release") -> np.ndarray:
    """Indices of the admitted positions of ``units`` (for inputs that are not a :class:`Corpus`)."""
    return np.flatnonzero(np.asarray(ledger.admit(list(units), float(epsilon), what=what), dtype=bool))
