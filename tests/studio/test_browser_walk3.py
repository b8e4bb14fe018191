"""Walk 3, walked again in headless Chromium (issue 33 "Done when": a second walk of the same journeys, screenshots
looked at, finds none of the findings).

One ``streamlit run app.py`` in test fast mode with its own run folder root and persistent ledger; each test a fresh
tab (a new session). The journeys of the walk:

* §5 + §1 — an uploaded clinical-notes CSV (124 notes, 66 patients, shared boilerplate): the ``patient_id`` column is
  suggested as the person column and said to be; with the person unit, page 2's DP forecast at ε_forecast = 0.2 on
  87-odd training notes never gives a green "Likely usable" — it says the corpus is too small (or the verdict
  uncertain) at that ε_forecast;
* §4 + §3 — page 6 offers "Write documents" at once (no calibration batch first) with an estimate of what remains;
  a reload while the writer runs reattaches to it (progress and Cancel) and no message holds an absolute path.

Screenshots: ``test-artifacts/screenshots/walk3_*.png``.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from browser_server import CHROMIUM, CHROMIUM_ARGS, ROOT, SHOTS, AppTab, require_chromium, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SPECIALTIES = ("cardiology", "oncology", "neurology")
BOILERPLATE = "Patient seen in clinic today. History reviewed with the patient and family."
FINDINGS = {
    "cardiology": ["chest pain on exertion", "atrial fibrillation with rapid ventricular response", "elevated troponin",
                   "echocardiogram shows reduced ejection fraction", "hypertension poorly controlled"],
    "oncology": ["biopsy confirms adenocarcinoma", "second cycle of chemotherapy tolerated", "tumour marker rising",
                 "metastatic lesions on the scan", "referral for radiotherapy planning"],
    "neurology": ["recurrent migraine with aura", "new onset seizure overnight", "numbness in the left arm",
                  "tremor worse at rest", "memory complaints reported by the family"],
}


def clinical_notes(path: Path) -> Path:
    """124 notes of 66 patients (1–3 notes each), three specialties, a shared boilerplate sentence."""
    rows = []
    note = 0
    for patient in range(66):
        specialty = SPECIALTIES[patient % 3]
        for k in range(1 + (patient % 3 == 0) + (patient % 5 == 0)):
            if note == 124:
                break
            finding = FINDINGS[specialty][(patient + k) % 5]
            rows.append({"note_text": f"{BOILERPLATE} Assessment: {finding}. Plan discussed; follow up in "
                                      f"{2 + (patient + k) % 6} weeks.",
                         "specialty": specialty, "patient_id": f"MRN{100000 + patient}"})
            note += 1
    while len(rows) < 124:  # top up to the walk's 124 notes with second notes of the first patients
        patient = len(rows) % 66
        specialty = SPECIALTIES[patient % 3]
        rows.append({"note_text": f"{BOILERPLATE} Review: {FINDINGS[specialty][len(rows) % 5]}. Stable.",
                     "specialty": specialty, "patient_id": f"MRN{100000 + patient}"})
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["note_text", "specialty", "patient_id"])
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_chromium()
    tmp = tmp_path_factory.mktemp("walk3")
    env = dict(os.environ)
    env.update({"DPKPS_TEST_FAST": "1", "DPKPS_RUNS_DIR": str(tmp / "runs"), "DPKPS_LEDGER_DIR": str(tmp / "ledgers"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
    with streamlit_server(env, ROOT / "test-artifacts" / "walk3_streamlit.log") as url:
        yield {"url": url, "tmp": tmp}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS + ["--headless"])
        yield b
        b.close()


def no_absolute_path(tab: AppTab, server: dict[str, Any]) -> None:
    """No message on the page holds an absolute path of this machine (issue 33 §3)."""
    body = tab.text()
    for root in (str(server["tmp"]), str(ROOT), os.path.expanduser("~")):
        assert root not in body, f"an absolute path ({root}) is shown on the page"


def _run(tab: AppTab, body) -> None:
    try:
        body()
    except Exception:
        tab.page.screenshot(path=str(SHOTS / f"walk3_{tab.name}_failure.png"), full_page=True)
        raise
    finally:
        tab.page.close()


def test_an_uploaded_notes_file_gets_its_person_column_and_an_honest_dp_forecast(server: dict, browser: Any) -> None:
    """§5: patient_id is suggested and kept; §1: a small corpus under the person unit never gets a green verdict
    from the DP forecast at ε_forecast = 0.2 (the noise swamps 87-odd training notes)."""
    tab = AppTab(browser, server["url"], "notes", prefix="walk3")
    notes = clinical_notes(server["tmp"] / "clinical_notes.csv")

    def body() -> None:
        tab.open()
        tab.page.get_by_text("Upload my corpus").first.click()
        tab.idle()
        tab.page.locator('[data-testid="stFileUploader"] input[type="file"]').first.set_input_files(str(notes))
        tab.see("Person column (optional")
        tab.see(re.compile("“patient_id” was suggested from its name"))           # §5: suggested, and said so
        tab.shot("columns")
        tab.click("Load this corpus")
        tab.see(re.compile("Summary of"))
        tab.page.get_by_text("I confirm these class names are public").first.click()
        tab.click("Declare these classes public")
        tab.shot("loaded")
        tab.nav("Vocabulary & budget")
        tab.click(re.compile(r"^DP forecast \(spends ε_forecast"))
        tab.see(re.compile(r"Too small to forecast at ε_forecast|Uncertain at ε_forecast|The verdict holds"))
        tab.shot("forecast")
        verdict = tab.page.get_by_text(re.compile(r"Too small to forecast|Uncertain at ε_forecast|The verdict holds"))
        said = verdict.first.inner_text()
        green = tab.page.locator('[data-testid="stAlertContentSuccess"]')
        if "The verdict holds" not in said:                                      # §1: never green from noise
            assert green.filter(has_text=re.compile("forecast|usable", re.I)).count() == 0, said
        no_absolute_path(tab, server)

    _run(tab, body)


def test_page_6_is_usable_at_once_and_a_reload_reattaches_to_the_writer(server: dict, browser: Any) -> None:
    """§4: "Write documents" and its estimate appear without a calibration batch; §3: a reload mid-generation shows
    the running job's progress and a Cancel, and no message names an absolute path."""
    tab = AppTab(browser, server["url"], "writer", prefix="walk3")

    def body() -> None:
        tab.open()
        tab.nav("Private vocabulary")
        tab.click(re.compile(r"^Build Ṽ \(spends ε_voc"))
        tab.see("Ṽ — the private vocabulary")
        tab.nav("Keyphrase densities")
        tab.click(re.compile(r"^Build densities \(spends ε_kde"))
        tab.see("Highest-density terms per class")
        tab.nav("Sequences")
        tab.click(re.compile(r"^Sample \d+ sequences \(free\)"))
        tab.nav("Write with an LLM")
        write = tab.page.get_by_role("button", name=re.compile(r"^Write documents \(\d+ to go\)")).first
        tab.expect(write).to_be_visible(timeout=30_000)                          # §4: usable at once
        tab.see(re.compile(r"about .*(s|min)\b"))                                  # an estimate of what remains
        tab.shot("page6_ready")
        box = tab.page.get_by_label(re.compile("Write documents for the first")).first
        box.fill("6")
        box.press("Enter")
        tab.idle()
        tab.page.get_by_role("button", name=re.compile(r"^Write documents \(\d+ to go\)")).first.click()
        tab.see(re.compile(r"Cancel"), timeout=60_000)
        tab.page.reload()                                                          # §3: mid-generation
        tab.expect(tab.page.get_by_role("heading", name="6 · Write with an LLM").first).to_be_visible()
        running = tab.page.get_by_role("button", name=re.compile("Cancel"))
        finished = tab.page.get_by_text(re.compile(r"of 6 documents in the run folder"))
        tab.expect(running.or_(finished).first).to_be_visible(timeout=60_000)    # reattached (or already done)
        tab.shot("after_reload")
        if running.count():  # reattached while it writes: the box shows the running job's 6, not the default
            box = tab.page.get_by_label(re.compile("Write documents for the first")).first
            assert box.input_value() == "6", box.input_value()
        assert "Another generation is already writing into" not in tab.text()
        no_absolute_path(tab, server)
        tab.expect(finished.first).to_be_visible(timeout=300_000)
        tab.shot("finished")

    _run(tab, body)
