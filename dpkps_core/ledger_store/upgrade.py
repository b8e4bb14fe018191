"""Upgrade a version-1 ledger store to version 2, one corpus at a time (docs/DESIGN.md §2.0; issue 35 part 7).

Version 1 kept a document's budget under a key of its text AND label (a relabelled text opened a fresh budget);
version 2 keys a document by its text alone (and refuses a version-1 store, never resetting it). The keys are
HMACs, so a version-1 spend can be carried over only for a corpus whose documents are at hand:
``python -m dpkps_core ledger upgrade --corpus SPEC`` (:func:`upgrade_v1`):

1. the version-1 store is moved aside, whole, into ``ledger-v1/`` of the same folder (kept: it is the record of what
   was spent), and a version-2 store is started beside it under the same secret key;
2. each document of the corpus carries the SUM of what its text spent under every label in version 1 (the texts
   that shared a key in version 2 were separate budgets then, each of them spent: group privacy), each person id its
   version-1 spend; each key takes the smallest version-1 cap among the keys it merges;
3. the carried spend is one recorded release per distinct value ("carried over from ledger v1"), and a corpus is
   carried over once (a second run for the same documents is refused: it would charge them twice).

Never underestimates: a text relabelled in version 1 is charged all its labels' spend. Documents the command is not
given keep nothing from version 1 — the command says how many of the corpus's units it carried.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np

from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.ledger_store.folder import (CHUNK, FORMAT, KEY_BYTES, STORE_FILE, _UnitHasher,
                                            _read_or_create_key, ledger_root)
from dpkps_core.ledger_store.rules import DOCUMENT_KIND, UNIT_SEP, ReleaseRows, plain_rows
from dpkps_core.ledger_store.sqlite_store import folder_lock
from dpkps_core.ledger_store.store import LedgerStore
from dpkps_core.ledger_store.units import document_units


V1_FOLDER = "ledger-v1"
_WHAT = "carried over from ledger v1"


@dataclasses.dataclass(frozen=True)
class UpgradeResult:
    """What an upgrade carried (PRIVATE, local counts: they depend on which documents the corpus holds)."""

    units: int           # the corpus's documents (persons) given
    carried: int         # of them, those with a version-1 spend carried over
    largest: float       # the largest ε carried to one of them
    moved: bool          # this call moved the version-1 store aside
    ledger_id: str       # the version-2 ledger's id (never its path)


def _v1_text(text: str) -> str:
    """Version 1's normalisation of a document's text (NFC, whitespace collapsed)."""
    return unicodedata.normalize("NFC", " ".join(str(text).split()))


def _version(path: Path) -> str | None:
    """The format version of the store at ``path`` (None when it is not a ledger store)."""
    if not path.is_file():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return str(meta.get("version")) if meta.get("format") == FORMAT else None


def _move_v1_aside(root: Path) -> bool:
    """Move a version-1 store (its WAL folded in first) into ``ledger-v1/``; False when there is none to move."""
    with folder_lock(root):
        path = root / STORE_FILE
        if _version(path) != "1":
            return False
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()
        target = root / V1_FOLDER
        target.mkdir(mode=0o700, exist_ok=True)
        if (target / STORE_FILE).exists():
            raise PrivacyBudgetError(f"{target / STORE_FILE} exists already; move one of the two version-1 stores out "
                                     "of the ledger folder yourself. Nothing was changed.")
        os.replace(path, target / STORE_FILE)
        for extra in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(root / (STORE_FILE + extra))
        return True


def _read_v1(path: Path, check: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The version-1 store's keys (sorted), their spend and caps, in key order."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        meta = dict(conn.execute("SELECT name, value FROM meta").fetchall())
        if meta.get("format") != FORMAT or str(meta.get("version")) != "1":
            raise PrivacyBudgetError(f"{path} is not a version-1 ledger store; nothing was changed.")
        if meta.get("key_check") != check:
            raise PrivacyBudgetError(f"The ledger key does not belong to the version-1 store {path}; restore the "
                                     "matching key. Nothing was changed.")
        n = int(meta["units"])
        keys, spent, caps = [], [], []
        for chunk in range((n + CHUNK - 1) // CHUNK):
            count = min(CHUNK, n - chunk * CHUNK)
            parts = []
            for table, column, size in (("unit_keys", "keys", KEY_BYTES), ("unit_spent", "spent", 8),
                                        ("unit_caps", "caps", 8)):
                row = conn.execute(f"SELECT {column} FROM {table} WHERE chunk = ?", (chunk,)).fetchone()
                if row is None or len(row[0]) != count * size:
                    raise sqlite3.DatabaseError(f"malformed {table} chunk {chunk}")
                parts.append(row[0])
            keys.append(np.frombuffer(parts[0], dtype=f"S{KEY_BYTES}"))
            spent.append(np.frombuffer(parts[1], dtype="<f8"))
            caps.append(np.frombuffer(parts[2], dtype="<f8"))
    except (sqlite3.Error, KeyError, ValueError) as exc:
        raise PrivacyBudgetError(f"The version-1 ledger store {path} is damaged or unreadable ({exc}); restore it "
                                 "from a backup. Nothing was changed.") from None
    finally:
        conn.close()
    if not keys:
        empty = np.empty(0, dtype=np.float64)
        return np.empty(0, dtype=f"S{KEY_BYTES}"), empty, empty
    k, s, c = np.concatenate(keys), np.concatenate(spent), np.concatenate(caps)
    order = np.argsort(k, kind="stable")
    return k[order], s[order].astype(np.float64), c[order].astype(np.float64)


def _lookup(sorted_keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Positions of ``queries`` in ``sorted_keys`` (−1 where absent)."""
    if not len(sorted_keys):
        return np.full(len(queries), -1, dtype=np.int64)
    pos = np.searchsorted(sorted_keys, queries)
    pos = np.minimum(pos, len(sorted_keys) - 1)
    return np.where(sorted_keys[pos] == queries, pos, -1)


