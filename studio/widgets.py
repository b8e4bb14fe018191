"""Shared Streamlit widgets: badges, bound inputs, the error guard and notices, the sidebar, wording helpers and the
job monitor (the login gate is ``studio.login``, the flow's header and buttons ``studio.navigation``)."""

from __future__ import annotations

import contextlib
import logging
import re
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Iterator

import streamlit as st

from dpkps_core.dossier.labels import format_epsilon, humanize_key, parameter_label, step_label
from dpkps_core.errors import DPKPSError
from studio import fast_mode, jobs, ledger_view, page_ref, run_view, session, tenancy
from studio.login import user_box
from studio.state import SessionState, check_setting, set_widget_value, widget_key, widget_value

log = logging.getLogger("dpkps.studio")

PRIVATE_BADGE = ":red-badge[:material/lock: private — local only, never exported]"
DP_BADGE = ":green-badge[:material/verified_user: DP output — safe to release]"
#: Badge of the EXACT previews (forecast, method preview, ε sweep, Ṽ recall) on true counts (docs/PRIVACY.md
#: "Previews that steer choices"): choosing settings from them is a use of the data ε does not cover.
EXACT_BADGE = ":orange-badge[:material/lock_open: private, local — not covered by ε]"


def exact_previews_switch(state: SessionState, where: str) -> bool:
    """The badged switch "private, local — not covered by ε" (off by default; one setting for every page).

    The default previews are DP (a charged ε_forecast) or DP post-processing; the exact ones read true counts
    of the private corpus, so a setting chosen from them is outside the ledger's ε."""
    settings = state.settings
    st.markdown(EXACT_BADGE)
    wkey = widget_key(f"exact_previews.{where}")  # one widget per page, one setting (Settings.exact_previews)
    set_widget_value(wkey, bool(settings.exact_previews))

    def sync() -> None:
        settings.exact_previews = bool(widget_value(wkey))

    st.toggle("Show exact previews on the true counts (private, local — not covered by ε)", key=wkey, on_change=sync,
              help="Off (default): previews come from the DP forecast release, which is on the ledger. On: previews "
                   "read the exact private counts; choosing ε, N or a method from them is a use of the data that ε "
                   "does not cover (docs/PRIVACY.md).")
    return bool(settings.exact_previews)


def exact_previews_on(state: SessionState) -> bool:
    """Whether the user turned the exact previews on (False by default)."""
    return bool(state.settings.exact_previews)


# ------------------------------------------------------------------------------------------- bound widgets

def bound(state: SessionState, widget: Callable[..., Any], label: str, setting: str, *,
          on_change: Callable[[], None] | None = None,
          **kwargs: Any) -> Any:
    """A widget that mirrors the setting ``setting`` (a field of ``studio.state.Settings``; any other name is a
    ``KeyError``), so that the choice survives leaving the page.

    The widget gets its own key (``_w.<setting>``, ``studio.state.widget_key``), is initialised from the setting on
    every run and copies its value back in ``on_change``."""
    settings = state.settings
    wkey = widget_key(check_setting(setting))
    set_widget_value(wkey, getattr(settings, setting))

    def sync() -> None:
        setattr(settings, setting, widget_value(wkey))
        if on_change is not None:
            on_change()

    return widget(label, key=wkey, on_change=sync, **kwargs)


# ------------------------------------------------------------------------------------------- errors

