"""The audit's statistics: one-sided Clopper–Pearson bounds, ε lower bounds, the choice of an event and the verdict.

The standard construction of the empirical audit (docs/PRIVACY.md, "Empirical audit"): for an event E chosen on
separate *selection* trials, the evaluation trials give ε_lb = ln(CP_lower(p_num) / CP_upper(p_den)) with
one-sided Clopper–Pearson bounds (Bonferroni-corrected by the caller over every bound computed); if the
implementation were ε-DP, ε_lb ≤ ε with probability ≥ the confidence. Pure NumPy/SciPy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

MAX_THRESHOLDS = 256            # candidate thresholds per statistic on the selection trials


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


def trials_to_certify(epsilon: float, alpha: float) -> int:
    """The fewest evaluation trials per neighbour whose largest possible bound (:func:`max_certifiable_epsilon`: all
    hits against none) exceeds ``epsilon`` at level ``alpha``: CP_lower(n of n) = α^(1/n) and CP_upper(0 of n) =
    1 − α^(1/n), so n > ln(1/α) / ln(1 + e^(−ε))."""
    if not (0.0 < alpha < 1.0) or not math.isfinite(epsilon) or epsilon < 0:
        raise ValueError("trials_to_certify needs 0 < alpha < 1 and a finite ε ≥ 0.")
    n = max(1, math.ceil(math.log(1.0 / alpha) / math.log1p(math.exp(-epsilon))))
    while max_certifiable_epsilon(n, alpha) <= epsilon:  # the closed form's rounding, made exact
        n += 1
    return n


#: The three verdicts of an audit: a leak shown, none where one could show, or none within reach of the trials.
VIOLATION = "violation"
CONSISTENT = "consistent"
INCONCLUSIVE = "inconclusive"


def verdict_kind(lower_bound: float, claimed: float, max_certifiable: float) -> str:
    """:data:`VIOLATION` when the lower bound exceeds the claimed ε; :data:`INCONCLUSIVE` when these trials could
    not have shown a violation (their largest possible bound is ≤ the claim); :data:`CONSISTENT` otherwise."""
    if lower_bound > claimed + 1e-9:
        return VIOLATION
    return INCONCLUSIVE if max_certifiable <= claimed else CONSISTENT


def verdict_for(lower_bound: float, claimed: float, confidence: float, max_certifiable: float, *,
                alpha: float | None = None) -> tuple[bool, str]:
    """The verdict line: a violation when the lower bound exceeds the claimed ε; "INCONCLUSIVE" (never a pass)
    when the trials could not have shown one — with how many evaluation trials per neighbour a violation of the
    claimed ε would need at the same ``alpha`` (the Bonferroni-corrected level of each bound)."""
    kind = verdict_kind(lower_bound, claimed, max_certifiable)
    if kind == VIOLATION:
        return True, (f"VIOLATION: the implementation leaks more than claimed (ε ≥ {lower_bound:.2f} > {claimed:g} at "
                      f"{confidence:.0%} confidence).")
    if kind == INCONCLUSIVE:
        need = f"; showing a violation of ε = {claimed:g} would need at least {trials_to_certify(claimed, alpha):,} " \
               "evaluation trials per neighbour" if alpha is not None else ""
        return False, (f"INCONCLUSIVE for ε = {claimed:g}: these trials can certify at most ε ≈ {max_certifiable:.2f}, "
                       f"so they could not have shown a leak of the claimed size (empirical lower bound "
                       f"{lower_bound:.2f} at {confidence:.0%} confidence{need}). Only leaks larger than "
                       f"{max_certifiable:.2f} would have shown; none did.")
    return False, (f"consistent with ε = {claimed:g} (empirical lower bound {lower_bound:.2f} at {confidence:.0%} "
                   "confidence; a leak of the claimed size would have shown).")
