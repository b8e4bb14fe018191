"""The real app for the browser tests (tests/studio/test_browser*.py): Debian's Chromium, and ``streamlit run app.py``
on a free localhost port, waited for until healthy and stopped afterwards."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

import pytest

from benchmarks.app_server import app_server

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_chromium() -> None:
    """scripts/test.sh installs Debian's chromium when it is missing; without it the browser tests fail (never
    skip)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; install it with `apt-get install -y chromium` (scripts/test.sh does "
                    "this as root)." + (" (CI=true: the browser test must run)" if in_ci() else ""))


def streamlit_server(env: Mapping[str, str], log_path: Path, *, start_timeout: float = 90.0,
                     port: int | None = None) -> Any:
    """``streamlit run app.py`` with ``env`` (its output in ``log_path``) on ``port`` (a free one when not given: a
    login test must know it beforehand, for the ``redirect_uri`` of the app's ``[auth]`` secrets); a context that
    yields its URL once ``/_stcore/health`` answers ok (the test fails with the log's tail when it does not start),
    then stops it — the benchmarks' starter (``benchmarks.app_server``), failing the test instead of raising."""
    return app_server(env, log_path, start_timeout=start_timeout, port=port, fail=pytest.fail)


#: How long a browser walk waits for the app (ms).
TIMEOUT_MS = 120_000


class AppTab:
    """One browser tab (one app session) with the moves the browser walks need; screenshots go to
    ``SHOTS/<prefix>_<name>_<label>.png``."""

    def __init__(self, browser: Any, url: str, name: str, *, prefix: str = "walk") -> None:
        from playwright.sync_api import expect

        self.page = browser.new_page(viewport={"width": 1400, "height": 1400}, accept_downloads=True)
        self.page.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        self.expect = expect
        self.url, self.name, self.prefix = url, name, prefix
        SHOTS.mkdir(parents=True, exist_ok=True)

    def idle(self) -> None:
        self.page.wait_for_timeout(300)
        self.page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
        self.page.wait_for_timeout(150)

    def open(self, path: str = "") -> None:
        self.page.goto(self.url + path)
        self.heading("1 · Corpus" if not path else None)

    def heading(self, text: str | None) -> None:
        if text:
            self.expect(self.page.get_by_role("heading", name=text).first).to_be_visible()
        self.idle()

    def nav(self, title: str) -> None:
        """Go to a page through the sidebar's navigation (as a user does)."""
        self.idle()
        self.page.get_by_test_id("stSidebarNav").get_by_text(title, exact=False).first.click()
        self.heading(title)

    def click(self, name: str | re.Pattern[str], *, exact: bool = False) -> None:
        self.idle()
        self.page.get_by_role("button", name=name, exact=exact).first.click()
        self.idle()

    def see(self, text: str | re.Pattern[str], timeout: int = TIMEOUT_MS) -> None:
        self.expect(self.page.get_by_text(text).first).to_be_visible(timeout=timeout)

    def text(self) -> str:
        return self.page.get_by_test_id("stApp").inner_text()

    def sidebar(self) -> str:
        return self.page.get_by_test_id("stSidebar").inner_text()

    def shot(self, label: str) -> None:
        self.idle()
        self.page.screenshot(path=str(SHOTS / f"{self.prefix}_{self.name}_{label}.png"), full_page=True)

    def build_run(self, *, sequences: bool = True) -> None:
        """Ṽ, densities and sequences on the demo corpus (fast mode: 10 sequences)."""
        self.nav("Private vocabulary")
        self.click("Build Ṽ (spends ε_voc")
        self.see("Ṽ — the private vocabulary")
        self.nav("Keyphrase densities")
        self.click("Build densities (spends ε_kde")
        self.see("Highest-density terms per class")
        if sequences:
            self.nav("Sequences")
            self.click("Sample 10 sequences (free)")
            self.see(re.compile(r"^10 sequences$"))

    def close(self) -> None:
        self.page.close()
