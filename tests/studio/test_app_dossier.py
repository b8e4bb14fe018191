"""Page 8's dossier and page 7's disclosure test in the app (issue 34 §1, §2), through Streamlit's AppTest.

An uploaded toy corpus is taken through Ṽ, densities and sequences; the run's documents are then written by hand
(a stand-in for the LLM: thirty verbatim copies of training rows and four fresh sentences), so that the disclosure
test on page 7 has leakage to find. Page 8 then offers both editions of the dossier: the release edition (DP outputs
and public inputs; in the bundle) and the PRIVATE internal edition (the disclosure test, the ledger's left-out
counts and ε to date per unit, the corpus fingerprint), which the bundle never holds — for the current run and for
the same run reopened in a fresh session."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from app_helpers import (state_of, assert_clean, click, fake_umap_module, goto, new_app, toy_csv, upload_corpus,
                         wait_job,
                         walk)
from app_helpers import fast_env  # noqa: F401 (fixture)

from dpkps_core.evaluation.disclosure import DISCLOSURE_FILE
from dpkps_core.records.runfolder import INTERNAL_DOSSIER_FILES

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fast_env")]

IDENTIFIER = "Zanzibarovich"


def _downloads(at) -> dict[str, object]:
    return {d.proto.label: d for d in at.get("download_button")}


def test_disclosure_on_page_7_and_both_dossier_editions_on_page_8(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "umap", fake_umap_module())
    at = new_app()
    upload_corpus(at, toy_csv(20), "ward_notes.csv")
    walk(at, "sequences")
    s = state_of(at)
    run = Path(s.run.run_dir)
    corpus, split = s.loaded.corpus, s.loaded.split
    train = [corpus.texts[i] for i in split.train][:30]
    docs = [{"id": f"copy-{k}", "label": corpus.labels[split.train[k]], "keyphrases": [],
             "text": t + f" {IDENTIFIER}" * (k == 0), "model": "test"} for k, t in enumerate(train)]
    docs += [{"id": f"fresh-{k}", "label": "tech", "keyphrases": [], "model": "test",
              "text": f"A short synthetic note number {k} about a phone update."} for k in range(4)]
    with (run / "documents.jsonl").open("a", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps(d) + "\n")
    at.run()

    # ---- page 7: the disclosure test (private, local) finds the copies beyond chance
    goto(at, "evaluate")
    at.text_area(key="disclosure_ids").input(IDENTIFIER).run()
    click(at, "Run the disclosure test")
    job = wait_job(at, "disclosure")
    assert job.error is None, job.error
    assert_clean(at)
    result = json.loads((run / DISCLOSURE_FILE).read_text(encoding="utf-8"))
    assert result["train_matched"] >= 5 > result["holdout_matched"]
    assert result["leakage"] and result["verdict"].startswith("leakage")
    assert result["settings"]["identifiers"] == 1 and IDENTIFIER not in (run / DISCLOSURE_FILE).read_text()
    assert (run / DISCLOSURE_FILE).stat().st_mode & 0o777 == 0o600
    assert any("LEAKAGE" in e.value for e in list(at.warning) + list(at.error))
    # the overlay job keeps its t-SNE points in the run folder (owner-only) for the internal dossier
    click(at, "Draw t-SNE and UMAP overlays")
    assert wait_job(at, "projection").error is None
    projection = run / "projection.json"
    assert projection.stat().st_mode & 0o777 == 0o600
    points = json.loads(projection.read_text(encoding="utf-8"))["points"]
    assert {p["source"] for p in points} == {"real", "synthetic"}

    # ---- page 8: both editions, the internal one private and never in the bundle
    goto(at, "export")
    assert_clean(at)
    labels = list(_downloads(at))
    for label in ("Download: Release dossier (HTML)", "Download: Release dossier (JSON)",
                  "Download: Internal dossier (HTML)", "Download: Internal dossier (JSON)"):
        assert label in labels, labels
    assert any("INTERNAL, NOT FOR RELEASE" in m.value for m in at.markdown)
    from dpkps_core.dossier import build_dossier

    # the page builds the internal edition with the ledger of the loaded corpus: its private lines say so
    private = [m.value for m in at.markdown if "**Ledger:**" in m.value or "**Disclosure test:**" in m.value]
    assert any("unit(s) left out of this run's releases" in v and "ε to date per unit" in v for v in private), private
    assert any("**Disclosure test:** LEAKAGE" in v for v in private), private
    internal = build_dossier(run, edition="internal").content["internal"]
    assert internal["disclosure"]["leakage"] is True and "content_sha256" in internal["fingerprint"]
    assert internal["overlay"]["synthetic"] == len(docs) and internal["overlay"]["method"] == "tsne"
    release = build_dossier(run, edition="release").to_html()
    # nothing computed on private data (the synthetic documents it samples are DP post-processing, copies or not)
    assert "isclosure" not in release and "ward_notes" not in release and "left out of this run" not in release
    # viewing either edition on the page draws it in a frame, nothing breaks
    at.toggle(key=f"dossier.view.release.{run.name}").set_value(True).run()
    at.toggle(key=f"dossier.view.internal.{run.name}").set_value(True).run()
    assert_clean(at)
    assert any("the internal edition, **INTERNAL — NOT FOR RELEASE**" in m.value for m in at.markdown)
    # the bundle the page offers holds the release edition and nothing private
    from studio import runs

    bundle = zipfile.ZipFile(io.BytesIO(runs.bundle_for(state_of(at), str(run))))
    names = {Path(n).name for n in bundle.namelist()}
    assert {"dossier.html", "dossier.json", "reproduce.md", "reproduce_config.json"} <= names
    assert not names & (set(INTERNAL_DOSSIER_FILES) | {DISCLOSURE_FILE, "projection.json", "evaluation.json"})

    # ---- the same run reopened in a fresh session (no corpus loaded): the dossier comes from the folder alone
    at2 = new_app()
    goto(at2, "export")
    at2.selectbox(key="_w.export_run").set_value(str(run)).run()
    assert_clean(at2)
    assert "Download: Internal dossier (HTML)" in _downloads(at2)
    assert any("**Disclosure test:** LEAKAGE" in m.value for m in at2.markdown)  # from the run folder alone
    assert not any("**Ledger:**" in m.value for m in at2.markdown)  # no corpus loaded: nothing claimed