def _carry(store: LedgerStore, keys: np.ndarray, spend: np.ndarray, caps: np.ndarray, rows: ReleaseRows | None,
           *, tool: str, what: str, new_cap: float | None) -> None:
    """Charge each distinct key its ``spend`` (one forced release per distinct value), then set the caps."""
    for value in np.unique(spend[spend > 0]):
        sel = np.flatnonzero(spend == value)
        part = None if rows is None else ReleaseRows(rows.kind, (), np.arange(len(sel), dtype=np.int64),
                                                     np.full(len(sel), -1, dtype=np.int64))
        store.admit(keys[sel], float(value), new_cap=new_cap, tool=tool, run=None, what=what, force=True,
                    rows=part if part is not None else plain_rows(len(sel)))
    finite = np.isfinite(caps)
    for cap in np.unique(caps[finite]):
        store.set_cap(keys[finite & (caps == cap)], float(cap), tool=tool)


def upgrade_v1(corpus: Any, *, root: str | os.PathLike[str] | None = None, by_person: bool | None = None,
               tool: str = "cli ledger upgrade", new_cap: float | None = None) -> UpgradeResult:
    """Carry the version-1 spend of ``corpus``'s documents (persons) into a version-2 store in the same ledger folder
    (module docstring). Refused when the folder holds no version-1 store, or this corpus was carried over before."""
    folder = ledger_root() if root is None else ledger_root({"DPKPS_LEDGER_DIR": os.fspath(root)})
    moved = _move_v1_aside(folder)
    v1_path = folder / V1_FOLDER / STORE_FILE
    if not v1_path.is_file():
        raise ParameterError(f"There is no version-1 ledger store to upgrade in {folder} (nor in {V1_FOLDER}/ there).")
    hasher = _UnitHasher(_read_or_create_key(folder, may_create=False))
    v1_keys, v1_spent, v1_caps = _read_v1(v1_path, hasher.check)
    person = getattr(corpus, "persons", None) is not None if by_person is None else bool(by_person)
    texts, labels = list(corpus.texts), list(corpus.labels)
    old_doc = hasher.keys([f"document{UNIT_SEP}{_v1_text(t)}{UNIT_SEP}{lab}" for t, lab in zip(texts, labels)])
    store = LedgerStore(folder)
    marker = hashlib.sha256(b"".join(sorted(set(old_doc.tolist())))).hexdigest()[:16]
    what = f"{_WHAT} (corpus {marker})"
    seen = [document_units(texts, labels)] + ([[f"person{UNIT_SEP}{p}" for p in corpus.persons]] if person else [])
    if any(r.what == what for r in store.view(np.unique(store.keys([u for part in seen for u in part])),
                                              new_unit_cap=None).releases):
        raise ParameterError("This corpus was carried over from the version-1 ledger already; carrying it again would "
                             "charge its documents twice. Nothing was changed.")
    # documents: a text's version-2 key carries the sum over its version-1 keys (one per label it had)
    new_doc = store.keys(document_units(texts, labels))
    at = _lookup(v1_keys, old_doc)
    uniq, inverse = np.unique(new_doc, return_inverse=True)
    pairs = {(int(i), int(a)) for i, a in zip(inverse, at) if a >= 0}
    spend = np.zeros(len(uniq))
    caps = np.full(len(uniq), np.inf)
    for i, a in pairs:
        spend[i] += v1_spent[a]
        caps[i] = min(caps[i], v1_caps[a])
    doc_rows = ReleaseRows(DOCUMENT_KIND, (), np.arange(len(uniq)), np.full(len(uniq), -1))
    _carry(store, uniq, spend, caps, doc_rows, tool=tool, what=what, new_cap=new_cap)
    carried, largest, units = int((spend > 0).sum()), float(spend.max(initial=0.0)), len(uniq)
    if person:
        if getattr(corpus, "persons", None) is None:
            raise ParameterError("The privacy unit is a person, but the corpus has no person column.")
        strings = sorted({f"person{UNIT_SEP}{p}" for p in corpus.persons})
        keys = store.keys(strings)  # the same strings and key as in version 1: the same keys
        at = _lookup(v1_keys, hasher.keys(strings))
        p_spend = np.where(at >= 0, v1_spent[np.maximum(at, 0)], 0.0)
        p_caps = np.where(at >= 0, v1_caps[np.maximum(at, 0)], np.inf)
        _carry(store, keys, p_spend, p_caps, None, tool=tool, what=what, new_cap=new_cap)
        carried, largest, units = int((p_spend > 0).sum()), float(p_spend.max(initial=0.0)), len(strings)
    return UpgradeResult(units, carried, largest, moved, store.ledger_id)
