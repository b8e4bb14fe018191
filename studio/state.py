"""The app's session state and the glue between pages and ``dpkps_core``.

Rules (docs/ARCHITECTURE.md, issue "The Streamlit app"):

* Everything lives in plain ``st.session_state`` keys (widgets only mirror them, see ``studio.widgets``), so a
  page that is not on screen loses nothing.
* Public models and public data (embedding model, offline LLM, public vocabularies, bundled demo corpora) go in
  ``st.cache_resource``. Nothing derived from the private corpus or from DP noise is ever put in a global
  cache: term counts, Ṽ, densities, sequences, evaluations stay in the session.
* Each DP step runs the ``dpkps_core`` function, charges the session's :class:`PrivacyLedger` (inside the core
  function) and clears the results that depended on the previous output. The ledger is never cleared.
* Long steps (LLM writing, ε sweep, projections) run in a :class:`Job` thread with a cancel event; what a job
  finished before it was cancelled is kept (the LLM runner's checkpoint, the sweep's finished cells).

The pure helpers at the top (:func:`runs_root`, :func:`create_run_dir`, :func:`assemble_run`,
:func:`interleave_by_class`, :func:`corpus_summary`, …) do not touch Streamlit and are unit-tested directly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import secrets
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping, MutableMapping, Sequence

import numpy as np
import streamlit as st

from dpkps_core import pipeline
from dpkps_core.device import default_device_setting
from dpkps_core.llm.backends import DEFAULT_BATCH_SIZE
from dpkps_core.corpus import DEMO_SPECS
from dpkps_core.corpus import Corpus, list_columns, load_corpus, suggest_columns
from dpkps_core.corpus import corpus_summary  # noqa: F401 - page 1 uses state.corpus_summary
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.embeddings import DEFAULT_MODEL, embed_terms, embed_texts
from dpkps_core.errors import CorpusError, ParameterError, VocabularyError
from dpkps_core.ledger_store import PersistentLedger, open_corpus_ledger
from dpkps_core.pipeline import PAPER_SETTINGS, SamplingConfig, SamplingRun, effective_max_terms
from dpkps_core.risk import epsilon_explainer  # noqa: F401 - page 2 uses state.epsilon_explainer
from dpkps_core.sampling import SamplingOutcome
from dpkps_core.runfolder import create_run_dir, runs_root  # noqa: F401 - the run folder's owner
from dpkps_core.split import CorpusSplit, split_documents
from dpkps_core.vocabulary import PublicVocabulary
from studio import fast_mode
from studio.jobs import Job, start_job  # noqa: F401 - pages use state.Job / state.start_job
from studio.resources import (  # noqa: F401 - the pages' cached public resources
    cached_vocabulary,
    demo_corpus,
    embedder,
    embedding_cache,
    local_backend,
    offline_backend,
    start_warm_up,  # app.py starts it
    wait_for_warm_up,
)

log = logging.getLogger("dpkps.studio")

#: Largest upload (bytes); matches server.maxUploadSize = 200 (MB) and the corpus loader's default max_bytes.
MAX_UPLOAD_BYTES = 200 * 1024 * 1024

DEMO_CHOICES: dict[str, str] = {
    "demo:bbc": "BBC News articles — 5 categories (public demo data)",
    "demo:drugs": "Drugs.com patient reviews — label: medical condition (public demo data)",
    "demo:drugs-rating": "Drugs.com patient reviews — label: rating band (public demo data)",
}
DOC_TYPE_FOR_DEMO = {
    "demo:bbc": "a short news article",
    "demo:drugs": "a short patient review of a medication",
    "demo:drugs-rating": "a short patient review of a medication",
}
BUILTIN_VOCABULARIES = ("glove", "wordfreq", "medical")
STEPS = ("corpus", "vocabulary", "density", "sequences", "documents", "evaluation")

# Result keys cleared when the step they belong to (or an earlier one) is re-run. Private ones are marked.
_RESULT_KEYS: dict[str, tuple[str, ...]] = {
    "corpus": ("split", "split_key", "term_counts", "forecast", "no_llm_history", "real_keyphrase_baseline",
               "method_outlook", "job_method_preview", "compare_rows", "_embedding_memo"),  # all PRIVATE
    "vocabulary": ("pv", "pv_meta", "vocab_check"),            # vocab_check: PRIVATE
    "density": ("keyphrases", "embeddings", "dp_density", "density_info", "density_meta", "umap_map"),  # keyphrases: PRIVATE
    "sequences": ("outcome", "seq_meta", "no_llm"),            # no_llm: PRIVATE
    "documents": ("job_generation",),
    "evaluation": ("evaluation", "projections", "job_projection", "job_evaluation", "job_memorisation"),
}


# ============================================================================================ pure helpers

def assemble_run(
    *, config: SamplingConfig, split: CorpusSplit, ledger: PrivacyLedger, noise: NoiseSource,
    private_vocabulary: PrivateVocabulary, embeddings: np.ndarray, density: Any, density_info: dict[str, Any],
    outcome: SamplingOutcome, classes: Sequence[str], vocabulary_name: str, timings: Mapping[str, float] | None = None,
    privacy_unit: str = "add/remove one document",
) -> SamplingRun:
    """The :class:`~dpkps_core.pipeline.SamplingRun` that ``pipeline.write_run_folder`` needs, from the
    pieces the app built step by step (same report and files as the CLI)."""
    return SamplingRun(
        config=config, split=split, ledger=ledger, noise=noise, private_vocabulary=private_vocabulary,
        embeddings=embeddings, density=density, density_info=dict(density_info), outcome=outcome,
        classes=tuple(classes), timings=dict(timings or {}), vocabulary_name=vocabulary_name,
        privacy_unit=privacy_unit,
    )


def interleave_by_class(sequences: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Sequences reordered round-robin over classes (so "the first k" covers every class); ids unchanged."""
    by_class: dict[str, list[dict[str, Any]]] = {}
    for s in sequences:
        by_class.setdefault(str(s.get("label", "")), []).append(dict(s))
    out: list[dict[str, Any]] = []
    queues = [by_class[c] for c in sorted(by_class)]
    i = 0
    while any(i < len(q) for q in queues):
        out.extend(q[i] for q in queues if i < len(q))
        i += 1
    return out


