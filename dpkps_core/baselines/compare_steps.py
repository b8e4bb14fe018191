"""One generation method each, as a comparison runs them (docs/DESIGN.md §3–§5): DP-KPS (:func:`compare_dpkps`), AugPE+Ṽ
(:func:`compare_augpe`) and private prediction (:func:`compare_private_prediction`), on what they share
(:class:`ComparePlan`: the public settings, the split's training part, the noise, the LLM). Each charges its own
method ledger first (docs/DESIGN.md §2.0) and returns its table row, documents, audit log and privacy report
(:class:`MethodOutcome`). :func:`dpkps_core.baselines.compare.compare_methods` chains them and evaluates.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any

from dpkps_core.baselines.compare_result import MethodRow
from dpkps_core.baselines.compare_settings import COMPARE_PP_DEFAULTS, METHOD_LABELS, CompareSettings, size_epsilon
from dpkps_core.method.config import SamplingConfig, build_sampling_config
from dpkps_core.corpus import Corpus
from dpkps_core.dp.count import release_count
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError
from dpkps_core.records.privacy_report import PrivacyReport
from dpkps_core.progress import Progress


def resolve_backend(backend: Any, threads: int) -> Any:
    """The LLM backend of DP-KPS and AugPE+Ṽ: an :class:`~dpkps_core.llm.backends.LLMBackend` as given, else one
    made by name (``"offline"`` by default)."""
    from dpkps_core.llm.backends import LLMBackend
    from dpkps_core.llm.factory import make_backend

    if isinstance(backend, LLMBackend):
        return backend
    if backend in (None, "offline"):
        return make_backend("offline", threads=threads)
    if isinstance(backend, str):
        return make_backend(backend)
    raise ParameterError("backend must be 'offline', 'openai' or an LLMBackend.")


def sampling_config(*, eps_voc: float, eps_kde: float, per_class: int, sampling: SamplingConfig | None,
                    seed: int | None, test_fraction: float, split_seed: int, corpus_name: str,
                    person_column: str | None = None) -> SamplingConfig:
    """DP-KPS's :class:`~dpkps_core.method.config.SamplingConfig` in a comparison: the settings' ``sampling`` config
    (:attr:`CompareSettings.sampling`), with the ε split, documents per class, the corpus, the noise seed and the
    split fixed by the comparison (one builder: :func:`~dpkps_core.method.config.build_sampling_config`)."""
    return build_sampling_config(sampling, corpus=corpus_name, eps_voc=eps_voc, eps_kde=eps_kde, per_class=per_class,
                                 seed=seed, test_fraction=test_fraction, split_seed=split_seed, client_fraction=0.0,
                                 person_column=person_column)


def vocabulary_for(config: SamplingConfig, vocabulary: Any) -> Any:
    """The public vocabulary V: the one given, else the one ``config`` names."""
    if vocabulary is not None:
        return vocabulary
    from dpkps_core.method.vocabulary import load_vocabulary

    return load_vocabulary(config.vocabulary, remove_stopwords=config.remove_stopwords,
                           junk_filter=config.junk_filter, max_terms=config.effective_vocab_max_terms)


def build_vocabulary(train: Corpus, *, eps_voc: float, vocabulary: Any, sampling: SamplingConfig | None,
                     context: ReleaseContext, progress: Progress) -> Any:
    """Ṽ (docs/DESIGN.md §2.1) for AugPE+Ṽ when DP-KPS did not build it first: DP-KPS's own vocabulary step on the
    training part (its units — persons when the corpus has a person column — admitted through ``context``'s ledger,
    their counts read, the event charged, then ``context``'s noise: :func:`dpkps_core.dp.release.release`'s order,
    docs/DESIGN.md §2.0)."""
    from dpkps_core.method.pipeline import vocabulary_step

    cfg = sampling_config(eps_voc=eps_voc, eps_kde=1.0, per_class=1, sampling=sampling, seed=None, test_fraction=0.2,
                          split_seed=0, corpus_name=train.name,
                          person_column=(train.person_column or "person") if train.persons is not None else None)
    return vocabulary_step(train, vocabulary_for(cfg, vocabulary), cfg, context=context,
                           progress=progress).private_vocabulary


@dataclasses.dataclass(frozen=True)
class ComparePlan:
    """What every method of one comparison shares: the public settings, the split, the noise and the LLM."""

    settings: CompareSettings
    corpus: Corpus
    train: Corpus          # the training part, declared classes only
    whole: Corpus          # the same, one document per person (private prediction and AugPE+Ṽ)
    classes: tuple[str, ...]
    embedder: Any
    vocabulary: Any
    noise: NoiseSource
    llm: Any               # the resolved backend of DP-KPS and AugPE+Ṽ (None when neither runs)
    backend: Any           # what the caller asked for (private prediction looks for a local model in it)
    local_lm: tuple[Any, Any] | None
    unit_note: str
    cancel: threading.Event | None


@dataclasses.dataclass
class MethodOutcome:
    """One method's part of a comparison: its table row, documents, audit log, privacy report and warnings."""

    row: MethodRow
    documents: list[dict[str, Any]]
    audit: list[dict[str, Any]]
    privacy: PrivacyReport
    warnings: tuple[str, ...] = ()


