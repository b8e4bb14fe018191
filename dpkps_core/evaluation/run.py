"""Evaluating a run folder locally: reload it with its private corpus and split, downstream accuracy, the no-LLM check, Deep CORAL, precision/recall on embeddings, projections; evaluation.json (PRIVATE, never exported).

Nothing here logs or prints document text."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from dpkps_core.method import pipeline
from dpkps_core.corpus import Corpus
from dpkps_core.dp.validation import check_positive_float, check_positive_int
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.embeddings import Embedder, embed_texts
from dpkps_core.records import runfolder
from dpkps_core.records.runfolder import EVALUATION_FILE, RunFolder
from dpkps_core.errors import CorpusError, DPKPSError, ParameterError
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.split import CorpusSplit, split_documents
from dpkps_core.method.vocabulary import PublicVocabulary
from dpkps_core.progress import Progress
from dpkps_core.evaluation.classifiers import CLASSIFIERS, embedding_accuracy, real_baseline_accuracy
from dpkps_core.evaluation.distribution import DEFAULT_K, DistributionScore, distribution_score
from dpkps_core.evaluation.held_out import DEFAULT_MAX_TEST_DOCUMENTS, held_out_sample
from dpkps_core.evaluation.metrics import (Interval, MetricSummary, PRIVATE_NOTE, Scores, _noop, chance_accuracy,
                                          ratio_interval)
from dpkps_core.evaluation.no_llm import keyphrase_sequences, no_llm_check, real_keyphrase_baseline
from dpkps_core.evaluation.projections import projection_frame, subsample

if TYPE_CHECKING:  # heavy imports stay lazy
    import pandas as pd


# ------------------------------------------------------------------------------------- run evaluation

#: ``evaluation.json``'s key of the synthetic / real accuracy ratio and its paired interval.
RATIO_KEY = "synthetic_to_real"


@dataclasses.dataclass
class RunData:
    """A run folder reloaded with its private corpus and split (local only)."""

    run_dir: Path
    config: SamplingConfig
    corpus: Corpus
    split: CorpusSplit
    private_vocabulary: PrivateVocabulary
    sequences: list[dict[str, Any]]
    documents: list[dict[str, Any]]

    @property
    def train(self) -> Corpus:
        """The training documents of the declared classes (those that fed the DP steps)."""
        return self._declared(self.corpus.subset(self.split.train))

    @property
    def test(self) -> Corpus:
        """The held-out documents of the declared classes (evaluation only)."""
        return self._declared(self.corpus.subset(self.split.test))

    @staticmethod
    def _declared(part: Corpus) -> Corpus:
        return part.declared_only() if part.declared else part

    @property
    def client(self) -> Corpus:
        return self.corpus.subset(self.split.client)


def load_run(run_dir: str | Path, *, corpus: Corpus | None = None) -> RunData:
    """Reload a run folder: ``run_config.json`` (the corpus spec is reloaded with ``load_corpus_spec`` unless
    ``corpus`` is given), ``split.json``, ``private_vocabulary.json``, ``sequences.jsonl`` and, when present,
    ``documents.jsonl``."""
    from dpkps_core.method.config import load_config_corpus

    folder = RunFolder(run_dir)
    folder.require_sampling()
    run = folder.path
    config = SamplingConfig.from_dict(folder.read_config())
    if corpus is None:
        corpus = load_config_corpus(config)
    elif config.classes is not None:
        corpus = corpus.with_classes(config.classes)
    split = CorpusSplit.load(folder.split)
    every = list(split.train) + list(split.test) + list(split.client)
    mismatch = CorpusError("The corpus no longer matches the run's held-out split; evaluate with the corpus the run "
                           "was sampled from.")
    if every and (max(every) >= len(corpus) or min(every) < 0):
        raise mismatch
    if split != split_documents(corpus, test_fraction=split.test_fraction, client_fraction=split.client_fraction,
                                seed=split.seed, by_person=bool(config.person_column)):
        raise mismatch  # same size but other labels: a different corpus
    pv = PrivateVocabulary.from_dict(runfolder.read_json(folder.vocabulary))
    sequences = folder.read_sequences()
    from dpkps_core.records.runfolder import read_documents

    documents = read_documents(run)
    documents = [d for d in documents if isinstance(d.get("label"), str) and d.get("text", "").strip()]
    return RunData(run, config, corpus, split, pv, sequences, documents)


def projection_for_run(
    run: RunData, *, embedder: Embedder, method: str = "tsne", seed: int = 0, max_points_per_source: int = 500,
) -> "pd.DataFrame":
    """Projection of the run's real TEST documents against its synthetic documents (or, before the LLM step, its
    keyphrase sequences joined by spaces), both embedded in memory with ``embedder`` (PRIVATE)."""
    rng = np.random.default_rng(seed)
    test = run.test
    idx = subsample(len(test), max_points_per_source, rng)
    if run.documents:
        syn = [(d["text"], d["label"]) for d in run.documents]
    else:
        syn = [(" ".join(s.get("keyphrases", [])), str(s.get("label"))) for s in run.sequences]
    sidx = subsample(len(syn), max_points_per_source, rng)
    real_emb = embed_texts([test.texts[i] for i in idx], embedder)
    syn_emb = embed_texts([syn[i][0] for i in sidx], embedder)
    df = projection_frame(real_emb, [test.labels[i] for i in idx], syn_emb, [syn[i][1] for i in sidx],
                          method=method, seed=seed, max_points_per_source=max_points_per_source)
    df.attrs["synthetic"] = "documents" if run.documents else "keyphrase sequences"
    return df


@dataclasses.dataclass
class EvaluationResult:
    """Local evaluation of one run (PRIVATE: never exported). ``metrics`` maps a clear name to its summary;
    ``distribution`` is precision/recall of the synthetic documents against the real test documents on embeddings
    (None before the LLM step)."""

    metrics: dict[str, MetricSummary]
    info: dict[str, Any]
    distribution: DistributionScore | None = None
    #: synthetic / real accuracy with its paired bootstrap interval over the test documents (None before the LLM step)
    synthetic_to_real: Interval | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"private": True, "note": PRIVATE_NOTE, **self.info,
               **{name: m.to_dict() for name, m in self.metrics.items()}}
        if self.distribution is not None:
            out["distribution"] = self.distribution.to_dict()
        if self.synthetic_to_real is not None:
            out[RATIO_KEY] = self.synthetic_to_real.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "EvaluationResult":
        """The result :meth:`to_dict` wrote: the metric entries (a mean, an sd, seeds and training documents), the
        distribution score, and everything else back into ``info``."""
        metrics: dict[str, MetricSummary] = {}
        info: dict[str, Any] = {}
        for key, value in data.items():
            if key in ("private", "note", "distribution", RATIO_KEY):
                continue
            if isinstance(value, Mapping) and {"mean", "sd", "seeds", "n_train"} <= set(value):
                metrics[key] = MetricSummary.from_dict(key, value)
            else:
                info[key] = value
        dist, ratio = data.get("distribution"), data.get(RATIO_KEY)
        return cls(metrics, info, DistributionScore.from_dict(dist) if isinstance(dist, Mapping) else None,
                   Interval.from_dict(ratio) if isinstance(ratio, Mapping) else None)

    def summary_lines(self) -> list[str]:
        lines = [f"Evaluation ({PRIVATE_NOTE}); test documents: {self.info.get('n_test', 0):,}, "
                 f"chance (majority class): {self.info.get('chance_accuracy', float('nan')):.3f}"]
        held_out = self.info.get("n_test_held_out")
        if isinstance(held_out, int) and held_out > self.info.get("n_test", 0):
            lines.append(f"  scored on {self.info.get('held_out_sample', 'a sample of the held-out documents')}")
        for name, m in self.metrics.items():
            ci = (f", {m.interval.level_text} interval over the test documents {m.interval.low:.3f}–"
                  f"{m.interval.high:.3f}" if m.interval is not None else "")
            lines.append(f"  {name:<40} {m.format()}  (macro-F1 {m.macro_f1_mean:.3f}, n_train {m.n_train:,}{ci})")
        if self.synthetic_to_real is not None:
            lines.append(f"  {'synthetic / real accuracy':<40} {self.synthetic_to_real.format(2)}  (paired bootstrap "
                         "over the test documents: the test sample's uncertainty, not a new generation's)")
        if self.distribution is not None:
            d = self.distribution
            lines.append(f"  {'synthetic vs real test (embeddings)':<40} {d.format()}  (k = {d.k}, "
                         f"{d.n_compared:,} documents a side)")
        return lines


def _real_keyphrase_baseline(run: Any, test: Corpus, *, vocabulary: PublicVocabulary | None,
                             counts: np.ndarray | None) -> tuple[Scores | None, str]:
    """The real keyphrase baseline over the run's public vocabulary (docs/DESIGN.md §5; the noise-free top-N terms of V),
    or None and a note saying why it could not be computed (e.g. an uploaded public vocabulary that is gone)."""
    try:
        if vocabulary is None:  # the run's public vocabulary: the baseline is defined over it
            from dpkps_core.method.config import load_vocabulary_for

            vocabulary = load_vocabulary_for(run.config)
        train = run.train
        if counts is None:
            counts = pipeline.term_counts(train.texts, vocabulary, terms_per_doc=run.config.terms_per_doc,
                                          groups=train.persons if run.config.person_column else None)
        return real_keyphrase_baseline(train.texts, train.labels, test.texts, test.labels,
                                       vocabulary=vocabulary, counts=counts, vocab_size=run.config.vocab_size,
                                       length=run.config.length), ""
    except DPKPSError as exc:  # say so, evaluate the rest
        return None, f"No real keyphrase baseline: {exc}"


def _document_metrics(run: Any, test: Corpus, embedder: Embedder, *, classifier: str, seeds: list[int],
                      coral: bool | None, coral_weight: float, report: Progress, client: Corpus
                      ) -> tuple[dict[str, MetricSummary], DistributionScore | None]:
    """Downstream accuracy of the synthetic documents and the real-document baseline (same classifier, same
    number of documents per class), and the Deep CORAL variants when asked for (or, with ``coral`` None, when
    the split has client documents); precision/recall of the synthetic against the real test documents on the
    same embeddings (None when either side has k documents or fewer). Real documents are embedded in memory only,
    once each."""
    train, seed_list = run.train, seeds
    metrics: dict[str, MetricSummary] = {}
    report(0.15, f"embedding {len(test):,} real test documents (in memory only)")
    test_emb = embed_texts(test.texts, embedder, progress=lambda f, m: report(0.15 + 0.25 * f, m))
    report(0.4, f"embedding {len(run.documents):,} synthetic documents")
    doc_texts = [d["text"] for d in run.documents]
    doc_labels = [d["label"] for d in run.documents]
    syn_emb = embed_texts(doc_texts, embedder, progress=lambda f, m: report(0.4 + 0.2 * f, m))
    distribution = (distribution_score(test_emb, syn_emb, seeds=seed_list, embedding_model=embedder.name)
                    if min(len(test_emb), len(syn_emb)) > DEFAULT_K else None)
    metrics["synthetic_accuracy"] = embedding_accuracy(
        syn_emb, doc_labels, test_emb, test.labels, classifier=classifier, seeds=seed_list,
        name="synthetic_accuracy", note=f"{classifier} on {embedder.name} embeddings of the synthetic documents")
    per_class = {c: doc_labels.count(c) for c in sorted(set(doc_labels))}
    report(0.6, "real-document baseline")
    metrics["real_baseline_accuracy"] = real_baseline_accuracy(
        train.texts, train.labels, test_emb, test.labels, per_class=per_class, embedder=embedder,
        classifier=classifier, seeds=seed_list, progress=lambda f, m: report(0.6 + 0.2 * f, m))
    want_coral = len(run.split.client) >= 2 if coral is None else coral
    if want_coral:
        report(0.8, f"Deep CORAL against {len(client):,} unlabelled client documents")
        client_emb = embed_texts(client.texts, embedder)
        metrics["synthetic_accuracy_no_coral"] = embedding_accuracy(
            syn_emb, doc_labels, test_emb, test.labels, classifier=classifier, seeds=seed_list, torch_head=True,
            name="synthetic_accuracy_no_coral", note="torch head, cross-entropy only (the CORAL comparison's control)")
        metrics["synthetic_accuracy_coral"] = embedding_accuracy(
            syn_emb, doc_labels, test_emb, test.labels, classifier=classifier, seeds=seed_list,
            client_embeddings=client_emb, coral_weight=coral_weight, name="synthetic_accuracy_coral",
            note=f"torch head, cross-entropy + {coral_weight:g}·CORAL (logits) against the client part")
    return metrics, distribution


def evaluate_run(
    run_dir: str | Path, *, seeds: int | Sequence[int] = 3, classifier: str = "logreg", coral: bool | None = None,
    coral_weight: float = 1.0, embedder: Embedder | None = None, corpus: Corpus | None = None,
    progress: Progress | None = None, device: str | None = None, vocabulary: PublicVocabulary | None = None,
    counts: np.ndarray | None = None, max_test_documents: int | None = DEFAULT_MAX_TEST_DOCUMENTS,
) -> EvaluationResult:
    """Evaluate a run folder locally (docs/DESIGN.md §5): the no-LLM check and its real keyphrase baseline always; with
    ``documents.jsonl``, downstream accuracy of the synthetic documents and the real-document baseline; Deep CORAL
    variants (with and without the CORAL term) when ``coral`` is True, or when None and the split has client
    documents. ``embedder`` defaults to the run's embedding model on ``device`` (auto/cpu/cuda, None =
    ``$DPKPS_DEVICE`` or auto); each real document is embedded once per evaluation, whatever the seeds.

    ``max_test_documents``: the held-out documents scored on, at most (:mod:`~dpkps_core.evaluation.held_out`: a
    uniform sample with a public seed when the held-out part is larger, ``None`` = all; the client part of Deep
    CORAL is bounded alike). The result's ``info`` says how many were used of how many (``n_test``,
    ``n_test_held_out``, ``held_out_sample``). The split, the training part and the DP steps are untouched."""
    from dpkps_core.embeddings import get_embedder

    report = progress or _noop
    seed_list = list(range(check_positive_int(seeds, "seeds", maximum=100))) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise ParameterError("Give at least one seed.")
    if classifier not in CLASSIFIERS:
        raise ParameterError(f"Unknown classifier {classifier!r}; choose one of {', '.join(CLASSIFIERS)}.")
    coral_weight = check_positive_float(coral_weight, "CORAL weight λ")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    run = load_run(run_dir, corpus=corpus)
    sample = held_out_sample(run.test, max_documents=max_test_documents)
    train, test = run.train, sample.corpus
    if len(test) == 0:
        raise ParameterError("The run has no held-out test documents; sample again with --test-fraction above 0.")
    if not run.sequences:
        raise ParameterError("The run has no keyphrase sequences to evaluate.")
    if coral and not run.documents:
        raise ParameterError("Deep CORAL needs synthetic documents; run `python -m dpkps_core generate` first.")
    if coral and len(run.split.client) < 2:
        raise ParameterError("Deep CORAL needs unlabelled client documents; sample again with --client-fraction above 0.")
    length = run.config.length
    metrics: dict[str, MetricSummary] = {}
    distribution: DistributionScore | None = None
    report(0.05, "no-LLM check: test documents → keyphrase sequences")
    test_seqs = keyphrase_sequences(test.texts, run.private_vocabulary, length=length)
    no_llm = no_llm_check(run.sequences, test.texts, test.labels, private_vocabulary=run.private_vocabulary,
                          length=length, test_sequences=test_seqs)
    real_kp, baseline_note = _real_keyphrase_baseline(run, test, vocabulary=vocabulary, counts=counts)
    det = "deterministic classifier on the run's one DP draw: the same value for every seed"
    metrics["no_llm_accuracy"] = MetricSummary("no_llm_accuracy", tuple(seed_list), (no_llm,) * len(seed_list),
                                               len(run.sequences), det)
    if real_kp is not None:
        metrics["real_keyphrase_baseline_accuracy"] = MetricSummary(
            "real_keyphrase_baseline_accuracy", tuple(seed_list), (real_kp,) * len(seed_list), len(train),
            "TF-IDF + logistic regression on the real training documents' keyphrase sequences over the noise-free "
            "top-N terms of V (upper bound; the same value on every page)")
    timings["no_llm"] = time.perf_counter() - t0
    info: dict[str, Any] = {
        "run": run.run_dir.name, "classifier": classifier, "seeds": seed_list,
        "n_train": len(train), "n_test": len(test), "n_test_held_out": sample.held_out,
        "held_out_sample": sample.note(), "max_test_documents": max_test_documents,
        "n_client": len(run.split.client),
        "n_sequences": len(run.sequences), "n_documents": len(run.documents),
        "chance_accuracy": chance_accuracy(test.labels),
        "embedding_model": run.config.embedding_model,
        "test_documents_without_keyphrases": int(sum(1 for s in test_seqs if not s)),
    }
    if baseline_note:
        info["real_keyphrase_baseline_note"] = baseline_note
    if run.documents:
        t = time.perf_counter()
        if embedder is None:
            name = run.config.embedding_model
            embedder = get_embedder(name) if device is None else get_embedder(name, device=device)
        client = held_out_sample(run.client, max_documents=max_test_documents)
        if client.sampled:
            info["client_sample"] = client.note().replace("held-out documents", "client documents")
        doc_metrics, distribution = _document_metrics(run, test, embedder, classifier=classifier, seeds=seed_list,
                                                      coral=coral, coral_weight=coral_weight, report=report,
                                                      client=client.corpus)
        metrics.update(doc_metrics)
        if distribution is None:
            info["distribution_note"] = (f"Precision/recall on embeddings needs more than {DEFAULT_K} synthetic and "
                                         f"{DEFAULT_K} real test documents.")
        if "synthetic_accuracy_coral" in metrics:
            info["coral_weight"] = coral_weight
        timings["documents"] = time.perf_counter() - t
    info["timings_seconds"] = {k: round(v, 2) for k, v in timings.items()}
    metrics = {name: m.with_interval() for name, m in metrics.items()}
    ratio = None
    if "synthetic_accuracy" in metrics and "real_baseline_accuracy" in metrics:
        ratio = ratio_interval(metrics["synthetic_accuracy"].scores, metrics["real_baseline_accuracy"].scores)
    report(1.0, "evaluation done")
    return EvaluationResult(metrics, info, distribution, ratio)


def read_evaluation(run_dir: str | Path) -> EvaluationResult | None:
    """The evaluation :func:`write_evaluation` left in ``run_dir`` (PRIVATE), or None when there is none or it
    cannot be read (an unreadable file is as good as none: evaluating again rewrites it)."""
    path = Path(run_dir) / EVALUATION_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return EvaluationResult.from_dict(data) if isinstance(data, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_evaluation(result: EvaluationResult, run_dir: str | Path) -> Path:
    """Write ``run_dir/evaluation.json`` (owner-only; PRIVATE — the export refuses it)."""
    path = Path(run_dir) / EVALUATION_FILE
    path.write_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8")
    try:
        os.chmod(path, 0o600)
    except OSError:
        pass
    return path
