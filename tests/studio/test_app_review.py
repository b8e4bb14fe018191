"""AppTest: a privacy officer's walk without traps (issue 14) — what the app shows is right, readable and honest.

One assertion group per numbered item of the issue where it can be observed in the page: the forecast chart's
axis ranges (§1), the method outlook and free comparison before ε_kde is spent (§2), the empty-bundle guard and
the run history (§4), the non-document share (§5), human, rounded tables with their training documents (§6), one
baseline value everywhere (§7), ε as risk and timestamped ledger events (§10), the memorisation check (§11) and
why a name is in Ṽ (§12). (§3 is in tests/studio/test_app_errors.py; §8's figures in tests/studio/test_charts.py.)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from app_helpers import (state_of, assert_clean, button, click, goto, ledger_total, new_app, table, toy_csv,
                         upload_corpus,
                         private_vocabulary, run_folder, wait_job, walk)

from app_helpers import fast_env  # noqa: E402,F401 (fixture)

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def toy_app():
    at = new_app()
    upload_corpus(at, toy_csv(20), "toy.csv")
    return assert_clean(at)


def figure(at, title_start: str, *, last: bool = False) -> dict:
    """The first (or, with ``last``, the last) chart on the page whose title starts with ``title_start``."""
    found = [fig for fig in (json.loads(chart.proto.spec) for chart in at.get("plotly_chart"))
             if str(fig["layout"].get("title", {}).get("text", "")).startswith(title_start)]
    if not found:
        raise AssertionError(f"no chart titled {title_start!r}")
    return found[-1] if last else found[0]


def texts(at) -> str:
    groups = (at.markdown, at.caption, at.info, at.warning, at.success, at.error)
    return " ".join(e.value for g in groups for e in g)


def test_forecast_chart_risk_ledger_times_and_why_names_are_in_v() -> None:
    at = toy_app()
    goto(at, "budget")
    # §10: ε as risk in plain words, next to e^ε (default ε = 10)
    explainer = texts(at)
    assert "an attacker 1% sure beforehand" in explainer and "posterior ≤ e^ε·p / (e^ε·p + 1 − p)" in explainer
    assert "at most 99.6 % sure afterwards" in explainer             # never rounded up to 100 %
    # §1: the forecast chart's axes cover the data and stop about a decade beyond it (not at 10^21)
    click(at, "DP forecast")
    at.toggle(key="_w.exact_previews.budget").set_value(True).run()
    click(at, "Exact forecast on the true counts")
    f = state_of(at).results.forecast
    fig = figure(at, "Vocabulary forecast", last=True)  # the exact forecast's chart, below the DP forecast's
    xr, yr = fig["layout"]["xaxis"]["range"], fig["layout"]["yaxis"]["range"]
    xs = [p[0] for p in f.count_curve] + [max(f.noise_floor, 1.0)]
    ys = [p[1] for p in f.count_curve]
    assert 10 ** xr[0] <= min(xs) and max(xs) <= 10 ** xr[1] <= 10 * max(xs)
    assert 10 ** yr[0] <= min(ys) and max(ys) <= 10 ** yr[1] <= 10 * max(ys + [10])
    assert abs(yr[1] - (math.log10(max(ys + [10.0])) + 0.3)) < 1e-9   # drawn from THIS (exact) forecast's curve
    assert fig["layout"]["xaxis"]["type"] == fig["layout"]["yaxis"]["type"] == "log"
    assert not fig["layout"].get("shapes") and not fig["layout"].get("annotations")
    label = [t for tr in fig["data"] if tr.get("mode") == "text" for t in tr["text"]]
    assert any(t.startswith("noise floor") for t in label)
    # page 3 says why a name is in Ṽ, with the expected share of noise terms computed from Ṽ's DP counts only
    goto(at, "private-vocabulary")
    click(at, "Build Ṽ")
    from dpkps_core.evaluation.forecast_outlook import vocabulary_noise_share

    why = [i.value for i in at.info if "Why is a name in Ṽ?" in i.value]
    stats = state_of(at).results.dp_forecast_release[1]
    pv = private_vocabulary(at)
    dp = vocabulary_noise_share(pv, zero_terms=pv.public_vocabulary_size - float(stats.smoothed_curve()[0]))
    assert why and f"**{dp['expected_noise_share']:.0%}**" in why[0] and "Computed from the DP release" in why[0]
    assert [m for m in at.metric if m.label.startswith("Recall of the true top")]  # the switch is one setting
    at.toggle(key="_w.exact_previews.vocabulary").set_value(False).run()
    assert not [m for m in at.metric if m.label.startswith("Recall of the true top")]  # exact check: switch on only
    # §10: the ledger events carry their time; the sidebar states the posterior bound of what was spent
    events = table(at, "time (UTC)")
    assert len(events) == 2 and events["time (UTC)"].iloc[0].startswith("20")
    assert any("can become at most" in c for c in at.sidebar.caption.values)


def test_page4_says_near_chance_and_offers_the_free_comparison_before_spending() -> None:
    at = toy_app()
    goto(at, "budget")
    at.number_input(key="_w.eps_total").set_value(0.2).run()          # ε_kde = 0.1: every density drowns in noise
    click(at, "DP forecast")
    walk(at, "private-vocabulary")
    spent = ledger_total(at)
    goto(at, "densities")
    at.selectbox(key="_w.method").set_value("iterative-log").run()
    assert_clean(at)
    near = [w.value for w in at.warning if "near chance" in w.value]
    assert near and "iterative-log" in near[0] and "from the DP forecast" in near[0]
    outlook = " ".join(md.value for md in at.markdown if "**DP forecast**" in md.value)
    assert all(m in outlook for m in ("independent", "iterative-linear", "iterative-log"))
    assert not [b for b in at.button if b.label.startswith("Run the no-LLM check")]  # exact: behind the switch
    at.toggle(key="_w.exact_previews.densities").set_value(True).run()
    click(at, "Run the no-LLM check of every method at this ε")
    job = wait_job(at, "method_preview", timeout=300)
    assert job.error is None, job.error
    shown = table(at, "No-LLM accuracy")
    assert list(shown["Method"]) == ["independent", "iterative-linear", "iterative-log"]
    assert ledger_total(at) == pytest.approx(spent)                 # nothing was charged
    assert button(at, "Build densities").label.endswith("(spends ε_kde = 0.1)")


@pytest.fixture
def fake_umap(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from app_helpers import fake_umap_module

    monkeypatch.setitem(sys.modules, "umap", fake_umap_module())


def test_tables_one_baseline_non_documents_memorisation_and_run_history(fake_umap: None) -> None:
    at = toy_app()
    walk(at, "generate")
    s = state_of(at)
    run1 = Path(s.run.run_dir)
    # §7: the no-LLM check's baseline on page 5 ...
    goto(at, "sequences")
    click(at, "Run the no-LLM check")
    base = s.results.no_llm["real_keyphrase_baseline"]
    # §5: a reply that never became a document is counted and its share shown
    with (run1 / "generation_failures.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "x-1", "label": "tech", "keyphrases": [], "attempts": 5, "retryable": True,
                             "error": "Not a document: the reply asks for input or declines instead of writing the "
                                      "document."}) + "\n")
    goto(at, "generate")
    share = [w.value for w in at.warning if w.value.startswith("Non-documents:")]
    assert share and "1 of 3 items (33%)" in share[0]
    # §6: human names, 3 significant digits, training documents beside each accuracy, a warning when too few
    goto(at, "evaluate")
    click(at, "Evaluate this run")
    assert wait_job(at, "evaluation").error is None
    ev = table(at, "Classifier trained on")
    assert list(ev.columns) == ["Classifier trained on", "Accuracy", "± sd", "95 % interval (test documents)",
                                "Seeds", "Macro-F1", "Training documents", "Enough to judge?"]
    for acc, ci in zip(ev["Accuracy"], ev["95 % interval (test documents)"]):  # every row's interval holds it
        low, high = (float(x) for x in ci.split("–"))
        assert low <= acc + 5e-3 and acc - 5e-3 <= high
    assert any(m.value.endswith("a new generation of documents varies on top of it.") and "Synthetic / real accuracy"
               in m.value for m in at.markdown)
    assert not any("_" in str(n) for n in ev["Classifier trained on"])
    for v in list(ev["Accuracy"]) + list(ev["Macro-F1"]):
        assert v == float(f"{v:.3g}")
    syn = ev[ev["Classifier trained on"] == "Synthetic documents"].iloc[0]
    assert syn["Training documents"] == 2 and syn["Enough to judge?"].startswith("⚠ too few")
    assert any(w.value.startswith("Too few to judge:") and "Synthetic documents" in w.value for w in at.warning)
    # §9: the held-out documents were embedded once, in the session's memory; the map embeds none of them again
    memo = s.results.embedding_memo["models"][run_folder(at).state["density_meta"]["embedding_model"]]
    size = len(memo)
    assert size >= len(s.loaded.split.test) + 2
    click(at, "Draw t-SNE and UMAP overlays")
    assert wait_job(at, "projection").error is None
    assert len(memo) == size
    # §9: the prompt count and a time estimate follow the selected compare methods, before starting
    at.multiselect(key="_w.compare_methods").set_value(["dpkps"]).run()
    plan = table(at, "Rough time")
    assert list(plan["Method"]) == ["DP-KPS"] and plan["Rough time"][0].startswith("≈")
    at.multiselect(key="_w.compare_methods").set_value(["dpkps", "augpe"]).run()
    plan = table(at, "Rough time")
    assert list(plan["Method"]) == ["DP-KPS", "AugPE+Ṽ"] and plan["LLM prompts"][1] == 10 * plan["LLM prompts"][0]
    # §7: ... is the value the evaluation and the sweep show
    row = ev[ev["Classifier trained on"] == "Real keyphrase baseline (upper bound)"].iloc[0]
    assert math.isclose(row["Accuracy"], float(f"{base:.3g}"))
    at.toggle(key="_w.exact_previews.sweep").set_value(True).run()  # the exact sweep is behind the switch
    at.multiselect(key="_w.sweep_eps_voc").set_value([5.0]).run()
    at.multiselect(key="_w.sweep_eps_kde").set_value([5.0]).run()
    click(at, "Run the sweep (1 cells)")
    assert wait_job(at, "sweep").error is None
    curves = figure(at, "No-LLM accuracy vs ε_total")
    assert f"real keyphrase baseline {base:.3g}" in [a["text"] for a in curves["layout"]["annotations"]]
    # §11: the memorisation check flags a synthetic document that copies a training document
    train_text = s.loaded.corpus.texts[s.loaded.split.train[0]]
    with (run1 / "documents.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "copy-1", "label": "tech", "keyphrases": [], "text": train_text,
                             "model": "test"}) + "\n")
    at.run()
    click(at, "Run the memorisation check")
    assert wait_job(at, "memorisation").error is None
    memo = table(at, "Reproduces real text?")
    flagged = memo[memo["Reproduces real text?"] == "⚠ yes"]
    assert list(flagged["Synthetic id"]) == ["copy-1"] and len(memo) == 3
    assert any("1 of 3 synthetic document(s) reproduce" in w.value for w in at.warning)
    # §4: sampling again starts a new run without documents: the export warns and the earlier run stays reachable
    goto(at, "export")
    assert not any("no synthetic documents" in w.value for w in at.warning)
    goto(at, "sequences")
    click(at, "Sample again (free)")
    assert Path(s.run.run_dir) != run1
    goto(at, "export")
    assert len(table(at, "documents")) == 2                          # the run history lists both runs
    assert any("no synthetic documents" in w.value for w in at.warning)
    assert not [b for b in at.get("download_button") if b.proto.label.startswith("Download the release bundle")]
    caption = " ".join(c for c in at.caption.values if "includes abandoned steps" in c)
    assert "re-runs and rebuilds" in caption
    at.selectbox(key="_w.export_run").set_value(str(run1)).run()    # open the earlier run: its bundle
    assert_clean(at)
    assert "3 synthetic documents" in texts(at)
    assert [b for b in at.get("download_button") if b.proto.label.startswith("Download the release bundle")]
    at.checkbox(key="confirm_delete_one").check().run()
    click(at, "Delete this run")
    assert not run1.exists() and run1.name not in " ".join(map(str, table(at, "documents")["run"]))
