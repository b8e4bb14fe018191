"""The audit page's session keys, background job and rendering (docs/PRIVACY.md, "Empirical audit"). The audit itself — neighbours,
trials, statistics, bounds — is :mod:`dpkps_core.audit`; here are only widgets, a job and plotly figures.

The audit reads the private corpus: its results are PRIVATE (this session only, never in a run folder or the
bundle) and it charges nothing to the session's ledger (every trial uses its own throwaway ledger).
"""

from __future__ import annotations

import hashlib
import json
import textwrap
from typing import Any, Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dpkps_core import audit
from dpkps_core.errors import CorpusError
from dpkps_core.progress import format_duration
from studio import charts, jobs, page_ref, resources, session, steps, widgets
from studio.state import SessionState, widget_value

UPLOAD_KEY = "audit_corpus_file"


def current_settings(state: SessionState) -> audit.AuditSettings:
    return audit.AuditSettings(
        trials=None if state.settings.audit_trials_auto else int(state.settings.audit_trials),
        time_budget=float(state.settings.audit_time_budget),
        vocabulary_trials=None if state.settings.audit_trials_auto else int(state.settings.audit_vocabulary_trials),
        density_trials=None if state.settings.audit_trials_auto else int(state.settings.audit_density_trials),
        confidence=float(state.settings.audit_confidence), canary_documents=int(state.settings.audit_canaries),
        canary_prefix_words=int(state.settings.audit_canary_prefix_words),
    ).validate()


def _inputs(state: SessionState) -> tuple[Any, Any, Any, Any]:
    """Corpus, sampling config, public vocabulary and embedder of the current settings (read on this thread)."""
    corpus = steps.ensure_corpus(state)
    if corpus is None:
        raise CorpusError(f"Load a corpus first ({page_ref('corpus')}).")
    config = session.current_config(state)
    return corpus, config, session.public_vocabulary(state), resources.embedder(config.embedding_model)


def rows_source(state: SessionState) -> tuple[str, bytes | None, str | None]:
    """Where the audit's raw rows come from (docs/PRIVACY.md "Empirical audit"): ``("demo", …)`` for a demo
    corpus (its public records), ``("file", data, name)`` when the file given on this page is the uploaded one
    (same SHA-256), else ``("loaded", None, None)`` — the loaded documents as rows, a weaker fallback."""
    spec = str(session.current_config(state).corpus)
    if spec.startswith("demo:"):
        return "demo", None, None
    given = widget_value(UPLOAD_KEY)
    if given is not None:
        data = given.getvalue()
        if hashlib.sha256(data).hexdigest() == state.loaded.corpus_fingerprint:
            return "file", data, given.name
    return "loaded", None, None


def _rows_builder(state: SessionState, corpus: Any, config: Any) -> Callable[[], Any]:
    """A function (run in the job) that builds the audit's raw rows — read from the session on this thread."""
    kind, data, name = rows_source(state)
    if kind == "demo":
        return lambda: audit.raw_table_for(config)
    if kind == "file":
        return lambda: audit.read_raw_table(data, filename=name, text_column=config.text_column,
                                            label_column=config.label_column, person_column=config.person_column,
                                            classes=corpus.public_classes, encoding=config.encoding)
    return lambda: audit.RawTable.from_corpus(corpus, config)


def rows_widget(state: SessionState) -> None:
    """For an uploaded corpus: the file again (kept in this session only), so that the audit builds its
    neighbours on the file's raw rows, before loading — otherwise on the loaded documents."""
    if str(session.current_config(state).corpus).startswith("demo:"):
        st.caption("Neighbours are built on the demo's public records (raw rows) and loaded as the app loads them.")
        return
    st.file_uploader("The corpus file again (optional): the audit then removes and adds RAW rows before loading, "
                     "so it also tests the loader", type=["csv", "tsv", "jsonl", "json", "parquet", "zip"],
                     key=UPLOAD_KEY)
    kind, _, _ = rows_source(state)
    if kind == "file":
        st.caption("Neighbours will be built on this file's raw rows (it is the file you loaded on "
                   f"{page_ref('corpus')}).")
    elif widget_value(UPLOAD_KEY) is not None:
        st.warning(f"This is not the file loaded on {page_ref('corpus')} (its SHA-256 differs): the audit uses the "
                   "loaded documents as rows instead.", icon=":material/warning:")
    else:
        st.caption("Without the file, the neighbours are built on the loaded documents as rows: they still go "
                   "through the loader, but a row the loader already dropped or collapsed cannot show.")


def estimate(state: SessionState) -> dict[str, Any]:
    """Measure one trial of the release path and extrapolate (kept in the session)."""
    corpus, config, vocab, emb = _inputs(state)
    rows = _rows_builder(state, corpus, config)()
    est = audit.estimate_audit_time(rows, config, vocabulary=vocab, embedder=emb, settings=current_settings(state))
    state.results.audit_estimate = {**est, "corpus_id": session.corpus_id(state)}
    return est


