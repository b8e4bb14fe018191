"""Step 1 — the private corpus: a demo or an upload, its columns, a private summary and the held-out split."""

from __future__ import annotations

import streamlit as st

from dpkps_core.corpus import corpus_summary
from dpkps_core.errors import DPKPSError
from studio import charts, review, session, steps, widgets

widgets.page_header(0, "Pick the private corpus the synthetic corpus should resemble. It stays in this session's "
                       "memory on this machine; only DP outputs ever leave it.")
s = st.session_state

widgets.bound(st.radio, "Corpus", "corpus_source", options=["demo", "upload"], horizontal=True,
              format_func={"demo": "Demo corpus (preselected)", "upload": "Upload my corpus"}.get)

if s["corpus_source"] == "demo":
    widgets.bound(st.selectbox, "Demo corpus", "demo_spec", options=list(session.DEMO_CHOICES),
                  format_func=session.DEMO_CHOICES.get)
    s.pop("upload_error", None)
    with widgets.guard():
        if s.get("corpus_id") != s["demo_spec"]:
            with st.spinner("Loading the demo corpus…"):
                steps.load_demo(s["demo_spec"])
else:
    st.markdown("CSV, TSV, JSONL, Parquet (one document per row, a text and a label column) or a ZIP of `.txt` "
                "files in one folder per class. Up to 200 MB.")
    upload = st.file_uploader("Private corpus file", type=["csv", "tsv", "jsonl", "json", "parquet", "zip"],
                              key="corpus_upload")
    if upload is not None:
        data = upload.getvalue()
        with widgets.guard():
            try:
                columns, guess_text, guess_label = steps.upload_columns(data, upload.name)
                if columns:
                    # The columns are suggested from their NAMES only (DESIGN §2.0: a guess from the values would let
                    # one row switch the column); when no name or several names fit, the user picks. Once this file
                    # is loaded, the pickers start from the columns the loaded corpus was actually read from.
                    loaded = session.corpus()
                    if (loaded is not None and str(s.get("corpus_id") or "").startswith("upload:")
                            and s.get("corpus_filename") == upload.name):
                        guess_text = loaded.text_column or guess_text
                        guess_label = loaded.label_column or guess_label
                    if guess_text is None:
                        st.info("No column name says which column holds the documents' text (names such as text, "
                                "document, notes, body, content, review, summary): choose it below.",
                                icon=":material/view_column:")
                    c1, c2 = st.columns(2)
                    text_col = c1.selectbox("Text column", columns,
                                            index=columns.index(guess_text) if guess_text in columns else None,
                                            placeholder="choose the column with the documents", key="upload_text_col",
                                            help="Chosen from the column names only, never from the values; change it "
                                                 "if it is not the column that holds the documents.")
                    label_col = c2.selectbox("Label column", columns,
                                             index=columns.index(guess_label) if guess_label in columns else None,
                                             placeholder="choose the column with the class", key="upload_label_col")
                    person_col = st.selectbox(
                        "Person column (optional: the unit of privacy becomes one person)", columns, index=None,
                        placeholder="none: protect each document", key="upload_person_col",
                        help="When one person (a patient, a customer, an employee) has several documents, name the column "
                             "that identifies them: every mechanism then bounds each person's total contribution, and "
                             "the split keeps a person's documents together. The identifiers stay private.")
                else:
                    text_col = label_col = person_col = None
                    st.caption("ZIP of .txt files: each file is a document, labelled by the folder that holds it.")
                if st.button("Load this corpus", type="primary", icon=":material/upload_file:"):
                    c = steps.load_upload(data, upload.name, text_column=text_col, label_column=label_col,
                                          person_column=person_col)
                    s.pop("upload_error", None)
                    st.success(f"Loaded {len(c):,} documents with {len(c.observed_classes)} distinct labels.")
            except DPKPSError as exc:
                review.unload_corpus(f"{upload.name}: {exc}")  # never leave an earlier corpus underneath
                raise

corpus = session.corpus()
if s["corpus_source"] == "upload" and (corpus is None or not str(s.get("corpus_id") or "").startswith("upload:")):
    corpus = None  # the demo corpus loaded before is not the user's: say so instead of showing it under "upload"
    if s.get("upload_error"):
        st.warning(f"**No corpus of yours is loaded.** The last file could not be loaded — {s['upload_error']}",
                   icon=":material/block:")
    else:
        st.info("No corpus of yours is loaded yet: choose a file above and press “Load this corpus”.")
    widgets.next_button(0, enabled=False, help="Load a corpus of yours first.")
