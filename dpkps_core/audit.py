"""Empirical privacy audit of the implementation on the user's own corpus and settings (issue 11 §5).

What it does (docs/PRIVACY.md, "Empirical audit"):

* **Neighbour audit.** Around the user's corpus D it builds two neighbouring corpora under the add/remove-one-
  document relation (DESIGN §2): D⁻ = D without its most influential training document (the one with the most
  distinct rare terms of V) and D⁺ = D + one synthetic canary document made of rare public terms of V that occur
  nowhere in D. It runs the exact release path, :func:`dpkps_core.pipeline.run_sampling` (split → Ṽ (ε_voc) →
  keyphrases → DP density (ε_kde) → sequences, the same functions and settings as a real run), many times with
  fresh noise on each neighbour, in three stages under one Bonferroni correction: the *vocabulary stage*
  (``build_private_vocabulary`` alone: cheap, thousands of trials; against ε_voc), the *density stage*
  (``extract_keyphrases`` → ``build_density`` → ``sample_sequences`` on one fixed Ṽ, no new embeddings; against
  ε_kde) and the *release stage* (the whole ``run_sampling``; against ε_voc + ε_kde). Per trial it computes a few
  statistics of the *released* outputs only (Ṽ with its noisy counts, the sequences), weighted by how the
  neighbours' training term (or per-class keyphrase) counts differ: a censored, likelihood-ratio-like sum of
  noisy counts, the number of those terms in Ṽ, and their (per-class) sampled frequency. Each statistic's
  event {s ≥ τ} (or its complement, in either direction) is chosen on a separate
  *selection* set of trials; on the remaining *evaluation* trials the standard construction gives
  ε_lb = ln(CP_lower(p_num) / CP_upper(p_den)) with one-sided Clopper–Pearson bounds, Bonferroni-corrected over
  every bound computed, so max ε_lb is a valid lower bound on the true ε at the stated confidence. If the
  implementation were ε-DP, ε_lb ≤ ε with probability ≥ the confidence; ε_lb > ε is a **violation**.
* **Canary exposure** ("Canary's Echo", Meeus et al. 2024): k canary documents with rare public keyphrase
  combinations planted in a copy of the corpus; how often their terms and term pairs appear in Ṽ and in the
  sampled sequences, next to the same counts on runs of D without them.

It never touches the real release: every trial runs on an in-memory copy with its own throwaway
:class:`~dpkps_core.dp.ledger.PrivacyLedger` (the session's and the persistent ledgers are charged nothing),
writes no run folder, and embeds Ṽ through an in-memory dict (:class:`MemoryEmbedder`) — never the persistent
:class:`~dpkps_core.embeddings.EmbeddingCache`, since noisy vocabularies of neighbouring corpora are functions of
private counts. The audit's results read the private corpus: they are PRIVATE (local only, never in a bundle).
An audit can show that an implementation leaks more than claimed; it can never prove that it does not.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from dpkps_core import pipeline
from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_positive_int
from dpkps_core.embeddings import embed_terms
from dpkps_core.errors import ParameterError
from dpkps_core.pipeline import LIMITS, SamplingConfig
from dpkps_core.vocabulary import PublicVocabulary
from dpkps_core.progress import Progress


AUDIT_NOTE = ("private audit on the real corpus — local only, never part of a release bundle; it charges nothing "
              "to the privacy ledger (every trial runs on a copy with its own throwaway ledger)")
LIMITATION_NOTE = ("An empirical audit gives a LOWER bound on the ε the implementation actually has: it can show a "
                   "leak larger than claimed, never prove that there is none.")
VOCABULARY_STATISTICS = ("vocabulary_score", "vocabulary_members")
DENSITY_STATISTICS = ("class_sampled_frequency",)
STATISTICS = ("sampled_frequency",)
STAGES = {  # stage -> (statistics, what it runs, which ε it is bounded against)
    "vocabulary": (VOCABULARY_STATISTICS, "pipeline.build_private_vocabulary alone", "ε_voc"),
    "density": (DENSITY_STATISTICS, "pipeline.extract_keyphrases + build_density + sample_sequences on a fixed Ṽ",
                "ε_kde"),
    "release": (STATISTICS, "pipeline.run_sampling, the whole release path", "ε"),
}
STATISTIC_LABELS = {
    "vocabulary_score": "Σ Δ·(noisy count in Ṽ, censored at Ṽ's cut)",
    "vocabulary_members": "Σ Δ·[term ∈ Ṽ]",
    "sampled_frequency": "Σ Δ·(occurrences in the sampled sequences)",
    "class_sampled_frequency": "Σ Δ_class·(occurrences in that class's sampled sequences)",
}
PAIRS = {
    "remove": ("D⁻", "D", "D vs D without its most influential training document"),
    "add": ("D", "D⁺", "D vs D plus one canary document of rare public terms"),
}
NEIGHBOURS = ("D", "D⁻", "D⁺", "D+k")
SAMPLER_CHOICES = ("numpy", "opendp", "release")
MAX_WEIGHTED_TERMS = 500        # statistics use at most this many terms with the largest |Δ|
MAX_THRESHOLDS = 256            # candidate thresholds per statistic on the selection trials
MIN_TRIALS = 4
_CANARY_ATTEMPTS = 6


class Cancel(Protocol):
    def is_set(self) -> bool: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditSettings:
    """Public settings of an audit (issue 11 §5).

    Attributes:
        trials: runs of the release path per neighbour; ``None`` chooses as many as fit ``time_budget``
            (measured on the first rounds, at least ``min_trials``; if the machine slows down, the trials stop
            at the budget once ``min_trials`` are done).
        time_budget: seconds the whole audit may take when ``trials`` is ``None``.
        vocabulary_trials: trials of the vocabulary stage per neighbour (cheap: no embeddings, no density);
            ``None`` fits ``vocabulary_time_budget`` (at most ``max_vocabulary_trials``).
        density_trials: trials of the density stage per neighbour (density + sampling on a fixed Ṽ, no new
            embeddings); ``None`` fits ``density_time_budget`` (at most ``max_density_trials``).
        confidence: confidence of the lower bound (default 95 %).
        selection_fraction: share of the trials used only to choose each event's threshold and direction.
        canary_documents: k canary documents of the exposure test (0 skips it).
        canary_terms: rare public terms per canary document (default S, the most one document contributes).
        noise_sampler: ``"numpy"`` (default: fast, same distributions), ``"opendp"``, or ``"release"`` (the
            sampler of the config). OpenDP's discrete Laplace over 50k terms takes seconds per trial here.
        seed: seed of the audit's noise and canary choice, for reproducible tests; ``None`` = OS entropy.
    """

    trials: int | None = None
    time_budget: float = 150.0
    vocabulary_trials: int | None = None
    vocabulary_time_budget: float = 20.0
    max_vocabulary_trials: int = 3000
    density_trials: int | None = None
    density_time_budget: float = 30.0
    max_density_trials: int = 2000
    min_trials: int = 8
    max_trials: int = 2000
    confidence: float = 0.95
    selection_fraction: float = 1 / 3
    canary_documents: int = 3
    canary_terms: int | None = None
    noise_sampler: str = "numpy"
    seed: int | None = None

    def validate(self) -> "AuditSettings":
        if self.trials is not None:
            check_positive_int(self.trials, "trials per neighbour", minimum=MIN_TRIALS, maximum=100_000)
        if not (isinstance(self.time_budget, (int, float)) and math.isfinite(self.time_budget) and self.time_budget > 0):
            raise ParameterError(f"The audit's time budget must be a number of seconds > 0, got {self.time_budget!r}.")
        if self.vocabulary_trials is not None:
            check_positive_int(self.vocabulary_trials, "vocabulary-stage trials", minimum=MIN_TRIALS, maximum=1_000_000)
        if not (isinstance(self.vocabulary_time_budget, (int, float)) and math.isfinite(self.vocabulary_time_budget)
                and self.vocabulary_time_budget > 0):
            raise ParameterError("The vocabulary stage's time budget must be a number of seconds > 0, got "
                                 f"{self.vocabulary_time_budget!r}.")
        check_positive_int(self.max_vocabulary_trials, "maximum vocabulary-stage trials", minimum=MIN_TRIALS)
        if self.density_trials is not None:
            check_positive_int(self.density_trials, "density-stage trials", minimum=MIN_TRIALS, maximum=1_000_000)
        if not (isinstance(self.density_time_budget, (int, float)) and math.isfinite(self.density_time_budget)
                and self.density_time_budget > 0):
            raise ParameterError("The density stage's time budget must be a number of seconds > 0, got "
                                 f"{self.density_time_budget!r}.")
        check_positive_int(self.max_density_trials, "maximum density-stage trials", minimum=MIN_TRIALS)
        check_positive_int(self.min_trials, "minimum trials", minimum=MIN_TRIALS)
        check_positive_int(self.max_trials, "maximum trials", minimum=self.min_trials)
        if not (isinstance(self.confidence, (int, float)) and 0.5 <= self.confidence < 1.0):
            raise ParameterError(f"The confidence must be in [0.5, 1), e.g. 0.95; got {self.confidence!r}.")
        if not (isinstance(self.selection_fraction, (int, float)) and 0.05 <= self.selection_fraction <= 0.8):
            raise ParameterError(f"The selection fraction must be in [0.05, 0.8], got {self.selection_fraction!r}.")
        check_positive_int(self.canary_documents, "canary documents", minimum=0, maximum=50)
        if self.canary_terms is not None:
            check_positive_int(self.canary_terms, "terms per canary document", maximum=LIMITS["terms_per_doc"])
        if self.noise_sampler not in SAMPLER_CHOICES:
            raise ParameterError(f"Unknown audit noise sampler {self.noise_sampler!r}; choose one of "
                                 f"{', '.join(SAMPLER_CHOICES)}.")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise ParameterError(f"The audit seed must be a non-negative integer, got {self.seed!r}.")
        return self


# ------------------------------------------------------------------------------------------ statistics helpers

def clopper_pearson(hits: int, trials: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds (each holds with probability ≥ 1 − ``alpha``) for a binomial rate."""
    from scipy.stats import beta

    if trials <= 0:
        return 0.0, 1.0
    lower = 0.0 if hits <= 0 else float(beta.ppf(alpha, hits, trials - hits + 1))
    upper = 1.0 if hits >= trials else float(beta.ppf(1 - alpha, hits + 1, trials - hits))
    return lower, upper


