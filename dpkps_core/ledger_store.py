"""Persistent privacy ledger per private corpus (issue 11 §4; docs/PRIVACY.md "Persistent ledger").

Every DP release on a private corpus — from the app in any session or from any CLI command — is recorded in one
ledger file for that corpus, and the corpus's ε cap is enforced against *all* of them. Reloading the corpus,
choosing another label column, renaming the file or opening a new browser session finds the same ledger, so the
cap cannot be bypassed by starting over.

* **Where.** An owner-only (0700) folder: ``$DPKPS_LEDGER_DIR``, else ``~/.local/share/dpkps/ledgers``, else a
  per-user folder in the temp directory (the same resolution as the app's run folders).
* **Which corpus.** A local fingerprint: HMAC-SHA256, under a random secret key created once in that folder
  (``ledger.key``, 0600), of the multiset of the documents' texts (whitespace-normalised, NFC). It does not
  depend on labels, document order, file name or file format. The fingerprint only names the ledger file; it is
  never written to a run folder, a release bundle, a report or a log (a hash of private data is not DP).
* **What.** Each ledger file holds the corpus's cap (with the history of its changes) and the frozen
  :class:`~dpkps_core.dp.ledger.PrivacyEvent` s with the time they were recorded and what spent them (``app`` or
  ``cli sample``…, and a run folder *name* or session label) — never a corpus path, file name or document text.
* **How.** Every change happens under an exclusive ``fcntl.flock`` on the corpus's lock file: read, check the
  cap, write a temporary file, fsync, ``os.replace`` — so concurrent processes never lose an event and never
  overspend together, and readers always see a whole file.

:class:`PersistentLedger` is a drop-in :class:`~dpkps_core.dp.ledger.PrivacyLedger`: mechanisms call
``require``/``charge`` as before; ``charge`` writes the event to the store at once and refuses when the
corpus's total (all past releases) would go over its cap. ``events``/``total_epsilon``/``to_dict`` describe this
run only (what its privacy report lists); ``corpus_*`` describe the corpus to date.
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
import secrets
import stat
import tempfile
import unicodedata
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from dpkps_core.dp.ledger import _FLOAT_SLACK, PrivacyEvent, PrivacyLedger
from dpkps_core.errors import ParameterError, PrivacyBudgetError

try:  # POSIX; the app and CLI are supported on Linux and macOS
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

LEDGER_DIR_ENV = "DPKPS_LEDGER_DIR"
KEY_FILE = "ledger.key"
FORMAT = "dpkps-corpus-ledger"
VERSION = 1
_FINGERPRINT_DOMAIN = b"dpkps corpus fingerprint v1\x00"
_KEY_BYTES = 32


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


# ------------------------------------------------------------------------------------------ folder and key

def ledger_root(env: Mapping[str, str] | None = None) -> Path:
    """The ledger folder: ``$DPKPS_LEDGER_DIR``, else ``~/.local/share/dpkps/ledgers``, else a per-user temp folder.

    The folder is created owner-only (0o700); an existing one is tightened to 0o700. A folder set through
    ``$DPKPS_LEDGER_DIR`` that cannot be used is an error (falling back elsewhere would start an empty ledger)."""
    env = os.environ if env is None else env
    if env.get(LEDGER_DIR_ENV):
        root = Path(env[LEDGER_DIR_ENV]).expanduser()
        try:
            return _prepare_root(root)
        except OSError as exc:
            raise PrivacyBudgetError(
                f"The privacy ledger folder set by ${LEDGER_DIR_ENV} ({root}) cannot be used "
                f"({exc.strerror or type(exc).__name__}); nothing was spent."
            ) from None
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    candidates = [Path.home() / ".local" / "share" / "dpkps" / "ledgers",
                  Path(tempfile.gettempdir()) / f"dpkps-ledgers-{uid}"]
    for root in candidates:
        try:
            return _prepare_root(root)
        except (OSError, PrivacyBudgetError):
            continue
    raise PrivacyBudgetError(
        f"No folder for the persistent privacy ledger could be created (tried {', '.join(map(str, candidates))}); "
        f"set ${LEDGER_DIR_ENV} to a writable folder. Nothing was spent."
    )


def _prepare_root(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = root.stat()
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        raise PrivacyBudgetError(f"The privacy ledger folder {root} belongs to another user; set ${LEDGER_DIR_ENV} "
                                 "to a folder of your own. Nothing was spent.")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(root, 0o700)
    if not os.access(root, os.W_OK | os.X_OK):
        raise PermissionError(13, "not writable")
    return root


def _read_or_create_key(root: Path) -> bytes:
    """The local secret key (created once, 0o600; creation is atomic, so concurrent first uses agree)."""
    path = root / KEY_FILE
    if not path.exists():
        fd, tmp = tempfile.mkstemp(prefix=".key-", dir=root)  # created 0o600
        try:
            os.write(fd, secrets.token_hex(_KEY_BYTES).encode("ascii"))
            os.fsync(fd)
            os.close(fd)
            try:
                os.link(tmp, path)  # fails if another process created the key first: theirs wins
            except FileExistsError:
                pass
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    st = path.stat()
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o600)
    try:
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (ValueError, UnicodeDecodeError):
        key = b""
    if len(key) < 16:
        raise PrivacyBudgetError(f"The ledger key {path} is damaged; restore it from a backup (without it no corpus "
                                 "finds its ledger). Nothing was spent.")
    return key


def _normalise(text: str) -> str:
    return unicodedata.normalize("NFC", " ".join(str(text).split()))


def corpus_fingerprint(texts: Iterable[str], key: bytes) -> str:
    """HMAC-SHA256 under ``key`` of the multiset of normalised document texts (order-, label- and name-free).

    PRIVATE: identifies a private corpus; it only names ledger files and is never exported or logged."""
    digests = sorted(hashlib.sha256(_normalise(t).encode("utf-8")).digest() for t in texts)
    mac = hmac.new(key, _FINGERPRINT_DOMAIN, hashlib.sha256)
    mac.update(len(digests).to_bytes(8, "big"))
    for d in digests:
        mac.update(d)
    return mac.hexdigest()


# ------------------------------------------------------------------------------------------ records

@dataclasses.dataclass(frozen=True)
class Release:
    """One recorded privacy event: what was spent, when it was recorded, and which tool/run spent it."""

    event: PrivacyEvent
    recorded: str
    tool: str
    run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"recorded": self.recorded, "tool": self.tool, "run": self.run, "event": self.event.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Release":
        return cls(PrivacyEvent.from_dict(data["event"]), str(data.get("recorded", "")), str(data.get("tool", "?")),
                   data.get("run"))


@dataclasses.dataclass(frozen=True)
class CorpusLedgerRecord:
    """The content of one corpus's ledger file."""

    cap: float | None = None
    releases: tuple[Release, ...] = ()
    cap_history: tuple[Mapping[str, Any], ...] = ()
    created: str | None = None

    @property
    def epsilon_total(self) -> float:
        return float(sum(r.event.epsilon for r in self.releases))

    @property
    def delta_total(self) -> float:
        return float(sum(r.event.delta for r in self.releases))

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        return tuple(r.event for r in self.releases)

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "created": self.created, "epsilon_cap": self.cap,
                "cap_history": [dict(c) for c in self.cap_history], "releases": [r.to_dict() for r in self.releases]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CorpusLedgerRecord":
        if data.get("format") != FORMAT or int(data.get("version", 0)) > VERSION:
            raise ValueError("not a ledger file of this version")
        cap = data.get("epsilon_cap")
        return cls(None if cap is None else float(cap), tuple(Release.from_dict(r) for r in data.get("releases", [])),
                   tuple(dict(c) for c in data.get("cap_history", [])), data.get("created"))


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


