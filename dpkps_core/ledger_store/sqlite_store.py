"""The persistent ledger's SQLite store (docs/DESIGN.md §2.0; see :mod:`dpkps_core.ledger_store`): files, one
``BEGIN IMMEDIATE`` transaction per change under an exclusive flock, the schema and its checks, and the unit
index. :class:`~dpkps_core.ledger_store.store.LedgerStore` adds the operations."""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import sqlite3
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from dpkps_core.errors import PrivacyBudgetError
from dpkps_core.ledger_store.folder import (CHUNK, FORMAT, KEY_BYTES, KEY_FILE, LEDGER_DIR_ENV, LOCK_FILE,
                                            STORE_FILE, VERSION, _BUSY_TIMEOUT_S, _LEGACY_NAME, _UnitHasher, _now,
                                            _read_or_create_key, ledger_root)

try:  # POSIX; the app and CLI are supported on Linux and macOS
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE unit_keys (chunk INTEGER PRIMARY KEY, keys BLOB NOT NULL);
CREATE TABLE unit_spent (chunk INTEGER PRIMARY KEY, spent BLOB NOT NULL);
CREATE TABLE unit_caps (chunk INTEGER PRIMARY KEY, caps BLOB NOT NULL);
CREATE TABLE unit_direct (chunk INTEGER PRIMARY KEY, direct BLOB NOT NULL);
CREATE TABLE releases (
    id INTEGER PRIMARY KEY, recorded TEXT NOT NULL, tool TEXT NOT NULL, run TEXT, what TEXT NOT NULL,
    epsilon REAL NOT NULL, units INTEGER NOT NULL, left_out INTEGER NOT NULL, filtered INTEGER NOT NULL,
    lo INTEGER NOT NULL, hi INTEGER NOT NULL, bitmap BLOB NOT NULL);
CREATE TABLE events (
    id INTEGER PRIMARY KEY, release_id INTEGER NOT NULL REFERENCES releases(id), recorded TEXT NOT NULL,
    tool TEXT NOT NULL, run TEXT, epsilon REAL NOT NULL, delta REAL NOT NULL, event TEXT NOT NULL);
CREATE INDEX events_release ON events(release_id);
CREATE TABLE cap_history (
    id INTEGER PRIMARY KEY, recorded TEXT NOT NULL, tool TEXT NOT NULL, run TEXT, cap REAL NOT NULL,
    previous_min REAL, previous_max REAL, units INTEGER NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
    bitmap BLOB NOT NULL);