def epsilon_lower_bound(hits_num: int, n_num: int, hits_den: int, n_den: int, alpha: float) -> float:
    """ln(CP_lower(p_num) / CP_upper(p_den)), floored at 0 — an ε lower bound when both bounds hold."""
    lower, _ = clopper_pearson(hits_num, n_num, alpha)
    _, upper = clopper_pearson(hits_den, n_den, alpha)
    if lower <= 0.0 or upper <= 0.0:
        return 0.0
    return max(0.0, math.log(lower / upper))


def max_certifiable_epsilon(trials: int, alpha: float) -> float:
    """The largest ε_lb ``trials`` evaluation trials can give (all hits vs no hits) at level ``alpha``."""
    return epsilon_lower_bound(trials, trials, 0, trials, alpha)


def _cp_bounds_vec(hits: np.ndarray, n: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    from scipy.stats import beta

    hits = np.asarray(hits, dtype=np.float64)
    with np.errstate(all="ignore"):
        lower = np.where(hits <= 0, 0.0, beta.ppf(alpha, np.maximum(hits, 1), n - hits + 1))
        upper = np.where(hits >= n, 1.0, beta.ppf(1 - alpha, hits + 1, np.maximum(n - hits, 1)))
    return np.nan_to_num(lower), np.nan_to_num(upper, nan=1.0)


def choose_event(values_a: np.ndarray, values_b: np.ndarray, alpha: float) -> dict[str, Any]:
    """Pick, on selection trials only, the threshold τ, side (≥ or <) and direction whose ε bound is largest.

    The event is E = {s ≥ τ} or its complement {s < τ}; the direction says which neighbour's probability is the
    numerator. Scored with the same one-sided Clopper–Pearson construction as the final bound (at ``alpha``),
    falling back to smoothed point estimates when no candidate gives a positive bound."""
    a = np.sort(np.asarray(values_a, dtype=np.float64))
    b = np.sort(np.asarray(values_b, dtype=np.float64))
    cands = np.unique(np.concatenate([a, b]))
    if cands.size > MAX_THRESHOLDS:
        cands = np.unique(np.quantile(cands, np.linspace(0, 1, MAX_THRESHOLDS)))
    na, nb = a.size, b.size
    ge_a = na - np.searchsorted(a, cands, side="left")   # hits of {s ≥ τ}
    ge_b = nb - np.searchsorted(b, cands, side="left")
    options = [  # (side, numerator, hits_num, n_num, hits_den, n_den)
        ("≥", "B", ge_b, nb, ge_a, na), ("≥", "A", ge_a, na, ge_b, nb),
        ("<", "B", nb - ge_b, nb, na - ge_a, na), ("<", "A", na - ge_a, na, nb - ge_b, nb),
    ]
    best: tuple[float, float, int, int] | None = None
    for oi, (_, _, hn, nn, hd, nd) in enumerate(options):
        lo, _ = _cp_bounds_vec(hn, nn, alpha)
        _, up = _cp_bounds_vec(hd, nd, alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.where(lo > 0, np.log(np.maximum(lo, 1e-300) / np.maximum(up, 1e-300)), -np.inf)
            point = np.log((hn + 0.5) / (nn + 1.0)) - np.log((hd + 0.5) / (nd + 1.0))
        i = int(np.argmax(score))
        key = (float(score[i]), -np.inf, oi, i)
        if not np.isfinite(score[i]):
            i = int(np.argmax(point))
            key = (-np.inf, float(point[i]), oi, i)
        if best is None or key[:2] > best[:2]:
            best = key
    assert best is not None
    side, numerator = options[best[2]][0], options[best[2]][1]
    return {"threshold": float(cands[best[3]]), "side": side, "numerator": numerator}


def _event_hits(values: np.ndarray, threshold: float, side: str) -> int:
    v = np.asarray(values, dtype=np.float64)
    return int((v >= threshold).sum() if side == "≥" else (v < threshold).sum())


# ------------------------------------------------------------------------------------------ in-memory embeddings

class MemoryEmbedder:
    """An in-memory dict in front of an embedder: each term is embedded once per audit and never written to disk.

    Noisy vocabularies of neighbouring corpora are functions of private counts, so they must not reach the
    persistent :class:`~dpkps_core.embeddings.EmbeddingCache` (docs/PRIVACY.md)."""

    def __init__(self, embedder: Any) -> None:
        self._inner = embedder
        self.name = embedder.name
        self.dim = embedder.dim
        self._memory: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._memory)

    def encode(self, texts: Sequence[str], batch_size: int = 128) -> np.ndarray:
        texts = list(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in self._memory))
        if missing:
            vecs = np.asarray(self._inner.encode(missing, batch_size=max(int(batch_size or 0), 1)), dtype=np.float32)
            self._memory.update(zip(missing, vecs))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memory[t] for t in texts]).astype(np.float32)


# ------------------------------------------------------------------------------------------ releases of one trial