def check_few_shot_not_private(texts: Iterable[str], corpus: Corpus | None) -> None:
    """Refuse few-shot examples that are documents of the private corpus (exact text match)."""
    if corpus is None:
        return
    private = set(t.strip() for t in corpus.texts)
    for t in texts:
        if t.strip() in private:
            raise ParameterError(
                "A few-shot example is a document of the private corpus; few-shot examples must come from a "
                "separate PUBLIC file."
            )


# ============================================================================================ settings

def default_settings() -> dict[str, Any]:
    """Every user choice, as plain session keys (the first visit needs none of them changed)."""
    d = SamplingConfig()
    fast = fast_mode()
    return {
        # 1 corpus
        "corpus_source": "demo", "demo_spec": "demo:bbc", "text_column": None, "label_column": None,
        "test_fraction": d.test_fraction,
        # 2 vocabulary & budget
        "vocabulary": "glove", "remove_stopwords": d.remove_stopwords, "junk_filter": d.junk_filter,
        "vocab_max_terms": d.vocab_max_terms or 0, "terms_per_doc": d.terms_per_doc, "vocab_size": 200 if fast else d.vocab_size,
        "selection_rule": d.selection_rule, "embedding_model": DEFAULT_MODEL,
        "eps_total": float(d.eps_voc + d.eps_kde), "eps_voc_share": d.eps_voc / (d.eps_voc + d.eps_kde),
        "cap_enabled": True, "epsilon_cap": 20.0, "paper_settings": False,
        "seeded_demo": False, "demo_seed": 2024, "noise_sampler": d.noise_sampler,
        # 4 densities
        "method": d.method, "density": d.density, "length": d.length,
        "bandwidth_auto": True, "bandwidth": 0.3, "features_auto": True, "features": 2000,
        # 5 sequences
        "per_class": 2 if fast else 20, "temperature": d.temperature,
        # 6 LLM
        "backend": "offline", "base_url": "", "llm_model": "gpt-4o-mini", "api_key": "",
        "device": default_device_setting(), "llm_batch_size": DEFAULT_BATCH_SIZE, "local_model_path": "",
        "doc_type": "", "include_label": False, "max_tokens": 16 if fast else 200, "llm_temperature": 0.7,
        "n_documents": 2 if fast else 10, "price_per_1k": 0.0, "concurrency": 4, "few_shot": (),
        "few_shot_name": "",
        # 7 evaluation
        "eval_seeds": 1 if fast else 3, "projection_points": 60 if fast else 300,
        "sweep_eps_voc": [1.0, 5.0], "sweep_eps_kde": [2.0, 5.0, 10.0], "sweep_methods": ["independent"],
        "sweep_seeds": 1, "sweep_per_class": 20 if fast else 100,
        "compare_eps": 10.0, "compare_delta": 1e-6, "compare_per_class": 1 if fast else 2,
        "compare_max_tokens": 16 if fast else 48, "compare_methods": ["dpkps", "private-prediction", "augpe"],
    }


def ss() -> MutableMapping[str, Any]:
    return st.session_state


def init_session() -> None:
    """Fill missing keys (first visit, or keys a newer version added). Never overwrites a choice."""
    s = ss()
    for k, v in default_settings().items():
        if k not in s:
            s[k] = v
    if "session_token" not in s:
        s["session_token"] = secrets.token_hex(4)
    for k, v in (("ledgers", {}), ("run_dirs", []), ("notices", [])):
        if k not in s:
            s[k] = v


def apply_paper_settings(on: bool) -> None:
    """Switch the DP-KPS paper's configuration (pipeline.PAPER_SETTINGS) on, or back to the defaults."""
    s = ss()
    d = SamplingConfig()
    defaults = default_settings()
    mapping = {
        "remove_stopwords": PAPER_SETTINGS["remove_stopwords"], "junk_filter": PAPER_SETTINGS["junk_filter"],
        "vocab_max_terms": PAPER_SETTINGS["vocab_max_terms"] or 0, "density": PAPER_SETTINGS["density"],
        "selection_rule": PAPER_SETTINGS["selection_rule"], "vocab_size": PAPER_SETTINGS["vocab_size"],
        "terms_per_doc": PAPER_SETTINGS["terms_per_doc"],
    }
    if on:
        s.update(mapping)
        s["bandwidth_auto"], s["bandwidth"] = False, float(PAPER_SETTINGS["bandwidth"])
        s["features_auto"], s["features"] = False, int(PAPER_SETTINGS["features"])
    else:
        for k in mapping:
            s[k] = defaults[k]
        s["bandwidth_auto"], s["features_auto"] = True, True
        s["bandwidth"], s["features"] = defaults["bandwidth"], defaults["features"]
        s["density"] = d.density
    s["paper_settings"] = on


def eps_split() -> tuple[float, float]:
    s = ss()
    total = float(s["eps_total"])
    voc = round(total * float(s["eps_voc_share"]), 4)
    return voc, round(total - voc, 4)


def current_config(**overrides: Any) -> SamplingConfig:
    """The :class:`SamplingConfig` the settings describe (public parameters only)."""
    s = ss()
    eps_voc, eps_kde = eps_split()
    cfg = SamplingConfig(
        corpus=s.get("corpus_spec") or s["demo_spec"], text_column=s.get("loaded_text_column"),
        label_column=s.get("loaded_label_column"),
        vocabulary=vocabulary_spec(), remove_stopwords=bool(s["remove_stopwords"]), junk_filter=bool(s["junk_filter"]),
        vocab_max_terms=int(s["vocab_max_terms"]) or None, eps_voc=eps_voc, eps_kde=eps_kde, method=s["method"],
        density=s["density"], length=int(s["length"]), per_class=int(s["per_class"]),
        vocab_size=int(s["vocab_size"]), terms_per_doc=int(s["terms_per_doc"]), selection_rule=s["selection_rule"],
        features=None if s["features_auto"] else int(s["features"]),
        bandwidth=None if s["bandwidth_auto"] else float(s["bandwidth"]),
        temperature=float(s["temperature"]), embedding_model=s["embedding_model"],
        seed=int(s["demo_seed"]) if s["seeded_demo"] else None, test_fraction=float(s["test_fraction"]),
        noise_sampler=str(s.get("noise_sampler") or "opendp"),
        epsilon_cap=float(s["epsilon_cap"]) if s["cap_enabled"] else None,
        person_column=person_column(),
    )
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


