"""The app's actions for pages 1 and 3–5: each takes the session's state (``studio.state.SessionState``), calls the
``dpkps_core`` step and writes what it returned to the run folder — the same core functions the CLI runs, so the same
numbers. Page 2's forecasts are ``studio.forecasts``.

Each DP step charges the session's :class:`PrivacyLedger` (inside the core function) and clears the session results
that depended on the previous output (``session.clear_after``); the ledger is never cleared. The LLM step (page 6)
is in ``studio.generation_steps``, the evaluation jobs (page 7) in ``studio.evaluation_steps``, reopening, exporting
and deleting runs (page 8) in ``studio.runs``.

The run folder is the state (docs/ARCHITECTURE.md, ``dpkps_core.records.runfolder``): Ṽ is written to a fresh run folder the
moment it is released, the densities and the sequences beside it (a later step that would overwrite what an earlier
chain holds starts a new folder with a copy of what it builds on, ``studio.run_writes``), and the pages read them
back through ``studio.run_view`` — the session keeps no second copy (docs/DESIGN.md §2.0: reading DP outputs back is
post-processing).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from dpkps_core.method import pipeline

from dpkps_core.records import runfolder
from dpkps_core.corpus import DEMO_SPECS, Corpus
from dpkps_core.method.density_plan import density_plan
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import PrivateVocabulary, check_vocabulary_settings
from dpkps_core.errors import CorpusError, ParameterError, VocabularyError
from dpkps_core.ledger_store import PersistentLedger
from dpkps_core.records.runfolder import DENSITY_FILE, DOCUMENTS_FILE, RUN_STATE_FILE, SEQUENCES_FILE, VOCABULARY_FILE, RunFolder
from dpkps_core.method.sampling import SamplingOutcome
from studio import page_ref, run_view, spend
from studio.defaults import DOC_TYPE_FOR_DEMO, USER_CORPUS_SOURCES, is_user_corpus, reset_corpus_settings
from studio.jobs import Job, start_job
from studio.resources import cached_vocabulary, demo_corpus, embedder, embedding_cache
from studio.accounting import forecast_event_ids, record_step, recorded_event_ids, reserve_plan, run_account
from studio.run_writes import abandon_run_dir, new_run_dir, run_state_base, save_densities, write_run_state
from studio.session import clear_after, corpus, current_config, noise, notice, privacy_unit, public_vocabulary, run_dir, term_counts, test_part, train_part
from studio.ledger_view import ledger
from studio.streamed import Metered, StreamedView, is_streamed, remember_term_counts
from studio.state import SessionState

# ============================================================================================ 1. corpus

def ensure_corpus(state: SessionState) -> Corpus | None:
    """The current corpus; on a first visit the preselected demo corpus is loaded."""
    if state.loaded.corpus is None and state.settings.corpus_source == "demo":
        load_demo(state, state.settings.demo_spec)
    return state.loaded.corpus


def load_demo(state: SessionState, spec: str) -> Corpus:
    if spec not in DEMO_SPECS:
        raise CorpusError(f"Unknown demo corpus {spec!r}.")
    refuse_while_stepping(state)
    c = demo_corpus(spec)
    set_corpus(state, c, cid=spec, spec=spec, fingerprint=None, text_column=None, label_column=None, filename=None)
    state.loaded.encoding = "utf-8"
    if not state.settings.doc_type:
        state.settings.doc_type = DOC_TYPE_FOR_DEMO.get(spec, "a document")
    return c


def set_corpus(state: SessionState, c: Corpus | StreamedView, *, cid: str, spec: str, fingerprint: str | None,
               text_column: str | None,
                label_column: str | None, filename: str | None) -> None:
    if state.loaded.corpus_id == cid and state.loaded.corpus is not None:
        return
    had = state.loaded.corpus_id
    clear_after(state, "corpus", include=True)
    loaded = state.loaded
    loaded.corpus, loaded.corpus_id, loaded.corpus_spec, loaded.corpus_fingerprint = c, cid, spec, fingerprint
    loaded.text_column, loaded.label_column, loaded.corpus_filename = text_column, label_column, filename
    state.run.run_dir = None
    if had:
        reset = reset_corpus_settings(state.settings)  # the previous corpus's method, ε, N, S… do not carry over
        notice(state, "A new corpus starts a new run with its own privacy ledger and run folder; the previous run's "
               "folder and ledger are kept."
               + (" Its settings (method, ε split, vocabulary, N, S…) are back to their defaults: choose them for "
                  f"this corpus on {page_ref('budget')}." if reset else ""))


def require_selected_corpus(state: SessionState) -> Corpus:
    """The loaded corpus, if it is the kind page 1 has selected. A failed upload keeps the corpus loaded before
    (and its results: they cost ε), but no DP step runs on it while "Upload my corpus" is selected and the loaded
    corpus is a demo — the user's file is not what is loaded (a public decision: the user's own setting)."""
    c = corpus(state)
    if c is None:
        raise CorpusError(f"Load a corpus first ({page_ref('corpus')}).")
    if state.settings.corpus_source in USER_CORPUS_SOURCES and not is_user_corpus(state.loaded.corpus_id):
        raise CorpusError(f"Your file is not loaded: the loaded corpus is the demo “{c.name}”. Load your file on "
                          f"{page_ref('corpus')} (“Load this corpus”), or select the demo corpus there. Nothing "
                          "was spent.")
    return c


def declare_classes(state: SessionState, names: Sequence[str]) -> Corpus:
    """The user confirms ``names`` as the PUBLIC class names of the current corpus (docs/DESIGN.md §2).

    Suggestions read off the data are only shown locally; this declaration is what the DP steps release per
    class. Changing it discards Ṽ and what followed (the ε they spent stays on the ledger)."""
    c = corpus(state)
    if c is None:
        raise CorpusError(f"Load a corpus first ({page_ref('corpus')}).")
    refuse_while_stepping(state)
    declared = c.with_classes(list(names))  # validates: ≥ 2 distinct non-empty names
    if declared.public_classes != c.public_classes:
        if run_view.private_vocabulary(state) is not None:
            notice(state,
                   "The public class list changed: the private vocabulary and what followed were put aside (their "
                   "run folder stays on disk; the ε they spent stays on the ledger).")
        clear_after(state, "corpus")
        state.run.run_dir = None
        state.loaded.corpus = declared
    return declared


# ============================================================================================ 2. vocabulary & budget


# ============================================================================================ 3. private vocabulary

#: The job slots (``studio.state.Jobs``) of the DP releases' background jobs on a streamed corpus (the forecast,
#: pages 3 and 4).
STEP_JOBS = ("forecast", "vocabulary", "density")


def refuse_while_stepping(state: SessionState) -> None:
    """One DP step at a time per session: a streamed step still reading the corpus blocks the next."""
    for name in STEP_JOBS:
        job = state.jobs.get(name)
        if isinstance(job, Job) and job.running:
            raise ParameterError("A DP step is still reading the corpus (its progress is on its page); wait for it "
                                 "or cancel it first. Nothing changed.")


def finish_step_jobs(state: SessionState) -> None:
    """In a script run: let the session learn what a finished streamed step released (``studio.jobs.finish``)."""
    from studio import jobs

    for name in STEP_JOBS:
        jobs.finish(state, name)


def run_private_vocabulary(state: SessionState) -> PrivateVocabulary | Job:
    """ε_voc: the Laplace noisy histogram over all of V, top N → Ṽ (charges the ledger every time).

    A streamed corpus runs the same core step in a background job (its pass over the file takes minutes): returns
    the :class:`Job`, whose page shows its per-chunk progress and Cancel; the release is written to the run folder
    by the job, and the session learns it once the job ended (:func:`finish_step_jobs`)."""
    require_selected_corpus(state)
    cfg = current_config(state)
    # no refusal here on the corpus's history (it would depend on the data): the step refuses on public input
    # only (the settings, N > |V|: before anything is spent) and admits the units that still have budget (docs/DESIGN.md §2.0)
    vocab = public_vocabulary(state)
    check_vocabulary_settings(epsilon=cfg.eps_voc, terms_per_doc=cfg.terms_per_doc, size=cfg.vocab_size,
                              vocabulary_size=len(vocab), selection_rule=cfg.selection_rule)
    streamed = is_streamed(state)
    # a streamed corpus counts its terms in the release's own pass, after its admission (no pass of its own here)
    counts = None if streamed else term_counts(state, vocab, cfg.terms_per_doc)
    _refuse_while_writing(state)
    refuse_while_stepping(state)
    new, old = new_run_dir(state)  # a new Ṽ is a new run: its folder is named in the ledger's record of the release
    led = None
    try:
        base = {**run_state_base(state), "pv_meta": None, "density_meta": None, "density_info": None, "seq_meta": None}
        led = ledger(state)
        before = recorded_event_ids(led)
        steering = forecast_event_ids(state, led, terms_per_doc=cfg.terms_per_doc, public_vocabulary_size=len(vocab),
                                      classes=len(require_selected_corpus(state).classes))
        if isinstance(led, PersistentLedger) and reserve_plan(state):
            # the run's planned ε for its units at its first release (issue 35 part 8): concurrent runs cannot take
            # the room its densities need (docs/DESIGN.md §2.0)
            led.reserve_next(cfg.eps_voc + cfg.eps_kde)
        t0 = time.perf_counter()
        nz = noise(state)
        train = train_part(state)
        units = len(train)
        cid = state.loaded.corpus_id

        def write(step: pipeline.VocabularyStep) -> None:  # the run folder only: no session access
            pv_meta = {
                "eps_voc": cfg.eps_voc, "terms_per_doc": cfg.terms_per_doc, "vocab_size": cfg.vocab_size,
                "selection_rule": cfg.selection_rule, "vocabulary": vocab.name, "vocabulary_spec": cfg.vocabulary,
                "public_size": len(vocab), "remove_stopwords": cfg.remove_stopwords, "junk_filter": cfg.junk_filter,
                "vocab_max_terms": cfg.effective_vocab_max_terms, "seeded": nz.seed is not None,
                "seconds": round(time.perf_counter() - t0, 2), "ledger_events": len(led),
            }
            # the run folder holds Ṽ before the session is touched (a stopped script run loses no release)
            runfolder.write_json(RunFolder(new).vocabulary, step.private_vocabulary.to_dict())
            record_step(new, led, before, "vocabulary", steering)
            write_run_state(new, {**base, "pv_meta": pv_meta})

        def learn(step: pipeline.VocabularyStep) -> None:  # the session, in a script run
            clear_after(state, "vocabulary", include=True)
            run_view.remember_vocabulary(state, new, step.private_vocabulary)
            # PRIVATE checks on the training part, shown locally (the release above went ahead regardless), and the
            # documents without budget left (docs/DESIGN.md §2.0): session only
            run_view.set_notes(state, new, "vocabulary", {"local_warnings": list(step.local_warnings),
                                                   "left_out": step.left_out, "units": units})
            if streamed and not step.left_out:  # the pass counted the whole training part: the exact previews' counts
                remember_term_counts(state, vocab, cfg.terms_per_doc, step.counts)
            state.run.reopened_run = None

        spend.started(state)  # one intent, one release: from here the click is spent (studio.spend)
        if streamed:
            def work(job: Job) -> pipeline.VocabularyStep:
                assert job.meter is not None
                step = pipeline.vocabulary_step(Metered(train, job.meter), vocab, cfg,
                                                context=ReleaseContext(noise=nz, ledger=led), progress=job.meter.phase)
                write(step)
                return step

            def finished(job: Job) -> None:
                if state.loaded.corpus_id != cid:  # (a corpus cannot change while the job runs; kept for safety)
                    return
                if job.result is not None:
                    learn(job.result)
                    return
                if isinstance(led, PersistentLedger):  # failed or cancelled: what it admitted stays charged
                    led.drop_planned()
                abandon_run_dir(state, new, old)

            return start_job(state, "vocabulary", "private vocabulary", work, on_finish=finished, meter=True)
        step = pipeline.vocabulary_step(train, vocab, cfg, context=ReleaseContext(noise=nz, ledger=led), counts=counts)
    except BaseException:
        if isinstance(led, PersistentLedger):
            led.drop_planned()
        abandon_run_dir(state, new, old)
        raise
    write(step)
    learn(step)
    return step.private_vocabulary


def _refuse_while_writing(state: SessionState) -> None:
    job = state.jobs.generation
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing documents for the current sequences; cancel it first "
                             f"({page_ref('generate')}).")


def vocabulary_noise_floor(pv: PrivateVocabulary) -> float:
    """Largest pure-noise count expected among |V| zero counts (a public function of ε_voc, S and |V|)."""
    from dpkps_core.dp.vocabulary import noise_floor

    return noise_floor(epsilon=pv.epsilon, terms_per_doc=pv.terms_per_doc, vocabulary_size=pv.public_vocabulary_size)


def vocabulary_check(state: SessionState) -> dict[str, Any]:
    """PRIVATE, local: how much of the non-private top-N Ṽ recovered, and how much of Ṽ is pure noise."""
    from dpkps_core import evaluation

    pv, meta = run_view.private_vocabulary(state), run_view.vocabulary_meta(state)
    if pv is None or meta is None:
        raise VocabularyError(f"Build the private vocabulary first ({page_ref('private-vocabulary')}).")
    vocab = cached_vocabulary(meta["vocabulary_spec"], meta["remove_stopwords"], meta["junk_filter"],
                              meta["vocab_max_terms"])
    counts = term_counts(state, vocab, meta["terms_per_doc"])
    out = {
        "recall": evaluation.vocabulary_recall(counts, vocab.terms, pv.terms, top=meta["vocab_size"]),
        "noise_share": evaluation.noise_term_share(counts, vocab, pv.terms),
        "terms_in_corpus": int((counts > 0).sum()),
        "top": min(meta["vocab_size"], int((counts > 0).sum())),
    }
    state.results.vocab_check = out
    return out


# ============================================================================================ 4. densities

def density_preview(state: SessionState) -> dict[str, Any]:
    """Public choices the density step would make now (bandwidth, I, expected error), before any ε is spent —
    the core's :func:`~dpkps_core.method.density_plan.density_plan`, the same decision the step itself makes."""
    pv = run_view.private_vocabulary(state)
    if pv is None:
        raise VocabularyError(f"Build the private vocabulary first ({page_ref('private-vocabulary')}).")
    cfg = current_config(state)
    plan = density_plan(cfg, n_classes=len(corpus(state).classes) if corpus(state) else 1, private_vocabulary=pv)
    out: dict[str, Any] = {"density": plan.density, "method": cfg.method, "eps_kde": cfg.eps_kde}
    if plan.density == "histogram":
        out["noise_sd_per_term"] = plan.expected_noise_per_term
        return out
    out.update({"class_size_estimate": plan.class_size_estimate, "class_size_source": plan.class_size_source,
                "members": plan.members, "features": plan.features, "rff_error": plan.rff_error,
                "noise_error": plan.noise_error, "total_error": plan.total_error})
    return out


