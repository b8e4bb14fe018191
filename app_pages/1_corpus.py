"""Step 1 — the private corpus: a demo or an upload, its columns, a private summary and the held-out split."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import streamlit as st

from dpkps_core.corpus import ENCODINGS, NotUTF8Error
from dpkps_core.corpus.columns import ColumnChoiceError, suggest_person_column
from dpkps_core.corpus.formats import ENCODING_LABELS
from dpkps_core.method.config import LIMITS
from dpkps_core.errors import DPKPSError
from dpkps_core.method.matching import truncated_count
from studio import (charts, corpus_files, defaults, navigation, page_ref, session, step_progress, steps, streamed,
                    widgets)
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "corpus",
                       "Pick the private corpus the synthetic corpus should resemble. It stays in this session's "
                       "memory on this machine; only DP outputs ever leave it.")
data_dir = corpus_files.server_data_dir()  # the deployment's data folder ($DPKPS_DATA_DIR), if any
if state.settings.corpus_source == "server" and data_dir is None:
    state.settings.corpus_source = "upload"
widgets.bound(state, st.radio, "Corpus", "corpus_source", options=["demo", "upload"] + (["server"] if data_dir else []),
              horizontal=True, format_func={"demo": "Demo corpus (preselected)", "upload": "Upload my corpus",
                                            "server": "A corpus in the server's data folder"}.get)

def replace_notice(what: str) -> str:
    """What loading another corpus does to the results on screen (nothing is deleted, nothing is refunded)."""
    loaded = session.corpus(state)
    return (f"Loading {what} replaces the current corpus “{loaded.name if loaded else '?'}”: its Ṽ, densities and "
            "sequences are put aside. Nothing is deleted — their run folder stays on disk and can be reopened on "
            f"{page_ref('export', titled=True)} — and the ε they spent stays on the ledger.")


def _in_app_words(exc: DPKPSError) -> DPKPSError:
    """An error's way out worded for this page: the Encoding choice above the file, the column pickers above the
    Load button — never a command-line flag."""
    if isinstance(exc, NotUTF8Error):
        return exc.with_hint("choose Latin-1 under Encoding above")
    return exc.in_app() if isinstance(exc, ColumnChoiceError) else exc


def encoding_choice() -> str:
    """Public user input: the whole file is decoded with this choice, never guessed from its bytes (docs/DESIGN.md §2.0)."""
    return st.selectbox("Encoding", list(ENCODINGS), format_func=ENCODING_LABELS.get, key="upload_encoding",
                        help="How the file's text is stored. UTF-8 unless the file was saved by an older program "
                             "in a Western European encoding: then choose Latin-1 or Windows-1252.")


def file_source(name: str, *, read_columns: Callable[[], tuple[list[str], str | None, str | None]],
                load: Callable[..., Any]) -> None:
    """The column pickers, the replace confirmation and the Load button for one file — an upload or a corpus of
    the server's data folder; ``read_columns()`` gives its columns and the name rule's guesses, ``load(...)`` loads
    it with the chosen columns."""
    if state.loaded.upload_error_file not in (None, name):
        state.loaded.upload_error = None  # a new file: the previous file's error no longer applies
    columns = None
    try:
        columns, guess_text, guess_label = read_columns()
    except DPKPSError as exc:
        exc = _in_app_words(exc)
        # a file that cannot be read changes nothing: the corpus loaded before and every result stay in place
        state.loaded.upload_error, state.loaded.upload_error_file = f"{name}: {exc}", name
        st.error(f"**{name} cannot be loaded** — {exc} Nothing changed: the corpus loaded before and "
                 "every result built on it stay as they are.", icon=":material/block:")
    if columns is not None:
        with widgets.guard():
            if columns:
                # The columns are suggested from their NAMES only (docs/DESIGN.md §2.0: a guess from the values would let
                # one row switch the column); when no name or several names fit, the user picks. Once this file
                # is loaded, the pickers start from the columns the loaded corpus was actually read from.
                loaded = session.corpus(state)
                if (loaded is not None and defaults.is_user_corpus(state.loaded.corpus_id)
                        and state.loaded.corpus_filename == name):
                    guess_text = loaded.text_column or guess_text
                    guess_label = loaded.label_column or guess_label
                # the person column: the loaded upload's when this file has it too (a corrected file keeps the
                # unit of privacy), else a column whose NAME says it identifies a person (patient_id, mrn…)
                kept_person = (loaded.person_column if loaded is not None
                               and defaults.is_user_corpus(state.loaded.corpus_id) else None)
                guess_person = (kept_person if kept_person in columns else
                                suggest_person_column(columns, exclude=(guess_text, guess_label)))
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
                    "Person column (optional: the unit of privacy becomes one person)", columns,
                    index=columns.index(guess_person) if guess_person in columns else None,
                    placeholder="none: protect each document", key="upload_person_col",
                    help="When one person (a patient, a customer, an employee) has several documents, name the column "
                         "that identifies them: every mechanism then bounds each person's total contribution, and "
                         "the split keeps a person's documents together. The identifiers stay private.")
                if person_col is not None and person_col == guess_person and person_col != kept_person:
                    st.caption(f"“{person_col}” was suggested from its name as the column that identifies a "
                               "person; clear it to protect each document instead.")
                if kept_person is not None and person_col != kept_person:  # the unit of privacy changes
                    st.info("Loading this file changes the unit of privacy from **one person** (column "
                            f"“{kept_person}”) to " + (f"**one person** of column “{person_col}”" if person_col
                                                       else "**one document**") + ".", icon=":material/group:")
                elif kept_person is None and person_col is not None and loaded is not None:
                    st.info(f"Loading this file changes the unit of privacy from **one document** to **one "
                            f"person** (column “{person_col}”).", icon=":material/group:")
            else:
                text_col = label_col = person_col = None
                st.caption("ZIP of .txt files: each file is a document, labelled by the folder that holds it.")
            replacing = session.has_results(state) and state.loaded.corpus_id is not None
            sure = True
            if replacing:
                st.warning(replace_notice(f"“{name}”"), icon=":material/warning:")
                sure = st.checkbox("Yes, replace the current corpus (its results are put aside)",
                                   key="confirm_replace_corpus")
            if st.button("Load this corpus", type="primary", icon=":material/upload_file:", disabled=not sure):
                try:
                    c = load(text_column=text_col, label_column=label_col, person_column=person_col)
                except DPKPSError as exc:  # refused before anything was replaced: the loaded corpus stays
                    exc = _in_app_words(exc)
                    state.loaded.upload_error, state.loaded.upload_error_file = f"{name}: {exc}", name
                    st.error(f"**{name} cannot be loaded** — {exc} Nothing changed: the corpus loaded "
                             "before and every result built on it stay as they are.", icon=":material/block:")
                else:
                    state.loaded.upload_error = None
                    st.success(f"Loaded {widgets.plural(len(c), 'document')} with "
                               f"{widgets.plural(len(c.observed_classes), 'distinct label')}.")


if state.settings.corpus_source == "demo":
    widgets.bound(state, st.selectbox, "Demo corpus", "demo_spec", options=list(defaults.DEMO_CHOICES),
                  format_func=defaults.DEMO_CHOICES.get)
    state.loaded.upload_error = None
    with widgets.guard():
        if state.loaded.corpus_id != state.settings.demo_spec:
            if session.has_results(state) and state.loaded.corpus_id:
                # never discard paid-for results as a side effect of a selection: ask first
                st.warning(replace_notice(f"the demo corpus “{defaults.DEMO_CHOICES[state.settings.demo_spec]}”"),
                           icon=":material/warning:")
                c1, c2 = st.columns(2)
                if c1.button("Switch corpus (results put aside)", key="confirm_switch_demo", icon=":material/swap_horiz:"):
                    with st.spinner("Loading the demo corpus…"):
                        steps.load_demo(state, state.settings.demo_spec)
                    st.rerun()
                if c2.button("Keep the current corpus and its results", key="keep_corpus", type="primary"):
                    cid = str(state.loaded.corpus_id or "")
                    if cid.startswith("demo:"):
                        state.settings.demo_spec = cid
                    else:
                        state.settings.corpus_source = "upload"
                    st.rerun()
            else:
                with st.spinner("Loading the demo corpus…"):
                    steps.load_demo(state, state.settings.demo_spec)
elif state.settings.corpus_source == "upload":
    st.markdown("CSV, TSV, JSONL, Parquet (one document per row, a text and a label column) or a ZIP of `.txt` "
                "files in one folder per class. Up to 200 MB through the browser"
                + (" — larger corpora from the server's data folder (the third choice above)." if data_dir else "."))
    upload = st.file_uploader("Private corpus file", type=["csv", "tsv", "jsonl", "json", "parquet", "zip"],
                              key="corpus_upload")
    encoding = encoding_choice()
    if upload is not None:
        data = upload.getvalue()
        file_source(upload.name, read_columns=lambda: corpus_files.upload_columns(data, upload.name, encoding=encoding),
                    load=lambda **cols: corpus_files.load_upload(state, data, upload.name, encoding=encoding, **cols))
else:
    st.markdown("Corpora the deployment put in the server's data folder — files too large for a browser upload, "
                "or folders of Parquet / CSV / JSONL parts as a data platform exports them. They are read in chunks "
                "under the deployment's limits, and stay on the server.")
    entries = corpus_files.server_entries()
    if not entries:
        st.info("The server's data folder holds no corpus file or folder of parts yet.")
    else:
        chosen = st.selectbox("Corpus in the server's data folder", [e.name for e in entries], index=None,
                              placeholder="choose a corpus", key="server_entry",
                              format_func={e.name: e.label for e in entries}.get)
        encoding = encoding_choice()
        if chosen is not None:
            def load_server(**cols: Any) -> Any:
                """Load with a progress bar: a streamed corpus's preparing pass reports documents, rows/s, ETA."""
                bar = st.progress(0.0, text="Reading the corpus…")
                try:
                    return corpus_files.load_server(state, chosen, encoding=encoding,
                                             progress=lambda f, m: bar.progress(min(max(f, 0.0), 1.0), text=m),
                                             **cols)
                finally:
                    bar.empty()

            file_source(chosen, read_columns=lambda: corpus_files.server_columns(chosen, encoding=encoding),
                        load=load_server)

