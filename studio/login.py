"""The login gate (OIDC via ``st.login``, when ``st.secrets`` has an ``[auth]`` section) and the signed-in user's box
in the sidebar. Each signed-in identity is a tenant (``studio.tenancy``, docs/PRIVACY.md "Tenancy")."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st

from studio import page_ref, tenancy


def auth_configured() -> bool:
    """True when ``st.secrets`` has an ``[auth]`` section (OIDC via st.login)."""
    return tenancy.login_configured()


def _providers() -> list[str | None]:
    try:
        section = st.secrets["auth"]
    except Exception:  # noqa: BLE001
        return [None]
    named = [k for k, v in section.items() if isinstance(v, Mapping)]
    return named or [None]


#: What signing in guarantees (docs/PRIVACY.md "Tenancy"), said on the login screen.
LOGIN_NOTE = ("This deployment requires signing in. Each account is kept apart: your runs and your privacy ledger are "
              "your own — other users cannot list, reopen, download or delete your runs, and the budget figures you "
              "see count your releases only (another user who uploads the same documents has a separate budget). "
              "Your uploaded corpus is held in your session's memory on this server, never written to its disk; "
              "your run folders are. Administrators named in the app's settings can see every account's runs and "
              "ledger totals, read-only, and whoever runs the server can read its disk.")


def require_login() -> bool:
    """When authentication is configured, only a logged-in user with a stable subject (a tenant, ``studio.tenancy``)
    gets past this; else everyone does."""
    if not auth_configured():
        return True
    try:
        logged_in = bool(st.user.get("is_logged_in", False))
    except Exception:  # noqa: BLE001
        logged_in = False
    if logged_in and tenancy.identity() is not None:
        return True
    st.title("DP-KPS Studio")
    if logged_in:  # signed in, but the provider gave no subject: no tenant to file runs and budgets under
        st.error("Your identity provider did not give a stable subject (the `sub` claim), so the app cannot keep "
                 "your runs and budgets apart from other users'. Nothing was read or spent; ask the administrator "
                 "to configure a provider that sends it.", icon=":material/error:")
        if st.button("Log out", key="logout.no_subject"):
            st.logout()
        return False
    st.info(LOGIN_NOTE, icon=":material/lock:")
    for provider in _providers():
        label = "Log in" if provider is None else f"Log in with {provider}"
        if st.button(label, type="primary", key=f"login.{provider}"):
            try:
                st.login(provider) if provider else st.login()
            except Exception as exc:  # noqa: BLE001 - e.g. Authlib missing or a bad [auth] section
                st.error(f"Login is configured but could not start ({type(exc).__name__}); check the [auth] "
                         "section of secrets.toml and that Authlib is installed.")
    return False


def user_box() -> None:
    if auth_configured() and st.user.get("is_logged_in", False):
        who = st.user.get("email") or st.user.get("name") or "signed in"
        admin = f" · administrator ({page_ref('export')} shows every account's runs, read-only)"
        st.caption(f"Signed in as {who}" + (admin if tenancy.current().admin else ""))
        if st.button("Log out", key="logout"):
            st.logout()