def run_density(state: SessionState) -> Any:
    """ε_kde: per-class DP densities over Ṽ for the chosen method (charges the ledger every time). A streamed corpus
    runs the same core step in a background job (see :func:`run_private_vocabulary`) and returns the :class:`Job`."""
    pv = run_view.private_vocabulary(state)
    if pv is None:
        raise VocabularyError(f"Build the private vocabulary first ({page_ref('private-vocabulary')}).")
    c = require_selected_corpus(state)
    cfg = current_config(state)
    _refuse_while_writing(state)
    refuse_while_stepping(state)
    out = run_dir(state)
    if (out / DENSITY_FILE).exists() or (out / SEQUENCES_FILE).exists():
        out, _ = new_run_dir(state, keep=(VOCABULARY_FILE, RUN_STATE_FILE))  # the earlier chain's folder stays as it is
    led = ledger(state)
    before = recorded_event_ids(led)
    steering = forecast_event_ids(state, led, terms_per_doc=pv.terms_per_doc,
                                  public_vocabulary_size=pv.public_vocabulary_size, classes=len(c.classes))
    t0 = time.perf_counter()
    nz = noise(state)
    # a seeded demo's Ṽ is not a DP release: its embeddings stay in memory, never in the persistent cache
    cache = embedding_cache() if nz.seed is None else pipeline.seeded_embedding_cache()
    emb = embedder(cfg.embedding_model)
    base = {**run_state_base(state), "density_meta": None, "density_info": None, "seq_meta": None}
    train = train_part(state)
    units = len(train)
    cid = state.loaded.corpus_id

    def write(step: pipeline.DensityStep) -> dict[str, Any]:  # the run folder only: no session access
        density_meta = {
            "method": cfg.method, "density": cfg.density, "density_kind": cfg.density_kind, "length": cfg.length,
            "eps_kde": cfg.eps_kde, "bandwidth_setting": cfg.bandwidth, "features_setting": cfg.features,
            "embedding_model": cfg.embedding_model, "seeded": nz.seed is not None, "pv_terms": len(pv),
            "seconds": round(time.perf_counter() - t0, 2),
        }
        # the run folder holds the densities before the session is touched
        save_densities(out, step.density, step.embeddings)
        record_step(out, led, before, "density", steering)
        write_run_state(out, {**base, "density_meta": density_meta, "density_info": step.info})
        # PRIVATE, local: documents without keyphrases or budget left, and the notes shown for them (§2.0)
        return {"documents_without_keyphrases": int(sum(1 for k in step.keyphrases if not k)),
                "left_out": step.left_out, "local_warnings": list(step.local_warnings), "units": units}

    def learn(step: pipeline.DensityStep, notes: dict[str, Any]) -> None:  # the session, in a script run
        clear_after(state, "density", include=True)
        run_view.remember_density(state, out, step.density, step.embeddings, model=cfg.embedding_model,
                                  seeded=nz.seed is not None)
        run_view.set_notes(state, out, "density", notes)

    spend.started(state)  # one intent, one release: from here the click is spent (studio.spend)
    if is_streamed(state):
        def work(job: Job) -> tuple[pipeline.DensityStep, dict[str, Any]]:
            assert job.meter is not None
            step = pipeline.density_step(Metered(train, job.meter), pv, cfg, classes=tuple(c.classes),
                                         embedder=emb, cache=cache, context=ReleaseContext(noise=nz, ledger=led),
                                         progress=job.meter.phase)
            return step, write(step)

        def finished(job: Job) -> None:  # failed or cancelled: what it admitted stays charged, nothing to learn
            if job.result is not None and state.loaded.corpus_id == cid:
                learn(*job.result)

        return start_job(state, "density", "keyphrase densities", work, on_finish=finished, meter=True)
    step = pipeline.density_step(train, pv, cfg, classes=tuple(c.classes), embedder=emb,
                                 cache=cache, context=ReleaseContext(noise=nz, ledger=led))
    learn(step, write(step))
    return step.density


