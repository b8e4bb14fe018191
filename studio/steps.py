"""The app's actions for pages 1–5 and 8: each reads the session (``studio.session``), calls the ``dpkps_core``
step and stores what it returned — the same core functions the CLI runs, so the same numbers.

Each DP step charges the session's :class:`PrivacyLedger` (inside the core function) and clears the results that
depended on the previous output (``session.clear_after``); the ledger is never cleared. The LLM step (page 6) is in
``studio.generation_steps``, the evaluation jobs (page 7) in ``studio.evaluation_steps``.

The run folder is the state (docs/ARCHITECTURE.md, ``dpkps_core.runfolder``): Ṽ is written to a fresh run folder the
moment it is released, the densities and the sequences beside it (a later step that would overwrite what an earlier
chain holds starts a new folder with a copy of what it builds on), and :func:`reopen_run` rebuilds the session's
view from a folder alone — no ledger event: reading DP outputs back is post-processing (DESIGN §2.0).
"""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core import pipeline, runfolder
from dpkps_core.density_plan import density_plan
from dpkps_core.corpus import DEMO_SPECS, Corpus, check_encoding, list_columns, load_corpus, suggest_columns
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import PrivateVocabulary, check_vocabulary_settings
from dpkps_core.errors import CorpusError, ParameterError, VocabularyError
from dpkps_core.runfolder import (DENSITY_FILE, DOCUMENTS_FILE, RUN_STATE_FILE, SEQUENCES_FILE, VOCABULARY_FILE,
                                  RunFolder, open_run)
from dpkps_core.sampling import SamplingOutcome
from dpkps_core.sequences import KeyphraseSequence
from studio import spend
from studio.jobs import Job
from studio.resources import cached_vocabulary, demo_corpus, embedder, embedding_cache
from studio.session import (DOC_TYPE_FOR_DEMO, MAX_UPLOAD_BYTES, clear_after, corpus, current_config,
                            generation_secrets, ledger, noise, notice, person_column, privacy_unit,
                            public_vocabulary, reset_corpus_settings, run_dir, sampling_config_used, split, ss,
                            term_counts, test_part, train_part)

# ============================================================================================ run folder
# What a run's folder holds besides the releasable files: the app's PUBLIC settings of each step (never the
# private counts some step metas carry for the data owner) and the density scores (DP outputs).

_PRIVATE_META_KEYS = frozenset({"local_warnings", "left_out", "documents_without_keyphrases"})


