"""The app's session: the accessors that read or derive what the session's typed state (``studio.state``) holds.

Rules (docs/ARCHITECTURE.md "studio/"):

* Everything lives in the session's :class:`~studio.state.SessionState` (widgets only mirror its settings, see
  ``studio.widgets``), so a page that is not on screen loses nothing. The settings and their defaults are ``studio.defaults``; the one path
  from them to a :class:`~dpkps_core.method.config.SamplingConfig` is :func:`current_config`
  (``dpkps_core.method.config.build_sampling_config``).
* The run folder is the state (``dpkps_core.records.runfolder``): every step writes its DP output there as soon as it is
  made; the session holds a pointer to it (``run_dir``, mirrored in the URL's ``?run=`` by ``studio.runs``) and never
  a second copy of what it holds — the pages read Ṽ, the densities and the sequences through ``studio.run_view``, so
  a reloaded tab that reopens the folder shows the same pages, at no new ε (reading DP outputs back is
  post-processing, docs/DESIGN.md §2.0).
* Nothing derived from the private corpus or from DP noise is ever put in a global cache: term counts and the local
  checks stay in the session (public models and data: ``studio.resources``).
* A re-run step clears the session results that depended on the previous output (:func:`clear_after`); the ledger
  is never cleared. Paid-for results are never discarded as a side effect: while they exist, the settings they were
  built on (the held-out fraction, the declared classes, the corpus) are locked or ask first (:func:`has_results`).

The actions that call the core (load a corpus, the DP steps, the background jobs) are in ``studio.steps``,
``studio.generation_steps`` and ``studio.evaluation_steps``; reopening a run in ``studio.runs``; the ledger of the
loaded corpus and the sidebar's figures in ``studio.ledger_view``; the session's public uploads in ``studio.uploads``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.method import pipeline
from dpkps_core.method.config import SamplingConfig, build_sampling_config, effective_max_terms, split_epsilon
from dpkps_core.corpus import Corpus
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import DEFAULT_MODEL
from dpkps_core.errors import CorpusError, ParameterError, VocabularyError
from dpkps_core.records.runfolder import VOCABULARY_FILE, create_run_dir
from dpkps_core.method.split import CorpusSplit, split_documents
from dpkps_core.method.training_source import StreamedCorpus
from dpkps_core.method.vocabulary import PublicVocabulary
from studio import defaults, page_ref, tenancy
from studio.jobs import Job
from studio.resources import cached_vocabulary, embedder
from studio.streamed import STREAMED_NOTE, StreamedView, content_fingerprint, is_streamed, term_counts_key
from studio.state import SessionState, clear_results, session_state, settings_dict

def init_session() -> SessionState:
    """This browser session's :class:`~studio.state.SessionState` (a fresh one, every setting at its default, on the
    first visit)."""
    return session_state()


def has_results(state: SessionState) -> bool:
    """True while the open run folder holds paid-for results (Ṽ, and what followed): the settings they were built on
    are then locked or ask first (docs/DESIGN.md §2.0: a discarded release stays spent)."""
    rd = state.run.run_dir
    return bool(rd) and (Path(rd) / VOCABULARY_FILE).is_file()


def drop_results(state: SessionState) -> None:
    """Put the results on screen aside: the session's derived results go, the pointer to the run folder is dropped
    (the folder stays on disk and can be reopened; the ε it spent stays on the ledger)."""
    clear_after(state, "vocabulary", include=True)
    state.run.run_dir = None


def eps_split(state: SessionState) -> tuple[float, float]:
    """(ε_voc, ε_kde) of the budget page's total and share (``dpkps_core.method.config.split_epsilon``)."""
    return split_epsilon(float(state.settings.eps_total), float(state.settings.eps_voc_share))


def _settings(state: SessionState) -> dict[str, Any]:
    """The session's settings by :class:`SamplingConfig` field name (public parameters only; the ε split apart): the
    settings the config declares for the app (``studio.defaults.settings_from_state``) and those the app derives
    from its own choices — the corpus and its columns, the vocabulary (an upload is a file), the demo seed, the cap
    switch, the person column."""
    return dict(
        defaults.settings_from_state(settings_dict(state.settings)),
        corpus=state.loaded.corpus_spec or state.settings.demo_spec, text_column=state.loaded.text_column,
        label_column=state.loaded.label_column, vocabulary=vocabulary_spec(state),
        seed=int(state.settings.demo_seed) if state.settings.seeded_demo else None,
        epsilon_cap=float(state.settings.epsilon_cap) if state.settings.cap_enabled else None,
        person_column=person_column(state), encoding=str(state.loaded.encoding or "utf-8"),
    )


