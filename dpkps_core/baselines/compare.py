"""Side-by-side comparison of DP-KPS, private prediction and AugPE+Ṽ at equal ε on the same split (DESIGN §3–§5).

:func:`compare_methods` splits the corpus once (stratified, seeded), runs each selected method on the training
part only at the same total privacy level, writes each method's synthetic documents, and evaluates all of them
with the same classifier (logistic regression on sentence embeddings, tested on the held-out real part), next to
the same classifier trained on the same number of real documents. The table reports downstream accuracy, LLM
calls, tokens and wall time.

Privacy levels (all "add/remove one document"):

* **DP-KPS**: pure ε-DP, ε_total = ε_voc + ε_kde (δ = 0).
* **Private prediction** (paper 004): (ε_total, δ)-DP by Theorem 1; the clip c is calibrated so the reported ε
  never exceeds ε_total. Runs on the local offline model (it needs logits) whatever ``backend`` is, and puts
  PRIVATE text into that local model's prompts.
* **AugPE+Ṽ** (paper 001 §3): (ε_voc + ε_aug, δ)-DP — Ṽ (pure ε_voc) plus T Gaussian vote histograms calibrated
  to (ε_total − ε_voc, δ). The same Ṽ release as DP-KPS's is reused (built once).

Results hold accuracies measured on real data: they are PRIVATE (local to the data owner, not for release).
Document text is never logged.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.corpus import Corpus
from dpkps_core.dp.count import release_count
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.embeddings import embed_texts
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.classifiers import embedding_accuracy, real_baseline_accuracy
from dpkps_core.evaluation.metrics import chance_accuracy
from dpkps_core.progress import Progress
from dpkps_core.baselines.compare_result import (  # noqa: F401 - the result types live there
    CSV_COLUMNS,
    GUARANTEE_NOTE,
    JOINT_NOTE,
    PRIVATE_NOTE,
    CompareResult,
    MethodRow,
)


# The ways to make a synthetic corpus compared side by side (not the sequence samplers of
# :data:`dpkps_core.sampling.SAMPLING_METHODS`).
GENERATION_METHODS = ("dpkps", "private-prediction", "augpe")
METHOD_LABELS = {"dpkps": "DP-KPS", "private-prediction": "Private prediction", "augpe": "AugPE+Ṽ"}
COMPARE_PP_DEFAULTS = {"batch_size": 16, "max_prompt_tokens": 96, "public_top_k": 20}
"""Private prediction in a comparison: small batches and short prompts keep a CPU run to minutes (compute per
synthetic document grows with s × prompt length; the paper's s = 250 needs an accelerator). At small s the
privacy budget allows an effective logit range of only c/τ (≈ 4 nats at s = 16, ε = 10), so the candidate set is
the public prediction's top 20 (a public set; paper 004 §E.1 restricts to the top 1024 for the same reason)."""
# ------------------------------------------------------------------------------------------------ evaluation

def _accuracy(syn_texts: list[str], syn_labels: list[str], test_emb: np.ndarray, test_labels: Sequence[str], *,
              embedder: Any, seeds: Sequence[int]) -> tuple[float, float, float, str]:
    """Mean ± sd accuracy and macro-F1 of the evaluation's classifier trained on the synthetic documents."""
    keep = [(t, y) for t, y in zip(syn_texts, syn_labels) if t and t.strip()]
    if len({y for _, y in keep}) < 2:
        return math.nan, math.nan, math.nan, "fewer than two classes of non-empty synthetic documents: not evaluated"
    emb = embed_texts([t for t, _ in keep], embedder)
    m = embedding_accuracy(emb, [y for _, y in keep], test_emb, list(test_labels), seeds=list(seeds), name="accuracy")
    return m.accuracy_mean, m.accuracy_sd, m.macro_f1_mean, ""


def _real_baseline(train: Corpus, test_emb: np.ndarray, test_labels: Sequence[str], *, per_class: int, embedder: Any,
                   seeds: Sequence[int]) -> tuple[float, float, float]:
    m = real_baseline_accuracy(train.texts, train.labels, test_emb, list(test_labels),
                               per_class={c: per_class for c in train.classes}, embedder=embedder, seeds=list(seeds))
    return m.accuracy_mean, m.accuracy_sd, m.macro_f1_mean


# ------------------------------------------------------------------------------------------------ methods

def _resolve_backend(backend: Any, threads: int) -> Any:
    from dpkps_core.llm.backends import LLMBackend, make_backend

    if isinstance(backend, LLMBackend):
        return backend
    if backend in (None, "offline"):
        return make_backend("offline", threads=threads)
    if isinstance(backend, str):
        return make_backend(backend)
    raise ParameterError("backend must be 'offline', 'openai' or an LLMBackend.")




def joint_cost(methods: Sequence[str], *, eps_total: float, eps_voc: float, delta: float) -> tuple[float, float]:
    """Planned (ε, δ) of running ``methods`` in this order on the same data: every method spends ε_total; AugPE+Ṽ
    after DP-KPS reuses its Ṽ (ε_voc not spent again); the (ε, δ) methods each add δ."""
    eps, dlt = 0.0, 0.0
    for k, m in enumerate(methods):
        eps += eps_total - (eps_voc if m == "augpe" and "dpkps" in methods[:k] else 0.0)
        dlt += 0.0 if m == "dpkps" else float(delta)
    return eps, dlt


def _joint_spent(ledgers: Sequence[PrivacyLedger], *, planned: tuple[float, float]) -> dict[str, Any]:
    """What the methods spent together: every distinct release once (a shared Ṽ is the same event object)."""
    seen: dict[int, Any] = {}
    for led in ledgers:
        for ev in led.events:
            seen.setdefault(id(ev), ev)
    return {"epsilon": float(sum(e.epsilon for e in seen.values())),
            "delta": float(sum(e.delta for e in seen.values())), "releases": len(seen),
            "planned_epsilon": planned[0], "planned_delta": planned[1], "note": JOINT_NOTE}


def size_epsilon(eps_total: float) -> float:
    """ε spent on the DP training-part count that sizes private prediction's hash buckets when no public
    class-size estimate is given: 5 % of the method's ε, at most 0.1 (Laplace(10) on n is ample for ⌊n/s⌋)."""
    return min(0.1, 0.05 * float(eps_total))


@dataclasses.dataclass(frozen=True)
class CompareSettings:
    """The public settings of one comparison (validated on construction; ``dataclasses.replace`` for variants).

    Attributes:
        eps_total: the total ε every method spends.
        methods: any of :data:`GENERATION_METHODS` (duplicates dropped, order kept).
        delta: δ of the (ε, δ) methods (DP-KPS uses none).
        per_class: synthetic documents per class, for every method.
        eps_voc: ε of the private vocabulary Ṽ shared by DP-KPS (ε_kde = ε_total − ε_voc) and AugPE+Ṽ
            (ε_aug = ε_total − ε_voc); None → ε_total / 2.
        max_tokens: most tokens per synthetic document (all methods).
        doc_type: the public document type ("a news article").
        temperature: LLM temperature of DP-KPS and AugPE+Ṽ generations.
        sampling: overrides of :class:`~dpkps_core.config.SamplingConfig` for DP-KPS (length, method, …).
        private_prediction: a :class:`~dpkps_core.baselines.private_prediction.PrivatePredictionConfig` (c is
            calibrated); None → the comparison's defaults.
        augpe_config: an :class:`~dpkps_core.baselines.augpe.AugPEConfig` (population = ``per_class``).
        class_size_estimate: a PUBLIC documents-per-class figure that sets private prediction's hash buckets;
            None → a DP count of the training part, charged to private prediction's ε.
        seeds: classifier seeds of the evaluation.
        seed: REPRODUCIBLE DEMO ONLY: seeds all DP noise (default OS entropy).
        test_fraction, split_seed: the held-out split (the same for every method).
        real_baseline: add the row "real documents (same count)".
        threads: CPU threads of the offline model.
    """

    eps_total: float
    methods: tuple[str, ...] = GENERATION_METHODS
    delta: float = 1e-6
    per_class: int = 2
    eps_voc: float | None = None
    max_tokens: int = 48
    doc_type: str = "a document"
    temperature: float = 0.7
    sampling: Mapping[str, Any] | None = None
    private_prediction: Any = None
    augpe_config: Any = None
    class_size_estimate: float | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    seed: int | None = None
    test_fraction: float = 0.2
    split_seed: int = 0
    real_baseline: bool = True
    threads: int = 1

    def __post_init__(self) -> None:
        methods = tuple(dict.fromkeys(self.methods))
        unknown = [m for m in methods if m not in GENERATION_METHODS]
        if unknown or not methods:
            raise ParameterError(f"Unknown method(s) {unknown}; choose from {', '.join(GENERATION_METHODS)}.")
        eps_total = check_epsilon(self.eps_total, "ε (total)")
        if not 0 < float(self.delta) < 1:
            raise ParameterError(f"δ must be in (0, 1), e.g. 1e-6; got {self.delta!r}.")
        eps_voc = eps_total / 2 if self.eps_voc is None else check_epsilon(self.eps_voc, "ε_voc")
        if self.needs_vocabulary(methods) and eps_voc >= eps_total:
            raise ParameterError(f"ε_voc = {eps_voc:g} leaves nothing of ε = {eps_total:g} for the densities / "
                                 "votes; lower ε_voc.")
        for name, value in (("methods", methods), ("eps_total", eps_total), ("eps_voc", eps_voc),
                            ("delta", float(self.delta)),
                            ("per_class", check_positive_int(self.per_class, "synthetic documents per class",
                                                             maximum=100_000)),
                            ("max_tokens", check_positive_int(self.max_tokens, "maximum tokens", maximum=8192)),
                            ("seeds", tuple(int(x) for x in self.seeds) or (0,))):
            object.__setattr__(self, name, value)

    @staticmethod
    def needs_vocabulary(methods: Sequence[str]) -> bool:
        """Whether DP-KPS or AugPE+Ṽ runs (both use the private vocabulary Ṽ and an LLM backend)."""
        return "dpkps" in methods or "augpe" in methods

    def joint_cost(self) -> tuple[float, float]:
        """(ε, δ) of all the selected methods on the same data (:func:`joint_cost`)."""
        return joint_cost(self.methods, eps_total=self.eps_total, eps_voc=float(self.eps_voc), delta=self.delta)


def compare_methods(
    corpus: Corpus, settings: CompareSettings, *, backend: Any = "offline", embedder: Any = None,
    vocabulary: Any = None, local_lm: tuple[Any, Any] | None = None, out_dir: str | os.PathLike[str] | None = None,
    progress: Progress | None = None, cancel: threading.Event | None = None, ledger: PrivacyLedger | None = None,
) -> CompareResult:
    """Run the selected methods at the same privacy level on the same split and evaluate them alike.

    Args:
        corpus: the labelled PRIVATE corpus (with its declared public classes).
        settings: the public settings (:class:`CompareSettings`).
        backend: ``"offline"`` (default), ``"openai"`` or an LLMBackend, for DP-KPS and AugPE+Ṽ. Private
            prediction runs on a local model: this backend when it is one, else the offline model.
        embedder: public sentence embedder (default all-MiniLM-L6-v2): votes of AugPE and the evaluation.
        vocabulary: public vocabulary V (default: the one ``settings.sampling`` names, else GloVe).
        local_lm: ``(model, tokenizer)`` to use for private prediction instead of a backend's model (tests).
        out_dir: where to write ``compare.csv``, ``compare.md`` and per-method files (optional).
        progress: ``progress(fraction, message)``.
        cancel: stop between steps when set.
        ledger: the corpus's ledger (e.g. :class:`~dpkps_core.ledger_store.PersistentLedger`): the joint cost of
            all the methods (their ε and δ summed; a Ṽ shared by DP-KPS and AugPE+Ṽ counted once) must fit its
            cap before anything runs, and every release is charged to it as it happens.
    """
    from dpkps_core.embeddings import DEFAULT_MODEL, get_embedder
    from dpkps_core.split import split_documents

    if not isinstance(settings, CompareSettings):
        raise ParameterError("compare_methods needs a CompareSettings object with the comparison's settings.")
    st = settings
    methods, eps_total, eps_voc, delta, per_class = st.methods, st.eps_total, float(st.eps_voc), st.delta, st.per_class
    max_tokens, doc_type, seeds = st.max_tokens, st.doc_type, list(st.seeds)
    test_fraction, split_seed, threads = st.test_fraction, st.split_seed, st.threads
    needs_voc = st.needs_vocabulary(methods)
    if len(corpus.classes) < 2:
        raise ParameterError("Comparing methods needs a labelled corpus with at least two classes.")
    report = progress or (lambda f, m: None)
    corpus_ledger = ledger
    joint_eps, joint_delta = st.joint_cost()
    if corpus_ledger is not None:
        corpus_ledger.require(joint_eps, f"this comparison of {len(methods)} method(s) on the same data (joint cost)")
    method_ledgers: list[SubLedger] = []

    def method_ledger() -> SubLedger:
        """One method's ledger: capped at ε_total, every charge also charged to the corpus's ledger."""
        led = SubLedger(corpus_ledger, cap=eps_total + 1e-9)
        method_ledgers.append(led)
        return led

    share = 0.9 / len(methods)
    noise = NoiseSource(st.seed)
    warnings: list[str] = []
    if noise.seed is not None:
        warnings.append("Seeded noise: reproducible demo, NOT FOR RELEASE.")

    by_person = corpus.persons is not None  # a corpus loaded with a person column: the unit is the person
    split = split_documents(corpus, test_fraction=test_fraction, seed=split_seed, by_person=by_person)
    # only documents of the declared public classes enter a DP step or the evaluation (issue 11 §2)
    train, test = corpus.subset(split.train).declared_only(), corpus.subset(split.test).declared_only()
    # private prediction and AugPE+Ṽ need whole documents: one per person keeps their per-document guarantee a
    # per-person one (issue 15); DP-KPS bounds each person's total contribution instead
    whole = train.capped_per_person(1)
    unit_note = (f"; unit: {corpus.privacy_unit} — each person capped to 1 document for this method"
                 if by_person else "")
    if len(test) == 0:
        raise ParameterError("The comparison needs held-out test documents; set a test fraction above 0.")
    classes = tuple(corpus.classes)
    embedder = embedder or get_embedder(DEFAULT_MODEL)
    llm = _resolve_backend(backend, threads) if needs_voc else None
    plan = _Plan(settings=st, corpus=corpus, train=train, whole=whole, classes=classes, embedder=embedder,
                 vocabulary=vocabulary, noise=noise, llm=llm, backend=backend, local_lm=local_lm, unit_note=unit_note,
                 cancel=cancel)
    rows: list[MethodRow] = []
    documents: dict[str, list[dict[str, Any]]] = {}
    privacy: dict[str, dict[str, Any]] = {}
    audit: dict[str, list[dict[str, Any]]] = {}
    dpkps_run = None
    for k, method in enumerate(methods):
        if cancel is not None and cancel.is_set():
            break
        base = 0.02 + k * share
        sub = lambda f, m, b=base: report(b + share * f, m)  # noqa: E731
        t0 = time.perf_counter()
        if method == "dpkps":
            dpkps_run, out = _compare_dpkps(plan, ledger=method_ledger(), progress=sub)
        elif method == "augpe":
            out = _compare_augpe(plan, ledger=method_ledger(), progress=sub, dpkps_run=dpkps_run)
        else:
            out = _compare_private_prediction(plan, ledger=method_ledger(), progress=sub)
        out.row.wall_seconds += time.perf_counter() - t0
        rows.append(out.row)
        documents[method], audit[method], privacy[method] = out.documents, out.audit, out.privacy
        warnings.extend(out.warnings)

    # ---- evaluation (local, private)
    report(0.92, "evaluating: embedding the held-out test documents (in memory only)")
    test_emb = embed_texts(test.texts, embedder)
    for row in rows:
        docs = documents[row.method]
        acc, sd, f1, note = _accuracy([d["text"] for d in docs], [d["label"] for d in docs], test_emb, test.labels,
                                      embedder=embedder, seeds=seeds)
        row.accuracy, row.accuracy_sd, row.macro_f1 = acc, sd, f1
        if note:
            row.notes = f"{row.notes}; {note}" if row.notes else note
    if st.real_baseline:
        report(0.97, "real-document baseline")
        acc, sd, f1 = _real_baseline(train, test_emb, test.labels, per_class=per_class, embedder=embedder, seeds=seeds)
        rows.append(MethodRow("real", "Real documents (same count)", math.nan, math.nan, "none (not private)",
                              per_class * len(classes), 0, 0, 0, 0, 0.0, acc, sd, f1,
                              "the same classifier on the same number of REAL training documents per class"))
    info = {
        "corpus": corpus.name, "eps_total": eps_total, "delta": float(delta), "eps_voc": eps_voc if needs_voc else None,
        "methods": list(methods), "per_class": per_class, "max_tokens": max_tokens, "doc_type": doc_type,
        "classes": list(classes), "n_train": len(train), "n_test": len(test), "test_fraction": test_fraction,
        "split_seed": split_seed, "seeds": seeds, "chance_accuracy": chance_accuracy(test.labels),
        "embedding_model": getattr(embedder, "name", ""), "backend": llm.describe() if llm is not None else None,
        "seed_policy": noise.policy, "guarantees": GUARANTEE_NOTE,
        "joint": _joint_spent(method_ledgers, planned=(joint_eps, joint_delta)),
    }
    report(1.0, "comparison done")
    result = CompareResult(rows, info, documents, privacy, audit, list(dict.fromkeys(warnings)))
    if out_dir is not None:
        result.write(out_dir)
    return result


def _sampling_config(*, eps_voc: float, eps_kde: float, per_class: int, sampling: Mapping[str, Any] | None,
                     seed: int | None, test_fraction: float, split_seed: int, corpus_name: str,
                     person_column: str | None = None) -> Any:
    from dpkps_core.pipeline import SamplingConfig

    base = {"corpus": corpus_name, "eps_voc": eps_voc, "eps_kde": eps_kde, "per_class": per_class, "seed": seed,
            "test_fraction": test_fraction, "split_seed": split_seed, "client_fraction": 0.0,
            "person_column": person_column}
    over = dict(sampling or {})
    for k in ("eps_voc", "eps_kde", "per_class", "test_fraction", "split_seed"):
        over.pop(k, None)  # fixed by the comparison
    return SamplingConfig.from_dict({**SamplingConfig().to_dict(), **base, **over}).validate()


def _vocabulary_for(config: Any, vocabulary: Any) -> Any:
    if vocabulary is not None:
        return vocabulary
    from dpkps_core.vocabulary import load_vocabulary

    return load_vocabulary(config.vocabulary, remove_stopwords=config.remove_stopwords,
                           junk_filter=config.junk_filter, max_terms=config.effective_vocab_max_terms)


def _build_vocabulary(train: Corpus, *, eps_voc: float, vocabulary: Any, sampling: Mapping[str, Any] | None,
                      noise: NoiseSource, ledger: PrivacyLedger, progress: Progress) -> Any:
    from dpkps_core.pipeline import build_private_vocabulary

    from dpkps_core.budget import admit

    cfg = _sampling_config(eps_voc=eps_voc, eps_kde=1.0, per_class=1, sampling=sampling, seed=None, test_fraction=0.2,
                           split_seed=0, corpus_name=train.name)
    vocabulary = _vocabulary_for(cfg, vocabulary)
    # charge first (DESIGN §2.0): the units are admitted (and charged) before their counts are read
    train = admit(train, ledger, eps_voc, by_person=train.persons is not None, what="the private vocabulary step").corpus
    return build_private_vocabulary(train.texts, _vocabulary_for(cfg, vocabulary), eps_voc=eps_voc,
                                    terms_per_doc=cfg.terms_per_doc, vocab_size=cfg.vocab_size, noise=noise,
                                    ledger=ledger, selection_rule=cfg.selection_rule, progress=progress,
                                    groups=train.persons, neighbouring=train.privacy_unit)


def _run_dpkps(*, corpus: Corpus, eps_voc: float, eps_total: float, per_class: int, max_tokens: int,
               doc_type: str, backend: Any, embedder: Any, vocabulary: Any, sampling: Mapping[str, Any] | None,
               noise: NoiseSource, temperature: float, test_fraction: float, split_seed: int, ledger: PrivacyLedger,
               progress: Progress, cancel: threading.Event | None) -> tuple[Any, MethodRow, list[dict[str, Any]], list[dict[str, Any]]]:
    """DP-KPS: run_sampling on the (same) split, then one prompt per sequence through the shared generator."""
    from dpkps_core.baselines.augpe import generate_texts
    from dpkps_core.llm.prompts import PromptConfig, render_prompt
    from dpkps_core.pipeline import run_sampling
    from dpkps_core.split import split_documents

    cfg = _sampling_config(eps_voc=eps_voc, eps_kde=eps_total - eps_voc, per_class=per_class, sampling=sampling,
                           seed=noise.seed, test_fraction=test_fraction, split_seed=split_seed,
                           corpus_name=corpus.name, person_column=corpus.person_column if corpus.persons else None)
    run = run_sampling(corpus, cfg, vocabulary=_vocabulary_for(cfg, vocabulary), embedder=embedder,
                       noise=noise, ledger=ledger,
                       progress=lambda f, m: progress(0.4 * f, m))
    if run.split != split_documents(corpus, test_fraction=test_fraction, seed=split_seed,
                                    by_person=corpus.persons is not None):  # pragma: no cover
        raise ParameterError("DP-KPS used another split than the comparison; this is a bug.")
    prompt_cfg = PromptConfig(doc_type=doc_type)
    seqs = run.outcome.sequences
    msgs = [render_prompt(s.to_dict(), prompt_cfg) for s in seqs]
    aud: list[dict[str, Any]] = []
    texts, st = generate_texts(msgs, backend=backend, max_tokens=max_tokens, temperature=temperature, audit=aud,
                               purpose="DP-KPS keyphrase prompt", cancel=cancel,
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
    return run, row, docs, aud


# ------------------------------------------------------------------------------------------------ one method each

@dataclasses.dataclass(frozen=True)
class _Plan:
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
class _MethodOutcome:
    row: MethodRow
    documents: list[dict[str, Any]]
    audit: list[dict[str, Any]]
    privacy: dict[str, Any]
    warnings: tuple[str, ...] = ()


def _privacy_with_ledger(report: Mapping[str, Any], ledger: PrivacyLedger, noise: NoiseSource) -> dict[str, Any]:
    """A method's privacy report with what its ledger actually recorded."""
    led = ledger.to_dict()
    return {**report, "epsilon_total": led["epsilon_total"], "delta_total": led["delta_total"],
            "epsilon_by_step": led["epsilon_by_step"], "events": led["events"], "seed_policy": noise.policy}


def _compare_dpkps(plan: _Plan, *, ledger: PrivacyLedger, progress: Progress) -> tuple[Any, _MethodOutcome]:
    """DP-KPS (paper 001 §3): sampling on the comparison's split, one prompt per sequence."""
    run, row, docs, aud = _run_dpkps(corpus=plan.corpus, eps_voc=plan.settings.eps_voc, eps_total=plan.settings.eps_total,
                                     per_class=plan.settings.per_class, max_tokens=plan.settings.max_tokens, doc_type=plan.settings.doc_type,
                                     backend=plan.llm, embedder=plan.embedder, vocabulary=plan.vocabulary,
                                     sampling=plan.settings.sampling, noise=plan.noise, temperature=plan.settings.temperature,
                                     test_fraction=plan.settings.test_fraction, split_seed=plan.settings.split_seed, ledger=ledger,
                                     progress=progress, cancel=plan.cancel)
    return run, _MethodOutcome(row, docs, aud, run.privacy_report())


def _compare_augpe(plan: _Plan, *, ledger: SubLedger, progress: Progress, dpkps_run: Any) -> _MethodOutcome:
    """AugPE+Ṽ (DESIGN §6): Gaussian votes over the private documents, first prompts from Ṽ — shared with DP-KPS
    when it ran first (the same ε_voc release, counted once)."""
    from dpkps_core.baselines.augpe import AugPEConfig, prompt_budget, run_augpe
    from dpkps_core.budget import unit_strings

    t_voc = time.perf_counter()
    if dpkps_run is not None:
        pv = dpkps_run.private_vocabulary
        for ev in dpkps_run.ledger.events:
            if ev.step == "vocabulary":
                ledger.reuse(ev)  # the same release: counted once in the joint cost
        note_voc = "Ṽ shared with DP-KPS (the same ε_voc release; its build time counted here too)"
        voc_time = dpkps_run.timings.get("vocabulary", 0.0)
    else:
        pv = _build_vocabulary(plan.train, eps_voc=plan.settings.eps_voc, vocabulary=plan.vocabulary, sampling=plan.settings.sampling,
                               noise=plan.noise, ledger=ledger, progress=lambda f, m: progress(0.1 * f, m))
        voc_time = 0.0  # already inside this method's wall time
        note_voc = f"Ṽ built for AugPE+Ṽ ({time.perf_counter() - t_voc:.1f} s)"
    acfg = dataclasses.replace(plan.settings.augpe_config or AugPEConfig(), population=plan.settings.per_class,
                               max_tokens=plan.settings.max_tokens, doc_type=plan.settings.doc_type, temperature=plan.settings.temperature)
    # charge first (DESIGN §2.0): run_augpe admits these units through this method's ledger (which delegates to
    # the corpus's ledger) and charges all T epochs before its first prompt
    units = unit_strings(plan.whole, by_person=plan.whole.persons is not None)
    res = run_augpe(plan.whole.texts, plan.whole.labels, vocabulary_terms=pv.terms, classes=plan.classes,
                    config=acfg, epsilon=plan.settings.eps_total - plan.settings.eps_voc, delta=plan.settings.delta, embedder=plan.embedder,
                    backend=plan.llm, noise=plan.noise, ledger=ledger,
                    progress=lambda f, m: progress(0.1 + 0.9 * f, m), cancel=plan.cancel, units=units,
                    neighbouring=plan.whole.privacy_unit)
    budget = prompt_budget(classes=len(plan.classes), population=plan.settings.per_class, epochs=acfg.epochs)
    row = MethodRow(
        "augpe", METHOD_LABELS["augpe"], ledger.total_epsilon, ledger.total_delta, "(ε, δ)-DP", len(res.documents),
        res.stats["llm_calls"], budget["prompts_per_document"], res.stats["prompt_tokens"],
        res.stats["completion_tokens"], 0.0,
        notes=f"ε_voc = {plan.settings.eps_voc:g} (Ṽ, pure DP) + ε_aug = {res.epsilon:.4g} ({acfg.epochs} Gaussian vote "
              f"rounds, σ = {res.sigma:.4g}); {budget['prompts']} prompts = {budget['prompts_per_document']}× "
              f"DP-KPS's one prompt per document; {note_voc}; {res.stats['distinct_documents']} distinct texts"
              f"{plan.unit_note}",
    )
    row.wall_seconds = voc_time  # the method's own run time is added by the caller
    return _MethodOutcome(row, res.documents, res.audit, _privacy_with_ledger(res.privacy_report(), ledger, plan.noise))


def _compare_private_prediction(plan: _Plan, *, ledger: SubLedger, progress: Progress) -> _MethodOutcome:
    """Private prediction (paper 004, Algorithm 1) on a local model's logits, hash buckets from public input or a
    DP count (paper 004 Assumption 1).

    Charge first (DESIGN §2.0), the whole method up front: after every public step (calibration, loading the
    model), the units are admitted once for the method's whole ε (the DP count's and the generation's), and both
    events are charged — the count's, and the generation's (exact when the buckets are public, else a
    reservation of its ε that the calibrated run never exceeds) — before the count's noise is drawn and before
    the first private prompt reaches the model."""
    from dpkps_core.baselines.private_prediction import (PRIVATE_PROMPT_WARNING, PrivatePredictionConfig, buckets_for,
                                                         calibrate, load_local_lm, prediction_event, public_messages,
                                                         reservation_event, run_private_prediction)
    from dpkps_core.budget import admit
    from dpkps_core.dp.count import count_event

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

    # ---- charge first: admit the units for the whole method's ε, then charge every event of the method
    adm = admit(plan.whole, ledger, eps_size + eps_pp, by_person=plan.whole.persons is not None,
                what="private prediction")
    train = adm.corpus  # the admitted documents only (adm.left_out is private, local: it goes nowhere)
    if st_.class_size_estimate is not None:
        buckets = buckets_for(float(st_.class_size_estimate), pcfg.batch_size)
        pcfg, note_b = fit_buckets(buckets, pcfg)
        pcfg = calibrate(pcfg, epsilon=eps_pp, delta=st_.delta)
        need = math.ceil(per_class / pcfg.examples_per_batch)
        charged = ledger.charge(prediction_event(pcfg, delta=st_.delta, num_buckets=buckets,
                                                 batches=need * n_classes, documents=planned_docs,
                                                 neighbouring=unit))
        note_n = "hash buckets from the public class-size estimate" + note_b
        released = None
    else:
        counted = "persons in the training part" if train.persons is not None else "documents in the training part"
        ledger.charge(count_event(epsilon=eps_size, what=counted, neighbouring=unit))
        charged = ledger.charge(reservation_event(pcfg, epsilon=eps_pp, delta=st_.delta, documents=planned_docs,
                                                  neighbouring=unit))
        released = release_count(len(train), epsilon=eps_size, noise=plan.noise)  # event charged above
        buckets = buckets_for(released.clamped / n_classes, pcfg.batch_size)
        pcfg, note_b = fit_buckets(buckets, pcfg)
        note_n = (f"hash buckets from a DP count of the training part (ε = {eps_size:g}, Laplace "
                  f"{released.noise_scale:g}: {released.value:g}); give a public class-size estimate to spend all "
                  f"of ε on text" + note_b)
    res = run_private_prediction(train.texts, train.labels, model=model, tokenizer=tok, config=pcfg,
                                 epsilon=eps_pp, delta=st_.delta, per_class=per_class, num_buckets=buckets,
                                 classes=plan.classes, noise=plan.noise, model_name=name, progress=progress,
                                 cancel=plan.cancel, neighbouring=unit, charged_event=charged)
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
    report = _privacy_with_ledger(res.privacy_report(), ledger, plan.noise)
    report["parameters"] = {**report.get("parameters", {}), "num_buckets": buckets}
    if released is not None:  # the DP count (a release; its event was charged before its noise was drawn)
        report["dp_training_count"] = {"noisy_count": round(released.value, 2), "epsilon": released.epsilon,
                                       "noise_scale": released.noise_scale}
    return _MethodOutcome(row, docs, aud, report, (PRIVATE_PROMPT_WARNING,))
