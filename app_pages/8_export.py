"""Step 8 — the release bundle (DP outputs only) and what it releases at which ε; the runs on this machine (with
login: the signed-in account's own, ``studio.tenancy``): reopen one (no new ε), export it, delete this session's;
the opened run's dossier in both editions (``studio.dossier_view``: the release edition, also in the bundle, and
the PRIVATE internal edition, never exported).
An administrator also sees every account's runs and ledger totals here, read-only."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpkps_core.dossier.export import BundleContents
from dpkps_core.records.runfolder import read_failures
from studio import dossier_view, jobs, navigation, page_ref, review, runs, session, tenancy, widgets
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "export",
                       "The bundle holds only DP outputs and public parameters: the synthetic documents, the keyphrase "
                       "sequences, Ṽ, the privacy report and the audit log of every prompt. The private corpus, the "
                       "held-out split and every evaluation stay here.")
listed = runs.machine_runs(state)
if not listed:
    st.info("Nothing to export yet: sample keyphrase sequences first.")
    navigation.go_to("sequences")
else:
    # ------------------------------------------------------------------------------- runs on this machine
    # The run folder is the state (docs/ARCHITECTURE.md): every run on this machine is listed, whatever session or
    # tab made it, and can be reopened (Ṽ, densities, sequences, documents back in the app) or exported — reading
    # released outputs back is post-processing: no new ε, no ledger event.
    st.subheader("Your runs" if tenancy.current().signed_in else "Runs on this machine")
    st.dataframe(pd.DataFrame([{"run": r["name"] + (" (current)" if r["current"] else ""), "created": r["created"],
                                "corpus": r["corpus"], "method": r["method"] or "—",
                                "ε of its outputs": r["epsilon_total"], "sequences": r["sequences"],
                                "documents": r["documents"]} for r in listed]),
                 hide_index=True, key="table.runs")
    paths = [r["path"] for r in listed]
    by_path = {r["path"]: r for r in listed}
    current = next((r["path"] for r in listed if r["current"]), paths[0])
    if state.settings.export_run not in paths or state.run.export_current != current:
        state.settings.export_run = current  # a new current run (sampled again) is what the page opens first
        state.run.export_current = current
    widgets.bound(state, st.selectbox, "Open a run", "export_run", options=paths,
                  format_func=lambda p: f"{by_path[p]['name']}{' (current)' if by_path[p]['current'] else ''} — "
                                        f"{by_path[p]['corpus']}, {by_path[p]['documents']:,} documents, "
                                        f"{by_path[p]['sequences']:,} sequences")
    chosen = state.settings.export_run
    run = by_path[chosen]
    out = chosen
    job = state.jobs.generation
    if not run["current"]:
        st.caption("Reopening puts this run's Ṽ, densities, sequences and documents back into the app: continue "
                   f"writing on {page_ref('generate')}, evaluate on {page_ref('evaluate')}, export here. "
                   "**No new ε** — nothing is released again.")
        if st.button("Reopen this run in the app (no new ε)", icon=":material/folder_open:", key="reopen_run",
                     disabled=isinstance(job, jobs.Job) and job.running):
            with widgets.guard():
                runs.reopen_run(state, out)
                st.rerun()
    if run["current"] and isinstance(job, jobs.Job) and job.running:
        st.warning("The LLM is still writing; the bundle holds the documents finished so far.",
                   icon=":material/hourglass_top:")
    if not run["sequences"]:
        st.info("This run holds no keyphrase sequences yet (only what was released before sampling): reopen it and "
                f"sample them on {page_ref('sequences')} (free) to export.", icon=":material/info:")
    bundle: BundleContents | None = None
    if run["sequences"]:
        with widgets.guard():
            bundle = BundleContents.of(runs.bundle_parts_for(state, out))
    if bundle is not None:
        report = bundle.report
        st.subheader("What is released, at what ε")
        demo = report.get("seed_policy") == "seeded-demo-not-for-release"
        if demo:
            st.error("Reproducible demo: the noise was SEEDED. This bundle is NOT FOR RELEASE.",
                     icon=":material/dangerous:")
        m = st.columns(4)
        m[0].metric("Total ε (pure DP)", f"{report['epsilon_total']:g}",
                    help="Every DP step charged in this session up to this run, re-runs and abandoned steps "
                         "included: correct and conservative (basic composition).")
        m[1].metric("ε_voc (vocabulary)", f"{report['epsilon_vocabulary']:g}")
        m[2].metric("ε_kde (densities)", f"{report['epsilon_kde']:g}")
        m[3].metric("Noise", "seeded demo" if demo else "OS entropy")
        # the corpus's total to date (local)
        widgets.run_total_note(state, report["epsilon_total"], run_name=run["name"])
        st.caption(f"The total ε = {report['epsilon_total']:g} includes abandoned steps, if any: every Ṽ or density "
                   "built in this session — re-runs and rebuilds that no longer feed this run's output included — "
                   "counts, because each was a release. That is correct and conservative: the guarantee never "
                   "claims less than what was spent.")
        docs, seqs = bundle.documents, bundle.sequences
        st.markdown(
            f"- **{len(docs):,} synthetic documents** and **{seqs:,} keyphrase sequences** "
            f"({report.get('method')}), classes: {', '.join(report.get('classes', []))}\n"
            f"- the private vocabulary Ṽ ({report['vocabulary']['private_size']:,} terms of "
            f"{widgets.vocabulary_label(state, report['vocabulary']['name'])}) with its noisy counts\n"
            f"- {report['guarantee']}; neighbouring datasets: {report['neighbouring']}\n"
            f"- {len(report.get('events', []))} ledger event(s): mechanisms {', '.join(report.get('mechanisms', []))}\n"
            "- **not released:** the corpus, the held-out split (split.json), term counts, evaluations")
        bad, attempted = review.non_document_share(docs, read_failures(out))
        if bad:
            st.caption(f"{bad:,} of {attempted:,} items ({bad / attempted:.0%}) were never written: the model replied "
                       f"with something that was not a document after every retry ({page_ref('generate')}).")
        with st.expander("Ledger events in the report"):
            st.dataframe(pd.DataFrame([{"time (UTC)": str(e.get("timestamp", "")).replace("T", " ")[:19],
                                        "step": e["step"], "ε": e["epsilon"], "mechanism": e["mechanism"],
                                        "released": e["released"]} for e in report.get("events", [])]),
                         hide_index=True)
        st.subheader("Download")
        ready = True
        if not docs:  # never offer an empty bundle without saying so
            other = [r for r in listed if r["documents"] and r["path"] != out]
            st.warning("This run holds **no synthetic documents** (its sequences were sampled after the last "
                       f"documents were written, or none were written yet). Write them on {page_ref('generate')}"
                       + (f", or open an earlier run with documents above ({other[0]['name']}: "
                          f"{other[0]['documents']:,} documents)" if other else "")
                       + ". You can still export the keyphrase sequences alone.", icon=":material/warning:")
            ready = st.checkbox("Export this run without documents (sequences, Ṽ and the report only)",
                                key="export_without_documents")
        if ready:
            with widgets.guard():
                data = runs.bundle_for(state, out)
                st.download_button("Download the release bundle (ZIP)", data=data,
                                   file_name=f"{run['name']}-bundle.zip", mime="application/zip", type="primary",
                                   icon=":material/download:", key="download.bundle")
            st.dataframe(pd.DataFrame([{"file": n, "bytes": len(b)} for n, b in sorted(bundle.files.items())]),
                         hide_index=True, key="table.bundle")
            singles = bundle.single_downloads()
            for col, (name, data, mime) in zip(st.columns(len(singles)), singles):
                col.download_button(name, data=data, file_name=name, mime=mime, key=f"download.{name}")

    if bundle is not None:
        # the dossier of the opened run (issue 34 §1): both editions from the run folder alone, reopened runs too;
        # the internal edition is PRIVATE and the export refuses it (docs/DOSSIER.md)
        st.divider()
        dossier_view.show_dossier_panel(state, out, ledger_view=dossier_view.ledger_view_for(state, run["name"]),
                                        run_name=run["name"])

    st.subheader("Delete a run")
    st.caption("Removes the opened run folder from disk (or every run folder of this session). The ledger keeps its "
               "entries: ε that was spent stays spent, whatever happens to the outputs. Only runs made or reopened "
               "in this session can be deleted here.")
    sure = st.checkbox(f"Yes, delete {run['name']}", key="confirm_delete_one", disabled=not run["mine"])
    if st.button("Delete this run", disabled=not (sure and run["mine"]), icon=":material/delete:"):
        with widgets.guard():
            gone = runs.delete_run(state, out)
            state.settings.export_run = None
            session.notice(state, f"Deleted the run folder {gone}.")
            st.rerun()
    sure_all = st.checkbox("Yes, delete every run folder of this session", key="confirm_delete")
    if st.button("Delete all runs of this session", disabled=not sure_all, icon=":material/delete_forever:"):
        with widgets.guard():
            gone = runs.delete_runs(state)
            state.settings.export_run = None
            session.notice(state, f"Deleted {len(gone)} run folder(s): {', '.join(gone)}.")
            st.rerun()


def admin_view() -> None:
    """Every account's runs and ledger totals, for an administrator named in the app's settings: READ-ONLY (no
    reopen, download, delete or spend) — and the only place where figures are added up across accounts."""
    st.divider()
    st.subheader("Every account (administrator, read-only)")
    st.caption("Each signed-in account has its own runs and its own ledger (docs/PRIVACY.md \"Tenancy\"). This view "
               "only reads them: nothing here reopens, exports, deletes or spends. Private, local figures.")
    records = tenancy.every_tenant()
    rows = []
    for rec in records:
        totals = rec.ledger.totals() if rec.ledger is not None else {}
        rows.append({"account": rec.label, "tenant": rec.short_id, "runs": len(rec.runs),
                     "documents written": sum(r.documents for r in rec.runs),
                     "ledger units": totals.get("units", 0), "ledger releases": totals.get("releases", 0),
                     "ledger": rec.ledger_error or ("—" if rec.ledger is None else "ok")})
    st.dataframe(pd.DataFrame(rows), hide_index=True, key="table.admin_tenants")
    st.markdown(f"In all: **{len(records) - 1}** signed-in account(s), **{sum(len(r.runs) for r in records)}** "
                f"run(s), **{sum(row['ledger releases'] for row in rows)}** ledger release(s).")
    every = [{"account": rec.label, "tenant": rec.short_id, "run": r.name, "created": r.created, "corpus": r.corpus,
              "method": r.method or "—", "ε of its outputs": r.epsilon_total, "sequences": r.sequences,
              "documents": r.documents} for rec in records for r in rec.runs]
    if every:
        st.dataframe(pd.DataFrame(every), hide_index=True, key="table.admin_runs")
    c = session.corpus(state)
    if c is None:
        return
    from dpkps_core.ledger_store.units import unit_strings

    with widgets.guard():
        per, across = tenancy.spend_across_tenants(records, unit_strings(c, by_person=session.person_column(state)
                                                                          is not None))
        unit = widgets.unit_word(state)
        st.markdown(f"**The loaded corpus in every account's ledger** ({c.name}): the most-used {unit}'s ε "
                    "in each account, and the largest total of one " + unit + " over all accounts.")
        st.dataframe(pd.DataFrame([{"account": rec.label, "tenant": rec.short_id, f"most-used {unit}: ε": largest,
                                    "releases on this corpus": n} for rec, largest, n in per]),
                     hide_index=True, key="table.admin_corpus")
        st.metric(f"Across accounts: the most-used {unit}'s total ε", f"{across:g}",
                  help="Each account's budget is its own (a person whose rows two users upload has a budget per "
                       "user); this total is what one document (person) has lost over every account's releases.")


if tenancy.current().admin:
    admin_view()
