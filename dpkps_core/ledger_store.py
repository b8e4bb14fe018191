"""Persistent privacy ledger: an individual privacy filter over documents or persons (DESIGN §2.0).

The budget follows the *units* (one document, or all documents of one person), not the file they came in: every
DP release, from the app in any session or from any CLI command, charges the units it used, and a unit whose
spend plus a release's ε would exceed its cap is **left out** of that release's input (Feldman & Zrnic,
"Individual Privacy Accounting via a Rényi Filter", NeurIPS 2021; for pure ε-DP each participating unit's loss per
release is ε). A unit's total loss then never exceeds its cap, whichever files, subsets, supersets, orders or
label columns its documents arrive in.

* **Where.** One owner-only (0700) folder: ``$DPKPS_LEDGER_DIR``, else ``~/.local/share/dpkps/ledgers``. It holds
  ``ledger.key`` (a random secret, 0600), ``ledger.sqlite`` (the store, 0600) and ``ledger.lock``. **Fail
  closed:** an unusable folder, a missing or damaged key, or an unreadable, truncated or malformed store is a
  :class:`~dpkps_core.errors.PrivacyBudgetError` that spends nothing; there is no fallback to another folder.
* **Which unit.** A unit is identified by HMAC-SHA256, under the local key, of its unit string
  (:func:`dpkps_core.budget.unit_strings`: the normalised text and label of a document, or the person id). Only
  these keys are stored — never a text, person id, corpus path or file name — and they never leave the folder
  (a hash of private data is not DP): no run folder, report, bundle or log holds them.
* **What.** SQLite (stdlib ``sqlite3``, WAL journal). The units are append-only arrays in fixed-size chunks —
  ``unit_keys`` (32-byte keys), ``unit_spent`` (float64 ε spent) and ``unit_caps`` (float64 cap; +∞ = no cap) —
  so that admitting 200,000 units is a few array reads and writes, not 200,000 row updates. A unit's id is its
  position. ``releases`` holds one row per admission (when, which tool and run, what, ε, how many units took part
  or were left out) with a zlib-compressed bitmap of the participating unit ids (a compact participation record:
  ``ledger --corpus`` lists the releases that touched a corpus's units); ``events`` the frozen
  :class:`~dpkps_core.dp.ledger.PrivacyEvent` s charged to each release; ``cap_history`` every cap change (who,
  when, the units it applied to).
* **How.** Every change is one ``BEGIN IMMEDIATE`` transaction, taken while holding an exclusive ``fcntl.flock``
  on ``ledger.lock`` (belt and braces), so concurrent processes serialise: none ever reads a spend another is
  about to change. A failed transaction rolls back: nothing is charged.

**Caps.** A unit's cap is kept with the unit. A unit never seen before gets the cap setting of the run that first
sees it (the app's cap field or the CLI's ``--epsilon-cap``; :data:`~dpkps_core.config.DEFAULT_EPSILON_CAP` when
the run has none). Afterwards only an explicit change moves it: :meth:`LedgerStore.set_cap` (``ledger --corpus …
--epsilon-cap``, or changing the app's cap field while a corpus is loaded) sets the cap of *that corpus's* units
and is recorded in ``cap_history``. A run's cap setting also bounds the run itself: a release whose ε would take
the run's own total over it is refused whole (a public decision, :meth:`PersistentLedger.require`).

**Charging.** :meth:`PersistentLedger.admit` (called through :func:`dpkps_core.budget.admit` before a release
reads its input) decides and charges in one transaction and records a release row; :meth:`PersistentLedger.charge`
then attaches the release's frozen event to that row, with no data-dependent refusal. A ``charge`` with no
admission before it is taken to have used *every* unit the ledger was opened with (a mechanism that did not
filter its input used all of it): they are all charged, caps notwithstanding, and the release is recorded.

**Older ledger files.** The previous format kept one JSON file per corpus (``dpkps-corpus-ledger`` v1, named by an
HMAC of the corpus's texts). Its spend cannot be mapped to units without the corpus, and ignoring it would reset
those documents' budgets, so the store refuses to start while such files are in the folder and says what to do:
``python -m dpkps_core ledger --corpus SPEC --import-legacy`` charges the matching file's releases to that
corpus's units (every one of them, at the file's total ε; its cap becomes their cap) and moves the file to
``legacy-imported/``; a file whose corpus is gone can only be moved out of the folder by the owner, deliberately.

Everything the views here return about a corpus's units (the largest spend, how many units are exhausted, which
releases touched them) is PRIVATE, local information: show it to the data owner, never export it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import shutil
import sqlite3
import stat
import tempfile
import threading
import unicodedata
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from dpkps_core.config import DEFAULT_EPSILON_CAP
from dpkps_core.dp.ledger import _FLOAT_SLACK, PrivacyEvent, PrivacyLedger
from dpkps_core.errors import ParameterError, PrivacyBudgetError

try:  # POSIX; the app and CLI are supported on Linux and macOS
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LEDGER_DIR_ENV = "DPKPS_LEDGER_DIR"
KEY_FILE = "ledger.key"
STORE_FILE = "ledger.sqlite"
LOCK_FILE = "ledger.lock"
LEGACY_IMPORTED = "legacy-imported"
FORMAT = "dpkps-unit-ledger"
VERSION = 1
LEGACY_FORMAT = "dpkps-corpus-ledger"
CHUNK = 16_384  # units per stored chunk (512 KiB of keys, 128 KiB of spend per chunk)
KEY_BYTES = 32  # one unit key: HMAC-SHA256
_KEY_FILE_BYTES = 32
_UNIT_DOMAIN = b"dpkps unit v1\x00"
_CHECK_DOMAIN = b"dpkps ledger key check v1"
_FINGERPRINT_DOMAIN = b"dpkps corpus fingerprint v1\x00"  # the previous format's corpus names (import only)
_LEGACY_NAME = re.compile(r"^[0-9a-f]{64}\.json$")
_BUSY_TIMEOUT_S = 120.0
_NO_CAP = math.inf

_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE unit_keys (chunk INTEGER PRIMARY KEY, keys BLOB NOT NULL);
CREATE TABLE unit_spent (chunk INTEGER PRIMARY KEY, spent BLOB NOT NULL);
CREATE TABLE unit_caps (chunk INTEGER PRIMARY KEY, caps BLOB NOT NULL);
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


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------ folder and key

def ledger_root(env: Mapping[str, str] | None = None) -> Path:
    """The ledger folder: ``$DPKPS_LEDGER_DIR``, else ``~/.local/share/dpkps/ledgers`` — and no other.

    It is created owner-only (0o700); an existing one is tightened to 0o700. A folder that cannot be used is a
    :class:`PrivacyBudgetError` (falling back elsewhere would start an empty ledger: DESIGN §2.0 fails closed)."""
    env = os.environ if env is None else env
    configured = bool(env.get(LEDGER_DIR_ENV))
    root = Path(env[LEDGER_DIR_ENV]).expanduser() if configured else Path.home() / ".local" / "share" / "dpkps" / "ledgers"
    try:
        return _prepare_root(root)
    except OSError as exc:
        how = f"set by ${LEDGER_DIR_ENV}" if configured else f"(set ${LEDGER_DIR_ENV} to use another)"
        raise PrivacyBudgetError(
            f"The privacy ledger folder {root} {how} cannot be used ({exc.strerror or type(exc).__name__}); "
            "nothing was spent."
        ) from None


def _prepare_root(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = root.stat()
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(20, "not a directory")
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise PrivacyBudgetError(f"The privacy ledger folder {root} belongs to another user; set ${LEDGER_DIR_ENV} "
                                 "to a folder of your own. Nothing was spent.")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(root, 0o700)
    if not os.access(root, os.W_OK | os.X_OK):
        raise PermissionError(13, "not writable")
    return root


def _read_or_create_key(root: Path, *, may_create: bool) -> bytes:
    """The local secret key (created once, 0o600, atomically, so concurrent first uses agree). A key is only ever
    created together with a new store: a missing key next to an existing store is an error, not a fresh start."""
    path = root / KEY_FILE
    if not path.exists():
        if not may_create:
            raise PrivacyBudgetError(f"The ledger key {path} is missing while the ledger store exists; restore the key "
                                     "from a backup (without it no unit finds its budget). Nothing was spent.")
        fd, tmp = tempfile.mkstemp(prefix=".key-", dir=root)  # created 0o600
        try:
            os.write(fd, secrets.token_hex(_KEY_FILE_BYTES).encode("ascii"))
            os.fsync(fd)
            os.close(fd)
            try:
                os.link(tmp, path)  # fails if another process created the key first: theirs wins
            except FileExistsError:
                pass
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    try:
        st = path.stat()
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, 0o600)
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (ValueError, UnicodeDecodeError, OSError):
        key = b""
    if len(key) < 16:
        raise PrivacyBudgetError(f"The ledger key {path} is damaged; restore it from a backup (without it no unit "
                                 "finds its budget). Nothing was spent.")
    return key


class _UnitHasher:
    """HMAC-SHA256 (RFC 2104) of unit strings under the local key, vectorised over a list: the inner and outer
    states are computed once and copied per unit (about 3× faster than ``hmac.digest`` per call)."""

    def __init__(self, key: bytes) -> None:
        block = key.ljust(64, b"\x00") if len(key) <= 64 else hashlib.sha256(key).digest().ljust(64, b"\x00")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in block))
        self._inner.update(_UNIT_DOMAIN)
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in block))
        self.check = hmac.new(key, _CHECK_DOMAIN, hashlib.sha256).hexdigest()

    def keys(self, units: Sequence[str]) -> np.ndarray:
        """One 32-byte key per unit string, as a ``S32`` array (raw bytes; never print or store elsewhere)."""
        inner, outer = self._inner.copy, self._outer.copy
        out: list[bytes] = []
        append = out.append
        try:
            for unit in units:
                h = inner()
                h.update(unit.encode("utf-8", "surrogatepass"))
                o = outer()
                o.update(h.digest())
                append(o.digest())
        except AttributeError:
            raise ParameterError("A privacy unit is identified by a string (dpkps_core.budget.unit_strings).") from None
        return np.frombuffer(b"".join(out), dtype=f"S{KEY_BYTES}")


def unique_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (sorted) and, per input position, the index of its key among them."""
    uniq, inverse = np.unique(keys, return_inverse=True)
    return uniq, inverse.reshape(-1)


