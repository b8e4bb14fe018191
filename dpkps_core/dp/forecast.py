"""The DP forecast release (ε_forecast): the few statistics "Will this work?" needs, Laplace-noised (docs/DESIGN.md §2, §6).

Choosing ε, N or a method from EXACT private statistics is a use of the data that ε does not cover
(docs/PRIVACY.md "Previews"). The default forecast therefore reads the corpus only through this mechanism, and
everything it shows (the vocabulary noise share, the density signal-to-noise, the verdict) is post-processing of
its output (``dpkps_core.evaluation.forecast_dp.forecast_from_release``).

**Statistic.** Two parts, released together by ONE Laplace mechanism:

* the *count curve* G = (G_1 … G_K): G_k = number of terms of V whose first-S-distinct count (docs/DESIGN.md §2.1 step 2;
  with a person column, per person over all their documents) is ≥ c_k, at PUBLIC thresholds c_1 < … < c_K;
* the *class sizes* n = (n_c): per declared class, the number of units' documents in it (document unit: one per
  document; person unit: each of a person's k documents weighs 1/k, so a person weighs 1 over all classes).

**Neighbouring relation:** add/remove one document (person unit: one person's documents).
**Sensitivity.** Adding a unit raises the counts of at most S terms by exactly 1 each; a count that rises by one
crosses at most one threshold, so each of those terms changes at most one G_k by 1: ‖ΔG‖₁ ≤ S, whatever K is.
The class sizes change by at most 1 in L1 (one class for a document; a person's weights sum to 1).
**Noise.** With a public share a ∈ (0, 1), the released vector is u = (a·G/S, (1 − a)·n) + Laplace(1/ε) per entry:
u has L1 sensitivity a + (1 − a) = 1, so the release is ε-DP (the Laplace mechanism, Dwork & Roth 2014 Thm 3.6).
Rescaled (post-processing), that is G + Laplace(S/(a·ε)) per threshold and n + Laplace(1/((1 − a)·ε)) per class.

Order (docs/DESIGN.md §2.0, "charge first"): the caller admits the units (``dpkps_core.method.budget.admit``), computes the
statistic on the admitted documents only, then :func:`release_forecast_statistics` charges the frozen
:class:`~dpkps_core.dp.events.ForecastStatisticsEvent` (step ``"forecast"``) BEFORE it draws any noise.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, ForecastStatisticsEvent
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.errors import ParameterError

MECHANISM = "laplace_forecast_statistics"
STEP = "forecast"
#: Default ε of the forecast release: small next to ε_voc + ε_kde, enough for an order-of-magnitude forecast.
DEFAULT_FORECAST_EPSILON = 0.2
#: Default share a of ε_forecast spent on the count curve (the rest on the class sizes).
DEFAULT_CURVE_SHARE = 0.5
#: Public thresholds c_k of the count curve: every integer up to 1,000, then ×1.02 up to 10⁶. The sensitivity
#: does not grow with their number (each count crosses one threshold), and the monotone fit averages the noise
#: of many thresholds where the curve is flat — dense thresholds make the curve more accurate, not noisier.
DEFAULT_THRESHOLDS: tuple[int, ...] = tuple(int(c) for c in np.unique(np.concatenate([
    np.arange(1, 1001), np.round(1000 * 1.02 ** np.arange(1, 350))])) if c <= 1_000_000)


def check_thresholds(thresholds: Sequence[int]) -> np.ndarray:
    """Public thresholds as a strictly increasing int64 array starting at ≥ 1 (ParameterError otherwise)."""
    t = np.asarray(list(thresholds), dtype=np.int64)
    if t.ndim != 1 or t.size == 0 or t[0] < 1 or np.any(np.diff(t) <= 0):
        raise ParameterError("The forecast thresholds must be strictly increasing integers starting at 1 or more.")
    return t


def count_curve(counts: np.ndarray, thresholds: Sequence[int]) -> np.ndarray:
    """G_k = number of entries of ``counts`` that are ≥ thresholds[k] (vectorised: one sort, one search)."""
    t = check_thresholds(thresholds)
    c = np.sort(np.asarray(counts, dtype=np.float64).ravel())
    return (c.size - np.searchsorted(c, t, side="left")).astype(np.int64)


def class_sizes(labels: Sequence[str], classes: Sequence[str], groups: Sequence[str] | None = None) -> np.ndarray:
    """Per class, the number of documents (document unit) or Σ 1/k over each person's k documents (person unit).

    Documents whose label is not in ``classes`` count nowhere (undeclared labels enter no DP step)."""
    index = {str(c): i for i, c in enumerate(classes)}
    lab = np.fromiter((index.get(str(y), -1) for y in labels), dtype=np.int64, count=len(labels))
    if groups is None:
        w = np.ones(lab.size, dtype=np.float64)
    else:
        if len(groups) != len(labels):
            raise ParameterError("Give one person per document.")
        _, inv = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
        w = 1.0 / np.bincount(inv)[inv]
    keep = lab >= 0
    return np.bincount(lab[keep], weights=w[keep], minlength=len(classes)).astype(np.float64)


def noise_scales(epsilon: float, terms_per_doc: int, curve_share: float) -> tuple[float, float]:
    """(Laplace scale per curve entry, per class size): S/(a·ε) and 1/((1 − a)·ε) — see the module docstring."""
    return terms_per_doc / (curve_share * epsilon), 1.0 / ((1.0 - curve_share) * epsilon)


def monotone_non_increasing(values: np.ndarray) -> np.ndarray:
    """Least-squares non-increasing fit (pool-adjacent-violators; post-processing of DP values): SciPy's compiled
    PAVA (``scipy.optimize.isotonic_regression``), which the forecast's uncertainty check runs on every simulated
    release."""
    from scipy.optimize import isotonic_regression

    v = np.asarray(values, dtype=np.float64).ravel()
    if v.size == 0:
        return np.zeros(0)
    return np.asarray(isotonic_regression(v, increasing=False).x, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class ForecastStatistics:
    """The DP forecast release (safe to show, store and use to choose settings: it is on the ledger).

    ``curve`` and ``class_counts`` are the noisy values as released; :meth:`smoothed_curve` and
    :meth:`class_sizes` are their post-processed forms (monotone, clamped) the forecast uses."""

    thresholds: tuple[int, ...]
    curve: np.ndarray = dataclasses.field(compare=False, repr=False)
    classes: tuple[str, ...]
    class_counts: np.ndarray = dataclasses.field(compare=False, repr=False)
    public_vocabulary: str
    public_vocabulary_size: int
    terms_per_doc: int
    epsilon: float
    curve_share: float
    curve_noise_scale: float
    class_noise_scale: float
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT

    def smoothed_curve(self) -> np.ndarray:
        """Non-increasing, within [0, |V|], and 0 above the noisy number of units (no term occurs in more
        documents than there are; post-processing of DP values only)."""
        g = monotone_non_increasing(self.curve)
        g[np.asarray(self.thresholds) > max(float(np.sum(self.class_counts)), 1.0)] = 0.0
        return np.clip(g, 0.0, float(self.public_vocabulary_size))

    def class_sizes(self) -> dict[str, float]:
        """Noisy class sizes clamped at 0 (post-processing)."""
        return {c: max(float(v), 0.0) for c, v in zip(self.classes, self.class_counts)}

    def to_dict(self) -> dict[str, Any]:
        return {"thresholds": list(self.thresholds), "curve": [round(float(v), 2) for v in self.curve],
                "classes": list(self.classes), "class_counts": [round(float(v), 2) for v in self.class_counts],
                "public_vocabulary": self.public_vocabulary, "public_vocabulary_size": self.public_vocabulary_size,
                "terms_per_doc": self.terms_per_doc, "epsilon": self.epsilon, "curve_share": self.curve_share,
                "curve_noise_scale": self.curve_noise_scale, "class_noise_scale": self.class_noise_scale,
                "neighbouring": self.neighbouring}


def forecast_event(*, epsilon: float, terms_per_doc: int, curve_share: float, thresholds: int, classes: int,
                   public_vocabulary_size: int, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT) -> ForecastStatisticsEvent:
    """The forecast release's frozen event, from public input only (ε, S, the share a, how many thresholds and
    classes, |V|): built before anything is admitted (``dpkps_core.dp.release.release``)."""
    b_curve, b_class = noise_scales(epsilon, terms_per_doc, float(curve_share))
    return ForecastStatisticsEvent(
        mechanism=MECHANISM, step=STEP, epsilon=epsilon, sensitivity=1.0, noise_scale=1.0 / epsilon,
        neighbouring=neighbouring,
        released=(f"Laplace-noised count curve of V's term counts at {thresholds} public thresholds (sensitivity S = "
                  f"{terms_per_doc}, share {float(curve_share):g} of ε) and per-class document counts (sensitivity "
                  "1), as one vector of L1 sensitivity 1"),
        thresholds=int(thresholds), terms_per_doc=terms_per_doc, curve_share=float(curve_share),
        curve_noise_scale=b_curve, class_noise_scale=b_class, classes=int(classes),
        public_vocabulary_size=int(public_vocabulary_size))


def release_forecast_statistics(
    counts: np.ndarray, labels: Sequence[str], *, classes: Sequence[str], epsilon: float, terms_per_doc: int,
    context: ReleaseContext, public_vocabulary: str = "",
    groups: Sequence[str] | None = None, thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
    curve_share: float = DEFAULT_CURVE_SHARE, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> ForecastStatistics:
    """ε-DP release of the count curve of ``counts`` (per-term first-S-distinct counts over ALL of V, computed on
    the ADMITTED documents) and of the class sizes of ``labels`` (see the module docstring for the relation,
    the sensitivity 1 of the rescaled vector and the noise Laplace(1/ε)).

    Charges ``context.ledger`` with the frozen event (:func:`forecast_event`) first, then draws ``context.noise``
    (:class:`~dpkps_core.dp.release.ReleaseContext`); a context without a ledger: the caller has charged that event
    already (:func:`dpkps_core.dp.release.release`)."""
    epsilon = check_epsilon(epsilon, "ε_forecast")
    terms_per_doc = check_positive_int(terms_per_doc, "S (terms per document)")
    if not 0.0 < float(curve_share) < 1.0:
        raise ParameterError("The forecast's curve share must lie strictly between 0 and 1.")
    if len(classes) < 1:
        raise ParameterError("The forecast needs the declared class names.")
    t = check_thresholds(thresholds)
    counts = np.asarray(counts)
    curve = count_curve(counts, t)
    sizes = class_sizes(labels, classes, groups)
    event = forecast_event(epsilon=epsilon, terms_per_doc=terms_per_doc, curve_share=float(curve_share),
                           thresholds=int(t.size), classes=len(classes), public_vocabulary_size=int(counts.size),
                           neighbouring=neighbouring)
    if context.ledger is not None:
        context.ledger.charge(event)  # charge first: before any noise is drawn (docs/DESIGN.md §2.0)
    noisy_curve = context.noise.add_laplace(curve, scale=event.curve_noise_scale, integer_valued=True)
    noisy_sizes = context.noise.add_laplace(sizes, scale=event.class_noise_scale, integer_valued=groups is None)
    return ForecastStatistics(
        thresholds=tuple(int(x) for x in t), curve=np.asarray(noisy_curve, dtype=np.float64),
        classes=tuple(str(c) for c in classes), class_counts=np.asarray(noisy_sizes, dtype=np.float64),
        public_vocabulary=public_vocabulary, public_vocabulary_size=int(counts.size), terms_per_doc=terms_per_doc,
        epsilon=epsilon, curve_share=float(curve_share), curve_noise_scale=event.curve_noise_scale,
        class_noise_scale=event.class_noise_scale, neighbouring=neighbouring)
