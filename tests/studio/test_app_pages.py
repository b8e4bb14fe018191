"""AppTest, page by page: what each step shows and what it charges (real content, not just "no exception")."""

from __future__ import annotations

import io
import json
import stat
import sys
import zipfile
from pathlib import Path

import pytest

from app_helpers import (state_of, assert_clean, button, click, fake_umap_module, finish_writing, goto, ledger_total,
                         metrics,
                         new_app, private_vocabulary, problems, run_folder, sequences, table, toy_csv, toy_records,
                         upload_corpus, wait_job, walk)

from app_helpers import fast_env  # noqa: E402,F401 (fixture)

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]




@pytest.fixture
def fake_umap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "umap", fake_umap_module())


def toy_app():
    at = new_app()
    upload_corpus(at, toy_csv(20), "toy.csv")
    return assert_clean(at)


# ------------------------------------------------------------------------------------------- 1 corpus

def test_page1_demo_summary_upload_and_split() -> None:
    at = new_app()
    m = metrics(at)
    assert (m["Documents"], m["Classes"]) == ("2,125", "5")
    assert dict(zip(table(at, "documents")["class"], table(at, "documents")["documents"])) == {
        "business": 503, "entertainment": 369, "politics": 403, "sports": 503, "tech": 347}
    assert any("private — local only" in md.value for md in at.markdown)
    assert any("1,697 training documents" in c and "keyed hash" in c for c in at.caption.values)
    # another demo corpus
    at.selectbox(key="_w.demo_spec").set_value("demo:drugs-rating").run()
    assert_clean(at)
    assert metrics(at)["Classes"] == "3"
    # an upload with guessed columns
    upload_corpus(at, toy_csv(20, text="review", label="category"), "reviews.csv", load=False)
    assert at.selectbox(key="upload_text_col").value == "review"
    assert at.selectbox(key="upload_label_col").value == "category"
    click(at, "Load this corpus")
    m = metrics(at)
    assert (m["Documents"], m["Classes"]) == ("60", "3")
    assert any("Loaded 60 documents with 3 distinct labels" in s.value for s in at.success)
    # the held-out fraction
    at.slider(key="_w.test_fraction").set_value(0.5).run()
    sp = state_of(at).loaded.split
    assert (len(sp.train), len(sp.test)) == (29, 31)  # each document on its own: about half


def test_page1_zip_of_txt_folders() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i, r in enumerate(toy_records(5)):
            zf.writestr(f"corpus/{r['label']}/{i}.txt", r["text"])
    at = new_app()
    upload_corpus(at, buf.getvalue(), "docs.zip")
    assert_clean(at)
    assert (metrics(at)["Documents"], metrics(at)["Classes"]) == ("15", "3")


# ------------------------------------------------------------------------------------------- 2 budget