@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Show a user error (DPKPSError) as ``st.error`` with its one-sentence message, never a traceback."""
    try:
        yield
    except DPKPSError as exc:
        st.error(str(exc), icon=":material/error:")


def show_unexpected(exc: BaseException) -> None:
    """Last-resort handler: one line for the user; frames (no message: it could quote data) to the server log."""
    log.error("unexpected %s\n%s", type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)))
    st.error(f"Something went wrong ({type(exc).__name__}). Nothing was released; the server log has the "
             "details. Reload the page to continue.", icon=":material/error:")


def show_notices(state: SessionState) -> None:
    notices = state.notices or []
    for n in notices:
        st.info(n, icon=":material/info:")
    state.notices = []


# ------------------------------------------------------------------------------------------- sidebar

def corpus_line(state: SessionState) -> str:
    """The sidebar's corpus line: the corpus actually loaded, and — when page 1's choice names another one (an upload
    not loaded yet, a demo whose switch waits for a confirmation) — that the loaded one is still in use."""
    c = state.loaded.corpus
    if c is None:
        return "Corpus: none loaded"
    cid = str(state.loaded.corpus_id or "")
    line = f"Corpus: {c.name} ({plural(len(c), 'document')})"
    if state.settings.corpus_source == "upload" and cid.startswith("demo:"):
        line += f" — still loaded: your file is not loaded yet ({page_ref('corpus')}, “Load this corpus”)"
    elif state.settings.corpus_source == "demo" and cid != state.settings.demo_spec:
        line += f" — still loaded: switching to the chosen demo waits for your confirmation ({page_ref('corpus')})"
    if c.persons is not None:
        line += "; unit of privacy: one person"
    return line


def sidebar(state: SessionState) -> None:
    """The run's state — on every page (the privacy ledger's lines above it are app.py's)."""
    if state.settings.seeded_demo:
        st.warning("Reproducible demo: noise is SEEDED — NOT FOR RELEASE.", icon=":material/warning:")
    st.subheader("Run")
    c = state.loaded.corpus
    pv, outcome, d_meta = run_view.private_vocabulary(state), run_view.outcome(state), run_view.density_meta(state)
    job = state.jobs.generation
    docs = len(session.documents(state)) if outcome is not None else 0
    pv_text = "Private vocabulary"
    if pv is not None:
        pv_text = (f"Private vocabulary: {plural(len(pv), 'term')} of "
                   f"{vocabulary_label(state, (run_view.vocabulary_meta(state) or {}).get('vocabulary_spec') or pv.public_vocabulary)}")
    items = [
        (c is not None, corpus_line(state)),
        (pv is not None, pv_text),
        (d_meta is not None, f"Densities: {d_meta['method']}" if d_meta is not None else "Densities"),
        (outcome is not None, f"Sequences: {len(outcome.sequences):,}" if outcome is not None else "Sequences"),
        (docs > 0, f"Documents: {docs:,}" + (" (writing…)" if isinstance(job, jobs.Job) and job.running else "")
         if outcome is not None else "Documents"),
    ]
    st.markdown("\n".join(f"- {':green[:material/check_circle:]' if ok else ':gray[:material/radio_button_unchecked:]'} "
                          f"{text}" for ok, text in items))
    rd = state.run.run_dir
    if rd:
        st.caption(f"Run folder: `{Path(rd).name}` (owner-only; {page_ref('export')} lists "
                   + ("your runs)" if tenancy.current().signed_in else "the runs on this machine)"))
    if fast_mode():
        st.caption("Test fast mode (DPKPS_TEST_FAST=1).")
    user_box()


# ------------------------------------------------------------------------------------------- wording helpers

def eps(value: Any) -> str:
    """ε as the app shows it everywhere: the one formatter (``dpkps_core.dossier.labels.format_epsilon``, 4 significant
    digits: ``17.7``, not ``17.6999``; issue 33 §6)."""
    return format_epsilon(value)


def step_name(step: str) -> str:
    """A ledger step as a reader knows it (``dpkps_core.dossier.labels.step_label``): never ``size`` or
    ``private_prediction`` (issue 33 §6)."""
    return step_label(step)


def setting_name(key: str) -> str:
    """A setting's key as a reader knows it (``eps_voc`` → "ε of the private vocabulary (ε_voc)"), from the dossier's
    labels (``dpkps_core.dossier.labels``); never the raw key (issue 33 §6)."""
    key = str(key).removesuffix("_spec")
    return parameter_label(key) or humanize_key(key)


#: A release that left out at least this share of its training documents (persons) is noise (issue 35 part 5).
NOISE_ONLY_SHARE = 0.95


def noise_only(notes: Mapping[str, Any] | None) -> bool:
    """True when a step's PRIVATE notes say that all or nearly all of its training documents were left out for lack
    of budget: its output is then noise and carries nothing of the corpus (docs/DESIGN.md §2.0)."""
    if not notes:
        return False
    total, left = int(notes.get("units") or 0), int(notes.get("left_out") or 0)
    return total > 0 and left >= NOISE_ONLY_SHARE * total


def before_spend_note(state: SessionState, epsilon: float, step: str) -> None:
    """Before a spend: a PRIVATE, local note of how many training documents (persons) this release would leave out,
    having no budget left for it (docs/DESIGN.md §2.0; never exported). Says nothing when none would be."""
    from studio.accounting import would_leave_out

    if session.corpus(state) is None:
        return
    try:
        found = would_leave_out(state, epsilon, step=step)
    except DPKPSError as exc:
        st.error(str(exc), icon=":material/error:")
        return
    if not found or not found[0]:
        return
    out, total = found
    unit = unit_word(state)
    text = (f"{PRIVATE_BADGE} This release would leave out **{out:,} of the {total:,}** training {unit}s: they have "
            f"no budget left for ε = {eps(epsilon)} under their cap (a private, local count, never exported).")
    if total and out >= NOISE_ONLY_SHARE * total:
        st.warning(text + " With all or nearly all of them left out, the output would be **noise that carries "
                   "nothing of the corpus** — but the release is still charged to the rest. Raise the cap "
                   f"({page_ref('budget')}) or use another corpus before spending.", icon=":material/block:")
    else:
        st.info(text, icon=":material/lock:")


