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


# ------------------------------------------------------------------------------------ privacy-loss lower bounds
# The mechanism tests under tests/dp/ audit each release the way DP-Auditorium and the audit module do
# (docs/PRIVACY.md, "Empirical audit"): neighbouring inputs D, D' whose statistic differs by the FULL stated
# sensitivity, an event E fixed in advance where the likelihood ratio of the two output distributions is largest,
# many seeded runs of the real release function on each side, and a one-sided Clopper–Pearson lower bound on the
# privacy loss ln P[M(D') ∈ E] / P[M(D) ∈ E]. The verdict is "violation" when that bound exceeds the claimed ε.

VIOLATION = "violation"
CONSISTENT = "consistent"


def clopper_pearson(hits: int, trials: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds at level ``alpha`` each: (lower, upper) for a binomial proportion."""
    from scipy.stats import beta

    if not 0 <= hits <= trials or trials <= 0:
        raise ValueError(f"need 0 ≤ hits ≤ trials and trials > 0, got {hits}/{trials}")
    lower = 0.0 if hits == 0 else float(beta.ppf(alpha, hits, trials - hits + 1))
    upper = 1.0 if hits == trials else float(beta.ppf(1 - alpha, hits + 1, trials - hits))
    return lower, upper


def epsilon_lower_bound(hits_num: int, trials_num: int, hits_den: int, trials_den: int, *,
                        alpha: float = 1e-3) -> float:
    """ln(CP_lower(p_num) / CP_upper(p_den)): a lower bound on the privacy loss of the event, holding with
    probability ≥ 1 − 2α (each side one-sided at α). −∞ when the numerator event was never seen."""
    lo, _ = clopper_pearson(hits_num, trials_num, alpha)
    _, hi = clopper_pearson(hits_den, trials_den, alpha)
    return -math.inf if lo <= 0 else math.log(lo / hi)


def dp_verdict(hits_d: int, hits_d2: int, trials: int, epsilon: float, *, alpha: float = 1e-3) -> tuple[str, float]:
    """(verdict, ε_lb): ε_lb is the larger of the two directions' Clopper–Pearson lower bounds (Bonferroni over
    the two: each at α/2); the verdict is :data:`VIOLATION` when ε_lb > ε (the claimed pure-DP ε)."""
    eps_lb = max(epsilon_lower_bound(hits_d2, trials, hits_d, trials, alpha=alpha / 2),
                 epsilon_lower_bound(hits_d, trials, hits_d2, trials, alpha=alpha / 2))
    return (VIOLATION if eps_lb > epsilon else CONSISTENT), eps_lb


def hockey_stick_lower_bound(hits_num: int, hits_den: int, trials: int, epsilon: float, *,
                             alpha: float = 1e-3) -> float:
    """A lower bound on P[M(D') ∈ E] − e^ε·P[M(D) ∈ E] (the hockey-stick divergence at ε restricted to E), each
    probability bounded one-sided at α/2 by Clopper–Pearson. (ε, δ)-DP requires it to be ≤ δ."""
    lo, _ = clopper_pearson(hits_num, trials, alpha / 2)
    _, hi = clopper_pearson(hits_den, trials, alpha / 2)
    return lo - math.exp(epsilon) * hi


def approx_dp_verdict(hits_num: int, hits_den: int, trials: int, epsilon: float, delta: float, *,
                      alpha: float = 1e-3) -> tuple[str, float]:
    """(verdict, δ_lb) for an (ε, δ) claim: :data:`VIOLATION` when the hockey-stick lower bound exceeds δ."""
    delta_lb = hockey_stick_lower_bound(hits_num, hits_den, trials, epsilon, alpha=alpha)
    return (VIOLATION if delta_lb > delta else CONSISTENT), delta_lb


# ----------------------------------------------------------------------------------------------- noise helpers

def scale_noise(monkeypatch, factor: float, *, gaussian: bool = False, only_scale: float | None = None) -> None:
    """Patch :class:`~dpkps_core.dp.rng.NoiseSource` so that every Laplace (or Gaussian) draw uses ``factor`` × the
    scale the mechanism asked for — the "noise halved" bug (factor ½) or "noise removed" (factor 0: the draws
    are zero). ``only_scale``: patch only draws of exactly that scale (e.g. the sparse vector's query noise)."""
    from dpkps_core.dp.rng import NoiseSource

    name = "add_gaussian" if gaussian else "add_laplace"
    original = getattr(NoiseSource, name)
    keyword = "sigma" if gaussian else "scale"

    def patched(self, values, **kwargs):  # type: ignore[no-untyped-def]
        asked = float(kwargs[keyword])
        if only_scale is not None and not math.isclose(asked, only_scale, rel_tol=1e-12):
            return original(self, values, **kwargs)
        if factor == 0:
            return np.asarray(values, dtype=np.float64).copy()
        kwargs[keyword] = asked * factor
        return original(self, values, **kwargs)

    monkeypatch.setattr(NoiseSource, name, patched)


class RecordingNoise:
    """A seeded :class:`~dpkps_core.dp.rng.NoiseSource` that records every noisy release it makes: (kind, scale,
    number of values). Mechanisms call ``add_laplace`` / ``add_gaussian`` (``laplace`` / ``gaussian`` go through
    them), so the record is the noise actually added, to compare with the ledger's events."""

    def __new__(cls, seed: int = 0):  # type: ignore[no-untyped-def]
        from dpkps_core.dp.rng import NoiseSource

        class _Recording(NoiseSource):
            def __init__(self, s: int) -> None:
                super().__init__(s)
                self.draws: list[tuple[str, float, int]] = []

            def add_laplace(self, values, *, scale, integer_valued=False):  # type: ignore[no-untyped-def]
                self.draws.append(("laplace", float(scale), int(np.asarray(values).size)))
                return super().add_laplace(values, scale=scale, integer_valued=integer_valued)

            def add_gaussian(self, values, *, sigma):  # type: ignore[no-untyped-def]
                self.draws.append(("gaussian", float(sigma), int(np.asarray(values).size)))
                return super().add_gaussian(values, sigma=sigma)

        return _Recording(seed)


class PassThroughNoise:
    """A :class:`~dpkps_core.dp.rng.NoiseSource` for the mutation-kill tests (so that it travels in a
    :class:`~dpkps_core.dp.release.ReleaseContext`): adds NO noise (returns the statistic unchanged) and records each
    call's ``(statistic, scale)``, so a test reads exactly what a mechanism computed before its noise and the scale it
    asked for; ``child()`` gives the seeded generators of seed 0 for its sampling."""

    def __new__(cls):  # type: ignore[no-untyped-def]
        from dpkps_core.dp.rng import NoiseSource

        class _PassThrough(NoiseSource):
            def __init__(self) -> None:
                super().__init__(0)
                self.calls: list[tuple[np.ndarray, float]] = []

            def add_laplace(self, values: np.ndarray, *, scale: float, integer_valued: bool = False) -> np.ndarray:
                out = np.asarray(values, dtype=np.float64).copy()
                self.calls.append((out.copy(), float(scale)))
                return out

        return _PassThrough()