def test_page2_budget_split_cap_paper_settings_seed_and_forecast() -> None:
    at = new_app()
    goto(at, "budget")
    assert any("50,000 public terms" in c for c in at.caption.values)  # GloVe, 50k most frequent (the default)
    at.number_input(key="_w.eps_total").set_value(6.0).run()
    at.slider(key="_w.eps_voc_share").set_value(0.25).run()
    m = metrics(at)
    assert (m["ε_voc (vocabulary)"], m["ε_kde (densities)"]) == ("1.5", "4.5")
    explainer = " ".join(md.value for md in at.markdown)
    assert "e^6" in explainer and "403.4×" in explainer          # e^6 ≈ 403.4: the odds bound, in plain numbers
    assert "S/ε_voc = **6.67**" in explainer                      # Laplace scale 10 / 1.5
    assert "between about 5 and 15" in explainer
    # a cap below the plan warns before anything is spent
    at.number_input(key="_w.cap_draft_value").set_value(5.0).run()     # lowering the cap applies at once
    assert any("only 5 is left under the cap" in w.value for w in at.warning)
    # paper settings toggle (and back)
    at.toggle(key="_w.paper_settings").set_value(True).run()
    s = state_of(at)
    assert (s.settings.density, s.settings.bandwidth, s.settings.features, s.settings.junk_filter,
            s.settings.vocab_size) == ("rff", 1.0, 2000, False,
                                                                                               1000)
    assert "I = 2,000 random features" in " ".join(md.value for md in at.markdown)
    at.toggle(key="_w.paper_settings").set_value(False).run()
    assert (state_of(at).settings.density, state_of(at).settings.bandwidth_auto, state_of(at).settings.vocab_size) == (
        "auto", True, 200)
    # reproducible demo: seeded, loudly
    assert state_of(at).settings.seeded_demo is False
    at.checkbox(key="_w.seeded_demo").check().run()
    assert any("NOT FOR RELEASE" in w.value for w in at.warning)
    # forecast: DP by default (charged ε_forecast, in the plan), exact only behind the badged switch (off by default)
    at.number_input(key="_w.cap_draft_value").set_value(20.0).run()
    click(at, "Raise the cap to 20")                                # raising asks first
    assert any("ε_forecast 0.2 (DP forecast, below) + ε_voc 1.5 + ε_kde 4.5" in c for c in at.caption.values)
    assert state_of(at).settings.exact_previews is False
    assert not [b for b in at.button if b.label.startswith("Exact forecast")]
    click(at, "DP forecast (spends ε_forecast = 0.2)")
    assert ledger_total(at) == pytest.approx(0.2)                   # the DP forecast is charged
    assert metrics(at)["Expected noise share of Ṽ"].endswith("%")
    assert state_of(at).results.forecast is None
    at.toggle(key="_w.exact_previews.budget").set_value(True).run()
    assert any("not covered by ε" in md.value for md in at.markdown)
    click(at, "Exact forecast on the true counts")
    f = state_of(at).results.forecast
    assert f.private and not f.covered_by_epsilon and f.eps_voc == 1.5 and f.eps_kde == 4.5
    assert any("disclosure" in c for c in at.caption.values)
    assert len(at.get("plotly_chart")) >= 3
    assert ledger_total(at) == pytest.approx(0.2)                   # the exact preview spends nothing


# ------------------------------------------------------------------------------------------- 3 private vocabulary

def test_page3_builds_rebuilds_charges_and_respects_the_cap() -> None:
    at = toy_app()
    goto(at, "private-vocabulary")
    assert "spends **ε_voc = 5** from the ledger." in at.markdown[0].value or any(
        "spends **ε_voc = 5**" in md.value for md in at.markdown)
    click(at, "Build Ṽ (spends ε_voc = 5)")
    pv = private_vocabulary(at)
    m = metrics(at)
    assert m["Terms in Ṽ"] == f"{len(pv):,}" and m["ε_voc spent for it"] == "5"
    assert m["Most-used document: ε spent / cap"] == "5 / 20"
    assert list(table(at, "noisy count")["term"][:5]) == list(pv.terms[:5])
    assert not [k for k in m if k.startswith("Recall of the true top")]  # exact check: off by default
    at.toggle(key="_w.exact_previews.vocabulary").set_value(True).run()
    recall = [v for k, v in metrics(at).items() if k.startswith("Recall of the true top")]
    assert recall and recall[0].endswith("%")
    assert list(pv.noisy_counts) == sorted(pv.noisy_counts, reverse=True)
    # re-running says it charges again, and does
    assert any("again" in md.value for md in at.markdown)
    click(at, "Re-run Ṽ")                                           # asks first (one intent, one release)
    click(at, "Yes, spend ε_voc = 5 again")
    assert ledger_total(at) == pytest.approx(10.0)
    assert len(state_of(at).ledgers[state_of(at).loaded.corpus_id].events) == 2
    # the cap refuses a third run before anything is spent
    goto(at, "budget")
    at.number_input(key="_w.cap_draft_value").set_value(12.0).run()
    goto(at, "private-vocabulary")
    click(at, "Re-run Ṽ")
    click(at, "Yes, spend ε_voc", clean=False)
    assert any("over the budget cap of 12" in e for e in problems(at))
    assert ledger_total(at) == pytest.approx(10.0)


# ------------------------------------------------------------------------------------------- 4 densities

