"""A privacy officer's walk in headless Chromium (the second pass): paid-for work is never lost and spending is always
deliberate (docs/DESIGN.md §2.0 "charge first"; docs/ARCHITECTURE.md "Run folder").

One ``streamlit run app.py`` in test fast mode (N = 200, 2 sequences per class, 2 LLM documents of 16 tokens) with
its own run folder root and persistent ledger folder; each test is a fresh tab (a new session). The ledger figures
checked are deltas of the ledger store's event count, read from the test process (the same ``DPKPS_LEDGER_DIR``).

* raising the cap asks and is recorded in the ledger's cap history (first: the later walks then have room);
* a bad file after a built run keeps every result;
* a reload, then reopening the run, continues writing and exports with NO new ledger event;
* a triple click spends once;
* a slider change that would discard Ṽ is refused (locked) until an explicit, confirmed "start over".

Screenshots go to ``test-artifacts/screenshots/walk_*.png``.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from browser_server import CHROMIUM, CHROMIUM_ARGS, ROOT, SHOTS, AppTab, require_chromium, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("walk")
    env = dict(os.environ)
    env.update({"DPKPS_TEST_FAST": "1", "DPKPS_RUNS_DIR": str(tmp / "runs"), "DPKPS_LEDGER_DIR": str(tmp / "ledgers"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    # the server log is kept after the run (no private data)
    with streamlit_server(env, ROOT / "test-artifacts" / "walk_streamlit.log") as url:
        yield {"url": url, "ledgers": tmp / "ledgers", "runs": tmp / "runs", "tmp": tmp}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS + ["--headless"])
        yield b
        b.close()


def ledger_events(root: Path) -> int:
    """Events in the server's persistent ledger store (0 before the first release)."""
    from dpkps_core.ledger_store import LedgerStore

    if not (root / "ledger.sqlite").exists():
        return 0
    return LedgerStore(root).totals()["events"]


def cap_history(root: Path) -> list[tuple[float, str]]:
    """(cap, tool) of every recorded cap change in the server's ledger store."""
    import sqlite3

    if not (root / "ledger.sqlite").exists():
        return []
    with sqlite3.connect(root / "ledger.sqlite") as conn:
        return [(float(c), str(t)) for c, t in conn.execute("SELECT cap, tool FROM cap_history ORDER BY id")]


def _run(tab: AppTab, body) -> None:
    try:
        body()
    except Exception:
        tab.page.screenshot(path=str(SHOTS / f"walk_{tab.name}_failure.png"), full_page=True)
        raise
    finally:
        tab.close()


def test_raising_the_cap_asks_and_is_recorded(server: dict, browser: Any) -> None:
    tab = AppTab(browser, server["url"], "cap")

    def body() -> None:
        tab.open()
        tab.nav("Vocabulary & budget")
        tab.see(re.compile("each document's total ε over every release of this corpus"))
        box = tab.page.get_by_label(re.compile(r"^Cap on each document's total ε")).first
        box.fill("60")
        box.press("Enter")
        tab.idle()
        tab.see("Raise the cap from 20 to 60?")
        tab.shot("asks")
        assert cap_history(server["ledgers"]) == []                   # not before the answer
        assert "--epsilon-cap" not in tab.page.inner_text("body")
        tab.click("Raise the cap to 60")
        tab.see(re.compile(r"Cap changed: 60"))
        tab.idle()                                                     # the rest of the run records it
        assert (60.0, "app") in cap_history(server["ledgers"])              # recorded, with who
        tab.see(re.compile(r"Cap changes of this corpus's documents"))     # and shown on the page
        tab.shot("recorded")

    _run(tab, body)


def test_a_bad_file_after_a_built_run_keeps_every_result(server: dict, browser: Any) -> None:
    tab = AppTab(browser, server["url"], "badfile")

    def body() -> None:
        tab.open()
        tab.build_run()
        before = ledger_events(server["ledgers"])
        tab.nav("Corpus")
        tab.page.get_by_text("Upload my corpus").first.click()
        tab.idle()
        for name, data in (("empty.csv", b""), ("binary.csv", bytes(range(256)) * 4),
                           ("latin1.csv", "text,label\ncaf\xe9 au lait,food\n".encode("latin-1"))):
            tab.page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(
                {"name": name, "mimeType": "text/csv", "buffer": data})
            tab.idle()
            tab.see(re.compile(f"{re.escape(name)} cannot be loaded"))
            side = tab.sidebar()
            assert "Private vocabulary: 200 terms" in side and "Sequences: 10" in side, side
            if name == "empty.csv":
                tab.shot("empty_file")
        assert ledger_events(server["ledgers"]) == before
        tab.nav("Sequences")
        tab.see(re.compile(r"^10 sequences$"))                          # the results are all still there
        tab.shot("results_kept")

    _run(tab, body)