# ============================================================================================ session accessors

def memo_embedder(name: str = DEFAULT_MODEL, device: str | None = None) -> Any:
    """The embedding model behind this session's in-memory memo: each (private) document is embedded once per
    session and corpus, whether by Evaluate, the map or Compare (issue 14 §9); never written anywhere."""
    from studio.embedding_memo import MemoEmbedder, session_memo

    return MemoEmbedder(embedder(name, device), session_memo(ss(), ss().get("corpus_id"), name))



def notice(message: str) -> None:
    """Queue a one-off message for the next page render (e.g. after a switch of corpus)."""
    ss()["notices"].append(message)


def corpus() -> Corpus | None:
    return ss().get("corpus")


def corpus_id() -> str | None:
    return ss().get("corpus_id")


def ledger() -> PrivacyLedger:
    """The privacy ledger of the current corpus: its persistent ledger (``dpkps_core.ledger_store``), shared by
    every session and CLI run on the same documents, so it survives reloads, new sessions and another label
    column. ``events`` are this session's releases; ``cap``/``remaining``/``corpus_*`` are the corpus's.

    The cap is the corpus's: a corpus without one takes the session's; a change made here is written to the
    corpus; a change made elsewhere (another session, the CLI) is shown here."""
    s = ss()
    cid = s.get("corpus_id") or "(no corpus)"
    ledgers: dict[str, PrivacyLedger] = s["ledgers"]
    if cid not in ledgers:
        c = s.get("corpus")
        ledgers[cid] = open_corpus_ledger(c, tool="app") if c is not None and s.get("corpus_id") else PrivacyLedger()
    led = ledgers[cid]
    cap = float(s["epsilon_cap"]) if s.get("cap_enabled") else None
    if not isinstance(led, PersistentLedger):
        if led.cap != cap:
            led.cap = cap
        return led
    rd = s.get("run_dir")
    led.run = Path(rd).name if rd else f"session {s.get('session_token', '?')}"
    seen: dict[str, float | None] = s.setdefault("ledger_caps", {})
    stored = led.cap
    if (cid in seen and cap != seen[cid]) or (cid not in seen and stored is None and cap is not None):
        if cap != stored:  # changed in this session, or a corpus without a cap: the session's cap is the corpus's
            led.cap = stored = cap
    elif cap != stored:  # set by another session or the CLI: show it
        s["cap_enabled"] = stored is not None
        if stored is not None:
            s["epsilon_cap"] = stored
    seen[cid] = stored
    return led


def noise() -> NoiseSource:
    """OS entropy by default; seeded only when "reproducible demo (NOT FOR RELEASE)" is ticked."""
    s = ss()
    seed = int(s["demo_seed"]) if s.get("seeded_demo") else None
    sampler = str(s.get("noise_sampler") or "opendp")  # OpenDP (vetted, default) or NumPy; a seed means NumPy
    cur: NoiseSource | None = s.get("noise")
    if cur is None or cur.seed != seed or cur.requested_sampler != sampler:
        cur = NoiseSource(seed, sampler=sampler)
        s["noise"] = cur
    return cur


def clear_after(step: str, *, include: bool = False) -> None:
    """Drop the results of the steps after ``step`` (and of ``step`` itself when ``include``)."""
    s = ss()
    start = STEPS.index(step) + (0 if include else 1)
    for name in STEPS[start:]:
        for key in _RESULT_KEYS[name]:
            if key == "job_generation" or key.startswith("job_"):
                job = s.get(key)
                if isinstance(job, Job) and job.running:
                    job.cancel.set()
            s.pop(key, None)


# ============================================================================================ 1. corpus

def ensure_corpus() -> Corpus | None:
    """The current corpus; on a first visit the preselected demo corpus is loaded."""
    s = ss()
    if s.get("corpus") is None and s.get("corpus_source") == "demo":
        load_demo(s["demo_spec"])
    return s.get("corpus")


def load_demo(spec: str) -> Corpus:
    if spec not in DEMO_SPECS:
        raise CorpusError(f"Unknown demo corpus {spec!r}.")
    c = demo_corpus(spec)
    _set_corpus(c, cid=spec, spec=spec, fingerprint=None, text_column=None, label_column=None, filename=None)
    if not ss().get("doc_type"):
        ss()["doc_type"] = DOC_TYPE_FOR_DEMO.get(spec, "a document")
    return c


def upload_columns(data: bytes, filename: str) -> tuple[list[str], str | None, str | None]:
    """Columns of an uploaded table and the loader's guesses; ([], None, None) for a ZIP of .txt files."""
    if filename.lower().endswith(".zip") or data[:4] == b"PK\x03\x04":
        return [], None, None
    cols = list_columns(data, filename=filename, max_bytes=MAX_UPLOAD_BYTES)
    text, label = suggest_columns(data, filename=filename)
    return cols, text, label


def load_upload(data: bytes, filename: str, *, text_column: str | None, label_column: str | None,
                person_column: str | None = None) -> Corpus:
    """Load and validate an uploaded PRIVATE corpus (kept in this session's memory only). With
    ``person_column`` the unit of privacy is the person (issue 15)."""
    c = load_corpus(data, filename=filename, text_column=text_column, label_column=label_column,
                    max_bytes=MAX_UPLOAD_BYTES, person_column=person_column or None)
    fp = hashlib.sha256(data).hexdigest()
    cid = f"upload:{fp[:16]}:{text_column}:{label_column}:{person_column or ''}"
    _set_corpus(c, cid=cid, spec=f"upload:{Path(filename).name}", fingerprint=fp, text_column=text_column,
                label_column=label_column, filename=Path(filename).name)
    if not ss().get("doc_type"):
        ss()["doc_type"] = "a document"
    return c


def _set_corpus(c: Corpus, *, cid: str, spec: str, fingerprint: str | None, text_column: str | None,
                label_column: str | None, filename: str | None) -> None:
    s = ss()
    if s.get("corpus_id") == cid and s.get("corpus") is not None:
        return
    had = s.get("corpus_id")
    clear_after("corpus", include=True)
    s.update(corpus=c, corpus_id=cid, corpus_spec=spec, corpus_fingerprint=fingerprint,
             loaded_text_column=text_column, loaded_label_column=label_column, corpus_filename=filename,
             run_dir=None)
    if had:
        notice("A new corpus starts a new run with its own privacy ledger and run folder; the previous run's "
               "folder and ledger are kept.")