# ------------------------------------------------------------------------------------------ participation records

def _pack_ids(ids: np.ndarray) -> tuple[int, int, bytes]:
    """A set of unit ids as (lo, hi, zlib(bitmap over lo..hi)): compact whether the ids are dense or sparse."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return 0, -1, b""
    lo, hi = int(ids.min()), int(ids.max())
    bits = np.zeros(hi - lo + 1, dtype=bool)
    bits[ids - lo] = True
    return lo, hi, zlib.compress(np.packbits(bits).tobytes(), 6)


def _members(lo: int, hi: int, blob: bytes, ids: np.ndarray) -> np.ndarray:
    """Which of ``ids`` are in the packed set (lo, hi, blob)."""
    out = np.zeros(len(ids), dtype=bool)
    if hi < lo or len(ids) == 0:
        return out
    inside = (ids >= lo) & (ids <= hi)
    if not inside.any():
        return out
    bits = np.unpackbits(np.frombuffer(zlib.decompress(blob), dtype=np.uint8), count=hi - lo + 1).astype(bool)
    out[inside] = bits[ids[inside] - lo]
    return out


# ------------------------------------------------------------------------------------------ records

@dataclasses.dataclass(frozen=True)
class RecordedEvent:
    """One charged privacy event: what was spent, when it was recorded, and which tool/run spent it."""

    event: PrivacyEvent
    recorded: str
    tool: str
    run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "tool": self.tool, "run": self.run, "event": self.event.to_dict()}


@dataclasses.dataclass(frozen=True)
class Release:
    """One admission to a release: when, by whom, for what and at which ε; how many units took part in all and how
    many of the viewed corpus's units (``in_corpus``, PRIVATE); the events charged to it (none when the release
    failed or was cancelled after admission — it stays charged). ``filtered`` is False for a charge that came
    with no admission (every unit of the opened corpus charged)."""

    id: int
    recorded: str
    tool: str
    run: str | None
    what: str
    epsilon: float
    units: int
    left_out: int
    filtered: bool
    in_corpus: int
    events: tuple[RecordedEvent, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "tool": self.tool, "run": self.run, "what": self.what,
                "epsilon": self.epsilon, "units_in_corpus": self.in_corpus, "filtered": self.filtered,
                "events": [e.to_dict() for e in self.events]}


@dataclasses.dataclass(frozen=True)
class CapChange:
    """One recorded cap change that applied to some of the viewed corpus's units (``in_corpus``)."""

    recorded: str
    tool: str
    run: str | None
    cap: float | None
    previous_min: float | None
    previous_max: float | None
    in_corpus: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class CorpusView:
    """What the ledger knows about one corpus's units (PRIVATE, local: never export it).

    ``spent`` / ``caps`` / ``in_ledger`` hold one entry per distinct unit of the corpus (a unit never seen has
    spent 0 and the cap it would get now, ``new_unit_cap``; ``inf`` = no cap)."""

    units: int
    known: int
    spent: np.ndarray
    caps: np.ndarray
    in_ledger: np.ndarray
    new_unit_cap: float | None
    releases: tuple[Release, ...]
    cap_history: tuple[CapChange, ...]

    @property
    def largest_spend(self) -> float:
        return float(self.spent.max()) if self.units else 0.0

    @property
    def cap_range(self) -> tuple[float | None, float | None]:
        """(smallest, largest) cap among the corpus's units already in the ledger (``new_unit_cap`` when none is);
        ``None`` stands for no cap."""
        if not self.known:
            return self.new_unit_cap, self.new_unit_cap
        caps = self.caps[self.in_ledger]
        lo, hi = float(caps.min()), float(caps.max())
        return (None if math.isinf(lo) else lo), (None if math.isinf(hi) else hi)

    def left_out(self, epsilon: float) -> int:
        """How many of the corpus's units could not take part in a release of ``epsilon`` now."""
        return int(np.count_nonzero(self.spent + float(epsilon) > self.caps + _FLOAT_SLACK))

    @property
    def events(self) -> tuple[RecordedEvent, ...]:
        return tuple(e for r in self.releases for e in r.events)