def test_page4_histogram_then_iterative_rff_and_umap_map(fake_umap: None) -> None:
    at = toy_app()
    walk(at, "private-vocabulary")
    goto(at, "densities")
    assert any("Laplace(1/ε_kde)" in c for c in at.caption.values)
    click(at, "Build densities (spends ε_kde = 5)")
    m = metrics(at)
    assert m["Density"] == "histogram" and m["Noise sd per term"] == "0.283"
    # issue 11 §4: an exact count of the private corpus is never shown under the DP badge
    # the count is a PRIVATE note the step keeps in the session (never in the run folder)
    state_of(at).run.memory.notes[state_of(at).run.run_dir]["density"]["documents_without_keyphrases"] = 3
    at.run()
    counted = [c for c in at.caption.values if "contain no term of Ṽ" in c]
    assert counted and all("private" in c for c in counted)
    assert ledger_total(at) == pytest.approx(10.0)
    assert len(at.get("plotly_chart")) == 1
    # switching the method warns that a rebuild is needed (and charges again)
    at.selectbox(key="_w.method").set_value("iterative-log").run()
    assert any("rebuild to apply" in w.value for w in at.warning)
    at.number_input(key="_w.length").set_value(4).run()
    assert any("ensemble member(s)" in c and "Expected error" in c for c in at.caption.values)
    click(at, "Rebuild the densities")                             # asks first (one intent, one release)
    click(at, "Yes, spend ε_kde = 5 again")
    info = run_folder(at).state["density_info"]
    assert info["density"] == "rff" and info["ensemble_members"] == 3
    m = metrics(at)
    assert m["Random features I"] == f"{info['features']:,}" and float(m["Expected error"]) > 0
    assert ledger_total(at) == pytest.approx(15.0)
    # the UMAP map of Ṽ coloured by a class's DP density
    click(at, "Draw the UMAP map")
    assert state_of(at).results.umap_map.shape == (len(private_vocabulary(at)), 2)
    at.selectbox(key="umap_class").set_value("tech").run()
    fig = json.loads(at.get("plotly_chart")[-1].proto.spec)
    assert fig["layout"]["title"]["text"].endswith("class “tech”")
    assert fig["data"][0]["type"] == "scattergl"


# ------------------------------------------------------------------------------------------- 5 sequences

def test_page5_sequences_resample_free_and_no_llm_check() -> None:
    at = toy_app()
    walk(at, "densities")
    goto(at, "sequences")
    assert "**Method:** independent" in at.markdown[0].value or any("**Method:** independent" in md.value
                                                                    for md in at.markdown)
    at.number_input(key="_w.per_class").set_value(4).run()
    click(at, "Sample 12 sequences (free)")
    seqs = sequences(at)
    assert len(seqs) == 12 and all(len(q["keyphrases"]) == 10 for q in seqs)
    shown = table(at, "keyphrases")
    assert len(shown) == 12 and set(shown["class"]) == {"business", "sport", "tech"}
    lines = (Path(state_of(at).run.run_dir) / "sequences.jsonl").read_text().splitlines()
    assert len(lines) == 12
    report = json.loads((Path(state_of(at).run.run_dir) / "privacy_report.json").read_text())
    assert report["epsilon_total"] == 10 and report["parameters"]["per_class"] == 4
    click(at, "Sample again (free)")
    assert ledger_total(at) == pytest.approx(10.0)                 # post-processing: free
    click(at, "Run the no-LLM check")
    res = state_of(at).results.no_llm
    assert 0 <= res["no_llm_accuracy"] <= 1 and res["n_test"] == 15  # the hash split holds out 15 of 60
    m = metrics(at)
    assert m["No-LLM accuracy"] == f"{res['no_llm_accuracy']:.3g}"
    assert m["Real keyphrase baseline"] == f"{res['real_keyphrase_baseline']:.3g}"


# ------------------------------------------------------------------------------------------- 6 LLM