def declare_classes(names: Sequence[str]) -> Corpus:
    """The user confirms ``names`` as the PUBLIC class names of the current corpus (issue 11 §2).

    Suggestions read off the data are only shown locally; this declaration is what the DP steps release per
    class. Changing it discards Ṽ and what followed (the ε they spent stays on the ledger)."""
    s = ss()
    c = corpus()
    if c is None:
        raise CorpusError("Load a corpus first (page 1).")
    declared = c.with_classes(list(names))  # validates: ≥ 2 distinct non-empty names
    if declared.public_classes != c.public_classes:
        if s.get("pv") is not None:
            notice("The public class list changed: the private vocabulary and what followed were discarded (the ε "
                   "they spent stays on the ledger).")
        clear_after("corpus")
        s["corpus"] = declared
    return declared


def person_column() -> str | None:
    """The person column when the unit of privacy is a person (issue 15), else ``None`` (one document)."""
    c = corpus()
    return c.person_column if c is not None and c.persons is not None else None


def privacy_unit() -> str:
    c = corpus()
    return c.privacy_unit if c is not None and c.persons is not None else "add/remove one document"


def person_groups(part: Corpus) -> Sequence[str] | None:
    """PRIVATE person ids of ``part`` when the unit is a person (weights only; never shown or released)."""
    return part.persons if person_column() else None


def split() -> CorpusSplit | None:
    """The held-out split of the current corpus; only ``split.train`` feeds DP steps."""
    s = ss()
    c = corpus()
    if c is None:
        return None
    key = (s.get("corpus_id"), float(s["test_fraction"]))
    if s.get("split_key") != key:
        new = split_documents(c, test_fraction=float(s["test_fraction"]), seed=0, by_person=person_column() is not None)
        if s.get("split_key") is not None and s.get("pv") is not None:
            notice("The held-out fraction changed, so the training part changed: the private vocabulary and what "
                   "followed were discarded (the ε they spent stays on the ledger).")
        clear_after("corpus", include=True)
        s["split"], s["split_key"] = new, key
    return s["split"]


def train_part() -> Corpus:
    c = corpus()
    sp = split()
    if c is None or sp is None:
        raise CorpusError("Load a corpus first (page 1).")
    return c.subset(sp.train).declared_only()  # undeclared labels enter no DP step


def test_part() -> Corpus:
    c = corpus()
    sp = split()
    if c is None or sp is None:
        raise CorpusError("Load a corpus first (page 1).")
    part = c.subset(sp.test)
    return part.declared_only() if part.declared else part


# ============================================================================================ 2. vocabulary & budget

def vocabulary_spec() -> str:
    s = ss()
    if s["vocabulary"] == "upload":
        path = s.get("vocab_upload_path")
        if not path:
            raise VocabularyError("Upload a vocabulary file (one term per line) or choose a built-in vocabulary.")
        return str(path)
    return str(s["vocabulary"])


def session_tmp() -> Path:
    """A private temp folder of this session (owner-only) for PUBLIC uploads such as a vocabulary file.

    It is a ``tempfile.TemporaryDirectory`` held only by this session's state: when the session ends, Streamlit
    drops the state, the object is garbage-collected and its finalizer deletes the folder (also at exit)."""
    s = ss()
    holder = s.get("session_tmp")
    if not isinstance(holder, tempfile.TemporaryDirectory) or not Path(holder.name).is_dir():
        holder = tempfile.TemporaryDirectory(prefix="dpkps-session-")
        os.chmod(holder.name, 0o700)
        s["session_tmp"] = holder
    return Path(holder.name)


def save_vocabulary_upload(data: bytes, filename: str) -> Path:
    digest = hashlib.sha256(data).hexdigest()[:12]
    stem = "".join(ch for ch in Path(filename).stem if ch.isalnum() or ch in "-_")[:40] or "vocabulary"
    path = session_tmp() / f"{stem}-{digest}.txt"
    path.write_bytes(data)
    ss()["vocab_upload_path"] = str(path)
    ss()["vocab_upload_name"] = Path(filename).name
    return path


def public_vocabulary() -> PublicVocabulary:
    s = ss()
    spec = vocabulary_spec()
    return cached_vocabulary(spec, bool(s["remove_stopwords"]), bool(s["junk_filter"]),
                             effective_max_terms(spec, int(s["vocab_max_terms"]) or None))


def term_counts(vocab: PublicVocabulary, terms_per_doc: int) -> np.ndarray:
    """PRIVATE first-S-distinct term counts of the training part (session only; they do not depend on ε)."""
    s = ss()
    c = corpus()
    key = (s.get("corpus_id"), s.get("split_key"), c.public_classes if c is not None else None, vocab.name,
           vocab.source, len(vocab), vocab.terms[:5], vocab.terms[-5:], int(terms_per_doc))
    cache = s.get("term_counts")
    if not cache or cache[0] != key:
        train = train_part()
        counts = pipeline.term_counts(train.texts, vocab, terms_per_doc=terms_per_doc, groups=person_groups(train))
        s["term_counts"] = (key, counts)
        cache = s["term_counts"]
    return cache[1]


def run_forecast() -> Any:
    """"Will this work?" (dpkps_core.evaluation.forecast) on the training part's TRUE counts — private."""
    from dpkps_core import evaluation

    cfg = current_config()
    cfg.validate()
    vocab = public_vocabulary()
    counts = term_counts(vocab, cfg.terms_per_doc)
    train = train_part()
    f = evaluation.forecast(
        train.texts, train.labels, vocab, eps_voc=cfg.eps_voc, eps_kde=cfg.eps_kde, terms_per_doc=cfg.terms_per_doc,
        vocab_size=cfg.vocab_size, method=cfg.method, density=cfg.density, length=cfg.length,
        features=cfg.features, bandwidth=cfg.bandwidth, counts=counts,
    )
    ss()["forecast"] = f
    return f


# ============================================================================================ 3. private vocabulary

