"""Tenancy (docs/DESIGN.md §2.0 "Tenancy"; docs/PRIVACY.md "Tenancy"): whose runs and whose ledger a session sees.

* **Without login** (no ``[auth]`` section in the app's secrets) there is one tenant, the local user: the runs root
  (:func:`dpkps_core.records.runfolder.runs_root`) and the ledger folder (:func:`dpkps_core.ledger_store.ledger_root`)
  exactly as they are.
* **With login** each signed-in identity is a tenant, keyed by its identity provider's *stable subject*
  (``st.user["sub"]``, qualified by the issuer ``iss`` when the provider gives one) — never the display name or the
  email, which can change or be shared. A tenant's runs are under ``<runs root>/tenants/<tenant id>/`` and its
  ledger is its own store in ``<ledger root>/tenants/<tenant id>/`` (its own key, its own caps): listing, reopening,
  downloading and deleting runs, and every ledger figure, see that tenant only. The tenant id is a one-way,
  domain-separated SHA-256 digest of issuer and subject (no raw subject in a path). A signed-in user whose
  provider gives no subject is refused (never filed under a shared folder).
* **Administrators** (privacy officers): the subjects listed in the app's secrets, ``[dpkps] admins = ["<subject>",
  "<issuer>|<subject>", …]`` (the issuer-qualified form is exact when several providers are configured), see every
  tenant's runs and ledger totals read-only (page 8) — the only view of totals across tenants.

A session is bound to the tenant of its first script run (:func:`bind_session`); should the signed-in identity
change within a session, the session starts afresh, so nothing of one tenant's session reaches another.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import streamlit as st

from dpkps_core.errors import PrivacyBudgetError
from dpkps_core.ledger_store import STORE_FILE, LedgerStore, ledger_root, unique_keys
from dpkps_core.records.runfolder import RunSummary, list_runs, runs_root as base_runs_root
from studio.state import existing_session_state, reset_session, session_state

#: The sub-folder of the runs root and of the ledger root that holds one folder per tenant.
TENANTS_DIR = "tenants"
#: In a tenant's runs folder: how the app named the user when the folder was made (for administrators; local).
TENANT_FILE = "tenant.json"
_ID_DOMAIN = b"dpkps tenant v1\x00"
_TENANT_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclasses.dataclass(frozen=True)
class Tenant:
    """Who the session belongs to. ``id`` is ``None`` for the local user (no login): the folders as they are."""

    id: str | None
    label: str
    admin: bool = False

    @property
    def signed_in(self) -> bool:
        return self.id is not None


LOCAL = Tenant(None, "local user")


def tenant_id(subject: str, issuer: str | None = None) -> str:
    """The tenant id of an identity: 32 hex digits of SHA-256 over a domain tag, the issuer and the subject (one-way;
    the same identity always maps to the same folders, whatever its display name or email)."""
    if not isinstance(subject, str) or not subject.strip():
        raise PrivacyBudgetError("A signed-in identity needs a subject to be a tenant; nothing was read or spent.")
    data = _ID_DOMAIN + (issuer or "").encode("utf-8") + b"\x00" + subject.encode("utf-8")
    return hashlib.sha256(data).hexdigest()[:32]


# ------------------------------------------------------------------------------------------ who is signed in

def login_configured() -> bool:
    """True when ``st.secrets`` has an ``[auth]`` section (OIDC via ``st.login``)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def _user() -> Mapping[str, Any]:
    try:
        return st.user.to_dict() if hasattr(st.user, "to_dict") else dict(st.user)
    except Exception:  # noqa: BLE001 - no script context
        return {}


def identity() -> tuple[str | None, str] | None:
    """(issuer or ``None``, subject) of the signed-in user; ``None`` when nobody is signed in or the provider gave no
    subject."""
    user = _user()
    sub = user.get("sub")
    if not user.get("is_logged_in") or not isinstance(sub, str) or not sub.strip():
        return None
    iss = user.get("iss")
    return (str(iss) if iss else None), sub


def _admins() -> set[str]:
    try:
        entries = st.secrets["dpkps"].get("admins", [])
    except Exception:  # noqa: BLE001 - no [dpkps] section
        return set()
    if isinstance(entries, str):
        entries = [entries]
    return {str(e).strip() for e in entries or () if str(e).strip()}


def _resolve() -> Tenant:
    if not login_configured():
        return LOCAL
    who = identity()
    if who is None:
        raise PrivacyBudgetError("No signed-in identity with a subject: the app cannot tell whose runs and budgets "
                                 "to show. Nothing was read or spent.")
    iss, sub = who
    user = _user()
    label = str(user.get("email") or user.get("name") or "signed in")
    admins = _admins()
    return Tenant(tenant_id(sub, iss), label, admin=sub in admins or (iss is not None and f"{iss}|{sub}" in admins))


def bind_session() -> Tenant:
    """Each script run, before the session is initialised: the tenant of the signed-in identity. A session whose
    identity changed (another account signed in) starts afresh: every key of the previous tenant's session goes."""
    tenant = _resolve()
    state = session_state()
    if isinstance(state.tenant, Tenant) and state.tenant.id != tenant.id:
        state = reset_session()
    state.tenant = tenant
    return tenant


