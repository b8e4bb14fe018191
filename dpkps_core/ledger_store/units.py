"""What identifies a row to the privacy ledger (docs/DESIGN.md §2.0): its unit string — ``document␟<normalised
text>`` for a document, ``person␟<id>`` for a person, the two linked (``␞``) when the corpus has a person column — which
the ledger only ever HMAC-es (:mod:`dpkps_core.ledger_store.unit_keys`). PRIVATE: never logged, shown or written.

The rules that read these strings (which part is charged, which is linked) are :mod:`dpkps_core.ledger_store.rules`;
the method's admission of a release's rows (:mod:`dpkps_core.method.budget`) builds them here."""

from __future__ import annotations

from typing import Any, Sequence

from dpkps_core.corpus.cleaning import normalise_document_text
from dpkps_core.ledger_store.rules import LINK_SEP as _LINK
from dpkps_core.ledger_store.rules import UNIT_SEP as _SEP
from dpkps_core.ledger_store.rules import primary_unit


def document_key_string(text: str) -> str:
    """A row's document key string (docs/DESIGN.md §2.0): ``document␟`` and the text as
    :func:`~dpkps_core.corpus.cleaning.normalise_document_text` reads it (PRIVATE; only ever HMAC-ed by the ledger)."""
    return f"document{_SEP}{normalise_document_text(text)}"


def person_key_string(person: str) -> str:
    """A person's key string: ``person␟`` and the person id (PRIVATE; only ever HMAC-ed by the ledger)."""
    return f"person{_SEP}{person}"


def unit_strings(corpus: Any, *, by_person: bool) -> list[str]:
    """One identifying string per document of ``corpus`` (PRIVATE; only ever HMAC-ed by the ledger).

    Document unit: the document key string, linked to the row's person when the corpus has a person column.
    Person unit: the person key string, linked to the row's document key string (the person's documents share the
    person key; each row's own key is charged what the release can cost that row)."""
    if by_person:
        if corpus.persons is None:
            raise ValueError("The privacy unit is a person, but the corpus has no person column.")
        return [f"{person_key_string(p)}{_LINK}{document_key_string(t)}" for p, t in zip(corpus.persons, corpus.texts)]
    if corpus.persons is not None:
        return [f"{document_key_string(t)}{_LINK}{person_key_string(p)}" for t, p in zip(corpus.texts, corpus.persons)]
    return document_units(corpus.texts, corpus.labels)


def document_units(texts: Sequence[str], labels: Sequence[str]) -> list[str]:
    """The document-unit strings (docs/DESIGN.md §2.0) of a plain list of documents (labels are checked for length but,
    by the unit rules, are no part of a document's key), as :func:`unit_strings` makes them for a corpus without a
    person column (PRIVATE; only ever HMAC-ed by the ledger)."""
    if len(texts) != len(labels):
        raise ValueError("document_units needs one label per text.")
    return [document_key_string(t) for t in texts]


def release_unit(unit: str) -> str:
    """The unit a row's string stands for in its release: its person for a person-unit row, its document for a
    document-unit row (what a count of distinct units counts)."""
    return primary_unit(unit)