def run_private_vocabulary() -> PrivateVocabulary:
    """ε_voc: the Laplace noisy histogram over all of V, top N → Ṽ (charges the ledger every time)."""
    s = ss()
    if corpus() is None:
        raise CorpusError("Load a corpus first (page 1).")
    cfg = current_config()
    cfg.validate()
    led = ledger()
    led.require(cfg.eps_voc, "the private vocabulary step")
    vocab = public_vocabulary()
    t0 = time.perf_counter()
    counts = term_counts(vocab, cfg.terms_per_doc)
    train = train_part()
    nz = noise()
    pv = pipeline.build_private_vocabulary(
        train.texts, vocab, eps_voc=cfg.eps_voc, terms_per_doc=cfg.terms_per_doc, vocab_size=cfg.vocab_size,
        noise=nz, ledger=led, selection_rule=cfg.selection_rule, counts=counts, groups=person_groups(train),
        neighbouring=privacy_unit(),
    )
    clear_after("vocabulary", include=True)
    s["pv"] = pv
    s["pv_meta"] = {
        "eps_voc": cfg.eps_voc, "terms_per_doc": cfg.terms_per_doc, "vocab_size": cfg.vocab_size,
        "selection_rule": cfg.selection_rule, "vocabulary": vocab.name, "vocabulary_spec": cfg.vocabulary,
        "public_size": len(vocab), "remove_stopwords": cfg.remove_stopwords, "junk_filter": cfg.junk_filter,
        "vocab_max_terms": cfg.effective_vocab_max_terms, "seeded": nz.seed is not None,
        "seconds": round(time.perf_counter() - t0, 2), "ledger_events": len(led),
        # PRIVATE checks on the training part: shown locally; the release above went ahead regardless
        "local_warnings": pipeline.local_warnings(train, counts, vocabulary_name=vocab.name),
    }
    return pv


def vocabulary_noise_floor(pv: PrivateVocabulary) -> float:
    """Largest pure-noise count expected among |V| zero counts (a public function of ε_voc, S and |V|)."""
    from dpkps_core.dp.vocabulary import noise_floor

    return noise_floor(epsilon=pv.epsilon, terms_per_doc=pv.terms_per_doc, vocabulary_size=pv.public_vocabulary_size)


def vocabulary_check() -> dict[str, Any]:
    """PRIVATE, local: how much of the non-private top-N Ṽ recovered, and how much of Ṽ is pure noise."""
    from dpkps_core import evaluation

    s = ss()
    pv: PrivateVocabulary = s["pv"]
    meta = s["pv_meta"]
    vocab = cached_vocabulary(meta["vocabulary_spec"], meta["remove_stopwords"], meta["junk_filter"],
                              meta["vocab_max_terms"])
    counts = term_counts(vocab, meta["terms_per_doc"])
    out = {
        "recall": evaluation.vocabulary_recall(counts, vocab.terms, pv.terms, top=meta["vocab_size"]),
        "noise_share": evaluation.noise_term_share(counts, vocab, pv.terms),
        "terms_in_corpus": int((counts > 0).sum()),
        "top": min(meta["vocab_size"], int((counts > 0).sum())),
    }
    s["vocab_check"] = out
    return out


def settings_changed_since(meta: Mapping[str, Any] | None, keys: Mapping[str, Any]) -> list[str]:
    """Names of settings whose current value differs from what a result was built with."""
    if not meta:
        return []
    return [name for name, value in keys.items() if meta.get(name) != value]


def vocabulary_settings_now() -> dict[str, Any]:
    cfg = current_config()
    return {"eps_voc": cfg.eps_voc, "terms_per_doc": cfg.terms_per_doc, "vocab_size": cfg.vocab_size,
            "selection_rule": cfg.selection_rule, "vocabulary_spec": cfg.vocabulary,
            "remove_stopwords": cfg.remove_stopwords, "junk_filter": cfg.junk_filter,
            "vocab_max_terms": cfg.effective_vocab_max_terms}


# ============================================================================================ 4. densities

def density_preview() -> dict[str, Any]:
    """Public choices the density step would make now (bandwidth, I, expected error), before any ε is spent —
    the core's :func:`~dpkps_core.config.density_plan`, the same decision the step itself makes."""
    s = ss()
    pv: PrivateVocabulary = s["pv"]
    cfg = current_config()
    plan = pipeline.density_plan(cfg, n_classes=len(corpus().classes) if corpus() else 1, private_vocabulary=pv)
    out: dict[str, Any] = {"density": plan.density, "method": cfg.method, "eps_kde": cfg.eps_kde}
    if plan.density == "histogram":
        out["noise_sd_per_term"] = plan.expected_noise_per_term
        return out
    out.update({"class_size_estimate": plan.class_size_estimate, "class_size_source": plan.class_size_source,
                "members": plan.members, "features": plan.features, "rff_error": plan.rff_error,
                "noise_error": plan.noise_error, "total_error": plan.total_error})
    return out


def run_density() -> Any:
    """ε_kde: per-class DP densities over Ṽ for the chosen method (charges the ledger every time)."""
    s = ss()
    pv: PrivateVocabulary | None = s.get("pv")
    if pv is None:
        raise VocabularyError("Build the private vocabulary first (page 3).")
    c = corpus()
    cfg = current_config()
    cfg.validate()
    led = ledger()
    led.require(cfg.eps_kde, "the keyphrase density step")
    t0 = time.perf_counter()
    train = train_part()
    max_per_doc = cfg.max_keyphrases_per_doc or cfg.length
    keyphrases = pipeline.extract_keyphrases(train.texts, pv, max_per_doc=max_per_doc)
    embeddings = embed_terms(pv.terms, embedder(cfg.embedding_model), cache=embedding_cache())
    nz = noise()
    density, info = pipeline.build_density(
        keyphrases, train.labels, classes=tuple(c.classes), embeddings=embeddings, config=cfg,
        private_vocabulary=pv, noise=nz, ledger=led, groups=person_groups(train), neighbouring=privacy_unit(),
    )
    clear_after("density", include=True)
    s.update(keyphrases=keyphrases, embeddings=embeddings, dp_density=density, density_info=info)
    s["density_meta"] = {
        "method": cfg.method, "density": cfg.density, "density_kind": cfg.density_kind, "length": cfg.length,
        "eps_kde": cfg.eps_kde, "bandwidth_setting": cfg.bandwidth, "features_setting": cfg.features,
        "embedding_model": cfg.embedding_model, "seeded": nz.seed is not None, "pv_terms": len(pv),
        "seconds": round(time.perf_counter() - t0, 2),
        "documents_without_keyphrases": int(sum(1 for k in keyphrases if not k)),
    }
    return density


