"""The release path's mechanism functions in pipeline.py (docs/TESTING.md "Mutation
testing"; docs/DESIGN.md §2, §2.0; [DP-KPS] §2 Steps 1–3): the term counts and keyphrases (S, M, the character limit, the
person unit), the private vocabulary and density builders (what they pass on to the mechanism, compared with the
mechanism called directly on the same seed), the admission refusal, and the two steps the app takes (their
refusals before admission, local notes, progress, timings and the seeded run's in-memory embedding cache)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from dpkps_core.method import pipeline
from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.method.density_plan import density_plan
from dpkps_core.dp.histogram import build_smoothed_histogram_density
from dpkps_core.dp.kde import build_rff_density
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import EmbeddingCache, HashingEmbedder, embed_terms
from dpkps_core.errors import ParameterError
from dpkps_core.method.vocabulary import PublicVocabulary

TERMS = tuple(f"term{i}" for i in range(12))
VOCAB = PublicVocabulary("v", TERMS, "test", "test")
PERSON_UNIT = "add/remove all documents of one person (identified by column 'patient')"


def _corpus(n: int = 36, *, persons: bool = False, classes: tuple[str, ...] = ("a", "b")) -> Corpus:
    """Each document holds four terms of V; with ``persons`` three documents per person."""
    texts = tuple(f"note {i} on term{i % 12} then term{(i * 5 + 1) % 12} and term{(i * 7 + 2) % 12} "
                  f"with term{(i + 3) % 12}" for i in range(n))
    labels = tuple(("a", "b")[i % 2] for i in range(n))
    who = tuple(f"p{i // 3}" for i in range(n)) if persons else None
    return Corpus(texts, labels, "toy", "tests", public_classes=classes, persons=who,
                  person_column="patient" if persons else None)


def _config(**kw: Any) -> SamplingConfig:
    base: dict[str, Any] = dict(corpus="toy", vocabulary="v", eps_voc=2.0, eps_kde=2.0, terms_per_doc=2,
                                vocab_size=8, per_class=2, length=2, remove_stopwords=False, junk_filter=False,
                                bandwidth=0.5, density="histogram")
    base.update(kw)
    return SamplingConfig(**base).validate()


class LeaveOutLedger(PrivacyLedger):
    """An in-memory ledger whose filter leaves out the units for which ``drop`` is true, logging each admission."""

    def __init__(self, drop: Any = lambda unit: False) -> None:
        super().__init__(None)
        self.drop = drop
        self.admissions: list[tuple[str, int]] = []

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        mask = super().admit(units, epsilon, what=what) & np.array([not self.drop(u) for u in units], dtype=bool)
        self.admissions.append((what, int(mask.sum())))
        return mask


# ------------------------------------------------------------------------------------------ counts, keyphrases

def test_term_counts_read_only_the_first_max_chars_of_a_document() -> None:
    limit = LIMITS["max_chars_per_doc"]
    texts = ["term1 " + "x" * limit + " term2"]
    for groups in (None, ["p0"]):
        counts = pipeline.term_counts(texts, VOCAB, terms_per_doc=3, groups=groups)
        assert counts[1] == 1 and counts[2] == 0 and counts.sum() == 1
        assert counts.dtype == np.int64 and counts.shape == (12,)


def test_person_counts_take_each_persons_first_s_distinct_terms() -> None:
    texts = ["term1 term2", "term3 term1", "term4"]
    counts = pipeline.term_counts(texts, VOCAB, terms_per_doc=2, groups=["p", "p", "q"])
    assert counts.tolist() == [0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0] and counts.dtype == np.int64


def test_keyphrases_keep_repeats_in_text_order_up_to_m_and_the_character_limit() -> None:
    pv = dataclasses.replace(_private_vocabulary(), terms=("term1", "term2", "term3"))
    limit = LIMITS["max_chars_per_doc"]
    kp = pipeline.extract_keyphrases(["term2 term1 term2 term3 term1", "term3 " + "x" * limit + " term1"], pv,
                                     max_per_doc=3)
    assert kp == [[1, 0, 1], [2]]


# ------------------------------------------------------------------------------------------ the private vocabulary

def _private_vocabulary(**kw: Any):
    args: dict[str, Any] = dict(eps_voc=2.0, terms_per_doc=2, vocab_size=6,
                                context=ReleaseContext(noise=NoiseSource(11), ledger=PrivacyLedger()))
    args.update(kw)
    return pipeline.build_private_vocabulary(_corpus().texts, VOCAB, **args)


def test_private_vocabulary_defaults_and_settings_reach_the_release() -> None:
    progress: list[tuple[float, str]] = []
    pv = _private_vocabulary(progress=lambda f, m: progress.append((f, m)))
    assert pv.selection_rule == "top-n" and pv.public_vocabulary == "v" and pv.public_vocabulary_size == 12
    assert progress == [(0.05, "matching the training documents against 12 public terms"),
                        (0.8, "adding Laplace noise to every term of the public vocabulary"),
                        (1.0, f"private vocabulary of {len(pv)} terms")]
    assert _private_vocabulary(selection_rule="noise-floor").selection_rule == "noise-floor"


class FixedMatcher:
    """A matcher whose histogram is fixed (all mass on term11, which no text holds)."""

    def counts_first_distinct(self, texts: Sequence[str], S: int, *, max_chars: int | None = None) -> np.ndarray:
        out = np.zeros(12, dtype=np.int64)
        out[11] = 500
        return out


def test_the_matcher_and_the_persons_given_are_the_ones_counted() -> None:
    fixed = _private_vocabulary(matcher=FixedMatcher())
    direct = _private_vocabulary(counts=FixedMatcher().counts_first_distinct([], 2))
    assert fixed.terms == direct.terms and fixed.noisy_counts.tolist() == direct.noisy_counts.tolist()
    assert fixed.terms[0] == "term11"
    corpus = _corpus(persons=True)
    grouped = _private_vocabulary(groups=corpus.persons)
    by_person = pipeline.term_counts(corpus.texts, VOCAB, terms_per_doc=2, groups=corpus.persons)
    assert by_person.sum() < pipeline.term_counts(corpus.texts, VOCAB, terms_per_doc=2).sum()
    assert grouped.noisy_counts.tolist() == _private_vocabulary(counts=by_person).noisy_counts.tolist()


# ------------------------------------------------------------------------------------------ the density

def _density_inputs(config: SamplingConfig, corpus: Corpus) -> tuple[list[list[int]], np.ndarray, Any]:
    pv = _private_vocabulary()
    emb = embed_terms(pv.terms, HashingEmbedder(dim=8))
    kp = pipeline.extract_keyphrases(corpus.texts, pv, max_per_doc=10)
    return kp, emb, pv


def test_histogram_density_truncates_to_m_and_weights_persons_as_the_mechanism_does() -> None:
    corpus = _corpus(persons=True)
    cfg = _config(max_keyphrases_per_doc=2, person_column="patient")
    kp, emb, pv = _density_inputs(cfg, corpus)
    assert max(len(k) for k in kp) > 2
    ledger = PrivacyLedger()
    density, info = pipeline.build_density(kp, corpus.labels, classes=("a", "b"), embeddings=emb, config=cfg,
                                           private_vocabulary=pv,
                                           context=ReleaseContext(noise=NoiseSource(3), ledger=ledger),
                                           groups=corpus.persons, neighbouring=PERSON_UNIT)
    direct = build_smoothed_histogram_density(kp, corpus.labels, classes=("a", "b"), embeddings=emb, epsilon=2.0,
                                              bandwidth=0.5,
                                              context=ReleaseContext(noise=NoiseSource(3), ledger=PrivacyLedger()),
                                              max_per_doc=2, groups=corpus.persons, neighbouring=PERSON_UNIT)
    assert density.noisy_histograms.tolist() == direct.noisy_histograms.tolist()
    assert info["max_keyphrases_per_doc"] == 2 and ledger.events[-1].neighbouring == PERSON_UNIT


def test_rff_density_gets_m_persons_progress_and_the_plan_from_the_vocabulary() -> None:
    corpus = _corpus(persons=True)
    cfg = _config(density="rff", bandwidth=None, max_keyphrases_per_doc=3, person_column="patient")
    kp, emb, pv = _density_inputs(cfg, corpus)
    assert max(len(k) for k in kp) == 3  # M = 3 truncates nothing here, the default M = L = 2 would
    progress: list[tuple[float, str]] = []
    ledger = PrivacyLedger()
    density, info = pipeline.build_density(kp, corpus.labels, classes=("a", "b"), embeddings=emb, config=cfg,
                                           private_vocabulary=pv,
                                           context=ReleaseContext(noise=NoiseSource(3), ledger=ledger),
                                           progress=lambda f, m: progress.append((f, m)), groups=corpus.persons,
                                           neighbouring=PERSON_UNIT)
    plan = density_plan(cfg, n_classes=2, private_vocabulary=pv, embeddings=emb)
    assert plan.features and info["features"] == plan.features and info["class_size_estimate"] is not None
    direct = build_rff_density(kp, corpus.labels, classes=("a", "b"), embeddings=emb, kind=plan.kind, epsilon=2.0,
                               bandwidth=plan.bandwidth, features=plan.features, length=2,
                               context=ReleaseContext(noise=NoiseSource(3), ledger=PrivacyLedger()), max_per_doc=3,
                               groups=corpus.persons,
                               neighbouring=PERSON_UNIT)
    assert density.single_term_scores(emb).tolist() == direct.single_term_scores(emb).tolist()
    assert progress and all(isinstance(m, str) for _, m in progress)
    assert ledger.events[-1].neighbouring == PERSON_UNIT


def test_rff_density_refuses_a_zero_bandwidth() -> None:
    corpus = _corpus()
    cfg = _config(density="rff", bandwidth=0.0, features=16)
    kp, emb, pv = _density_inputs(cfg, corpus)
    with pytest.raises(ParameterError, match=r"^The RFF DP-KDE needs a bandwidth σ > 0\.$"):
        pipeline.build_density(kp, corpus.labels, classes=("a", "b"), embeddings=emb, config=cfg,
                               private_vocabulary=pv,
                               context=ReleaseContext(noise=NoiseSource(3), ledger=PrivacyLedger()))
    ok = _config(density="rff", bandwidth=1.0, features=16)
    density, _ = pipeline.build_density(kp, corpus.labels, classes=("a", "b"), embeddings=emb, config=ok,
                                        private_vocabulary=pv,
                                        context=ReleaseContext(noise=NoiseSource(3), ledger=PrivacyLedger()))
    assert density.bandwidth == 1.0


# ------------------------------------------------------------------------------------------ the vocabulary step

def test_a_person_unit_needs_the_person_column() -> None:
    with pytest.raises(ParameterError, match=r"^The unit of privacy is a person \(column 'patient'\), but the "
                                             r"corpus was loaded without that column; load it with the person "
                                             r"column\.$"):
        pipeline.vocabulary_step(_corpus(), VOCAB, _config(person_column="patient"),
                                 context=ReleaseContext(noise=NoiseSource(1), ledger=PrivacyLedger()))


def test_vocabulary_step_refuses_bad_settings_before_admitting_anyone() -> None:
    ledger = LeaveOutLedger()
    bad = dataclasses.replace(_config(), selection_rule="bogus")
    with pytest.raises(ParameterError, match=r"^Unknown vocabulary selection rule 'bogus'"):
        pipeline.vocabulary_step(_corpus(), VOCAB, bad, context=ReleaseContext(noise=NoiseSource(1), ledger=ledger))
    with pytest.raises(ParameterError, match=r"^counts has shape \(3,\), expected \(12,\) — one per term of V\.$"):
        pipeline.vocabulary_step(_corpus(), VOCAB, _config(),
                                 context=ReleaseContext(noise=NoiseSource(1), ledger=ledger),
                                 counts=np.zeros(3))
    assert ledger.admissions == [] and ledger.events == ()


def test_vocabulary_step_notes_left_out_documents_first_then_the_data_checks() -> None:
    corpus = _corpus(classes=("a", "b", "c"))
    ledger = LeaveOutLedger(drop=lambda unit: "note 0 " in unit)
    progress: list[tuple[float, str]] = []
    cfg = _config(selection_rule="noise-floor")
    step = pipeline.vocabulary_step(corpus, VOCAB, cfg, context=ReleaseContext(noise=NoiseSource(1), ledger=ledger),
                                    progress=lambda f, m: progress.append((f, m)))
    assert step.left_out == 1 and ledger.admissions == [("the private vocabulary step", 35)]
    assert step.local_warnings == (
        "1 document(s) had no budget left and were left out of the private vocabulary (ε_voc) (private, local: "
        "this count is never released).",
        "1 declared class(es) have no training document (e.g. 'c'): their densities are pure noise.")
    assert step.private_vocabulary.selection_rule == "noise-floor"
    assert [f for f, _ in progress] == [0.8, 1.0]  # the step's own counts are passed in: no matching here


def test_vocabulary_step_warns_when_no_document_holds_a_term_of_v() -> None:
    corpus = Corpus(("nothing here", "nor here"), ("a", "b"), "toy", "tests", public_classes=("a", "b"))
    step = pipeline.vocabulary_step(corpus, VOCAB, _config(),
                                    context=ReleaseContext(noise=NoiseSource(1), ledger=PrivacyLedger()))
    assert step.local_warnings == ("No training document contains any term of the v vocabulary: the private "
                                   "vocabulary is pure noise. Choose a vocabulary that matches the corpus language "
                                   "and domain.",)


# ------------------------------------------------------------------------------------------ the density step

def _density_step(cfg: SamplingConfig, corpus: Corpus, **kw: Any) -> pipeline.DensityStep:
    args: dict[str, Any] = dict(classes=("a", "b"), embedder=HashingEmbedder(dim=8),
                                context=ReleaseContext(noise=NoiseSource(5), ledger=PrivacyLedger()))
    args.update(kw)
    return pipeline.density_step(corpus, _private_vocabulary(), cfg, **args)


def test_density_step_truncates_keyphrases_to_m_else_to_the_length() -> None:
    corpus, pv = _corpus(), _private_vocabulary()
    assert max(len(k) for k in pipeline.extract_keyphrases(corpus.texts, pv, max_per_doc=10)) > 2
    for m, cfg in ((1, _config(length=1)), (2, _config(length=1, max_keyphrases_per_doc=2))):
        assert _density_step(cfg, corpus).keyphrases == pipeline.extract_keyphrases(corpus.texts, pv, max_per_doc=m)


def test_density_step_notes_left_out_documents_and_is_quiet_otherwise() -> None:
    corpus = _corpus()
    assert _density_step(_config(), corpus).local_warnings == ()
    ledger = LeaveOutLedger(drop=lambda unit: "note 1 " in unit or "note 2 " in unit)
    step = _density_step(_config(), corpus, context=ReleaseContext(noise=NoiseSource(5), ledger=ledger))
    assert step.left_out == 2 and ledger.admissions == [("the keyphrase density step", 34)]
    assert step.local_warnings == ("2 document(s) had no budget left and were left out of the keyphrase densities "
                                   "(ε_kde) (private, local: this count is never released).",)


def test_density_step_weights_persons() -> None:
    corpus = _corpus(persons=True)
    cfg = _config(person_column="patient")
    pv = _private_vocabulary()
    ledger = PrivacyLedger()
    step = pipeline.density_step(corpus, pv, cfg, classes=("a", "b"), embedder=HashingEmbedder(dim=8),
                                 context=ReleaseContext(noise=NoiseSource(5), ledger=ledger))
    direct = build_smoothed_histogram_density(step.keyphrases, corpus.labels, classes=("a", "b"),
                                              embeddings=step.embeddings, epsilon=2.0, bandwidth=0.5,
                                              context=ReleaseContext(noise=NoiseSource(5), ledger=PrivacyLedger()),
                                              max_per_doc=2,
                                              groups=corpus.persons, neighbouring=PERSON_UNIT)
    assert step.density.noisy_histograms.tolist() == direct.noisy_histograms.tolist()
    assert ledger.events[-1].neighbouring == PERSON_UNIT


def test_density_step_plans_an_auto_rff_from_the_vocabulary_and_its_embeddings() -> None:
    cfg = _config(density="rff", bandwidth=None)
    step = _density_step(cfg, _corpus())
    assert step.info["bandwidth"] > 0 and step.info["features"] >= 1
    assert step.info["class_size_estimate"] is not None


def test_density_step_progress_and_timings() -> None:
    vocab = PublicVocabulary("big", tuple(f"word{i}" for i in range(400)), "test", "test")
    texts = tuple(" ".join(f"word{(i * 13 + j) % 400}" for j in range(30)) for i in range(60))
    corpus = Corpus(texts, tuple(("a", "b")[i % 2] for i in range(60)), "toy", "tests", public_classes=("a", "b"))
    pv = pipeline.build_private_vocabulary(texts, vocab, eps_voc=5.0, terms_per_doc=10, vocab_size=300,
                                           context=ReleaseContext(noise=NoiseSource(2), ledger=PrivacyLedger()))
    assert len(pv) == 300  # two batches of new embeddings (256 + 44)
    progress: list[tuple[float, str]] = []
    cfg = _config(density="rff", method="iterative-log", length=4, bandwidth=0.5, features=32, vocabulary="big")
    t0 = time.perf_counter()
    step = pipeline.density_step(corpus, pv, cfg, classes=("a", "b"), embedder=HashingEmbedder(dim=8),
                                 context=ReleaseContext(noise=NoiseSource(5), ledger=PrivacyLedger()),
                                 progress=lambda f, m: progress.append((f, m)))
    wall = time.perf_counter() - t0
    build = progress.index((0.6, "building the per-class DP densities"))
    embedding, density = progress[:build], progress[build + 1:]
    assert [m for _, m in embedding] == ["embedded 256/300 new terms", "embedded 300/300 new terms"]
    assert [f for f, _ in embedding] == pytest.approx([0.6 * 256 / 300, 0.6])
    members = step.info["ensemble_members"]
    assert members > 1 and [m for _, m in density] == [
        f"DP-KDE member {j}/{members} ({b} block(s))" for j, b in enumerate(_blocks(step.density), start=1)]
    assert [f for f, _ in density] == pytest.approx([0.6 + 0.4 * j / members for j in range(1, members + 1)])
    assert set(step.timings) == {"embeddings", "keyphrases", "density"}
    assert all(0.0 <= v <= wall for v in step.timings.values())


def _blocks(density: Any) -> list[int]:
    """Each ensemble member's number of blocks, as the density records it."""
    return [m.blocks for m in density.members]


