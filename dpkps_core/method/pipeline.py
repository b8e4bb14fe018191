"""DP-KPS from corpus to private keyphrase sequences ([DP-KPS] §2, Steps 1–4; docs/DESIGN.md §2).

Each step is a function the app calls on its own page (:func:`vocabulary_step`, :func:`density_step`,
:func:`sample_sequences`); :func:`run_sampling` chains the same functions for the CLI, and
:func:`write_run_files` writes the run folder from the pieces (docs/ARCHITECTURE.md). Only the training part of
the split reaches a DP mechanism.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.method.density_plan import density_plan
from dpkps_core.corpus import Corpus
from dpkps_core.dp.histogram import SmoothedHistogramDensity, build_smoothed_histogram_density
from dpkps_core.dp.kde import RFFDensity, build_rff_density
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.ledger import PrivacyLedger, require_public
from dpkps_core.dp.release import ReleaseContext, release
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import (PrivateVocabulary, check_vocabulary_settings, privatize_vocabulary,
                                      vocabulary_event)
from dpkps_core.embeddings import Embedder, EmbeddingCache, MemoryEmbeddingCache, cache_dir, embed_terms
from dpkps_core.records import runfolder
from dpkps_core.errors import ParameterError
from dpkps_core.records.runfolder import RunFolder
from dpkps_core.method.sampling import SamplingOutcome, sample_independent, sample_iterative
from dpkps_core.method.split import CorpusSplit, split_documents
from dpkps_core.method.matching import TermMatcher, truncated_count
from dpkps_core.corpus.stream import default_chunk_rows
from dpkps_core.dp.contributions import Keyphrases
from dpkps_core.method.streaming_counts import chunked, occurrences_pass, vocabulary_pass
from dpkps_core.method.training_source import AdmittedPart, StreamedCorpus, admit_part
from dpkps_core.method.vocabulary import PublicVocabulary
from dpkps_core.records.privacy_report import DPKPS_GUARANTEE, DPKPS_KEYS, PrivacyReport
from dpkps_core.progress import Progress


# --------------------------------------------------------------------------------------------- steps

def build_private_vocabulary(
    texts: Sequence[str], vocabulary: PublicVocabulary, *, eps_voc: float, terms_per_doc: int, vocab_size: int,
    context: ReleaseContext, selection_rule: str = "top-n",
    matcher: TermMatcher | None = None, progress: Progress | None = None, counts: np.ndarray | None = None,
    groups: Sequence[str] | None = None, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> PrivateVocabulary:
    """Step 1 (ε_voc): first-S-distinct term counts over V, Laplace(S/ε) on all of V, top N → Ṽ.

    ``counts`` may be passed when already computed (:func:`term_counts`; they do not depend on ε), e.g. by an
    ε sweep that re-runs only the noise. ``groups`` (a person per document): each person's first S distinct
    terms over all their documents (docs/DESIGN.md §2, person unit). ``context``: its ledger and noise source."""
    report = progress or (lambda f, m: None)
    if counts is None:
        report(0.05, f"matching the training documents against {len(vocabulary):,} public terms")
        counts = term_counts(texts, vocabulary, terms_per_doc=terms_per_doc, matcher=matcher, groups=groups)
    # No refusal on private data here (docs/DESIGN.md §2): a corpus without any term of V still gets its (noise-only)
    # release, so that whether Ṽ is released never depends on one document. run_sampling warns locally.
    report(0.8, "adding Laplace noise to every term of the public vocabulary")
    result = privatize_vocabulary(
        counts, vocabulary.terms, epsilon=eps_voc, terms_per_doc=terms_per_doc, size=vocab_size,
        vocabulary_name=vocabulary.name, context=context, selection_rule=selection_rule,
        neighbouring=neighbouring,
    )
    report(1.0, f"private vocabulary of {len(result)} terms")
    return result


def term_counts(texts: Sequence[str], vocabulary: PublicVocabulary, *, terms_per_doc: int,
                matcher: TermMatcher | None = None, groups: Sequence[str] | None = None,
                progress: Progress | None = None) -> np.ndarray:
    """Private per-term document counts over V (each document's first S distinct matches). Never released
    without :func:`build_private_vocabulary`'s noise.

    With ``groups`` (a person per document) each PERSON counts the first S distinct terms over all their
    documents in corpus order (docs/DESIGN.md §2, person unit), so one person moves the histogram by at most S in L1.
    Computed by the streaming vocabulary pass (:func:`~dpkps_core.method.streaming_counts.vocabulary_pass`: the documents
    in chunks of ``$DPKPS_CHUNK_ROWS``, partial counts summed — exact whatever the chunk size); ``progress`` hears
    between chunks when there is more than one."""
    rows = default_chunk_rows()
    return _count_terms(chunked(texts, persons=groups, size=rows), len(texts), rows, vocabulary,
                        terms_per_doc=terms_per_doc, by_person=groups is not None, matcher=matcher,
                        progress=progress)


def _count_terms(chunks: Any, documents: int, chunk_rows: int, vocabulary: PublicVocabulary, *, terms_per_doc: int,
                 by_person: bool, matcher: TermMatcher | None = None, progress: Progress | None = None) -> np.ndarray:
    """The vocabulary pass over ``chunks`` of ``documents`` documents (one chunk: inline, without progress)."""
    several = documents > chunk_rows
    report = (lambda n: progress(0.05 + 0.7 * n / documents, "matching the documents against V")) if progress else None
    return vocabulary_pass(chunks, vocabulary.terms, terms_per_doc=terms_per_doc, by_person=by_person,
                           workers=None if several else 1, matcher=matcher or vocabulary.matcher,
                           max_chars=LIMITS["max_chars_per_doc"], progress=report).counts


def admitted_term_counts(part: AdmittedPart, vocabulary: PublicVocabulary, *, terms_per_doc: int,
                      progress: Progress | None = None, given: np.ndarray | None = None) -> np.ndarray:
    """The admitted documents' term counts over V (:func:`term_counts`; a streamed part: its chunks, the same pass).
    ``given``: the counts of the whole part, already computed — used when no document was left out."""
    if given is not None and not part.left_out:
        return given
    by_person = part.groups is not None
    if part.texts is not None:
        more = {"progress": progress} if progress and part.several_chunks else {}  # one chunk: no progress to hear
        return term_counts(part.texts, vocabulary, terms_per_doc=terms_per_doc, groups=part.groups, **more)
    return _count_terms(part.chunks(), part.documents, part.chunk_rows, vocabulary, terms_per_doc=terms_per_doc,
                        by_person=by_person, progress=progress)


def extract_keyphrases(texts: Sequence[str], private_vocabulary: PrivateVocabulary, *, max_per_doc: int) -> list[list[int]]:
    """Each document's matches of Ṽ in text order, repeats kept, first ``max_per_doc`` (private, in memory), by
    the streaming keyphrase pass (:func:`keyphrase_occurrences`) — as lists, for the consumers that edit them."""
    return list(keyphrase_occurrences(texts, private_vocabulary, max_per_doc=max_per_doc))


def keyphrase_occurrences(texts: Sequence[str], private_vocabulary: PrivateVocabulary, *,
                          max_per_doc: int) -> Keyphrases:
    """:func:`extract_keyphrases` held compactly (:class:`~dpkps_core.dp.contributions.Keyphrases`): the
    documents in chunks of ``$DPKPS_CHUNK_ROWS`` through :func:`~dpkps_core.method.streaming_counts.occurrences_pass`."""
    rows = default_chunk_rows()
    return occurrences_pass(chunked(texts, size=rows), private_vocabulary.terms, max_per_doc=max_per_doc,
                            workers=1 if len(texts) <= rows else None, max_chars=LIMITS["max_chars_per_doc"])


def build_density(
    keyphrases: list[list[int]], labels: Sequence[str], *, classes: Sequence[str], embeddings: np.ndarray,
    config: SamplingConfig, private_vocabulary: PrivateVocabulary, context: ReleaseContext,
    progress: Progress | None = None, groups: Sequence[str] | None = None,
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> tuple[SmoothedHistogramDensity | RFFDensity, dict[str, Any]]:
    """Step 3 (ε_kde): the per-class DP density for the chosen method; returns it with the public choices made
    (:func:`~dpkps_core.method.density_plan.density_plan`: bandwidth, features, expected error). ``groups``: a person per
    document (person-level unit, docs/DESIGN.md §2). With ``context.ledger``, the plan's event is charged before
    ``context.noise`` draws (docs/DESIGN.md §2.0); the mechanism itself then runs without a ledger."""
    plan = density_plan(config, n_classes=len(classes), private_vocabulary=private_vocabulary, embeddings=embeddings)
    event = plan.event(config, classes=len(classes), private_vocabulary_size=int(embeddings.shape[0]),
                       neighbouring=neighbouring)
    if context.ledger is not None:
        context.ledger.charge(event)
    args = dict(classes=classes, embeddings=embeddings, epsilon=config.eps_kde, bandwidth=plan.bandwidth, groups=groups,
                context=context.for_draw(), max_per_doc=plan.max_keyphrases_per_doc, neighbouring=neighbouring)
    if plan.density == "histogram":
        return build_smoothed_histogram_density(keyphrases, labels, **args), plan.info()
    return build_rff_density(keyphrases, labels, kind=plan.kind, features=plan.features, length=config.length,
                             progress=progress, **args), plan.info()


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


# ---------------------------------------------------------------------------- the steps as the app takes them
# One function per DP step over the TRAINING part, with the public settings of ``config``: run_sampling() chains
# them for the CLI; the app calls each from its own page (docs/ARCHITECTURE.md). The person unit follows
# ``config.person_column`` (weights from the training part's PRIVATE person ids, never released).


@dataclasses.dataclass(frozen=True)
class VocabularyStep:
    """Step 1's result: Ṽ (a DP release), the PRIVATE true counts it was drawn from (over the admitted documents),
    the local warnings, and how many training documents had no budget left (PRIVATE, local; docs/DESIGN.md §2.0)."""

    private_vocabulary: PrivateVocabulary
    counts: np.ndarray
    local_warnings: tuple[str, ...]
    left_out: int = 0


def vocabulary_step(
    train: Corpus | StreamedCorpus, vocabulary: PublicVocabulary, config: SamplingConfig, *,
    context: ReleaseContext, counts: np.ndarray | None = None, progress: Progress | None = None,
) -> VocabularyStep:
    """Step 1 (ε_voc, [DP-KPS] §2 Step 1): the public settings are checked (N ≤ |V|…; such a refusal costs
    nothing), then :func:`~dpkps_core.dp.release.release` (docs/DESIGN.md §2.0): the training part's units admitted
    (those without budget left are left out), the admitted documents' first-S-distinct term counts over V (the
    streaming vocabulary pass, in memory or over a :class:`~dpkps_core.method.training_source.StreamedCorpus`),
    Ṽ's event charged, then its noise. The local advisory checks describe the counts the release saw. ``context``:
    the ledger that admits and is charged, and the noise source. ``counts``: the counts already computed for the
    same part, V and S; used only when no unit was left out."""
    epsilon, terms_per_doc, size = check_vocabulary_settings(
        epsilon=config.eps_voc, terms_per_doc=config.terms_per_doc, size=config.vocab_size,
        vocabulary_size=len(vocabulary), selection_rule=config.selection_rule)
    if counts is not None and np.shape(counts) != (len(vocabulary),):
        raise ParameterError(f"counts has shape {np.shape(counts)}, expected ({len(vocabulary)},) — one per "
                             "term of V.")
    unit = _unit(train, config)
    done = release(
        lambda: admit_part(train, config, context.ledger, epsilon, "the private vocabulary step"),
        statistic=lambda part: admitted_term_counts(part, vocabulary, terms_per_doc=terms_per_doc, progress=progress,
                                                 given=counts),
        event=vocabulary_event(epsilon=epsilon, terms_per_doc=terms_per_doc, size=size, vocabulary_name=vocabulary.name,
                               vocabulary_size=len(vocabulary), selection_rule=config.selection_rule,
                               sampler=context.noise.sampler, neighbouring=unit),
        draw=lambda part, counts: build_private_vocabulary(  # no ledger: release() charged the event
            (), vocabulary, eps_voc=epsilon, terms_per_doc=terms_per_doc, vocab_size=size,
            context=context.for_draw(), selection_rule=config.selection_rule, progress=progress, counts=counts,
            neighbouring=unit),
    )
    part, counts = done.admitted, done.statistic
    # the data checks describe what the release saw; when every document was left out, the note below says why
    warnings = (list(_local_warnings(part.documents, part.classes, part.labels, counts,
                                     vocabulary_name=vocabulary.name)) if part.documents or not len(train) else [])
    note = part.left_out_note("the private vocabulary (ε_voc)")
    if note:
        warnings.insert(0, note)
    return VocabularyStep(done.value, counts, tuple(warnings), part.left_out)


@dataclasses.dataclass(frozen=True)
class DensityStep:
    """Steps 2–3's result: each admitted training document's Ṽ keyphrases (PRIVATE), Ṽ's embeddings, the DP
    density and the public choices it was built with, the seconds each part took, and how many training
    documents had no budget left (PRIVATE, local; docs/DESIGN.md §2.0) with its local note."""

    keyphrases: Keyphrases
    embeddings: np.ndarray
    density: SmoothedHistogramDensity | RFFDensity
    info: dict[str, Any]
    timings: dict[str, float]
    left_out: int = 0
    local_warnings: tuple[str, ...] = ()


def seeded_embedding_cache(persistent: EmbeddingCache | None = None) -> MemoryEmbeddingCache:
    """The embedding cache of a seeded (demo) run: in memory only. A seeded Ṽ is not a DP release, so its terms
    must not be stored at rest (docs/PRIVACY.md); the persistent cache (``persistent``, else the default one if
    it already exists) is only read, and none is created."""
    if persistent is None:
        path = cache_dir() / "embeddings.sqlite"
        persistent = EmbeddingCache(path) if path.is_file() else None
    return MemoryEmbeddingCache(read_from=persistent)


def density_step(
    train: Corpus | StreamedCorpus, private_vocabulary: PrivateVocabulary, config: SamplingConfig, *,
    classes: Sequence[str], embedder: Embedder, cache: EmbeddingCache | MemoryEmbeddingCache | None = None,
    context: ReleaseContext, progress: Progress | None = None,
) -> DensityStep:
    """Steps 2–3 (ε_kde, [DP-KPS] §2): the embeddings of Ṽ (public model, DP terms), the density's public plan and
    event, then :func:`~dpkps_core.dp.release.release` (docs/DESIGN.md §2.0): the training part's units admitted,
    the admitted documents' keyphrases (the streaming keyphrase pass, held compactly), the event charged, and the
    per-class DP density of ``config``'s method (:func:`build_density`, ``context`` without its ledger: its noise).

    A seeded (demo) noise source embeds Ṽ in memory only: a seeded Ṽ is not a release, so its terms must not
    reach the persistent embedding cache (docs/PRIVACY.md; the cache is then only read)."""
    report = progress or (lambda f, m: None)
    if context.noise.seed is not None and isinstance(cache, EmbeddingCache):
        cache = seeded_embedding_cache(cache)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    embeddings = embed_terms(private_vocabulary.terms, embedder, cache=cache,
                             progress=lambda f, m: report(0.6 * f, m))
    timings["embeddings"] = time.perf_counter() - t
    plan = density_plan(config, n_classes=len(classes), private_vocabulary=private_vocabulary, embeddings=embeddings)
    unit = _unit(train, config)
    event = plan.event(config, classes=len(classes), private_vocabulary_size=int(embeddings.shape[0]),
                       neighbouring=unit)

    def keyphrase_pass(part: AdmittedPart) -> Keyphrases:
        t = time.perf_counter()
        total = max(part.documents, 1)
        out = occurrences_pass(part.chunks(), private_vocabulary.terms,
                               max_per_doc=config.max_keyphrases_per_doc or config.length, workers=part.workers,
                               max_chars=LIMITS["max_chars_per_doc"],
                               progress=(lambda n: report(0.6, f"matched Ṽ in {n / total:.0%} of the training "
                                                                "documents")) if part.several_chunks else None)
        timings["keyphrases"] = time.perf_counter() - t
        return out

    def noised_density(part: AdmittedPart, keyphrases: Keyphrases) -> tuple[Any, dict[str, Any]]:
        t = time.perf_counter()
        report(0.6, "building the per-class DP densities")
        out = build_density(keyphrases, part.labels, classes=classes, embeddings=embeddings, config=config,
                            private_vocabulary=private_vocabulary, context=context.for_draw(),  # charged in release()
                            progress=lambda f, m: report(0.6 + 0.4 * f, m), groups=part.groups, neighbouring=unit)
        timings["density"] = time.perf_counter() - t
        return out

    done = release(lambda: admit_part(train, config, context.ledger, config.eps_kde, "the keyphrase density step"),
                   statistic=keyphrase_pass, event=event, draw=noised_density)
    part, keyphrases, (density, info) = done.admitted, done.statistic, done.value
    note = part.left_out_note("the keyphrase densities (ε_kde)")
    return DensityStep(keyphrases, embeddings, density, info, timings, part.left_out, (note,) if note else ())


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
    # training documents left out of each step's release because their budget was spent (docs/DESIGN.md §2.0): PRIVATE,
    # local counts for the data owner, never in the privacy report or the run folder
    left_out: dict[str, int] = dataclasses.field(default_factory=dict)

    def privacy_report(self) -> PrivacyReport:
        """The public privacy report (DP outputs and public parameters only)."""
        return privacy_report(config=self.config, context=ReleaseContext(noise=self.noise, ledger=self.ledger),
                              private_vocabulary=self.private_vocabulary, vocabulary_name=self.vocabulary_name,
                              density_info=self.density_info, outcome=self.outcome, classes=self.classes,
                              privacy_unit=self.privacy_unit)


def privacy_report(
    *, config: SamplingConfig, context: ReleaseContext, private_vocabulary: PrivateVocabulary,
    vocabulary_name: str, density_info: Mapping[str, Any], outcome: SamplingOutcome, classes: Sequence[str],
    privacy_unit: str = ADD_REMOVE_ONE_DOCUMENT,
) -> PrivacyReport:
    """The public privacy report of a sampling run (DP outputs and public parameters only) — from the pieces, so
    the app's step-by-step run and :func:`run_sampling` write the same report (``privacy_report.json``'s layout,
    :data:`~dpkps_core.records.privacy_report.DPKPS_KEYS`). ``context``: the run's ledger (required) and noise."""
    led = context.require_ledger("A sampling run's privacy report").to_dict()
    by_step = led["epsilon_by_step"]
    details = {
        "epsilon_vocabulary": by_step.get("vocabulary", 0.0), "epsilon_kde": by_step.get("kde", 0.0),
        "epsilon_class_counts": by_step.get("class_counts", 0.0), "noise": context.noise.describe(),
        "mechanisms": sorted({e["mechanism"] for e in led["events"]}),
        "vocabulary": {"name": vocabulary_name, "public_size": private_vocabulary.public_vocabulary_size,
                       "private_size": len(private_vocabulary)},
        "embedding_model": config.embedding_model, "classes": list(classes), "sequences": len(outcome.sequences),
        "uniform_fallback_draws": outcome.uniform_fallbacks,
        # a ledger that reports the corpus's totals to date keeps them apart from this run's events above
        **({"corpus_to_date": led["corpus"]} if "corpus" in led else {}),
    }
    parameters = {**{k: v for k, v in config.to_run_dict().items() if k not in ("corpus",)},
                  **{f"density_{k}": v for k, v in density_info.items()}}
    return PrivacyReport.from_context(context, method=config.method, guarantee=DPKPS_GUARANTEE,
                                      neighbouring=privacy_unit, parameters=parameters, details=details,
                                      layout=DPKPS_KEYS)