def compare_dpkps(plan: ComparePlan, *, ledger: PrivacyLedger, progress: Progress) -> tuple[Any, MethodOutcome]:
    """DP-KPS ([DP-KPS] §3): sampling on the comparison's split (the same one: checked), one prompt per
    sequence through the comparison's shared generator."""
    from dpkps_core.baselines.augpe import generate_texts
    from dpkps_core.llm.prompts import PromptConfig, render_prompt
    from dpkps_core.method.pipeline import run_sampling
    from dpkps_core.method.split import split_documents

    settings, corpus, backend = plan.settings, plan.corpus, plan.llm
    cfg = sampling_config(eps_voc=settings.eps_voc, eps_kde=settings.eps_total - settings.eps_voc,
                          per_class=settings.per_class, sampling=settings.sampling, seed=plan.noise.seed,
                          test_fraction=settings.test_fraction, split_seed=settings.split_seed,
                          corpus_name=corpus.name, person_column=corpus.person_column if corpus.persons else None)
    run = run_sampling(corpus, cfg, vocabulary=vocabulary_for(cfg, plan.vocabulary), embedder=plan.embedder,
                       context=ReleaseContext(noise=plan.noise, ledger=ledger),
                       progress=lambda f, m: progress(0.4 * f, m))
    if run.split != split_documents(corpus, test_fraction=settings.test_fraction, seed=settings.split_seed,
                                    by_person=corpus.persons is not None):  # pragma: no cover
        raise ParameterError("DP-KPS used another split than the comparison; this is a bug.")
    prompt_cfg = PromptConfig(doc_type=settings.doc_type)
    seqs = run.outcome.sequences
    msgs = [render_prompt(s.to_dict(), prompt_cfg) for s in seqs]
    aud: list[dict[str, Any]] = []
    texts, st = generate_texts(msgs, backend=backend, max_tokens=settings.max_tokens,
                               temperature=settings.temperature, audit=aud, purpose="DP-KPS keyphrase prompt",
                               cancel=plan.cancel,
                               progress=lambda f, m: progress(0.4 + 0.6 * f, f"DP-KPS: {m}"))
    docs = []
    for s, text in zip(seqs, texts):
        d = s.to_dict()
        if text:
            docs.append({"id": d["id"], "label": d["label"], "keyphrases": d["keyphrases"], "text": text,
                         "model": backend.model, "method": "dpkps"})
    rep = run.privacy_report()
    row = MethodRow("dpkps", METHOD_LABELS["dpkps"], rep["epsilon_total"], 0.0, "ε-DP (pure)", len(docs), st.calls,
                    1.0, st.prompt_tokens, st.completion_tokens, 0.0,
                    notes=f"ε_voc = {rep['epsilon_vocabulary']:g} + ε_kde = {rep['epsilon_kde']:g}; {cfg.method} "
                          f"sampling, L = {cfg.length}; one prompt per document"
                          + (f"; {st.failed} generation(s) failed" if st.failed else ""))
    return run, MethodOutcome(row, docs, aud, rep)


