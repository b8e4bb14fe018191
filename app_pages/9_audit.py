"""Step 9 — empirical privacy audit of the implementation on this corpus and these settings (PRIVATE, costs no ε)."""

from __future__ import annotations

import streamlit as st

from dpkps_core.audit import coverage_sentence, format_seconds
from studio import audit_view, jobs, navigation, page_ref, pages_ref, session, steps, widgets
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "audit",
                       "Tests the implementation, not just the maths: the exact release path runs many times with "
                       "fresh noise on neighbouring copies of your corpus, built on its raw rows and loaded as "
                       f"{page_ref('corpus')} loads them (one influential document — or, with a person column, every "
                       "row of one person — removed; a canary of rare public terms added), and the outputs are "
                       "compared. The result is an empirical LOWER bound on ε with a confidence level, next to the ε "
                       "you chose — it can reveal a leak, never prove there is none.")
st.markdown(widgets.PRIVATE_BADGE)
st.caption("Runs on in-memory copies with throwaway ledgers: it charges nothing to the privacy ledger, writes nothing "
           "to the run folder, and nothing of it enters the release bundle. Embeddings of the trials' vocabularies "
           "stay in memory (never in the persistent cache).")
st.info("**What this audit covers and what it does not.** " + coverage_sentence(), icon=":material/rule:")
with widgets.guard():
    steps.ensure_corpus(state)
    cfg = session.current_config(state)
    st.markdown(f"**Audited settings:** ε_voc {cfg.eps_voc:g} + ε_kde {cfg.eps_kde:g}, method {cfg.method}, "
                f"S = {cfg.terms_per_doc}, N = {cfg.vocab_size}, L = {cfg.length}, {cfg.per_class} sequences per "
                f"class ({pages_ref('budget', 'sequences')}).")
    audit_view.settings_widgets(state)
    audit_view.rows_widget(state)

job = state.jobs.audit
running = isinstance(job, jobs.Job) and job.running
c1, c2 = st.columns(2)
if c1.button("Estimate the time", icon=":material/timer:", disabled=running):
    with widgets.guard(), st.spinner("Measuring one trial of the release path…"):
        audit_view.estimate(state)
est = state.results.audit_estimate
if est and est.get("corpus_id") == session.corpus_id(state):
    st.caption(f"Measured {est['seconds_per_trial']:.2f} s per trial (the first, which also embeds Ṽ, took "
               f"{est['first_trial_seconds']:.2f} s): {est['trials']} trials on each of {est['neighbours']} "
               f"neighbouring corpora, plus {est['vocabulary_trials']:,} cheap vocabulary-stage trials each → "
               f"estimated {format_seconds(est['estimated_seconds'])}.")
if not running and c2.button("Run the audit", type="primary", icon=":material/policy:"):
    with widgets.guard():
        audit_view.start(state)
        st.rerun()

widgets.job_monitor(state, "audit", body=lambda job: audit_view.show_job(state, job),
                    cancel_label="Cancel (analyses the finished rounds)")
