"""The real app in headless Chromium: the default flow from the demo corpus to a downloaded release bundle.

Starts ``streamlit run app.py`` on a free localhost port (test fast mode: 2 sequences per class, 2 documents of
16 tokens), drives it with Playwright's sync API and Debian's ``/usr/bin/chromium``, downloads the bundle, checks
its files and saves one screenshot per page under ``test-artifacts/screenshots/``.

Chromium missing: the test FAILS when ``CI`` is set (CI must install it: ``apt-get install -y chromium``) and is
skipped with that reason otherwise.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
STEP_TIMEOUT_MS = 90_000


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _require_chromium() -> None:
    """scripts/test.sh installs Debian's chromium when it is missing; without it this test fails (never skips)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; install it with `apt-get install -y chromium` (scripts/test.sh does "
                    "this as root)." + (" (CI=true: the browser test must run)" if _in_ci() else ""))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory):
    _require_chromium()
    tmp = tmp_path_factory.mktemp("browser")
    port = _free_port()
    env = {**os.environ, "DPKPS_TEST_FAST": "1", "DPKPS_RUNS_DIR": str(tmp / "runs"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    log = open(tmp / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port), "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://localhost:{port}"
    deadline = time.monotonic() + 90
    while True:
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.read().strip() == b"ok":
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            log.close()
            pytest.fail("streamlit did not start:\n" + (tmp / "streamlit.log").read_text()[-3000:])
        time.sleep(0.5)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_default_flow_in_chromium(app_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
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

        def shot(name: str) -> None:
            idle()
            print(f"{name}: {time.monotonic() - T0:.1f}s", flush=True)
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

        T0 = time.monotonic()
        page.goto(app_url)
        heading("1 · Corpus")
        expect(page.get_by_text("2,127").first).to_be_visible()          # BBC documents, private summary
        expect(page.get_by_text("private — local only").first).to_be_visible()
        shot("1_corpus")
        click("Next: Vocabulary & budget →")

        heading("2 · Vocabulary & budget")
        expect(page.get_by_text("50,000 public terms").first).to_be_visible()  # |V|: GloVe, 50k most frequent
        shot("2_budget")
        click("Next: Private vocabulary →")

        heading("3 · Private vocabulary")
        click("Build Ṽ (spends ε_voc = 5)")
        expect(page.get_by_text("Ṽ — the private vocabulary")).to_be_visible()
        expect(page.get_by_text("5 / 20").first).to_be_visible()           # sidebar ledger
        shot("3_private_vocabulary")
        click("Next: Keyphrase densities →")

        heading("4 · Keyphrase densities")
        click("Build densities (spends ε_kde = 5)")
        expect(page.get_by_text("Highest-density terms per class").first).to_be_visible()
        expect(page.get_by_text("10 / 20").first).to_be_visible()
        shot("4_densities")
        click("Next: Sequences →")

        heading("5 · Sequences")
        click("Sample 10 sequences (free)")
        expect(page.get_by_text("10 sequences", exact=True)).to_be_visible()
        shot("5_sequences")
        click("Next: Write with an LLM →")

        heading("6 · Write with an LLM")
        expect(page.get_by_text("Exact prompt for the first sequence")).to_be_visible()
        click("Write documents (2 to go)")
        expect(page.get_by_text("2 document(s) written")).to_be_visible(timeout=180_000)
        shot("6_generate")
        click("Next: Evaluate →")

        heading("7 · Evaluate")
        shot("7_evaluate")
        click("Next: Export →")

        heading("8 · Export")
        expect(page.get_by_text("What is released, at what ε")).to_be_visible()
        shot("8_export")
        with page.expect_download() as info:
            click("Download the release bundle (ZIP)")
        target = tmp_path / "bundle.zip"
        info.value.save_as(target)
        browser.close()

    with zipfile.ZipFile(target) as zf:
        names = set(zf.namelist())
        assert {"documents.csv", "documents.jsonl", "documents.parquet", "sequences.jsonl", "privacy_report.json",
                "privacy_report.md", "run_config.json", "private_vocabulary.json", "audit_log.jsonl",
                "manifest.json"} <= names
        assert "split.json" not in names and "evaluation.json" not in names
        report = json.loads(zf.read("privacy_report.json"))
        assert report["epsilon_total"] == pytest.approx(10.0)
        assert report["seed_policy"] == "os-entropy"
        docs = [json.loads(x) for x in zf.read("documents.jsonl").decode().splitlines() if x.strip()]
        seqs = [json.loads(x) for x in zf.read("sequences.jsonl").decode().splitlines() if x.strip()]
        assert len(docs) == 2 and len(seqs) == 10
        assert all(d["text"].strip() for d in docs)
    assert len(list(SHOTS.glob("*.png"))) >= 8


def test_missing_chromium_fails_rather_than_skips(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        _require_chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        _require_chromium()
