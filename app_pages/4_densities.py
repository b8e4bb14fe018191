"""Step 4 — per-class DP keyphrase densities over Ṽ (ε_kde), for the chosen sampling method."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpkps_core.method.config import LIMITS
from dpkps_core.method.sampling import SAMPLING_METHODS
from studio import (charts, forecasts, jobs, navigation, page_ref, review, run_view, session, spend, step_progress,
                    steps, streamed, widgets)
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

SAMPLING_METHOD_LABELS = {  # one label per dpkps_core.method.sampling.SAMPLING_METHODS (a test checks the keys)
    "independent": "independent — L terms drawn i.i.d. from each class's density (fast, robust)",
    "iterative-linear": "iterative, linear ensemble — one DP-KDE per prefix length (ε_kde / L each)",
    "iterative-log": "iterative, log ensemble — ⌈log₂L⌉+1 DP-KDEs ([DP-KPS] appendix B)",
}
DENSITIES = {"auto": "auto (histogram for independent, RFF for iterative)",
             "histogram": "exact smoothed DP histogram (independent only)", "rff": "RFF DP-KDE (the paper's)"}

navigation.page_header(state, "densities",
                       "Each class gets a DP density over Ṽ built from its training documents' keyphrases (their "
                       "matches of Ṽ). Classes use disjoint documents, so ε_kde is spent once, not per class.")
with widgets.guard():
    steps.finish_step_jobs(state)  # a streamed step that ended since the last run: the session learns its release
if state.loaded.corpus is None:  # say the first missing step, not a later one
    st.info("Load a corpus first.")
    navigation.go_to("corpus")
elif run_view.private_vocabulary(state) is None:
    st.info("Build the private vocabulary first.")
    navigation.go_to("private-vocabulary")
else:
    st.subheader("Sampling method (chosen now: the density depends on it)")
    widgets.bound(state, st.selectbox, "Method", "method", options=list(SAMPLING_METHODS),
                  format_func=SAMPLING_METHOD_LABELS.get)
    c1, c2 = st.columns(2)
    widgets.bound(state, c1.number_input, "L — keyphrases per sequence", "length", min_value=1,
                  max_value=LIMITS["length"])
    widgets.bound(state, c2.selectbox, "Density", "density", options=list(DENSITIES), format_func=DENSITIES.get)
    c1, c2 = st.columns(2)
    widgets.bound(state, c1.checkbox, "Bandwidth σ: automatic (¼ × median distance among Ṽ's embeddings)",
                  "bandwidth_auto")
    if not state.settings.bandwidth_auto:
        widgets.bound(state, c1.number_input, "σ", "bandwidth", min_value=0.0, max_value=10.0, step=0.05)
    cfg = session.current_config(state)
    if cfg.density_kind == "rff":
        widgets.bound(state, c2.checkbox, "Random features I: automatic (≈ n_c·ε/2)", "features_auto")
        if not state.settings.features_auto:
            widgets.bound(state, c2.number_input, "I", "features", min_value=16, max_value=LIMITS["features"], step=100)

    with widgets.guard():
        prev = steps.density_preview(state)
        if prev["density"] == "histogram":
            st.caption(f"Exact smoothed DP histogram: Laplace(1/ε_kde) on every term of Ṽ per class — expected "
                       f"noise sd per term {prev['noise_sd_per_term']:.3f} (a {widgets.unit_word(state)} weighs 1 in "
                       "total).")
        else:
            st.caption(f"RFF DP-KDE with {prev['members']} ensemble member(s), I = {prev['features']:,} features; "
                       f"per-class size estimate {prev['class_size_estimate']:,.0f} ({prev['class_size_source']}). "
                       f"Expected error: RFF {prev['rff_error']:.3f} + DP noise {prev['noise_error']:.3f} = "
                       f"{prev['total_error']:.3f}.")

    # before ε_kde is spent, say which methods are expected near chance — from the DP forecast release
    # (post-processing, covered by ε); the exact outlook and the no-LLM check of every method read true counts and
    # sit behind the badged switch (docs/PRIVACY.md "Previews that steer choices")
    outlook = []
    with widgets.guard():
        outlook = forecasts.dp_method_outlook(state)
    chosen = next((r for r in outlook if r["method"] == state.settings.method), None)
    if chosen is not None:
        st.caption(f"{widgets.DP_BADGE} An error is small or large only against the signal it blurs: the DP "
                   f"forecast puts the weakest class's signal/noise at **{chosen['worst_snr']:.2f}** for this method "
                   "(below 1, the density is mostly noise and the sequences near chance). It assumes the classes "
                   "share one vocabulary, so it errs on the cautious side.")
    elif not outlook:
        st.caption(f"Run the DP forecast on {page_ref('budget')} (a small charged ε) to see which methods are "
                   "expected near chance at this corpus size and ε_kde.")
    if chosen is not None and chosen["near_chance"]:
        st.warning(forecasts.outlook_sentence(chosen) + " Compare the methods from the DP forecast below before "
                   "spending ε_kde.", icon=":material/trending_down:")
    with st.expander("Compare the methods before spending ε_kde", expanded=bool(chosen and chosen["near_chance"])):
        if outlook:
            st.markdown(widgets.DP_BADGE)
            st.markdown("**DP forecast** (post-processing of the forecast release on the ledger):\n"
                        + "\n".join(f"- {forecasts.outlook_sentence(r)}" for r in outlook))
        if streamed.is_streamed(state):
            st.caption(f"The exact forecast and the no-LLM check of every method are not available for this "
                       f"corpus. {streamed.STREAMED_NOTE}")
        elif widgets.exact_previews_switch(state, "densities"):
            exact = []
            with widgets.guard():
                exact = forecasts.method_outlook(state)
            st.markdown("**Exact forecast** (true counts of the training part — not covered by ε):\n"
                        + "\n".join(f"- {forecasts.outlook_sentence(r)}" for r in exact))
            st.caption("The no-LLM check below samples each method locally at this ε on the training part (seeded "
                       "noise: a local experiment, not a release) and classifies the held-out documents' keyphrase "
                       "sequences. Nothing is charged to the ledger and nothing leaves this machine — and a method "
                       "chosen from it is chosen from private data that ε does not cover.")
            preview = state.jobs.method_preview
            if not (isinstance(preview, jobs.Job) and preview.running):
                if st.button("Run the no-LLM check of every method at this ε (exact, not covered by ε)",
                             icon=":material/science:"):
                    with widgets.guard():
                        forecasts.start_method_preview(state, list(SAMPLING_METHODS),
                                                       per_class=max(int(state.settings.per_class), 10))
                        st.rerun()

            def show_preview(j: jobs.Job) -> None:
                if j.error:
                    st.error(j.error, icon=":material/error:")
                elif not j.running and j.result is not None and len(j.result):
                    df = j.result
                    st.dataframe(pd.DataFrame({
                        "Method": df["method"], "No-LLM accuracy": [review.sig3(v) for v in df["no_llm_accuracy"]],
                        "Chance": [review.sig3(v) for v in df["chance_accuracy"]],
                        "Real keyphrase baseline": [review.sig3(v) for v in df["real_keyphrase_baseline_accuracy"]]}),
                        hide_index=True, key="table.method_preview")
                    chance = float(df["chance_accuracy"].iloc[0])
                    near = [m for m, a in zip(df["method"], df["no_llm_accuracy"]) if a < chance + 0.1]
                    if near:
                        st.warning(f"Near chance at this ε: {', '.join(near)} (within 0.1 of chance {chance:.2f}).",
                                   icon=":material/trending_down:")

            widgets.job_monitor(state, "method_preview", body=show_preview)

    _, eps_kde = session.eps_split(state)
    built = run_view.density(state) is not None
    st.markdown(f"Building spends **ε_kde = {widgets.eps(eps_kde)}**" + (" **again** (re-running charges the ledger a second "
                "time; changing the method or L needs a rebuild)." if built else "."))
    widgets.before_spend_note(state, eps_kde, "density")
    # one intent, one release (studio.spend): a rebuild asks first; stale repeated clicks are ignored
    stepping = step_progress.step_running(state)
    if spend.button(state, "density", label=f"Build densities (spends ε_kde = {widgets.eps(eps_kde)})",
                    epsilon=eps_kde, done=built,
                    again="Rebuild the densities", what="ε_kde", icon=":material/blur_on:", disabled=stepping):
        with widgets.guard(), spend.releasing(state, "density"), \
                st.status("Building the per-class DP densities…", expanded=True) as status:
            st.write("Extracting each training document's keyphrases (private"
                     + (", read from the file chunk by chunk)…" if streamed.is_streamed(state) else ", in memory)…"))
            st.write("Embedding Ṽ with the public model (cached on disk: Ṽ is a DP output)…")
            if not isinstance(steps.run_density(state), jobs.Job):  # a streamed corpus's step runs on below
                status.update(label="Densities built", state="complete")
            st.rerun()
    step_progress.step_monitor(state, "density")

    meta, info, pv = run_view.density_meta(state), run_view.density_info(state), run_view.private_vocabulary(state)
    if meta is not None and info is not None and pv is not None:
        if (meta["method"], meta["length"], meta["density"]) != (state.settings.method, int(state.settings.length),
                                                                 state.settings.density):
            st.warning("The method, L or density changed since the densities were built; rebuild to apply "
                       f"(spends ε_kde again). Built with: {meta['method']}, L = {meta['length']}.",
                       icon=":material/sync_problem:")
        st.subheader("Densities")
        widgets.release_badge(state, meta, "This density release is")
        m = st.columns(4)
        m[0].metric("Density", info["density"])
        m[1].metric("Bandwidth σ", f"{info['bandwidth']:.3g}", help=info.get("bandwidth_source"))
        if info["density"] == "histogram":
            m[2].metric("Noise sd per term", f"{info['expected_noise_per_term']:.3f}")
        else:
            m[2].metric("Random features I", f"{info['features']:,}", help=info.get("features_source"))
            m[3].metric("Expected error", f"{info['total_error']:.3f}",
                        help=f"RFF {info['rff_error']:.3f} + DP noise {info['noise_error']:.3f}")
        if meta["documents_without_keyphrases"]:
            st.caption(f"{widgets.PRIVATE_BADGE} {meta['documents_without_keyphrases']:,} training documents "
                       "contain no term of Ṽ and contribute nothing (an exact count of the private corpus: not a "
                       "DP output, never exported).")
        for warning in meta.get("local_warnings", ()):  # e.g. documents left out for lack of budget (docs/DESIGN.md §2.0)
            st.warning(f"{widgets.PRIVATE_BADGE} {warning}", icon=":material/lock:")
        c = session.corpus(state)
        scores = run_view.density_scores(state)
        st.plotly_chart(charts.density_bars(c.classes, pv.terms, scores, top=10, colours=widgets.class_colours(state)),
                        key="chart.density_bars")

        st.subheader("Map of Ṽ coloured by each class's density")
        if state.results.umap_map is None:
            if st.button("Draw the UMAP map", icon=":material/scatter_plot:"):
                with widgets.guard(), st.spinner("UMAP of Ṽ's embeddings (first time in a server: ~20 s)…"):
                    steps.umap_map(state)
                    st.rerun()
        else:
            cls = st.selectbox("Colour by the density of class", c.classes, key="umap_class")
            i = c.classes.index(cls)
            st.plotly_chart(charts.umap_density_map(state.results.umap_map, pv.terms, scores[i], cls), key="chart.umap")
        navigation.next_button("densities")