def test_a_reload_then_reopening_continues_writing_and_exports_with_no_new_ledger_event(
        server: dict, browser: Any, tmp_path: Path) -> None:
    tab = AppTab(browser, server["url"], "reopen")

    def body() -> None:
        tab.open()
        tab.build_run()
        tab.nav("Write with an LLM")
        tab.click("Write documents (2 to go)")
        tab.expect(tab.page.get_by_text(re.compile(r"of 2 documents in the run folder")).first).to_be_visible(
            timeout=240_000)
        m = re.search(r"[?&]run=([^&]+)", tab.page.url)
        assert m, tab.page.url                                         # the URL names the run folder
        run = m.group(1)
        events = ledger_events(server["ledgers"])
        tab.page.reload()                                              # a new session: the URL reopens the run
        tab.heading("6 · Write with an LLM")
        tab.see(re.compile(f"Reopened the run {run}"))
        tab.shot("after_reload")
        # a second tab without the URL: reopen from the list of runs on this machine
        other = AppTab(browser, server["url"], "reopen_list")
        try:
            other.open()
            other.nav("Export")
            other.see("Runs on this machine")
            other.page.get_by_test_id("stSelectbox").filter(has_text="Open a run").first.click()
            other.page.get_by_role("option", name=re.compile(run)).first.click()
            other.idle()
            other.click("Reopen this run in the app (no new ε)")
            other.see(re.compile(f"Reopened the run {run}"))
            other.shot("reopened_from_list")
            other.nav("Write with an LLM")
            box = other.page.get_by_label(re.compile("Write documents for the first")).first
            box.fill("3")
            box.press("Enter")
            other.idle()
            other.idle()
            other.page.get_by_role("button", name=re.compile(r"^Continue writing \(\d+ to go\)")).first.click()
            other.expect(other.page.get_by_text(re.compile(r"of 3 documents in the run folder")).first).to_be_visible(
                timeout=240_000)
            other.shot("continued")
            other.nav("Export")
            other.see("What is released, at what ε")
            with other.page.expect_download() as info:
                other.click("Download the release bundle (ZIP)")
            target = tmp_path / "bundle.zip"
            info.value.save_as(target)
            other.shot("export")
        finally:
            other.close()
        with zipfile.ZipFile(target) as zf:
            docs = [x for x in zf.read("documents.jsonl").decode().splitlines() if x.strip()]
            assert 1 <= len(docs) <= 3 and "sequences.jsonl" in zf.namelist()  # a reply may fail as a non-document
        assert ledger_events(server["ledgers"]) == events             # reload, reopen, write, export: no release

    _run(tab, body)


def test_a_triple_click_spends_once(server: dict, browser: Any) -> None:
    tab = AppTab(browser, server["url"], "triple")

    def body() -> None:
        tab.open()
        tab.nav("Private vocabulary")
        before = ledger_events(server["ledgers"])
        button = tab.page.get_by_role("button", name=re.compile(r"^Build Ṽ \(spends ε_voc")).first
        box = button.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        tab.page.mouse.click(x, y, click_count=2)                    # a double click…
        tab.page.wait_for_timeout(400)
        tab.page.mouse.click(x, y)                                   # …and a quick third one in the same spot
        tab.idle()
        tab.page.wait_for_timeout(1500)
        tab.idle()
        tab.see("Ṽ — the private vocabulary")
        assert ledger_events(server["ledgers"]) - before == 1, "a triple click spent more than once"
        assert tab.page.get_by_role("button", name=re.compile(r"spends ε_voc = \S+ again")).count() == 0
        tab.shot("spent_once")
        tab.click("Re-run Ṽ…")                                       # the re-run only asks
        tab.see(re.compile(r"Spend ε_voc = \S+ again\?"))
        assert ledger_events(server["ledgers"]) - before == 1
        tab.shot("rerun_asks")

    _run(tab, body)


def test_a_slider_change_that_would_discard_v_is_locked_until_start_over(server: dict, browser: Any) -> None:
    tab = AppTab(browser, server["url"], "slider")

    def body() -> None:
        tab.open()
        tab.build_run(sequences=False)
        tab.nav("Corpus")
        slider = tab.page.get_by_role("slider").first
        assert slider.get_attribute("aria-disabled") == "true" or slider.is_disabled()
        value = slider.get_attribute("aria-valuenow")
        slider.focus()
        tab.page.keyboard.press("ArrowRight")                         # the nudge that used to discard Ṽ
        tab.idle()
        assert slider.get_attribute("aria-valuenow") == value
        assert "Private vocabulary: 200 terms" in tab.sidebar()
        tab.see(re.compile("Locked:"))
        start = tab.page.get_by_role("button", name="Start over")
        assert start.is_disabled()                                    # asks first: a confirmation is needed
        slider.scroll_into_view_if_needed()
        tab.page.screenshot(path=str(SHOTS / "walk_slider_locked.png"))  # the viewport (the main area scrolls)

    _run(tab, body)