@dataclasses.dataclass(frozen=True)
class _Release:
    """What one run released (Ṽ with noisy counts, sequences), reduced to what the statistics read."""

    vocab: Mapping[str, float]
    floor: float
    frequency: Counter
    sequence_terms: tuple[frozenset[str], ...]
    keyphrases: int

    @classmethod
    def of(cls, run: Any) -> "_Release":
        pv = run.private_vocabulary
        counts = np.asarray(pv.noisy_counts, dtype=np.float64)
        vocab = dict(zip(pv.terms, counts.tolist()))
        seqs = [s.keyphrases for s in run.outcome.sequences]
        freq: Counter = Counter(k for s in seqs for k in s)
        return cls(vocab, float(counts.min()) if counts.size else 0.0, freq,
                   tuple(frozenset(s) for s in seqs), sum(len(s) for s in seqs))

    @classmethod
    def of_vocabulary(cls, pv: Any) -> "_Release":
        """The vocabulary stage's release: Ṽ with its noisy counts only."""
        counts = np.asarray(pv.noisy_counts, dtype=np.float64)
        return cls(dict(zip(pv.terms, counts.tolist())), float(counts.min()) if counts.size else 0.0, Counter(), (), 0)

    def statistics(self, weights: Mapping[str, float]) -> dict[str, float]:
        score = members = sampled = 0.0
        for term, w in weights.items():
            x = self.vocab.get(term)
            score += w * (self.floor if x is None else x)
            members += w * (x is not None)
            sampled += w * self.frequency.get(term, 0)
        return {"vocabulary_score": score, "vocabulary_members": members, "sampled_frequency": sampled}

    def exposure(self, canaries: Sequence[Sequence[str]]) -> dict[str, Any]:
        in_vocab, occ, pairs = [], [], []
        for terms in canaries:
            ts = set(terms)
            in_vocab.append(sum(t in self.vocab for t in ts))
            occ.append(sum(self.frequency.get(t, 0) for t in ts))
            pairs.append(sum(len(ts & s) >= 2 for s in self.sequence_terms))
        return {"in_vocabulary": in_vocab, "occurrences": occ, "pair_sequences": pairs,
                "keyphrases": self.keyphrases, "sequences": len(self.sequence_terms)}


# ------------------------------------------------------------------------------------------ the result

@dataclasses.dataclass
class AuditResult:
    """The audit's findings (PRIVATE: they read the real corpus). ``to_dict`` is JSON-ready."""

    claimed_epsilon: float
    lower_bound: float
    confidence: float
    violation: bool
    verdict: str
    events: list[dict[str, Any]]
    exposure: dict[str, Any] | None
    info: dict[str, Any]

    def line(self) -> str:
        """The one summary line the CLI prints (format fixed by issue 11 §5)."""
        return f"empirical_epsilon_lower_bound: {self.lower_bound:.3f} (claimed: {self.claimed_epsilon:g})"

    def best_event(self) -> dict[str, Any]:
        return max(self.events, key=lambda e: (e["epsilon_lower_bound"], e["point_estimate"]))

    def to_dict(self) -> dict[str, Any]:
        return {"private": True, "note": AUDIT_NOTE, "limitation": LIMITATION_NOTE,
                "empirical_epsilon_lower_bound": round(self.lower_bound, 6), "claimed_epsilon": self.claimed_epsilon,
                "confidence": self.confidence, "violation": self.violation, "verdict": self.verdict,
                "summary_line": self.line(), "events": self.events, "exposure": self.exposure, **self.info}


def verdict_for(lower_bound: float, claimed: float, confidence: float, max_certifiable: float) -> tuple[bool, str]:
    """The verdict line: a violation when the lower bound exceeds the claimed ε."""
    if lower_bound > claimed + 1e-9:
        return True, (f"VIOLATION: the implementation leaks more than claimed (ε ≥ {lower_bound:.2f} > {claimed:g} at "
                      f"{confidence:.0%} confidence).")
    text = f"consistent with ε = {claimed:g} (empirical lower bound {lower_bound:.2f} at {confidence:.0%} confidence"
    if max_certifiable < claimed:
        text += (f"; with these trials the audit can certify at most ε ≈ {max_certifiable:.2f}, so only leaks "
                 "larger than that would show")
    return False, text + ")."


# ------------------------------------------------------------------------------------------ corpus construction

def declared_classes(corpus: Corpus, config: SamplingConfig) -> list[str]:
    """The public class names the release uses: the config's declared list, else the corpus's."""
    declared = getattr(config, "classes", None)
    return list(declared) if declared else list(corpus.classes)


def _with_extra(corpus: Corpus, texts: Sequence[str], labels: Sequence[str]) -> Corpus:
    """A copy of ``corpus`` with documents appended (every other field, e.g. declared classes, kept); with a
    person column each appended document is a new person of its own."""
    fields: dict[str, Any] = {"texts": tuple(corpus.texts) + tuple(texts), "labels": tuple(corpus.labels) + tuple(labels)}
    if getattr(corpus, "persons", None) is not None:
        fields["persons"] = tuple(corpus.persons) + tuple(f"audit-canary-{j}" for j in range(len(texts)))
    return dataclasses.replace(corpus, **fields, report=None)


def _without(corpus: Corpus, index: int, *, by_person: bool = False) -> tuple[Corpus, list[int]]:
    """A copy of ``corpus`` without document ``index`` (with ``by_person``: without all of its person's
    documents — the neighbouring relation of the person unit). Returns the copy and, per kept document, its
    index in ``corpus``."""
    persons = getattr(corpus, "persons", None)
    if by_person and persons is not None:
        keep = [i for i in range(len(corpus)) if persons[i] != persons[index]]
    else:
        keep = [i for i in range(len(corpus)) if i != index]
    fields: dict[str, Any] = {"texts": tuple(corpus.texts[i] for i in keep),
                              "labels": tuple(corpus.labels[i] for i in keep)}
    if persons is not None:
        fields["persons"] = tuple(persons[i] for i in keep)
    return dataclasses.replace(corpus, **fields, report=None), keep


def _training_part(corpus: Corpus, split: Any, classes: Sequence[str]) -> list[int]:
    """Indices of the documents that fed the DP steps: training part, declared classes only."""
    declared = set(classes)
    return [int(i) for i in split.train if corpus.labels[int(i)] in declared]


def influential_document(corpus: Corpus, train: Sequence[int], vocabulary: PublicVocabulary, *,
                         terms_per_doc: int) -> tuple[int, int]:
    """The training document with the most distinct rare terms of V among its first S (ties: Σ 1/count).

    Returns (corpus index, number of its terms that no other training document has)."""
    if not train:
        raise ParameterError("The audit needs at least one training document of a declared class.")
    lists = vocabulary.matcher.first_distinct([corpus.texts[i] for i in train], terms_per_doc,
                                              max_chars=LIMITS["max_chars_per_doc"])
    counts = Counter(t for terms in lists for t in terms)
    best, best_key = 0, (-1, -1.0)
    for k, terms in enumerate(lists):
        key = (sum(counts[t] == 1 for t in terms), sum(1.0 / counts[t] for t in terms))
        if key > best_key:
            best, best_key = k, key
    return int(train[best]), int(best_key[0])