def _check_label(value: str | None, what: str, *, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise ParameterError(f"The ledger's {what} must be a short non-empty text, got {value!r}.")
    if "/" in value or "\\" in value:
        raise ParameterError(f"The ledger's {what} is a name, not a path (paths are never recorded): {value!r}.")
    return value.strip()


def _check_cap(cap: float | None) -> float | None:
    if cap is None:
        return None
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or not (math.isfinite(cap) and cap > 0):
        raise ParameterError(f"The budget cap must be a finite ε > 0, got {cap!r}.")
    return float(cap)


def _check_epsilon(epsilon: float) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, np.floating)) or \
            not (math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"A release needs a finite ε > 0, got {epsilon!r}.")
    return float(epsilon)


def _stored_cap(cap: float | None) -> float:
    return _NO_CAP if cap is None else float(cap)


def _shown_cap(cap: float | None) -> float | None:
    return None if cap is None or math.isinf(cap) else float(cap)


# ------------------------------------------------------------------------------------------ store

class LedgerStore:
    """The persistent ledger store of one folder (see the module docstring). Safe across threads and processes.

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
        if not exists:
            self._create()
        self._verify_once()

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

    @contextlib.contextmanager
    def _flock(self) -> Iterator[None]:
        try:
            fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise PrivacyBudgetError(f"The privacy ledger's lock file in {self.root} cannot be opened "
                                     f"({exc.strerror or type(exc).__name__}); nothing was spent.") from None
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

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

    def _create(self) -> None:
        """A new store, built under a temporary name and linked into place, so that the store file is either absent
        or complete (a zero-length or schema-less store is damage, never a fresh start)."""
        with self._flock():
            if self.path.exists():
                return
            fd, tmp = tempfile.mkstemp(prefix=".store-", suffix=".sqlite", dir=self.root)  # 0o600
            os.close(fd)
            try:
                conn = sqlite3.connect(tmp, isolation_level=None)
                try:
                    conn.execute("PRAGMA journal_mode=WAL")  # persistent in the file
                    conn.executescript(_SCHEMA)
                    rows = [("format", FORMAT), ("version", str(VERSION)), ("key_check", self._hasher.check),
                            ("units", "0"), ("generation", secrets.token_hex(8)), ("changes", "0"),
                            ("created", _now())]
                    conn.executemany("INSERT INTO meta(name, value) VALUES (?, ?)", rows)
                finally:
                    conn.close()
                with open(tmp, "rb+") as f:
                    os.fsync(f.fileno())
                try:
                    os.link(tmp, self.path)
                except FileExistsError:
                    pass
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
        if meta.get("format") != FORMAT or meta.get("version") != str(VERSION):
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
        pos = np.searchsorted(self._index_keys, keys)
        ok = pos < self._index_n
        hit = np.zeros(len(keys), dtype=bool)
        hit[ok] = self._index_keys[pos[ok]] == keys[ok]
        ids[hit] = self._index_ids[pos[hit]]
        return ids

    # ---- budget arrays
    def _read_arrays(self, conn: sqlite3.Connection, ids: np.ndarray, n: int
                     ) -> tuple[np.ndarray, np.ndarray, dict[int, tuple[np.ndarray, np.ndarray]]]:
        """spent and caps of ``ids`` (all < n), and the touched chunks' arrays (writable copies)."""
        chunks: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        spent = np.zeros(len(ids), dtype=np.float64)
        caps = np.zeros(len(ids), dtype=np.float64)
        if len(ids) == 0:
            return spent, caps, chunks
        which = ids // CHUNK
        for chunk in np.unique(which).tolist():
            count = min(CHUNK, n - chunk * CHUNK)
            s = np.frombuffer(self._chunk_blob(conn, "unit_spent", "spent", chunk, count, 8), dtype="<f8").copy()
            c = np.frombuffer(self._chunk_blob(conn, "unit_caps", "caps", chunk, count, 8), dtype="<f8").copy()
            if not (np.isfinite(s).all() and (s >= 0).all() and (c > 0).all() and not np.isnan(c).any()):
                raise sqlite3.DatabaseError(f"malformed budget chunk {chunk}")
            chunks[chunk] = (s, c)
            sel = which == chunk
            spent[sel] = s[ids[sel] - chunk * CHUNK]
            caps[sel] = c[ids[sel] - chunk * CHUNK]
        return spent, caps, chunks

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
            else:
                for table, column, itemsize, data in (("unit_keys", "keys", KEY_BYTES, part),
                                                      ("unit_spent", "spent", 8, zeros), ("unit_caps", "caps", 8, caps)):
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

    # ---- public operations
    def keys(self, units: Sequence[str]) -> np.ndarray:
        """The PRIVATE keys of unit strings (never export or log them)."""
        return self._hasher.keys(list(units))

    def admit(self, keys: np.ndarray, epsilon: float, *, new_cap: float | None, tool: str, run: str | None,
              what: str, force: bool = False) -> tuple[int, np.ndarray]:
        """The filter, in one transaction: units (distinct ``keys``) whose spend + ``epsilon`` fits their cap take
        part and are charged ``epsilon`` now; a release row records them. ``force`` charges every unit (a release
        that did not filter its input). Returns (release id, mask over ``keys``)."""
        epsilon = _check_epsilon(epsilon)
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        with self._transaction(write=True) as conn:
            ids, n = self._ids_for(conn, keys, _stored_cap(new_cap))
            spent, caps, chunks = self._read_arrays(conn, ids, n)
            ok = np.ones(len(ids), dtype=bool) if force else spent + epsilon <= caps + _FLOAT_SLACK
            chosen = ids[ok]
            which = chosen // CHUNK
            for chunk in np.unique(which).tolist():
                s, _ = chunks[chunk]
                s[chosen[which == chunk] - chunk * CHUNK] += epsilon
                conn.execute("UPDATE unit_spent SET spent = ? WHERE chunk = ?", (s.astype("<f8").tobytes(), chunk))
            lo, hi, blob = _pack_ids(chosen)
            cur = conn.execute(
                "INSERT INTO releases(recorded, tool, run, what, epsilon, units, left_out, filtered, lo, hi, bitmap) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (_now(), tool, run, str(what)[:300], epsilon, int(ok.sum()), int((~ok).sum()), int(not force), lo, hi,
                 blob))
            self._bump(conn)
            return int(cur.lastrowid), ok

    def record_event(self, release_id: int, event: PrivacyEvent, *, tool: str, run: str | None) -> None:
        """Attach a charged event to its release row."""
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        data = json.dumps(event.to_dict(), ensure_ascii=False, default=_json_default)
        with self._transaction(write=True) as conn:
            if conn.execute("SELECT 1 FROM releases WHERE id = ?", (int(release_id),)).fetchone() is None:
                raise sqlite3.DatabaseError(f"release {release_id} is missing")
            conn.execute("INSERT INTO events(release_id, recorded, tool, run, epsilon, delta, event) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (int(release_id), _now(), tool, run, event.epsilon, event.delta, data))
            self._bump(conn)

    def set_cap(self, keys: np.ndarray, cap: float | None, *, tool: str, run: str | None = None) -> int:
        """Set the cap of the units ``keys`` (distinct; unknown ones are added with spent 0), recorded in the cap
        history with who and when. ``None`` removes their cap. Returns how many units' cap changed (0: nothing
        recorded)."""
        cap = _check_cap(cap)
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        stored = _stored_cap(cap)
        with self._transaction(write=True) as conn:
            self._refresh_index(conn)
            known = self._lookup(keys)
            ids, n = self._ids_for(conn, keys, stored)
            _, caps, chunks = self._read_arrays(conn, ids, n)
            changed = caps != stored
            was_known = known >= 0
            if not changed.any() and not (~was_known).any():
                return 0
            for chunk in chunks:
                _, c = chunks[chunk]
                sel = (ids // CHUNK) == chunk
                c[ids[sel] - chunk * CHUNK] = stored
                conn.execute("UPDATE unit_caps SET caps = ? WHERE chunk = ?", (c.astype("<f8").tobytes(), chunk))
            previous = caps[was_known]
            lo, hi, blob = _pack_ids(ids)
            conn.execute("INSERT INTO cap_history(recorded, tool, run, cap, previous_min, previous_max, units, lo, hi, "
                         "bitmap) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (_now(), tool, run, stored, float(previous.min()) if previous.size else None,
                          float(previous.max()) if previous.size else None, len(ids), lo, hi, blob))
            self._bump(conn)
            return int(changed.sum() + (~was_known).sum())  # a new unit's cap already equals ``cap``

    def view(self, keys: np.ndarray, *, new_unit_cap: float | None) -> CorpusView:
        """What the ledger knows about the units ``keys`` (distinct): PRIVATE, local."""
        with self._transaction(write=False) as conn:
            n = self._refresh_index(conn)
            ids = self._lookup(keys)
            known = ids >= 0
            spent = np.zeros(len(keys), dtype=np.float64)
            caps = np.full(len(keys), _stored_cap(new_unit_cap), dtype=np.float64)
            s, c, _ = self._read_arrays(conn, ids[known], n)
            spent[known], caps[known] = s, c
            kid = np.sort(ids[known])
            releases: list[Release] = []
            history: list[CapChange] = []
            if kid.size:
                lo, hi = int(kid[0]), int(kid[-1])
                rows = conn.execute("SELECT id, recorded, tool, run, what, epsilon, units, left_out, filtered, lo, hi, "
                                    "bitmap FROM releases WHERE hi >= ? AND lo <= ? ORDER BY id", (lo, hi)).fetchall()
                touching = []
                for row in rows:
                    inside = int(_members(row[9], row[10], row[11], kid).sum())
                    if inside:
                        touching.append((row, inside))
                events = self._events(conn, [row[0] for row, _ in touching])
                releases = [Release(int(r[0]), r[1], r[2], r[3], r[4], float(r[5]), int(r[6]), int(r[7]), bool(r[8]),
                                    inside, events.get(int(r[0]), ())) for r, inside in touching]
                for row in conn.execute("SELECT recorded, tool, run, cap, previous_min, previous_max, lo, hi, bitmap "
                                        "FROM cap_history WHERE hi >= ? AND lo <= ? ORDER BY id", (lo, hi)):
                    inside = int(_members(row[6], row[7], row[8], kid).sum())
                    if inside:
                        history.append(CapChange(row[0], row[1], row[2], _shown_cap(row[3]), _shown_cap(row[4]),
                                                 _shown_cap(row[5]), inside))
            return CorpusView(len(keys), int(known.sum()), spent, caps, known, _check_cap(new_unit_cap),
                              tuple(releases), tuple(history))

    def _events(self, conn: sqlite3.Connection, release_ids: Sequence[int]) -> dict[int, tuple[RecordedEvent, ...]]:
        out: dict[int, list[RecordedEvent]] = {}
        ids = list(release_ids)
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ",".join("?" * len(part))
            for rid, recorded, tool, run, data in conn.execute(
                    f"SELECT release_id, recorded, tool, run, event FROM events WHERE release_id IN ({marks}) "
                    "ORDER BY id", part):
                try:
                    event = PrivacyEvent.from_dict(json.loads(data))
                except (ValueError, TypeError, ParameterError):
                    raise sqlite3.DatabaseError("malformed event record") from None
                out.setdefault(int(rid), []).append(RecordedEvent(event, recorded, tool, run))
        return {k: tuple(v) for k, v in out.items()}

    def changes(self) -> int:
        """A counter that moves with every change of the store (for caching views)."""
        with self._transaction(write=False) as conn:
            return int(self._meta(conn)["changes"])

    def totals(self) -> dict[str, int]:
        """How many units, releases and events the store holds (sizes only; for benchmarks and tests)."""
        with self._transaction(write=False) as conn:
            return {"units": self._refresh_index(conn),
                    "releases": int(conn.execute("SELECT COUNT(*) FROM releases").fetchone()[0]),
                    "events": int(conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])}

    # ---- the previous format
    def import_legacy(self, texts: Sequence[str], units: Sequence[str], *, tool: str) -> int:
        """Charge the previous-format ledger file of the corpus whose document texts are ``texts`` to its units
        ``units`` (every unit at the file's total ε, one release per recorded event; the file's cap becomes their
        cap), then move the file to ``legacy-imported/``. Returns how many events were imported (0: no file)."""
        digests = sorted(hashlib.sha256(_normalise_legacy(t).encode("utf-8")).digest() for t in texts)
        mac = hmac.new(self._key, _FINGERPRINT_DOMAIN, hashlib.sha256)
        mac.update(len(digests).to_bytes(8, "big"))
        for d in digests:
            mac.update(d)
        path = self.root / f"{mac.hexdigest()}.json"
        if not path.is_file():
            return 0
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != LEGACY_FORMAT:
                raise ValueError("not a previous-format ledger file")
            events = [(PrivacyEvent.from_dict(r["event"]), str(r.get("tool", "?")), r.get("run"))
                      for r in data.get("releases", [])]
            cap = _check_cap(data.get("epsilon_cap"))
        except (OSError, ValueError, KeyError, TypeError, ParameterError):
            raise PrivacyBudgetError(f"The previous-format ledger file {path.name} is damaged; restore it from a "
                                     "backup before importing it. Nothing was spent.") from None
        keys, _ = unique_keys(self.keys(units))
        for event, old_tool, old_run in events:
            label = _check_label(f"{tool} (imported from {old_tool})"[:200].replace("/", " "), "tool", optional=False)
            rid, _ = self.admit(keys, event.epsilon, new_cap=cap, tool=label,
                                run=_check_label(old_run, "run name", optional=True) if old_run else None,
                                what="imported from the previous ledger format", force=True)
            self.record_event(rid, event, tool=label, run=None)
        if cap is not None:
            self.set_cap(keys, cap, tool=_check_label(f"{tool} (imported cap)", "tool", optional=False))
        done = self.root / LEGACY_IMPORTED
        done.mkdir(mode=0o700, exist_ok=True)
        os.replace(path, done / path.name)
        lock = path.with_suffix(".lock")
        if lock.exists():
            with contextlib.suppress(OSError):
                os.replace(lock, done / lock.name)
        return len(events)


