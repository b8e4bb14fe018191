"""Side-by-side comparison of DP-KPS, private prediction and AugPE+Ṽ at equal ε on the same split (docs/DESIGN.md §3–§5).

:func:`compare_methods` splits the corpus once (stratified, seeded), runs each selected method on the training
part only at the same total privacy level, writes each method's synthetic documents, and evaluates all of them
with the same classifier (logistic regression on sentence embeddings, tested on the held-out real part), next to
the same classifier trained on the same number of real documents. The table reports downstream accuracy, LLM
calls, tokens and wall time.

Privacy levels (all "add/remove one document"):

* **DP-KPS**: pure ε-DP, ε_total = ε_voc + ε_kde (δ = 0).
* **Private prediction** ([PrivPred]): (ε_total, δ)-DP by Theorem 1; the clip c is calibrated so the reported ε
  never exceeds ε_total. Runs on the local offline model (it needs logits) whatever ``backend`` is, and puts
  PRIVATE text into that local model's prompts.
* **AugPE+Ṽ** ([DP-KPS] §3): (ε_voc + ε_aug, δ)-DP — Ṽ (pure ε_voc) plus T Gaussian vote histograms calibrated
  to (ε_total − ε_voc, δ). The same Ṽ release as DP-KPS's is reused (built once).

Results hold accuracies measured on real data: they are PRIVATE (local to the data owner, not for release).
Document text is never logged.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from dpkps_core.baselines.compare_result import GUARANTEE_NOTE, JOINT_NOTE, CompareResult, MethodRow
from dpkps_core.baselines.compare_settings import CompareSettings
from dpkps_core.baselines.compare_steps import (
    ComparePlan,
    MethodOutcome,
    compare_augpe,
    compare_dpkps,
    compare_private_prediction,
    resolve_backend,
)
from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import embed_texts
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.classifiers import embedding_accuracy, real_baseline_accuracy
from dpkps_core.evaluation.metrics import MetricSummary, chance_accuracy
from dpkps_core.progress import Progress


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

    if not isinstance(settings, CompareSettings):
        raise ParameterError("compare_methods needs a CompareSettings object with the comparison's settings.")
    st = settings
    if len(corpus.classes) < 2:
        raise ParameterError("Comparing methods needs a labelled corpus with at least two classes.")
    report = progress or (lambda f, m: None)
    joint = st.joint_cost()
    if ledger is not None:
        ledger.require(joint[0], f"this comparison of {len(st.methods)} method(s) on the same data (joint cost)")
    noise = NoiseSource(st.seed)
    warnings: list[str] = []
    if noise.seed is not None:
        warnings.append("Seeded noise: reproducible demo, NOT FOR RELEASE.")
    train, test, whole, unit_note = _split(corpus, st)
    embedder = embedder or get_embedder(DEFAULT_MODEL)
    llm = resolve_backend(backend, st.threads) if st.needs_vocabulary(st.methods) else None
    plan = ComparePlan(settings=st, corpus=corpus, train=train, whole=whole, classes=tuple(corpus.classes),
                       embedder=embedder, vocabulary=vocabulary, noise=noise, llm=llm, backend=backend,
                       local_lm=local_lm, unit_note=unit_note, cancel=cancel)
    method_ledgers: list[SubLedger] = []
    outcomes = _run_methods(plan, corpus_ledger=ledger, method_ledgers=method_ledgers, report=report)
    rows = [out.row for out in outcomes.values()]
    documents = {m: out.documents for m, out in outcomes.items()}
    for out in outcomes.values():
        warnings.extend(out.warnings)
    _evaluate(rows, documents, plan, test, report=report)
    info = {
        "corpus": corpus.name, "eps_total": st.eps_total, "delta": float(st.delta),
        "eps_voc": float(st.eps_voc) if st.needs_vocabulary(st.methods) else None, "methods": list(st.methods),
        "per_class": st.per_class, "max_tokens": st.max_tokens, "doc_type": st.doc_type,
        "classes": list(plan.classes), "n_train": len(train), "n_test": len(test), "test_fraction": st.test_fraction,
        "split_seed": st.split_seed, "seeds": list(st.seeds), "chance_accuracy": chance_accuracy(test.labels),
        "embedding_model": getattr(embedder, "name", ""), "backend": llm.describe() if llm is not None else None,
        "seed_policy": noise.policy, "guarantees": GUARANTEE_NOTE,
        "joint": _joint_spent(method_ledgers, planned=joint),
    }
    report(1.0, "comparison done")
    result = CompareResult(rows, info, documents, {m: out.privacy.to_dict() for m, out in outcomes.items()},
                           {m: out.audit for m, out in outcomes.items()}, list(dict.fromkeys(warnings)))
    if out_dir is not None:
        result.write(out_dir)
    return result


def _split(corpus: Corpus, st: CompareSettings) -> tuple[Corpus, Corpus, Corpus, str]:
    """The comparison's one split (the same for every method): the training part and the held-out test part of
    the declared classes, the training part with one document per person, and the note that says so."""
    from dpkps_core.method.split import split_documents

    by_person = corpus.persons is not None  # a corpus loaded with a person column: the unit is the person
    split = split_documents(corpus, test_fraction=st.test_fraction, seed=st.split_seed, by_person=by_person)
    # only documents of the declared public classes enter a DP step or the evaluation (docs/DESIGN.md §2)
    train, test = corpus.subset(split.train).declared_only(), corpus.subset(split.test).declared_only()
    # private prediction and AugPE+Ṽ need whole documents: one per person keeps their per-document guarantee a
    # per-person one (docs/DESIGN.md §2); DP-KPS bounds each person's total contribution instead
    whole = train.capped_per_person(1)
    unit_note = (f"; unit: {corpus.privacy_unit} — each person capped to 1 document for this method"
                 if by_person else "")
    if len(test) == 0:
        raise ParameterError("The comparison needs held-out test documents; set a test fraction above 0.")
    return train, test, whole, unit_note


def _run_methods(plan: ComparePlan, *, corpus_ledger: PrivacyLedger | None, method_ledgers: list[SubLedger],
                 report: Callable[[float, str], None]) -> dict[str, MethodOutcome]:
    """Each selected method in order, on its own ledger (capped at ε_total, every charge also charged to the
    corpus's ledger); AugPE+Ṽ after DP-KPS reuses its Ṽ. Stops between methods when cancelled."""
    methods, eps_total, cancel = plan.settings.methods, plan.settings.eps_total, plan.cancel

    def method_ledger() -> SubLedger:
        """One method's ledger: capped at ε_total, every charge also charged to the corpus's ledger."""
        led = SubLedger(corpus_ledger, cap=eps_total + 1e-9)
        method_ledgers.append(led)
        return led

    share = 0.9 / len(methods)
    outcomes: dict[str, MethodOutcome] = {}
    dpkps_run = None
    for k, method in enumerate(methods):
        if cancel is not None and cancel.is_set():
            break
        base = 0.02 + k * share
        sub = lambda f, m, b=base: report(b + share * f, m)  # noqa: E731
        t0 = time.perf_counter()
        if method == "dpkps":
            dpkps_run, out = compare_dpkps(plan, ledger=method_ledger(), progress=sub)
        elif method == "augpe":
            out = compare_augpe(plan, ledger=method_ledger(), progress=sub, dpkps_run=dpkps_run)
        else:
            out = compare_private_prediction(plan, ledger=method_ledger(), progress=sub)
        out.row.wall_seconds += time.perf_counter() - t0
        outcomes[method] = out
    return outcomes


def _evaluate(rows: list[MethodRow], documents: dict[str, list[dict[str, Any]]], plan: ComparePlan, test: Corpus, *,
              report: Callable[[float, str], None]) -> None:
    """The evaluation (local, private): every method's documents through the same classifier, tested on the held-out
    real part, and (optionally) the real-document baseline row appended."""
    st, embedder, seeds = plan.settings, plan.embedder, list(plan.settings.seeds)
    report(0.92, "evaluating: embedding the held-out test documents (in memory only)")
    test_emb = embed_texts(test.texts, embedder)
    for row in rows:
        docs = documents[row.method]
        summary, note = _accuracy([d["text"] for d in docs], [d["label"] for d in docs], test_emb, test.labels,
                                  embedder=embedder, seeds=seeds)
        if summary is not None:
            row.set_scores(summary)
        if note:
            row.notes = f"{row.notes}; {note}" if row.notes else note
    if st.real_baseline:
        report(0.97, "real-document baseline")
        real = MethodRow("real", "Real documents (same count)", math.nan, math.nan, "none (not private)",
                         st.per_class * len(plan.classes), 0, 0, 0, 0, 0.0,
                         notes="the same classifier on the same number of REAL training documents per class")
        real.set_scores(_real_baseline(plan.train, test_emb, test.labels, per_class=st.per_class, embedder=embedder,
                                       seeds=seeds))
        rows.append(real)


def _accuracy(syn_texts: list[str], syn_labels: list[str], test_emb: np.ndarray, test_labels: Sequence[str], *,
              embedder: Any, seeds: Sequence[int]) -> tuple[MetricSummary | None, str]:
    """The evaluation classifier's scores trained on the synthetic documents (mean ± sd over seeds, the interval
    over the test documents), or None and why not."""
    keep = [(t, y) for t, y in zip(syn_texts, syn_labels) if t and t.strip()]
    if len({y for _, y in keep}) < 2:
        return None, "fewer than two classes of non-empty synthetic documents: not evaluated"
    emb = embed_texts([t for t, _ in keep], embedder)
    m = embedding_accuracy(emb, [y for _, y in keep], test_emb, list(test_labels), seeds=list(seeds), name="accuracy")
    return m.with_interval(), ""


def _real_baseline(train: Corpus, test_emb: np.ndarray, test_labels: Sequence[str], *, per_class: int, embedder: Any,
                   seeds: Sequence[int]) -> MetricSummary:
    return real_baseline_accuracy(train.texts, train.labels, test_emb, list(test_labels),
                                  per_class={c: per_class for c in train.classes}, embedder=embedder,
                                  seeds=list(seeds)).with_interval()


def _joint_spent(ledgers: Sequence[PrivacyLedger], *, planned: tuple[float, float]) -> dict[str, Any]:
    """What the methods spent together: every distinct release once (a shared Ṽ is the same event object)."""
    seen: dict[int, Any] = {}
    for led in ledgers:
        for ev in led.events:
            seen.setdefault(id(ev), ev)
    return {"epsilon": float(sum(e.epsilon for e in seen.values())),
            "delta": float(sum(e.delta for e in seen.values())), "releases": len(seen),
            "planned_epsilon": planned[0], "planned_delta": planned[1], "note": JOINT_NOTE}
