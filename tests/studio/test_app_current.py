"""What is shown is current and true, and polish (a privacy officer's walk, second pass, §3 and §4).

Pure tests first (charts, tables, the bundle's report, the forecast's advice: fast, no model), then AppTests of
the sidebar, the vocabulary's name, the stale forecast and the run totals (fast mode)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpkps_core.evaluation import forecast_outlook
from dpkps_core.dossier.export import _generation_section, collect_bundle, public_run_config, without_column_names
from dpkps_core.records.report_markdown import LATER_RELEASES_NOTE, render_report_markdown
from studio import charts, review

# ------------------------------------------------------------------------------------------- charts (§4)


def test_a_class_has_one_colour_in_every_panel_and_every_class_its_own_hue() -> None:
    classes = ["sport", "tech", "business"]
    colours = charts.class_colours(classes + ["politics"])
    assert len(set(colours.values())) == 4 and "#7F7F7F" not in colours.values()   # no hue-less grey
    many = charts.class_colours([f"c{i}" for i in range(30)])
    assert len(set(many.values())) == 30                                          # distinct beyond ten
    counts = charts.class_counts_bar({"business": 3, "sport": 5, "tech": 2}, colours=colours)
    hist = charts.length_histogram([10, 20, 30, 40], ["sport", "tech", "business", "tech"], colours=colours)
    dens = charts.density_bars(classes, ["a", "b"], np.ones((3, 2)), top=2, colours=colours)
    df = pd.DataFrame({"x": np.arange(6.0), "y": np.arange(6.0), "label": ["sport", "tech", "business"] * 2,
                       "source": ["real"] * 3 + ["synthetic"] * 3})
    by_label = charts.projection_by(df, color="label", method="tsne", colours=colours)
    by_source = charts.projection_by(df, color="source", method="tsne", colours=colours)
    bar = dict(zip(counts.data[0].x, counts.data[0].marker.color))
    for c in classes:
        assert bar[c] == colours[c]
        assert [t.marker.color for t in hist.data if t.name == c] == [colours[c]]
        assert {t.marker.color for t in by_label.data if t.name.endswith(f"· {c}")} == {colours[c]}
        assert {t.marker.color for t in by_source.data if t.name == f"real · {c}"} == {colours[c]}
    assert [t.marker.color for t in dens.data] == [colours[c] for c in classes]


def test_titles_sit_below_the_toolbar_and_wrap_instead_of_running_off() -> None:
    df = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0], "label": ["a", "b"], "source": ["real", "synthetic"]})
    for fig in (charts.projection_by(df, color="source", method="umap"),
                charts.metrics_bars({"x": (0.5, None)}, 0.3), charts.class_counts_bar({"a": 1})):
        title = fig.layout.title
        lines = title.text.split("<br>")
        assert all(len(line) <= charts.TITLE_WIDTH or line.startswith("<sup>") or len(line) <= 90 for line in lines)
        assert title.yref == "container" and title.pad.t >= charts.TOOLBAR_PX       # the toolbar's row stays free
        assert fig.layout.margin.t >= charts.TOOLBAR_PX + 24 * len(lines)           # every line fits above the plot
    long = charts.projection_by(df, color="label", method="tsne")
    assert all(len(x) <= 44 for x in long.layout.title.text.split("<br>") if not x.startswith("<sup>"))


def test_length_histogram_stays_readable_with_one_huge_row() -> None:
    words = [120, 150, 180, 200, 90, 130, 160, 140, 170, 110, 360_000]
    fig = charts.length_histogram(words, ["a", "b"] * 5 + ["a"])
    lo, hi = fig.layout.xaxis.range
    assert lo == 0 and hi < 400                                  # the 360,000-word row does not squeeze the rest
    assert "1 document over 200 words (360,000 words) is not shown" in fig.layout.title.text


def test_one_seed_shows_no_spread() -> None:
    fig = charts.metrics_bars({"a": (0.5, None), "b": (0.7, None)}, 0.3)
    assert fig.data[0].error_y.visible is False
    assert review.sd_or_none(0.0, 1) is None and review.sd_or_none(0.01234, 3) == 0.0123


def test_too_few_to_judge_says_the_same_everywhere() -> None:
    note = review.judge_note(10, 5)
    assert note.startswith("⚠ too few to judge") and f"fewer than {review.MIN_PER_CLASS_TO_JUDGE} per class" in note
    assert f"fewer than {review.MIN_PER_CLASS_TO_JUDGE} training documents per class" in review.too_few_sentence("x")
    rows = [{"method": "dpkps", "label": "DP-KPS", "epsilon": 10.0, "delta": 0.0, "documents": 5, "llm_calls": 5,
             "wall_seconds": 1.0, "accuracy": 0.5, "accuracy_sd": 0.0, "macro_f1": 0.5, "seeds": 1}]
    df, _ = review.compare_table(rows, n_classes=5)
    assert df["± sd"][0] is None or pd.isna(df["± sd"][0])          # one seed: blank, never "± 0.00"


# ------------------------------------------------------------------------------------------- the bundle (§3, §4)


def test_generation_configurations_differ_by_more_than_batch_size() -> None:
    base = {"backend": "local", "model": "m", "backend_info": {"device": "cpu"}, "prompt_config": {"doc_type": "x"}}
    audit = [{**base, "parameters": {"max_tokens": 50, "batch_size": 8}},
             {**base, "parameters": {"max_tokens": 50, "batch_size": 3}},
             {**base, "parameters": {"max_tokens": 50, "batch_size": 8}}]
    gen = _generation_section(audit, [], [], 3)
    assert len(gen["configurations"]) == 1 and gen["configurations"][0]["parameters"]["batch_size"] == 8
    md = render_report_markdown({"epsilon_total": 10.0, "generation": gen})
    assert "Several configurations" not in md
    other = _generation_section(audit + [{**base, "parameters": {"max_tokens": 99, "batch_size": 1}}], [], [], 4)
    assert len(other["configurations"]) == 2                        # a real difference is still reported


def test_the_bundle_leaves_out_the_private_files_column_names_and_says_later_releases_may_exist() -> None:
    report = {"epsilon_total": 10.0, "neighbouring": "add/remove all documents of one person (identified by "
              "column 'patient_id')", "parameters": {"text_column": "note", "label_column": "specialty",
                                                      "person_column": "patient_id", "vocab_size": 200}}
    out = without_column_names(report)
    text = json.dumps(out)
    assert not any(c in text for c in ("note", "specialty", "patient_id")) and out["parameters"] == {"vocab_size": 200}
    assert "one person" in out["neighbouring"]
    cfg = public_run_config({"corpus": "/home/me/notes.csv", "text_column": "note", "label_column": "specialty",
                             "person_column": "patient_id", "vocab_size": 200})
    assert not {"text_column", "label_column", "person_column"} & set(cfg)
    md = render_report_markdown(out)
    assert LATER_RELEASES_NOTE in md and "Total ε: **10** for this run's releases" in md


def test_a_whole_bundle_holds_no_column_name(tmp_path: Path) -> None:
    from llm_fakes import make_run_dir

    run = make_run_dir(tmp_path, 2)
    cfg = json.loads((run / "run_config.json").read_text())
    cfg.update(text_column="clinical_note_text", label_column="medical_specialty", person_column="patient_ident")
    (run / "run_config.json").write_text(json.dumps(cfg))
    rep = json.loads((run / "privacy_report.json").read_text())
    rep.setdefault("parameters", {}).update(text_column="clinical_note_text", label_column="medical_specialty")
    rep["neighbouring"] = "add/remove all documents of one person (identified by column 'patient_ident')"
    (run / "privacy_report.json").write_text(json.dumps(rep))
    files = collect_bundle(run)
    for name, data in files.items():
        for col in (b"clinical_note_text", b"medical_specialty", b"patient_ident"):
            assert col not in data, (name, col)


# ------------------------------------------------------------------------------------------- the forecast's advice


def test_poor_vocabulary_advice_offers_a_smaller_n_and_a_domain_vocabulary_before_a_large_eps() -> None:
    counts = np.zeros(400_000)
    counts[:60] = 200.0                         # 60 terms used by many documents, 400k public terms (GloVe-sized)
    assert forecast_outlook.suggest_smaller_n(counts, eps_voc=1.0, terms_per_doc=5, vocab_size=1000) == 100
    tips = forecast_outlook._vocabulary_tips(eps_voc=1.0, suggested_eps=100.0, suggested_terms=None, suggested_n=100,
                                             v_size=400_000, vocab_size=1000)
    assert tips[0].startswith("a smaller N = 100") and "domain-specific" in tips[1]
    assert tips[-1].startswith("ε_voc ≥ 100") and "weak guarantee" in tips[-1]


# ------------------------------------------------------------------------------------------- AppTests (§3, §4)

app = pytest.importorskip("app_helpers")
from app_helpers import state_of, click, fast_env, goto, new_app, toy_csv, upload_corpus, walk  # noqa: E402,F401


def _sidebar(at) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error") for e in getattr(at.sidebar, kind)]
    parts += [f"{m.label}: {m.value}" for m in at.sidebar.metric]
    return "\n".join(str(p) for p in parts)


@pytest.mark.usefixtures("fast_env")
def test_sidebar_with_no_corpus_says_so_and_never_claims_nothing_was_spent() -> None:
    at = new_app(corpus_source="upload")                           # nothing loaded: an upload not given yet
    side = _sidebar(at)
    assert "No corpus is loaded" in side and "0 / 20" not in side and "nothing spent" not in side
    assert not at.sidebar.metric


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.usefixtures("fast_env")
def test_sidebar_names_the_corpus_loaded_and_its_spend_per_person() -> None:
    at = new_app()                                                 # the demo is loaded on page 1
    at.radio(key="_w.corpus_source").set_value("upload").run()
    side = _sidebar(at)
    assert "still loaded: your file is not loaded yet" in side       # not taken for the upload that was chosen
    rows = toy_csv(20).decode().splitlines()
    data = "\n".join([rows[0] + ",patient"] + [f"{r},p{i % 7}" for i, r in enumerate(rows[1:])]).encode()
    goto(at, "corpus")
    at.file_uploader(key="corpus_upload").set_value(("notes.csv", data, "text/csv")).run()
    at.selectbox(key="upload_person_col").set_value("patient").run()
    click(at, "Load this corpus", clean=False)
    at.checkbox[0].check().run()
    click(at, "Declare these classes public", clean=False)
    side = _sidebar(at)
    assert "Most-used person: ε spent / cap" in side and "unit of privacy: one person" in side
    walk(at, "private-vocabulary")
    side = _sidebar(at)
    assert "This session, on this corpus: ε = " in side and "nothing spent" not in side and "No release" not in side
    assert "any one person" in side and "any one document" not in side


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.usefixtures("fast_env")
def test_settings_do_not_carry_over_from_the_demo_to_a_new_corpus() -> None:
    at = new_app()
    state_of(at).settings.method = "iterative-log"                   # chosen for the demo
    state_of(at).settings.eps_total = 3.0
    upload_corpus(at, toy_csv(20), "mine.csv", declare=False)
    assert state_of(at).settings.method == "independent" and state_of(at).settings.eps_total == 10.0
    at.run()                                                       # the notice is shown on the next run
    said = [i.value for i in at.info]
    assert any("back to their defaults" in v for v in said), said


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.usefixtures("fast_env")
def test_an_exact_forecast_for_other_settings_is_marked_stale() -> None:
    at = new_app()
    goto(at, "budget")
    at.toggle(key="_w.exact_previews.budget").set_value(True).run()
    click(at, "Exact forecast on the true counts")
    assert not [w for w in at.warning if w.value.startswith("**STALE**")]
    state_of(at).settings.vocab_size = 100                           # N changed after the forecast
    at.run()
    stale = [w.value for w in at.warning if w.value.startswith("**STALE**")]
    assert stale and "N" in stale[0]
    state_of(at).settings.vocab_size = 200
    state_of(at).settings.vocabulary = "wordfreq"                    # another vocabulary, same N
    at.run()
    stale = [w.value for w in at.warning if w.value.startswith("**STALE**")]
    assert stale and "(V changed" in stale[0]


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.usefixtures("fast_env")
def test_an_older_run_shows_the_corpus_total_to_date_and_that_later_releases_exist() -> None:
    at = new_app()
    walk(at, "sequences")                                          # run A: Ṽ + densities + sequences (ε = 10)
    first = Path(state_of(at).run.run_dir).name
    goto(at, "export")
    assert not [w for w in at.warning if "Later releases exist" in w.value]
    assert any("Corpus total to date" in c.value for c in at.caption)
    goto(at, "private-vocabulary")
    click(at, "Re-run Ṽ")                                          # asks first (one intent, one release)
    click(at, "Yes, spend ε_voc")                                  # a later release, in a new run folder
    assert Path(state_of(at).run.run_dir).name != first
    goto(at, "export")
    first_path = next(r for r in state_of(at).run.run_dirs if Path(r).name == first)
    at.selectbox(key="_w.export_run").set_value(first_path).run()
    later = [w.value for w in at.warning if "Later releases exist" in w.value]
    assert later and "ε = 10" in later[0] and "ε = **15**" in later[0]
    from dpkps_core.dossier.export import collect_bundle                   # the bundle only says later releases may exist

    report = collect_bundle(first_path)["privacy_report.md"].decode()
    assert "Later releases on the same documents may exist" in report and "15" not in report.split("## What")[0]


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.usefixtures("fast_env")
def test_the_ledger_credits_each_release_to_the_run_it_made() -> None:
    at = new_app()
    walk(at, "sequences")                                          # Ṽ, densities and sequences: run A
    run_a = Path(state_of(at).run.run_dir).name
    goto(at, "densities")
    click(at, "Rebuild the densities")
    click(at, "Yes, spend ε_kde")                                  # a rebuild after sequences: a new run folder B
    run_b = Path(state_of(at).run.run_dir).name
    assert run_b != run_a
    led = state_of(at).ledgers[state_of(at).loaded.corpus_id]
    runs = [r.run for r in led.view().releases]
    assert runs[-3:] == [run_a, run_a, run_b], [(r.what, r.run) for r in led.view().releases]


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.usefixtures("fast_env")
def test_page6_lets_users_read_a_document_in_full() -> None:
    from dpkps_core.records.runfolder import read_documents

    at = new_app()
    walk(at, "generate")
    docs = read_documents(state_of(at).run.run_dir)
    at.run()
    texts = {d["text"] for d in docs}
    assert [c.value for c in at.code if c.value in texts]             # the whole text, not a one-line cell
    at.selectbox(key="read.documents").set_value(1).run()
    assert docs[::-1][1]["text"] in [c.value for c in at.code]        # newest first, as in the table


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.usefixtures("fast_env")
def test_page1_counts_in_words_and_colours_classes_as_every_other_page() -> None:
    import json as _json

    at = new_app()
    rows = ["text,label"] + [f"document number {i} about one single topic only,{'only'}" for i in range(12)]
    upload_corpus(at, "\n".join(rows).encode(), "one.csv", declare=False)
    assert any("1 distinct label." in s.value for s in at.success)          # not "1 distinct labels"
    at2 = new_app()
    charts_ = {json_title: fig for fig in (_json.loads(c.proto.spec) for c in at2.get("plotly_chart"))
               for json_title in [str(fig["layout"].get("title", {}).get("text", ""))]}
    bar = next(f for t, f in charts_.items() if t.startswith("Documents per class"))
    hist = next(f for t, f in charts_.items() if t.startswith("Document lengths"))
    colours = dict(zip(bar["data"][0]["x"], bar["data"][0]["marker"]["color"]))
    assert {t["name"]: t["marker"]["color"] for t in hist["data"]} == colours
    assert len(set(colours.values())) == len(colours)
