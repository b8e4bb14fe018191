"""AppTest: paid-for work is never lost and spending is always deliberate (docs/DESIGN.md §2.0; docs/ARCHITECTURE.md "Run
folder").

* A file that fails to load leaves the corpus and every result in place; replacing a corpus with results asks.
* The run folder is the state: a run is reopened from its folder in another session (a reload) or from the URL, its
  Ṽ, densities, sequences and documents come back, "continue writing" and export work — with no ledger event.
* Settings that would discard paid-for results are locked (the held-out fraction) until an explicit start over.
* One intent, one release: a re-run asks first; a click on a button drawn before the last release is ignored.
* The cap: raising it asks and is recorded in the ledger's cap history; out-of-range ε is said on the page; e^ε in
  scientific notation and a visible warning at large ε; N > |V| said before anything is spent.
"""

from __future__ import annotations

from typing import Any

import json
from pathlib import Path

import pytest

from streamlit.testing.v1 import AppTest

from app_helpers import (state_of, use_state, APP, TIMEOUT, click, fast_env, finish_writing, goto, metrics, new_app,
                         # noqa: F401
                         private_vocabulary, run_folder, sequences, toy_csv, upload_corpus, walk)
from dpkps_core.ledger_store import LedgerStore
from dpkps_core.records.runfolder import list_runs, open_run, read_documents
from studio import page_ref

def spent(at) -> str:
    """The sidebar's "ε spent / cap" figure (its label names the unit: "Most-used document: ε spent / cap")."""
    found = [m.value for m in at.metric if m.label.endswith("ε spent / cap")]
    assert found, [m.label for m in at.metric]
    return found[0]


pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]

BAD_FILES = {
    "empty.csv": b"",
    "binary.csv": bytes(range(256)) * 8,
    "latin1.csv": "text,label\ncaf\xe9 au lait tous les jours,food\nun autre caf\xe9,food\n".encode("latin-1"),
    "header_only.csv": b"text,label\n",
}


def ledger_events() -> int:
    """Events in the persistent ledger store (every release of every corpus, app and CLI)."""
    return LedgerStore().totals()["events"]


def texts(at) -> str:
    """Everything the page says (markdown, captions, alerts), one string."""
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def buttons(at) -> list[str]:
    return [b.label for b in at.button]


def test_a_bad_file_keeps_the_corpus_and_every_result() -> None:
    at = new_app()
    upload_corpus(at, toy_csv(20), "mine.csv")
    walk(at, "sequences")
    cid, run = state_of(at).loaded.corpus_id, state_of(at).run.run_dir
    pv, seqs = private_vocabulary(at), sequences(at)
    events = ledger_events()
    goto(at, "corpus")
    for name, data in BAD_FILES.items():
        at.file_uploader(key="corpus_upload").set_value((name, data, "text/csv")).run()
        if not at.error:  # readable columns (a header-only file): the failure comes with "Load", after asking
            at.checkbox(key="confirm_replace_corpus").check().run()
            click(at, "Load this corpus", clean=False)
        assert not at.exception, [e.value for e in at.exception]
        assert any(name in e.value and "Nothing changed" in e.value for e in at.error), (name, texts(at))
        # nothing was unloaded: the same corpus, Ṽ, sequences and run folder; the sidebar still has the corpus
        assert state_of(at).loaded.corpus_id == cid and state_of(at).loaded.corpus is not None
        assert private_vocabulary(at).terms == pv.terms and sequences(at) == seqs
        assert state_of(at).run.run_dir == run
        assert metrics(at)["Documents"] == "60"
    assert ledger_events() == events


