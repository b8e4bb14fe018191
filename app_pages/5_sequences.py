"""Step 5 — keyphrase sequences per class (post-processing: free) and the cheap no-LLM check."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpkps_core.method.config import LIMITS
from studio import charts, navigation, page_ref, run_view, session, steps, streamed, widgets
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "sequences",
                       "Sequences are sampled from the DP densities: post-processing, so sampling (and re-sampling) "
                       "costs no privacy. They are written to the run folder with the privacy report.")
with widgets.guard():
    steps.finish_step_jobs(state)  # a streamed step that ended since the last run: the session learns its release
meta = run_view.density_meta(state)
if meta is None:
    st.info("Build the keyphrase densities first — or reopen an earlier run from its folder on "
            f"{page_ref('export')} (no new ε).")
    navigation.go_to("densities")
else:
    st.markdown(f"**Method:** {meta['method']} · **L** = {meta['length']} · density {meta['density_kind']} "
                f"(chosen on {page_ref('densities')}; changing them means rebuilding the densities, which charges "
                "ε_kde again).")
    navigation.go_to("densities", f"Change the method or L on {page_ref('densities')}")
    c1, c2 = st.columns(2)
    widgets.bound(state, c1.number_input, "Sequences per class", "per_class", min_value=1,
                  max_value=LIMITS["per_class"])
    widgets.bound(state, c2.slider, "Temperature T (1 = sample from the density; → 0 = most likely terms only)",
                  "temperature", min_value=0.05, max_value=2.0, step=0.05)
    n_classes = len(session.corpus(state).classes)
    outcome = run_view.outcome(state)
    sampled = outcome is not None
    if meta.get("reopened") and meta["method"] != "independent":
        st.caption("Reopened run: its densities were read back as per-term scores, which sample independent "
                   "sequences only; its sequences below are kept.")
    label = "Sample again (free)" if sampled else f"Sample {int(state.settings.per_class) * n_classes:,} sequences (free)"
    if st.button(label, type="secondary" if sampled else "primary", icon=":material/shuffle:"):
        with widgets.guard(), st.spinner("Sampling…"):
            steps.run_sequences(state)
            st.rerun()

    if outcome is not None:
        st.subheader(f"{len(outcome.sequences):,} sequences")
        # sequences of a noise-only density (or Ṽ) carry nothing of the corpus either (issue 35 part 5)
        widgets.release_badge(state, meta if widgets.noise_only(meta) else run_view.vocabulary_meta(state),
                              "These sequences are")
        if outcome.uniform_fallbacks:
            st.caption(f"{outcome.uniform_fallbacks:,} of {outcome.draws:,} draws fell back to uniform over Ṽ "
                       "(every density score of that step was ≤ 0).")
        rows = []
        for cls in session.corpus(state).classes:
            rows += [{"id": q.id, "class": q.label, "keyphrases": ", ".join(q.keyphrases)}
                     for q in [q for q in outcome.sequences if q.label == cls][:5]]
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="table.sequences")
        st.caption(f"Written to the run folder with the privacy report: `{state.run.run_dir}`.")

        st.subheader("No-LLM check: are these sequences useful before spending LLM calls?")
        st.markdown(widgets.PRIVATE_BADGE)
        st.caption("A TF-IDF classifier trained on the DP sequences classifies the held-out documents' own keyphrase "
                   "sequences (paper Table 5). Compare methods here before writing documents; rebuilding densities "
                   "for another method charges ε_kde again.")
        if streamed.is_streamed(state):
            st.caption(f"Not available for this corpus: it classifies the held-out documents in memory. "
                       f"{streamed.STREAMED_NOTE}")
        elif st.button("Run the no-LLM check", icon=":material/fact_check:"):
            with widgets.guard(), st.spinner("Classifying held-out documents (private, local)…"):
                steps.no_llm_check(state)
        res = state.results.no_llm
        if res is not None:
            m = st.columns(3)
            m[0].metric("No-LLM accuracy", f"{res['no_llm_accuracy']:.3g}")  # 3 significant digits everywhere
            m[1].metric("Real keyphrase baseline", f"{res['real_keyphrase_baseline']:.3g}",
                        help=f"The same value on {page_ref('evaluate')} and on the sweep chart: the real training "
                             "documents' keyphrases over the noise-free top-N terms of V; it does not depend on ε.")
            m[2].metric("Chance (majority class)", f"{res['chance']:.3g}")
            st.plotly_chart(charts.no_llm_bars(state.results.no_llm_history), key="chart.no_llm")
        navigation.next_button("sequences")
