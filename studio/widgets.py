"""Shared Streamlit widgets: bound inputs, error guard, login gate, sidebar ledger, job monitor, navigation."""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Mapping
from typing import Any, Callable, Iterator

import streamlit as st

from dpkps_core.errors import DPKPSError
from studio import PAGES, fast_mode, jobs, session

log = logging.getLogger("dpkps.studio")

PRIVATE_BADGE = ":red-badge[:material/lock: private — local only, never exported]"
DP_BADGE = ":green-badge[:material/verified_user: DP output — safe to release]"
#: Badge of the EXACT previews (forecast, method preview, ε sweep, Ṽ recall) on true counts (docs/PRIVACY.md
#: "Previews that steer choices"): choosing settings from them is a use of the data ε does not cover.
EXACT_BADGE = ":orange-badge[:material/lock_open: private, local — not covered by ε]"
#: Session key of the switch that shows the exact previews (off by default).
EXACT_PREVIEWS_KEY = "exact_previews"


def exact_previews_switch(where: str) -> bool:
    """The badged switch "private, local — not covered by ε" (off by default; one setting for every page).

    The default previews are DP (a charged ε_forecast) or DP post-processing; the exact ones read true counts
    of the private corpus, so a setting chosen from them is outside the ledger's ε."""
    st.session_state.setdefault(EXACT_PREVIEWS_KEY, False)
    st.markdown(EXACT_BADGE)
    wkey = widget_key(f"{EXACT_PREVIEWS_KEY}.{where}")
    st.session_state[wkey] = bool(st.session_state[EXACT_PREVIEWS_KEY])

    def sync() -> None:
        st.session_state[EXACT_PREVIEWS_KEY] = bool(st.session_state[wkey])

    st.toggle("Show exact previews on the true counts (private, local — not covered by ε)", key=wkey, on_change=sync,
              help="Off (default): previews come from the DP forecast release, which is on the ledger. On: previews "
                   "read the exact private counts; choosing ε, N or a method from them is a use of the data that ε "
                   "does not cover (docs/PRIVACY.md).")
    return bool(st.session_state[EXACT_PREVIEWS_KEY])


def exact_previews_on() -> bool:
    """Whether the user turned the exact previews on (False by default)."""
    return bool(st.session_state.get(EXACT_PREVIEWS_KEY, False))


# ------------------------------------------------------------------------------------------- bound widgets

def widget_key(key: str) -> str:
    return f"_w.{key}"


def bound(widget: Callable[..., Any], label: str, key: str, *, on_change: Callable[[], None] | None = None,
          **kwargs: Any) -> Any:
    """A widget that mirrors the plain session key ``key`` (state survives leaving the page).

    The widget gets its own key (``_w.<key>``), is initialised from ``st.session_state[key]`` on every run and
    copies its value back in ``on_change``."""
    wkey = widget_key(key)
    st.session_state[wkey] = st.session_state[key]

    def sync() -> None:
        st.session_state[key] = st.session_state[wkey]
        if on_change is not None:
            on_change()

    return widget(label, key=wkey, on_change=sync, **kwargs)


# ------------------------------------------------------------------------------------------- errors