def current_config(state: SessionState, **overrides: Any) -> SamplingConfig:
    """The :class:`SamplingConfig` the settings describe, with ``overrides`` (a step's settings as it ran) — built
    once through ``dpkps_core.method.config.build_sampling_config``, which checks it (docs/ARCHITECTURE.md "One path for a
    setting"). The ε split is the budget page's total and share unless ε_voc or ε_kde is overridden."""
    settings = {**_settings(state), **overrides}
    if "eps_voc" in overrides or "eps_kde" in overrides:
        voc, kde = eps_split(state)
        settings.setdefault("eps_voc", voc)
        settings.setdefault("eps_kde", kde)
        return build_sampling_config(**settings)
    return build_sampling_config(eps_total=float(state.settings.eps_total),
                                 eps_voc_share=float(state.settings.eps_voc_share),
                                 **settings)


def clear_after(state: SessionState, step: str, *, include: bool = False) -> None:
    """Drop the session results of the steps after ``step`` (and of ``step`` itself when ``include``,
    ``studio.state.clear_results``); a running job among them is cancelled."""
    for job in clear_results(state, step, include=include):
        if isinstance(job, Job) and job.running:
            job.cancel.set()


# ============================================================================================ session accessors

def memo_embedder(state: SessionState, name: str = DEFAULT_MODEL, device: str | None = None) -> Any:
    """The embedding model behind this session's in-memory memo: each (private) document is embedded once per
    session and corpus, whether by Evaluate, the map or Compare; never written anywhere."""
    from studio.embedding_memo import session_embedder, session_memo

    return session_embedder(embedder(name, device), session_memo(state.results, state.loaded.corpus_id, name))


def notice(state: SessionState, message: str) -> None:
    """Queue a one-off message for the next page render (e.g. after a switch of corpus)."""
    state.notices.append(message)


def corpus(state: SessionState) -> Corpus | None:
    return state.loaded.corpus


def corpus_id(state: SessionState) -> str | None:
    return state.loaded.corpus_id


def noise(state: SessionState) -> NoiseSource:
    """OS entropy by default; seeded only when "reproducible demo (NOT FOR RELEASE)" is ticked."""
    seed = int(state.settings.demo_seed) if state.settings.seeded_demo else None
    sampler = str(state.settings.noise_sampler or "opendp")  # OpenDP (vetted, default) or NumPy; a seed means NumPy
    cur: NoiseSource | None = state.noise
    if cur is None or cur.seed != seed or cur.requested_sampler != sampler:
        cur = NoiseSource(seed, sampler=sampler)
        state.noise = cur
    return cur


# ============================================================================================ 1. corpus

def person_column(state: SessionState) -> str | None:
    """The person column when the unit of privacy is a person (docs/DESIGN.md §2, person unit), else ``None`` (one document)."""
    c = corpus(state)
    return c.person_column if c is not None and c.persons is not None else None


def privacy_unit(state: SessionState) -> str:
    c = corpus(state)
    return c.privacy_unit if c is not None and c.persons is not None else "add/remove one document"


def person_groups(state: SessionState, part: Corpus) -> Sequence[str] | None:
    """PRIVATE person ids of ``part`` when the unit is a person (weights only; never shown or released)."""
    return part.persons if person_column(state) else None


def split(state: SessionState) -> CorpusSplit | None:
    """The held-out split of the current corpus; only ``split.train`` feeds DP steps (a streamed corpus's: its pass's)."""
    c = corpus(state)
    if c is None:
        return None
    key = (state.loaded.corpus_id, float(state.settings.test_fraction))
    if state.loaded.split_key != key:
        if state.loaded.split_key is not None and state.loaded.split_key[0] == key[0] and has_results(state):
            # the slider is locked while results exist (page 1); a change from elsewhere never discards them:
            # the fraction the results were built on stays (docs/DESIGN.md §2.0, a discarded release stays spent)
            state.settings.test_fraction = state.loaded.split_key[1]
            return state.loaded.split
        if isinstance(c, StreamedView):
            state.loaded.corpus = c = c.resplit(key[1])  # another fraction reads the file once more
            new = c.prepared.split
        else:
            new = split_documents(c, test_fraction=float(state.settings.test_fraction), seed=0,
                                  by_person=person_column(state) is not None)
        clear_after(state, "corpus", include=True)
        state.loaded.split, state.loaded.split_key = new, key
    return state.loaded.split


def start_over(state: SessionState) -> None:
    """The explicit "start over" action: the results on screen are put aside (their run folders stay on disk and
    can be reopened; the ε they spent stays on the ledger), which unlocks the settings they were built on."""
    job = state.jobs.generation
    if isinstance(job, Job) and job.running:
        raise ParameterError(f"The LLM is still writing into the run folder; cancel it first ({page_ref('generate')}).")
    drop_results(state)
    state.run.reopened_run = None


def train_part(state: SessionState) -> Corpus | StreamedCorpus:
    """The training part of the declared classes as the DP steps take it (a streamed corpus's: the core's, as the CLI's)."""
    c = corpus(state)
    sp = split(state)
    if c is None or sp is None:
        raise CorpusError(f"Load a corpus first ({page_ref('corpus')}).")
    if isinstance(c, StreamedView):
        c.classes  # noqa: B018 - refuses before the public classes are declared
        return c.prepared
    return c.subset(sp.train).declared_only()  # undeclared labels enter no DP step


