"""Step 3 — the private vocabulary Ṽ (ε_voc): a Laplace-noised histogram over all of V, top N."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from studio import (accounting, charts, forecasts, jobs, navigation, page_ref, run_view, session, spend, step_progress,
                    steps, streamed, widgets)
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "private-vocabulary",
                       "Each training document counts its first S distinct terms of V; Laplace noise is added to "
                       "the count of EVERY term of V (zero counts included) and the N largest noisy counts form Ṽ.")
with widgets.guard():
    steps.ensure_corpus(state)
    steps.finish_step_jobs(state)  # a streamed step that ended since the last run: the session learns its release
if session.corpus(state) is None:
    st.info("Load a corpus first.")
    navigation.go_to("corpus")
else:
    eps_voc, _ = session.eps_split(state)
    cfg = session.current_config(state)
    pv = run_view.private_vocabulary(state)
    already = pv is not None
    st.markdown(
        f"Running this step spends **ε_voc = {widgets.eps(eps_voc)}** from the ledger"
        + (" — **again**: re-running charges the ledger a second time (basic composition), it does not replace "
           "the earlier spend." if already else ".")
        + f" Settings: S = {cfg.terms_per_doc}, N = {cfg.vocab_size:,}, vocabulary "
          f"“{widgets.vocabulary_label(state, cfg.vocabulary)}”.")
    # issue 35 part 8: a run reserves its planned ε for its units at its first release, or is warned before it
    accounting.reserve_plan(state)
    eps_kde_plan = session.eps_split(state)[1]
    widgets.bound(state, st.checkbox, f"Reserve ε_kde = {widgets.eps(eps_kde_plan)} for this run's densities now",
                  "reserve_plan",
                  help="Charged with Ṽ to the same documents, so that other sessions or command-line runs on this "
                       f"ledger cannot use up their budget before this run's densities ({page_ref('densities')}) "
                       "draw on it. A reservation never drawn on stays charged.")
    if accounting.reserve_plan(state):
        st.caption(f"Ṽ charges **ε_voc + ε_kde = {widgets.eps(eps_voc + eps_kde_plan)}** to each document now: "
                   f"ε_kde = {widgets.eps(eps_kde_plan)} of it is reserved for the densities of this run.")
    else:
        st.caption(f":material/warning: Without a reservation, another session or a command-line run on the same "
                   f"documents may use up their budget before {page_ref('densities')}, and this run's densities "
                   "would then leave them out.")
    widgets.before_spend_note(state,
                              eps_voc + (session.eps_split(state)[1] if accounting.reserve_plan(state) else 0.0),
                              "vocabulary")
    # one intent, one release (studio.spend): a re-run asks first; stale repeated clicks are ignored
    stepping = step_progress.step_running(state)
    if spend.button(state, "vocabulary", label=f"Build Ṽ (spends ε_voc = {widgets.eps(eps_voc)})", epsilon=eps_voc,
                    done=already,
                    again="Re-run Ṽ", what="ε_voc", icon=":material/casino:", disabled=stepping):
        with widgets.guard(), spend.releasing(state, "vocabulary"), \
                st.status("Building the private vocabulary…", expanded=True) as status:
            st.write("Counting each training document's first S distinct terms of V (private"
                     + (", read from the file chunk by chunk)…" if streamed.is_streamed(state) else ", in memory)…"))
            pv = steps.run_private_vocabulary(state)
            if not isinstance(pv, jobs.Job):  # a streamed corpus's step runs on below, with its progress
                status.update(label=f"Ṽ built: {len(pv):,} terms (ε_voc = {widgets.eps(pv.epsilon)} charged)",
                              state="complete")
            st.rerun()
    step_progress.step_monitor(state, "vocabulary")

    pv, meta = run_view.private_vocabulary(state), run_view.vocabulary_meta(state)
    if pv is not None and meta is not None:
        for warning in meta.get("local_warnings", ()):
            st.warning(f"{warning} (A private check shown only to you: the release went ahead as it would for any "
                       "neighbouring corpus, so that whether anything is released never hinges on one document.)",
                       icon=":material/lock:")
        changed = session.settings_changed_since(meta, session.vocabulary_settings_now(state))
        if changed:
            st.warning(f"Settings changed since Ṽ was built ({', '.join(map(widgets.setting_name, changed))}); Ṽ "
                       "below uses the old ones. "
                       "Re-run to apply them (spends ε_voc again).", icon=":material/sync_problem:")
        st.subheader("Ṽ — the private vocabulary")
        widgets.release_badge(state, meta, "This Ṽ is")
        m = st.columns(4)
        m[0].metric("Terms in Ṽ", f"{len(pv):,}")
        m[1].metric("ε_voc spent for it", f"{widgets.eps(pv.epsilon)}")
        m[2].metric("Noise scale S/ε_voc", f"{pv.noise_scale:.2f}")
        m[3].metric("Public vocabulary |V|", f"{pv.public_vocabulary_size:,}")
        floor = steps.vocabulary_noise_floor(pv)
        left, right = st.columns([3, 2])
        left.plotly_chart(charts.noisy_counts_bar(pv.terms, pv.noisy_counts, top=30, noise_floor=floor),
                          key="chart.noisy_counts")
        right.dataframe(pd.DataFrame({"term": pv.terms[:200], "noisy count": [round(float(c), 1)
                                                                             for c in pv.noisy_counts[:200]]}),
                        hide_index=True, height=520)

        with widgets.guard():  # why a name (or any term) is in Ṽ — from DP quantities only (docs/PRIVACY.md)
            dp_share = forecasts.dp_vocabulary_noise_share(state)
            share = dp_share["expected_noise_share"]
            st.info(f"**Why is a name in Ṽ?** A term of the public vocabulary V — names of people, places and firms "
                    "included — enters Ṽ for one of two reasons: many training documents use it (its count clears "
                    "the noise), or pure noise lifted a term no document uses. From Ṽ's own noisy counts (its cut "
                    f"at {dp_share['cut']:,.1f}, noise scale {pv.noise_scale:.2f}) about **{share:.0%}** of Ṽ is "
                    f"expected to be such noise terms; {dp_share['below_floor']:,.0f} of its terms lie below the "
                    f"noise floor ({dp_share['noise_floor']:,.0f}). Either way, being in Ṽ does not show that any "
                    "one document contains the term: that is what ε_voc guarantees. (Computed from the DP release "
                    "alone.)", icon=":material/help:")

        st.subheader("How much of the real top terms did Ṽ recover?")
        if widgets.exact_previews_switch(state, "vocabulary"):
            st.caption("Computed locally from the TRUE counts; for you only — it is not DP, never exported, and a "
                       "choice made from it (say, re-running Ṽ) is not covered by ε.")
            with widgets.guard():
                chk = state.results.vocab_check or steps.vocabulary_check(state)
                m = st.columns(3)
                m[0].metric(f"Recall of the true top {chk['top']:,}", f"{chk['recall']:.0%}")
                m[1].metric("Share of Ṽ that is pure noise", f"{chk['noise_share']:.0%}",
                            help="Terms of Ṽ that never occur in the training documents (selected by noise alone).")
                m[2].metric("Terms of V that occur in the corpus", f"{chk['terms_in_corpus']:,}")
        navigation.next_button("private-vocabulary")