# ------------------------------------------------------------------------------------------ store

class LedgerStore:
    """The folder of per-corpus ledger files (see the module docstring). Safe across threads and processes."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = ledger_root() if root is None else ledger_root({LEDGER_DIR_ENV: os.fspath(root)})
        self._key: bytes | None = None

    def fingerprint(self, texts: Iterable[str]) -> str:
        """The corpus's PRIVATE fingerprint (never export or log it)."""
        if self._key is None:
            self._key = _read_or_create_key(self.root)
        return corpus_fingerprint(texts, self._key)

    def _path(self, fingerprint: str) -> Path:
        if not (isinstance(fingerprint, str) and len(fingerprint) == 64
                and all(c in "0123456789abcdef" for c in fingerprint)):
            raise ParameterError("A corpus ledger is named by a 64-digit hexadecimal fingerprint.")
        return self.root / f"{fingerprint}.json"

    def exists(self, fingerprint: str) -> bool:
        return self._path(fingerprint).is_file()

    def read(self, fingerprint: str) -> CorpusLedgerRecord:
        """The corpus's ledger (empty when nothing was ever recorded). Files are replaced atomically, so this
        needs no lock."""
        path = self._path(fingerprint)
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return CorpusLedgerRecord()
        except OSError as exc:
            raise PrivacyBudgetError(f"The privacy ledger of this corpus in {self.root} cannot be read "
                                     f"({exc.strerror or type(exc).__name__}); nothing was spent.") from None
        try:
            return CorpusLedgerRecord.from_dict(json.loads(raw))
        except (ValueError, KeyError, TypeError, ParameterError):
            raise PrivacyBudgetError(
                f"The privacy ledger of this corpus (in {self.root}) is damaged; restore it from a backup "
                "before releasing anything more from this corpus (it is never reset silently). Nothing was spent."
            ) from None

    @contextlib.contextmanager
    def _locked(self, fingerprint: str) -> Iterator[CorpusLedgerRecord]:
        path = self._path(fingerprint)
        lock = path.with_suffix(".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield self.read(fingerprint)
        finally:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _write(self, fingerprint: str, record: CorpusLedgerRecord) -> None:
        path = self._path(fingerprint)
        data = json.dumps(record.to_dict(), indent=1, ensure_ascii=False, default=_json_default).encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:8]}-", suffix=".tmp", dir=self.root)
        try:
            with os.fdopen(fd, "wb") as f:  # mkstemp: owner-only 0o600
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        with contextlib.suppress(OSError):  # make the rename durable
            dfd = os.open(self.root, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def append(self, fingerprint: str, event: PrivacyEvent, *, tool: str, run: str | None = None,
               what: str | None = None) -> CorpusLedgerRecord:
        """Record ``event`` for the corpus, refusing (nothing recorded) when it would take the corpus's total over
        its cap. Check and write happen under one lock."""
        if not isinstance(event, PrivacyEvent):
            raise ParameterError("Only a PrivacyEvent can be recorded in a ledger.")
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        with self._locked(fingerprint) as rec:
            _refuse_over_cap(rec, event.epsilon, what or f"{event.step} ({event.mechanism})")
            new = dataclasses.replace(rec, releases=rec.releases + (Release(event, _now(), tool, run),),
                                      created=rec.created or _now())
            self._write(fingerprint, new)
        return new

    def set_cap(self, fingerprint: str, cap: float | None, *, tool: str, run: str | None = None) -> CorpusLedgerRecord:
        """Set (raise, lower or remove) the corpus's cap; the change is kept in the cap history."""
        cap = _check_cap(cap)
        tool = _check_label(tool, "tool", optional=False)
        run = _check_label(run, "run name", optional=True)
        with self._locked(fingerprint) as rec:
            if rec.cap == cap:
                return rec
            change = {"timestamp": _now(), "epsilon_cap": cap, "previous": rec.cap, "tool": tool, "run": run}
            new = dataclasses.replace(rec, cap=cap, cap_history=rec.cap_history + (change,),
                                      created=rec.created or _now())
            self._write(fingerprint, new)
        return new


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "items"):
        return dict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return str(obj)