def _normalise_legacy(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(str(text).split()))


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "items"):
        return dict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


# ------------------------------------------------------------------------------------------ ledger

@dataclasses.dataclass
class _Pending:
    release_id: int
    remaining: float


class PersistentLedger(PrivacyLedger):
    """A :class:`PrivacyLedger` backed by the persistent unit ledger (drop-in for every mechanism).

    * :meth:`admit` is the individual filter (module docstring): it charges the admitted units at once and returns
      the per-document mask; :meth:`charge` attaches the frozen event to the admission before it (or, with none,
      charges every unit the ledger was opened with).
    * ``cap`` is this run's cap setting (public): the cap of units new to the ledger and the bound of
      :meth:`require` on this run's own total. ``events``, ``total_epsilon``, ``by_step`` and ``to_dict()`` are
      this run's own events (what its privacy report lists).
    * :meth:`view` (and ``corpus_epsilon``, ``corpus_releases``, ``unit_caps``) describe the opened corpus's
      units across every release — PRIVATE, local figures, never part of ``to_dict()``.

    ``tool`` (``"app"``, ``"cli sample"``…) and ``run`` (a run folder *name* or a session label) are recorded with
    every release and may be updated."""

    def __init__(self, store: LedgerStore, units: Sequence[str] = (), *, tool: str, run: str | None = None,
                 cap: float | None = DEFAULT_EPSILON_CAP, unit_name: str = "document") -> None:
        super().__init__(_check_cap(cap))
        if not isinstance(store, LedgerStore):
            raise ParameterError("PersistentLedger needs a LedgerStore.")
        if isinstance(units, str):
            raise ParameterError("PersistentLedger needs the corpus's unit strings, not one string.")
        self._store = store
        self._units = list(units)
        self._corpus_keys: np.ndarray | None = None
        self._view_cache: tuple[Any, CorpusView] | None = None
        self._pending: list[_Pending] = []
        self._pending_lock = threading.Lock()
        self.tool = _check_label(tool, "tool", optional=False)
        self.run = run
        self.unit_name = unit_name  # "document" or "person": the unit's name in messages

    @property
    def run(self) -> str | None:
        return self._run

    @run.setter
    def run(self, value: str | None) -> None:
        self._run = _check_label(value, "run name", optional=True)

    @property
    def store(self) -> LedgerStore:
        return self._store

    @property
    def new_unit_cap(self) -> float:
        """The cap a unit never seen before gets from this run: its cap setting, else the default."""
        return DEFAULT_EPSILON_CAP if self.cap is None else float(self.cap)

    def _keys_of_corpus(self) -> np.ndarray:
        if self._corpus_keys is None:
            self._corpus_keys = unique_keys(self._store.keys(self._units))[0]
        return self._corpus_keys

    # ---- the filter
    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        """Leave out the units whose spend + ``epsilon`` would exceed their cap; charge the others now (DESIGN
        §2.0). A whole release is refused only on public input: an invalid ``epsilon``, or one that would take
        this run's own total over its cap setting. Repeated strings are one unit (a person's documents), charged
        once; the mask is per position of ``units``."""
        epsilon = _check_epsilon(epsilon)
        self.require(epsilon, what)
        if isinstance(units, str):
            raise ParameterError("admit needs one unit string per document, not one string.")
        keys, inverse = unique_keys(self._store.keys(list(units)))
        rid, ok = self._store.admit(keys, epsilon, new_cap=self.new_unit_cap, tool=self.tool, run=self.run, what=what)
        with self._pending_lock:
            self._pending.append(_Pending(rid, epsilon))
        self._view_cache = None
        return ok[inverse] if len(inverse) else np.zeros(0, dtype=bool)

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        """Record ``event`` now, before its noise is drawn: attached to this run's admission it belongs to (the
        oldest one with ε left for it), or — with no admission — charged to every unit the ledger was opened with.
        Refused only on public input (this run's cap setting); an event larger than its admission is a programming
        error (:class:`ParameterError`; the admitted units stay charged)."""
        if not isinstance(event, PrivacyEvent):
            raise ParameterError("Only a PrivacyEvent can be charged to a ledger.")
        self.require(event.epsilon, f"{event.step} ({event.mechanism})")
        with self._pending_lock:
            target = next((p for p in self._pending if event.epsilon <= p.remaining + _FLOAT_SLACK), None)
            if target is None and self._pending:
                raise ParameterError(
                    f"{event.step} ({event.mechanism}) charges ε = {event.epsilon:g}, more than its admission "
                    f"reserved ({max(p.remaining for p in self._pending):g}); admit the release's ε first.")
            if target is not None:
                target.remaining -= event.epsilon
                if target.remaining <= _FLOAT_SLACK:
                    self._pending.remove(target)
        if target is None:
            rid, _ = self._store.admit(self._keys_of_corpus(), event.epsilon, new_cap=self.new_unit_cap, tool=self.tool,
                                       run=self.run, what=f"{event.step} ({event.mechanism})", force=True)
        else:
            rid = target.release_id
        self._store.record_event(rid, event, tool=self.tool, run=self.run)
        self._events.append(event)
        self._view_cache = None
        return event

    # ---- caps
    def set_unit_cap(self, cap: float | None) -> int:
        """Set the cap of every unit of the opened corpus (recorded with this ledger's tool and run); ``None``
        removes it. Returns how many units' cap changed."""
        changed = self._store.set_cap(self._keys_of_corpus(), cap, tool=self.tool, run=self.run)
        self._view_cache = None
        return changed

    # ---- views (PRIVATE, local)
    def view(self) -> CorpusView:
        """The opened corpus's units as the ledger knows them now (cached until the store changes)."""
        changes = self._store.changes()
        key = (changes, self.cap)
        if self._view_cache is None or self._view_cache[0] != key:
            self._view_cache = (key, self._store.view(self._keys_of_corpus(), new_unit_cap=self.new_unit_cap))
        return self._view_cache[1]

    @property
    def corpus_epsilon(self) -> float:
        """The largest ε spent by one unit of the opened corpus, over every release (PRIVATE, local)."""
        return self.view().largest_spend

    @property
    def corpus_releases(self) -> tuple[RecordedEvent, ...]:
        """Every event charged to a release that touched the opened corpus's units (PRIVATE, local)."""
        return self.view().events

    @property
    def unit_caps(self) -> tuple[float | None, float | None]:
        """(smallest, largest) cap among the opened corpus's units (``None``: no cap)."""
        return self.view().cap_range

    def copy(self) -> PrivacyLedger:
        """A detached in-memory snapshot of this run's events under this run's cap setting."""
        return PrivacyLedger(self.cap, self._events)

    def __repr__(self) -> str:
        cap = "∞" if self.cap is None else f"{self.cap:g}"
        return f"PersistentLedger(run ε={self.total_epsilon:g} / {cap}, events={len(self._events)}, units={len(self._units)})"