def density_scores() -> np.ndarray:
    """(C, |Ṽ|) per-class DP density scores over Ṽ (post-processing of the DP release)."""
    s = ss()
    d = s["dp_density"]
    if hasattr(d, "scores"):
        return np.asarray(d.scores())
    return np.asarray(d.single_term_scores(s["embeddings"]))


def umap_map(seed: int = 0) -> np.ndarray:
    """2-D UMAP of Ṽ's embeddings (DP terms + public model); session only."""
    import umap

    s = ss()
    emb = s["embeddings"]
    n = emb.shape[0]
    if n < 4:
        raise ParameterError("The UMAP map needs at least four terms in Ṽ.")
    xy = umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), random_state=seed, n_epochs=200).fit_transform(emb)
    s["umap_map"] = np.asarray(xy)
    return s["umap_map"]


# ============================================================================================ 5. sequences

def run_sequences() -> SamplingOutcome:
    """Sample keyphrase sequences (post-processing: no ε), then write the run folder."""
    s = ss()
    if s.get("dp_density") is None:
        raise ParameterError("Build the keyphrase densities first (page 4).")
    meta = s["density_meta"]
    cfg = current_config(method=meta["method"], density=meta["density"], length=meta["length"])
    cfg.validate()
    nz = noise()
    t0 = time.perf_counter()
    outcome = pipeline.sample_sequences(s["dp_density"], terms=s["pv"].terms, embeddings=s["embeddings"], config=cfg,
                                        rng=nz.child())
    clear_after("sequences", include=True)
    s["outcome"] = outcome
    s["seq_meta"] = {"per_class": cfg.per_class, "temperature": cfg.temperature, "seeded": nz.seed is not None,
                     "seconds": round(time.perf_counter() - t0, 3)}
    write_run()
    return outcome


def sampling_config_used() -> SamplingConfig:
    """The config of the outputs on screen: each step's parameters as they were when it ran."""
    s = ss()
    pv_meta, d_meta, q_meta = s["pv_meta"], s["density_meta"], s["seq_meta"]
    seeded = bool(pv_meta["seeded"] or d_meta["seeded"] or q_meta["seeded"])
    return current_config(
        eps_voc=pv_meta["eps_voc"], terms_per_doc=pv_meta["terms_per_doc"], vocab_size=pv_meta["vocab_size"],
        selection_rule=pv_meta["selection_rule"],
        vocabulary=pv_meta["vocabulary_spec"] if pv_meta["vocabulary_spec"] in BUILTIN_VOCABULARIES
        else "upload:" + str(s.get("vocab_upload_name") or "vocabulary"),
        remove_stopwords=pv_meta["remove_stopwords"], junk_filter=pv_meta["junk_filter"],
        vocab_max_terms=pv_meta["vocab_max_terms"], method=d_meta["method"], density=d_meta["density"],
        length=d_meta["length"], eps_kde=d_meta["eps_kde"], bandwidth=d_meta["bandwidth_setting"],
        features=d_meta["features_setting"], embedding_model=d_meta["embedding_model"],
        per_class=q_meta["per_class"], temperature=q_meta["temperature"],
        seed=int(s["demo_seed"]) if seeded else None, test_fraction=float(s["split"].test_fraction),
        epsilon_cap=ledger().cap,
    )


def run_dir(*, create: bool = True) -> Path | None:
    """This session's current run folder (owner-only), created on first use."""
    s = ss()
    path = s.get("run_dir")
    if path and Path(path).is_dir():
        return Path(path)
    if not create:
        return None
    new = create_run_dir(runs_root(), s["session_token"])
    s["run_dir"] = str(new)
    s["run_dirs"].append(str(new))
    return new


def write_run() -> Path:
    """Write sequences, privacy report, Ṽ, config and (private) split into the run folder.

    A run folder that already holds LLM documents for older sequences is left as it is and a new one is used."""
    from dpkps_core.llm import DOCUMENTS_FILE

    s = ss()
    out = run_dir()
    if (out / DOCUMENTS_FILE).exists():
        s["run_dir"] = None
        notice(f"New sequences start a new run folder; the documents written before stay in {out.name}.")
        out = run_dir()
    cfg = sampling_config_used()
    report_noise = NoiseSource(cfg.seed, sampler=cfg.noise_sampler)  # describes the seed policy of the outputs (demo seed or OS entropy)
    c = corpus()
    run = assemble_run(
        config=cfg, split=s["split"], ledger=ledger(), noise=report_noise, private_vocabulary=s["pv"],
        embeddings=s["embeddings"], density=s["dp_density"], density_info=s["density_info"], outcome=s["outcome"],
        classes=tuple(c.classes), vocabulary_name=s["pv"].public_vocabulary, privacy_unit=privacy_unit(),
        timings={"vocabulary": s["pv_meta"]["seconds"], "density": s["density_meta"]["seconds"],
                 "sampling": s["seq_meta"]["seconds"]},
    )
    pipeline.write_run_folder(run, out)
    return out


def no_llm_check() -> dict[str, Any]:
    """The cheap no-LLM utility check (paper Table 5) on the current sequences — PRIVATE, local."""
    from dpkps_core import evaluation

    s = ss()
    outcome: SamplingOutcome = s["outcome"]
    pv: PrivateVocabulary = s["pv"]
    length = int(s["density_meta"]["length"])
    test, train = test_part(), train_part()
    if len(test) == 0:
        raise ParameterError("The no-LLM check needs held-out test documents; set a test fraction above 0 on page 1.")
    syn = evaluation.no_llm_check(outcome.sequences, test.texts, test.labels, private_vocabulary=pv, length=length)
    real = real_keyphrase_baseline(length)
    out = {"method": s["density_meta"]["method"], "no_llm_accuracy": syn.accuracy, "no_llm_macro_f1": syn.macro_f1,
           "real_keyphrase_baseline": real.accuracy, "chance": evaluation.chance_accuracy(test.labels),
           "n_test": len(test), "n_sequences": len(outcome.sequences), "per_class_recall": syn.per_class_recall}
    history = s.setdefault("no_llm_history", [])
    history.append({k: v for k, v in out.items() if k != "per_class_recall"})
    s["no_llm"] = out
    return out