def _public(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A step's meta without its PRIVATE, local figures (they stay in the session only)."""
    return None if meta is None else {k: v for k, v in meta.items() if k not in _PRIVATE_META_KEYS}


def run_state_base() -> dict[str, Any]:
    """The run's public context for ``run_state.json`` (corpus name, public classes, split fraction, the steps'
    public settings so far) — read from the session BEFORE a release: once the release is made, its output goes to
    the run folder before the session is touched (Streamlit may stop a script run at any session access when
    another click arrives; what was released must then still be in the folder)."""
    s = ss()
    c = corpus()
    pv_meta, d_meta = _public(s.get("pv_meta")), _public(s.get("density_meta"))
    return {
        "corpus_spec": s.get("corpus_spec") or s.get("corpus_id"), "corpus_name": c.name if c is not None else None,
        "text_column": s.get("loaded_text_column"), "label_column": s.get("loaded_label_column"),
        "person_column": person_column(), "classes": list(c.public_classes or ()) if c is not None else [],
        "test_fraction": (s.get("split_key") or (None, s.get("test_fraction")))[1],
        "pv_meta": pv_meta, "density_meta": d_meta, "density_info": s.get("density_info") if d_meta else None,
        "seq_meta": s.get("seq_meta") if s.get("outcome") is not None else None,
        "vocab_upload_name": s.get("vocab_upload_name"),
        "vocab_upload_sha256": s.get("vocab_upload_sha256"),
    }


def write_run_state(out: Path, state: Mapping[str, Any]) -> None:
    """Write ``run_state.json`` (public only: the private figures of the step metas are dropped here)."""
    state = {**state, "pv_meta": _public(state.get("pv_meta")), "density_meta": _public(state.get("density_meta"))}
    eps = (state["pv_meta"] or {}).get("eps_voc", 0.0) + (state["density_meta"] or {}).get("eps_kde", 0.0)
    runfolder.write_json(RunFolder(out).state, {**state, "epsilon_total": round(float(eps), 6)})


def save_run_state(out: Path) -> None:
    """Write ``run_state.json`` from the session: what the run was built on and the public settings of each step —
    all the app needs, with the DP outputs beside it, to reopen the run."""
    write_run_state(out, run_state_base())


def _density_scores(density: Any, embeddings: np.ndarray) -> np.ndarray:
    """(C, |Ṽ|) per-class scores over Ṽ of a density release (post-processing; no session access)."""
    if hasattr(density, "scores"):
        return np.asarray(density.scores())
    return np.asarray(density.single_term_scores(embeddings))


def _save_densities(out: Path, density: Any, embeddings: np.ndarray) -> None:
    """Write the per-class density scores over Ṽ (post-processing of the ε_kde release) for a reopened run."""
    scores = np.round(np.asarray(_density_scores(density, embeddings), dtype=np.float64), 6)
    runfolder.write_json(RunFolder(out).densities, {"classes": list(density.classes), "scores": scores.tolist()})


def _new_run_dir(keep: Sequence[str] = ()) -> tuple[Path, str | None]:
    """Point the session at a fresh run folder (copying ``keep`` from the current one); returns (new, old)."""
    s = ss()
    old = s.get("run_dir")
    s["run_dir"] = None
    new = run_dir()
    if old and Path(old).is_dir():
        for name in keep:
            src = Path(old) / name
            if src.is_file() and not src.is_symlink():
                shutil.copyfile(src, new / name)
    return new, old


def _abandon_run_dir(new: Path, old: str | None) -> None:
    """Undo :func:`_new_run_dir` when the step failed before writing anything (an empty folder is no run)."""
    s = ss()
    if not (new / VOCABULARY_FILE).exists():
        shutil.rmtree(new, ignore_errors=True)
        s["run_dirs"] = [p for p in s["run_dirs"] if p != str(new)]
        s["run_dir"] = old

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
    ss()["loaded_encoding"] = "utf-8"
    if not ss().get("doc_type"):
        ss()["doc_type"] = DOC_TYPE_FOR_DEMO.get(spec, "a document")
    return c


def upload_columns(data: bytes, filename: str, *, encoding: str = "utf-8"
                   ) -> tuple[list[str], str | None, str | None]:
    """Columns of an uploaded table and the loader's guesses; ([], None, None) for a ZIP of .txt files.
    ``encoding``: the user's choice on page 1 (the whole file is decoded with it; DESIGN §1)."""
    if filename.lower().endswith(".zip") or data[:4] == b"PK\x03\x04":
        return [], None, None
    cols = list_columns(data, filename=filename, max_bytes=MAX_UPLOAD_BYTES, encoding=encoding)
    text, label = suggest_columns(data, filename=filename, encoding=encoding)
    return cols, text, label


def load_upload(data: bytes, filename: str, *, text_column: str | None, label_column: str | None,
                person_column: str | None = None, encoding: str = "utf-8") -> Corpus:
    """Load and validate an uploaded PRIVATE corpus (kept in this session's memory only). With
    ``person_column`` the unit of privacy is the person (DESIGN §2); ``encoding`` is the user's choice on page 1."""
    c = load_corpus(data, filename=filename, text_column=text_column, label_column=label_column,
                    max_bytes=MAX_UPLOAD_BYTES, person_column=person_column or None, encoding=encoding)
    fp = hashlib.sha256(data).hexdigest()
    cid = f"upload:{fp[:16]}:{text_column}:{label_column}:{person_column or ''}"
    if check_encoding(encoding) != "utf-8":  # another decoding is another corpus (UTF-8 ids stay as they were)
        cid += f":{check_encoding(encoding)}"
    _set_corpus(c, cid=cid, spec=f"upload:{Path(filename).name}", fingerprint=fp, text_column=text_column,
                label_column=label_column, filename=Path(filename).name)
    ss()["loaded_encoding"] = check_encoding(encoding)
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
        reset = reset_corpus_settings()  # the previous corpus's method, ε, N, S… do not carry over
        notice("A new corpus starts a new run with its own privacy ledger and run folder; the previous run's "
               "folder and ledger are kept."
               + (" Its settings (method, ε split, vocabulary, N, S…) are back to their defaults: choose them for "
                  "this corpus on page 2." if reset else ""))


def require_selected_corpus() -> Corpus:
    """The loaded corpus, if it is the kind page 1 has selected. A failed upload keeps the corpus loaded before
    (and its results: they cost ε), but no DP step runs on it while "Upload my corpus" is selected and the loaded
    corpus is a demo — the user's file is not what is loaded (a public decision: the user's own setting)."""
    s = ss()
    c = corpus()
    if c is None:
        raise CorpusError("Load a corpus first (page 1).")
    if s.get("corpus_source") == "upload" and not str(s.get("corpus_id") or "").startswith("upload:"):
        raise CorpusError(f"Your file is not loaded: the loaded corpus is the demo “{c.name}”. Load your file on "
                          "page 1 (“Load this corpus”), or select the demo corpus there. Nothing was spent.")
    return c


def declare_classes(names: Sequence[str]) -> Corpus:
    """The user confirms ``names`` as the PUBLIC class names of the current corpus (DESIGN §2).

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



# ============================================================================================ 2. vocabulary & budget

def run_forecast() -> Any:
    """"Will this work?" (dpkps_core.evaluation.forecast) on the training part's TRUE counts — private."""
    from dpkps_core import evaluation

    cfg = current_config()
    cfg.validate()
    vocab = public_vocabulary()
    counts = term_counts(vocab, cfg.terms_per_doc)
    train = train_part()
    f = evaluation.forecast(train.texts, train.labels, vocab, cfg, counts=counts)
    ss()["forecast"] = f
    return f



# ============================================================================================ 3. private vocabulary

def run_private_vocabulary() -> PrivateVocabulary:
    """ε_voc: the Laplace noisy histogram over all of V, top N → Ṽ (charges the ledger every time)."""
    s = ss()
    require_selected_corpus()
    cfg = current_config()
    cfg.validate()
    # no refusal here on the corpus's history (it would depend on the data): the step refuses on public input
    # only (the settings, N > |V|: before anything is spent) and admits the units that still have budget (DESIGN §2.0)
    vocab = public_vocabulary()
    check_vocabulary_settings(epsilon=cfg.eps_voc, terms_per_doc=cfg.terms_per_doc, size=cfg.vocab_size,
                              vocabulary_size=len(vocab), selection_rule=cfg.selection_rule)
    counts = term_counts(vocab, cfg.terms_per_doc)
    job = s.get("job_generation")
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing documents for the current sequences; cancel it first (page 6).")
    new, old = _new_run_dir()  # a new Ṽ is a new run: its folder is named in the ledger's record of the release
    try:
        led = ledger()
        t0 = time.perf_counter()
        nz = noise()
        base = {**run_state_base(), "pv_meta": None, "density_meta": None, "density_info": None, "seq_meta": None}
        train = train_part()
        spend.started()  # one intent, one release: from here the click is spent (studio.spend)
        step = pipeline.vocabulary_step(train, vocab, cfg, noise=nz, ledger=led, counts=counts)
    except BaseException:
        _abandon_run_dir(new, old)
        raise
    pv = step.private_vocabulary
    pv_meta = {
        "eps_voc": cfg.eps_voc, "terms_per_doc": cfg.terms_per_doc, "vocab_size": cfg.vocab_size,
        "selection_rule": cfg.selection_rule, "vocabulary": vocab.name, "vocabulary_spec": cfg.vocabulary,
        "public_size": len(vocab), "remove_stopwords": cfg.remove_stopwords, "junk_filter": cfg.junk_filter,
        "vocab_max_terms": cfg.effective_vocab_max_terms, "seeded": nz.seed is not None,
        "seconds": round(time.perf_counter() - t0, 2), "ledger_events": len(led),
        # PRIVATE checks on the training part: shown locally; the release above went ahead regardless
        "local_warnings": list(step.local_warnings),
        "left_out": step.left_out,  # PRIVATE, local: documents without budget left (DESIGN §2.0)
    }
    # the run folder holds Ṽ before the session is touched (a stopped script run loses nothing: session.recover_run)
    runfolder.write_json(RunFolder(new).vocabulary, pv.to_dict())
    write_run_state(new, {**base, "pv_meta": pv_meta})
    clear_after("vocabulary", include=True)
    s["pv"], s["pv_meta"] = pv, pv_meta
    s.pop("reopened_run", None)
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



# ============================================================================================ 4. densities

def density_preview() -> dict[str, Any]:
    """Public choices the density step would make now (bandwidth, I, expected error), before any ε is spent —
    the core's :func:`~dpkps_core.config.density_plan`, the same decision the step itself makes."""
    s = ss()
    pv: PrivateVocabulary = s["pv"]
    cfg = current_config()
    plan = density_plan(cfg, n_classes=len(corpus().classes) if corpus() else 1, private_vocabulary=pv)
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
    c = require_selected_corpus()
    cfg = current_config()
    cfg.validate()
    job = s.get("job_generation")
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing documents for the current sequences; cancel it first (page 6).")
    out = run_dir()
    if (out / DENSITY_FILE).exists() or (out / SEQUENCES_FILE).exists():
        out, _ = _new_run_dir(keep=(VOCABULARY_FILE, RUN_STATE_FILE))  # the earlier chain's folder stays as it is
    led = ledger()
    t0 = time.perf_counter()
    nz = noise()
    # a seeded demo's Ṽ is not a DP release: its embeddings stay in memory, never in the persistent cache
    cache = embedding_cache() if nz.seed is None else pipeline.seeded_embedding_cache()
    emb = embedder(cfg.embedding_model)
    base = {**run_state_base(), "density_meta": None, "density_info": None, "seq_meta": None}
    train = train_part()
    spend.started()  # one intent, one release: from here the click is spent (studio.spend)
    step = pipeline.density_step(train, pv, cfg, classes=tuple(c.classes), embedder=emb,
                                 cache=cache, noise=nz, ledger=led)
    keyphrases, density = step.keyphrases, step.density
    density_meta = {
        "method": cfg.method, "density": cfg.density, "density_kind": cfg.density_kind, "length": cfg.length,
        "eps_kde": cfg.eps_kde, "bandwidth_setting": cfg.bandwidth, "features_setting": cfg.features,
        "embedding_model": cfg.embedding_model, "seeded": nz.seed is not None, "pv_terms": len(pv),
        "seconds": round(time.perf_counter() - t0, 2),
        "documents_without_keyphrases": int(sum(1 for k in keyphrases if not k)),
        # PRIVATE, local: documents without budget left, and the note shown for them (DESIGN §2.0)
        "left_out": step.left_out, "local_warnings": list(step.local_warnings),
    }
    # the run folder holds the densities before the session is touched (session.recover_run)
    _save_densities(out, density, step.embeddings)
    write_run_state(out, {**base, "density_meta": density_meta, "density_info": step.info})
    clear_after("density", include=True)
    s.update(keyphrases=keyphrases, embeddings=step.embeddings, dp_density=density, density_info=step.info)
    s["density_meta"] = density_meta
    return density


def umap_map(seed: int = 0) -> np.ndarray:
    """2-D UMAP of Ṽ's embeddings (DP terms + public model); session only."""
    from dpkps_core.evaluation import term_map

    s = ss()
    s["umap_map"] = term_map(s["embeddings"], seed=seed)
    return s["umap_map"]



# ============================================================================================ 5. sequences

def run_sequences() -> SamplingOutcome:
    """Sample keyphrase sequences (post-processing: no ε), then write the run folder."""
    s = ss()
    if s.get("dp_density") is None:
        raise ParameterError("Build the keyphrase densities first (page 4).")
    meta = s["density_meta"]
    if meta.get("reopened") and meta["method"] != "independent":
        raise ParameterError(f"This reopened run's densities ({meta['method']}) were read back as per-term scores, "
                             "which sample independent sequences only; its sequences are kept. Rebuild the "
                             "densities on page 4 (spends ε_kde) to sample iterative sequences again.")
    job = s.get("job_generation")
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing documents for the current sequences; cancel it first (page 6).")
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


def write_run() -> Path:
    """Write sequences, privacy report, Ṽ, config and (private) split into the run folder.

    A run folder that already holds LLM documents for older sequences is left as it is and a new one is used."""
    s = ss()
    out = run_dir()
    if (out / DOCUMENTS_FILE).exists():
        old = out
        out, _ = _new_run_dir(keep=(VOCABULARY_FILE, DENSITY_FILE, RUN_STATE_FILE))
        notice(f"New sequences start a new run folder; the documents written before stay in {old.name}.")
    cfg = sampling_config_used()
    report_noise = NoiseSource(cfg.seed, sampler=cfg.noise_sampler)  # describes the seed policy of the outputs (demo seed or OS entropy)
    c = corpus()
    report = pipeline.privacy_report(
        config=cfg, ledger=ledger(), noise=report_noise, private_vocabulary=s["pv"],
        vocabulary_name=s["pv"].public_vocabulary, density_info=s["density_info"], outcome=s["outcome"],
        classes=tuple(c.classes), privacy_unit=privacy_unit())
    pipeline.write_run_files(out, config=cfg, split=s["split"], private_vocabulary=s["pv"], outcome=s["outcome"],
                             report=report)
    if not (out / DENSITY_FILE).exists() and s.get("dp_density") is not None:
        _save_densities(out, s["dp_density"], s.get("embeddings"))
    save_run_state(out)
    return out


def no_llm_check() -> dict[str, Any]:
    """The cheap no-LLM utility check (paper Table 5) on the current sequences — PRIVATE, local."""
    from dpkps_core import evaluation

    s = ss()
    outcome: SamplingOutcome = s["outcome"]
    pv: PrivateVocabulary = s["pv"]
    length = int(s["density_meta"]["length"])
    test = test_part()
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




# ============================================================================================ reopening a run

def run_corpus_matches(state: Mapping[str, Any]) -> bool:
    """Whether the loaded corpus is the one a run was built on: the same demo, or the same file name, text, label
    and person columns (public choices; the corpus itself is never written to the run folder)."""
    s = ss()
    c = corpus()
    if c is None or not state.get("corpus_spec"):
        return False
    same = (s.get("corpus_spec") or s.get("corpus_id")) == state["corpus_spec"]
    if str(state["corpus_spec"]).startswith("demo:"):
        return same
    return same and (s.get("loaded_text_column"), s.get("loaded_label_column"), person_column()) == (
        state.get("text_column"), state.get("label_column"), state.get("person_column"))


def reopen_run(path: str | Path, *, quiet: bool = False) -> Path:
    """Reopen a run from its folder (docs/ARCHITECTURE.md): its Ṽ, densities, sequences and documents become the
    session's results again, and "continue writing", evaluation and export work from them — at no new ε (reading
    DP outputs back is post-processing; no ledger event, nothing admitted).

    The run's corpus must be the loaded one (a demo loads itself; an upload is loaded on page 1 first), so that
    the class list, the held-out split and the few-shot check are the run's own."""
    s = ss()
    job = s.get("job_generation")
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing into the current run folder; cancel it first (page 6).")
    run = open_run(path)
    state = run.state
    spec = state.get("corpus_spec") or run.config.get("corpus")
    if not state:
        raise ParameterError(f"The run folder {run.name} was written by the command line, not by the app: export it "
                             "below, or continue it with `python -m dpkps_core generate`.")
    if not run_corpus_matches(state):
        if str(spec).startswith("demo:") and spec in DEMO_SPECS:
            s["corpus_source"], s["demo_spec"] = "demo", spec
            load_demo(spec)
        else:
            name = str(spec).split(":", 1)[-1]
            raise CorpusError(f"The run {run.name} was built on the corpus “{name}”: load that file on page 1 (with "
                              f"the text column “{state.get('text_column')}” and the label column "
                              f"“{state.get('label_column')}”), then reopen the run.")
    c = corpus()
    s["corpus_source"] = "demo" if str(spec).startswith("demo:") else "upload"  # page 1 shows the run's corpus
    classes = tuple(state.get("classes") or run.report.get("classes") or ())
    if classes and c.public_classes != classes:
        s["corpus"] = c = c.with_classes(list(classes))
    clear_after("vocabulary", include=True)
    if state.get("test_fraction") is not None:
        s["test_fraction"] = float(state["test_fraction"])
    split()  # settle the split the run was built on before its results are put back
    pv = PrivateVocabulary.from_dict(run.vocabulary)
    pv_meta = dict(state.get("pv_meta") or {})
    pv_meta.setdefault("eps_voc", pv.epsilon)
    pv_meta.setdefault("vocabulary_spec", pv.public_vocabulary)
    pv_meta.update(reopened=True, local_warnings=[], left_out=0)
    s.update(pv=pv, pv_meta=pv_meta)
    d_meta = state.get("density_meta")
    if run.densities is not None and d_meta:
        s["dp_density"] = run.density()
        s["density_info"] = dict(state.get("density_info") or {})
        s["density_meta"] = {**d_meta, "reopened": True, "documents_without_keyphrases": 0, "left_out": 0,
                             "local_warnings": []}
        model = d_meta.get("embedding_model") or s["embedding_model"]
        cache = pipeline.seeded_embedding_cache() if d_meta.get("seeded") else embedding_cache()
        from dpkps_core.embeddings import embed_terms

        s["embeddings"] = embed_terms(pv.terms, embedder(model), cache=cache)  # public model on DP terms
    if run.sequences and state.get("seq_meta") and s.get("dp_density") is not None:
        seqs = tuple(KeyphraseSequence.from_mapping(q, where=f"sequence {i + 1}") for i, q in enumerate(run.sequences))
        s["outcome"] = SamplingOutcome(sequences=seqs,
                                       uniform_fallbacks=int(run.report.get("uniform_fallback_draws") or 0),
                                       draws=len(seqs) * int(d_meta.get("length") or 1))
        s["seq_meta"] = dict(state["seq_meta"])
    if state.get("vocab_upload_name"):
        s["vocab_upload_name"] = state["vocab_upload_name"]
    if state.get("vocab_upload_sha256"):
        s["vocab_upload_sha256"] = state["vocab_upload_sha256"]
    s["run_dir"] = str(run.path)
    if str(run.path) not in s["run_dirs"]:
        s["run_dirs"].append(str(run.path))
    s["reopened_run"] = run.name
    s.pop("pending_reopen", None)
    if not quiet:
        notice(f"Reopened the run {run.name}: its Ṽ, densities, sequences and {len(run.documents):,} document(s) "
               "are back. Nothing was spent: reading released outputs back is post-processing.")
    return run.path


def machine_runs() -> list[dict[str, Any]]:
    """Every run folder on this machine (``dpkps_core.runfolder.list_runs``), newest first, marked ``current`` (the
    session's pointer) and ``mine`` (made or reopened in this session) — what page 8 lists to reopen or export."""
    from dpkps_core.runfolder import list_runs

    s = ss()
    current = str(s.get("run_dir") or "")
    mine = {str(p) for p in s.get("run_dirs") or []}
    return [{**r.to_dict(), "current": str(r.path) == current, "mine": str(r.path) in mine} for r in list_runs()]
