"""The persistent ledger's folder and key (docs/DESIGN.md §2.0; see :mod:`dpkps_core.ledger_store`): where it lives,
the owner-only secret key, the keyed HMAC of a unit string, and the compact participation bitmaps."""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import hmac
import math
import os
import re
import secrets
import stat
import tempfile
import zlib
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from dpkps_core.errors import ParameterError, PrivacyBudgetError

LEDGER_DIR_ENV = "DPKPS_LEDGER_DIR"
KEY_FILE = "ledger.key"
STORE_FILE = "ledger.sqlite"
LOCK_FILE = "ledger.lock"
LEGACY_IMPORTED = "legacy-imported"
FORMAT = "dpkps-unit-ledger"
VERSION = 2  # 2: per-text document keys, the document-unit spend per key, a ledger id (issue 35)
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


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")



# ------------------------------------------------------------------------------------------ folder and key

def ledger_root(env: Mapping[str, str] | None = None) -> Path:
    """The ledger folder: ``$DPKPS_LEDGER_DIR``, else ``~/.local/share/dpkps/ledgers`` — and no other.

    It is created owner-only (0o700); an existing one is tightened to 0o700. A folder that cannot be used is a
    :class:`PrivacyBudgetError` (falling back elsewhere would start an empty ledger: docs/DESIGN.md §2.0 fails closed)."""
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
            raise ParameterError("A privacy unit is identified by a string (dpkps_core.ledger_store.units.unit_strings).") from None
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

