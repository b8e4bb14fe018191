"""AppTest: the whole default flow ("next" all the way through) and two sessions side by side."""

from __future__ import annotations

import io
import json
import stat
import zipfile
from pathlib import Path

import pytest

from dpkps_core.dossier.export import bundle_bytes
from app_helpers import (state_of, assert_clean, click, finish_writing, goto, ledger_total, metrics, new_app, table,
                         toy_csv,
                         private_vocabulary, sequences, upload_corpus, wait_job, walk)

from app_helpers import fast_env  # noqa: E402,F401 (fixture)

def spent(at) -> str:
    """The sidebar's "ε spent / cap" figure (its label names the unit: "Most-used document: ε spent / cap")."""
    found = [m.value for m in at.metric if m.label.endswith("ε spent / cap")]
    assert found, [m.label for m in at.metric]
    return found[0]


pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]




def test_default_flow_next_all_the_way_to_a_bundle(fast_env: Path) -> None:
    at = new_app()
    # 1 — the demo corpus is preselected and loaded on the first visit
    m = metrics(at)
    assert m["Documents"] == "2,125" and m["Classes"] == "5"
    assert table(at, "documents")["documents"].sum() == 2125
    assert spent(at) == "0 / 20"
    assert state_of(at).loaded.corpus_id == "demo:bbc"
    assert len(state_of(at).loaded.split.train) + len(state_of(at).loaded.split.test) == 2125
    click(at, "Next: Vocabulary & budget")
    # 2 — defaults only
    assert at.title[0].value.endswith("2 · Vocabulary & budget")
    m = metrics(at)
    assert (m["ε_voc (vocabulary)"], m["ε_kde (densities)"]) == ("5", "5")
    click(at, "Next: Private vocabulary")
    # 3 — Ṽ (ε_voc = 5 charged)
    click(at, "Build Ṽ (spends ε_voc = 5)")
    m = metrics(at)
    assert m["Terms in Ṽ"] == "200" and spent(at) == "5 / 20"
    assert state_of(at).ledgers["demo:bbc"].by_step() == {"vocabulary": 5.0}
    click(at, "Next: Keyphrase densities")
    # 4 — densities (ε_kde = 5 charged)
    click(at, "Build densities (spends ε_kde = 5)")
    assert spent(at) == "10 / 20"
    assert metrics(at)["Density"] == "histogram"
    click(at, "Next: Sequences")
    # 5 — 2 sequences per class, free
    click(at, "Sample 10 sequences (free)")
    assert len(table(at, "keyphrases")) == 10                     # 2 per class shown, 5 classes
    assert set(table(at, "keyphrases")["class"]) == {"business", "entertainment", "politics", "sports", "tech"}
    assert ledger_total(at) == pytest.approx(10.0)
    run_dir = Path(state_of(at).run.run_dir)
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert (run_dir / "sequences.jsonl").read_text().count("\n") == 10
    click(at, "Next: Write with an LLM")
    # 6 — offline LLM, 2 documents
    assert "Write a short news article that contains the following terms:" in at.code[0].value
    click(at, "Write documents (2 to go)")
    finish_writing(at)
    assert len(table(at, "text")) == 2
    click(at, "Next: Evaluate")
    click(at, "Next: Export")
    # 8 — the bundle
    m = metrics(at)
    assert m["Total ε (pure DP)"] == "10" and m["Noise"] == "OS entropy"
    assert [d.proto.label for d in at.get("download_button")][0] == "Download the release bundle (ZIP)"
    names = set(table(at, "file")["file"])
    assert {"documents.csv", "documents.jsonl", "sequences.jsonl", "privacy_report.json", "manifest.json"} <= names
    assert "split.json" not in names
    report = json.loads((run_dir / "privacy_report.json").read_text())
    assert report["epsilon_total"] == 10 and report["seed_policy"] == "os-entropy"
    # the bytes behind the download button
    with zipfile.ZipFile(io.BytesIO(bundle_bytes(run_dir))) as zf:
        assert set(zf.namelist()) == names
        assert zf.read("documents.jsonl").decode().count("\n") == 2


def test_two_sessions_never_see_each_other(fast_env: Path) -> None:
    a = new_app()
    b = new_app()
    upload_corpus(a, toy_csv(20), "mine.csv")
    assert_clean(a)
    assert metrics(a)["Documents"] == "60"
    walk(a, "sequences")
    assert ledger_total(a) == pytest.approx(10.0)
    # B still sees only the demo corpus, an empty ledger and no outputs
    goto(b, "private-vocabulary")
    assert state_of(b).loaded.corpus_id == "demo:bbc"
    assert spent(b) == "0 / 20"
    assert private_vocabulary(b) is None and sequences(b) is None
    assert state_of(b).run.run_dirs == []
    click(b, "Build Ṽ")
    assert spent(b) == "5 / 20"
    # A's ledger did not move; the two sessions hold different Ṽ and different run folders
    goto(a, "private-vocabulary")
    assert spent(a) == "10 / 20"
    assert private_vocabulary(a).terms != private_vocabulary(b).terms
    mine = "upload:" + state_of(a).loaded.corpus_fingerprint[:16] + ":text:label:"  # no person column
    assert state_of(a).ledgers[mine].total_epsilon == pytest.approx(10.0)
    assert state_of(a).ledgers["demo:bbc"].total_epsilon == 0      # A saw the demo first, spent nothing on it
    assert set(state_of(b).ledgers) == {"demo:bbc"}
    assert state_of(a).token != state_of(b).token
    goto(b, "export")
    # page 8 lists the run folders on this machine (a reloaded tab reopens its run from there), but B holds none of
    # A's outputs until it reopens one, and cannot delete a run it did not make or reopen
    runs = table(b, "run")
    assert state_of(a).run.run_dir.rsplit("/", 1)[-1] in set(runs["run"])
    b.selectbox(key="_w.export_run").set_value(state_of(a).run.run_dir).run()
    assert state_of(a).run.run_dir not in state_of(b).run.run_dirs and sequences(b) is None
    assert next(x for x in b.button if x.label == "Delete this run").disabled