def start(state: SessionState) -> jobs.Job:
    """Run the audit in a background job (progress, cancel); the result stays in this session only."""
    corpus, config, vocab, emb = _inputs(state)
    settings = current_settings(state)
    cid = session.corpus_id(state)
    build_rows = _rows_builder(state, corpus, config)

    def work(job: jobs.Job) -> Any:
        result = audit.run_audit(build_rows(), config, vocabulary=vocab, embedder=emb, settings=settings,
                                 progress=job.report, cancel=job.cancel, on_plan=job.partial.append)
        return {"result": result, "corpus_id": cid}

    return jobs.start_job(state, "audit", "privacy audit", work)


# ------------------------------------------------------------------------------------------------ figures

def histogram_figure(event: dict[str, Any]) -> go.Figure:
    """The chosen statistic under both neighbours (all trials) and the event's threshold."""
    fig = go.Figure()
    for name, values, color in ((event["neighbour_a"], event["values_a"], "#4C78A8"),
                                (event["neighbour_b"], event["values_b"], "#E45756")):
        fig.add_trace(go.Histogram(x=values, name=name, opacity=0.6, marker_color=color, nbinsx=40))
    if event.get("threshold") is not None:
        fig.add_vline(x=event["threshold"], line_dash="dash", line_color="#333",
                      annotation_text=f"event: {event['side']} {event['threshold']:.3g}")
    stage = {"vocabulary": "Vocabulary stage", "density": "Density stage"}.get(event["stage"], "Whole release")
    name = audit.STATISTIC_NAMES.get(event["statistic"], event["statistic"])
    fig.update_layout(barmode="overlay", height=340, margin={"t": 50, "b": 70},
                      title=f"{stage}: {event['neighbour_a']} vs {event['neighbour_b']}<br><sup>{name} · private — "
                            "local only</sup>",
                      xaxis_title="<br>".join(textwrap.wrap(event["statistic_label"], 38)), yaxis_title="trials")
    return charts.tidy(fig, width=30)  # wrapped below the toolbar: these sit in third-width columns


def _share(p: Any, ci: Any) -> str:
    """An event's share of trials with its Clopper–Pearson interval, in one cell: ``0.500 [0.310, 0.690]``."""
    if p is None:
        return "—"
    return f"{float(p):.3f}" + ("" if not ci else f" [{ci[0]:.3f}, {ci[1]:.3f}]")


def events_table(result: audit.AuditResult) -> pd.DataFrame:
    """One row per (stage, neighbour pair, statistic): the event tested, each side's share of trials with its
    Clopper–Pearson interval, and the ε lower bound (point estimate) — seven columns, so that the table fits the page
    at a laptop's width (walk 3 §6: the ten-column table was cut at the right)."""
    rows = []
    for e in result.events:
        event = ("—" if e.get("threshold") is None
                 else f"value {e['side']} {e['threshold']:.3g}")  # the statistic's own name is internal
        rows.append({"stage": e["stage"], "pair": f"{e['neighbour_a']} vs {e['neighbour_b']}",
                     "statistic": audit.STATISTIC_NAMES.get(e["statistic"], e["statistic"]), "event": event,
                     "p(A) [CP]": _share(e.get("p_a"), e.get("ci_a")), "p(B) [CP]": _share(e.get("p_b"), e.get("ci_b")),
                     "ε lower bound (point est.)": f"{e['epsilon_lower_bound']:.3f} ({e['point_estimate']:.2f})"})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------ rendering

def show_job(state: SessionState, job: jobs.Job) -> None:
    """Body of the job monitor: the plan while running, the findings when done."""
    if job.error:
        st.error(job.error, icon=":material/error:")
        return
    if job.running:
        if job.partial:
            p = job.partial[-1]
            st.caption(f"Plan: {p['trials_per_neighbour']} trials on each of {p['neighbours']} neighbouring corpora "
                       f"({p['vocabulary_trials_per_neighbour']} vocabulary-stage trials each); "
                       f"{p['seconds_per_round']:.2f} s per round → about "
                       f"{audit.format_seconds(p['estimated_seconds'])} in all.")
        return
    if not job.result:
        return
    if job.result["corpus_id"] != session.corpus_id(state):
        st.info("This audit was run on another corpus; run it again for the current one.")
        return
    show_result(job.result["result"])