def release_badge(state: SessionState, notes: Mapping[str, Any] | None, what: str) -> None:
    """The badge of a step's DP output — or, when all or nearly all of its training documents were left out, a plain
    statement that the output is noise (no ✓ "safe to release": there is nothing of the corpus in it to release).
    ``what``: the output and its verb ("This Ṽ is")."""
    if noise_only(notes):
        whose = "" if unit_word(state) == "document" else " (of persons)"
        st.warning(f"**{what} noise.** {int(notes['left_out']):,} of the {int(notes['units']):,} training "
                   f"documents{whose} had no budget left and were left out, so it carries nothing of the corpus: it "
                   f"is not a result of your data. {PRIVATE_BADGE}", icon=":material/block:")
    else:
        st.markdown(DP_BADGE)


def plural(n: int, word: str, words: str | None = None) -> str:
    """``1 distinct label`` / ``3 distinct labels``: a count with its noun in the right number."""
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def unit_word(state: SessionState) -> str:
    """``"person"`` when the loaded corpus has a person column (the unit of privacy, docs/DESIGN.md §2 "optional person
    unit"), else ``"document"`` — so that a sentence says "any one person" where that is the guarantee."""
    c = state.loaded.corpus
    return "person" if c is not None and getattr(c, "persons", None) is not None else "document"


#: The uploaded vocabulary's saved name is ``<stem>-<12 hex digits of its SHA-256>.txt`` in a session temp folder
#: (``studio.uploads.save_vocabulary_upload``); neither the folder nor the digest means anything to a user.
_HASHED_STEM = re.compile(r"^(?P<stem>.*)-[0-9a-f]{12}$")


def vocabulary_label(state: SessionState, spec: str | None) -> str:
    """A vocabulary as users know it: a built-in's name, or an uploaded file's own name — never the session's
    temporary path or the hashed name it is saved under (docs/PRIVACY.md: public inputs are named, not located)."""
    if not spec:
        return "—"
    text = str(spec)
    if text.startswith("upload:"):
        text = text.split(":", 1)[1]
    saved = state.uploads.vocab_upload_path
    name = state.uploads.vocab_upload_name
    if name and saved and text in (str(saved), Path(str(saved)).name, Path(str(saved)).stem):
        return f"{name} (your upload)"
    if "/" in text or "\\" in text or text.endswith(".txt"):
        text = Path(text).name
    stem = Path(text).stem if text.endswith((".txt", ".csv", ".tsv")) else text
    m = _HASHED_STEM.match(stem)
    if m:
        return f"{m.group('stem') or 'vocabulary'} (your upload)"
    return text


def class_colours(state: SessionState) -> dict[str, str]:
    """The loaded corpus's class → colour map (``studio.charts.class_colours`` over its declared and observed
    classes), so that a class has the same colour on every page; {} without a corpus."""
    from studio import charts

    c = state.loaded.corpus
    if c is None:
        return {}
    names = list(c.observed_classes) + list(c.public_classes or ())
    return charts.class_colours(names)


def stale_note(what: str, changes: list[str]) -> None:
    """Mark a result as STALE when the settings it was computed for changed (V, N, S, ε, method…): the figures
    on screen are then the old settings' — said before them, with what changed."""
    if changes:
        st.warning(f"**STALE** — {what} was computed for other settings ({', '.join(changes)} changed since). "
                   "Run it again for the current settings; the figures below are the old ones.",
                   icon=":material/sync_problem:")


def document_reader(docs: list[dict[str, Any]], *, key: str, label: str = "Read a document in full") -> None:
    """Pick one document of a table (whose cells cut long texts to one line) and read it in full, with its label
    and keyphrases. ``docs``: records with ``id``, ``text`` and optional ``label`` / ``keyphrases``."""
    if not docs:
        return
    ids = [str(d.get("id", i)) for i, d in enumerate(docs)]
    with st.expander(label, icon=":material/article:"):
        pick = st.selectbox("Document", range(len(docs)), key=key,
                            format_func=lambda i: f"{ids[i]} — {docs[i].get('label', '')}: "
                                                  f"{' '.join(str(docs[i].get('text', '')).split()[:8])}…")
        d = docs[int(pick or 0)]
        meta = [f"**{ids[int(pick or 0)]}**"]
        if d.get("label"):
            meta.append(f"label: {d['label']}")
        if d.get("keyphrases"):
            meta.append("keyphrases: " + ", ".join(map(str, d["keyphrases"])))
        st.markdown(" · ".join(meta))
        # a wrapped, full-contrast block (a disabled text area greys the text out like a placeholder)
        st.code(str(d.get("text", "")), language=None, wrap_lines=True)