def test_page6_prompt_preview_few_shot_refusal_generation_and_cancel() -> None:
    at = toy_app()
    walk(at, "sequences")
    goto(at, "generate")
    first = sequences(at)[0]
    assert ", ".join(first["keyphrases"]) in at.code[0].value
    assert "Estimate for the 2 document(s) to go: 2 prompts" in " ".join(at.caption.values)
    # the private corpus file is refused as few-shot examples
    at.file_uploader(key="few_shot_upload").set_value(("examples.csv", toy_csv(20), "text/csv")).run()
    assert any("private corpus" in e for e in problems(at))
    assert not state_of(at).settings.few_shot
    # a public examples file is accepted and appears in the prompt
    public = "text\nA public example document about a rainy weekend in the hills.\n".encode()
    at.file_uploader(key="few_shot_upload").set_value(("public.csv", public, "text/csv")).run()
    assert_clean(at)
    assert "rainy weekend" in at.code[0].value
    # class names in the prompt by default (declared public); the opt-out removes them from the preview
    assert "The document is about:" in at.code[0].value
    at.checkbox(key="_w.include_label").uncheck().run()
    assert "The document is about:" not in at.code[0].value
    at.checkbox(key="_w.include_label").check().run()
    assert "The document is about:" in at.code[0].value
    # write 1 document, then cancel a second job right away: finished documents are kept
    at.number_input(key="_w.n_documents").set_value(1).run()
    click(at, "Write documents (1 to go)")
    finish_writing(at, documents=1)
    assert len(table(at, "text")) == 1
    at.number_input(key="_w.n_documents").set_value(3).run()
    # the estimate is for what remains (3 asked, 1 written), not for documents already written
    assert "Estimate for the 2 document(s) to go: 2 prompts" in " ".join(at.caption.values)
    click(at, "Continue writing (2 to go)")
    state_of(at).jobs.generation.cancel.set()
    job = wait_job(at, "generation")
    assert job.result.already_done == 1 and job.result.done < 3
    assert len(table(at, "text")) == job.result.done
    audit = (Path(state_of(at).run.run_dir) / "audit_log.jsonl").read_text()
    assert "rainy weekend" in audit and "private.csv" not in audit


def test_page6_openai_key_stays_in_the_session() -> None:
    at = toy_app()
    walk(at, "sequences")
    goto(at, "generate")
    at.radio(key="_w.backend").set_value("openai").run()
    at.text_input(key="_w.base_url").input("http://127.0.0.1:9/v1").run()
    at.text_input(key="_w.llm_model").input("tiny").run()
    at.text_input(key="_w.api_key").input("sk-test-secret-123456").run()
    assert_clean(at)
    assert state_of(at).settings.api_key == "sk-test-secret-123456"
    assert "~4 chars/token" in " ".join(at.caption.values)
    run_dir = Path(state_of(at).run.run_dir)
    for p in run_dir.rglob("*"):
        if p.is_file():
            assert b"sk-test-secret" not in p.read_bytes()


# ------------------------------------------------------------------------------------------- 7 evaluation