def show_result(result: audit.AuditResult) -> None:
    r = result.to_dict()
    st.code(result.line(), language=None)
    if result.violation:
        st.error(result.verdict, icon=":material/gpp_maybe:")
    elif result.kind == audit.INCONCLUSIVE:  # the trials could not have shown a leak of the claimed size: no tick
        st.warning(result.verdict, icon=":material/help:")
    else:
        st.success(result.verdict, icon=":material/verified_user:")
    m = st.columns(4)
    m[0].metric("Empirical ε lower bound", f"{result.lower_bound:.3f}")
    m[1].metric("Claimed ε", f"{result.claimed_epsilon:g}")
    m[2].metric("Vocabulary / density stage", f"{r['vocabulary_stage_lower_bound']:.2f} / "
                f"{r['density_stage_lower_bound']:.2f}",
                help=f"Lower bounds of the vocabulary stage (vs ε_voc = {r['epsilon_vocabulary']:g}) and of the density "
                     f"stage (vs ε_kde = {r['epsilon_kde']:g}).")
    m[3].metric("Largest certifiable ε", f"{r['max_certifiable_epsilon']:.2f}",
                help="With these trials no bound could exceed this: only leaks larger than it can show.")
    st.caption(f"{r['trials_per_neighbour']} release-path, {r['density_trials_per_neighbour']} density-stage and "
               f"{r['vocabulary_trials_per_neighbour']} vocabulary-stage trials per neighbour, "
               f"{r['runs_of_release_path']} runs of the release path in {format_duration(r['seconds'])}"
               + (" (cancelled: the finished rounds were analysed)" if r["cancelled"] else "")
               + f". {r['ledger'][0].upper() + r['ledger'][1:]}. {audit.LIMITATION_NOTE} {r['noise_sampler_note']}")
    for warning in r.get("warnings", []):
        st.warning(warning, icon=":material/warning:")
    st.dataframe(events_table(result), hide_index=True, key="table.audit_events")
    best = {stage: max((e for e in result.events if e["stage"] == stage and e.get("threshold") is not None),
                       key=lambda e: (e["epsilon_lower_bound"], e["point_estimate"]), default=None)
            for stage in audit.STAGES}
    cols = st.columns(len(best))
    for col, (stage, event) in zip(cols, best.items()):
        if event is not None:
            col.plotly_chart(histogram_figure(event), key=f"chart.audit.{stage}")
    ex = result.exposure
    if ex:
        st.subheader("Canary exposure")
        w, o = ex["with_canaries"], ex["without_canaries"]
        st.dataframe(pd.DataFrame([
            {"measure": "canary terms in Ṽ per trial", "with canaries": w["canary_terms_in_vocabulary_per_trial"],
             "without": o["canary_terms_in_vocabulary_per_trial"]},
            {"measure": "canary terms per 1,000 sampled keyphrases",
             "with canaries": w["canary_occurrences_per_1000_keyphrases"],
             "without": o["canary_occurrences_per_1000_keyphrases"]},
            {"measure": "sequences with a canary pair per trial", "with canaries": w["canary_pair_sequences_per_trial"],
             "without": o["canary_pair_sequences_per_trial"]},
        ]).round(4), hide_index=True, key="table.audit_exposure")
        plural = "" if ex["canaries"] == 1 else "s"
        st.caption(f"{ex['canaries']} canary document{plural} of {ex['terms_per_canary']} rare public terms "
                   f"({ex['planted_in_training_part']} in the training part). {ex['reading']}")
    c1, c2 = st.columns(2)
    c1.download_button("Download the private audit report (Markdown)", audit.render_markdown(result),
                       file_name="audit_report.md", mime="text/markdown", icon=":material/lock:",
                       key="download.audit_md")
    c2.download_button("Download the private audit data (JSON)", json.dumps(r, indent=2, ensure_ascii=False),
                       file_name="audit_report.json", mime="application/json", icon=":material/lock:",
                       key="download.audit_json")


def settings_widgets(state: SessionState) -> None:
    c1, c2, c3 = st.columns(3)
    widgets.bound(state, c1.toggle, "Trials from a time budget", "audit_trials_auto",  # short: a third of the page wide
                  help="On: the audit measures one trial and runs as many as fit in the time budget. Off: choose the "
                       "number of trials of each stage yourself.")
    if state.settings.audit_trials_auto:
        widgets.bound(state, c2.number_input, "Time budget (seconds)", "audit_time_budget", min_value=10.0,
                      max_value=3600.0, step=30.0)
    else:
        widgets.bound(state, c2.number_input, "Release-path trials per neighbour", "audit_trials",
                      min_value=audit.MIN_TRIALS,
                      max_value=100_000, step=10)
        widgets.bound(state, c3.number_input, "Vocabulary-stage trials per neighbour", "audit_vocabulary_trials",
                      min_value=audit.MIN_TRIALS, max_value=1_000_000, step=100)
        widgets.bound(state, c1.number_input, "Density-stage trials per neighbour", "audit_density_trials",
                      min_value=audit.MIN_TRIALS, max_value=1_000_000, step=10)
    c1, c2 = st.columns(2)
    widgets.bound(state, c1.select_slider, "Confidence", "audit_confidence", options=[0.9, 0.95, 0.99])
    widgets.bound(state, c2.number_input, "Canary documents (exposure test; 0 = skip)", "audit_canaries", min_value=0,
                  max_value=50)
    widgets.bound(state, c1.number_input, "Canaries' in-distribution prefix (words; 0 = rare terms only)",
                  "audit_canary_prefix_words", min_value=0, max_value=200,
                  help="The Canary's Echo: each exposure canary starts like a training document of its class (its "
                       "first words, in memory only, never shown) and ends with rare public terms — what the test "
                       "measures.")