def current() -> Tenant:
    """The session's tenant (bound by :func:`bind_session`; resolved now if the session has none yet). With login
    configured there is never a fallback to the shared folders."""
    state = existing_session_state()
    bound = state.tenant if state is not None else None
    if isinstance(bound, Tenant):
        if login_configured() and not bound.signed_in:
            raise PrivacyBudgetError("Login is configured but this session has no signed-in tenant; nothing was "
                                     "read or spent.")
        return bound
    return _resolve()


# ------------------------------------------------------------------------------------------ the tenant's folders

def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def runs_root() -> Path:
    """The session's runs root: the runs root itself without login, else ``<runs root>/tenants/<tenant id>``
    (owner-only; created on first use with a ``tenant.json`` naming the user, for administrators)."""
    tenant = current()
    base = base_runs_root()
    if not tenant.signed_in:
        return base
    folder = _private_dir(_private_dir(base / TENANTS_DIR) / str(tenant.id))
    note = folder / TENANT_FILE
    if not note.exists():
        fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"label": tenant.label, "first_seen": _dt.datetime.now(_dt.timezone.utc).isoformat(
                timespec="seconds")}, f)
    return folder


def ledger_folder() -> Path | None:
    """The session's ledger folder: ``None`` without login (the configured ledger folder, as it is), else
    ``<ledger root>/tenants/<tenant id>`` — its own store, key and caps. Fails closed like the ledger root."""
    tenant = current()
    if not tenant.signed_in:
        return None
    root = ledger_root()
    try:
        return _private_dir(_private_dir(root / TENANTS_DIR) / str(tenant.id))
    except OSError as exc:
        raise PrivacyBudgetError(f"The privacy ledger folder of this account cannot be used "
                                 f"({exc.strerror or type(exc).__name__}); nothing was spent.") from None


def ledger_store() -> LedgerStore | None:
    """The session's ledger store (``None``: the default store, without login)."""
    folder = ledger_folder()
    return None if folder is None else LedgerStore(folder)


def scope_note() -> str:
    """A sentence for the ledger's figures: whose releases they count (empty without login)."""
    if not current().signed_in:
        return ""
    return ("These figures are your own ledger's: each signed-in account has its own runs and its own ledger, so "
            "they count your releases only; another account that uploads the same documents has a separate budget.")


# ------------------------------------------------------------------------------------------ administrators

@dataclasses.dataclass(frozen=True)
class TenantRecord:
    """One tenant as an administrator sees it (read-only): ``id`` ``None`` is the shared folders (the app without
    login, and runs made before login was configured)."""

    id: str | None
    label: str
    runs: tuple[RunSummary, ...]
    ledger: LedgerStore | None
    ledger_error: str | None = None

    @property
    def short_id(self) -> str:
        return "shared (no login)" if self.id is None else self.id[:12]


def _label(folder: Path) -> str:
    try:
        data = json.loads((folder / TENANT_FILE).read_text(encoding="utf-8"))
        return str(data.get("label") or "?")
    except (OSError, ValueError, AttributeError):
        return "?"


def _ids(base: Path) -> set[str]:
    try:
        return {p.name for p in (base / TENANTS_DIR).iterdir()
                if p.is_dir() and not p.is_symlink() and _TENANT_ID.match(p.name)}
    except OSError:
        return set()


def _open_store(folder: Path) -> tuple[LedgerStore | None, str | None]:
    """An existing store only (an administrator's look creates none)."""
    if not (folder / STORE_FILE).is_file():
        return None, None
    try:
        return LedgerStore(folder), None
    except PrivacyBudgetError as exc:
        return None, str(exc)


def every_tenant() -> list[TenantRecord]:
    """Every tenant's runs and ledger on this server, for an administrator only (read-only; PRIVATE, local)."""
    if not current().admin:
        raise PrivacyBudgetError("Only an administrator named in the app's settings sees other accounts' runs.")
    runs_base, ledger_base = base_runs_root(), ledger_root()
    store, error = _open_store(ledger_base)
    out = [TenantRecord(None, "shared folders (no login)", tuple(list_runs(runs_base)), store, error)]
    for tid in sorted(_ids(runs_base) | _ids(ledger_base)):
        runs_folder = runs_base / TENANTS_DIR / tid
        store, error = _open_store(ledger_base / TENANTS_DIR / tid)
        out.append(TenantRecord(tid, _label(runs_folder), tuple(list_runs(runs_folder)) if runs_folder.is_dir()
                                else (), store, error))
    return out


def spend_across_tenants(records: Sequence[TenantRecord], units: Sequence[str]
                         ) -> tuple[list[tuple[TenantRecord, float, int]], float]:
    """For an administrator: per tenant, the largest ε one of ``units`` (the loaded corpus's unit strings) has spent
    in that tenant's ledger and how many releases touched them; and the largest total of one unit over every
    tenant's ledger (PRIVATE, local; the only place where spends across tenants are added up)."""
    if not current().admin:
        raise PrivacyBudgetError("Only an administrator named in the app's settings sees totals across accounts.")
    total = np.zeros(len(units), dtype=np.float64)
    rows = []
    for record in records:
        if record.ledger is None:
            continue
        keys, inverse = unique_keys(record.ledger.keys(list(units)))
        view = record.ledger.view(keys, new_unit_cap=None)
        total += view.spent[inverse] if len(inverse) else 0.0
        rows.append((record, view.largest_spend, len(view.releases)))
    return rows, float(total.max()) if len(total) else 0.0
