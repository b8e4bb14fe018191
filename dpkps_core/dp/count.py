"""A DP document count (issue 11 §3): the size of the private training part, released with Laplace noise.

Neighbouring relation: add/remove one document (or, with a person column, one person's documents, when the
caller counts persons). The count changes by at most 1, so its L1 sensitivity is 1; the noise is
Laplace(1/ε). Anything computed from the released count (e.g. the number of hash buckets of private
prediction, paper 004 Assumption 1) is post-processing and may be published; the true count may not.
"""

from __future__ import annotations

import dataclasses

from dpkps_core.dp.ledger import PrivacyEvent, PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_epsilon

MECHANISM = "laplace_document_count"


@dataclasses.dataclass(frozen=True)
class NoisyCount:
    """A DP-released count (safe to show and export) and how it was made."""

    value: float
    epsilon: float
    noise_scale: float

    @property
    def clamped(self) -> float:
        """The released value clamped to ≥ 1 (post-processing), for use as a size estimate."""
        return max(float(self.value), 1.0)


def release_count(
    true_count: int, *, epsilon: float, noise: NoiseSource, ledger: PrivacyLedger | None = None,
    what: str = "documents in the training part", step: str = "size",
) -> NoisyCount:
    """Release ``true_count`` + Laplace(1/ε) (sensitivity 1 under add/remove one document), charging ``ledger``."""
    epsilon = check_epsilon(epsilon, "ε (count)")
    if ledger is not None:
        ledger.require(epsilon, f"the DP count of {what}")
    scale = 1.0 / epsilon
    value = float(int(true_count) + float(noise.laplace(scale, 1, integer_valued=True)[0]))
    if ledger is not None:
        ledger.charge(PrivacyEvent(mechanism=MECHANISM, step=step, epsilon=epsilon, sensitivity=1.0,
                                   noise_scale=scale, released=f"Laplace-noised number of {what}",
                                   params={"noisy_count": round(value, 2)}))
    return NoisyCount(value=value, epsilon=epsilon, noise_scale=scale)
