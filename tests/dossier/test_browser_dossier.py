"""Both editions of the dossier from page 8 in a real browser (issue 34 "Done when"): the real app (``streamlit run
app.py``) in headless Chromium lists three runs made by the CLI — an uploaded-corpus-like run (private file name,
columns and person ids planted as canaries; documents, evaluation, audit report, disclosure test, overlay), a
plain-CSV run and a public demo run (demo:drugs with GloVe) —, opens the demo and the uploaded-corpus run as reopened
runs (no corpus loaded: the dossier comes from the run folder alone), views
the internal edition on the page, downloads both editions as HTML, JSON and PDF, looks at each in Chromium, and
checks that the bundle the page offers holds the release edition and never the internal one, even when the
internal edition was saved into the run folder.

Screenshots and the downloaded files are saved under ``$DPKPS_TEST_ARTIFACTS/dossier`` (default
``test-artifacts/dossier``). Chromium missing: the test fails, naming the install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from dossier_helpers import CANARIES, pdf_page_texts, require_chromium, visible_text

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.assets]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("DPKPS_TEST_ARTIFACTS") or ROOT / "test-artifacts") / "dossier"
TIMEOUT_MS = 120_000
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def served(dossier_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    """The app on a free port, its runs root holding copies of the two runs (the canary one with a disclosure test
    and an overlay added, as page 7 writes them)."""
    import sys

    require_chromium()
    sys.path.insert(0, str(ROOT / "tests"))
    from browser_server import streamlit_server

    from dpkps_core.evaluation.disclosure import disclosure_for_run, write_disclosure
    from dpkps_core.evaluation.run import load_run

    tmp = tmp_path_factory.mktemp("browser-dossier")
    runs = tmp / "runs"
    runs.mkdir(mode=0o700)
    canary = runs / dossier_runs["canary"].name
    shutil.copytree(dossier_runs["canary"], canary)
    shutil.copytree(dossier_runs["cli"], runs / "run-20260101-110000-cli000-000000")
    demo = runs / "run-20260102-090000-demo01-abcdef"  # a public demo run (demo:drugs, GloVe), seeded
    with pytest.MonkeyPatch.context() as mp:
        import dpkps_core.cli.sample as sample_cli
        from eval_toys import BowEmbedder

        from dpkps_core.cli import main

        mp.setattr(sample_cli, "get_embedder", lambda name, **kw: BowEmbedder())
        mp.setenv("DPKPS_CACHE_DIR", str(tmp / "cache"))
        mp.setenv("DPKPS_LEDGER_DIR", str(tmp / "ledgers"))
        assert main(["sample", "--corpus", "demo:drugs", "--vocabulary", "glove", "--vocab-max-terms", "20000",
                     "--eps-voc", "5", "--eps-kde", "5", "--seed", "1", "--noise-sampler", "numpy", "--vocab-size",
                     "200", "--per-class", "3", "--length", "5", "--out", str(demo)]) == 0
    write_disclosure(disclosure_for_run(load_run(canary)), canary)
    points = [{"x": float(i % 9), "y": float(i % 7), "source": "real", "label": "sport"} for i in range(30)]
    points += [{"x": float(i % 8) + 0.4, "y": float(i % 5), "source": "synthetic", "label": c}
               for i, c in enumerate(["sport", "tech", "business"] * 6)]
    (canary / "projection.json").write_text(json.dumps({"private": True, "method": "tsne", "points": points}))
    env = {**os.environ, "DPKPS_RUNS_DIR": str(runs), "DPKPS_LEDGER_DIR": str(tmp / "ledgers"),
           "DPKPS_TEST_FAST": "1", "DPKPS_WARMUP": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1"}
    with streamlit_server(env, tmp / "streamlit.log") as url:
        yield {"url": url, "canary": canary, "demo": demo}


def test_both_editions_from_page_8_in_chromium(served: dict, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    from dpkps_core.errors import ExportError
    from dpkps_core.dossier.export import check_allowed

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    canary: Path = served["canary"]
    got: dict[str, Path] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=require_chromium(), headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1500}, accept_downloads=True)
        page.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)

        def idle() -> None:
            page.wait_for_timeout(300)
            page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
            page.wait_for_timeout(200)

        def download(label: str, name: str) -> Path:
            idle()
            with page.expect_download() as info:
                page.get_by_role("button", name=label, exact=True).first.click()
            target = ARTIFACTS / name
            info.value.save_as(target)
            wanted = name.split("__")[-1]
            assert info.value.suggested_filename.endswith(wanted), (info.value.suggested_filename, wanted)
            return target

        def open_run(run: Path, *, reload: bool = False) -> None:
            """Page 8 with ``run`` chosen in "Open a run" (a reopened run: no corpus is loaded in this session)."""
            page.goto(served["url"] + "/export") if not reload else page.reload()
            expect(page.get_by_role("heading", name="8 · Export").first).to_be_visible()
            idle()
            page.get_by_test_id("stSelectbox").filter(has_text="Open a run").first.click()
            page.get_by_role("option", name=re.compile(re.escape(run.name))).first.click()
            idle()

        # the public demo run: both editions downloaded and looked at
        demo: Path = served["demo"]
        open_run(demo)
        for label, name in (("Download: Release dossier (HTML)", "dossier.html"),
                            ("Download: Internal dossier (HTML)", "dossier_internal.html")):
            got[f"demo:{name}"] = download(label, f"demo-run__{name}")
        # the uploaded-corpus run
        open_run(canary)
        expect(page.get_by_text("Release dossier", exact=True).first).to_be_visible()
        expect(page.get_by_text(re.compile("INTERNAL, NOT FOR RELEASE")).first).to_be_visible()
        expect(page.get_by_text(re.compile(r"Disclosure test:.*NO EVIDENCE OF LEAKAGE")).first).to_be_visible()
        for label, name in (("Download: Release dossier (HTML)", "dossier.html"),
                            ("Download: Release dossier (JSON)", "dossier.json"),
                            ("Download: Internal dossier (HTML)", "dossier_internal.html"),
                            ("Download: Internal dossier (JSON)", "dossier_internal.json")):
            got[name] = download(label, f"upload-run__{name}")
        for edition, name in (("Release", "dossier.pdf"), ("Internal", "dossier_internal.pdf")):
            idle()
            page.get_by_role("button", name=f"Make: {edition} dossier (PDF)").first.click()
            got[name] = download(f"Download: {edition} dossier (PDF)", f"upload-run__{name}")
        # the internal edition viewed on the page, under its PRIVATE mark
        idle()
        page.get_by_text("View the internal dossier here (private)").first.click()
        idle()
        expect(page.get_by_text(re.compile("the internal edition, INTERNAL — NOT FOR RELEASE")).first).to_be_visible()
        frame = page.frame_locator("iframe").last
        expect(frame.get_by_text("INTERNAL — NOT FOR RELEASE").first).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "page8_dossier_panel.png"), full_page=True)

        # the export: the internal edition saved into the run folder stays out of the bundle the page offers
        shutil.copy(got["dossier_internal.html"], canary / "dossier_internal.html")
        open_run(canary, reload=True)
        got["bundle.zip"] = download("Download the release bundle (ZIP)", "upload-run__bundle.zip")

        # each edition looked at in Chromium, as a reader opens the downloaded file
        for key, prefix in (("dossier.html", "upload-run"), ("dossier_internal.html", "upload-run"),
                            ("demo:dossier.html", "demo-run"), ("demo:dossier_internal.html", "demo-run")):
            name = key.split(":")[-1]
            page.goto(got[key].resolve().as_uri())
            page.wait_for_load_state("load")
            page.screenshot(path=str(ARTIFACTS / f"{prefix}__{name}.png"))
            page.screenshot(path=str(ARTIFACTS / f"{prefix}__{name}.full.png"), full_page=True)
        browser.close()

    release_html = got["dossier.html"].read_text(encoding="utf-8")
    internal_html = got["dossier_internal.html"].read_text(encoding="utf-8")
    # the release edition: DP outputs and public inputs only — no canary, no private finding
    for name in ("dossier.html", "dossier.json"):
        text = got[name].read_text(encoding="utf-8")
        assert not [v for v in CANARIES.values() if v in text], name
        assert "INTERNAL" not in text and "isclosure" not in text and "SHA-256 of the corpus" not in text, name
        assert "content_sha256" not in text and "c0ffee" not in text, name  # the app's planted fingerprint
    assert "Adding or removing any one person" in visible_text(release_html)
    # the internal edition: marked private, with its findings
    internal = json.loads(got["dossier_internal.json"].read_text(encoding="utf-8"))
    assert internal["edition"] == "internal" and internal["internal"]["disclosure"] is not None
    assert internal["internal"]["overlay"]["synthetic"] == 18
    assert "INTERNAL — NOT FOR RELEASE" in internal_html and "Overlay of real and synthetic documents" in internal_html
    # the PDFs a real engine printed, the internal one marked on every page
    pages = pdf_page_texts(got["dossier_internal.pdf"].read_bytes())
    assert all("INTERNALNOTFORRELEASE" in "".join(p.split()).replace("—", "") for p in pages)
    assert got["dossier.pdf"].read_bytes().startswith(b"%PDF-")
    # the export refuses the internal edition: not in the bundle, and refused when asked for by name
    with zipfile.ZipFile(got["bundle.zip"]) as zf:
        names = {Path(n).name for n in zf.namelist()}
    assert "dossier.html" in names and not names & {"dossier_internal.html", "dossier_internal.json",
                                                   "dossier_internal.pdf", "disclosure.json", "projection.json"}
    for name in ("dossier_internal.html", "dossier_internal.json", "dossier_internal.pdf"):
        with pytest.raises(ExportError, match="never exported"):
            check_allowed(name)
    # the demo run: a public corpus, named with its licence; its internal edition marked private
    demo_release = got["demo:dossier.html"].read_text(encoding="utf-8")
    assert "the public demo corpus demo:drugs" in demo_release and "CC BY 4.0" in demo_release
    assert "INTERNAL" not in demo_release
    assert "INTERNAL — NOT FOR RELEASE" in got["demo:dossier_internal.html"].read_text(encoding="utf-8")
    for shot in ("page8_dossier_panel.png", "upload-run__dossier.html.png", "upload-run__dossier_internal.html.png",
                 "demo-run__dossier.html.png", "demo-run__dossier_internal.html.png"):
        assert (ARTIFACTS / shot).stat().st_size > 20_000, shot