def test_loading_another_valid_file_over_results_asks_first() -> None:
    at = new_app()
    upload_corpus(at, toy_csv(20), "mine.csv")
    walk(at, "private-vocabulary")
    pv = private_vocabulary(at)
    goto(at, "corpus")
    at.file_uploader(key="corpus_upload").set_value(("other.csv", toy_csv(10, seed=3), "text/csv")).run()
    load = next(b for b in at.button if b.label == "Load this corpus")
    assert load.disabled and "replaces the current corpus" in texts(at)
    at.checkbox(key="confirm_replace_corpus").check().run()
    click(at, "Load this corpus")
    assert private_vocabulary(at) is None and pv is not None  # replaced (results put aside), after asking
    assert metrics(at)["Documents"] == "30"


def test_switching_demo_over_results_asks_first() -> None:
    at = new_app()
    walk(at, "private-vocabulary")
    goto(at, "corpus")
    at.selectbox(key="_w.demo_spec").set_value("demo:drugs").run()
    assert state_of(at).loaded.corpus_id == "demo:bbc" and private_vocabulary(at) is not None
    assert "replaces the current corpus" in texts(at)
    click(at, "Keep the current corpus and its results")
    assert state_of(at).settings.demo_spec == "demo:bbc" and private_vocabulary(at) is not None


def test_reopen_in_a_new_session_continues_and_exports_with_no_ledger_event(fast_env: Path) -> None:
    a = new_app()
    walk(a, "generate")                           # Ṽ, densities, sequences, 2 documents
    run = Path(state_of(a).run.run_dir)
    assert {"private_vocabulary.json", "densities.json", "run_state.json", "sequences.jsonl"} <= \
        {p.name for p in run.iterdir()}
    state = json.loads((run / "run_state.json").read_text())
    assert "left_out" not in state["pv_meta"] and "documents_without_keyphrases" not in state["density_meta"]
    events = ledger_events()

    b = new_app()                                 # a reload: a new session that knows nothing of the run
    goto(b, "export")
    assert any(r.path == run for r in list_runs(fast_env))
    b.selectbox(key="_w.export_run").set_value(str(run)).run()
    click(b, "Reopen this run in the app")
    assert state_of(b).run.run_dir == str(run)
    assert private_vocabulary(b).terms == private_vocabulary(a).terms
    assert sequences(b) == sequences(a) and run_folder(b).densities == run_folder(a).densities
    goto(b, "densities")                          # the densities are shown from the folder
    assert metrics(b)["Density"] == "histogram"
    goto(b, "generate")                           # continue writing: 2 more documents in the same folder
    b.number_input(key="_w.n_documents").set_value(4).run()
    click(b, "Continue writing")
    finish_writing(b, documents=4)
    assert len(read_documents(run)) == 4
    goto(b, "export")
    assert "Download the release bundle (ZIP)" in [d.proto.label for d in b.get("download_button")]
    assert ledger_events() == events            # reopening, writing and exporting released nothing new
    assert open_run(run).documents and state_of(b).run.reopened_run == run.name


def test_the_url_names_the_run_and_a_reload_reopens_it() -> None:
    a = new_app()
    walk(a, "sequences")
    run = Path(state_of(a).run.run_dir)
    assert a.query_params.get("run") in (run.name, [run.name])
    events = ledger_events()
    pages = ("private-vocabulary", "densities", "sequences", "evaluate")
    before = {i: shown(a, i) for i in pages}
    b = AppTest.from_file(APP, default_timeout=TIMEOUT)   # a reloaded tab: a new session, the URL names the run
    b.query_params["run"] = run.name
    b.run()
    assert state_of(b).run.run_dir == str(run), [n for n in state_of(b).notices]
    assert sequences(b) == sequences(a)
    assert {i: shown(b, i) for i in pages} == before    # pages 3, 4, 5 and 7 show the same run
    assert ledger_events() == events


def test_the_test_fraction_is_locked_while_results_exist_until_start_over() -> None:
    at = new_app()
    walk(at, "private-vocabulary")
    goto(at, "corpus")
    slider = at.slider(key="_w.test_fraction")
    assert slider.disabled
    before = state_of(at).settings.test_fraction
    state_of(at).settings.test_fraction = before + 0.05   # a change from anywhere never discards Ṽ
    at.run()
    assert private_vocabulary(at) is not None and state_of(at).settings.test_fraction == before
    at.checkbox(key="confirm_start_over").check().run()
    click(at, "Start over")
    assert private_vocabulary(at) is None and not at.slider(key="_w.test_fraction").disabled
    assert list_runs()  # the run folder stays on disk, reopenable


