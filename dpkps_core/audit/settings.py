"""The public settings of an audit (docs/PRIVACY.md "Empirical audit") and the cancel flag it polls."""

from __future__ import annotations

import dataclasses
import math
from typing import Protocol

from dpkps_core.method.config import LIMITS
from dpkps_core.dp.validation import check_positive_int
from dpkps_core.errors import ParameterError

SAMPLER_CHOICES = ("numpy", "opendp", "release")


def sampler_note(used: str, release: str) -> str:
    """What the audit's noise was, against the release's own sampler (said in every audit's output)."""
    if used == release:
        return f"The trials drew the release's own sampler ({used})."
    if used == "numpy":
        return ("The trials drew NumPy's Laplace, not the release's OpenDP samplers: the same noise distributions "
                "at the same scales (continuous rather than discrete Laplace for the vocabulary counts), so they test "
                "what the implementation decides — sensitivities, noise scales, what enters each statistic, the "
                "loader — but not OpenDP's sampling code; OpenDP cannot be seeded and takes seconds per trial over "
                "a large vocabulary. --audit-sampler release (or the page's sampler option) audits with the "
                "release's own sampler.")
    return f"The trials drew {used}'s sampler; the release uses {release}."
MIN_TRIALS = 4


class Cancel(Protocol):
    def is_set(self) -> bool: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class AuditSettings:
    """Public settings of an audit (docs/PRIVACY.md "Empirical audit").

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
        canary_terms: rare public terms per canary document (default S, the most one document contributes; with
            a prefix, S minus the prefix's terms, at least 1).
        canary_prefix_words: an in-distribution prefix before each exposure canary's rare public terms ([Canary]:
            the canary reads like the corpus, its rare suffix is what is measured) — the first words of a
            randomly drawn training document of the canary's class, shortened until at least one of the S terms a
            document contributes is left for the suffix. Kept in memory only, never reported. 0 (default): the
            canaries are rare public terms only.
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
    canary_prefix_words: int = 0
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
        check_positive_int(self.canary_prefix_words, "words of a canary's in-distribution prefix", minimum=0,
                           maximum=200)
        if self.canary_terms is not None:
            check_positive_int(self.canary_terms, "terms per canary document", maximum=LIMITS["terms_per_doc"])
        if self.noise_sampler not in SAMPLER_CHOICES:
            raise ParameterError(f"Unknown audit noise sampler {self.noise_sampler!r}; choose one of "
                                 f"{', '.join(SAMPLER_CHOICES)}.")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise ParameterError(f"The audit seed must be a non-negative integer, got {self.seed!r}.")
        return self
