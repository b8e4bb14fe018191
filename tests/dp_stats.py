"""Empirical differential-privacy checks shared by the mechanism tests.

For neighbouring inputs D, D' and an event S, estimate P[M(D) ∈ S] and P[M(D') ∈ S] from many independent
runs and check that their ratio stays within e^ε (plus sampling slack from a binomial confidence bound).
"""

from __future__ import annotations

import math

import numpy as np


def binomial_bounds(hits: int, trials: int, z: float = 4.0) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion (z = 4: ~1e-4 two-sided false alarm)."""
    p = hits / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(centre - half, 0.0), min(centre + half, 1.0)


def assert_ratio_within(hits_d: int, hits_d2: int, trials: int, epsilon: float) -> float:
    """Assert P[D]/P[D'] and P[D']/P[D] are ≤ e^ε up to sampling error; return the point estimate ratio."""
    lo_d, hi_d = binomial_bounds(hits_d, trials)
    lo_d2, hi_d2 = binomial_bounds(hits_d2, trials)
    bound = math.exp(epsilon)
    assert lo_d <= bound * hi_d2, f"P[M(D)∈S]≥{lo_d:.4f} > e^ε·P[M(D')∈S]≤{bound * hi_d2:.4f}"
    assert lo_d2 <= bound * hi_d, f"P[M(D')∈S]≥{lo_d2:.4f} > e^ε·P[M(D)∈S]≤{bound * hi_d:.4f}"
    return (hits_d / trials) / max(hits_d2 / trials, 1e-12)


def tail_event(noisy: np.ndarray, coords: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Boolean per trial: every coordinate in ``coords`` of the noisy release exceeds its threshold."""
    return (noisy[:, coords] > thresholds).all(axis=1)
