"""Privacy accounting outside pure ε-DP (docs/ARCHITECTURE.md): zCDP → (ε, δ), μ-GDP, and the calibrations that invert them.

- zCDP (private prediction, [PrivPred] Theorem 1): ε = ρ + √(4ρ·log(1/δ)) (Bun & Steinke 2016, Lemma 3.5) or the
  tighter inf-over-α conversion (Canonne et al. 2020, Cor. 13); :func:`max_rho_for` inverts it.
- μ-GDP (AugPE's T composed Gaussian vote releases, Dong et al. 2022): exact δ(ε) of the Gaussian mechanism,
  √T·Δ/σ composition, and :func:`calibrate_sigma`, the smallest σ for a target (ε, δ).
Every function is pure and validated; the mechanisms that use them record their own ledger events.
"""

from __future__ import annotations

import math

import numpy as np

from dpkps_core.dp.validation import check_delta, check_epsilon, check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError

CONVERSIONS = ("tight", "closed-form")
MAX_EPOCHS = 100  # AugPE's limit on T (config.AUGPE_LIMITS["epochs"])


# ------------------------------------------------------------------------------------------------------- zCDP

def epsilon_closed_form(rho: float, delta: float) -> float:
    """ε = ρ + √(4ρ·log(1/δ)) (Bun & Steinke 2016, Lemma 3.5; Theorem 1's second form)."""
    rho, delta = _check_rho(rho), check_delta(delta)
    return rho + math.sqrt(4.0 * rho * math.log(1.0 / delta))


def _eps_at_alpha(alpha: float, rho: float, log_inv_delta: float) -> float:
    # ε(α) = αρ + (log(1/δ) + (α−1)·log(1−1/α) − log α)/(α−1): every α > 1 gives a valid (ε, δ) guarantee.
    return alpha * rho + (log_inv_delta + (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)) / (alpha - 1.0)


def epsilon_tight(rho: float, delta: float) -> tuple[float, float]:
    """The inf-over-α conversion (Canonne et al. 2020, Cor. 13 — Theorem 1's first form solved for ε).

    Returns ``(ε, α)``. Every α > 1 yields a valid guarantee, so whatever α the numerical search lands on, the
    reported ε is a true bound (never an under-estimate); it is also never above the closed form."""
    from scipy.optimize import minimize_scalar

    rho, delta = _check_rho(rho), check_delta(delta)
    if rho == 0:
        return 0.0, math.inf
    lid = math.log(1.0 / delta)
    grid = np.logspace(-6, 8, 1401)  # α − 1 (ε(α) as in _eps_at_alpha, vectorised)
    alphas = 1.0 + grid
    vals = alphas * rho + (lid + grid * np.log1p(-1.0 / alphas) - np.log(alphas)) / grid
    k = int(np.argmin(vals))
    lo, hi = math.log(grid[max(k - 1, 0)]), math.log(grid[min(k + 1, len(grid) - 1)])
    res = minimize_scalar(lambda u: _eps_at_alpha(1.0 + math.exp(u), rho, lid), bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-10})
    eps, alpha = float(vals[k]), float(1.0 + grid[k])
    if res.success and float(res.fun) < eps:
        eps, alpha = float(res.fun), float(1.0 + math.exp(res.x))
    closed = epsilon_closed_form(rho, delta)
    if closed < eps:  # mathematically impossible (α → its optimum recovers the closed form); round-off guard
        return closed, math.nan
    return eps, alpha


def delta_tight(rho: float, epsilon: float) -> float:
    """Theorem 1's first form: δ = inf_{α>1} e^{(α−1)(αρ−ε)}/(α−1)·(1 − 1/α)^α."""
    rho = _check_rho(rho)
    eps = float(epsilon)
    if rho == 0:
        return 0.0
    alphas = 1.0 + np.logspace(-6, 8, 4001)
    logd = (alphas - 1) * (alphas * rho - eps) - np.log(alphas - 1) + alphas * np.log1p(-1.0 / alphas)
    return float(min(1.0, math.exp(float(np.min(logd)))))


def zcdp_to_epsilon(rho: float, delta: float, *, conversion: str = "tight") -> float:
    """(ε, δ)-DP from ρ-zCDP: ``tight`` (inf over α, never larger than the closed form) or ``closed-form``."""
    if conversion not in CONVERSIONS:
        raise ParameterError(f"Unknown conversion {conversion!r}; choose one of {', '.join(CONVERSIONS)}.")
    if conversion == "closed-form":
        return epsilon_closed_form(rho, delta)
    return epsilon_tight(rho, delta)[0]


def max_rho_for(epsilon: float, delta: float, *, conversion: str = "tight") -> float:
    """The largest ρ whose (ε, δ) conversion does not exceed the target ε (bisection; closed form exact)."""
    if conversion not in CONVERSIONS:
        raise ParameterError(f"Unknown conversion {conversion!r}; choose one of {', '.join(CONVERSIONS)}.")
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    lid = math.log(1.0 / delta)
    closed = (math.sqrt(lid + eps) - math.sqrt(lid)) ** 2  # solves ρ + 2√(ρ·L) = ε
    if conversion == "closed-form":
        return closed
    lo, hi = closed, max(closed * 4, eps)
    while zcdp_to_epsilon(hi, delta) <= eps:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if zcdp_to_epsilon(mid, delta) <= eps:
            lo = mid
        else:
            hi = mid
    return lo


def _check_rho(rho: float) -> float:
    value = float(rho)
    if not math.isfinite(value) or value < 0:
        raise ParameterError(f"ρ must be a finite number ≥ 0, got {rho!r}.")
    return value


# ------------------------------------------------------------------------------------------------------ μ-GDP