corpus = session.corpus(state)
if state.settings.corpus_source != "demo" and (corpus is None or not defaults.is_user_corpus(state.loaded.corpus_id)):
    corpus = None  # the demo corpus loaded before is not the user's: say so instead of showing it under "upload"
    if state.loaded.upload_error:
        st.warning(f"**No corpus of yours is loaded.** The last file could not be loaded — {state.loaded.upload_error}",
                   icon=":material/block:")
    else:
        st.info("No corpus of yours is loaded yet: choose a file above and press “Load this corpus”.")
    navigation.next_button("corpus", enabled=False, help="Load a corpus of yours first.")
if corpus is not None:
    st.divider()
    st.subheader(f"Summary of “{corpus.name}”")
    st.markdown(widgets.PRIVATE_BADGE)
    is_streamed = streamed.is_streamed(state)
    if is_streamed:
        st.info(f"{streamed.STREAMED_NOTE} Each DP step shows its progress (documents, rows/s, time left) and a "
                "Cancel that stops it between chunks.", icon=":material/stream:")
    info = corpus_files.corpus_summary_of(state, corpus)  # computed once per corpus (session memory, PRIVATE)
    if corpus.persons is not None:
        persons = int(np.unique(corpus.persons).size) if is_streamed else len(set(corpus.persons))
        st.info(f"Unit of privacy: **one person** (column “{corpus.person_column}”) — every guarantee is stated for "
                f"adding or removing all documents of one person. {persons:,} persons (private count).",
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
    # a private, local figure (README "Limits"; docs/DESIGN.md §2.1: the matcher reads the first max_chars_per_doc
    # characters of each document, the same rule for every document, so no count leaves the session)
    limit = LIMITS["max_chars_per_doc"]
    n_long = int(corpus.long.sum()) if is_streamed else truncated_count(corpus.texts, limit)
    st.caption(f"{widgets.PRIVATE_BADGE} Long documents: {widgets.plural(n_long, 'document')} "
               f"{'is' if n_long == 1 else 'are'} longer than {limit:,} characters"
               + (f"; only the first {limit:,} characters of each are read for term extraction." if n_long else
                  " (longer ones would be read up to that length for term extraction)."))
    left, right = st.columns(2)
    colours = widgets.class_colours(state)  # one colour per class on every page
    left.plotly_chart(charts.class_counts_bar(info["class_counts"], colours=colours), key="chart.class_counts")
    right.plotly_chart(charts.length_histogram(info["words"], info.get("word_labels") or corpus.labels,
                                               colours=colours), key="chart.lengths")
    if is_streamed:
        right.caption(f"Lengths of every {streamed.SAMPLE_EVERY}th document (a regular sample: the same shape, a "
                      "lighter page).")
    st.dataframe({"class": list(info["class_counts"]), "documents": list(info["class_counts"].values())},
                 hide_index=True, key="table.class_counts")

    st.subheader("Public class names")
    if state.settings.corpus_source == "demo":
        st.markdown(f"The demo corpus is public, and so is its class list: **{', '.join(corpus.classes)}**.")
    else:
        st.markdown("The class names are **released** with the synthetic corpus (its labels, the privacy report), "
                    "so they must be names you are allowed to publish. The labels found in your file are shown "
                    "below only as a suggestion for you (private). Documents with a label you do not declare take "
                    "part in no DP step; a declared class without documents still gets a (noise-only) density.")
        suggested = list(corpus.public_classes or corpus.observed_classes)
        names = st.multiselect("Public class names (add your own by typing)",
                               options=list(dict.fromkeys(corpus.observed_classes + suggested)),
                               default=suggested, accept_new_options=True, key=f"class_names:{state.loaded.corpus_id}")
        confirmed = st.checkbox("I confirm these class names are public",
                                key=f"class_names_confirmed:{state.loaded.corpus_id}")
        locked = session.has_results(state) and corpus.declared
        if locked:
            st.caption(":material/lock: The declared classes are locked while Ṽ and what followed exist (they were "
                       "built on this list); “Start over” below unlocks them.")
        if st.button("Declare these classes public", disabled=not confirmed or locked, icon=":material/public:"):
            with widgets.guard():
                steps.declare_classes(state, names)
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
    locked = session.has_results(state) or step_progress.step_running(state)
    widgets.bound(state, st.slider, "Test fraction (held out; never touched by a DP step)", "test_fraction",
                  min_value=0.0, max_value=0.5, step=0.05, disabled=locked,
                  help="Locked while Ṽ and what followed exist: they were built on this training part." if locked
                  else ("A streamed corpus is read once more to apply another fraction." if is_streamed else None))
    sp = session.split(state)
    st.caption(f"{len(sp.train):,} training documents feed the DP steps; {len(sp.test):,} are held out for the "
               f"local evaluation ({page_ref('evaluate')}). Each document is assigned on its own by a keyed hash of "
               "its text, so adding or removing one document moves no other; the classes' shares are therefore only "
               "approximately equal.")
    if locked:
        st.info("**Locked:** the held-out fraction and the class list are what Ṽ (and what followed) were built on, "
                "and changing them would discard results that cost ε. To change them, start over: the results are "
                f"put aside (their run folder stays on disk and can be reopened on {page_ref('export')}; the ε spent "
                "stays on the ledger).", icon=":material/lock:")
        c1, c2 = st.columns([2, 1])
        sure = c1.checkbox("Yes, put the current results aside and start over", key="confirm_start_over")
        if c2.button("Start over", disabled=not sure, icon=":material/restart_alt:", key="start_over"):
            with widgets.guard():
                session.start_over(state)
                session.notice(state,
                               "Started over: the previous results are put aside (their run folder stays on disk).")
                st.rerun()
    navigation.next_button("corpus", enabled=corpus.declared,
                           help=None if corpus.declared else "Declare the public class names first.")
elif state.settings.corpus_source == "demo":
    st.info("Load a corpus to continue.")