def local_warnings(train: Corpus, counts: np.ndarray, *, vocabulary_name: str) -> list[str]:
    """Checks on the PRIVATE training part that protect the user (docs/DESIGN.md §2; docs/PRIVACY.md "Checks").

    They are advisory and local: the release happens whatever they find, for D and for any neighbour alike,
    so that no automatic decision to release depends on one document. Counts only, never text."""
    return _local_warnings(len(train), tuple(train.classes), train.labels, counts, vocabulary_name=vocabulary_name)


def _local_warnings(documents: int, classes: Sequence[str], labels: Sequence[str], counts: np.ndarray, *,
                    vocabulary_name: str) -> list[str]:
    """:func:`local_warnings` from the training documents' number, declared classes and labels."""
    out: list[str] = []
    if documents == 0:
        out.append("No training document belongs to a declared class: every density is pure noise. Check the "
                   "class list and the label column.")
    elif counts.sum() == 0:
        out.append(f"No training document contains any term of the {vocabulary_name} vocabulary: the private "
                   "vocabulary is pure noise. Choose a vocabulary that matches the corpus language and domain.")
    seen = set(labels)
    empty = [c for c in classes if c not in seen]
    if empty and documents:
        out.append(f"{len(empty)} declared class(es) have no training document (e.g. '{empty[0]}'): their "
                   "densities are pure noise.")
    return out