def rare_public_terms(corpus: Corpus, vocabulary: PublicVocabulary) -> list[str]:
    """Single-word alphabetic terms of V that occur nowhere in ``corpus`` — the rarer half of V first."""
    seen = set()
    for terms in vocabulary.matcher.occurrences(corpus.texts, None, max_chars=LIMITS["max_chars_per_doc"]):
        seen.update(terms)
    terms = vocabulary.terms
    ok = [i for i in range(len(terms)) if i not in seen and terms[i].isalpha() and len(terms[i]) >= 4]
    tail = [i for i in ok if i >= len(terms) // 2]
    pool = tail if len(tail) >= 200 else ok
    return [terms[i] for i in pool]


class _CanaryMaker:
    """Draws canary documents of rare public terms that the matcher reads back exactly (disjoint canaries)."""

    def __init__(self, pool: Sequence[str], vocabulary: PublicVocabulary, rng: np.random.Generator) -> None:
        self._pool = list(pool)
        self._used: set[str] = set()
        self._vocab = vocabulary
        self._rng = rng

    def draw(self, size: int) -> list[str]:
        for _ in range(50):
            free = [t for t in self._pool if t not in self._used]
            if len(free) < size:
                break
            chosen = [free[i] for i in self._rng.choice(len(free), size=size, replace=False)]
            matched = self._vocab.matcher.first_distinct([canary_text(chosen)], LIMITS["terms_per_doc"])[0]
            if sorted(self._vocab.terms[i] for i in matched) == sorted(chosen):
                self._used.update(chosen)
                return chosen
            self._used.update(chosen)  # these combine into a multi-word term: do not try them again
        raise ParameterError(
            f"The public vocabulary has too few rare terms absent from the corpus to build canary documents of "
            f"{size} terms; lower the number of canaries or terms per canary.")


def canary_text(terms: Sequence[str]) -> str:
    """A canary document: its rare public terms in a plain sentence."""
    return " ".join(terms) + "."


# ------------------------------------------------------------------------------------------ the audit

@dataclasses.dataclass
class _Neighbour:
    name: str
    corpus: Corpus
    releases: list[_Release] = dataclasses.field(default_factory=list)
    train: list[int] = dataclasses.field(default_factory=list)


class _Runner:
    """Runs the release path on one neighbour with fresh noise and a throwaway ledger per trial."""

    last_vocabulary: Any = None

    def __init__(self, config: SamplingConfig, vocabulary: PublicVocabulary, embedder: MemoryEmbedder,
                 settings: AuditSettings) -> None:
        self.config, self.vocabulary, self.embedder, self.settings = config, vocabulary, embedder, settings
        self.sampler = (getattr(config, "noise_sampler", "numpy") if settings.noise_sampler == "release"
                        else settings.noise_sampler)
        self._seeds = np.random.SeedSequence(settings.seed) if settings.seed is not None else None
        self.runs = 0

    def noise(self) -> NoiseSource:
        seed = None if self._seeds is None else int(self._seeds.spawn(1)[0].generate_state(1)[0])
        return NoiseSource(seed, sampler=self.sampler)

    def run(self, corpus: Corpus) -> tuple[_Release, Any]:
        run = pipeline.run_sampling(corpus, self.config, vocabulary=self.vocabulary, embedder=self.embedder,
                                    cache=None, noise=self.noise(), ledger=PrivacyLedger())
        self.runs += 1
        self.last_vocabulary = run.private_vocabulary
        return _Release.of(run), run.split


def format_seconds(s: float) -> str:
    """Seconds as "42 s" or "3 min 05 s"."""
    s = max(0.0, float(s))
    return f"{s:.0f} s" if s < 90 else f"{int(s // 60)} min {int(s % 60):02d} s"


def run_audit(
    corpus: Corpus, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Any,
    settings: AuditSettings | None = None, progress: Progress | None = None, cancel: Cancel | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
) -> AuditResult:
    """Audit the release path on ``corpus`` with ``config`` (issue 11 §5; see the module docstring).

    Two stages share one Bonferroni correction, so every bound holds at the stated confidence together:

    * *vocabulary stage*: :func:`dpkps_core.pipeline.build_private_vocabulary` alone (with each neighbour's own
      training counts), many cheap trials, bounded against ε_voc — events on Ṽ are also events of the whole
      release, so they bound its ε too;
    * *release stage*: the whole of :func:`dpkps_core.pipeline.run_sampling`, bounded against ε_voc + ε_kde.

    ``progress(fraction, message)`` is called after every trial; ``cancel.is_set()`` stops after the trial in
    flight (finished rounds are analysed when there are at least 4); ``on_plan`` receives the measured time per
    round and the number of trials before the long part starts."""
    settings = (settings or AuditSettings()).validate()
    config = dataclasses.replace(config)
    config.validate()
    report = progress or (lambda f, m: None)
    started = time.perf_counter()
    claimed = float(config.eps_voc + config.eps_kde)
    classes = declared_classes(corpus, config)
    memory = MemoryEmbedder(embedder)
    runner = _Runner(config, vocabulary, memory, settings)
    rng = np.random.default_rng(settings.seed)
    S = config.terms_per_doc
    canary_size = settings.canary_terms or S
    cancelled = False

    def stopped() -> bool:
        return cancel is not None and cancel.is_set()

    # ---- round 0: D, then the neighbours it defines
    report(0.0, "round 1: running the release path on D (the first run also embeds Ṽ in memory)")
    d = _Neighbour("D", corpus)
    rel, split = runner.run(corpus)
    d.releases.append(rel)
    d.train = _training_part(corpus, split, classes)
    first_vocabulary = runner.last_vocabulary
    target, unique_terms = influential_document(corpus, d.train, vocabulary, terms_per_doc=S)
    target_terms = [vocabulary.terms[i] for i in vocabulary.matcher.first_distinct(
        [corpus.texts[target]], S, max_chars=LIMITS["max_chars_per_doc"])[0]]
    minus_corpus, kept = _without(corpus, target, by_person=bool(getattr(config, "person_column", None)))
    minus = _Neighbour("D⁻", minus_corpus)
    maker = _CanaryMaker(rare_public_terms(corpus, vocabulary), vocabulary, rng)
    label_cycle = [classes[i % len(classes)] for i in range(max(settings.canary_documents, 1))]

    def plant(name: str, k: int) -> tuple[_Neighbour, list[list[str]], list[bool]]:
        """Append k canaries, redrawing those the split holds out (a few attempts; each is a valid trial)."""
        canaries = [maker.draw(canary_size) for _ in range(k)]
        for attempt in range(_CANARY_ATTEMPTS):
            nb = _Neighbour(name, _with_extra(corpus, [canary_text(c) for c in canaries], label_cycle[:k]))
            rel_, split_ = runner.run(nb.corpus)
            nb.train = _training_part(nb.corpus, split_, classes)
            train_set = set(nb.train)
            planted = [len(corpus) + j in train_set for j in range(k)]
            if all(planted) or attempt == _CANARY_ATTEMPTS - 1 or stopped():
                nb.releases.append(rel_)
                return nb, canaries, planted
            canaries = [c if ok else maker.draw(canary_size) for c, ok in zip(canaries, planted)]
        raise AssertionError("unreachable")

    report(0.01, "round 1: D⁺ (one canary document)")
    plus, (add_canary,), (add_planted,) = plant("D⁺", 1)
    neighbours = [d, minus, plus]
    exposure_nb: _Neighbour | None = None
    exposure_canaries: list[list[str]] = []
    exposure_planted: list[bool] = []
    if settings.canary_documents:
        report(0.02, f"round 1: D+k ({settings.canary_documents} exposure canaries)")
        exposure_nb, exposure_canaries, exposure_planted = plant("D+k", settings.canary_documents)
    cheap = [d, minus, plus] + ([exposure_nb] if exposure_nb is not None else [])  # vocabulary + density stages
    report(0.03, "round 1: D⁻ (without the most influential training document)")
    rel, split = runner.run(minus.corpus)
    minus.releases.append(rel)
    minus.train = _training_part(minus.corpus, split, classes)

    # ---- each neighbour's TRAINING term counts (from the split the release path used: a broken split shows)
    def train_texts(nb: _Neighbour) -> list[str]:
        return [nb.corpus.texts[i] for i in nb.train]

    counts = {nb.name: pipeline.term_counts(train_texts(nb), vocabulary, terms_per_doc=S) for nb in (d, minus, plus)}
    weights = {"remove": _weights(counts["D"] - counts["D⁻"], vocabulary),
               "add": _weights(counts["D⁺"] - counts["D"], vocabulary)}
    removed = set(range(len(corpus))) - set(kept)
    moved = {"remove": _moved(d.train, [kept[i] for i in minus.train], ignore=removed),
             "add": _moved(d.train, [i for i in plus.train if i < len(corpus)], ignore=set())}

    t_round0 = time.perf_counter() - started

    # ---- vocabulary stage: build_private_vocabulary alone, many trials
    vocab_rel: dict[str, list[_Release]] = {nb.name: [] for nb in cheap}
    texts = {nb.name: train_texts(nb) for nb in cheap}
    counts.update({nb.name: pipeline.term_counts(texts[nb.name], vocabulary, terms_per_doc=S)
                   for nb in cheap if nb.name not in counts})

    def vocab_trial(name: str) -> None:
        pv = pipeline.build_private_vocabulary(
            texts[name], vocabulary, eps_voc=config.eps_voc, terms_per_doc=S, vocab_size=config.vocab_size,
            noise=runner.noise(), ledger=PrivacyLedger(), selection_rule=config.selection_rule, counts=counts[name])
        vocab_rel[name].append(_Release.of_vocabulary(pv))

    t_v = time.perf_counter()
    for name in vocab_rel:
        vocab_trial(name)
    t_v = (time.perf_counter() - t_v) / len(vocab_rel)
    n_voc = settings.vocabulary_trials or int(min(max(settings.vocabulary_time_budget / (len(vocab_rel) * max(t_v, 1e-6)),
                                                      settings.min_trials * 5), settings.max_vocabulary_trials))
    for r in range(1, n_voc):
        if stopped():
            break
        for name in vocab_rel:
            vocab_trial(name)
        if r % 50 == 0 or r == n_voc - 1:
            report(0.03 + 0.17 * (r + 1) / n_voc, f"vocabulary stage: trial {r + 1}/{n_voc} on each neighbour")

    t_vocab = time.perf_counter() - started - t_round0

    # ---- density stage: keyphrases → DP density → sequences on ONE fixed Ṽ (D's first Ṽ plus the audit terms,
    # so that the removed document's and the canary's terms can show); no new embeddings per trial
    pv_audit = _audit_vocabulary(first_vocabulary, list(add_canary) + target_terms
                                 + [t for c in exposure_canaries for t in c])
    emb_audit = embed_terms(pv_audit.terms, memory)
    config_d = config
    if config_d.bandwidth is None:  # what build_density would compute from these embeddings, once
        config_d = dataclasses.replace(config, bandwidth=pipeline.default_bandwidth(emb_audit))
    max_per_doc = config.max_keyphrases_per_doc or config.length
    dens_input = {}
    for nb in cheap:
        labels = [nb.corpus.labels[i] for i in nb.train]
        dens_input[nb.name] = (pipeline.extract_keyphrases(texts[nb.name], pv_audit, max_per_doc=max_per_doc), labels)

    def class_counts(name: str) -> Counter:
        kps, labels = dens_input[name]
        return Counter((y, pv_audit.terms[i]) for doc, y in zip(kps, labels) for i in doc)

    cc = {name: class_counts(name) for name in ("D", "D⁻", "D⁺")}
    dens_weights = {"remove": _class_weights(cc["D"], cc["D⁻"]), "add": _class_weights(cc["D⁺"], cc["D"])}
    dens_values: dict[str, list[dict[str, float]]] = {nb.name: [] for nb in cheap}
    dens_exposure: dict[str, list[dict[str, Any]]] = {"D": [], "D+k": []}

    def density_trial(name: str) -> None:
        noise = runner.noise()
        kps, labels = dens_input[name]
        density, _ = pipeline.build_density(kps, labels, classes=classes, embeddings=emb_audit, config=config_d,
                                            private_vocabulary=pv_audit, noise=noise, ledger=PrivacyLedger())
        outcome = pipeline.sample_sequences(density, terms=pv_audit.terms, embeddings=emb_audit, config=config_d,
                                            rng=noise.child())
        freq = Counter((q.label, k) for q in outcome.sequences for k in q.keyphrases)
        dens_values[name].append({pair: sum(w * freq.get(key, 0) for key, w in dens_weights[pair].items())
                                  for pair in PAIRS})
        if exposure_canaries and name in dens_exposure:
            seqs = [q.keyphrases for q in outcome.sequences]
            rel = _Release({}, 0.0, Counter(k for q in seqs for k in q), tuple(frozenset(q) for q in seqs),
                           sum(len(q) for q in seqs))
            dens_exposure[name].append(rel.exposure(exposure_canaries))

    t_d = time.perf_counter()
    for name in dens_values:
        density_trial(name)
    t_d = (time.perf_counter() - t_d) / len(dens_values)
    n_dens = settings.density_trials or int(min(max(settings.density_time_budget / (len(dens_values) * max(t_d, 1e-6)),
                                                    settings.min_trials), settings.max_density_trials))
    for r in range(1, n_dens):
        if stopped():
            break
        for name in dens_values:
            density_trial(name)
        if r % 10 == 0 or r == n_dens - 1:
            report(0.2 + 0.1 * (r + 1) / n_dens, f"density stage: trial {r + 1}/{n_dens} on each neighbour")
    t_density = time.perf_counter() - started - t_round0 - t_vocab

    # ---- release stage, round 1 (timed) and the plan
    t_round = time.perf_counter()
    for nb in neighbours:
        if stopped():
            break
        nb.releases.append(runner.run(nb.corpus)[0])
    t_round = time.perf_counter() - t_round
    if settings.trials is not None:
        n = settings.trials
    else:
        left = settings.time_budget - (time.perf_counter() - started)
        n = int(min(max(2 + left / max(t_round, 1e-6), settings.min_trials), settings.max_trials))
    plan = {"trials_per_neighbour": n, "neighbours": len(neighbours), "seconds_per_round": round(t_round, 3),
            "vocabulary_trials_per_neighbour": n_voc,
            "estimated_seconds": round((time.perf_counter() - started) + max(n - 2, 0) * t_round, 1)}
    if on_plan is not None:
        on_plan(dict(plan))
    total_runs = n * len(neighbours)
    timings = {"round_1": round(t_round0, 1), "vocabulary_stage": round(t_vocab, 1),
               "density_stage": round(t_density, 1)}
    deadline = None if settings.trials is not None else started + settings.time_budget
    out_of_time = False
    for r in range(2, n):
        if deadline is not None and r >= settings.min_trials and time.perf_counter() > deadline:
            out_of_time = True  # the machine got slower than measured: keep the time budget
            break
        for nb in neighbours:
            if stopped():
                cancelled = True
                break
            nb.releases.append(runner.run(nb.corpus)[0])
            done = sum(len(x.releases) for x in neighbours)
            eta = (total_runs - done) * t_round / len(neighbours)
            report(0.3 + 0.7 * min(done / total_runs, 1.0),
                   f"release stage: trial {r + 1}/{n} on {nb.name} — about {format_seconds(eta)} left")
        if cancelled:
            break
    cancelled = cancelled or stopped()
    rounds = min(len(nb.releases) for nb in neighbours)
    voc_rounds = min(len(v) for v in vocab_rel.values())
    dens_rounds = min(len(v) for v in dens_values.values())
    if min(rounds, voc_rounds, dens_rounds) < MIN_TRIALS:
        raise ParameterError(f"The audit was stopped after {min(rounds, voc_rounds, dens_rounds)} complete round(s); "
                             f"it needs at least {MIN_TRIALS} trials per neighbour to say anything.")
    report(1.0, "analysing the trials")

    # ---- events: per stage, pair and statistic; one Bonferroni correction over all of them
    sides = {"remove": ("D⁻", "D"), "add": ("D", "D⁺")}
    values: dict[tuple[str, str], tuple[dict[str, np.ndarray], dict[str, np.ndarray], Mapping[Any, float]]] = {}
    for stage, rels in (("vocabulary", {k: v[:voc_rounds] for k, v in vocab_rel.items() if k != "D+k"}),
                        ("release", {nb.name: nb.releases[:rounds] for nb in (d, minus, plus)})):
        for pair in PAIRS:
            a_name, b_name = sides[pair]
            sa = [r.statistics(weights[pair]) for r in rels[a_name]]
            sb = [r.statistics(weights[pair]) for r in rels[b_name]]
            values[(stage, pair)] = ({st: np.array([x[st] for x in sa]) for st in STAGES[stage][0]},
                                     {st: np.array([x[st] for x in sb]) for st in STAGES[stage][0]}, weights[pair])
    for pair in PAIRS:
        a_name, b_name = sides[pair]
        values[("density", pair)] = (
            {"class_sampled_frequency": np.array([x[pair] for x in dens_values[a_name][:dens_rounds]])},
            {"class_sampled_frequency": np.array([x[pair] for x in dens_values[b_name][:dens_rounds]])},
            dens_weights[pair])
    m = max(1, sum(len(STAGES[stage][0]) for (stage, pair), v in values.items() if v[2]))
    alpha = (1.0 - settings.confidence) / (2 * m)   # two one-sided CP bounds per event
    events: list[dict[str, Any]] = []
    for stage in STAGES:
        for pair in PAIRS:
            va, vb, w = values[(stage, pair)]
            for stat in STAGES[stage][0]:
                events.append(_event(stage, pair, stat, va[stat], vb[stat], w, settings, alpha))
    stage_bound = {stage: max(e["epsilon_lower_bound"] for e in events if e["stage"] == stage) for stage in STAGES}
    stage_claim = {"vocabulary": float(config.eps_voc), "density": float(config.eps_kde), "release": claimed}
    # events on Ṽ and on the whole release are events of the release: they bound its ε (the density stage
    # conditions on a fixed Ṽ and bounds the density step's ε_kde instead)
    lower = max(stage_bound["vocabulary"], stage_bound["release"])
    vocab_lower = stage_bound["vocabulary"]
    n_sel, n_eval = _selection_sizes(rounds, settings)
    n_sel_v, n_eval_v = _selection_sizes(voc_rounds, settings)
    n_sel_d, n_eval_d = _selection_sizes(dens_rounds, settings)
    certifiable = max_certifiable_epsilon(max(n_eval, n_eval_v), alpha)
    violation, verdict = verdict_for(lower, claimed, settings.confidence, certifiable)
    stage_violation = {stage: stage_bound[stage] > stage_claim[stage] + 1e-9 for stage in STAGES}
    vocab_violation = stage_violation["vocabulary"]
    if not violation:
        for stage, what in (("vocabulary", "private vocabulary step"), ("density", "density step")):
            if stage_violation[stage]:
                violation = True
                verdict = (f"VIOLATION: the {what} leaks more than claimed (ε ≥ {stage_bound[stage]:.2f} > "
                           f"{STAGES[stage][2]} = {stage_claim[stage]:g} at {settings.confidence:.0%} confidence).")
                break

    exposure = None
    if exposure_nb is not None:
        exposure = _exposure_summary(exposure_canaries, exposure_planted,
                                     with_vocabulary=vocab_rel["D+k"][:voc_rounds],
                                     without_vocabulary=vocab_rel["D"][:voc_rounds],
                                     with_sequences=dens_exposure["D+k"][:dens_rounds],
                                     without_sequences=dens_exposure["D"][:dens_rounds])
    info = {
        "epsilon_vocabulary": config.eps_voc, "epsilon_kde": config.eps_kde,
        "vocabulary_stage_lower_bound": vocab_lower, "vocabulary_stage_violation": vocab_violation,
        "stages": {stage: {"runs": STAGES[stage][1], "claim": f"{STAGES[stage][2]} = {stage_claim[stage]:g}",
                           "lower_bound": stage_bound[stage], "violation": stage_violation[stage]}
                   for stage in STAGES},
        "density_stage_lower_bound": stage_bound["density"],
        "density_trials_per_neighbour": dens_rounds, "density_evaluation_trials": n_eval_d,
        "density_vocabulary_size": len(pv_audit),
        "trials_per_neighbour": rounds, "trials_planned": n, "selection_trials": n_sel, "evaluation_trials": n_eval,
        "vocabulary_trials_per_neighbour": voc_rounds, "vocabulary_selection_trials": n_sel_v,
        "vocabulary_evaluation_trials": n_eval_v,
        "bonferroni_events": m, "alpha_per_bound": alpha, "max_certifiable_epsilon": certifiable,
        "max_certifiable_epsilon_release_stage": max_certifiable_epsilon(n_eval, alpha),
        "cancelled": cancelled, "stopped_at_time_budget": out_of_time, "runs_of_release_path": runner.runs,
        "timings_seconds": {**timings, "release_stage": round(time.perf_counter() - started - t_round0 - t_vocab
                                                              - t_density, 1)},
        "seconds": round(time.perf_counter() - started, 1),
        "plan": plan, "noise_sampler": runner.sampler,
        "noise": "OS entropy" if settings.seed is None else "seeded (reproducible audit)",
        "ledger": "charged nothing: every trial used its own throwaway ledger on an in-memory copy",
        "embeddings": f"in memory only ({len(memory):,} terms embedded; the persistent cache was not used)",
        "neighbours": {
            "D": {"documents": len(corpus), "training_documents": len(d.train)},
            "D⁻": {"documents": len(minus.corpus), "training_documents": len(minus.train),
                   "removed": "the training document with the most distinct rare terms of V"
                              + (" (all of its person's documents)" if len(removed) > 1 else ""),
                   "removed_documents": len(removed),
                   "removed_unique_terms": unique_terms, "training_documents_moved": moved["remove"]},
            "D⁺": {"documents": len(plus.corpus), "training_documents": len(plus.train),
                   "canary_terms": list(add_canary), "canary_in_training_part": bool(add_planted),
                   "training_documents_moved": moved["add"]},
        },
        "settings": dataclasses.asdict(settings),
        "config": {k: v for k, v in config.to_dict().items() if k not in ("corpus", "text_column", "label_column")},
        "method": "ε_lb = ln(CP_lower(p_num)/CP_upper(p_den)) per event (one-sided Clopper–Pearson), thresholds "
                  "chosen on separate selection trials, Bonferroni over every bound (two per event)",
    }
    warnings = []
    if not add_planted:
        warnings.append("The split held the canary document out of the training part in every attempt, so the add "
                        "pair only checks that adding a document moves no other one.")
    if moved["remove"] or moved["add"]:
        warnings.append(f"Adding or removing one document moved {max(moved.values())} other training document(s) "
                        "across the split: the split is not a per-document assignment (DESIGN §2).")
    if warnings:
        info["warnings"] = warnings
    return AuditResult(claimed, lower, settings.confidence, violation, verdict, events, exposure, info)


def _selection_sizes(rounds: int, settings: AuditSettings) -> tuple[int, int]:
    n_sel = min(max(1, int(round(rounds * settings.selection_fraction))), rounds - 1)
    return n_sel, rounds - n_sel


def _event(stage: str, pair: str, stat: str, a: np.ndarray, b: np.ndarray, weights: Mapping[str, float],
           settings: AuditSettings, alpha: float) -> dict[str, Any]:
    """Choose the event on the selection trials, bound it on the evaluation trials."""
    a_name, b_name, description = PAIRS[pair]
    ev: dict[str, Any] = {"stage": stage, "pair": pair, "pair_description": description, "statistic": stat,
                          "statistic_label": STATISTIC_LABELS[stat], "neighbour_a": a_name, "neighbour_b": b_name,
                          "weighted_terms": len(weights), "values_a": [round(float(v), 4) for v in a],
                          "values_b": [round(float(v), 4) for v in b]}
    if not weights:
        ev.update(threshold=None, side=None, numerator=None, epsilon_lower_bound=0.0, point_estimate=0.0,
                  note="the neighbours' training parts have identical term counts: nothing to test")
        return ev
    n_sel, n_eval = _selection_sizes(a.size, settings)
    choice = choose_event(a[:n_sel], b[:n_sel], alpha)
    ha = _event_hits(a[n_sel:], choice["threshold"], choice["side"])
    hb = _event_hits(b[n_sel:], choice["threshold"], choice["side"])
    num, den = (hb, ha) if choice["numerator"] == "B" else (ha, hb)
    lb = epsilon_lower_bound(num, n_eval, den, n_eval, alpha)
    point = math.log((num + 0.5) / (n_eval + 1.0)) - math.log((den + 0.5) / (n_eval + 1.0))
    ev.update(threshold=choice["threshold"], side=choice["side"],
              numerator=a_name if choice["numerator"] == "A" else b_name,
              event=f"{stat} {choice['side']} {choice['threshold']:.4g}", selection_trials=n_sel,
              hits_a=ha, hits_b=hb, evaluation_trials=n_eval, p_a=ha / n_eval, p_b=hb / n_eval,
              ci_a=list(clopper_pearson(ha, n_eval, alpha)), ci_b=list(clopper_pearson(hb, n_eval, alpha)),
              epsilon_lower_bound=lb, point_estimate=point)
    return ev


def _audit_vocabulary(pv: Any, extra_terms: Sequence[str]) -> Any:
    """A fixed Ṽ for the density stage: a released Ṽ plus the audit terms it lacks (any fixed Ṽ will do: the
    density step must be ε_kde-DP for every Ṽ)."""
    have = set(pv.terms)
    extra = [t for t in dict.fromkeys(extra_terms) if t not in have]
    if not extra:
        return pv
    counts = np.asarray(pv.noisy_counts, dtype=np.float64)
    low = float(counts.min()) if counts.size else 0.0
    return dataclasses.replace(pv, terms=tuple(pv.terms) + tuple(extra),
                               noisy_counts=np.concatenate([counts, np.full(len(extra), low)]))


def _class_weights(b: Counter, a: Counter) -> dict[tuple[str, str], float]:
    """(class, term) → keyphrase occurrences in B's training part − in A's, where they differ (largest first)."""
    diff = {k: float(b.get(k, 0) - a.get(k, 0)) for k in set(a) | set(b)}
    items = sorted(((k, v) for k, v in diff.items() if v), key=lambda kv: (-abs(kv[1]), kv[0]))
    return dict(items[:MAX_WEIGHTED_TERMS])


def _weights(delta: np.ndarray, vocabulary: PublicVocabulary) -> dict[str, float]:
    """Term → Δ (count in B − count in A) for the terms whose training counts differ (largest |Δ| first)."""
    nz = np.flatnonzero(delta)
    if nz.size > MAX_WEIGHTED_TERMS:
        nz = nz[np.argsort(-np.abs(delta[nz]), kind="stable")[:MAX_WEIGHTED_TERMS]]
    return {vocabulary.terms[i]: float(delta[i]) for i in nz}


def _moved(train_a: Sequence[int], train_b: Sequence[int], *, ignore: set[int]) -> int:
    """Documents of D (other than those added or removed, ``ignore``) on the training side in one neighbour and
    not the other — 0 for a split that assigns each document on its own (DESIGN §2). Both lists index D."""
    return len((set(train_a) ^ set(train_b)) - ignore)


def _exposure_summary(canaries: Sequence[Sequence[str]], planted: Sequence[bool], *,
                      with_vocabulary: Sequence[_Release], without_vocabulary: Sequence[_Release],
                      with_sequences: Sequence[dict[str, Any]], without_sequences: Sequence[dict[str, Any]]
                      ) -> dict[str, Any]:
    """Canary exposure (Canary's Echo): how often the canaries' terms enter Ṽ (vocabulary-stage trials) and how
    often their terms and pairs appear in the sampled sequences (density-stage trials, their terms in Ṽ), with
    the canaries planted vs without them."""
    vw = [r.exposure(canaries) for r in with_vocabulary]
    vo = [r.exposure(canaries) for r in without_vocabulary]

    def side(v: Sequence[dict[str, Any]], q: Sequence[dict[str, Any]]) -> dict[str, float]:
        kp = sum(e["keyphrases"] for e in q) or 1
        return {"canary_terms_in_vocabulary_per_trial": sum(sum(e["in_vocabulary"]) for e in v) / max(len(v), 1),
                "canary_occurrences_per_1000_keyphrases": 1000.0 * sum(sum(e["occurrences"]) for e in q) / kp,
                "canary_pair_sequences_per_trial": sum(sum(e["pair_sequences"]) for e in q) / max(len(q), 1)}

    def mean(ex: Sequence[dict[str, Any]], key: str, j: int) -> float:
        return sum(e[key][j] for e in ex) / max(len(ex), 1)

    w, o = side(vw, with_sequences), side(vo, without_sequences)
    per = [{"terms": list(terms), "in_training_part": bool(planted[j]),
            "in_vocabulary_with": mean(vw, "in_vocabulary", j), "in_vocabulary_without": mean(vo, "in_vocabulary", j),
            "occurrences_with": mean(with_sequences, "occurrences", j),
            "occurrences_without": mean(without_sequences, "occurrences", j),
            "pair_sequences_with": mean(with_sequences, "pair_sequences", j),
            "pair_sequences_without": mean(without_sequences, "pair_sequences", j)}
           for j, terms in enumerate(canaries)]
    occ_w, occ_o = w["canary_occurrences_per_1000_keyphrases"], o["canary_occurrences_per_1000_keyphrases"]
    return {"canaries": len(canaries), "planted_in_training_part": int(sum(planted)),
            "terms_per_canary": len(canaries[0]) if canaries else 0,
            "vocabulary_trials": len(vw), "sequence_trials": len(with_sequences),
            "with_canaries": w, "without_canaries": o,
            "occurrence_ratio": (occ_w + 1e-9) / (occ_o + 1e-9) if (occ_w or occ_o) else 1.0,
            "per_canary": per,
            "reading": "Ṽ membership from the vocabulary-stage trials; sequences from the density-stage trials, in "
                       "which the canaries' terms are in Ṽ. Under ε-DP, adding k documents can change the "
                       "probability of any event about the release by at most a factor e^(kε) (group privacy): at "
                       "small ε the canaries' echo must stay close to the runs without them; at large ε a visible "
                       "echo is allowed and expected."}


# ------------------------------------------------------------------------------------------ time estimate

def estimate_audit_time(
    corpus: Corpus, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Any,
    settings: AuditSettings | None = None,
) -> dict[str, Any]:
    """Measure two runs of the release path on D (the first warms the in-memory embeddings) and a few
    vocabulary-stage trials and one density-stage trial, and extrapolate to the audit's plan. Nothing is kept;
    nothing is charged.

    Returns ``seconds_per_trial``, ``first_trial_seconds``, ``neighbours``, ``trials``, ``vocabulary_trials``,
    ``density_trials`` and ``estimated_seconds``."""
    settings = (settings or AuditSettings()).validate()
    config = dataclasses.replace(config)
    config.validate()
    runner = _Runner(config, vocabulary, MemoryEmbedder(embedder), settings)
    t0 = time.perf_counter()
    _, split = runner.run(corpus)
    first = time.perf_counter() - t0
    t1 = time.perf_counter()
    runner.run(corpus)
    per_trial = time.perf_counter() - t1
    texts = [corpus.texts[i] for i in _training_part(corpus, split, declared_classes(corpus, config))]
    counts = pipeline.term_counts(texts, vocabulary, terms_per_doc=config.terms_per_doc)
    t2 = time.perf_counter()
    for _ in range(3):
        pipeline.build_private_vocabulary(texts, vocabulary, eps_voc=config.eps_voc, terms_per_doc=config.terms_per_doc,
                                          vocab_size=config.vocab_size, noise=runner.noise(), ledger=PrivacyLedger(),
                                          selection_rule=config.selection_rule, counts=counts)
    t_voc = (time.perf_counter() - t2) / 3
    pv = runner.last_vocabulary
    emb = embed_terms(pv.terms, runner.embedder)
    config_d = config
    if config_d.bandwidth is None:
        config_d = dataclasses.replace(config, bandwidth=pipeline.default_bandwidth(emb))
    labels = [corpus.labels[i] for i in _training_part(corpus, split, declared_classes(corpus, config))]
    kps = pipeline.extract_keyphrases(texts, pv, max_per_doc=config.max_keyphrases_per_doc or config.length)
    t3 = time.perf_counter()
    noise = runner.noise()
    density, _ = pipeline.build_density(kps, labels, classes=declared_classes(corpus, config), embeddings=emb,
                                        config=config_d, private_vocabulary=pv, noise=noise, ledger=PrivacyLedger())
    pipeline.sample_sequences(density, terms=pv.terms, embeddings=emb, config=config_d, rng=noise.child())
    t_dens = time.perf_counter() - t3
    cheap = 3 + (1 if settings.canary_documents else 0)  # D, D⁻, D⁺ (+ D+k) in the vocabulary and density stages
    n_dens = settings.density_trials or int(min(max(settings.density_time_budget / (cheap * max(t_dens, 1e-6)),
                                                    settings.min_trials), settings.max_density_trials))
    n_voc = settings.vocabulary_trials or int(min(max(settings.vocabulary_time_budget / (cheap * max(t_voc, 1e-6)),
                                                      settings.min_trials * 5), settings.max_vocabulary_trials))
    stages = cheap * (n_voc * t_voc + n_dens * t_dens)
    if settings.trials is not None:
        trials = settings.trials
    else:
        left = settings.time_budget - first * cheap - stages
        trials = int(min(max(2 + left / max(per_trial * 3, 1e-6), settings.min_trials), settings.max_trials))
    estimated = first * cheap + per_trial * 3 * max(trials - 1, 0) + stages
    return {"seconds_per_trial": per_trial, "first_trial_seconds": first, "neighbours": 3, "trials": trials,
            "vocabulary_trials": n_voc, "density_trials": n_dens, "estimated_seconds": estimated}


# ------------------------------------------------------------------------------------------ private report

def render_markdown(result: AuditResult | Mapping[str, Any]) -> str:
    """The audit section of a PRIVATE report (Markdown; never part of the release bundle)."""
    r = result.to_dict() if isinstance(result, AuditResult) else dict(result)
    lines = [
        "## Empirical privacy audit (PRIVATE — local only, not for release)", "",
        f"`{r['summary_line']}`", "",
        f"**Verdict:** {r['verdict']}", "",
        f"- Claimed: ε = {r['claimed_epsilon']:g} (ε_voc {r['epsilon_vocabulary']:g} + ε_kde {r['epsilon_kde']:g}), "
        "pure ε-DP under add/remove one document.",
        f"- Trials: {r['trials_per_neighbour']} per neighbour ({r['selection_trials']} to choose the events, "
        f"{r['evaluation_trials']} to bound them); {r['runs_of_release_path']} runs of the release path in "
        f"{r['seconds']:g} s; noise: {r['noise']} ({r['noise_sampler']} sampler)."
        + (" Cancelled: the finished rounds were analysed." if r.get("cancelled") else ""),
        f"- Vocabulary stage (Ṽ alone, {r['vocabulary_trials_per_neighbour']} trials per neighbour): lower bound "
        f"{r['vocabulary_stage_lower_bound']:.3f} vs ε_voc = {r['epsilon_vocabulary']:g}.",
        f"- Density stage (density + sequences on a fixed Ṽ of {r['density_vocabulary_size']} terms, "
        f"{r['density_trials_per_neighbour']} trials per neighbour): lower bound "
        f"{r['density_stage_lower_bound']:.3f} vs ε_kde = {r['epsilon_kde']:g}.",
        f"- Largest ε these trials can certify: {r['max_certifiable_epsilon_release_stage']:.2f} (release stage), "
        f"{r['max_certifiable_epsilon']:.2f} (vocabulary stage); Bonferroni over {r['bonferroni_events']} events.",
        f"- {r['ledger'][0].upper() + r['ledger'][1:]}. Embeddings: {r['embeddings']}.", "",
        "| stage | pair | statistic | event | p(A) [CP bounds] | p(B) [CP bounds] | ε lower bound | point estimate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in r["events"]:
        if e.get("threshold") is None:
            lines.append(f"| {e['stage']} | {e['pair']} | {e['statistic']} | — | — | — | 0 | — |")
            continue
        lines.append(f"| {e['stage']} | {e['neighbour_a']} vs {e['neighbour_b']} | {e['statistic']} | {e['event']} "
                     f"(numerator {e['numerator']}) | {e['p_a']:.3f} [{e['ci_a'][0]:.3f}, {e['ci_a'][1]:.3f}] | "
                     f"{e['p_b']:.3f} [{e['ci_b'][0]:.3f}, {e['ci_b'][1]:.3f}] | "
                     f"{e['epsilon_lower_bound']:.3f} | {e['point_estimate']:.2f} |")
    nb = r["neighbours"]
    lines += ["", f"CP bounds: one-sided Clopper–Pearson at α = {r['alpha_per_bound']:.2g} each (Bonferroni over "
                  f"{r['bonferroni_events']} events, two bounds each), on the evaluation trials only.", "",
              f"Neighbours: D⁻ removes the training document with the most distinct rare terms of V "
                  f"({nb['D⁻']['removed_unique_terms']} terms no other training document has); D⁺ adds a canary of "
                  f"{len(nb['D⁺']['canary_terms'])} rare public terms ({', '.join(nb['D⁺']['canary_terms'])}). "
                  f"Training documents that changed side of the split besides them: "
                  f"{nb['D⁻']['training_documents_moved']} (remove), {nb['D⁺']['training_documents_moved']} (add)."]
    ex = r.get("exposure")
    if ex:
        w, o = ex["with_canaries"], ex["without_canaries"]
        lines += ["", "### Canary exposure", "",
                  f"{ex['canaries']} canary documents of {ex['terms_per_canary']} rare public terms "
                  f"({ex['planted_in_training_part']} in the training part), {ex['vocabulary_trials']} vocabulary-stage "
                  f"and {ex['sequence_trials']} density-stage trials each way.", "",
                  "| | with canaries | without |", "|---|---|---|",
                  f"| canary terms in Ṽ per trial | {w['canary_terms_in_vocabulary_per_trial']:.3f} | "
                  f"{o['canary_terms_in_vocabulary_per_trial']:.3f} |",
                  f"| canary terms per 1,000 sampled keyphrases | {w['canary_occurrences_per_1000_keyphrases']:.3f} | "
                  f"{o['canary_occurrences_per_1000_keyphrases']:.3f} |",
                  f"| sequences with a canary pair per trial | {w['canary_pair_sequences_per_trial']:.3f} | "
                  f"{o['canary_pair_sequences_per_trial']:.3f} |", "", ex["reading"]]
    for warning in r.get("warnings", []):
        lines += ["", f"> {warning}"]
    lines += ["", LIMITATION_NOTE, "", f"*{AUDIT_NOTE}.*", ""]
    return "\n".join(lines)