def test_a_rerun_asks_first() -> None:
    at = new_app()
    goto(at, "private-vocabulary")
    click(at, "Build Ṽ (spends ε_voc = 5)")
    assert spent(at) == "5 / 20"
    assert not [b for b in buttons(at) if b.startswith("Re-run (spends")]   # no spending button in the same spot
    click(at, "Re-run Ṽ…")                                                  # only asks
    assert spent(at) == "5 / 20" and "Spend ε_voc = 5 again?" in texts(at)
    click(at, "No, keep the current result")
    assert spent(at) == "5 / 20"
    click(at, "Re-run Ṽ…")
    click(at, "Yes, spend ε_voc = 5 again")
    assert spent(at) == "10 / 20"


def test_a_click_on_a_button_drawn_before_the_last_release_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """A double or triple click: the later clicks carry the release count the button was drawn with."""
    from studio import spend

    state = use_state(monkeypatch)
    drawn = spend.version(state, "vocabulary")
    spend._request(state, "vocabulary", drawn)                      # the first click
    assert spend.requested(state, "vocabulary") and not spend.requested(state, "vocabulary")   # taken once
    with spend.releasing(state, "vocabulary"):
        spend.started(state)                                      # the step began its release
    spend._request(state, "vocabulary", drawn)                      # a click on the button drawn before it
    assert not spend.requested(state, "vocabulary")
    assert state.notices == [spend.IGNORED_NOTE]
    spend._ask(state, "vocabulary", drawn)                          # a stale "re-run" click does not even ask
    assert "vocabulary" not in state.spend.confirm
    spend._request(state, "vocabulary", spend.version(state, "vocabulary"))  # a fresh, deliberate click
    assert spend.requested(state, "vocabulary")