@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Show a user error (DPKPSError) as ``st.error`` with its one-sentence message, never a traceback."""
    try:
        yield
    except DPKPSError as exc:
        st.error(str(exc), icon=":material/error:")


def show_unexpected(exc: BaseException) -> None:
    """Last-resort handler: one line for the user; frames (no message: it could quote data) to the server log."""
    log.error("unexpected %s\n%s", type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)))
    st.error(f"Something went wrong ({type(exc).__name__}). Nothing was released; the server log has the "
             "details. Reload the page to continue.", icon=":material/error:")


def show_notices() -> None:
    notices = st.session_state.get("notices") or []
    for n in notices:
        st.info(n, icon=":material/info:")
    st.session_state["notices"] = []


# ------------------------------------------------------------------------------------------- authentication

def auth_configured() -> bool:
    """True when ``st.secrets`` has an ``[auth]`` section (OIDC via st.login)."""
    try:
        return "auth" in st.secrets
    except Exception:  # noqa: BLE001 - no secrets file at all
        return False


def _providers() -> list[str | None]:
    try:
        section = st.secrets["auth"]
    except Exception:  # noqa: BLE001
        return [None]
    named = [k for k, v in section.items() if isinstance(v, Mapping)]
    return named or [None]


def require_login() -> bool:
    """When authentication is configured, only a logged-in user gets past this; else everyone does."""
    if not auth_configured():
        return True
    try:
        logged_in = bool(st.user.get("is_logged_in", False))
    except Exception:  # noqa: BLE001
        logged_in = False
    if logged_in:
        return True
    st.title("DP-KPS Studio")
    st.info("This deployment requires signing in. Your corpus and results stay in your own session.",
            icon=":material/lock:")
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
        st.caption(f"Signed in as {who}")
        if st.button("Log out", key="logout"):
            st.logout()


# ------------------------------------------------------------------------------------------- sidebar

def sidebar() -> None:
    """The run's state — on every page (the privacy ledger's lines above it are app.py's)."""
    s = st.session_state
    if s.get("seeded_demo"):
        st.warning("Reproducible demo: noise is SEEDED — NOT FOR RELEASE.", icon=":material/warning:")
    st.subheader("Run")
    c = s.get("corpus")
    pv = s.get("pv")
    outcome = s.get("outcome")
    job = s.get("job_generation")
    docs = len(session.documents()) if outcome is not None else 0
    items = [
        (c is not None, f"Corpus: {c.name} ({len(c):,} documents)" if c is not None else "Corpus"),
        (pv is not None, f"Private vocabulary: {len(pv):,} terms" if pv is not None else "Private vocabulary"),
        (s.get("dp_density") is not None, f"Densities: {s['density_meta']['method']}" if s.get("dp_density") is not None
         else "Densities"),
        (outcome is not None, f"Sequences: {len(outcome.sequences):,}" if outcome is not None else "Sequences"),
        (docs > 0, f"Documents: {docs:,}" + (" (writing…)" if isinstance(job, jobs.Job) and job.running else "")
         if outcome is not None else "Documents"),
    ]
    st.markdown("\n".join(f"- {':green[:material/check_circle:]' if ok else ':gray[:material/radio_button_unchecked:]'} "
                          f"{text}" for ok, text in items))
    rd = s.get("run_dir")
    if rd:
        st.caption(f"Run folder: `{rd}` (owner-only)")
    if fast_mode():
        st.caption("Test fast mode (DPKPS_TEST_FAST=1).")
    user_box()


# ------------------------------------------------------------------------------------------- flow

def page_header(index: int, intro: str) -> None:
    spec = PAGES[index]
    st.title(f"{spec.icon} {spec.title}")
    st.caption(intro)
    show_notices()


def next_button(index: int, *, enabled: bool = True, help: str | None = None) -> None:
    """Go to the next step."""
    if index + 1 >= len(PAGES):
        return
    nxt = PAGES[index + 1]
    if st.button(f"Next: {nxt.title.split('·', 1)[-1].strip()} →", type="primary", disabled=not enabled,
                 help=help, key=f"next.{index}"):
        st.switch_page(nxt.path)


def go_to(index: int, label: str | None = None) -> None:
    spec = PAGES[index]
    st.page_link(spec.path, label=label or f"Go to {spec.title}", icon=spec.icon)


def job_monitor(key: str, *, body: Callable[[jobs.Job], None] | None = None, cancel_label: str = "Cancel") -> None:
    """Live progress of a background :class:`jobs.Job` (polls every second while it runs)."""
    job = st.session_state.get(key)
    if not isinstance(job, jobs.Job):
        return
    poll_key = f"{key}.polling"

    @st.fragment(run_every=1.0 if job.running else None)
    def panel() -> None:
        j = st.session_state.get(key)
        if not isinstance(j, jobs.Job):
            return
        if j.running:
            st.session_state[poll_key] = True
            st.progress(j.fraction, text=j.message)
            if j.cancelled:
                st.caption("Cancelling after the item in flight; finished work is kept.")
            else:
                st.button(cancel_label, key=f"cancel.{key}", icon=":material/stop_circle:", on_click=j.cancel.set)
        elif st.session_state.get(poll_key):
            st.session_state[poll_key] = False
            st.rerun()
        if body is not None:
            body(j)

    panel()
