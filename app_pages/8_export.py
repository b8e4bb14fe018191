"""Step 8 — the release bundle (DP outputs only) and what it releases at which ε; delete the run."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from studio import state, widgets

widgets.page_header(7, "The bundle holds only DP outputs and public parameters: the synthetic documents, the keyphrase "
                       "sequences, Ṽ, the privacy report and the audit log of every prompt. The private corpus, the "
                       "held-out split and every evaluation stay here.")
s = st.session_state

out = state.run_dir(create=False)
if out is None or s.get("outcome") is None:
    st.info("Nothing to export yet: sample keyphrase sequences first.")
    widgets.go_to(4)
else:
    job = s.get("job_generation")
    if isinstance(job, state.Job) and job.running:
        st.warning("The LLM is still writing; the bundle holds the documents finished so far.",
                   icon=":material/hourglass_top:")
    parts: dict[str, bytes] = {}
    with widgets.guard():
        parts = state.bundle_parts()
    if parts:
        report = json.loads(parts["privacy_report.json"])
        st.subheader("What is released, at what ε")
        demo = report.get("seed_policy") == "seeded-demo-not-for-release"
        if demo:
            st.error("Reproducible demo: the noise was SEEDED. This bundle is NOT FOR RELEASE.",
                     icon=":material/dangerous:")
        m = st.columns(4)
        m[0].metric("Total ε (pure DP)", f"{report['epsilon_total']:g}")
        m[1].metric("ε_voc (vocabulary)", f"{report['epsilon_vocabulary']:g}")
        m[2].metric("ε_kde (densities)", f"{report['epsilon_kde']:g}")
        m[3].metric("Noise", "seeded demo" if demo else "OS entropy")
        docs = [json.loads(line) for line in parts["documents.jsonl"].decode("utf-8").splitlines() if line.strip()]
        seqs = parts["sequences.jsonl"].decode("utf-8").count("\n")
        st.markdown(
            f"- **{len(docs):,} synthetic documents** and **{seqs:,} keyphrase sequences** "
            f"({report.get('method')}), classes: {', '.join(report.get('classes', []))}\n"
            f"- the private vocabulary Ṽ ({report['vocabulary']['private_size']:,} terms of "
            f"{report['vocabulary']['name']}) with its noisy counts\n"
            f"- {report['guarantee']}; neighbouring datasets: {report['neighbouring']}\n"
            f"- {len(report.get('events', []))} ledger event(s): mechanisms {', '.join(report.get('mechanisms', []))}\n"
            "- **not released:** the corpus, the held-out split (split.json), term counts, evaluations")
        with st.expander("Ledger events in the report"):
            st.dataframe(pd.DataFrame([{"step": e["step"], "ε": e["epsilon"], "mechanism": e["mechanism"],
                                        "released": e["released"]} for e in report.get("events", [])]),
                         hide_index=True)
        st.subheader("Download")
        with widgets.guard():
            data = state.bundle()
            st.download_button("Download the release bundle (ZIP)", data=data, file_name=f"{out.name}-bundle.zip",
                               mime="application/zip", type="primary", icon=":material/download:",
                               key="download.bundle")
        st.dataframe(pd.DataFrame([{"file": n, "bytes": len(b)} for n, b in sorted(parts.items())]),
                     hide_index=True, key="table.bundle")
        cols = st.columns(4)
        for i, (name, mime) in enumerate((("documents.csv", "text/csv"), ("documents.jsonl", "application/jsonl"),
                                          ("sequences.jsonl", "application/jsonl"),
                                          ("privacy_report.md", "text/markdown"))):
            cols[i].download_button(name, data=parts[name], file_name=name, mime=mime, key=f"download.{name}")

    st.subheader("Delete this run")
    st.caption(f"Removes this session's run folder(s) from disk (now: `{out}`). The ledger keeps its entries: ε that "
               "was spent stays spent, whatever happens to the outputs.")
    sure = st.checkbox("Yes, delete the run folder(s) of this session", key="confirm_delete")
    if st.button("Delete this run", disabled=not sure, icon=":material/delete_forever:"):
        with widgets.guard():
            gone = state.delete_runs()
            state.notice(f"Deleted {len(gone)} run folder(s): {', '.join(gone)}.")
            st.rerun()
