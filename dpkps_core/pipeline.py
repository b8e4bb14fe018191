"""DP-KPS from corpus to private keyphrase sequences (paper 001 §2, Steps 1–4; DESIGN §2).

Each step is a function the app calls on its own page; :func:`run_sampling` chains them for the CLI and
writes the run folder (docs/ARCHITECTURE.md). Only the training part of the split reaches a DP mechanism.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from dpkps_core.corpus import Corpus, check_class_names
from dpkps_core.dp.histogram import SmoothedHistogramDensity, build_smoothed_histogram_density
from dpkps_core.dp.kde import RFFDensity, build_rff_density, ensemble_blocks
from dpkps_core.dp.ledger import ADD_REMOVE_ONE_DOCUMENT, PrivacyLedger
from dpkps_core.dp.rff import optimal_features, rff_expected_error
from dpkps_core.dp.rng import SAMPLERS, NoiseSource
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.dp.vocabulary import PrivateVocabulary, estimate_documents_from_noisy_total, privatize_vocabulary
from dpkps_core.embeddings import DEFAULT_MODEL, Embedder, EmbeddingCache, embed_terms
from dpkps_core.errors import ParameterError
from dpkps_core.sampling import METHODS, SamplingOutcome, sample_independent, sample_iterative
from dpkps_core.split import CorpusSplit, split_documents
from dpkps_core.vocabulary import PublicVocabulary, TermMatcher, truncated_count

Progress = Callable[[float, str], None]
DENSITIES = ("auto", "histogram", "rff")

# Documented limits (issue 7): keep a user from running the server out of memory by accident.
LIMITS = {
    "vocab_size": 20_000,        # N
    "terms_per_doc": 200,        # S
    "length": 64,                # L
    "per_class": 100_000,        # sequences per class
    "features": 20_000,          # I
    "max_chars_per_doc": 100_000,  # longer documents are truncated for term extraction
}


@dataclasses.dataclass
class SamplingConfig:
    """Every parameter of a sampling run (public; saved as ``run_config.json`` and re-runnable)."""

    corpus: str = "demo:bbc"
    text_column: str | None = None
    label_column: str | None = None
    vocabulary: str = "glove"
    remove_stopwords: bool = True
    junk_filter: bool = True
    vocab_max_terms: int | None = 50_000  # frequency-ordered vocabularies only (see effective_max_terms)
    eps_voc: float = 5.0
    eps_kde: float = 5.0
    method: str = "independent"
    density: str = "auto"
    length: int = 10
    per_class: int = 50
    vocab_size: int = 1000
    terms_per_doc: int = 10
    selection_rule: str = "top-n"
    features: int | None = None
    bandwidth: float | None = None
    temperature: float = 1.0
    max_keyphrases_per_doc: int | None = None
    class_size_estimate: float | None = None
    embedding_model: str = DEFAULT_MODEL
    seed: int | None = None
    noise_sampler: str = "opendp"  # "opendp" (vetted, default) or "numpy" (fast); a seed means NumPy
    test_fraction: float = 0.2
    client_fraction: float = 0.0
    split_seed: int = 0
    epsilon_cap: float | None = None
    classes: tuple[str, ...] | None = None  # declared PUBLIC class names (demo corpora carry their own)
    person_column: str | None = None  # unit of privacy: one person (this column's ids stay private), else a document

    def __post_init__(self) -> None:
        if self.classes is not None and not isinstance(self.classes, tuple):
            self.classes = tuple(self.classes) if not isinstance(self.classes, str) else (self.classes,)

    def validate(self) -> "SamplingConfig":
        check_epsilon(self.eps_voc, "ε_voc")
        check_epsilon(self.eps_kde, "ε_kde")
        if self.method not in METHODS:
            raise ParameterError(f"Unknown method {self.method!r}; choose one of {', '.join(METHODS)}.")
        if self.density not in DENSITIES:
            raise ParameterError(f"Unknown density {self.density!r}; choose one of {', '.join(DENSITIES)}.")
        if self.method != "independent" and self.density == "histogram":
            raise ParameterError("The smoothed histogram only serves independent sampling; iterative methods use the RFF DP-KDE.")
        check_positive_int(self.length, "L (sequence length)", maximum=LIMITS["length"])
        check_positive_int(self.per_class, "sequences per class", maximum=LIMITS["per_class"])
        check_positive_int(self.vocab_size, "N (private vocabulary size)", maximum=LIMITS["vocab_size"])
        check_positive_int(self.terms_per_doc, "S (terms per document)", maximum=LIMITS["terms_per_doc"])
        if self.features is not None:
            check_positive_int(self.features, "I (random features)", maximum=LIMITS["features"])
        if self.bandwidth is not None and (not np.isfinite(self.bandwidth) or self.bandwidth < 0):
            raise ParameterError(f"σ (bandwidth) must be ≥ 0, got {self.bandwidth!r}.")
        if self.noise_sampler not in SAMPLERS:
            raise ParameterError(f"Unknown noise sampler {self.noise_sampler!r}; choose one of {', '.join(SAMPLERS)}.")
        if self.temperature < 0:
            raise ParameterError(f"The temperature must be ≥ 0, got {self.temperature!r}.")
        if self.classes is not None:
            self.classes = check_class_names(self.classes)
        total = self.eps_voc + self.eps_kde
        if self.epsilon_cap is not None and total > self.epsilon_cap + 1e-9:
            raise ParameterError(f"ε_voc + ε_kde = {total:g} is over the budget cap of {self.epsilon_cap:g}.")
        return self

    @property
    def effective_vocab_max_terms(self) -> int | None:
        return effective_max_terms(self.vocabulary, self.vocab_max_terms)

    @property
    def density_kind(self) -> str:
        if self.density == "auto":
            return "histogram" if self.method == "independent" else "rff"
        return self.density

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SamplingConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


FREQUENCY_ORDERED_VOCABULARIES = ("glove", "wordfreq")


def effective_max_terms(vocabulary: str, max_terms: int | None) -> int | None:
    """The frequency limit K actually applied to V: only GloVe and wordfreq are in public frequency order, so
    keeping their first K terms keeps the K most frequent English words (issue 8 §2; chosen by measurement in
    docs/DEFAULTS.md). For the medical glossary and user files the order carries no frequency, so no cut."""
    if not max_terms or vocabulary not in FREQUENCY_ORDERED_VOCABULARIES:
        return None
    return int(max_terms)


PAPER_SETTINGS = dict(
    remove_stopwords=True, junk_filter=False, vocab_max_terms=None, density="rff", bandwidth=1.0,
    features=2000, selection_rule="top-n", vocab_size=1000, terms_per_doc=10,
)
"""The DP-KPS paper's configuration (RFF DP-KDE, σ = 1, fixed I, full GloVe), kept for comparisons."""