def test_part(state: SessionState) -> Corpus:
    c = corpus(state)
    sp = split(state)
    if c is None or sp is None:
        raise CorpusError(f"Load a corpus first ({page_ref('corpus')}).")
    part = c.subset(sp.test)
    return part.declared_only() if part.declared else part


# ============================================================================================ 2. vocabulary & budget

def vocabulary_spec(state: SessionState) -> str:
    if state.settings.vocabulary == "upload":
        path = state.uploads.vocab_upload_path
        if not path:
            raise VocabularyError("Upload a vocabulary file (one term per line) or choose a built-in vocabulary.")
        return str(path)
    return str(state.settings.vocabulary)


def public_vocabulary(state: SessionState) -> PublicVocabulary:
    spec = vocabulary_spec(state)
    return cached_vocabulary(spec, bool(state.settings.remove_stopwords), bool(state.settings.junk_filter),
                             effective_max_terms(spec, int(state.settings.vocab_max_terms) or None))


def term_counts(state: SessionState, vocab: PublicVocabulary, terms_per_doc: int) -> np.ndarray:
    """PRIVATE first-S-distinct term counts of the training part (session only; they do not depend on ε)."""
    cache = state.results.term_counts
    key = term_counts_key(state, vocab, terms_per_doc)
    if not cache or cache[0] != key:
        if is_streamed(state):  # its counts come from its Ṽ release's own pass (studio.streamed.remember_term_counts)
            raise CorpusError("The exact counts of a streamed corpus come from its private vocabulary's own pass "
                              f"({page_ref('private-vocabulary')}) when every training document took part. {STREAMED_NOTE}")
        train = train_part(state)
        counts = pipeline.term_counts(train.texts, vocab, terms_per_doc=terms_per_doc,
                                      groups=person_groups(state, train))
        state.results.term_counts = (key, counts)
        cache = state.results.term_counts
    return cache[1]


def settings_changed_since(meta: Mapping[str, Any] | None, keys: Mapping[str, Any]) -> list[str]:
    """Names of settings whose current value differs from what a result was built with."""
    if not meta:
        return []
    return [name for name, value in keys.items() if meta.get(name) != value]


def vocabulary_settings_now(state: SessionState) -> dict[str, Any]:
    cfg = current_config(state)
    return {"eps_voc": cfg.eps_voc, "terms_per_doc": cfg.terms_per_doc, "vocab_size": cfg.vocab_size,
            "selection_rule": cfg.selection_rule, "vocabulary_spec": cfg.vocabulary,
            "remove_stopwords": cfg.remove_stopwords, "junk_filter": cfg.junk_filter,
            "vocab_max_terms": cfg.effective_vocab_max_terms}


# ============================================================================================ run folder and LLM

#: A PRIVATE file of an app run folder: the content fingerprint of the corpus the run was built on (never exported:
#: the bundle is an allowlist, ``dpkps_core.records.runfolder.RELEASABLE_FILES``); reopening compares it (``studio.runs``).
CORPUS_FINGERPRINT_FILE = "corpus_fingerprint.json"


def corpus_content_fingerprint(state: SessionState) -> str | None:
    """SHA-256 of the loaded corpus's CONTENT — every document's text, label and person id, in order — whatever
    the file's name, format, columns or encoding (PRIVATE: a digest of private text; kept in the session and in the
    run folder's private file only). ``None`` without a corpus."""
    c = corpus(state)
    if c is None:
        return None
    memo = state.loaded.content_fingerprint
    if memo and memo[0] == state.loaded.corpus_id:
        return memo[1]
    state.loaded.content_fingerprint = (state.loaded.corpus_id, content_fingerprint(c))
    return state.loaded.content_fingerprint[1]


def run_dir(state: SessionState, *, create: bool = True) -> Path | None:
    """This session's current run folder (owner-only), created on first use under the tenant's runs root
    (``studio.tenancy``) with the loaded corpus's content fingerprint in a private file."""
    path = state.run.run_dir
    if path and Path(path).is_dir():
        return Path(path)
    if not create:
        return None
    new = create_run_dir(tenancy.runs_root(), state.token)
    fp = corpus_content_fingerprint(state)
    if fp is not None:
        fd = os.open(new / CORPUS_FINGERPRINT_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"format": "dpkps-run-corpus", "version": 1, "content_sha256": fp}))
    state.run.run_dir = str(new)
    state.run.run_dirs.append(str(new))
    return new


def generation_secrets(state: SessionState) -> list[str]:
    key = state.settings.api_key or ""
    return [key] if key else []


def documents(state: SessionState) -> list[dict[str, Any]]:
    from dpkps_core.llm import read_documents

    out = run_dir(state, create=False)
    return read_documents(out) if out else []


def failures(state: SessionState) -> list[dict[str, Any]]:
    from dpkps_core.llm import read_failures

    out = run_dir(state, create=False)
    return read_failures(out) if out else []

