"""Vocabulary privatization (ε_voc): Laplace noisy histogram over ALL of V, keep the top N (docs/DESIGN.md §2.1).

Paper 001 §2, Step 1. Neighbouring relation: add/remove one document. Each document contributes its first S
*distinct* matched terms, one count each, so the histogram over V has L1 sensitivity S. Noise: i.i.d.
Laplace(S/ε_voc) on **every** term of V, zero counts included (noising only terms seen in D would reveal which
terms occur). Selecting the N largest noisy counts is post-processing.

Charge first (docs/DESIGN.md §2.0): public settings (ε, S, N ≤ |V|, the rule) are checked before anything is read or
spent; the ledger event, built from public quantities only, is recorded before the noise is drawn, so a refusal
decided from the noisy counts (the noise-floor rule keeping no term) costs ε_voc.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, VocabularyHistogramEvent
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.errors import ParameterError, VocabularyError
from dpkps_core.progress import Progress

MECHANISM = "laplace_vocabulary_histogram"
SELECTION_RULES = ("top-n", "noise-floor")


@dataclasses.dataclass(frozen=True)
class PrivateVocabulary:
    """Ṽ: the DP-selected terms and their noisy counts (both DP outputs, safe to show and export)."""

    terms: tuple[str, ...]
    noisy_counts: np.ndarray = dataclasses.field(compare=False, repr=False)
    public_vocabulary: str
    public_vocabulary_size: int
    epsilon: float
    terms_per_doc: int
    requested_size: int
    noise_scale: float
    selection_rule: str = "top-n"
    noisy_total: float = 0.0  # sum of the noisy counts over ALL of V (a DP output; estimates n, see below)

    def __len__(self) -> int:
        return len(self.terms)

    def to_dict(self) -> dict[str, object]:
        return {
            "terms": list(self.terms),
            "noisy_counts": [round(float(c), 2) for c in self.noisy_counts],
            "public_vocabulary": self.public_vocabulary,
            "public_vocabulary_size": self.public_vocabulary_size,
            "epsilon": self.epsilon,
            "terms_per_doc": self.terms_per_doc,
            "requested_size": self.requested_size,
            "noise_scale": self.noise_scale,
            "selection_rule": self.selection_rule,
            "noisy_total": round(self.noisy_total, 2),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "PrivateVocabulary":
        return cls(
            terms=tuple(data["terms"]),
            noisy_counts=np.asarray(data["noisy_counts"], dtype=np.float64),
            public_vocabulary=data["public_vocabulary"],
            public_vocabulary_size=int(data["public_vocabulary_size"]),
            epsilon=float(data["epsilon"]),
            terms_per_doc=int(data["terms_per_doc"]),
            requested_size=int(data["requested_size"]),
            noise_scale=float(data["noise_scale"]),
            selection_rule=data.get("selection_rule", "top-n"),
            noisy_total=float(data.get("noisy_total", 0.0)),
        )


def noisy_term_histogram(
    counts: np.ndarray, *, epsilon: float, terms_per_doc: int, noise: NoiseSource
) -> np.ndarray:
    """Release ``counts`` (length |V|, each document counted once per distinct term, ≤ S terms per document)
    with i.i.d. Laplace(S/ε) on every entry. L1 sensitivity S under add/remove one document."""
    epsilon = check_epsilon(epsilon, "ε_voc")
    terms_per_doc = check_positive_int(terms_per_doc, "S (terms per document)")
    # integer counts: OpenDP's exact discrete Laplace by default (NumPy's continuous Laplace when seeded)
    return noise.add_laplace(np.asarray(counts), scale=terms_per_doc / epsilon, integer_valued=True)


def noise_floor(*, epsilon: float, terms_per_doc: int, vocabulary_size: int) -> float:
    """Expected largest pure-noise count among |V| zero-count terms: (S/ε)·ln(|V|/2) (docs/DESIGN.md §6).

    For Laplace(b), P[X > t] = ½e^{−t/b}; among |V| zeros the expected number above t is (|V|/2)e^{−t/b},
    which is 1 at t = b·ln(|V|/2).
    """
    scale = terms_per_doc / check_epsilon(epsilon, "ε_voc")
    return float(scale * np.log(max(vocabulary_size, 2) / 2.0))


def select_top_terms(
    noisy_counts: np.ndarray, *, size: int, rule: str = "top-n", floor: float | None = None
) -> np.ndarray:
    """Indices of Ṽ in decreasing noisy count (post-processing of the noisy histogram only).

    ``rule="top-n"`` keeps the N largest; ``rule="noise-floor"`` additionally drops terms whose noisy count is
    below ``floor`` (a public function of ε, S and |V|), so |Ṽ| adapts below N.
    """
    if rule not in SELECTION_RULES:
        raise ParameterError(f"Unknown vocabulary selection rule {rule!r}; choose {' or '.join(SELECTION_RULES)}.")
    n = min(int(size), noisy_counts.shape[0])
    top = np.argpartition(-noisy_counts, n - 1)[:n] if n < noisy_counts.shape[0] else np.arange(n)
    top = top[np.argsort(-noisy_counts[top], kind="stable")]
    if rule == "noise-floor":
        if floor is None:
            raise ParameterError("The noise-floor rule needs a floor value.")
        top = top[noisy_counts[top] >= floor]
    return top


def check_vocabulary_settings(
    *, epsilon: float, terms_per_doc: int, size: int, vocabulary_size: int, selection_rule: str = "top-n",
) -> tuple[float, int, int]:
    """Refuse bad public settings of the ε_voc release before any data is read (docs/DESIGN.md §2.0: such refusals cost
    nothing): ε, S, N, the selection rule and N ≤ |V|. Returns (ε, S, N) normalised."""
    epsilon = check_epsilon(epsilon, "ε_voc")
    terms_per_doc = check_positive_int(terms_per_doc, "S (terms per document)")
    size = check_positive_int(size, "N (private vocabulary size)")
    if selection_rule not in SELECTION_RULES:
        raise ParameterError(f"Unknown vocabulary selection rule {selection_rule!r}; choose "
                             f"{' or '.join(SELECTION_RULES)}.")
    if vocabulary_size == 0:
        raise VocabularyError("The public vocabulary is empty.")
    if size > vocabulary_size:
        raise ParameterError(f"N (private vocabulary size) = {size:,} is larger than the public vocabulary "
                             f"(|V| = {vocabulary_size:,} terms); choose N ≤ |V|. Nothing was spent.")
    return epsilon, terms_per_doc, size


def vocabulary_event(
    *, epsilon: float, terms_per_doc: int, size: int, vocabulary_name: str, vocabulary_size: int,
    selection_rule: str, sampler: str, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> VocabularyHistogramEvent:
    """The ε_voc release's ledger event, from public quantities only (ε, S, N, |V|, the rule): it is recorded
    BEFORE the noise is drawn (charge first, docs/DESIGN.md §2.0), so it cannot name |Ṽ|, which the noise-floor rule
    decides from the noisy counts."""
    scale = terms_per_doc / epsilon
    fewer = " (fewer under the noise-floor rule)" if selection_rule == "noise-floor" else ""
    return VocabularyHistogramEvent(
        mechanism=MECHANISM,
        step="vocabulary",
        epsilon=epsilon,
        neighbouring=neighbouring,
        sensitivity=float(terms_per_doc),
        noise_scale=scale,
        released=(f"the top N = {size:,} terms{fewer} of a Laplace-noised histogram over all "
                  f"{vocabulary_size:,} terms of {vocabulary_name}"),
        vocabulary=vocabulary_name,
        vocabulary_size=vocabulary_size,
        terms_per_doc=terms_per_doc,
        requested_size=size,
        selection_rule=selection_rule,
        laplace_sampler=sampler,
    )


def privatize_vocabulary(
    counts: np.ndarray,
    terms: Sequence[str],
    *,
    epsilon: float,
    terms_per_doc: int = 10,
    size: int = 1000,
    vocabulary_name: str = "custom",
    context: ReleaseContext,
    selection_rule: str = "top-n",
    floor_fraction: float = 1.0,
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> PrivateVocabulary:
    """ε_voc-DP private vocabulary Ṽ from the first-S-distinct term counts of the private corpus.

    Args:
        counts: per-term document counts over all of V (``TermMatcher.counts_first_distinct`` output).
        terms: the public vocabulary V (same order as ``counts``).
        epsilon: ε_voc. terms_per_doc: S (sensitivity). size: N (≤ |V|).
        vocabulary_name: the public vocabulary's name (recorded in the event).
        context: the release's ledger (charged here; None: the event is accounted elsewhere) and noise source
            (:class:`~dpkps_core.dp.release.ReleaseContext`).
        selection_rule: ``"top-n"`` (paper) or ``"noise-floor"`` (top-N, then drop terms below
            ``floor_fraction`` × :func:`noise_floor`).
        neighbouring: the neighbouring relation recorded in the event (the corpus's privacy unit).

    Charge first (docs/DESIGN.md §2.0): the public settings are checked (a refusal there costs nothing), then one
    :class:`PrivacyEvent` (step ``"vocabulary"``) is recorded in ``context.ledger`` BEFORE the noise is drawn. A failure
    after that — a crash in the sampler, or the noise-floor rule keeping no term — leaves ε_voc spent.
    """
    epsilon, terms_per_doc, size = check_vocabulary_settings(
        epsilon=epsilon, terms_per_doc=terms_per_doc, size=size, vocabulary_size=len(terms),
        selection_rule=selection_rule)
    counts = np.asarray(counts)
    if counts.shape != (len(terms),):
        raise ParameterError(f"counts has shape {counts.shape}, expected ({len(terms)},) — one per term of V.")
    scale = terms_per_doc / epsilon
    floor = floor_fraction * noise_floor(epsilon=epsilon, terms_per_doc=terms_per_doc, vocabulary_size=len(terms))
    if context.ledger is not None:
        context.ledger.charge(vocabulary_event(
            epsilon=epsilon, terms_per_doc=terms_per_doc, size=size, vocabulary_name=vocabulary_name,
            vocabulary_size=len(terms), selection_rule=selection_rule, sampler=context.noise.sampler,
            neighbouring=neighbouring))
    noisy = noisy_term_histogram(counts, epsilon=epsilon, terms_per_doc=terms_per_doc, noise=context.noise)
    chosen = select_top_terms(noisy, size=size, rule=selection_rule, floor=floor)
    if chosen.size == 0:
        # decided from the noisy counts, after the charge: the refusal is itself a DP output and costs ε_voc
        raise VocabularyError(
            f"No term of the public vocabulary cleared the noise floor at ε_voc = {epsilon:g}; ε_voc was spent "
            "(the noisy counts were drawn). Raise ε_voc, use the top-N rule, or use a smaller vocabulary."
        )
    return PrivateVocabulary(
        terms=tuple(terms[i] for i in chosen),
        noisy_counts=noisy[chosen],
        public_vocabulary=vocabulary_name,
        public_vocabulary_size=len(terms),
        epsilon=epsilon,
        terms_per_doc=terms_per_doc,
        requested_size=size,
        noise_scale=scale,
        selection_rule=selection_rule,
        noisy_total=float(noisy.sum()),
    )


def estimate_documents_from_noisy_total(noisy_total: float, *, terms_per_doc: int) -> float:
    """Free DP estimate of the number of documents: the sum of ALL noisy counts over V divided by S.

    Post-processing of the ε_voc release (no extra ε). Biased low when documents have fewer than S distinct
    terms; noise sd ≈ √(2|V|)/ε_voc documents.
    """
    return max(float(noisy_total) / terms_per_doc, 1.0)


ProgressCallback = Progress  # the core's one progress type (dpkps_core.progress)