def real_keyphrase_baseline(length: int) -> Any:
    """The one real keyphrase baseline (:func:`dpkps_core.evaluation.real_keyphrase_baseline`), computed once per
    session for the corpus, split, vocabulary, S, N and L (it does not depend on ε) — PRIVATE, session only."""
    from dpkps_core import evaluation

    s = ss()
    cfg = current_config()
    vocab = public_vocabulary()
    counts = term_counts(vocab, cfg.terms_per_doc)
    key = (s.get("corpus_id"), s.get("split_key"), vocab.name, len(vocab), cfg.terms_per_doc, cfg.vocab_size,
           int(length))
    memo = s.get("real_keyphrase_baseline")
    if not memo or memo[0] != key:
        train, test = train_part(), test_part()
        scores = evaluation.real_keyphrase_baseline(train.texts, train.labels, test.texts, test.labels,
                                                    vocabulary=vocab, counts=counts, vocab_size=cfg.vocab_size,
                                                    length=int(length))
        s["real_keyphrase_baseline"] = memo = (key, scores)
    return memo[1]


# ============================================================================================ 6. LLM

def prompt_config() -> Any:
    from dpkps_core.llm import PromptConfig

    s = ss()
    return PromptConfig(doc_type=s["doc_type"] or "a document", few_shot=tuple(s.get("few_shot") or ()),
                        include_label=bool(s["include_label"]))


def parse_few_shot_upload(data: bytes, filename: str) -> tuple[Any, ...]:
    """PUBLIC few-shot examples from a separate upload; refuses the private corpus file and its documents."""
    from dpkps_core.llm import parse_few_shot

    s = ss()
    fps = [s["corpus_fingerprint"]] if s.get("corpus_fingerprint") else []
    examples = parse_few_shot(data, filename=filename, private_fingerprints=fps)
    check_few_shot_not_private((e.text for e in examples), corpus())
    s["few_shot"], s["few_shot_name"] = tuple(examples), Path(filename).name
    return examples


def llm_backend() -> Any:
    """Offline (cached, public weights) or OpenAI-compatible (built per session; the key stays in memory)."""
    from dpkps_core.llm import make_backend

    s = ss()
    if s["backend"] == "offline":
        return offline_backend(s.get("device"))
    if s["backend"] == "local":
        return local_backend(s.get("local_model_path") or "", s.get("device"))
    return make_backend("openai", model=(s["llm_model"] or "").strip() or None,
                        base_url=(s["base_url"] or "").strip() or None, api_key=s["api_key"] or None,
                        concurrency=int(s["concurrency"]))


def generation_secrets() -> list[str]:
    key = ss().get("api_key") or ""
    return [key] if key else []


def job_sequences() -> list[dict[str, Any]]:
    """All sequences, round-robin over classes (the first k cover every class)."""
    outcome: SamplingOutcome = ss()["outcome"]
    return interleave_by_class([q.to_dict() for q in outcome.sequences])


def generation_settings(limit: int) -> Any:
    from dpkps_core.llm import GenerationSettings

    s = ss()
    offline = s["backend"] in ("offline", "local")
    return GenerationSettings(max_tokens=int(s["max_tokens"]), temperature=float(s["llm_temperature"]),
                              timeout=120.0 if offline else 60.0, retries=2 if offline else 4,
                              concurrency=1 if offline else int(s["concurrency"]), limit=int(limit),
                              batch_size=int(s.get("llm_batch_size") or DEFAULT_BATCH_SIZE))


def estimate_generation(limit: int) -> Any:
    from dpkps_core.llm import estimate_cost

    s = ss()
    seqs = job_sequences()[: int(limit)]
    settings = generation_settings(limit)
    price = float(s["price_per_1k"]) or None
    return estimate_cost(seqs, prompt_config=prompt_config(), backend=llm_backend(), max_tokens=settings.max_tokens,
                         concurrency=settings.concurrency, price_per_1k=price, batch_size=settings.batch_size)


def start_generation(limit: int) -> Job:
    """Write documents for the first ``limit`` sequences (resuming: finished ones are skipped)."""
    from dpkps_core.llm import run_generation

    if ss().get("outcome") is None:
        raise ParameterError("Sample keyphrase sequences first (page 5).")
    seqs = job_sequences()
    backend = llm_backend()
    pconf = prompt_config()
    settings = generation_settings(limit)
    out = run_dir(create=False) or write_run()
    mask = generation_secrets()

    def work(job: Job) -> Any:
        def on_progress(p: Any) -> None:
            eta = f", about {p.eta_s:.0f} s left" if p.eta_s is not None else ""
            batch = (f"; writing a batch of {p.in_flight} ({p.in_flight_fraction:.0%} of its tokens)"
                     if p.in_flight else "")
            job.report((p.done + p.failed + p.in_flight * p.in_flight_fraction) / max(p.total, 1),
                       f"{p.done}/{p.total} documents written, {p.failed} failed{batch}{eta}")

        if hasattr(backend, "load"):
            job.report(0.0, "loading the offline model (first time ~10–30 s)…")
            wait_for_warm_up("llm")
            backend.load()
        return run_generation(seqs, backend=backend, prompt_config=pconf, run_dir=out, settings=settings,
                              progress=on_progress, cancel=job.cancel, secrets=mask)

    return start_job("job_generation", "generation", work)


def documents() -> list[dict[str, Any]]:
    from dpkps_core.llm import read_documents

    out = run_dir(create=False)
    return read_documents(out) if out else []


def failures() -> list[dict[str, Any]]:
    from dpkps_core.llm import read_failures

    out = run_dir(create=False)
    return read_failures(out) if out else []


# ============================================================================================ 7. evaluation

def start_evaluation(seeds: int) -> Job:
    """Downstream accuracy + no-LLM check of the run folder (dpkps_core.evaluation.evaluate_run) — PRIVATE."""
    from dpkps_core import evaluation

    out = run_dir(create=False)
    if out is None or ss().get("outcome") is None:
        raise ParameterError("Sample keyphrase sequences first (page 5).")
    c = corpus()
    emb = memo_embedder(ss()["density_meta"]["embedding_model"], ss().get("device"))
    vocab = public_vocabulary()
    counts = term_counts(vocab, int(current_config().terms_per_doc))

    def work(job: Job) -> Any:
        return evaluation.evaluate_run(out, seeds=seeds, embedder=emb, corpus=c, progress=job.report,
                                       vocabulary=vocab, counts=counts)

    return start_job("job_evaluation", "evaluation", work)


