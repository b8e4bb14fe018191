"""Step 7 — local evaluation (PRIVATE): downstream accuracy, real-vs-synthetic overlays, the ε sweep explorer."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from dpkps_core.evaluation import DISCLOSURE_NOTE, PRIVATE_NOTE, sweep_figures, sweep_summary
from dpkps_core.baselines.augpe import AugPEConfig
from dpkps_core.device import cuda_available
from dpkps_core.errors import DPKPSError
from dpkps_core.baselines.compare_settings import GENERATION_METHODS
from dpkps_core.baselines.compare_settings import joint_cost
from dpkps_core.baselines.prediction_config import PRIVATE_PROMPT_WARNING
from dpkps_core.evaluation.memorisation import memorisation_advice
from dpkps_core.method.sampling import SAMPLING_METHODS
from studio import (charts, evaluation_steps, forecasts, jobs, ledger_view, navigation, page_ref, review, run_view,
                    session, steps, widgets)
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "evaluate",
                       "Everything on this page reads the real corpus, runs on this machine for you, and is never "
                       f"part of the release bundle ({PRIVATE_NOTE}).")
st.markdown(widgets.PRIVATE_BADGE)
tab_acc, tab_map, tab_sweep, tab_compare, tab_memo, tab_disc = st.tabs(["Downstream accuracy",
                                                                        "Real vs synthetic map", "ε sweep explorer",
                                                                        "Compare methods", "Memorisation check",
                                                                        "Disclosure test"])

with tab_acc:
    if run_view.outcome(state) is None:
        st.info(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    else:
        n_docs = len(session.documents(state))
        n_test = len(state.loaded.split.test) if state.loaded.split is not None else 0
        st.caption(f"Trains a classifier on the synthetic documents ({n_docs:,} so far) and tests it on the {n_test:,} "
                   "held-out real documents, next to the same classifier on as many real documents, plus the no-LLM "
                   "check. Every held-out document is embedded in memory: a few hundred documents take a few minutes "
                   "on a small CPU (it runs in the background; you can leave this page).")
        widgets.bound(state, st.columns(3)[0].number_input, "Seeds (repetitions)", "eval_seeds", min_value=1,
                      max_value=10)
        job = state.jobs.evaluation
        if not (isinstance(job, jobs.Job) and job.running):
            if st.button("Evaluate this run", icon=":material/analytics:"):
                with widgets.guard():
                    evaluation_steps.start_evaluation(state, int(state.settings.eval_seeds))
                    st.rerun()

        def show_result(res: Any) -> None:
            n_classes = len(state.loaded.corpus.classes) if state.loaded.corpus is not None else 1
            st.dataframe(review.evaluation_table(res.metrics, n_classes), hide_index=True,
                         key="table.evaluation")
            if getattr(res, "synthetic_to_real", None) is not None:
                st.markdown(f"{widgets.PRIVATE_BADGE} {review.ratio_sentence(res.synthetic_to_real)}")
            dist = getattr(res, "distribution", None)  # precision/recall on embeddings (evaluation/distribution)
            if dist is not None:
                st.markdown(f"{widgets.PRIVATE_BADGE} **Synthetic vs real test documents on embeddings** "
                            f"(Kynkäänniemi et al. 2019, k = {dist.k}, {dist.n_compared:,} documents a side): "
                            f"{dist.format()}. Precision: share of synthetic documents that fall among real "
                            "ones (realistic); recall: share of real documents the synthetic ones cover (variety).")
            elif res.info.get("distribution_note"):
                st.caption(res.info["distribution_note"])
            small = [review.METRIC_NAMES.get(k, k) for k, m in res.metrics.items()
                     if review.judge_note(m.n_train, n_classes)]
            if small:
                st.warning(review.too_few_sentence(", ".join(small)) + " Write more documents on "
                           f"{page_ref('generate')} before drawing conclusions.", icon=":material/warning:")
            with st.expander("What each row is"):
                st.markdown("\n".join(f"- **{review.METRIC_NAMES.get(k, k)}**: {m.note}"
                                       for k, m in res.metrics.items() if m.note))
            if res.info.get("real_keyphrase_baseline_note"):
                st.caption(res.info["real_keyphrase_baseline_note"])
            st.plotly_chart(charts.metrics_bars({review.METRIC_NAMES.get(n, n): (m.accuracy_mean,
                                                                                  m.accuracy_sd if len(m.scores) > 1
                                                                                  else None)
                                                 for n, m in res.metrics.items()},
                                                res.info.get("chance_accuracy")), key="chart.evaluation")
            st.caption(f"{res.info.get('n_test', 0):,} held-out test documents; chance (majority class) "
                       f"{res.info.get('chance_accuracy', 0):.2f}.")

        def show_evaluation(j: jobs.Job) -> None:
            if j.error:
                st.error(j.error, icon=":material/error:")
            elif not j.running and j.result is not None:
                show_result(j.result)

        widgets.job_monitor(state, "evaluation", body=show_evaluation)
        stored = run_view.evaluation(state)  # the run folder's evaluation.json: shown after a reload or reopening the run
        job = state.jobs.evaluation  # a failed job wrote nothing: the last good evaluation stays in view under it
        if stored is not None and (not isinstance(job, jobs.Job) or (not job.running and job.error)):
            then = int(stored.info.get("n_documents") or 0)
            st.caption(f"The last evaluation of this run (kept in its folder, PRIVATE): {then:,} synthetic documents"
                       + ("." if then == n_docs else f"; the run now has {n_docs:,} — evaluate again to include "
                          "them."))
            show_result(stored)

with tab_map:
    if not session.documents(state):
        st.info(f"Write some synthetic documents first ({page_ref('generate')}).")
    else:
        widgets.bound(state, st.columns(3)[0].number_input, "Real held-out documents to embed (a sample, for speed)",
                      "projection_points", min_value=10, max_value=2000, step=50)
        job = state.jobs.projection
        if not (isinstance(job, jobs.Job) and job.running):
            if st.button("Draw t-SNE and UMAP overlays", icon=":material/scatter_plot:"):
                with widgets.guard():
                    evaluation_steps.start_projection(state, int(state.settings.projection_points))
                    st.rerun()

        def show_projection(j: jobs.Job) -> None:
            if j.error:
                st.error(j.error, icon=":material/error:")
            elif not j.running and j.result:
                for method, df in j.result.items():
                    left, right = st.columns(2)
                    colours = widgets.class_colours(state)  # one colour per class in every panel
                    left.plotly_chart(charts.projection_by(df, color="label", method=method, colours=colours),
                                      key=f"chart.{method}.l")
                    right.plotly_chart(charts.projection_by(df, color="source", method=method, colours=colours),
                                       key=f"chart.{method}.s")

        widgets.job_monitor(state, "projection", body=show_projection)

with tab_sweep:
    st.caption("The ε sweep re-runs the no-LLM check on the EXACT training part and scores it on the real held-out "
               "part: choosing ε or a method from it is a use of the private data that ε does not cover. The DP "
               f"alternative is the DP forecast on {page_ref('budget')}: its release re-forecasts any ε_voc, ε_kde "
               "or method for free, covered by ε.")
    with widgets.guard():
        dp_grid = forecasts.dp_sweep(state)
        if dp_grid is not None:
            st.markdown(widgets.DP_BADGE)
            st.dataframe(dp_grid, hide_index=True, key="table.dp_sweep")
        else:
            st.caption(f"Run the DP forecast on {page_ref('budget')} to see the DP sweep over ε here.")
    if widgets.exact_previews_switch(state, "sweep"):
        st.caption("No-LLM accuracy and vocabulary recall over a grid of ε_voc × ε_kde, without spending ε on the "
                   "real release: each cell is a local, seeded experiment on the training part, scored on the held-out "
                   f"part. {DISCLOSURE_NOTE}")
        grid = [0.5, 1.0, 2.0, 3.0, 5.0, 8.0, 10.0, 15.0, 20.0]
        c1, c2 = st.columns(2)
        widgets.bound(state, c1.multiselect, "ε_voc values", "sweep_eps_voc", options=grid)
        widgets.bound(state, c2.multiselect, "ε_kde values", "sweep_eps_kde", options=grid)
        c1, c2, c3 = st.columns(3)
        widgets.bound(state, c1.multiselect, "Methods", "sweep_methods", options=list(SAMPLING_METHODS))
        widgets.bound(state, c2.number_input, "Seeds", "sweep_seeds", min_value=1, max_value=10)
        widgets.bound(state, c3.number_input, "Sequences per class", "sweep_per_class", min_value=5, max_value=2000,
                      step=10)
        cells = len(state.settings.sweep_eps_voc) * len(state.settings.sweep_eps_kde) * len(state.settings.sweep_methods) * int(state.settings.sweep_seeds)
        job = state.jobs.sweep
        if not (isinstance(job, jobs.Job) and job.running):
            if st.button(f"Run the sweep ({cells} cells)", icon=":material/grid_on:", disabled=cells == 0):
                with widgets.guard():
                    steps.ensure_corpus(state)
                    evaluation_steps.start_sweep(state, eps_voc=state.settings.sweep_eps_voc,
                                                 eps_kde=state.settings.sweep_eps_kde,
                                                 methods=state.settings.sweep_methods,
                                                 seeds=int(state.settings.sweep_seeds),
                                                 per_class=int(state.settings.sweep_per_class))
                    st.rerun()

        def show_sweep(j: jobs.Job) -> None:
            if j.error:
                st.error(j.error, icon=":material/error:")
            rows = list(j.partial)
            if not rows:
                return
            df = pd.DataFrame(rows)
            if not j.running:
                st.caption(f"{len(rows)} cell(s) finished" + (" (cancelled: finished cells kept)." if j.cancelled else "."))
            figs = sweep_figures(df)
            for name, fig in figs.items():
                if name.startswith("heatmap"):
                    fig.update_xaxes(type="category").update_yaxes(type="category")
                st.plotly_chart(charts.tidy(fig, width=90), key=f"chart.sweep.{name}")
            names = {"method": "Method", "eps_voc": "ε_voc", "eps_kde": "ε_kde",
                     "no_llm_accuracy_mean": "No-LLM accuracy", "no_llm_accuracy_sd": "± sd",
                     "vocabulary_recall_mean": "Recall of the true top terms", "noise_term_share_mean": "Noise share of Ṽ",
                     "seeds": "Seeds"}
            summary = sweep_summary(df)[list(names)].rename(columns=names)
            for col in ("No-LLM accuracy", "± sd", "Recall of the true top terms", "Noise share of Ṽ"):
                summary[col] = [review.sig3(v) for v in summary[col]]
            summary["± sd"] = [review.sd_or_none(v, n) for v, n in zip(summary["± sd"], summary["Seeds"])]
            st.dataframe(summary, hide_index=True, key="table.sweep")
            st.caption(f"Real keyphrase baseline (the same on every page; it does not depend on ε): "
                       f"{float(df['real_keyphrase_baseline_accuracy'].iloc[0]):.2f}.")

        widgets.job_monitor(state, "sweep", body=show_sweep, cancel_label="Cancel (keeps finished cells)")

with tab_compare:
    st.caption("DP-KPS next to the two other methods of the field — private prediction (clipped logits + sparse "
               "vector, [PrivPred]) and AugPE seeded with the private vocabulary — at the same ε, on the same split, "
               "evaluated alike. Its accuracies read real data (private, local); the synthetic documents each method "
               "writes are DP releases, so the JOINT cost of running the selected methods on the same data (the sum "
               "of their ε and δ; a Ṽ shared by DP-KPS and AugPE+Ṽ counted once) is checked against the cap and "
               "charged to this corpus's ledger before anything runs. DP-KPS is pure ε-DP; the other two are "
               "(ε, δ)-DP.")
    st.warning(PRIVATE_PROMPT_WARNING, icon=":material/warning:")
    c1, c2, c3, c4 = st.columns(4)
    widgets.bound(state, c1.number_input, "ε (every method)", "compare_eps", min_value=0.1, max_value=100.0, step=1.0)
    widgets.bound(state, c2.number_input, "δ (private prediction, AugPE)", "compare_delta", min_value=1e-12,
                  max_value=1e-2,
                  format="%.0e")
    widgets.bound(state, c3.number_input, "Documents per class", "compare_per_class", min_value=1, max_value=50)
    widgets.bound(state, c4.number_input, "Max tokens per document", "compare_max_tokens", min_value=8, max_value=512,
                  step=8)
    widgets.bound(state, st.multiselect, "Methods", "compare_methods", options=list(GENERATION_METHODS))
    n_classes = len(state.loaded.corpus.classes) if state.loaded.corpus is not None else 0
    plan = review.compare_plan(tuple(state.settings.compare_methods), n_classes=n_classes,
                               per_class=int(state.settings.compare_per_class),
                               max_tokens=int(state.settings.compare_max_tokens), epochs=AugPEConfig().epochs,
                               gpu=cuda_available())
    if len(plan):
        st.dataframe(plan, hide_index=True, key="table.compare_plan")
        st.caption("Before starting: the LLM prompts and a rough time per selected method with the local model on "
                   "this machine (plus embedding the held-out documents once per session). AugPE+Ṽ sends "
                   f"{AugPEConfig().epochs} prompts per synthetic document, DP-KPS one ({AugPEConfig().epochs}× per "
                   "synthetic document).")
    joint_eps, joint_delta = joint_cost(tuple(state.settings.compare_methods),
                                        eps_total=float(state.settings.compare_eps),
                                        eps_voc=float(state.settings.compare_eps) / 2,
                                        delta=float(state.settings.compare_delta))
    st.markdown(f"**Joint cost of the selected methods on this corpus: ε = {joint_eps:g}, δ = {joint_delta:g}** — "
                "charged to the corpus's ledger when you start.")
    try:
        led = ledger_view.ledger(state)
    except DPKPSError as e:  # an unusable ledger folder: said here, nothing can be spent
        st.error(str(e), icon=":material/error:")
        led = None
    over_cap = led is None or (led.cap is not None and not led.can_afford(joint_eps))
    if led is not None and over_cap:  # a public decision (this session's own releases, the settings and the cap): said before any click
        room = max(float(led.cap) - led.total_epsilon, 0.0)
        fits = float(state.settings.compare_eps) * room / joint_eps if joint_eps > 0 else 0.0  # the joint cost scales with ε
        st.warning(f"The joint cost ε = {joint_eps:g} would take this session's ε on this corpus from "
                   f"{led.total_epsilon:g} to {led.total_epsilon + joint_eps:g}, over the cap of {float(led.cap):g}"
                   + (f": lower ε per method to at most {math.floor(fits * 100) / 100:g}" if fits >= 0.01 else
                      ": no ε is left under this cap")
                   + f", pick fewer methods, or raise the cap on {page_ref('budget')}.", icon=":material/block:")
    job = state.jobs.compare
    if not (isinstance(job, jobs.Job) and job.running):
        if st.button("Compare at this privacy level", icon=":material/compare:", disabled=over_cap):
            with widgets.guard():
                steps.ensure_corpus(state)
                evaluation_steps.start_compare(state, methods=state.settings.compare_methods,
                                               eps_total=float(state.settings.compare_eps),
                                               delta=float(state.settings.compare_delta),
                                               per_class=int(state.settings.compare_per_class),
                                               max_tokens=int(state.settings.compare_max_tokens))
                st.rerun()

    def show_compare(j: jobs.Job) -> None:
        if j.error:
            st.error(j.error, icon=":material/error:")

    widgets.job_monitor(state, "compare", body=show_compare)
    job = state.jobs.compare
    rows = review.keep_compare_rows(state, job if isinstance(job, jobs.Job) and not job.running else None)
    if rows:  # every row of this session: running one method at a time keeps the earlier ones
        table_df, notes = review.compare_table(rows, n_classes)
        st.dataframe(table_df, hide_index=True, key="table.compare")
        if any(table_df["Enough to judge?"] != "yes"):
            st.warning(review.too_few_sentence("some methods' rows") + " Raise “Documents per class”.",
                       icon=":material/warning:")
        with st.expander("Notes per method"):
            st.markdown("\n".join(f"- {n}" for n in notes) or "No notes.")
        if st.button("Clear the comparison rows", icon=":material/clear_all:"):
            state.results.compare_rows = []
            st.rerun()

with tab_memo:
    st.markdown(widgets.PRIVATE_BADGE)
    st.caption("Does a synthetic document reproduce a real training document? For each synthetic document: the real "
               "training document sharing the longest run of words with it (8-word sequences and longer) and, "
               "optionally, the nearest by embedding. A run of 12 words or more is flagged. DP makes copies "
               "unlikely; this check makes it visible. It reads the real training documents on this machine: the "
               "results and excerpts are for you only and never part of the bundle.")
    if not session.documents(state):
        st.info(f"Write some synthetic documents first ({page_ref('generate')}).")
    else:
        n_train = len(state.loaded.split.train) if state.loaded.split is not None else 0
        by_emb = st.checkbox(f"Also find the nearest by embedding (embeds the {n_train:,} training documents once "
                             "per session, in memory: minutes on a small CPU)", key="memo_by_embedding")
        job = state.jobs.memorisation
        if not (isinstance(job, jobs.Job) and job.running):
            if st.button("Run the memorisation check", icon=":material/content_copy:"):
                with widgets.guard():
                    evaluation_steps.start_memorisation(state, by_embedding=by_emb)
                    st.rerun()

        def show_memorisation(j: jobs.Job) -> None:
            if j.error:
                st.error(j.error, icon=":material/error:")
            elif not j.running and j.result is not None:
                df = review.memorisation_frame(j.result)
                flagged = int((df["Reproduces real text?"] != "no").sum()) if len(df) else 0
                (st.warning if flagged else st.success)(memorisation_advice(flagged, len(df)),
                                                        icon=":material/content_copy:")
                st.dataframe(df, hide_index=True, key="table.memorisation")

        widgets.job_monitor(state, "memorisation", body=show_memorisation)

with tab_disc:
    st.markdown(widgets.PRIVATE_BADGE)
    st.caption("Does a synthetic document reproduce what it was built from, beyond chance? The synthetic documents' "
               "matches — rare 6-word phrases, shared spans of 12 words or more, and the identifiers you list — "
               "are counted against the training documents AND against as many held-out documents, which no DP "
               "step saw: chance matches hit both alike, leakage hits the training part more. A one-sided test "
               "says whether it does (a p-value), and an empirical ε lower bound per document stands beside the "
               "claimed ε. Local and private: the result is kept in the run folder for the internal dossier "
               f"({page_ref('export')}), never in the bundle; the identifiers are not written anywhere.")
    if not session.documents(state):
        st.info(f"Write some synthetic documents first ({page_ref('generate')}).")
    else:
        ids = st.text_area("Identifiers to look for (optional: one per line — names, MRNs)", key="disclosure_ids",
                           help="Each is looked for as whole words, case-insensitively, in the synthetic documents "
                                "and in the training and held-out documents. Kept in this session only.")
        conf = st.select_slider("Confidence", options=[0.9, 0.95, 0.99], value=0.95, key="disclosure_confidence")
        job = state.jobs.disclosure
        if not (isinstance(job, jobs.Job) and job.running):
            if st.button("Run the disclosure test", icon=":material/policy:", key="run_disclosure"):
                with widgets.guard():
                    evaluation_steps.start_disclosure(state, 
                        identifiers=[line.strip() for line in (ids or "").splitlines() if line.strip()],
                        confidence=float(conf))
                    st.rerun()

        def show_disclosure(j: jobs.Job) -> None:
            if j.error:
                st.error(j.error, icon=":material/error:")
            elif not j.running and j.result is not None:
                show_disclosure_result(j.result.to_dict())

        def show_disclosure_result(d: dict[str, Any]) -> None:
            verdict = str(d["verdict"])
            box = st.error if verdict.startswith("leakage beyond") else st.warning if verdict == "leakage" else st.success
            box(f"**{verdict.capitalize()}.** {d['sentence']}", icon=":material/policy:")
            m = st.columns(4)
            m[0].metric("Training documents matched", f"{d['train_matched']} of {d['reference_per_part']}")
            m[1].metric("Held-out documents matched (chance)", f"{d['holdout_matched']} of {d['reference_per_part']}")
            m[2].metric("p (one-sided)", f"{d['p_value']:.3g}")
            m[3].metric("Empirical ε lower bound", f"{d['epsilon_lower_bound']:.3g}",
                        help="Per document, at the chosen confidence ([OneRun] Thm 3.1), beside the claimed ε "
                             f"= {d['claimed_epsilon']}.")
            st.dataframe(pd.DataFrame([{"matches": k, "training documents": t["train"],
                                        "held-out documents": t["holdout"], "p (one-sided)": t["p_value"],
                                        "ε lower bound": t["epsilon_lower_bound"]}
                                       for k, t in d.get("tiers", {}).items()]),
                         hide_index=True, key="table.disclosure")

        job = state.jobs.disclosure
        if isinstance(job, jobs.Job):
            widgets.job_monitor(state, "disclosure", body=show_disclosure)
        else:
            from dpkps_core.evaluation.disclosure import read_disclosure

            folder = session.run_dir(state, create=False)
            stored = read_disclosure(folder) if folder else None
            if stored is not None:
                st.caption("The last disclosure test of this run (kept in its folder, PRIVATE):")
                show_disclosure_result(stored)

navigation.next_button("evaluate")