def training_part(corpus: Corpus, config: SamplingConfig) -> Corpus:
    """The documents that feed the DP steps of a run of ``config`` on ``corpus``, as :func:`run_sampling` takes
    them (docs/DESIGN.md §2): the declared classes (``config.classes``, else the corpus's), the training part of the keyed
    split (whole persons with a person column), undeclared labels dropped."""
    if config.classes is not None:
        corpus = corpus.with_classes(config.classes)
    split = split_documents(corpus, test_fraction=config.test_fraction, client_fraction=config.client_fraction,
                            seed=config.split_seed, by_person=bool(config.person_column))
    return corpus.subset(split.train).declared_only()


def _unit(train: Corpus | StreamedCorpus, config: SamplingConfig) -> str:
    """The neighbouring relation of ``config``'s releases on ``train`` (public: the unit setting and the column)."""
    return train.privacy_unit if isinstance(train, StreamedCorpus) or config.person_column else ADD_REMOVE_ONE_DOCUMENT


def _training(corpus: Corpus | StreamedCorpus, config: SamplingConfig
              ) -> tuple[Corpus | StreamedCorpus, CorpusSplit, tuple[str, ...], str, int, int]:
    """(The training part of the declared classes, the split, the declared classes, the neighbouring relation,
    training documents of undeclared labels, training documents truncated for matching) of a run of ``config``:
    from a loaded corpus, or from a streamed one (whose preparing pass decided the same, row by row)."""
    if isinstance(corpus, StreamedCorpus):
        return corpus, corpus.split, corpus.classes, corpus.privacy_unit, corpus.undeclared, corpus.truncated
    if config.classes is not None:
        corpus = corpus.with_classes(config.classes)
    classes = tuple(corpus.classes)  # the declared public list; raises when none was declared
    if config.person_column and corpus.persons is None:
        raise ParameterError(f"The unit of privacy is a person (column '{config.person_column}'), but the corpus was "
                             "loaded without that column; load it with the person column.")
    unit, by_person = _unit(corpus, config), bool(config.person_column)
    split = split_documents(corpus, test_fraction=config.test_fraction, client_fraction=config.client_fraction,
                            seed=config.split_seed, by_person=by_person)
    train_all = corpus.subset(split.train)
    train = train_all.declared_only()  # undeclared labels enter no DP step (docs/DESIGN.md §2)
    return (train, split, classes, unit, len(train_all) - len(train),
            truncated_count(train.texts, LIMITS["max_chars_per_doc"]))