def umap_map(state: SessionState, seed: int = 0) -> np.ndarray:
    """2-D UMAP of Ṽ's embeddings (DP terms + public model); session only."""
    from dpkps_core.evaluation import term_map

    state.results.umap_map = term_map(run_view.embeddings(state), seed=seed)
    return state.results.umap_map


# ============================================================================================ 5. sequences

def run_sequences(state: SessionState) -> SamplingOutcome:
    """Sample keyphrase sequences (post-processing: no ε), then write the run folder."""
    dens, meta, pv = run_view.density(state), run_view.density_meta(state), run_view.private_vocabulary(state)
    if dens is None or meta is None or pv is None:
        raise ParameterError(f"Build the keyphrase densities first ({page_ref('densities')}).")
    if meta.get("reopened") and meta["method"] != "independent":
        raise ParameterError(f"This reopened run's densities ({meta['method']}) were read back as per-term scores, "
                             "which sample independent sequences only; its sequences are kept. Rebuild the "
                             f"densities on {page_ref('densities')} (spends ε_kde) to sample iterative sequences "
                             "again.")
    _refuse_while_writing(state)
    cfg = current_config(state, method=meta["method"], density=meta["density"], length=meta["length"])
    nz = noise(state)
    t0 = time.perf_counter()
    outcome = pipeline.sample_sequences(dens, terms=pv.terms, embeddings=run_view.embeddings(state), config=cfg,
                                        rng=nz.child())
    seq_meta = {"per_class": cfg.per_class, "temperature": cfg.temperature, "seeded": nz.seed is not None,
                "seconds": round(time.perf_counter() - t0, 3)}
    clear_after(state, "sequences", include=True)
    write_run(state, outcome, seq_meta)
    return outcome