# ------------------------------------------------------------------------------------------ embedding caches

def _sentinel_cache(tmp_path: Path, pv: Any) -> tuple[EmbeddingCache, np.ndarray]:
    cache = EmbeddingCache(tmp_path / "embeddings.sqlite")
    vec = np.zeros((1, 8), dtype=np.float32)
    vec[0, 3] = 1.0
    cache.put_many("hashing-test", [pv.terms[0]], vec)
    return cache, vec[0]


def test_a_seeded_density_step_reads_the_persistent_cache_but_never_writes_it(tmp_path: Path) -> None:
    pv = _private_vocabulary()
    cache, vec = _sentinel_cache(tmp_path, pv)
    step = _density_step(_config(), _corpus(), cache=cache,
                         context=ReleaseContext(noise=NoiseSource(5), ledger=PrivacyLedger()))
    assert step.embeddings[0].tolist() == vec.tolist()  # read from the persistent cache
    assert set(cache.get_many("hashing-test", list(pv.terms), 8)) == {pv.terms[0]}  # Ṽ not stored at rest


def test_an_unseeded_density_step_uses_the_persistent_cache(tmp_path: Path) -> None:
    pv = _private_vocabulary()
    cache, vec = _sentinel_cache(tmp_path, pv)
    step = _density_step(_config(), _corpus(), cache=cache,
                         context=ReleaseContext(noise=NoiseSource(sampler="numpy"), ledger=PrivacyLedger()))
    assert step.embeddings[0].tolist() == vec.tolist()
    assert set(cache.get_many("hashing-test", list(pv.terms), 8)) == set(pv.terms)  # a DP release: stored