def run_sampling(
    corpus: Corpus | StreamedCorpus, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Embedder,
    cache: EmbeddingCache | None = None, context: ReleaseContext | None = None, progress: Progress | None = None,
) -> SamplingRun:
    """Split → Ṽ (ε_voc) → keyphrases → embeddings of Ṽ → DP density (ε_kde) → sequences.

    ``corpus``: a loaded corpus, or a :class:`~dpkps_core.method.training_source.StreamedCorpus` (a corpus file read in
    chunks, prepared under ``config``: its split and training part are already decided) — the same run either way.

    Refusals on public input (the settings, N > |V|, this run's cap) come first and cost nothing; each DP step
    then admits the units that still have budget (docs/DESIGN.md §2.0) and charges before it draws noise. ``config`` was
    checked when it was built; the run's cap is the ledger's check (this run's total against its cap, here), and the
    vocabulary step checks N against |V| before its admission. ``context``: the run's ledger and noise (default:
    ``config``'s seed and sampler; a new ledger of ``config``'s cap when it has none: a run is always accounted)."""
    noise = context.noise if context is not None else NoiseSource(config.seed, sampler=config.noise_sampler)
    ledger = context.ledger if context is not None and context.ledger is not None else PrivacyLedger(config.epsilon_cap)
    context = ReleaseContext(noise=noise, ledger=ledger)
    require_public(ledger, config.eps_voc + config.eps_kde, "this sampling run")
    report = progress or (lambda f, m: None)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    train, split, classes, unit, undeclared, truncated = _training(corpus, config)
    # progress messages may reach a terminal or log: no exact private size in them (docs/DESIGN.md §2: local figures)
    report(0.02, "split: the training documents of the declared classes feed the DP steps")
    report(0.03, f"matching the training documents against {len(vocabulary):,} public terms")
    voc = vocabulary_step(train, vocabulary, config, context=context, progress=lambda f, m: report(0.02 + 0.3 * f, m))
    pv = voc.private_vocabulary
    timings["vocabulary"] = time.perf_counter() - t
    dens = density_step(train, pv, config, classes=classes, embedder=embedder, cache=cache, context=context,
                        progress=lambda f, m: report(0.35 + 0.4 * f, m))
    timings.update(dens.timings)
    embeddings, density, info = dens.embeddings, dens.density, dens.info
    t = time.perf_counter()
    outcome = sample_sequences(density, terms=pv.terms, embeddings=embeddings, config=config, rng=noise.child(),
                               progress=lambda f, m: report(0.75 + 0.24 * f, m))
    timings["sampling"] = time.perf_counter() - t
    report(1.0, f"{len(outcome.sequences):,} sequences sampled")
    return SamplingRun(config, split, ledger, noise, pv, embeddings, density, info, outcome, classes, timings,
                       vocabulary.name, truncated, undeclared_documents=undeclared,
                       local_warnings=voc.local_warnings + dens.local_warnings, privacy_unit=unit,
                       left_out={"vocabulary": voc.left_out, "kde": dens.left_out})