# --------------------------------------------------------------------------------------------- steps

def build_private_vocabulary(
    texts: Sequence[str], vocabulary: PublicVocabulary, *, eps_voc: float, terms_per_doc: int, vocab_size: int,
    noise: NoiseSource, ledger: PrivacyLedger, selection_rule: str = "top-n",
    matcher: TermMatcher | None = None, progress: Progress | None = None, counts: np.ndarray | None = None,
    groups: Sequence[str] | None = None, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> PrivateVocabulary:
    """Step 1 (ε_voc): first-S-distinct term counts over V, Laplace(S/ε) on all of V, top N → Ṽ.

    ``counts`` may be passed when already computed (:func:`term_counts`; they do not depend on ε), e.g. by an
    ε sweep that re-runs only the noise. ``groups`` (a person per document): each person's first S distinct
    terms over all their documents (issue 15)."""
    if counts is None:
        if progress:
            progress(0.05, f"matching {len(texts):,} documents against {len(vocabulary):,} public terms")
        counts = term_counts(texts, vocabulary, terms_per_doc=terms_per_doc, matcher=matcher, groups=groups)
    # No refusal on private data here (issue 11 §2): a corpus without any term of V still gets its (noise-only)
    # release, so that whether Ṽ is released never depends on one document. run_sampling warns locally.
    if progress:
        progress(0.8, "adding Laplace noise to every term of the public vocabulary")
    result = privatize_vocabulary(
        counts, vocabulary.terms, epsilon=eps_voc, terms_per_doc=terms_per_doc, size=vocab_size,
        vocabulary_name=vocabulary.name, noise=noise, ledger=ledger, selection_rule=selection_rule,
        neighbouring=neighbouring,
    )
    if progress:
        progress(1.0, f"private vocabulary of {len(result)} terms")
    return result


def term_counts(texts: Sequence[str], vocabulary: PublicVocabulary, *, terms_per_doc: int,
                matcher: TermMatcher | None = None, groups: Sequence[str] | None = None) -> np.ndarray:
    """Private per-term document counts over V (each document's first S distinct matches). Never released
    without :func:`build_private_vocabulary`'s noise.

    With ``groups`` (a person per document) each PERSON counts the first S distinct terms over all their
    documents in corpus order (issue 15), so one person moves the histogram by at most S in L1."""
    matcher = matcher or vocabulary.matcher
    if groups is None:
        return matcher.counts_first_distinct(texts, terms_per_doc, max_chars=LIMITS["max_chars_per_doc"])
    per_doc = matcher.first_distinct(texts, terms_per_doc, max_chars=LIMITS["max_chars_per_doc"])
    per_person: dict[str, dict[int, None]] = {}
    for person, found in zip(groups, per_doc):  # documents × S (≤ S per document), not documents × V
        seen = per_person.setdefault(str(person), {})
        for term in found:
            if len(seen) >= terms_per_doc:
                break
            seen.setdefault(term, None)
    flat = np.fromiter((t for seen in per_person.values() for t in seen), dtype=np.int64)
    return np.bincount(flat, minlength=len(vocabulary.terms)).astype(np.int64, copy=False)


def extract_keyphrases(texts: Sequence[str], private_vocabulary: PrivateVocabulary, *, max_per_doc: int) -> list[list[int]]:
    """Each document's matches of Ṽ in text order, repeats kept, first ``max_per_doc`` (private, in memory)."""
    matcher = TermMatcher(private_vocabulary.terms)
    return matcher.occurrences(texts, max_per_doc, max_chars=LIMITS["max_chars_per_doc"])


def default_bandwidth(embeddings: np.ndarray, *, factor: float = 0.25, max_points: int = 2000, seed: int = 0) -> float:
    """Data-free σ: ``factor`` × median pairwise distance among Ṽ's embeddings (Ṽ is DP, the model public).

    With MiniLM the median distance between vocabulary words is ≈ 1.2, giving σ ≈ 0.3, the range that
    worked best in DESIGN §6 (σ = 1 samples almost uniformly).
    """
    e = np.asarray(embeddings, dtype=np.float64)
    if e.shape[0] < 2:
        return 0.3
    if e.shape[0] > max_points:
        e = e[np.random.default_rng(seed).choice(e.shape[0], max_points, replace=False)]
    sq = np.maximum((e * e).sum(1)[:, None] + (e * e).sum(1)[None, :] - 2 * e @ e.T, 0.0)
    dist = np.sqrt(sq[np.triu_indices(e.shape[0], 1)])
    return float(round(factor * np.median(dist), 4))


def estimate_class_size(
    private_vocabulary: PrivateVocabulary, n_classes: int, *, user_estimate: float | None = None
) -> tuple[float, str]:
    """Per-class size estimate for choosing I, without touching private counts (issue 8 §3).

    A user-supplied estimate wins; otherwise the free DP estimate Σ(noisy counts over V)/S divided by the
    number of classes (post-processing of the ε_voc release)."""
    if user_estimate is not None:
        return float(user_estimate), "user estimate"
    n = estimate_documents_from_noisy_total(private_vocabulary.noisy_total, terms_per_doc=private_vocabulary.terms_per_doc)
    return max(n / max(n_classes, 1), 1.0), "DP estimate from the vocabulary release"


def build_density(
    keyphrases: list[list[int]], labels: Sequence[str], *, classes: Sequence[str], embeddings: np.ndarray,
    config: SamplingConfig, private_vocabulary: PrivateVocabulary, noise: NoiseSource, ledger: PrivacyLedger,
    progress: Progress | None = None, groups: Sequence[str] | None = None,
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> tuple[SmoothedHistogramDensity | RFFDensity, dict[str, Any]]:
    """Step 3 (ε_kde): the per-class DP density for the chosen method; returns it with the public choices made
    (bandwidth, features, expected error). ``groups``: a person per document (person-level unit, issue 15)."""
    bandwidth = config.bandwidth if config.bandwidth is not None else default_bandwidth(embeddings)
    max_per_doc = config.max_keyphrases_per_doc or config.length
    info: dict[str, Any] = {"bandwidth": bandwidth, "bandwidth_source": "user" if config.bandwidth is not None else "auto (0.25 × median distance in Ṽ)",
                            "density": config.density_kind, "max_keyphrases_per_doc": max_per_doc}
    if config.density_kind == "histogram":
        density = build_smoothed_histogram_density(
            keyphrases, labels, classes=classes, embeddings=embeddings, epsilon=config.eps_kde,
            bandwidth=bandwidth, noise=noise, ledger=ledger, max_per_doc=max_per_doc, groups=groups,
            neighbouring=neighbouring,
        )
        info["expected_noise_per_term"] = float(np.sqrt(2) / config.eps_kde)
        return density, info
    if bandwidth == 0:
        raise ParameterError("The RFF DP-KDE needs a bandwidth σ > 0.")
    kind = "independent" if config.method == "independent" else config.method
    n_members = len(ensemble_blocks(kind, config.length))
    n_est, source = estimate_class_size(private_vocabulary, len(classes), user_estimate=config.class_size_estimate)
    eps_member = config.eps_kde / n_members
    features = config.features or optimal_features(n_documents=n_est, epsilon=eps_member, maximum=LIMITS["features"])
    info.update({"features": features, "features_source": "user" if config.features else f"auto (n_c·ε/2, n_c from {source})",
                 "class_size_estimate": round(n_est, 1), "ensemble_members": n_members,
                 **rff_expected_error(n_documents=n_est, epsilon=eps_member, features=features)})
    density = build_rff_density(
        keyphrases, labels, classes=classes, embeddings=embeddings, kind=kind, epsilon=config.eps_kde,
        bandwidth=bandwidth, features=features, length=config.length, noise=noise, ledger=ledger,
        max_per_doc=max_per_doc, progress=progress, groups=groups, neighbouring=neighbouring,
    )
    return density, info


def sample_sequences(
    density: SmoothedHistogramDensity | RFFDensity, *, terms: Sequence[str], embeddings: np.ndarray,
    config: SamplingConfig, rng: np.random.Generator, per_class: int | dict[str, int] | None = None,
    progress: Progress | None = None,
) -> SamplingOutcome:
    """Step 4 (post-processing): keyphrase sequences per class."""
    per_class = config.per_class if per_class is None else per_class
    if isinstance(density, SmoothedHistogramDensity):
        return sample_independent(density.scores(), classes=density.classes, terms=terms, per_class=per_class,
                                  length=config.length, temperature=config.temperature, rng=rng)
    if density.kind == "independent":
        return sample_independent(density.single_term_scores(embeddings), classes=density.classes, terms=terms,
                                  per_class=per_class, length=config.length, temperature=config.temperature, rng=rng)
    return sample_iterative(density, embeddings, terms=terms, per_class=per_class, temperature=config.temperature,
                            rng=rng, progress=progress)


# ------------------------------------------------------------------------------------------ whole run

@dataclasses.dataclass
class SamplingRun:
    """Everything a sampling run produced. ``split`` and ``keyphrases`` are private (local only)."""

    config: SamplingConfig
    split: CorpusSplit
    ledger: PrivacyLedger
    noise: NoiseSource
    private_vocabulary: PrivateVocabulary
    embeddings: np.ndarray
    density: SmoothedHistogramDensity | RFFDensity
    density_info: dict[str, Any]
    outcome: SamplingOutcome
    classes: tuple[str, ...]
    timings: dict[str, float]
    vocabulary_name: str
    truncated_documents: int = 0  # documents longer than LIMITS["max_chars_per_doc"] (local, private count)
    undeclared_documents: int = 0  # training documents whose label is not a declared class (local, private)
    local_warnings: tuple[str, ...] = ()  # checks on the private data: shown to the data owner, never released
    privacy_unit: str = ADD_REMOVE_ONE_DOCUMENT  # the neighbouring relation (one document, or one person)

    def privacy_report(self) -> dict[str, Any]:
        """The public privacy report (DP outputs and public parameters only)."""
        led = self.ledger.to_dict()
        return {
            "epsilon_total": led["epsilon_total"],
            "epsilon_vocabulary": led["epsilon_by_step"].get("vocabulary", 0.0),
            "epsilon_kde": led["epsilon_by_step"].get("kde", 0.0),
            "epsilon_class_counts": led["epsilon_by_step"].get("class_counts", 0.0),
            "delta_total": led["delta_total"],
            "epsilon_cap": led["epsilon_cap"],
            "neighbouring": self.privacy_unit,
            "guarantee": "pure ε-differential privacy of the sequences (and, by post-processing, of any text generated from them)",
            "events": led["events"],
            "seed_policy": self.noise.policy,
            "noise": self.noise.describe(),
            "mechanisms": sorted({e["mechanism"] for e in led["events"]}),
            "vocabulary": {"name": self.vocabulary_name, "public_size": self.private_vocabulary.public_vocabulary_size,
                           "private_size": len(self.private_vocabulary)},
            "embedding_model": self.config.embedding_model,
            "method": self.config.method,
            "classes": list(self.classes),
            "parameters": {**{k: v for k, v in self.config.to_dict().items() if k not in ("corpus",)},
                           **{f"density_{k}": v for k, v in self.density_info.items()}},
            "sequences": len(self.outcome.sequences),
            "uniform_fallback_draws": self.outcome.uniform_fallbacks,
            # a persistent ledger (dpkps_core.ledger_store) adds the corpus's totals to date, kept apart from
            # this run's events above: ε / δ of every release on this corpus, app and CLI, every session
            **({"corpus_to_date": led["corpus"]} if "corpus" in led else {}),
        }


def local_warnings(train: Corpus, counts: np.ndarray, *, vocabulary_name: str) -> list[str]:
    """Checks on the PRIVATE training part that protect the user (DESIGN §2; docs/PRIVACY.md "Checks").

    They are advisory and local: the release happens whatever they find, for D and for any neighbour alike,
    so that no automatic decision to release depends on one document. Counts only, never text."""
    out: list[str] = []
    if len(train) == 0:
        out.append("No training document belongs to a declared class: every density is pure noise. Check the "
                   "class list and the label column.")
    elif counts.sum() == 0:
        out.append(f"No training document contains any term of the {vocabulary_name} vocabulary: the private "
                   "vocabulary is pure noise. Choose a vocabulary that matches the corpus language and domain.")
    empty = [c for c in train.classes if c not in set(train.labels)]
    if empty and len(train):
        out.append(f"{len(empty)} declared class(es) have no training document (e.g. '{empty[0]}'): their "
                   "densities are pure noise.")
    return out


def run_sampling(
    corpus: Corpus, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Embedder,
    cache: EmbeddingCache | None = None, noise: NoiseSource | None = None, ledger: PrivacyLedger | None = None,
    progress: Progress | None = None,
) -> SamplingRun:
    """Split → Ṽ (ε_voc) → keyphrases → embeddings of Ṽ → DP density (ε_kde) → sequences."""
    config.validate()
    noise = noise or NoiseSource(config.seed, sampler=config.noise_sampler)
    ledger = ledger if ledger is not None else PrivacyLedger(config.epsilon_cap)
    ledger.require(config.eps_voc + config.eps_kde, "this sampling run")
    report = progress or (lambda f, m: None)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    if config.classes is not None:
        corpus = corpus.with_classes(config.classes)
    classes = tuple(corpus.classes)  # the declared public list; raises when none was declared
    if config.person_column and corpus.persons is None:
        raise ParameterError(f"The unit of privacy is a person (column '{config.person_column}'), but the corpus was "
                             "loaded without that column; load it with the person column.")
    by_person = bool(config.person_column)
    unit = corpus.privacy_unit if by_person else ADD_REMOVE_ONE_DOCUMENT
    split = split_documents(corpus, test_fraction=config.test_fraction, client_fraction=config.client_fraction,
                            seed=config.split_seed, by_person=by_person)
    train_all = corpus.subset(split.train)
    train = train_all.declared_only()  # undeclared labels enter no DP step (issue 11 §2)
    groups = train.persons if by_person else None  # PRIVATE person ids: weights only, never released
    report(0.02, f"split: {len(train):,} training documents of the declared classes feed the DP steps")
    report(0.03, f"matching {len(train):,} documents against {len(vocabulary):,} public terms")
    counts = term_counts(train.texts, vocabulary, terms_per_doc=config.terms_per_doc, groups=groups)
    warnings = local_warnings(train, counts, vocabulary_name=vocabulary.name)
    pv = build_private_vocabulary(
        train.texts, vocabulary, eps_voc=config.eps_voc, terms_per_doc=config.terms_per_doc,
        vocab_size=config.vocab_size, noise=noise, ledger=ledger, selection_rule=config.selection_rule,
        progress=lambda f, m: report(0.02 + 0.3 * f, m), counts=counts, neighbouring=unit,
    )
    timings["vocabulary"] = time.perf_counter() - t
    t = time.perf_counter()
    max_per_doc = config.max_keyphrases_per_doc or config.length
    keyphrases = extract_keyphrases(train.texts, pv, max_per_doc=max_per_doc)
    timings["keyphrases"] = time.perf_counter() - t
    t = time.perf_counter()
    embeddings = embed_terms(pv.terms, embedder, cache=cache, progress=lambda f, m: report(0.35 + 0.25 * f, m))
    timings["embeddings"] = time.perf_counter() - t
    t = time.perf_counter()
    report(0.6, "building the per-class DP densities")
    density, info = build_density(keyphrases, train.labels, classes=classes, embeddings=embeddings, config=config,
                                  private_vocabulary=pv, noise=noise, ledger=ledger,
                                  progress=lambda f, m: report(0.6 + 0.15 * f, m), groups=groups,
                                  neighbouring=unit)
    timings["density"] = time.perf_counter() - t
    t = time.perf_counter()
    outcome = sample_sequences(density, terms=pv.terms, embeddings=embeddings, config=config, rng=noise.child(),
                               progress=lambda f, m: report(0.75 + 0.24 * f, m))
    timings["sampling"] = time.perf_counter() - t
    report(1.0, f"{len(outcome.sequences):,} sequences sampled")
    return SamplingRun(config, split, ledger, noise, pv, embeddings, density, info, outcome, classes, timings,
                       vocabulary.name, truncated_count(train.texts, LIMITS["max_chars_per_doc"]),
                       undeclared_documents=len(train_all) - len(train), local_warnings=tuple(warnings),
                       privacy_unit=unit)


def write_run_folder(run: SamplingRun, out_dir: str | Path) -> Path:
    """Write the run folder (owner-only permissions): sequences, privacy report, Ṽ, config, split (private)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    os.chmod(out, 0o700)
    with open(out / "sequences.jsonl", "w", encoding="utf-8") as f:
        for s in run.outcome.sequences:
            f.write(json.dumps(s.to_dict(), ensure_ascii=False) + "\n")
    _write_json(out / "privacy_report.json", run.privacy_report())
    _write_json(out / "private_vocabulary.json", run.private_vocabulary.to_dict())
    config = run.config.to_dict()
    corpus_file = Path(run.config.corpus)
    if not run.config.corpus.startswith("demo:") and corpus_file.is_file():
        # lets the LLM step refuse the private corpus as a few-shot file; the hash is dropped from the bundle
        config["corpus_path"] = str(corpus_file.resolve())
        config["corpus_sha256"] = hashlib.sha256(corpus_file.read_bytes()).hexdigest()
    _write_json(out / "run_config.json", config)
    run.split.save(out / "split.json")  # private: never exported
    return out


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=_json_default), encoding="utf-8")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if hasattr(obj, "items"):
        return dict(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