def later_releases(state: SessionState, run_name: str | None) -> tuple[float, int] | None:
    """(the corpus's total to date: the largest spend among its units over every release, the number of releases
    on its units recorded after the run ``run_name``'s last one) — PRIVATE, local (docs/DESIGN.md §2.0); ``None`` with no
    corpus, no persistent ledger, or when the ledger holds no release of that run on the loaded corpus's units (a
    run of another corpus, or one recorded under another name): nothing is then claimed about it."""
    from dpkps_core.ledger_store import PersistentLedger

    if session.corpus(state) is None:
        return None
    led = ledger_view.ledger(state)
    if not isinstance(led, PersistentLedger):
        return None
    view = led.view()
    # release ids grow with every release (the store's row ids); timestamps have one-second resolution
    own = [r.id for r in view.releases if run_name and r.run == run_name]
    if run_name and not own:  # a run of another corpus, or one the ledger knows under another name: say nothing
        return None
    later = sum(1 for r in view.releases if own and r.id > max(own) and r.run != run_name)
    return view.largest_spend, later


def run_total_note(state: SessionState, run_epsilon: float | None, *, run_name: str | None = None) -> None:
    """Beside a run opened or exported: the corpus's total to date (the largest spend among its documents, over
    every release — PRIVATE, local) and a warning when later releases exist, so an older run's "total ε" is never
    read as what the documents have spent (docs/DESIGN.md §2.0; the bundle itself only says that later releases may exist)."""
    try:
        found = later_releases(state, run_name)
    except DPKPSError as exc:
        st.error(str(exc), icon=":material/error:")
        return
    if found is None or run_epsilon is None:
        return
    largest, later = found
    unit = unit_word(state)
    who = f"The run {run_name}" if run_name else "This run"
    if later:
        st.warning(f"**Later releases exist** ({plural(later, 'release')} on this corpus's {unit}s after this run). "
                   f"{who} accounts for ε = {float(run_epsilon):g}; the corpus's total to date — the most-used "
                   f"{unit}'s spend over every release, app and command line — is ε = **{largest:g}**, and that is "
                   f"the guarantee that holds for its {unit}s now. Private, local: the bundle only says that later "
                   "releases may exist.", icon=":material/history:")
    else:
        st.caption(f"Corpus total to date: the most-used {unit} has spent ε = {largest:g} over every release "
                   f"(private, local; {who[0].lower() + who[1:]} accounts for ε = {float(run_epsilon):g}). No release on this "
                   f"corpus's {unit}s came after it.")


#: Jobs whose progress messages describe only DP outputs and public inputs (the LLM writing from DP sequences).
#: Every other job reads the private corpus, and its messages may hold exact private sizes (issue 35 part 7).
PUBLIC_PROGRESS_JOBS = frozenset({"generation"})


def progress_text(key: str, message: str) -> str:
    """A job's progress message as shown: badged private unless the job is known to read no private data (its
    messages may hold exact private sizes — how many held-out documents are embedded, how many real documents a
    memorisation check compares: for the data owner's eyes only)."""
    if key in PUBLIC_PROGRESS_JOBS or not message:
        return message
    return f"{message} — private, local"


def job_monitor(state: SessionState, key: str, *, body: Callable[[jobs.Job], None] | None = None,
                cancel_label: str = "Cancel") -> None:
    """Live progress of the background :class:`jobs.Job` in the session's slot ``key`` (``studio.state.Jobs``; polls
    while it runs); the progress message of a job that reads private data is badged private (:func:`progress_text`)."""
    job = state.jobs.get(key)
    if not isinstance(job, jobs.Job):
        return

    @st.fragment(run_every=jobs.poll_interval(job))  # adaptive: issue 35 §8 (studio/jobs.py)
    def panel() -> None:
        j = state.jobs.get(key)
        if not isinstance(j, jobs.Job):
            return
        if j.running:
            state.jobs.polling.add(key)
            st.progress(j.fraction, text=progress_text(key, j.message))
            if key not in PUBLIC_PROGRESS_JOBS:
                st.caption(PRIVATE_BADGE)
            if j.cancelled:
                st.caption("Cancelling after the item in flight; finished work is kept.")
            else:
                st.button(cancel_label, key=f"cancel.{key}", icon=":material/stop_circle:", on_click=j.cancel.set)
        elif key in state.jobs.polling:
            state.jobs.polling.discard(key)
            st.rerun()
        if body is not None:
            body(j)

    panel()

