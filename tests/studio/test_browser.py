"""The real app in headless Chromium: the default flow from the demo corpus to a downloaded release bundle.

Starts ``streamlit run app.py`` on a free localhost port WITHOUT test fast mode, so the DP steps run on the real
defaults (BBC News, N = 1,000, 20 sequences per class); only the LLM step is kept short through the page's own
inputs (2 documents of 32 tokens). Drives it with Playwright's sync API and Debian's ``/usr/bin/chromium``,
checks what a privacy officer needs to see on each page (issue 14: a readable forecast chart, ε as risk, why
names are in Ṽ, the method outlook, the non-document share, the abandoned-steps note), downloads the bundle,
checks its files and saves one screenshot per page under ``test-artifacts/screenshots/`` (so the next walk
starts from pictures).

Chromium missing: the test FAILS when ``CI`` is set (CI must install it: ``apt-get install -y chromium``) and is
skipped with that reason otherwise.
"""

from __future__ import annotations

import json
import os
import re
import time
import zipfile
from pathlib import Path

import browser_server
import pytest
from browser_server import CHROMIUM_ARGS, SHOTS, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STEP_TIMEOUT_MS = 180_000  # the real defaults on 2 shared CPU cores


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory):
    browser_server.require_chromium()
    tmp = tmp_path_factory.mktemp("browser")
    env = {k: v for k, v in os.environ.items() if k != "DPKPS_TEST_FAST"}  # the real defaults (issue 14)
    env.update({"DPKPS_RUNS_DIR": str(tmp / "runs"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1",
                # the corpus's persistent ledger lives with this test: earlier walks must not fill its cap
                "DPKPS_LEDGER_DIR": str(tmp / "ledgers")})
    with streamlit_server(env, tmp / "streamlit.log") as url:
        yield url


def test_default_flow_in_chromium(app_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=browser_server.CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1600}, accept_downloads=True)
        page.set_default_timeout(STEP_TIMEOUT_MS)
        expect.set_options(timeout=STEP_TIMEOUT_MS)

        def heading(text: str) -> None:
            expect(page.get_by_role("heading", name=text).first).to_be_visible(timeout=STEP_TIMEOUT_MS)

        def idle() -> None:
            """Wait until no script run is in progress and every plotly chart has drawn."""
            page.wait_for_timeout(250)
            page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
            page.wait_for_function(
                "() => Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"]'))"
                ".every(e => e.querySelector('.main-svg'))")
            page.wait_for_timeout(150)

        def click(name: str) -> None:
            idle()
            page.get_by_role("button", name=name).first.click()

        def next_page(label: str, title: str) -> None:
            """Press a "Next: …" button and wait for the next page's heading. A click that lands between a
            background job's last progress refresh and its closing rerun can be dropped by Streamlit (the user
            clicks again): the walk clicks again too, up to three times (navigation spends nothing)."""
            for _ in range(3):
                idle()
                if page.get_by_role("button", name=label).count() == 0:
                    break  # the next page is on its way
                page.get_by_role("button", name=label).first.click()
                try:
                    expect(page.get_by_role("heading", name=title).first).to_be_visible(timeout=30_000)
                    return
                except AssertionError:
                    continue
            heading(title)

        def set_number(label: str, value: int) -> None:
            idle()
            box = page.get_by_label(label).first
            box.fill(str(value))
            box.press("Enter")
            idle()

        def chart_layout(y_title_start: str) -> dict:
            """The drawn plotly layout (axis ranges as the browser shows them) of the chart whose y-axis title starts
            with ``y_title_start`` (Streamlit draws chart titles itself, outside plotly's layout)."""
            js = """(t) => { for (const el of document.querySelectorAll('.js-plotly-plot')) {
                    const L = el._fullLayout; const y = L && L.yaxis && L.yaxis.title ? String(L.yaxis.title.text) : '';
                    if (y.startsWith(t)) return {x: L.xaxis.range, y: L.yaxis.range, xtype: L.xaxis.type}; }
                  return null; }"""
            for _ in range(60):  # charts below the fold are drawn once scrolled into view
                page.mouse.wheel(0, 800)
                found = page.evaluate(js, y_title_start)
                if found:
                    return found
                page.wait_for_timeout(500)
            return None

        def shot(name: str) -> None:
            idle()
            print(f"{name}: {time.monotonic() - T0:.1f}s", flush=True)
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

        try:
            T0 = time.monotonic()
            page.goto(app_url)
            heading("1 · Corpus")
            expect(page.get_by_text("2,125").first).to_be_visible()          # BBC documents, private summary
            expect(page.get_by_text("private — local only").first).to_be_visible()
            shot("1_corpus")
            next_page("Next: Vocabulary & budget →", "2 · Vocabulary & budget")
            expect(page.get_by_text("50,000 public terms").first).to_be_visible()  # |V|: GloVe, 50k most frequent
            expect(page.get_by_text("As a risk to one document.").first).to_be_visible()  # §10: ε in plain words
            click("DP forecast (spends ε_forecast")                           # the default: a charged DP release
            expect(page.get_by_text("Expected noise share of Ṽ").first).to_be_visible()
            idle()
            lay = chart_layout("number of public terms")                       # the forecast chart
            assert lay is not None and lay["xtype"] == "log"
            assert 10 ** lay["x"][1] < 1e6 and 10 ** lay["y"][1] < 1e7, lay  # §1: not 10^21; the data fills the axes
            shot("2_budget")
            next_page("Next: Private vocabulary →", "3 · Private vocabulary")
            click("Build Ṽ (spends ε_voc = 5)")
            expect(page.get_by_text("Ṽ — the private vocabulary")).to_be_visible()
            expect(page.get_by_text("5.2 / 20").first).to_be_visible()         # sidebar ledger: ε_forecast + ε_voc
            expect(page.get_by_text("Why is a name in Ṽ?").first).to_be_visible()  # §12
            shot("3_private_vocabulary")
            next_page("Next: Keyphrase densities →", "4 · Keyphrase densities")
            expect(page.get_by_text("Compare the methods before spending ε_kde").first).to_be_visible()  # the DP outlook
            click("Build densities (spends ε_kde = 5)")
            expect(page.get_by_text("Highest-density terms per class").first).to_be_visible()
            expect(page.get_by_text("10.2 / 20").first).to_be_visible()      # ε_forecast + ε_voc + ε_kde
            shot("4_densities")
            next_page("Next: Sequences →", "5 · Sequences")
            click("Sample 100 sequences (free)")
            expect(page.get_by_text("100 sequences", exact=True)).to_be_visible()
            click("Run the no-LLM check")
            expect(page.get_by_text("Real keyphrase baseline").first).to_be_visible()
            shot("5_sequences")
            next_page("Next: Write with an LLM →", "6 · Write with an LLM")
            expect(page.get_by_text("Exact prompt for the first sequence")).to_be_visible()
            set_number("Max tokens per document", 32)                          # generation stays short
            set_number("Write documents for the first", 2)
            click("Write documents (2 to go)")
            expect(page.get_by_text(re.compile(r"\d document\(s\) written"))).to_be_visible(timeout=300_000)
            expect(page.get_by_text("Non-documents:").first).to_be_visible(timeout=300_000)  # §5: the share is shown
            shot("6_generate")
            next_page("Next: Evaluate →", "7 · Evaluate")
            shot("7_evaluate")
            next_page("Next: Export →", "8 · Export")
            expect(page.get_by_text("What is released, at what ε")).to_be_visible()
            expect(page.get_by_text("includes abandoned steps").first).to_be_visible()  # §4
            expect(page.get_by_text("Runs on this machine").first).to_be_visible()
            shot("8_export")
            with page.expect_download() as info:
                click("Download the release bundle (ZIP)")
            target = tmp_path / "bundle.zip"
            info.value.save_as(target)
        except Exception:
            page.screenshot(path=str(SHOTS / "failure.png"), full_page=True)  # where the walk stopped
            raise
        browser.close()

    with zipfile.ZipFile(target) as zf:
        names = set(zf.namelist())
        assert {"documents.csv", "documents.jsonl", "documents.parquet", "sequences.jsonl", "privacy_report.json",
                "privacy_report.md", "run_config.json", "private_vocabulary.json", "audit_log.jsonl",
                "manifest.json"} <= names
        assert "split.json" not in names and "evaluation.json" not in names
        report = json.loads(zf.read("privacy_report.json"))
        # the run's releases: the DP forecast that steered the choices (0.2), Ṽ (5) and the densities (5)
        assert report["epsilon_total"] == pytest.approx(10.2)
        assert {e["step"] for e in report["events"]} == {"forecast", "vocabulary", "kde"}
        assert report["seed_policy"] == "os-entropy"
        docs = [json.loads(x) for x in zf.read("documents.jsonl").decode().splitlines() if x.strip()]
        seqs = [json.loads(x) for x in zf.read("sequences.jsonl").decode().splitlines() if x.strip()]
        assert 1 <= len(docs) <= 2 and len(seqs) == 100
        assert all(d["text"].strip() for d in docs)
    assert len(list(SHOTS.glob("*.png"))) >= 8


def test_missing_chromium_fails_rather_than_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(browser_server, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        browser_server.require_chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        browser_server.require_chromium()
