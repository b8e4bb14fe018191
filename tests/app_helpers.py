"""Helpers for the app tests (Streamlit AppTest): start a session, switch pages, click, wait for jobs.

The app runs in this process with ``DPKPS_TEST_FAST=1`` (2 sequences per class, N = 200, 2 LLM documents of 16
tokens) and its run folders under a per-test ``DPKPS_RUNS_DIR``. Models are shared by all sessions through
``st.cache_resource``, so only the first test pays for loading them.
"""

from __future__ import annotations

import csv
import io
import random
import time
from pathlib import Path

import pytest
from typing import Any

from streamlit.testing.v1 import AppTest

from dpkps_core.records.runfolder import VOCABULARY_FILE, open_run, read_documents, read_failures
from studio import page
from studio.state import STATE_KEY, SessionState

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
TIMEOUT = 120.0

_WORDS = {
    "sport": "football match goal league striker coach team season cup champions stadium fans players win "
             "defence tournament injury referee victory squad".split(),
    "tech": "software computer internet mobile phone network users online broadband digital chip data "
            "technology device browser security update gadget microsoft apple".split(),
    "business": "bank shares profits market economy interest rates investors company growth prices sales "
                "inflation firm deal quarter earnings oil trade budget".split(),
}
_FILLER = "the a and of to in on for with after this year people said".split()


def toy_records(per_class: int = 20, seed: int = 0) -> list[dict[str, str]]:
    """A small, clearly separable labelled corpus built by the test itself (no private data)."""
    rng = random.Random(seed)
    rows = []
    for label, words in _WORDS.items():
        for _ in range(per_class):
            tokens = [rng.choice(words) if rng.random() < 0.6 else rng.choice(_FILLER) for _ in range(40)]
            rows.append({"text": " ".join(tokens).capitalize() + ".", "label": label})
    rng.shuffle(rows)
    return rows


def toy_csv(per_class: int = 20, *, text: str = "text", label: str = "label", seed: int = 0) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[text, label])
    w.writeheader()
    for r in toy_records(per_class, seed):
        w.writerow({text: r["text"], label: r["label"]})
    return buf.getvalue().encode("utf-8")


def problems(at: AppTest) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


