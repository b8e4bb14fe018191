"""The ledger's unit rules (docs/DESIGN.md §2.0 "Every key a release could touch is charged, and checked"; docs/PRIVACY.md
"Units and group privacy"): which keys one release charges, how much, and which rows it leaves out.

A release's input is one *unit string* per row (:func:`dpkps_core.ledger_store.units.unit_strings`):

* ``document␟<text>`` — a row of a document-unit release; ``document␟<text>␞person␟<id>`` when the corpus has a
  person column (the person is then *known*: the release counts toward that person by group privacy);
* ``person␟<id>␞document␟<text>`` — a row of a person-unit release;
* anything else (``person␟<id>`` alone, or an opaque string) — a plain unit: distinct strings are the units, each
  charged ε once (the previous behaviour, kept for inputs with no document behind them).

(␟ = U+001F, ␞ = U+001E; a normalised text never holds either, since both count as whitespace.)

Every key holds ``spent`` and ``direct``. For a document key, ``spent`` is the loss of the text's rows (every
release that used one: ε per row of a document-unit release, f·ε per row of a person-unit release) and ``direct``
the part of it from document-unit releases that did not know the row's person (*unattributed*). For a person key,
``spent`` is the person-unit releases the person took part in (ε each) and ``direct`` the document-unit releases
that knew the person (ε per row of theirs: group privacy, k rows → kε). A person's loss is

    L(p) = spent[p] + direct[p] + Σ direct[k]   over the distinct document keys k of the person's rows at hand,

which counts every release that knew the person once, and each unattributed release of the rows at hand (a key
shared with someone else's row only makes the bound larger); what no release linked to the person (a row never
seen with its person id, in a corpus not at hand) cannot be counted — docs/PRIVACY.md says so.

The decision (one vectorised pass, no iteration) for a release of ``ε`` with per-row factor ``f`` (≤ 2, the most
a person-unit release can cost one row of the person; PRIVACY.md derives it per mechanism):

* **document-unit**: each document key ``k`` would be charged ``c[k] = ε × (its rows in the release)``; a row takes
  part iff ``spent[k] + c[k] ≤ cap[k]`` and, when its person ``p`` is known, ``L(p) + ε × (p's rows in the
  release) ≤ cap[p]``. Charged per row that takes part: ``spent[k] += ε``, and ``direct[p] += ε`` (person known)
  or ``direct[k] += ε`` (not known).
* **person-unit**: each document key would be charged ``c[k] = f·ε × (its rows in the release)``; a person takes
  part iff ``L(p) + ε ≤ cap[p]`` and every document key of their rows fits (``spent[k] + c[k] ≤ cap[k]``).
  Charged: ``spent[p] += ε``, and ``spent[k] += f·ε`` per row of a person who takes part.

Leaving rows out only lowers the charges each check assumed, so after the release every key that was charged is
within its cap. A row's or a person's decision reads only their own keys (and the charges this release puts on
those keys: rows that share a text, under another label or another person, are one group for their key).
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from typing import Callable, Sequence

import numpy as np

from dpkps_core.dp.ledger import MAX_ROW_FACTOR, within_cap
from dpkps_core.errors import ParameterError
from dpkps_core.ledger_store.folder import unique_keys

UNIT_SEP = "\x1f"
LINK_SEP = "\x1e"
DOCUMENT_PREFIX = "document" + UNIT_SEP
PERSON_PREFIX = "person" + UNIT_SEP

DOCUMENT_KIND = "document"
PERSON_KIND = "person"


@dataclasses.dataclass(frozen=True)
class ReleaseRows:
    """A release's rows (their key strings are PRIVATE: only ever HMAC-ed).

    ``kind`` is ``"document"`` (rows charged per row on their document key, ``person`` the known person or None)
    or ``"person"`` (``person`` the unit; ``document`` the row's document key string or None for a plain unit).
    ``document`` / ``person`` index the release's distinct keys per row (−1: none); ``strings`` are the distinct key
    strings in that order from :func:`parse_rows` (empty from :func:`keyed_rows`, which indexes the sorted keys, and
    from :func:`plain_rows`)."""

    kind: str
    strings: tuple[str, ...]
    document: np.ndarray
    person: np.ndarray

    def __len__(self) -> int:
        return len(self.document)

    @property
    def primary(self) -> np.ndarray:
        """Per row, the index of the release's unit key (the document key, or the person key)."""
        return self.document if self.kind == DOCUMENT_KIND else self.person


def primary_unit(unit: str) -> str:
    """The unit a row stands for in its release (the part before the link, or the whole string)."""
    if unit.startswith(DOCUMENT_PREFIX):
        return unit.partition(LINK_SEP)[0]
    head, sep, link = unit.rpartition(LINK_SEP)
    return head if sep and link.startswith(DOCUMENT_PREFIX) else unit


def split_units(units: Sequence[str]) -> tuple[str, list[str], list[str] | None]:
    """(kind, each row's unit string, each row's linked string — "" where none; None when no row is linked), at C
    speed but for a release that mixes linked and plain person rows (then row by row). Each string is read where it
    is: no copy of the whole input is made (a link is looked for string by string)."""
    units = list(units)
    try:
        linked = any(map(operator.contains, units, itertools.repeat(LINK_SEP)))
        documents = sum(map(str.startswith, units, itertools.repeat(DOCUMENT_PREFIX)))
    except TypeError:
        raise ParameterError("A privacy unit is identified by a string (dpkps_core.ledger_store.units.unit_strings).") from None
    if 0 < documents < len(units):
        raise ParameterError("One release mixes document-unit and person-unit rows; admit each unit separately.")
    kind = DOCUMENT_KIND if documents or not units else PERSON_KIND
    if not linked:  # the common case (no person column): every row is its own key string
        return kind, units, None
    split = str.partition if kind == DOCUMENT_KIND else str.rpartition
    parts = list(map(split, units, itertools.repeat(LINK_SEP)))
    heads, links = list(map(operator.itemgetter(0), parts)), list(map(operator.itemgetter(2), parts))
    if kind == PERSON_KIND and not (all(heads) and all(map(str.startswith, links,
                                                          itertools.repeat(DOCUMENT_PREFIX)))):
        for i, (head, link) in enumerate(zip(heads, links)):
            if not (head and link.startswith(DOCUMENT_PREFIX)):  # a plain unit: the whole string, no link
                heads[i], links[i] = units[i], ""
    return kind, heads, links


def _rows(kind: str, primary: np.ndarray, other: np.ndarray, strings: tuple[str, ...] = ()) -> ReleaseRows:
    if kind == DOCUMENT_KIND:
        return ReleaseRows(kind, strings, primary, other)
    return ReleaseRows(kind, strings, other, primary)


def parse_rows(units: Sequence[str]) -> ReleaseRows:
    """Parse one unit string per row (module docstring), indexing the distinct key strings in first-seen order. A
    release is all document rows or all person/plain rows; a mix is a programming error (:class:`ParameterError`)."""
    kind, heads, links = split_units(units)
    n = len(heads)
    distinct_strings = dict.fromkeys(heads if links is None else itertools.chain(heads, filter(None, links)))
    index_of = dict(zip(distinct_strings, range(len(distinct_strings))))
    index_of[""] = -1
    primary = np.fromiter(map(index_of.__getitem__, heads), dtype=np.int64, count=n)
    other = (np.full(n, -1, dtype=np.int64) if links is None
             else np.fromiter(map(index_of.__getitem__, links), dtype=np.int64, count=n))
    return _rows(kind, primary, other, tuple(distinct_strings))


def is_key_source(units: object) -> bool:
    """Whether ``units`` come as precomputed keys (:class:`~dpkps_core.ledger_store.unit_keys.KeySource`: a
    :class:`~dpkps_core.ledger_store.unit_keys.UnitKeys`, or a streamed corpus's units) rather than unit strings."""
    return callable(getattr(units, "keys_under", None)) and not isinstance(units, (str, bytes, list, tuple))


def keyed_rows(units: Sequence[str] | object, keys_of: Callable[[list[str]], np.ndarray]
               ) -> tuple[ReleaseRows, np.ndarray]:
    """:func:`parse_rows` for the store: the rows index the distinct KEYS (``keys_of`` of the key strings, sorted;
    the keyed HMAC), hashing each row's strings once and de-duplicating the keys by one sort — no index of the
    (long, private) strings is built. Returns (rows, distinct keys).

    ``units`` may also be precomputed keys (:func:`is_key_source`; issue 31): their keys under ``keys_of`` (refused
    when made under another ledger key) stand for the strings' — the rows and keys returned are those of the
    strings they were made from, row for row."""
    if is_key_source(units):
        made = units.keys_under(keys_of)  # type: ignore[attr-defined]
        heads_keys, links_keys = made.row_keys()
        n = len(heads_keys)
        if links_keys is None:
            keys, inverse = unique_keys(heads_keys)
            return _rows(made.kind, inverse.astype(np.int64), np.full(n, -1, dtype=np.int64)), keys
        keys, inverse = unique_keys(np.concatenate([heads_keys, links_keys]))
        return _rows(made.kind, inverse[:n].astype(np.int64), inverse[n:].astype(np.int64)), keys
    kind, heads, links = split_units(units)  # type: ignore[arg-type]
    n = len(heads)
    if links is None:
        keys, inverse = unique_keys(keys_of(heads))
        return _rows(kind, inverse.astype(np.int64), np.full(n, -1, dtype=np.int64)), keys
    has = np.fromiter(map(bool, links), dtype=bool, count=n)
    keys, inverse = unique_keys(keys_of(heads + list(filter(None, links))))
    other = np.full(n, -1, dtype=np.int64)
    other[has] = inverse[n:]
    return _rows(kind, inverse[:n].astype(np.int64), other), keys


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array, sorted (a sort and a comparison: faster than ``np.unique`` here)."""
    if values.size == 0:
        return values
    s = np.sort(values)
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def plain_rows(n: int) -> ReleaseRows:
    """``n`` distinct plain units (one row each, charged ε once): the rows of a charge to a set of keys."""
    return ReleaseRows(PERSON_KIND, (), np.full(n, -1, dtype=np.int64), np.arange(n, dtype=np.int64))


def check_row_factor(factor: float) -> float:
    """The per-row factor of a person-unit release: a number in [1, 2] (PRIVACY.md "Units and group privacy")."""
    if isinstance(factor, bool) or not isinstance(factor, (int, float, np.floating)) or \
            not 1.0 <= float(factor) <= MAX_ROW_FACTOR:
        raise ParameterError(f"A person-unit release costs each row of a person between 1 and 2 times its ε, got "
                             f"{factor!r}.")
    return float(factor)


def person_losses(rows: ReleaseRows, spent: np.ndarray, direct: np.ndarray) -> np.ndarray:
    """``L(p)`` per key (meaningful at person keys; module docstring) from the rows' (person, document) links."""
    n = len(spent)
    loss = np.zeros(n, dtype=np.float64)
    linked = (rows.person >= 0) & (rows.document >= 0)
    if linked.any():
        pairs = distinct(rows.person[linked] * n + rows.document[linked])
        loss += np.bincount(pairs // n, weights=direct[pairs % n], minlength=n)
    persons = np.bincount(rows.person[rows.person >= 0], minlength=n) > 0
    loss[persons] += spent[persons] + direct[persons]
    return loss


def decide(rows: ReleaseRows, spent: np.ndarray, caps: np.ndarray, direct: np.ndarray, *, epsilon: float,
           row_factor: float, force: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The filter's decision for one release (module docstring), over the distinct keys of ``rows`` (``spent``,
    ``caps``, ``direct`` one entry per key). Returns (row mask, Δspent, Δdirect) per key. ``force`` admits every
    row (a release that did not filter its input): it is charged all the same."""
    n = len(spent)
    doc, per = rows.document, rows.person
    has_doc, has_per = doc >= 0, per >= 0
    if rows.kind == DOCUMENT_KIND:
        charge = np.bincount(doc, minlength=n) * epsilon
        ok = within_cap(spent[doc], charge[doc], caps[doc])
        if has_per.any():
            extra = np.bincount(per[has_per], minlength=n) * epsilon
            loss = person_losses(rows, spent, direct)
            ok[has_per] &= within_cap(loss, extra, caps)[per[has_per]]
        if force:
            ok[:] = True
        d_spent = np.bincount(doc[ok], minlength=n) * epsilon
        d_direct = (np.bincount(per[ok & has_per], minlength=n) + np.bincount(doc[ok & ~has_per], minlength=n)) \
            * epsilon
        return ok, d_spent, d_direct
    per_row = row_factor * epsilon
    charge = np.bincount(doc[has_doc], minlength=n) * per_row
    loss = person_losses(rows, spent, direct)
    person_ok = within_cap(loss, epsilon, caps)
    bad_rows = has_doc.copy()
    bad_rows[has_doc] = ~within_cap(spent[doc[has_doc]], charge[doc[has_doc]], caps[doc[has_doc]])
    person_ok[per[bad_rows]] = False
    ok = person_ok[per]
    if force:
        ok[:] = True
    d_spent = np.zeros(n, dtype=np.float64)
    d_spent += (np.bincount(per[ok], minlength=n) > 0) * epsilon
    d_spent += np.bincount(doc[ok & has_doc], minlength=n) * per_row
    return ok, d_spent, np.zeros(n, dtype=np.float64)