def open_corpus_ledger(corpus: Any, *, tool: str, run: str | None = None, cap: float | None = DEFAULT_EPSILON_CAP,
                       store: LedgerStore | None = None, by_person: bool | None = None,
                       units: Sequence[str] | None = None) -> PersistentLedger:
    """The persistent ledger seen from one run on ``corpus``: a :class:`~dpkps_core.corpus.Corpus` (its units are
    :func:`dpkps_core.budget.unit_strings`, by person when ``by_person`` — by default when it has a person
    column) or a sequence of unit strings; ``units`` overrides both. ``cap`` is the run's cap setting (module
    docstring: it caps the units new to the ledger and this run's own total; it changes no stored cap — use
    :meth:`PersistentLedger.set_unit_cap` for that)."""
    person = bool(by_person)
    if units is None:
        if hasattr(corpus, "texts") and hasattr(corpus, "labels"):
            from dpkps_core.budget import unit_strings

            person = getattr(corpus, "persons", None) is not None if by_person is None else bool(by_person)
            units = unit_strings(corpus, by_person=person)
        elif isinstance(corpus, str):
            raise ParameterError("open_corpus_ledger needs a corpus or its unit strings, not one string.")
        else:
            units = list(corpus)
    return PersistentLedger(store or LedgerStore(), units, tool=tool, run=run, cap=cap,
                            unit_name="person" if person else "document")