def assert_clean(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def state_of(at: AppTest) -> SessionState:
    """The session's typed state (``studio.state.SessionState``) of ``at`` — the app's only session key."""
    return at.session_state[STATE_KEY]


def use_state(monkeypatch: pytest.MonkeyPatch, state: SessionState | None = None, **settings: Any) -> SessionState:
    """Run studio functions outside a script run on ``state`` (default: a fresh one with ``settings`` changed): the
    session they read (``studio.state.session_state``) is that one."""
    import streamlit

    state = state if state is not None else SessionState.new(**settings)
    monkeypatch.setattr(streamlit, "session_state", {STATE_KEY: state})
    return state


def new_app(**settings: Any) -> AppTest:
    """A fresh session (like a new browser tab) on page 1, after its first run; ``settings`` change settings
    (``studio.state.Settings`` fields) from their defaults before it."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    if settings:
        at.session_state[STATE_KEY] = SessionState.new(**settings)
    at.run()
    return assert_clean(at)


def goto(at: AppTest, name: str, *, clean: bool = True) -> AppTest:
    """Switch ``at`` to the page called ``name`` (``studio.page``: "corpus", "densities", …) and run it; with
    ``clean``, assert that it shows no error or exception."""
    at.switch_page(page(name).path).run()
    return assert_clean(at) if clean else at


def button(at: AppTest, prefix: str) -> Any:
    found = [b for b in at.button if b.label.startswith(prefix)]
    assert found, f"no button starting with {prefix!r}; buttons: {[b.label for b in at.button]}"
    return found[0]


def click(at: AppTest, prefix: str, *, clean: bool = True) -> AppTest:
    button(at, prefix).click().run()
    return assert_clean(at) if clean else at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def run_folder(at: AppTest) -> Any:
    """The session's open run folder read back (``dpkps_core.records.runfolder.open_run``) — the one source of the run's Ṽ,
    densities and sequences, which the session does not copy (``studio.run_view``); ``None`` without a Ṽ."""
    try:
        rd = state_of(at).run.run_dir
    except KeyError:  # no script run yet
        return None
    if not rd or not (Path(rd) / VOCABULARY_FILE).is_file():
        return None
    return open_run(rd)


def private_vocabulary(at: AppTest) -> Any:
    """Ṽ of the session's open run (:class:`~dpkps_core.dp.vocabulary.PrivateVocabulary`), or ``None``."""
    from dpkps_core.dp.vocabulary import PrivateVocabulary

    run = run_folder(at)
    return PrivateVocabulary.from_dict(run.vocabulary) if run is not None else None


def sequences(at: AppTest) -> list[dict[str, Any]] | None:
    """The keyphrase sequences of the session's open run (as written), or ``None`` before they are sampled."""
    run = run_folder(at)
    return run.sequences if run is not None and run.state.get("seq_meta") and run.sequences else None


def ledger_total(at: AppTest) -> float:
    return state_of(at).ledgers[state_of(at).loaded.corpus_id].total_epsilon


def upload_corpus(at: AppTest, data: bytes, filename: str = "private.csv", *, load: bool = True,
                  declare: bool = True) -> AppTest:
    """Page 1: switch to "upload", give the file and press "Load this corpus"; then (``declare``) confirm the
    suggested class names as public."""
    goto(at, "corpus")
    at.radio(key="_w.corpus_source").set_value("upload").run()
    at.file_uploader(key="corpus_upload").set_value((filename, data, "text/csv")).run()
    if load and [b for b in at.button if b.label.startswith("Load this corpus")]:
        click(at, "Load this corpus", clean=False)
        if declare and state_of(at).loaded.corpus is not None and not state_of(at).loaded.corpus.declared:
            declare_classes(at)
    return at


def declare_classes(at: AppTest, names: list[str] | None = None) -> AppTest:
    """Page 1: pick the public class names (default: the suggestions), confirm and declare them."""
    if names is not None:
        at.multiselect[0].set_value(names).run()
    at.checkbox[0].check().run()
    click(at, "Declare these classes public", clean=False)
    return at


def wait_job(at: AppTest, name: str, timeout: float = 180.0) -> Any:
    """Wait for the session's background job in slot ``name`` (``studio.state.Jobs``), then rerun the page once."""
    deadline = time.monotonic() + timeout
    job = state_of(at).jobs.get(name)
    while job.running:
        assert time.monotonic() < deadline, f"job {name} still running: {job.message}"
        time.sleep(0.2)
    at.run()
    return job


def walk(at: AppTest, upto: str) -> AppTest:
    """Run the default flow's actions on each page up to and including the page called ``upto``
    ("private-vocabulary": Ṽ, "densities", "sequences", "generate": the LLM writes 2 documents); pages
    before "private-vocabulary" have no action to run."""
    last = page(upto).number
    if last >= page("private-vocabulary").number:
        goto(at, "private-vocabulary")
        click(at, "Build Ṽ")
    if last >= page("densities").number:
        goto(at, "densities")
        click(at, "Build densities")
    if last >= page("sequences").number:
        goto(at, "sequences")
        click(at, "Sample")
    if last >= page("generate").number:
        goto(at, "generate")
        click(at, "Write documents")
        finish_writing(at)
    return at


def finish_writing(at: AppTest, documents: int = 2) -> AppTest:
    """Wait for page 6's generation job; press “Continue writing” (as a user would) while items have failed.

    The offline model samples its replies and ~15 % of 16-token replies are a bare preamble, so now and then an
    item gets only non-documents in all its attempts; “Continue writing” retries it (at most 3 more rounds).
    """
    for round_ in range(4):
        job = wait_job(at, "generation")
        assert job.error is None, job.error
        if not read_failures(state_of(at).run.run_dir) or round_ == 3:
            break
        click(at, "Continue writing" if read_documents(state_of(at).run.run_dir) else "Write documents")
    run_dir = state_of(at).run.run_dir
    assert (len(read_documents(run_dir)), read_failures(run_dir)) == (documents, [])
    return at


def table(at: AppTest, column: str) -> Any:
    """The first dataframe on the page (main area or sidebar) that has ``column``."""
    for df in at.dataframe:
        value = df.value
        if column in value.columns:
            return value
    raise AssertionError(f"no table with column {column!r}")

PAGES_SPECS_FIRST_TITLE = page("corpus").title


class FakeUMAP:
    """Stand-in for ``umap.UMAP`` in AppTests: the app's wiring is what is tested here; real UMAP (≈20 s of numba
    compilation per process) is covered by tests/evaluation/test_evaluation.py."""

    def __init__(self, n_components: int = 2, **_: Any) -> None:
        self.n_components = n_components

    def fit_transform(self, x: Any) -> Any:
        import numpy as np

        x = np.asarray(x, dtype=np.float64)
        x = x - x.mean(axis=0)
        _, _, vt = np.linalg.svd(x, full_matrices=False)
        return x @ vt[: self.n_components].T


def fake_umap_module() -> Any:
    import types

    mod = types.ModuleType("umap")
    mod.UMAP = FakeUMAP
    return mod


@pytest.fixture
def fast_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Test fast mode, no warm-up, and this test's own runs folder (used by every AppTest module)."""
    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    return tmp_path / "runs"


def local_model_page(tmp_path: Path) -> AppTest:
    """A session on page 6 with sequences of an uploaded toy corpus and the ``local`` backend pointed at a tiny
    model folder built under ``tmp_path`` (on the CPU) — the page says what is missing before the folder is given."""
    from llm_fakes import build_tiny_model

    folder = build_tiny_model(tmp_path / "my-model")
    at = new_app()
    upload_corpus(at, toy_csv(20), "toy.csv")
    walk(at, "sequences")
    goto(at, "generate")
    at.radio(key="_w.backend").set_value("local").run()
    assert any("Give the folder of your local model" in e.value for e in at.error)
    at.text_input(key="_w.local_model_path").input(str(folder)).run()
    at.radio(key="_w.device").set_value("cpu").run()
    return at
