"""Step 6 — write one document per DP keyphrase sequence with an LLM (post-processing; resumable)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpkps_core.device import DEVICE_CHOICES, cuda_available, describe_device
from dpkps_core.llm import preview
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE
from dpkps_core.llm.repetition import MAX_NO_REPEAT_NGRAM, MAX_REPETITION_PENALTY
from dpkps_core.llm.settings import MAX_DRAFTS
from studio import generation_steps, jobs, navigation, page_ref, review, run_view, session, widgets
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "generate",
                       "Each prompt holds only a public template, the document type, one DP keyphrase sequence and "
                       "(optionally) PUBLIC examples — never the private corpus. Every prompt sent is logged in the "
                       "run's audit log.")
outcome = run_view.outcome(state)
if outcome is None:
    st.info("Sample keyphrase sequences first — or, after a reload, reopen an earlier run from its folder on "
            f"{page_ref('export', titled=True)}: its documents are kept and “Continue writing” resumes it, at no "
            "new ε.")
    navigation.go_to("sequences")
    navigation.go_to("export", f"Reopen a run ({page_ref('export')})")
else:
    job = state.jobs.generation
    if isinstance(job, jobs.Job) and job.running and state.jobs.reattached_generation is job:  # app.py
        st.info("This run's documents are still being written (started before the reload or in another tab): "
                "its progress and Cancel are below.", icon=":material/sync:")
    running = isinstance(job, jobs.Job) and job.running
    st.subheader("Backend")
    widgets.bound(state, st.radio, "LLM", "backend", options=generation_steps.backend_options(), horizontal=True,
                  disabled=running, format_func=generation_steps.backend_label)  # the registry (llm/factory.py)
    spec = generation_steps.chosen_backend(state)
    if "model_path" in spec.settings:
        widgets.bound(state, st.text_input,
                      "Model folder on this server (a Hugging Face causal-LM folder: config.json, "
                      "safetensors weights, tokenizer; loaded offline, nothing is downloaded)", "local_model_path",
                      placeholder="/models/my-approved-instruct-model", disabled=running)
    if spec.runs_here:
        c1, c2 = st.columns(2)
        widgets.bound(state, c1.radio, "Device", "device", options=list(DEVICE_CHOICES), horizontal=True,
                      disabled=running,
                      format_func={"auto": "auto (GPU when present)", "cpu": "CPU", "cuda": "CUDA GPU"}.get)
        widgets.bound(state, c2.number_input, "Documents per batch (written together in one model call)",
                      "llm_batch_size",
                      min_value=1, max_value=256, disabled=running)
        has_gpu = cuda_available()
        st.caption(f"This server: {'a CUDA GPU (' + describe_device('cuda') + ')' if has_gpu else 'no CUDA GPU, CPU'}"
                   f". The device also runs the embedding of real documents in the evaluation. A batch of "
                   f"{DEFAULT_BATCH_SIZE} wrote documents 3.7× faster than one at a time on 2 CPU cores "
                   "(benchmarks/generation.py); every finished document is still saved at once.")
        if state.settings.device == "cuda" and not has_gpu:
            st.warning("No CUDA GPU is visible here: choose auto or CPU.", icon=":material/warning:")
        with st.expander("Advanced: repetition control"):
            r1, r2 = st.columns(2)  # dpkps_core/llm/repetition.py: the generated tokens only, never the prompt
            widgets.bound(state, r1.number_input, "No repeated n-gram of this many tokens (0 = off)",
                          "llm_no_repeat_ngram",
                          min_value=0, max_value=MAX_NO_REPEAT_NGRAM, disabled=running)
            widgets.bound(state, r2.number_input, "Repetition penalty (1.0 = off)", "llm_repetition_penalty",
                          min_value=1.0, max_value=MAX_REPETITION_PENALTY, step=0.05, disabled=running)
            st.caption("Against repetition loops, which the non-document screen refuses and retries. The defaults "
                       "were measured on BBC DP sequences (benchmarks/repetition.py); the keyphrases in the prompt "
                       "stay free to appear.")
    else:
        c1, c2 = st.columns(2)
        if "base_url" in spec.settings:
            widgets.bound(state, c1.text_input, "Base URL (empty = api.openai.com)", "base_url",
                          placeholder="http://127.0.0.1:8000/v1")
        if "model" in spec.settings:
            widgets.bound(state, c2.text_input, "Model", "llm_model")
        if "api_key" in spec.settings:
            widgets.bound(state, c1.text_input, "API key (kept in this session's memory only; never written anywhere)",
                          "api_key", type="password")
        widgets.bound(state, c2.number_input, "Requests in flight", "concurrency", min_value=1, max_value=64)
        widgets.bound(state, c1.number_input, "Price per 1k tokens (optional, for the estimate)", "price_per_1k",
                      min_value=0.0, step=0.001, format="%.4f")
        st.caption("The DP sequences (not the private corpus) are sent to this server.")

    st.subheader("Prompt")
    c1, c2 = st.columns([3, 2])
    widgets.bound(state, c1.text_input, "Document type (with its article)", "doc_type",
                  placeholder="a short news article")
    widgets.bound(state, c2.checkbox, "Class names in the prompt", "include_label",
                  help=f"The class names declared public on {page_ref('corpus')} (they are released with the data "
                       "anyway); untick to leave them out of every prompt.")
    few = st.file_uploader("Optional PUBLIC few-shot examples (CSV/JSONL with a 'text' column, or .txt with examples "
                           "separated by blank lines) — never the private corpus", type=["csv", "jsonl", "txt"],
                           key="few_shot_upload")
    if few is not None and few.name != state.settings.few_shot_name:
        with widgets.guard():
            ex = generation_steps.parse_few_shot_upload(state, few.getvalue(), few.name)
            st.success(f"{len(ex)} public example(s) loaded from {few.name}.")
    if state.settings.few_shot:
        st.caption(f"Using {len(state.settings.few_shot)} public example(s) from {state.settings.few_shot_name}.")
        if st.button("Remove the few-shot examples"):
            state.settings.few_shot, state.settings.few_shot_name = (), ""
            st.rerun()
    widgets.bound(state, c2.number_input, "Drafts per sequence (the best is kept: it passes the non-document screen, a "
                  "classifier trained only on the DP sequences assigns it to its class, it uses the most keyphrases; "
                  "no privacy cost, K× the prompts)", "llm_drafts", min_value=1, max_value=MAX_DRAFTS,
                  disabled=running)
    c1, c2, c3 = st.columns(3)
    widgets.bound(state, c1.number_input, "Max tokens per document", "max_tokens", min_value=8, max_value=4096, step=16)
    widgets.bound(state, c2.slider, "LLM temperature", "llm_temperature", min_value=0.0, max_value=1.5, step=0.05)
    total = len(outcome.sequences)
    if int(state.settings.n_documents) > total:
        state.settings.n_documents = total
    widgets.bound(state, c3.number_input, f"Write documents for the first … sequences (of {total:,}; round-robin over "
                  "classes; finished ones are skipped)", "n_documents", min_value=1, max_value=total)

    with widgets.guard():
        seqs = generation_steps.job_sequences(state)
        pconf = generation_steps.prompt_config(state)
        st.markdown("**Exact prompt for the first sequence**")
        st.code(preview(seqs[0], pconf), language="text", wrap_lines=True)
        done = session.documents(state)
        written = {d["id"] for d in done}
        remaining = max(int(state.settings.n_documents) - len([q for q in seqs[: int(state.settings.n_documents)]
                                                     if q["id"] in written]), 0)
        busy = generation_steps.model_line(state)  # other sessions' batches on the shared model (issue 35 §8)
        with st.spinner("Estimating from the speed measured at these settings…", show_time=True):
            est = generation_steps.estimate_generation(state, int(state.settings.n_documents), written=written)
        st.caption(f"Estimate for the {remaining:,} document(s) to go: {est.summary()}."
                   + ("" if est.rejection_rate is not None or not est.retries else
                      " The first batch written measures the speed and the retries; later estimates use it."))
        if busy and not running:
            st.caption(generation_steps.model_line_note(busy), help="The offline model runs one batch at a time; "
                       "the runs of all sessions take turns, first come, first served.")
        label = "Continue writing" if done else "Write documents"
        if not running and st.button(f"{label} ({remaining:,} to go)", type="primary", icon=":material/edit_note:",
                                     disabled=remaining == 0):
            generation_steps.start_generation(state, int(state.settings.n_documents))
            st.rerun()

    def show_non_documents(docs: list, fails: list) -> None:
        """Replies that were not documents were retried; the share that never became one is shown."""
        bad, attempted = review.non_document_share(docs, fails)
        if attempted:
            (st.warning if bad else st.caption)(
                f"Non-documents: {bad:,} of {attempted:,} items ({bad / attempted:.0%}) got only replies that were not "
                "documents (a request for input, a bare preamble, a repetition loop) after every retry; they are "
                "not written. Preambles such as “Here's a short news article:” are removed from documents.")

    def show_documents(j: jobs.Job) -> None:
        docs = session.documents(state)
        fails = session.failures(state)
        if j.error:
            st.error(j.error, icon=":material/error:")
        elif not j.running and j.result is not None:
            r = j.result
            msg = (f"{r.done:,} of {r.total:,} documents in the run folder ({r.written:,} new, {r.already_done:,} "
                   f"from before), {r.failed:,} failed.")
            (st.warning if r.cancelled or r.failed else st.success)(
                msg + (" Cancelled: press “Continue writing” to resume." if r.cancelled else ""))
        st.markdown(f"**{len(docs):,} document(s) written** (newest first)")
        if docs:
            st.dataframe(pd.DataFrame([{"id": d["id"], "class": d["label"], "text": d["text"]}
                                       for d in reversed(docs)]), hide_index=True, key="table.documents")
            widgets.document_reader(list(reversed(docs)), key="read.documents")  # the table cuts texts to a line
        if fails:
            st.caption(f"{len(fails)} failed item(s) (see generation_failures.jsonl; “Continue” retries them).")
        show_non_documents(docs, fails)

    if isinstance(job, jobs.Job):
        widgets.job_monitor(state, "generation", body=show_documents, cancel_label="Cancel (keeps finished documents)")
    else:
        docs = session.documents(state)
        if docs:
            st.markdown(f"**{len(docs):,} document(s) in the run folder**")
            st.dataframe(pd.DataFrame([{"id": d["id"], "class": d["label"], "text": d["text"]} for d in docs]),
                         hide_index=True, key="table.documents")
            widgets.document_reader(docs, key="read.documents")
        show_non_documents(docs, session.failures(state))
    navigation.next_button("generate")
