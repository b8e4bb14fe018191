"""AppTest: optional OIDC login. With an [auth] section every page needs a logged-in user; without, no login."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from studio.state import STATE_KEY

from app_helpers import state_of, APP, PAGES_SPECS_FIRST_TITLE, TIMEOUT

pytestmark = [pytest.mark.assets]

AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "not-a-real-secret-0123456789",
        "client_id": "studio", "client_secret": "xyz", "server_metadata_url": "https://idp.example/.well-known/x"}


@pytest.fixture(autouse=True)
def _fast_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))


def app(secrets: dict | None = None, user: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if secrets is not None:
        at.secrets.update(secrets)
    if user is not None:
        at.user = user
    return at.run()


def test_without_auth_section_the_app_runs_as_usual() -> None:
    at = app()
    assert not at.exception
    assert at.title[0].value.endswith(PAGES_SPECS_FIRST_TITLE)
    assert not [b for b in at.button if b.label.startswith("Log in")]
    assert state_of(at).loaded.corpus_id == "demo:bbc"


def test_auth_configured_and_logged_out_shows_only_the_login() -> None:
    at = app({"auth": AUTH}, {"is_logged_in": False})
    assert not at.exception
    assert [t.value for t in at.title] == ["DP-KPS Studio"]
    assert [b.label for b in at.button] == ["Log in"]
    assert STATE_KEY not in at.session_state                            # no page ran: no session state
    assert not at.sidebar.children or not at.sidebar.markdown
    at.button[0].click().run()                                          # Authlib missing here: a clear message
    assert not at.exception
    assert all("Traceback" not in e.value for e in at.error)


def test_auth_with_named_providers_offers_each() -> None:
    auth = {k: v for k, v in AUTH.items() if k in ("redirect_uri", "cookie_secret")}
    auth["google"] = {k: v for k, v in AUTH.items() if k not in ("redirect_uri", "cookie_secret")}
    at = app({"auth": auth}, {"is_logged_in": False})
    assert [b.label for b in at.button] == ["Log in with google"]


def test_the_login_screen_says_what_login_guarantees() -> None:
    """Issue 35 §1: the old claim ("Your corpus and results stay in your own session.") was not true; the screen
    now says what tenancy guarantees (docs/PRIVACY.md "Tenancy")."""
    at = app({"auth": AUTH}, {"is_logged_in": False})
    note = " ".join(i.value for i in at.info)
    assert "stay in your own session" not in note
    assert "cannot list, reopen, download or delete your runs" in note and "count your releases only" in note
    assert "Administrators" in note and "read-only" in note


def test_a_signed_in_user_without_a_subject_is_refused() -> None:
    """A tenant is keyed by the provider's stable subject, never the email: without one, no page runs."""
    at = app({"auth": AUTH}, {"is_logged_in": True, "email": "officer@example.org"})
    assert not at.exception
    assert any("stable subject" in e.value for e in at.error)
    assert STATE_KEY not in at.session_state                            # no page ran: no session state


def test_auth_configured_and_logged_in_runs_every_page() -> None:
    at = app({"auth": AUTH}, {"is_logged_in": True, "email": "officer@example.org", "sub": "officer-1",
                              "iss": "https://idp.example"})
    assert not at.exception
    assert at.title[0].value.endswith(PAGES_SPECS_FIRST_TITLE)
    assert any("Signed in as officer@example.org" in c.value for c in at.sidebar.caption)
    assert [b.label for b in at.sidebar.button] == ["Log out"]
    at.switch_page("app_pages/8_export.py").run()
    assert not at.exception and at.title[0].value.endswith("8 · Export")