def _refuse_over_cap(rec: CorpusLedgerRecord, epsilon: float, what: str) -> None:
    if rec.cap is None or rec.epsilon_total + epsilon <= rec.cap + _FLOAT_SLACK:
        return
    raise PrivacyBudgetError(
        f"Running {what} would spend ε = {epsilon:g}, taking this corpus's total over all past releases (app and "
        f"CLI, every session) from {rec.epsilon_total:g} to {rec.epsilon_total + epsilon:g}, over the budget cap of "
        f"{rec.cap:g}; nothing was spent. `python -m dpkps_core ledger --corpus …` lists the past releases; raise "
        "the cap (--epsilon-cap) or lower ε."
    )


# ------------------------------------------------------------------------------------------ ledger

class PersistentLedger(PrivacyLedger):
    """A :class:`PrivacyLedger` backed by the corpus's persistent ledger (drop-in for every mechanism).

    * ``charge`` records the event in the store at once (under a lock) and refuses when the corpus's total over
      all past releases — app or CLI, any session — would exceed the corpus's cap.
    * ``cap`` is the corpus's cap (read from / written to the store); ``remaining``, ``can_afford`` and ``require``
      are against the corpus's total.
    * ``events``, ``total_epsilon``, ``total_delta``, ``by_step`` and ``to_dict()['events']`` are this run's own
      events (what the run's privacy report lists); ``corpus_events``, ``corpus_epsilon``, ``corpus_delta`` and
      ``corpus_releases`` are the corpus's to date, and ``to_dict()['corpus']`` carries its totals.

    ``tool`` (``"app"``, ``"cli sample"``…) and ``run`` (a run folder *name* or a session label) are recorded with
    every event and may be updated (the app's run folder appears after the first release)."""

    def __init__(self, store: LedgerStore, fingerprint: str, *, tool: str, run: str | None = None) -> None:
        super().__init__(None)
        if not isinstance(store, LedgerStore):
            raise ParameterError("PersistentLedger needs a LedgerStore.")
        store._path(fingerprint)  # validates the name
        self._store = store
        self._fingerprint = fingerprint
        self.tool = _check_label(tool, "tool", optional=False)
        self.run = run

    @property
    def run(self) -> str | None:
        return self._run

    @run.setter
    def run(self, value: str | None) -> None:
        self._run = _check_label(value, "run name", optional=True)

    # ---- the corpus (store)
    def record(self) -> CorpusLedgerRecord:
        return self._store.read(self._fingerprint)

    @property
    def cap(self) -> float | None:  # type: ignore[override]
        return self.record().cap

    @cap.setter
    def cap(self, value: float | None) -> None:
        self._store.set_cap(self._fingerprint, value, tool=self.tool, run=self.run)

    @property
    def corpus_releases(self) -> tuple[Release, ...]:
        return self.record().releases

    @property
    def corpus_events(self) -> tuple[PrivacyEvent, ...]:
        return self.record().events

    @property
    def corpus_epsilon(self) -> float:
        return self.record().epsilon_total

    @property
    def corpus_delta(self) -> float:
        return self.record().delta_total

    @property
    def remaining(self) -> float | None:
        rec = self.record()
        return None if rec.cap is None else max(rec.cap - rec.epsilon_total, 0.0)

    def can_afford(self, epsilon: float) -> bool:
        rec = self.record()
        return rec.cap is None or rec.epsilon_total + epsilon <= rec.cap + _FLOAT_SLACK

    def require(self, epsilon: float, what: str = "this step") -> None:
        """Raise :class:`PrivacyBudgetError` if spending ``epsilon`` would take the corpus over its cap."""
        _refuse_over_cap(self.record(), float(epsilon), what)

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        """Record ``event`` in the corpus's ledger now (refused, nothing recorded, when over the cap)."""
        self._store.append(self._fingerprint, event, tool=self.tool, run=self.run)
        self._events.append(event)
        return event

    # ---- views
    def copy(self) -> PrivacyLedger:
        """A detached in-memory snapshot of this run's events under the corpus's current cap."""
        return PrivacyLedger(self.cap, self._events)

    def to_dict(self) -> dict[str, Any]:
        rec = self.record()
        out = super().to_dict()
        out["epsilon_cap"] = rec.cap
        out["corpus"] = {"epsilon_total": rec.epsilon_total, "delta_total": rec.delta_total,
                         "releases": len(rec.releases), "epsilon_cap": rec.cap}
        return out

    def __repr__(self) -> str:
        rec = self.record()
        cap = "∞" if rec.cap is None else f"{rec.cap:g}"
        return (f"PersistentLedger(run ε={self.total_epsilon:g}, corpus ε={rec.epsilon_total:g} / {cap}, "
                f"events={len(self._events)}/{len(rec.releases)})")


def open_corpus_ledger(texts: Iterable[str] | Any, *, tool: str, run: str | None = None,
                       cap: float | None = None, store: LedgerStore | None = None) -> PersistentLedger:
    """The persistent ledger of the corpus whose documents are ``texts`` (a sequence of strings or a
    :class:`~dpkps_core.corpus.Corpus`), seen from one run. ``cap``, when given, sets the corpus's cap."""
    docs: Sequence[str] | Iterable[str] = getattr(texts, "texts", texts)
    if isinstance(docs, str):
        raise ParameterError("open_corpus_ledger needs the documents' texts, not one string.")
    store = store or LedgerStore()
    led = PersistentLedger(store, store.fingerprint(docs), tool=tool, run=run)
    if cap is not None and led.cap != _check_cap(cap):
        led.cap = cap
    return led
