"""A release's rows as precomputed unit keys: fixed-size keyed digests instead of unit strings (issue 31; docs/DESIGN.md
§2.0 "Every key a release could touch is charged, and checked").

The ledger keys a unit string's parts — a row's document key string ``document␟<normalised text>`` and, with a
person column, its person key string ``person␟<id>`` (:mod:`~dpkps_core.ledger_store.rules`) — by the keyed
HMAC-SHA256 of :class:`~dpkps_core.ledger_store.folder._UnitHasher`, and keeps only those 32-byte keys. A corpus
streamed from a file (:class:`~dpkps_core.method.training_source.StreamedCorpus`) need not keep its unit strings
(about the size of its texts) until the ledger hashes them: it hashes each chunk's key strings as it reads them
and keeps one 32-byte document key per row, one person key per person and one person code per row. A
:class:`UnitKeys` holds exactly that and is admitted like the strings it stands for: ``rules.keyed_rows`` builds
from it the same rows over the same distinct keys as from the strings, so both give the same admission, the same
charges and the same ledger rows (tested).

Keys only mean something under the ledger key they were made with: a :class:`UnitKeys` carries :attr:`UnitKeys.check`
(the keying of a fixed public probe string under that key), and a store refuses keys made under another key
(they would name units the store never saw: fresh budgets). Like the strings, the keys are PRIVATE (a hash of
private data is not DP): never log, show, write or export them.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np

from dpkps_core.errors import ParameterError
from dpkps_core.ledger_store.folder import KEY_BYTES
from dpkps_core.ledger_store.rules import DOCUMENT_KIND, PERSON_KIND, is_key_source, split_units

KEY_DTYPE = f"S{KEY_BYTES}"
#: A public string keyed to recognise the ledger key a :class:`UnitKeys` was made under (never a unit: no unit
#: string lacks the ``document␟`` / ``person␟`` prefix of :mod:`~dpkps_core.ledger_store.rules` and holds a NUL).
_PROBE = "dpkps unit-keys probe v1\x00"

KeysOf = Callable[[list[str]], np.ndarray]


def key_check(keys_of: KeysOf) -> bytes:
    """What identifies the keying ``keys_of`` (a ledger store's :meth:`~dpkps_core.ledger_store.LedgerStore.keys`):
    the key of a fixed public probe string under it (PRIVATE: kept in memory beside the keys, never shown)."""
    probe = np.asarray(keys_of([_PROBE]))
    if probe.shape != (1,) or probe.dtype != np.dtype(KEY_DTYPE):
        raise ParameterError(f"A unit keying gives one {KEY_BYTES}-byte key per string.")
    return probe.tobytes()


@dataclasses.dataclass(frozen=True, eq=False)
class UnitKeys:
    """One release's (or one corpus's) rows as keys (PRIVATE; see the module docstring).

    ``kind``: ``"document"`` (each row is its document key, linked to its person's key when ``persons`` is given) or
    ``"person"`` (each row counts as its person, linked to its document key) — the rows that
    :func:`dpkps_core.ledger_store.units.unit_strings` writes as ``document␟t[␞person␟p]`` and
    ``person␟p␞document␟t``.
    ``documents``: per row, the key of its document key string (``S32``); ``persons``: per person code, the key of
    its person key string; ``person_of``: per row, its person code (``int64``); ``check``: :func:`key_check` of the
    keying that made them. Memory: 32 bytes per row, 32 per person and 8 per row with persons."""

    kind: str
    documents: np.ndarray
    persons: np.ndarray | None
    person_of: np.ndarray | None
    check: bytes = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        if self.kind not in (DOCUMENT_KIND, PERSON_KIND):
            raise ParameterError(f"Unit keys are of kind 'document' or 'person', got {self.kind!r}.")
        if not isinstance(self.documents, np.ndarray) or self.documents.dtype != np.dtype(KEY_DTYPE) \
                or self.documents.ndim != 1:
            raise ParameterError(f"Unit keys hold one {KEY_BYTES}-byte document key per row (an {KEY_DTYPE} array).")
        if (self.persons is None) != (self.person_of is None):
            raise ParameterError("Unit keys with persons need both the persons' keys and each row's person code.")
        if self.persons is None and self.kind == PERSON_KIND:
            raise ParameterError("Person-unit keys need the persons' keys.")
        if self.persons is not None:
            assert self.person_of is not None
            if not isinstance(self.persons, np.ndarray) or self.persons.dtype != np.dtype(KEY_DTYPE) \
                    or self.persons.ndim != 1:
                raise ParameterError(f"Unit keys hold one {KEY_BYTES}-byte key per person (an {KEY_DTYPE} array).")
            if not isinstance(self.person_of, np.ndarray) or self.person_of.shape != self.documents.shape \
                    or self.person_of.dtype.kind not in "iu":
                raise ParameterError("Unit keys hold one integer person code per row.")
            if len(self.person_of) and (int(self.person_of.min()) < 0 or
                                        int(self.person_of.max()) >= len(self.persons)):
                raise ParameterError("A row's person code names no person of these unit keys.")
        if not isinstance(self.check, bytes) or len(self.check) != KEY_BYTES:
            raise ParameterError("Unit keys carry the check of the keying that made them.")

    def __len__(self) -> int:
        return len(self.documents)

    def __repr__(self) -> str:  # sizes only: never a key
        persons = "" if self.persons is None else f", persons={len(self.persons)}"
        return f"UnitKeys(kind={self.kind!r}, rows={len(self)}{persons})"

    def take(self, index: np.ndarray | Sequence[int]) -> "UnitKeys":
        """The rows at ``index`` (in that order), as a release on them admits them."""
        index = np.asarray(index, dtype=np.int64)
        return UnitKeys(self.kind, self.documents[index], self.persons,
                        None if self.person_of is None else self.person_of[index], self.check)

    def keys_under(self, keys_of: KeysOf) -> "UnitKeys":
        """These keys, after checking that they were made by the keying ``keys_of`` (a store's); keys made under
        another ledger key are refused (:class:`~dpkps_core.errors.ParameterError`: they would name other units)."""
        if key_check(keys_of) != self.check:
            raise ParameterError("These unit keys were made under another ledger's key; key the corpus again with "
                                 "this ledger's store. Nothing was spent.")
        return self

    def row_keys(self) -> tuple[np.ndarray, np.ndarray | None]:
        """(each row's unit key, each row's linked key or None) in the order ``rules.keyed_rows`` hashes the strings:
        the document key then the person key for a document row, the person key then the document key for a person
        row."""
        if self.persons is None:
            return self.documents, None
        assert self.person_of is not None
        persons = self.persons[self.person_of]
        return (self.documents, persons) if self.kind == DOCUMENT_KIND else (persons, self.documents)


@runtime_checkable
class KeySource(Protocol):
    """Anything a ledger admits in place of unit strings (``rules.is_key_source``): it has a length (its rows) and
    gives its :class:`UnitKeys` under a store's keying (``keys_under``), computing them if need be (a streamed
    corpus keys itself by one pass over its file). :class:`UnitKeys` is one."""

    def __len__(self) -> int: ...

    def keys_under(self, keys_of: KeysOf) -> UnitKeys: ...


class UnitKeysBuilder:
    """:class:`UnitKeys` made chunk by chunk (the streamed corpus's passes): :meth:`add_documents` keys a chunk's
    document key strings, :meth:`add_persons` the key strings of the persons first seen in it (in code order);
    :meth:`build` joins them. Holds 32 bytes per row and per person, never a string past its chunk."""

    def __init__(self, keys_of: KeysOf, *, kind: str, with_persons: bool) -> None:
        if kind not in (DOCUMENT_KIND, PERSON_KIND):
            raise ParameterError(f"Unit keys are of kind 'document' or 'person', got {kind!r}.")
        if kind == PERSON_KIND and not with_persons:
            raise ParameterError("Person-unit keys need the persons.")
        self._keys_of = keys_of
        self.kind = kind
        self.with_persons = bool(with_persons)
        self.check = key_check(keys_of)
        self._documents: list[np.ndarray] = []
        self._persons: list[np.ndarray] = []

    def _keys(self, strings: list[str]) -> np.ndarray:
        keys = np.asarray(self._keys_of(strings))
        if keys.shape != (len(strings),) or keys.dtype != np.dtype(KEY_DTYPE):
            raise ParameterError(f"A unit keying gives one {KEY_BYTES}-byte key per string.")
        return keys

    def add_documents(self, key_strings: list[str]) -> None:
        """Key one chunk's document key strings (``document␟<normalised text>``, one per row, in row order)."""
        if key_strings:
            self._documents.append(self._keys(key_strings))

    def add_persons(self, key_strings: list[str]) -> None:
        """Key the person key strings (``person␟<id>``) of the persons a chunk names first, in code order."""
        if key_strings:
            self._persons.append(self._keys(key_strings))

    def build(self, person_of: np.ndarray | None) -> UnitKeys:
        """The keys of every row added (``person_of``: each row's person code, with persons)."""
        documents = np.concatenate(self._documents) if self._documents else np.empty(0, dtype=KEY_DTYPE)
        self._documents = []
        persons = None
        if self.with_persons:
            persons = np.concatenate(self._persons) if self._persons else np.empty(0, dtype=KEY_DTYPE)
            if person_of is None:
                raise ParameterError("Unit keys with persons need each row's person code.")
        self._persons = []
        return UnitKeys(self.kind, documents, persons,
                        None if persons is None else np.asarray(person_of, dtype=np.int64), self.check)


def primary_keys(units: Sequence[str] | KeySource, keys_of: KeysOf) -> np.ndarray:
    """Each row's unit key under ``keys_of`` (its document key, or its person key under the person unit), whether
    the rows come as unit strings or as keys — what one row is to the filter (tests, and ledgers that decide per
    row)."""
    if is_key_source(units):
        return units.keys_under(keys_of).row_keys()[0]  # type: ignore[union-attr]
    _, heads, _ = split_units(units)  # type: ignore[arg-type]
    return np.asarray(keys_of(heads))