def write_run_folder(run: SamplingRun, out_dir: str | Path) -> Path:
    """Write the run folder of a whole :class:`SamplingRun` (see :func:`write_run_files`)."""
    return write_run_files(out_dir, config=run.config, split=run.split, private_vocabulary=run.private_vocabulary,
                           outcome=run.outcome, report=run.privacy_report())


def write_run_files(out_dir: str | Path, *, config: SamplingConfig, split: CorpusSplit,
                    private_vocabulary: PrivateVocabulary, outcome: SamplingOutcome,
                    report: PrivacyReport | Mapping[str, Any]) -> Path:
    """Write the run folder (owner-only permissions; :mod:`dpkps_core.records.runfolder` owns its files): sequences,
    privacy report (:func:`privacy_report`), Ṽ, config, split (private). The CLI writes a whole run, the app the
    pieces it built one step at a time."""
    folder = RunFolder(runfolder.ensure_private_dir(out_dir))
    runfolder.write_jsonl(folder.sequences, (s.to_dict() for s in outcome.sequences))
    runfolder.write_json(folder.privacy_report,
                         report.to_dict() if isinstance(report, PrivacyReport) else dict(report))
    runfolder.write_json(folder.vocabulary, private_vocabulary.to_dict())
    config_dict = config.to_run_dict()  # a user vocabulary file by name + SHA-256, never its local path
    corpus_file = Path(config.corpus)
    if not config.corpus.startswith("demo:") and corpus_file.is_file():
        # lets the LLM step refuse the private corpus as a few-shot file; path and hash never reach the bundle
        config_dict["corpus_path"] = str(corpus_file.resolve())
        with corpus_file.open("rb") as fh:  # in blocks: a corpus of gigabytes is never held whole
            config_dict["corpus_sha256"] = hashlib.file_digest(fh, "sha256").hexdigest()
    runfolder.write_json(folder.config, config_dict)
    split.save(folder.split)  # private: never exported
    return folder.path
