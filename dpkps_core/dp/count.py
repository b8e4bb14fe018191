"""A DP document count: the size of the private training part, released with Laplace noise (docs/DESIGN.md §2.0, §3).

Neighbouring relation: add/remove one document (or, with a person column, one person's documents, when the
caller counts persons — :func:`dpkps_core.method.budget.release_unit_count` admits the units and counts the distinct
admitted ones). The count changes by at most 1,
so its L1 sensitivity is 1; the noise is Laplace(1/ε). Anything computed from the released count (e.g. the number
of hash buckets of private prediction, [PrivPred] Assumption 1) is post-processing and may be published; the true
count may not.

Charge first (docs/DESIGN.md §2.0): the frozen :class:`PrivacyEvent` is recorded in the ledger BEFORE the noise is drawn,
so a release that fails or is interrupted after that point stays charged. The event holds no noisy value (it is
frozen before the noise exists); the released value is the :class:`NoisyCount` returned.
"""

from __future__ import annotations

import dataclasses

from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, LaplaceCountEvent
from dpkps_core.dp.release import ReleaseContext
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


def count_event(*, epsilon: float, what: str = "documents in the training part", step: str = "size",
                neighbouring: str = ADD_REMOVE_ONE_DOCUMENT) -> LaplaceCountEvent:
    """The frozen event of one Laplace(1/ε) count (sensitivity 1 under ``neighbouring``), built from public input
    only, so that it can be charged before any private count is read or any noise drawn."""
    epsilon = check_epsilon(epsilon, "ε (count)")
    return LaplaceCountEvent(mechanism=MECHANISM, step=step, epsilon=epsilon, sensitivity=1.0,
                             noise_scale=1.0 / epsilon, released=f"Laplace-noised number of {what}",
                             neighbouring=neighbouring)


def release_count(
    true_count: int, *, epsilon: float, context: ReleaseContext, what: str = "documents in the training part",
    step: str = "size", neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> NoisyCount:
    """Release ``true_count`` + Laplace(1/ε) (sensitivity 1 under ``neighbouring``).

    With ``context.ledger`` the count's event is charged BEFORE ``context.noise`` draws (docs/DESIGN.md §2.0 "charge
    first"). The caller has admitted the counted units already (:func:`dpkps_core.method.budget.admit`) and counts
    only the admitted ones, or has charged this event itself as part of a larger release (then its context has no
    ledger: :meth:`~dpkps_core.dp.release.ReleaseContext.for_draw`)."""
    epsilon = check_epsilon(epsilon, "ε (count)")
    if context.ledger is not None:
        context.ledger.charge(count_event(epsilon=epsilon, what=what, step=step, neighbouring=neighbouring))
    scale = 1.0 / epsilon
    value = float(int(true_count) + float(context.noise.laplace(scale, 1, integer_valued=True)[0]))
    return NoisyCount(value=value, epsilon=epsilon, noise_scale=scale)