if corpus is not None:
    st.divider()
    st.subheader(f"Summary of “{corpus.name}”")
    st.markdown(widgets.PRIVATE_BADGE)
    info = corpus_summary(corpus)
    if corpus.persons is not None:
        st.info(f"Unit of privacy: **one person** (column “{corpus.person_column}”) — every guarantee is stated for "
                f"adding or removing all documents of one person. {len(set(corpus.persons)):,} persons (private count).",
                icon=":material/group:")
    m = st.columns(4)
    m[0].metric("Documents", f"{info['documents']:,}")
    m[1].metric("Classes", info["classes"])
    m[2].metric("Median words / document", f"{info['words_median']:,.0f}")
    m[3].metric("Longest document (words)", f"{info['words_max']:,}")
    if corpus.text_column is not None:
        st.caption(f"Read from the text column “{corpus.text_column}” and the label column “{corpus.label_column}”.")
    if corpus.report is not None:
        st.caption(f"{widgets.PRIVATE_BADGE} {corpus.report.summary()} Each row is kept or dropped on its own "
                   "(empty text, label or person id; too short; an identical copy of a row of the same person).")
    left, right = st.columns(2)
    left.plotly_chart(charts.class_counts_bar(info["class_counts"]), key="chart.class_counts")
    right.plotly_chart(charts.length_histogram(info["words"], corpus.labels), key="chart.lengths")
    st.dataframe({"class": list(info["class_counts"]), "documents": list(info["class_counts"].values())},
                 hide_index=True, key="table.class_counts")

    st.subheader("Public class names")
    if s.get("corpus_source") == "demo":
        st.markdown(f"The demo corpus is public, and so is its class list: **{', '.join(corpus.classes)}**.")
    else:
        st.markdown("The class names are **released** with the synthetic corpus (its labels, the privacy report), "
                    "so they must be names you are allowed to publish. The labels found in your file are shown "
                    "below only as a suggestion for you (private). Documents with a label you do not declare take "
                    "part in no DP step; a declared class without documents still gets a (noise-only) density.")
        suggested = list(corpus.public_classes or corpus.observed_classes)
        names = st.multiselect("Public class names (add your own by typing)",
                               options=list(dict.fromkeys(corpus.observed_classes + suggested)),
                               default=suggested, accept_new_options=True, key=f"class_names:{s['corpus_id']}")
        confirmed = st.checkbox("I confirm these class names are public",
                                key=f"class_names_confirmed:{s['corpus_id']}")
        if st.button("Declare these classes public", disabled=not confirmed, icon=":material/public:"):
            with widgets.guard():
                steps.declare_classes(names)
                st.rerun()
        if corpus.declared:
            st.success(f"Declared public classes: {', '.join(corpus.classes)}.")
            if corpus.undeclared_count:
                st.caption(f"{widgets.PRIVATE_BADGE} {corpus.undeclared_count:,} document(s) carry a label outside "
                           "the declared classes and take part in no DP step.")
        else:
            st.warning("Declare the public class names to continue: nothing is built before they are confirmed.")
    if corpus.report is not None and corpus.report.notes:
        for note in corpus.report.notes:
            st.caption(f"{widgets.PRIVATE_BADGE} {note}")

    st.subheader("Held-out part for evaluation")
    widgets.bound(st.slider, "Test fraction (held out; never touched by a DP step)", "test_fraction",
                  min_value=0.0, max_value=0.5, step=0.05)
    sp = session.split()
    st.caption(f"{len(sp.train):,} training documents feed the DP steps; {len(sp.test):,} are held out for the "
               "local evaluation (page 7). Each document is assigned on its own by a keyed hash of its text, so "
               "adding or removing one document moves no other; the classes' shares are therefore only "
               "approximately equal. Changing this after building Ṽ discards Ṽ and what followed.")
    widgets.next_button(0, enabled=corpus.declared, help=None if corpus.declared else "Declare the public class names first.")
elif s["corpus_source"] == "demo":
    st.info("Load a corpus to continue.")