def test_page7_evaluation_overlays_and_sweep(fake_umap: None) -> None:
    at = toy_app()
    walk(at, "generate")
    goto(at, "evaluate")
    click(at, "Evaluate this run")
    job = wait_job(at, "evaluation")
    assert job.error is None, job.error
    rows = table(at, "Classifier trained on")  # human names (issue 14 §6)
    assert {"No-LLM check: DP keyphrase sequences", "Real keyphrase baseline (upper bound)", "Synthetic documents",
            "Real documents, same number"} <= set(rows["Classifier trained on"])
    assert all(0 <= a <= 1 for a in rows["Accuracy"])
    # precision/recall on embeddings needs more than k documents a side: with 2 synthetic ones the page says so
    assert job.result.distribution is None
    assert any("Precision/recall on embeddings needs more than 3" in c for c in at.caption.values)
    click(at, "Draw t-SNE and UMAP overlays")
    job = wait_job(at, "projection")
    assert job.error is None, job.error
    assert set(job.result) == {"tsne", "umap"}
    df = job.result["tsne"]
    assert set(df["source"]) == {"real", "synthetic"} and (df["source"] == "synthetic").sum() == 2
    titles = " ".join(json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart"))
    assert "by class" in titles and "by source" in titles
    assert not [b for b in at.button if b.label.startswith("Run the sweep")]  # exact sweep: behind the switch
    at.toggle(key="_w.exact_previews.sweep").set_value(True).run()
    at.multiselect(key="_w.sweep_eps_voc").set_value([1.0, 5.0]).run()
    at.multiselect(key="_w.sweep_eps_kde").set_value([5.0]).run()
    click(at, "Run the sweep (2 cells)")
    job = wait_job(at, "sweep")
    assert job.error is None, job.error
    assert len(job.result) == 2 and set(job.result["eps_voc"]) == {1.0, 5.0}
    assert len(table(at, "No-LLM accuracy")) == 2
    assert ledger_total(at) == pytest.approx(10.0)                 # local experiments spend no ε of the run


# ------------------------------------------------------------------------------------------- 8 export

def test_page8_bundle_summary_and_delete(fast_env: Path) -> None:
    at = toy_app()
    walk(at, "generate")
    goto(at, "export")
    m = metrics(at)
    assert (m["Total ε (pure DP)"], m["ε_voc (vocabulary)"], m["ε_kde (densities)"]) == ("10", "5", "5")
    files = set(table(at, "file")["file"])
    assert {"documents.csv", "documents.jsonl", "documents.parquet", "sequences.jsonl", "privacy_report.json",
            "privacy_report.md", "private_vocabulary.json", "run_config.json", "audit_log.jsonl",
            "manifest.json"} <= files
    assert "split.json" not in files
    assert "2 synthetic documents" in " ".join(md.value for md in at.markdown)
    run_dir = Path(state_of(at).run.run_dir)
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700 and (run_dir / "split.json").exists()
    assert button(at, "Delete all runs").disabled
    at.checkbox(key="confirm_delete").check().run()
    click(at, "Delete all runs")
    assert not run_dir.exists()
    assert any("Deleted 1 run folder" in i.value for i in at.info)
    assert ledger_total(at) == pytest.approx(10.0)                 # spent ε stays spent
    assert "Nothing to export yet" in " ".join(i.value for i in at.info)


def test_seeded_demo_is_marked_not_for_release_everywhere() -> None:
    at = new_app()
    upload_corpus(at, toy_csv(20), "toy.csv")
    goto(at, "budget")
    at.checkbox(key="_w.seeded_demo").check().run()
    walk(at, "sequences")
    goto(at, "export", clean=False)
    assert metrics(at)["Noise"] == "seeded demo"
    assert any("NOT FOR RELEASE" in e.value for e in at.error)
    report = json.loads((Path(state_of(at).run.run_dir) / "privacy_report.json").read_text())
    assert report["seed_policy"] == "seeded-demo-not-for-release"


def test_page7_compare_methods_section() -> None:
    at = toy_app()
    walk(at, "budget")
    goto(at, "evaluate")
    assert any("PRIVATE documents into the language model's prompt" in w.value for w in at.warning)
    # the defaults can run: all three methods' joint cost fits the default cap (it was 25 > 20)
    assert any("Joint cost of the selected methods on this corpus: ε = 15," in md.value for md in at.markdown)
    assert not button(at, "Compare at this privacy level").disabled
    at.number_input(key="_w.compare_eps").set_value(10.0).run()
    assert any("joint cost ε = 25 would take this session's ε on this corpus from 0 to 25, over the cap of 20: "
               "lower ε per method to at most 8," in w.value for w in at.warning)
    assert button(at, "Compare at this privacy level").disabled
    at.number_input(key="_w.compare_eps").set_value(6.0).run()
    captions = " ".join(c.value for c in at.caption)
    assert "AugPE+Ṽ" in captions and "× per synthetic document" in captions
    at.multiselect(key="_w.compare_methods").set_value([]).run()
    click(at, "Compare at this privacy level", clean=False)
    assert any("Pick at least one method" in e.value for e in at.error)
    at.multiselect(key="_w.compare_methods").set_value(["dpkps"]).run()
    click(at, "Compare at this privacy level")
    job = wait_job(at, "compare", timeout=300)
    assert job.error is None, job.error
    rows = table(at, "Method")
    assert "DP-KPS" in " ".join(map(str, rows["Method"]))
    # issue 11 §4: the comparison's documents are DP releases: its joint cost is shown and charged
    assert any("Joint cost of the selected methods" in md.value for md in at.markdown)
    assert ledger_total(at) == pytest.approx(float(state_of(at).settings.compare_eps), rel=1e-6)
    # walk 3 §6: what this session already spent counts before the click (6 + 15 > 20), with the ε that fits
    at.multiselect(key="_w.compare_methods").set_value(["dpkps", "private-prediction", "augpe"]).run()
    assert any("from 6 to 21, over the cap of 20: lower ε per method to at most 5.6," in w.value for w in at.warning)
    assert button(at, "Compare at this privacy level").disabled