def test_a_run_stopped_before_its_release_keeps_the_next_click(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streamlit stops a script run at its next element when another click arrives: if that happened before the
    release began, nothing was spent, and the second click of the double click is the one that releases."""
    from studio import spend

    state = use_state(monkeypatch)
    drawn = spend.version(state, "density")
    spend._request(state, "density", drawn)
    assert spend.requested(state, "density")
    with pytest.raises(KeyboardInterrupt), spend.releasing(state, "density"):
        raise KeyboardInterrupt  # stands for Streamlit's StopException, raised before the step called started()
    assert spend.version(state, "density") == drawn
    spend._request(state, "density", drawn)                         # the second click counts
    assert spend.requested(state, "density") and state.notices == []
    spend.started(state)
    assert spend.version(state, "density") == drawn + 1


def test_two_overlapping_runs_of_one_click_release_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Streamlit may start the next script run before a stopped one has unwound: two runs (threads) that took a
    click drawn at the same release count — only the first to begin its release may; the other is refused before
    anything is spent."""
    import threading

    from dpkps_core.errors import ParameterError
    from studio import spend

    state = use_state(monkeypatch)
    drawn = spend.version(state, "vocabulary")
    outcome: dict[str, object] = {}
    a_took, b_took = threading.Event(), threading.Event()

    def run(name: str, took: threading.Event, wait_for: threading.Event) -> None:
        spend._request(state, "vocabulary", drawn)      # both clicks are accepted: neither run has begun its release
        assert spend.requested(state, "vocabulary")
        took.set()
        wait_for.wait(5)
        try:
            spend.started(state)
            outcome[name] = "released"
        except ParameterError as exc:
            outcome[name] = str(exc)

    first = threading.Thread(target=run, args=("first", a_took, b_took))
    second = threading.Thread(target=run, args=("second", b_took, threading.Event()))
    first.start()
    a_took.wait(5)
    second.start()
    first.join()
    second.join()
    assert outcome["first"] == "released" and outcome["second"] != "released"


def test_raising_the_cap_asks_and_is_recorded_lowering_applies() -> None:
    at = new_app()
    goto(at, "budget")
    at.number_input(key="_w.cap_draft_value").set_value(60.0).run()
    assert "Raise the cap from 20 to 60?" in texts(at)
    assert state_of(at).settings.epsilon_cap == 20                          # not yet
    assert "each document's total ε over every release of this corpus" in texts(at) + " ".join(
        n.label for n in at.number_input)
    click(at, "Raise the cap to 60")
    assert state_of(at).settings.epsilon_cap == 60
    led = state_of(at).ledgers["demo:bbc"]
    history = led.view().cap_history
    assert history and history[-1].cap == 60 and history[-1].tool == "app"
    at.number_input(key="_w.cap_draft_value").set_value(30.0).run()          # lowering protects more: no question
    assert state_of(at).settings.epsilon_cap == 30 and led.view().cap_history[-1].cap == 30
    assert "--epsilon-cap" not in texts(at)


@pytest.mark.parametrize("value", [0.0, -3.0, 1_000_000.0])
def test_out_of_range_epsilon_is_said_on_the_page(value: float) -> None:
    at = new_app()
    goto(at, "budget")
    at.number_input(key="_w.eps_total").set_value(value).run()
    assert any("out of range" in e.value for e in at.error), texts(at)
    assert state_of(at).settings.eps_total == 10.0


def test_large_epsilon_warns_in_scientific_notation() -> None:
    at = new_app()
    goto(at, "budget")
    at.number_input(key="_w.eps_total").set_value(100.0).run()
    page = texts(at)
    assert "2.7e43" in page and "weak guarantee" in page
    assert "268811714181613544841" not in page                            # never 44 digits


def test_n_larger_than_v_is_said_and_refused_before_anything_is_spent() -> None:
    at = new_app()
    goto(at, "budget")
    at.selectbox(key="_w.vocabulary").set_value("upload").run()
    words = "football goal league striker coach software computer internet network browser bank shares profits market "
    terms = "\n".join(words.split()).encode()                     # |V| = 14 public terms
    at.file_uploader(key="vocab_upload").set_value(("small.txt", terms, "text/plain")).run()
    state_of(at).settings.vocab_size = 100            # N = 100 > |V| = 14 (public facts)
    at.run()
    assert any("larger than the public vocabulary" in e.value for e in at.error), texts(at)
    events = ledger_events()
    goto(at, "private-vocabulary", clean=False)
    click(at, "Build Ṽ", clean=False)
    assert any("Nothing was spent" in e.value for e in at.error), [e.value for e in at.error]
    assert ledger_events() == events and private_vocabulary(at) is None


#: Where the session keeps what it knows of the open run folder beyond the pointer (studio.run_view): a cache of the
#: parsed files, the releases made in this session, Ṽ's embeddings — all rebuilt from the folder when dropped.
def _values(obj: Any, skip: tuple[Any, ...]) -> list[Any]:
    """Every value held in the typed state ``obj`` (its dataclass fields, recursively; containers' items), except in
    the objects of ``skip``."""
    import dataclasses

    if any(obj is s for s in skip):
        return []
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [v for f in dataclasses.fields(obj) for v in _values(getattr(obj, f.name), skip)]
    if isinstance(obj, dict):
        return [v for x in obj.values() for v in _values(x, skip)]
    if isinstance(obj, (list, tuple, set)):
        return [v for x in obj for v in _values(x, skip)]
    return [obj]


def shown(at, name: str) -> tuple:
    """What page ``name`` shows of the run: its main-area metrics, its sequence table and page 7's summary line."""
    goto(at, name)
    tables = [df.value.to_dict("list") for df in at.main.dataframe if "keyphrases" in df.value.columns]
    summary = [c for c in at.caption.values if "held-out real documents" in c]
    return {m.label: m.value for m in at.main.metric}, tables, summary


def test_the_session_holds_a_pointer_not_a_copy_and_the_pages_read_the_folder() -> None:
    """The app's session holds settings and a pointer to the run folder, never a second copy of what the folder holds:
    with its memory of the folder dropped (as after a stopped script run), pages 3, 4, 5 and 7 show the same, read
    from the folder alone — and nothing is spent (post-processing, docs/DESIGN.md §2.0)."""
    from dpkps_core.dp.vocabulary import PrivateVocabulary
    from dpkps_core.method.sampling import SamplingOutcome

    at = new_app()
    walk(at, "sequences")
    pages = ("private-vocabulary", "densities", "sequences", "evaluate")
    before = {i: shown(at, i) for i in pages}
    assert before["private-vocabulary"][0]["Terms in Ṽ"] and before["densities"][0]["Density"] == "histogram" \
        and before["sequences"][1]
    state = state_of(at)
    copies = [v for v in _values(state, skip=(state.run.memory,)) if isinstance(v,
                                                                                (PrivateVocabulary, SamplingOutcome))]
    assert not copies                          # only the memory of what was read back (or released here) holds them
    events = ledger_events()
    state.run.memory.cache, state.run.memory.live, state.run.memory.embeddings = None, {}, None
    assert {i: shown(at, i) for i in pages} == before
    assert ledger_events() == events


def test_a_reopened_upload_run_needs_its_corpus_then_evaluates_with_no_ledger_event(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from app_helpers import table, wait_job

    a = new_app()
    upload_corpus(a, toy_csv(20), "mine.csv")
    walk(a, "generate")
    run = Path(state_of(a).run.run_dir)
    events = ledger_events()
    b = new_app()                                       # a reload: the uploaded corpus is gone with the session
    goto(b, "export")
    b.selectbox(key="_w.export_run").set_value(str(run)).run()
    click(b, "Reopen this run in the app", clean=False)
    assert any(f"load that file on {page_ref('corpus')}" in e.value for e in b.error) and private_vocabulary(b) is None
    upload_corpus(b, toy_csv(20), "mine.csv")           # the same file, the same columns and classes
    goto(b, "export")
    b.selectbox(key="_w.export_run").set_value(str(run)).run()
    click(b, "Reopen this run in the app")
    assert sequences(b) is not None and state_of(b).run.run_dir == str(run)
    goto(b, "evaluate")
    click(b, "Evaluate this run")
    job = wait_job(b, "evaluation")
    assert job.error is None, job.error
    shown_then = table(b, "Classifier trained on")
    assert "Synthetic documents" in set(shown_then["Classifier trained on"])
    assert (run / "evaluation.json").is_file()          # kept in the run folder (PRIVATE, owner-only)
    c = new_app()                                       # another reload: reopen the run with its corpus
    upload_corpus(c, toy_csv(20), "mine.csv")
    goto(c, "export")
    c.selectbox(key="_w.export_run").set_value(str(run)).run()
    click(c, "Reopen this run in the app")
    goto(c, "evaluate")
    assert state_of(c).jobs.evaluation is None       # nothing evaluated in this session...
    assert any("last evaluation of this run" in x.value for x in c.caption)
    assert table(c, "Classifier trained on").equals(shown_then)  # ...and the page shows the same table
    assert ledger_events() == events                    # reopening and evaluating released nothing
    # an evaluation that fails says why, and the last good one stays in view (the failed job wrote nothing)
    from dpkps_core import evaluation
    from dpkps_core.errors import ParameterError

    def failing(*args: object, **kwargs: object) -> None:
        raise ParameterError("The embedding model could not be loaded.")

    monkeypatch.setattr(evaluation, "evaluate_run", failing)
    click(c, "Evaluate this run", clean=False)
    assert wait_job(c, "evaluation").error
    c.run()
    assert any("could not be loaded" in e.value for e in c.error)
    assert any("last evaluation of this run" in x.value for x in c.caption)
    assert table(c, "Classifier trained on").equals(shown_then)