def start_compare(*, methods: Sequence[str], eps_total: float, delta: float, per_class: int, max_tokens: int) -> Job:
    """DP-KPS vs private prediction vs AugPE+Ṽ at one privacy level on the same split (dpkps_core.baselines.compare).

    Its accuracies read real data (private, local); the synthetic documents it writes are DP releases, so their
    JOINT cost (every method on the same data) is checked against the cap and charged to the corpus's
    persistent ledger, as the CLI's ``compare`` does (issue 11 §4)."""
    from dpkps_core.baselines import compare

    if not methods:
        raise ParameterError("Pick at least one method to compare.")
    c = corpus()
    s = ss()
    led = ledger()
    joint_eps, _ = compare.joint_cost(tuple(methods), eps_total=float(eps_total), eps_voc=float(eps_total) / 2,
                                      delta=float(delta))
    led.require(joint_eps, f"this comparison of {len(methods)} method(s) on the same data (joint cost)")
    out = runs_root() / f"compare-{uuid.uuid4().hex[:8]}"
    emb = memo_embedder(DEFAULT_MODEL, s.get("device"))
    vocab = public_vocabulary()
    doc_type = s.get("doc_type") or "a document"
    test_fraction = float(s["test_fraction"])  # session state is read here, never from the worker thread
    # a local model (the user's own folder when chosen on page 6, else SmolLM2) on the device setting
    backend = (local_backend(s.get("local_model_path") or "", s.get("device")) if s.get("backend") == "local"
               else offline_backend(s.get("device")))

    def work(job: Job) -> Any:
        return compare.compare_methods(
            c, methods=tuple(methods), eps_total=float(eps_total), delta=float(delta), per_class=int(per_class),
            max_tokens=int(max_tokens), doc_type=doc_type, backend=backend, embedder=emb,
            vocabulary=vocab, test_fraction=test_fraction, out_dir=out, progress=job.report, cancel=job.cancel,
            ledger=led)

    return start_job("job_compare", "method comparison", work)


def start_projection(max_real: int) -> Job:
    """t-SNE and UMAP of real test documents (PRIVATE, in memory) and synthetic documents in one space."""
    from dpkps_core import evaluation

    docs = documents()
    if len(docs) < 2:
        raise ParameterError("Write at least two synthetic documents first (page 6).")
    test = test_part()
    if len(test) == 0:
        raise ParameterError("The overlay needs held-out real documents; set a test fraction above 0 on page 1.")
    rng = np.random.default_rng(0)
    idx = np.sort(rng.choice(len(test), size=min(int(max_real), len(test)), replace=False))
    real_texts = [test.texts[i] for i in idx]
    real_labels = [test.labels[i] for i in idx]
    emb_model = memo_embedder(ss()["density_meta"]["embedding_model"])

    def work(job: Job) -> Any:
        job.report(0.05, f"embedding {len(real_texts)} real test documents (in memory only)")
        real = embed_texts(real_texts, emb_model, progress=lambda f, m: job.report(0.05 + 0.3 * f, m))
        if job.cancelled:
            return None
        job.report(0.35, f"embedding {len(docs)} synthetic documents")
        syn = embed_texts([d["text"] for d in docs], emb_model)
        frames = {}
        for k, method in enumerate(("tsne", "umap")):
            if job.cancelled:
                break
            job.report(0.4 + 0.3 * k, f"{method.upper()} projection")
            frames[method] = evaluation.projection_frame(real, real_labels, syn, [d["label"] for d in docs],
                                                         method=method)
            job.partial.append(method)
        job.report(1.0, "projections done")
        return frames

    return start_job("job_projection", "projection", work)


def start_sweep(*, eps_voc: Sequence[float], eps_kde: Sequence[float], methods: Sequence[str], seeds: int,
                per_class: int) -> Job:
    """ε sweep without the LLM; finished cells are kept when cancelled (PRIVATE, local experiment)."""
    from dpkps_core import evaluation

    if not eps_voc or not eps_kde or not methods:
        raise ParameterError("Choose at least one ε_voc, one ε_kde and one method for the sweep.")
    c = corpus()
    if c is None:
        raise CorpusError("Load a corpus first (page 1).")
    base = current_config(epsilon_cap=None, seed=None).validate()
    vocab = public_vocabulary()
    emb = embedder(base.embedding_model)
    cache = embedding_cache()
    sp = split()

    def work(job: Job) -> Any:
        # the core's sweep (the same numbers as `python -m dpkps_core sweep`); finished cells land in job.partial
        ev_ = evaluation.NoLLMEvaluator(c, config=base, vocabulary=vocab, embedder=emb, cache=cache, split=sp)
        return evaluation.run_sweep(c, config=base, vocabulary=vocab, embedder=emb, evaluator=ev_,
                                    eps_voc_grid=[float(e) for e in eps_voc], eps_kde_grid=[float(e) for e in eps_kde],
                                    methods=list(methods), seeds=int(seeds), per_class=int(per_class),
                                    progress=job.report, cancel=job.cancel, rows=job.partial)

    return start_job("job_sweep", "sweep", work)


# ============================================================================================ 8. export

def bundle() -> bytes:
    from dpkps_core.export import bundle_bytes

    out = run_dir(create=False)
    if out is None:
        raise ParameterError("Nothing to export yet: sample keyphrase sequences first (page 5).")
    return bundle_bytes(out, secrets=generation_secrets())


def bundle_parts() -> dict[str, bytes]:
    from dpkps_core.export import collect_bundle

    out = run_dir(create=False)
    if out is None:
        raise ParameterError("Nothing to export yet: sample keyphrase sequences first (page 5).")
    return collect_bundle(out, secrets=generation_secrets())


def delete_runs() -> list[str]:
    """Delete every run folder of this session (the ledger stays: the ε was spent)."""
    s = ss()
    job = s.get("job_generation")
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing into the run folder; cancel it first (page 6).")
    deleted = []
    for path in list(s["run_dirs"]):
        p = Path(path)
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        deleted.append(p.name)
    s["run_dirs"] = []
    s["run_dir"] = None
    clear_after("sequences", include=True)
    return deleted