def gaussian_delta(*, mu: float, epsilon: float) -> float:
    """Exact δ(ε) of μ-GDP (= the Gaussian mechanism with sensitivity/σ = μ): Φ(−ε/μ + μ/2) − e^ε·Φ(−ε/μ − μ/2)."""
    from scipy.special import log_ndtr, ndtr

    mu = check_positive_float(mu, "μ")
    eps = float(epsilon)
    a = float(ndtr(-eps / mu + mu / 2))
    b = math.exp(eps + float(log_ndtr(-eps / mu - mu / 2)))
    return max(a - b, 0.0)


def composed_mu(*, sigma: float, epochs: int, sensitivity: float = 1.0) -> float:
    """μ of T adaptive Gaussian releases with L2 sensitivity Δ and noise σ: √T·Δ/σ (exact GDP composition)."""
    sigma = check_positive_float(sigma, "σ (Gaussian noise)")
    return math.sqrt(check_positive_int(epochs, "epochs")) * check_positive_float(sensitivity, "sensitivity") / sigma


def gaussian_epsilon(*, sigma: float, epochs: int, delta: float, sensitivity: float = 1.0) -> float:
    """The smallest ε (to 1e-9, rounded up) with δ(ε) ≤ δ for T composed Gaussian mechanisms."""
    delta = check_delta(delta)
    mu = composed_mu(sigma=sigma, epochs=epochs, sensitivity=sensitivity)
    if gaussian_delta(mu=mu, epsilon=0.0) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    while gaussian_delta(mu=mu, epsilon=hi) > delta:
        lo, hi = hi, hi * 2
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mu=mu, epsilon=mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-10:
            break
    return hi  # the side that satisfies δ(ε) ≤ δ


def calibrate_sigma(*, epsilon: float, delta: float, epochs: int, sensitivity: float = 1.0) -> float:
    """Smallest σ (rounded UP to 4 significant digits) such that T Gaussian releases are (ε, δ)-DP."""
    eps = check_epsilon(epsilon, "ε (AugPE)")
    delta = check_delta(delta)
    t = check_positive_int(epochs, "epochs", maximum=MAX_EPOCHS)
    lo, hi = 1e-6, 1.0  # μ range: δ(ε; μ) grows with μ
    while gaussian_delta(mu=hi, epsilon=eps) <= delta:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if gaussian_delta(mu=mid, epsilon=eps) <= delta:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    sigma = math.sqrt(t) * sensitivity / lo  # lo satisfies the bound → σ ≥ the exact minimum
    scale = 10 ** (3 - math.floor(math.log10(sigma)))
    sigma = math.ceil(sigma * scale) / scale
    while gaussian_epsilon(sigma=sigma, epochs=t, delta=delta, sensitivity=sensitivity) > eps:  # pragma: no cover
        sigma *= 1 + 1e-4
    return sigma


# ------------------------------------------------------------------------------- private prediction ([PrivPred])

def rho_per_batch(*, batch_size: float, private_tokens: int, clip: float, temperature: float,
                  svt_noise: float | None) -> float:
    """Theorem 1: ρ = r·(½(c/(sτ))² + 2/(sσ)²) zCDP for one batch (= the whole run, by parallel composition).

    ``svt_noise=None`` means the sparse vector step does not run (θ = −∞): every token is private and the SVT
    term 2/(sσ)² is dropped (Lemma 4 alone)."""
    s = check_positive_float(batch_size, "s (expected batch size)")
    r = check_positive_int(private_tokens, "r (private tokens per batch)")
    c = check_positive_float(clip, "c (clip)")
    tau = check_positive_float(temperature, "τ (temperature)")
    per_token = 0.5 * (c / (s * tau)) ** 2
    if svt_noise is not None:
        sigma = check_positive_float(svt_noise, "σ (SVT noise)")
        per_token += 2.0 / (s * sigma) ** 2
    return r * per_token


def calibrate_private_prediction(*, epsilon: float, delta: float, batch_size: float, private_tokens: int, clip: float,
                                 temperature: float, svt_noise: float | None, solve_for: str = "clip",
                                 conversion: str = "tight") -> float:
    """The clip c (``solve_for="clip"``) or temperature τ (``"temperature"``) at which private prediction's ρ of
    :func:`rho_per_batch` converts to exactly ε at δ ([PrivPred] Theorem 1; docs/DESIGN.md §3): with ρ_max from
    :func:`max_rho_for`, ½(c/(sτ))² = ρ_max/r − 2/(sσ)², so c = sτ·√(2·room). Unrounded: the caller rounds the
    safe way and re-checks. Raises :class:`ParameterError` when the sparse-vector term alone exceeds the budget."""
    eps, delta = check_epsilon(epsilon), check_delta(delta)
    if solve_for not in ("clip", "temperature"):
        raise ParameterError("solve_for must be 'clip' or 'temperature'.")
    s = check_positive_float(batch_size, "s (expected batch size)")
    r = check_positive_int(private_tokens, "r (private tokens per batch)")
    rho_max = max_rho_for(eps, delta, conversion=conversion)
    svt = 0.0 if svt_noise is None else 2.0 / (s * check_positive_float(svt_noise, "σ (SVT noise)")) ** 2
    room = rho_max / r - svt
    if room <= 0:
        raise ParameterError(
            f"At ε = {eps:g}, δ = {delta:g} the sparse-vector step alone (2r/(sσ)² = {r * svt:.3g}) uses more than "
            f"the budget (ρ = {rho_max:.3g}); raise the batch size s or the SVT noise σ, lower r, or switch the "
            "sparse vector off."
        )
    if solve_for == "clip":
        return s * check_positive_float(temperature, "τ (temperature)") * math.sqrt(2.0 * room)
    return check_positive_float(clip, "c (clip)") / (s * math.sqrt(2.0 * room))