"""


# ------------------------------------------------------------------------------------------ store

@contextlib.contextmanager
def folder_lock(root: Path) -> Iterator[None]:
    """The ledger folder's exclusive lock (flock on its lock file): every writer of the store, and the upgrade,
    holds it. A lock file that cannot be opened is a :class:`PrivacyBudgetError` that spends nothing."""
    try:
        fd = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise PrivacyBudgetError(f"The privacy ledger's lock file in {root} cannot be opened "
                                 f"({exc.strerror or type(exc).__name__}); nothing was spent.") from None
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


class StoreFiles:
    """The SQLite side of :class:`~dpkps_core.ledger_store.store.LedgerStore` (docs in the package docstring): the
    folder's files, the flock + ``BEGIN IMMEDIATE`` transactions, the schema and its checks, and the in-memory index
    of unit keys → ids. Safe across threads and processes.

    ``allow_legacy`` lets the legacy import open a folder that still holds previous-format files."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, allow_legacy: bool = False) -> None:
        self.root = ledger_root() if root is None else ledger_root({LEDGER_DIR_ENV: os.fspath(root)})
        self.path = self.root / STORE_FILE
        if not allow_legacy:
            self._refuse_legacy()
        self._mu = threading.RLock()
        self._index_keys = np.empty(0, dtype=f"S{KEY_BYTES}")  # sorted keys of units 0..n-1
        self._index_ids = np.empty(0, dtype=np.int64)
        self._index_n = 0
        self._generation: str | None = None
        self._version_seen: str | None = None
        exists = self.path.exists()
        self._key = _read_or_create_key(self.root, may_create=not exists)
        self._hasher = _UnitHasher(self._key)
        self._created = self._create() if not exists else False
        self._ledger_id = ""
        self._verify_once()

    @property
    def created(self) -> bool:
        """True when this store object created the ledger (the folder held none): the app and the CLI say so on
        first use, since a new folder (a new ``$DPKPS_LEDGER_DIR``) knows no earlier release (issue 35 part 7)."""
        return self._created

    @property
    def ledger_id(self) -> str:
        """The ledger's stable random id (made with the store, never its path): a run's LOCAL report records which
        ledger admitted its units."""
        return self._ledger_id

    # ---- files
    def legacy_files(self) -> list[Path]:
        """Ledger files of the previous format (one per corpus) still in the folder."""
        try:
            return sorted(p for p in self.root.iterdir() if _LEGACY_NAME.match(p.name))
        except OSError as exc:
            raise PrivacyBudgetError(f"The privacy ledger folder {self.root} cannot be read "
                                     f"({exc.strerror or type(exc).__name__}); nothing was spent.") from None

    def _refuse_legacy(self) -> None:
        old = self.legacy_files()
        if old:
            raise PrivacyBudgetError(
                f"The privacy ledger folder {self.root} still holds {len(old)} ledger file(s) of the previous format "
                "(one per corpus), whose spend cannot be mapped to documents automatically. Nothing was spent. For "
                "each corpus you still hold, run `python -m dpkps_core ledger --corpus SPEC --import-legacy` (its "
                "releases are charged to that corpus's documents); move the files of corpora you no longer hold out "
                "of the folder yourself (docs/PRIVACY.md \"Per-document budgets\")."
            )

    def _flock(self) -> Any:
        return folder_lock(self.root)

    def _connect(self) -> sqlite3.Connection:
        if not self.path.is_file():
            raise PrivacyBudgetError(f"The privacy ledger store {self.path} has disappeared; restore it from a backup. "
                                     "Nothing was spent.")
        with open(self.path, "rb") as f:  # never let SQLite initialise an empty or foreign file as a new store
            if f.read(16) != b"SQLite format 3\x00":
                raise sqlite3.DatabaseError("not an SQLite file (empty, truncated or overwritten)")
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA synchronous=FULL")  # the journal mode (WAL) was fixed when the store was created
            conn.execute("PRAGMA foreign_keys=ON")
        except BaseException:
            conn.close()
            raise
        return conn

    def _create(self) -> bool:
        """A new store, built under a temporary name and linked into place, so that the store file is either absent
        or complete (a zero-length or schema-less store is damage, never a fresh start). True when this call made
        it (not a concurrent first use)."""
        with self._flock():
            if self.path.exists():
                return False
            fd, tmp = tempfile.mkstemp(prefix=".store-", suffix=".sqlite", dir=self.root)  # 0o600
            os.close(fd)
            try:
                conn = sqlite3.connect(tmp, isolation_level=None)
                try:
                    conn.execute("PRAGMA journal_mode=WAL")  # persistent in the file
                    conn.executescript(_SCHEMA)
                    rows = [("format", FORMAT), ("version", str(VERSION)), ("key_check", self._hasher.check),
                            ("units", "0"), ("generation", secrets.token_hex(8)), ("changes", "0"),
                            ("created", _now()), ("ledger_id", secrets.token_hex(16))]
                    conn.executemany("INSERT INTO meta(name, value) VALUES (?, ?)", rows)
                finally:
                    conn.close()
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                try:
                    os.link(tmp, self.path)
                except FileExistsError:
                    return False
                return True
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    def _damaged(self, exc: BaseException) -> PrivacyBudgetError:
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower():
            return PrivacyBudgetError(f"The privacy ledger {self.path} is busy (another run holds it; waited up to "
                                      f"{_BUSY_TIMEOUT_S:g} s); nothing was spent. Try again.")
        return PrivacyBudgetError(
            f"The privacy ledger {self.path} is damaged or unreadable ({exc}); restore it from a backup before "
            "releasing anything more (it is never reset silently). Nothing was spent."
        )

    def _verify_once(self) -> None:
        """Integrity check of the whole file (once per store object), then the schema check of every transaction."""
        with self._transaction(write=False) as conn:
            rows = conn.execute("PRAGMA quick_check").fetchall()
            if [tuple(r) for r in rows] != [("ok",)]:
                raise sqlite3.DatabaseError("integrity check failed: " + "; ".join(str(r[0]) for r in rows[:3]))
            self._ledger_id = self._meta(conn)["ledger_id"]

    @contextlib.contextmanager
    def _transaction(self, *, write: bool) -> Iterator[sqlite3.Connection]:
        """One transaction: writes take the folder's flock and ``BEGIN IMMEDIATE`` (processes serialise); reads
        see one consistent snapshot. Any SQLite error rolls back (nothing charged) and fails closed."""
        with self._mu, (self._flock() if write else contextlib.nullcontext()):
            conn: sqlite3.Connection | None = None
            try:
                conn = self._connect()
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                self._check_meta(conn)
                yield conn
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(conn)
                self._reset_index()
                raise self._damaged(exc) from None
            except BaseException:
                self._rollback(conn)
                self._reset_index()
                raise
            finally:
                if conn is not None:
                    conn.close()

    @staticmethod
    def _rollback(conn: sqlite3.Connection | None) -> None:
        if conn is not None and conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")

    def _meta(self, conn: sqlite3.Connection) -> dict[str, str]:
        return {str(k): str(v) for k, v in conn.execute("SELECT name, value FROM meta")}

    def _check_meta(self, conn: sqlite3.Connection) -> None:
        meta = self._meta(conn)
        if meta.get("format") == FORMAT and meta.get("version") == "1":
            raise PrivacyBudgetError(
                f"The privacy ledger {self.path} was written by an earlier version, whose document budgets were kept "
                "per text and label; they cannot be carried over to this version's per-text budgets automatically. "
                f"Nothing was spent. Keep that folder (it is the record of what was spent), and point "
                f"${LEDGER_DIR_ENV} to a new folder only once you accept that its documents start again from ε 0 "
                "(docs/PRIVACY.md \"The ledger\").")
        if meta.get("format") != FORMAT or meta.get("version") != str(VERSION) or not meta.get("ledger_id"):
            raise sqlite3.DatabaseError("not a ledger store of this version")
        if not hmac.compare_digest(meta.get("key_check", ""), self._hasher.check):
            raise PrivacyBudgetError(f"The ledger key {self.root / KEY_FILE} does not belong to the ledger store "
                                     f"{self.path}; restore the matching key. Nothing was spent.")
        try:
            n = int(meta["units"])
            int(meta["changes"])
        except (KeyError, ValueError):
            raise sqlite3.DatabaseError("malformed store header") from None
        if n < 0:
            raise sqlite3.DatabaseError("malformed store header")

    def _set_meta(self, conn: sqlite3.Connection, **values: Any) -> None:
        conn.executemany("UPDATE meta SET value = ? WHERE name = ?", [(str(v), k) for k, v in values.items()])

    def _bump(self, conn: sqlite3.Connection) -> None:
        conn.execute("UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE name = 'changes'")

    # ---- unit index (keys → ids), cached per store object and refreshed incrementally (units are append-only)
    def _reset_index(self) -> None:
        self._index_keys = np.empty(0, dtype=f"S{KEY_BYTES}")
        self._index_ids = np.empty(0, dtype=np.int64)
        self._index_n = 0
        self._generation = None

    def _chunk_blob(self, conn: sqlite3.Connection, table: str, column: str, chunk: int, expected: int,
                    itemsize: int) -> bytes:
        row = conn.execute(f"SELECT {column} FROM {table} WHERE chunk = ?", (chunk,)).fetchone()
        if row is None or not isinstance(row[0], bytes) or len(row[0]) != expected * itemsize:
            raise sqlite3.DatabaseError(f"malformed {table} chunk {chunk}")
        return row[0]

    def _refresh_index(self, conn: sqlite3.Connection) -> int:
        meta = self._meta(conn)
        n, generation = int(meta["units"]), meta.get("generation")
        if generation != self._generation or n < self._index_n:
            self._reset_index()
            self._generation = generation
        if n > self._index_n:
            parts = []
            for chunk in range(self._index_n // CHUNK, (n - 1) // CHUNK + 1):
                count = min(CHUNK, n - chunk * CHUNK)
                blob = self._chunk_blob(conn, "unit_keys", "keys", chunk, count, KEY_BYTES)
                start = max(self._index_n - chunk * CHUNK, 0)
                parts.append(np.frombuffer(blob, dtype=f"S{KEY_BYTES}")[start:count])
            new_keys = np.concatenate(parts)
            new_ids = np.arange(self._index_n, n, dtype=np.int64)
            order = np.argsort(new_keys, kind="stable")
            new_keys, new_ids = new_keys[order], new_ids[order]
            at = np.searchsorted(self._index_keys, new_keys)
            self._index_keys = np.insert(self._index_keys, at, new_keys)
            self._index_ids = np.insert(self._index_ids, at, new_ids)
            self._index_n = n
        return n

    def _lookup(self, keys: np.ndarray) -> np.ndarray:
        """Unit ids of ``keys`` (−1 where unknown)."""
        ids = np.full(len(keys), -1, dtype=np.int64)
        if self._index_n == 0 or len(keys) == 0:
            return ids
        order = np.argsort(keys, kind="stable")  # sorted queries: the binary searches stay in cache
        queries = keys[order]
        pos = np.searchsorted(self._index_keys, queries)
        ok = pos < self._index_n
        hit = np.zeros(len(keys), dtype=bool)
        hit[ok] = self._index_keys[pos[ok]] == queries[ok]
        ids[order[hit]] = self._index_ids[pos[hit]]
        return ids

    # ---- budget arrays
    def _read_arrays(self, conn: sqlite3.Connection, ids: np.ndarray, n: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """spent, caps and direct (document-unit) spend of ``ids`` (all < n), and the touched chunks' arrays
        (writable copies)."""
        chunks: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        spent = np.zeros(len(ids), dtype=np.float64)
        caps = np.zeros(len(ids), dtype=np.float64)
        direct = np.zeros(len(ids), dtype=np.float64)
        if len(ids) == 0:
            return spent, caps, direct, chunks
        which = ids // CHUNK
        for chunk in np.flatnonzero(np.bincount(which)).tolist():
            count = min(CHUNK, n - chunk * CHUNK)
            s = np.frombuffer(self._chunk_blob(conn, "unit_spent", "spent", chunk, count, 8), dtype="<f8").copy()
            c = np.frombuffer(self._chunk_blob(conn, "unit_caps", "caps", chunk, count, 8), dtype="<f8").copy()
            d = np.frombuffer(self._chunk_blob(conn, "unit_direct", "direct", chunk, count, 8), dtype="<f8").copy()
            if not (np.isfinite(s).all() and (s >= 0).all() and (c > 0).all() and not np.isnan(c).any()
                    and np.isfinite(d).all() and (d >= 0).all()):
                raise sqlite3.DatabaseError(f"malformed budget chunk {chunk}")
            chunks[chunk] = (s, c, d)
            sel = which == chunk
            at = ids[sel] - chunk * CHUNK
            spent[sel], caps[sel], direct[sel] = s[at], c[at], d[at]
        return spent, caps, direct, chunks

    def _append_units(self, conn: sqlite3.Connection, keys: np.ndarray, n: int, cap: float) -> np.ndarray:
        """Append new units (spent 0, ``cap``); returns their ids."""
        k = len(keys)
        new_ids = np.arange(n, n + k, dtype=np.int64)
        done = 0
        while done < k:
            pos = n + done
            chunk, offset = divmod(pos, CHUNK)
            take = min(CHUNK - offset, k - done)
            part = keys[done:done + take].tobytes()
            zeros = np.zeros(take, dtype="<f8").tobytes()
            caps = np.full(take, cap, dtype="<f8").tobytes()
            if offset == 0:
                conn.execute("INSERT INTO unit_keys(chunk, keys) VALUES (?, ?)", (chunk, part))
                conn.execute("INSERT INTO unit_spent(chunk, spent) VALUES (?, ?)", (chunk, zeros))
                conn.execute("INSERT INTO unit_caps(chunk, caps) VALUES (?, ?)", (chunk, caps))
                conn.execute("INSERT INTO unit_direct(chunk, direct) VALUES (?, ?)", (chunk, zeros))
            else:
                for table, column, itemsize, data in (("unit_keys", "keys", KEY_BYTES, part),
                                                      ("unit_spent", "spent", 8, zeros), ("unit_caps", "caps", 8, caps),
                                                      ("unit_direct", "direct", 8, zeros)):
                    old = self._chunk_blob(conn, table, column, chunk, offset, itemsize)
                    conn.execute(f"UPDATE {table} SET {column} = ? WHERE chunk = ?", (old + data, chunk))
            done += take
        self._set_meta(conn, units=n + k)
        # the index learns the new units now (they are committed with this transaction, or the index is reset)
        order = np.argsort(keys, kind="stable")
        at = np.searchsorted(self._index_keys, keys[order])
        self._index_keys = np.insert(self._index_keys, at, keys[order])
        self._index_ids = np.insert(self._index_ids, at, new_ids[order])
        self._index_n = n + k
        return new_ids

    def _ids_for(self, conn: sqlite3.Connection, keys: np.ndarray, new_cap: float) -> tuple[np.ndarray, int]:
        """Ids of ``keys`` (distinct), adding the unknown ones with ``new_cap``; returns (ids, store size)."""
        n = self._refresh_index(conn)
        ids = self._lookup(keys)
        new = ids < 0
        if new.any():
            ids[new] = self._append_units(conn, keys[new], n, new_cap)
            n += int(new.sum())
        return ids, n