def write_run(state: SessionState, outcome: SamplingOutcome | None = None,
              seq_meta: dict[str, Any] | None = None) -> Path:
    """Write sequences, privacy report, Ṽ, config and (private) split into the run folder (``outcome`` and
    ``seq_meta``: freshly sampled sequences and their settings; default: the open run's own, written again).

    A run folder that already holds LLM documents for older sequences is left as it is and a new one is used."""
    if outcome is None:
        outcome, seq_meta = run_view.outcome(state), run_view.sequences_meta(state)
    pv, info, dens = run_view.private_vocabulary(state), run_view.density_info(state), run_view.density(state)
    if outcome is None or seq_meta is None or pv is None or info is None:
        raise ParameterError(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    out = run_dir(state)
    if (out / DOCUMENTS_FILE).exists():
        old = out
        out, _ = new_run_dir(state, keep=(VOCABULARY_FILE, DENSITY_FILE, RUN_STATE_FILE))
        notice(state, f"New sequences start a new run folder; the documents written before stay in {old.name}.")
    cfg = run_view.sampling_config_used(state, seq_meta)
    report_noise = NoiseSource(cfg.seed, sampler=cfg.noise_sampler)  # describes the seed policy of the outputs (demo seed or OS entropy)
    report = pipeline.privacy_report(  # the run's own events, whoever recorded them (issue 35 part 4)
        config=cfg, context=ReleaseContext(noise=report_noise, ledger=run_account(out, ledger(state))),
        private_vocabulary=pv,
        vocabulary_name=pv.public_vocabulary, density_info=info, outcome=outcome,
        classes=tuple(corpus(state).classes), privacy_unit=privacy_unit(state))
    base = run_state_base(state)
    pipeline.write_run_files(out, config=cfg, split=state.loaded.split, private_vocabulary=pv, outcome=outcome,
                             report=report)
    if not (out / DENSITY_FILE).exists() and dens is not None:
        save_densities(out, dens, run_view.embeddings(state))
    write_run_state(out, {**base, "seq_meta": seq_meta})
    return out


def no_llm_check(state: SessionState) -> dict[str, Any]:
    """The cheap no-LLM utility check (paper Table 5) on the current sequences — PRIVATE, local."""
    from dpkps_core import evaluation

    outcome, pv, meta = run_view.outcome(state), run_view.private_vocabulary(state), run_view.density_meta(state)
    if outcome is None or pv is None or meta is None:
        raise ParameterError(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    length = int(meta["length"])
    test = test_part(state)
    if len(test) == 0:
        raise ParameterError("The no-LLM check needs held-out test documents; set a test fraction above 0 on "
                             f"{page_ref('corpus')}.")
    syn = evaluation.no_llm_check(outcome.sequences, test.texts, test.labels, private_vocabulary=pv, length=length)
    real = real_keyphrase_baseline(state, length)
    out = {"method": meta["method"], "no_llm_accuracy": syn.accuracy, "no_llm_macro_f1": syn.macro_f1,
           "real_keyphrase_baseline": real.accuracy, "chance": evaluation.chance_accuracy(test.labels),
           "n_test": len(test), "n_sequences": len(outcome.sequences), "per_class_recall": syn.per_class_recall}
    state.results.no_llm_history.append({k: v for k, v in out.items() if k != "per_class_recall"})
    state.results.no_llm = out
    return out


def real_keyphrase_baseline(state: SessionState, length: int) -> Any:
    """The one real keyphrase baseline (:func:`dpkps_core.evaluation.real_keyphrase_baseline`), computed once per
    session for the corpus, split, vocabulary, S, N and L (it does not depend on ε) — PRIVATE, session only."""
    from dpkps_core import evaluation

    cfg = current_config(state)
    vocab = public_vocabulary(state)
    counts = term_counts(state, vocab, cfg.terms_per_doc)
    key = (state.loaded.corpus_id, state.loaded.split_key, vocab.name, len(vocab), cfg.terms_per_doc, cfg.vocab_size,
           int(length))
    memo = state.results.real_keyphrase_baseline
    if not memo or memo[0] != key:
        train, test = train_part(state), test_part(state)
        scores = evaluation.real_keyphrase_baseline(train.texts, train.labels, test.texts, test.labels,
                                                    vocabulary=vocab, counts=counts, vocab_size=cfg.vocab_size,
                                                    length=int(length))
        state.results.real_keyphrase_baseline = memo = (key, scores)
    return memo[1]