def compare_augpe(plan: ComparePlan, *, ledger: SubLedger, progress: Progress, dpkps_run: Any) -> MethodOutcome:
    """AugPE+Ṽ (docs/DESIGN.md §6): Gaussian votes over the private documents, first prompts from Ṽ — shared with DP-KPS
    when it ran first (the same ε_voc release, counted once)."""
    from dpkps_core.baselines.augpe import AugPEConfig, prompt_budget, run_augpe
    from dpkps_core.ledger_store.units import unit_strings

    st = plan.settings
    t_voc = time.perf_counter()
    if dpkps_run is not None:
        pv = dpkps_run.private_vocabulary
        for ev in dpkps_run.ledger.events:
            if ev.step == "vocabulary":
                ledger.reuse(ev)  # the same release: counted once in the joint cost
        note_voc = "Ṽ shared with DP-KPS (the same ε_voc release; its build time counted here too)"
        voc_time = dpkps_run.timings.get("vocabulary", 0.0)
    else:
        pv = build_vocabulary(plan.train, eps_voc=st.eps_voc, vocabulary=plan.vocabulary, sampling=st.sampling,
                              context=ReleaseContext(noise=plan.noise, ledger=ledger),
                              progress=lambda f, m: progress(0.1 * f, m))
        voc_time = 0.0  # already inside this method's wall time
        note_voc = f"Ṽ built for AugPE+Ṽ ({time.perf_counter() - t_voc:.1f} s)"
    acfg = dataclasses.replace(st.augpe_config or AugPEConfig(), population=st.per_class, max_tokens=st.max_tokens,
                               doc_type=st.doc_type, temperature=st.temperature)
    # charge first (docs/DESIGN.md §2.0): run_augpe admits these units through this method's ledger (which delegates to
    # the corpus's ledger) and charges all T epochs before its first prompt
    units = unit_strings(plan.whole, by_person=plan.whole.persons is not None)
    res = run_augpe(plan.whole.texts, plan.whole.labels, vocabulary_terms=pv.terms, classes=plan.classes,
                    config=acfg, epsilon=st.eps_total - st.eps_voc, delta=st.delta, embedder=plan.embedder,
                    backend=plan.llm, context=ReleaseContext(noise=plan.noise, ledger=ledger),
                    progress=lambda f, m: progress(0.1 + 0.9 * f, m), cancel=plan.cancel, units=units,
                    neighbouring=plan.whole.privacy_unit)
    budget = prompt_budget(classes=len(plan.classes), population=st.per_class, epochs=acfg.epochs)
    row = MethodRow(
        "augpe", METHOD_LABELS["augpe"], ledger.total_epsilon, ledger.total_delta, "(ε, δ)-DP", len(res.documents),
        res.stats["llm_calls"], budget["prompts_per_document"], res.stats["prompt_tokens"],
        res.stats["completion_tokens"], 0.0,
        notes=f"ε_voc = {st.eps_voc:g} (Ṽ, pure DP) + ε_aug = {res.epsilon:.4g} ({acfg.epochs} Gaussian vote "
              f"rounds, σ = {res.sigma:.4g}); {budget['prompts']} prompts = {budget['prompts_per_document']}× "
              f"DP-KPS's one prompt per document; {note_voc}; {res.stats['distinct_documents']} distinct texts"
              f"{plan.unit_note}",
    )
    row.wall_seconds = voc_time  # the method's own run time is added by the caller
    return MethodOutcome(row, res.documents, res.audit,
                         res.privacy_report().with_context(ReleaseContext(noise=plan.noise, ledger=ledger)))


def compare_private_prediction(plan: ComparePlan, *, ledger: SubLedger, progress: Progress) -> MethodOutcome:
    """Private prediction ([PrivPred], Algorithm 1) on a local model's logits, hash buckets from public input or a
    DP count ([PrivPred] Assumption 1).

    Charge first (docs/DESIGN.md §2.0; :func:`dpkps_core.dp.release.release`), the whole method up front: after every
    public step (calibration, loading the model), the units are admitted once for the method's whole ε, and both
    events are charged — the count's, and the generation's (exact when the buckets are public, else a reservation
    of its ε that the calibrated run never exceeds) — before the count's noise and the first private prompt."""
    from dpkps_core.baselines.prediction_config import (PRIVATE_PROMPT_WARNING, PrivatePredictionConfig, calibrate,
                                                        prediction_event, public_messages, reservation_event)
    from dpkps_core.baselines.private_prediction import buckets_for, load_local_lm, run_private_prediction
    from dpkps_core.method.budget import admit
    from dpkps_core.dp.count import count_event
    from dpkps_core.dp.release import release

    st_ = plan.settings
    pcfg = dataclasses.replace(st_.private_prediction or PrivatePredictionConfig(**COMPARE_PP_DEFAULTS),
                               max_new_tokens=st_.max_tokens, doc_type=st_.doc_type)
    eps_size = 0.0 if st_.class_size_estimate is not None else size_epsilon(st_.eps_total)
    eps_pp = st_.eps_total - eps_size
    calibrate(pcfg, epsilon=eps_pp, delta=st_.delta)  # fail fast (e.g. SVT over budget) before loading the model
    if plan.local_lm is not None:
        model, tok, name = plan.local_lm[0], plan.local_lm[1], "local-model"
    else:
        from dpkps_core.llm.local import LocalTransformersBackend, OfflineBackend

        # a local model (offline SmolLM2 or a `local` model folder) gives logits; a remote one cannot
        local = next((b for b in (plan.llm, plan.backend) if isinstance(b, LocalTransformersBackend)), None)
        model, tok, name = load_local_lm(local or OfflineBackend(threads=st_.threads))
    per_class, n_classes = st_.per_class, len(plan.classes)
    unit = plan.whole.privacy_unit  # the neighbouring relation every event of this method states
    planned_docs = per_class * n_classes

    def fit_buckets(buckets: int, cfg: Any) -> tuple[Any, str]:
        """More examples per batch (and r in proportion) when there are fewer buckets than documents wanted."""
        if math.ceil(per_class / cfg.examples_per_batch) <= buckets:
            return cfg, ""
        more = math.ceil(per_class / buckets)
        note = (f"; {buckets} bucket(s) per class for {per_class} documents: {more} examples per batch "
                f"and r × {more / cfg.examples_per_batch:g}")
        return dataclasses.replace(cfg, examples_per_batch=more,
                                   private_tokens=math.ceil(cfg.private_tokens * more / cfg.examples_per_batch)), note

    # the events (public input only): the generation's with public buckets, else the count's and a reservation
    if st_.class_size_estimate is not None:
        buckets = buckets_for(float(st_.class_size_estimate), pcfg.batch_size)
        pcfg, note_b = fit_buckets(buckets, pcfg)
        pcfg = calibrate(pcfg, epsilon=eps_pp, delta=st_.delta)
        events = (prediction_event(pcfg, delta=st_.delta, num_buckets=buckets, documents=planned_docs,
                                   batches=math.ceil(per_class / pcfg.examples_per_batch) * n_classes,
                                   neighbouring=unit),)
        note_n = "hash buckets from the public class-size estimate" + note_b
    else:
        counted = f"{'persons' if plan.whole.persons is not None else 'documents'} in the training part"
        events = (count_event(epsilon=eps_size, what=counted, neighbouring=unit),
                  reservation_event(pcfg, epsilon=eps_pp, delta=st_.delta, documents=planned_docs, neighbouring=unit))
        buckets, note_n = 0, ""

    def generate(_: Any, train: Corpus) -> tuple[Any, int, Any, str]:
        """The noise: the DP count's (when it sizes the buckets), then the generation on the admitted documents."""
        cfg, n_buckets, released, note = pcfg, buckets, None, note_n
        drawing = ReleaseContext(noise=plan.noise)  # no ledger: release() below charged every event first
        if st_.class_size_estimate is None:
            released = release_count(len(train), epsilon=eps_size, context=drawing)
            n_buckets = buckets_for(released.clamped / n_classes, pcfg.batch_size)
            cfg, note_b = fit_buckets(n_buckets, pcfg)
            note = (f"hash buckets from a DP count of the training part (ε = {eps_size:g}, Laplace "
                    f"{released.noise_scale:g}: {released.value:g}); give a public class-size estimate to spend all "
                    f"of ε on text" + note_b)
        res = run_private_prediction(train.texts, train.labels, model=model, tokenizer=tok, config=cfg,
                                     epsilon=eps_pp, delta=st_.delta, per_class=per_class, num_buckets=n_buckets,
                                     classes=plan.classes, context=drawing, model_name=name, progress=progress,
                                     cancel=plan.cancel, neighbouring=unit, charged_event=events[-1])
        return res, n_buckets, released, note

    # charge first (dpkps_core.dp.release's order): the units admitted once for the method's whole ε, the admitted
    # documents only (how many were left out is private, local: it goes nowhere), every event charged, then noise
    res, buckets, released, note_n = release(
        lambda: admit(plan.whole, ledger, eps_size + eps_pp, by_person=plan.whole.persons is not None,
                      what="private prediction"), statistic=lambda adm: adm.corpus, event=events, draw=generate).value
    docs, st, c = res.documents, res.stats, res.config
    # the audit log holds the public prompt only: no private prompt and no private count (how many prompts)
    aud = [{"purpose": "public prompt p_public (the private prompts hold private documents and are never logged)",
            "messages": public_messages(c)}]
    row = MethodRow(
        "private-prediction", METHOD_LABELS["private-prediction"], res.epsilon + eps_size, res.delta, "(ε, δ)-DP",
        len(docs), st["prompts"], st["prompts"] / max(len(docs), 1), st["prompt_tokens"], st["generated_tokens"], 0.0,
        notes=f"local model only — {PRIVATE_PROMPT_WARNING} s = {c.batch_size}, r = {c.private_tokens}, c = "
              f"{c.clip:g} (calibrated), τ = {c.temperature:g}, SVT "
              f"{'θ = ' + str(c.svt_threshold) if c.svt_enabled else 'off'}; ρ = {res.rho:.4g}-zCDP; {st['batches']} "
              f"batches ({st['private_tokens']} private / {st['public_tokens']} public tokens; LLM calls and prompt "
              f"tokens count the private prompts: private, local); {note_n}{plan.unit_note}",
    )
    report = res.privacy_report().with_context(ReleaseContext(noise=plan.noise, ledger=ledger))
    report = report.with_details(parameters={**report.parameters, "num_buckets": buckets})
    if released is not None:  # the DP count (a release; its event was charged before its noise was drawn)
        report = report.with_details(dp_training_count={"noisy_count": round(released.value, 2),
                                                        "epsilon": released.epsilon,
                                                        "noise_scale": released.noise_scale})
    return MethodOutcome(row, docs, aud, report, (PRIVATE_PROMPT_WARNING,))
