"""Privacy accounting (dpkps_core.dp.accounting): zCDP → (ε, δ) for private prediction, μ-GDP for AugPE.

Exact behaviour pinned (mutation testing) for dpkps_core.dp.accounting (docs/TESTING.md "Mutation testing").

The zCDP → (ε, δ) conversions (Bun & Steinke 2016, Lemma 3.5; Canonne et al. 2020, Cor. 13) are checked against
an independent, more precise minimisation over α, so a conversion that stops refining its grid optimum, evaluates
a formula at the wrong α or loses its edge cases (ρ = 0) fails; the validators' messages name the argument.

Exact behaviour pinned (mutation testing) for private prediction's accounting and the RFF phases (docs/TESTING.md "Mutation testing").

Private prediction ([PrivPred], Theorem 1; docs/DESIGN.md §3): one batch costs ρ = r·(½(c/(sτ))² + 2/(sσ)²) zCDP, and
``calibrate_private_prediction`` solves that ρ = ρ_max(ε, δ) for the clip c or the temperature τ. The tests below
recompute ρ, ρ_max (the closed form ρ + 2√(ρ·log 1/δ) = ε solved for ρ, and the inf-over-α δ of Theorem 1's first
form by an independent bounded search) and the calibrated c / τ from those formulas, check the refusals name their
parameter, and pin the exact-tie boundary where the sparse-vector term uses the whole budget. The RFF phases
√2·ωᵀz/σ + β (docs/DESIGN.md §2.2) are checked for their value and for running the GEMM in the features' dtype.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from dpkps_core.baselines import prediction_config as pp
from dpkps_core.dp import accounting as acc
from dpkps_core.dp.rff import RandomFourierFeatures
from dpkps_core.errors import ParameterError


def test_accountant_reproduces_the_papers_setting_by_hand() -> None:
    s, tau, c, delta = 250, 2.0, 10.0, 1e-6
    # per private token: ½(c/(sτ))² = ½(10/500)² = 0.0002; SVT σ = 0.2: 2/(sσ)² = 2/50² = 0.0008
    assert acc.rho_per_batch(batch_size=s, private_tokens=1, clip=c, temperature=tau, svt_noise=None) == pytest.approx(2e-4)
    rho = acc.rho_per_batch(batch_size=s, private_tokens=100, clip=c, temperature=tau, svt_noise=0.2)
    assert rho == pytest.approx(0.1)
    # closed form: ε = 0.1 + √(4·0.1·ln 10⁶) = 0.1 + √5.526204 = 2.450788
    assert acc.epsilon_closed_form(rho, delta) == pytest.approx(2.450788, abs=1e-5)
    # tight form at α = 12 by hand: 12·0.1 + (ln 10⁶ + 11·ln(11/12) − ln 12)/11
    #   = 1.2 + (13.815511 − 0.957112 − 2.484907)/11 = 1.2 + 0.943045 = 2.143045
    at12 = 1.2 + (13.815511 - 0.957112 - 2.484907) / 11
    assert acc._eps_at_alpha(12.0, rho, math.log(1e6)) == pytest.approx(at12, abs=1e-5)
    assert acc._eps_at_alpha(8.0, rho, math.log(1e6)) == pytest.approx(0.8 + (13.815511 - 0.934730 - 2.079442) / 7,
                                                                       abs=1e-5)  # α = 8: 2.343049, worse
    eps, alpha = acc.epsilon_tight(rho, delta)  # the inf over α: ≈ 2.14194 at α ≈ 11.66
    assert eps <= at12 + 1e-9 and eps < acc.epsilon_closed_form(rho, delta)
    assert eps == pytest.approx(2.14194, abs=1e-4) and 11 < alpha < 12.5
    # the δ-form of Theorem 1 gives back δ at that ε
    assert acc.delta_tight(rho, eps) == pytest.approx(delta, rel=0.02)
    assert acc.delta_tight(rho, eps + 0.5) < delta < acc.delta_tight(rho, eps - 0.5)
    # config helper and the r = 0 / bad inputs
    cfg = pp.PrivatePredictionConfig(batch_size=s, private_tokens=100, clip=c, temperature=tau, svt_threshold=0.5,
                                     svt_noise=0.2)
    assert cfg.rho() == pytest.approx(0.1) and cfg.epsilon(delta) == pytest.approx(eps)
    assert cfg.epsilon(delta, conversion="closed-form") == pytest.approx(2.450788, abs=1e-5)
    no_svt = pp.PrivatePredictionConfig(batch_size=s, private_tokens=100, clip=c, temperature=tau, svt_threshold=-math.inf)
    assert not no_svt.svt_enabled and no_svt.rho() == pytest.approx(0.02)
    for bad in (0.0, 1.0, -1e-6):
        with pytest.raises(ParameterError):
            acc.epsilon_closed_form(0.1, bad)


def test_gaussian_dp_curve_and_the_papers_balle_wang_number() -> None:
    # μ = 1, ε = 0: δ = Φ(½) − Φ(−½) = 0.382925
    assert acc.gaussian_delta(mu=1.0, epsilon=0.0) == pytest.approx(0.3829249, abs=1e-6)
    assert acc.gaussian_delta(mu=1.0, epsilon=3.0) < acc.gaussian_delta(mu=1.0, epsilon=1.0)
    # [PrivPred] §D: Balle–Wang at ε = 2c/(sτ) = 0.04, δ = 1e-6, Δ = 1/s = 0.004 needs σ ≈ 0.34
    assert acc.calibrate_sigma(epsilon=0.04, delta=1e-6, epochs=1, sensitivity=0.004) == pytest.approx(0.34, abs=0.005)
    # composition is exact: T releases at σ ≡ one release at σ/√T
    assert acc.gaussian_epsilon(sigma=4.0, epochs=16, delta=1e-6) == pytest.approx(
        acc.gaussian_epsilon(sigma=1.0, epochs=1, delta=1e-6), rel=1e-6)


CASES = [(0.5, 1e-5), (1.0, 1e-6), (0.01, 1e-5), (3.0, 1e-3)]


def _reference_epsilon(rho: float, delta: float) -> float:
    """inf over α > 1 of αρ + (log 1/δ + (α−1)·log(1−1/α) − log α)/(α−1): a dense grid, then a tight bounded
    search between the grid neighbours of the best point (the function of α is unimodal)."""
    lid = math.log(1.0 / delta)

    def eps(u: float) -> float:
        a = 1.0 + math.exp(u)
        return a * rho + (lid + (a - 1.0) * math.log1p(-1.0 / a) - math.log(a)) / (a - 1.0)

    us = np.linspace(math.log(1e-8), math.log(1e10), 20001)
    k = int(np.argmin([eps(u) for u in us]))
    res = minimize_scalar(eps, bounds=(us[max(k - 1, 0)], us[min(k + 1, len(us) - 1)]), method="bounded",
                          options={"xatol": 1e-13})
    return float(res.fun)


def _reference_delta(rho: float, epsilon: float) -> float:
    """inf over α > 1 of e^{(α−1)(αρ−ε)}/(α−1)·(1 − 1/α)^α, on a denser and wider grid of α than the module's."""
    a = 1.0 + np.logspace(-9, 9, 200001)
    logd = (a - 1) * (a * rho - epsilon) - np.log(a - 1) + a * np.log1p(-1.0 / a)
    return float(min(1.0, math.exp(float(np.min(logd)))))


@pytest.mark.parametrize("rho,delta", CASES)
def test_tight_epsilon_is_the_refined_infimum_over_alpha(rho: float, delta: float) -> None:
    eps, alpha = acc.epsilon_tight(rho, delta)
    assert eps == pytest.approx(_reference_epsilon(rho, delta), rel=1e-9)
    # the α returned is the one that gives ε (a valid guarantee at that α)
    assert alpha > 1.0
    assert acc._eps_at_alpha(alpha, rho, math.log(1.0 / delta)) == pytest.approx(eps, rel=1e-9)
    assert eps <= acc.epsilon_closed_form(rho, delta)
    assert acc.zcdp_to_epsilon(rho, delta) == eps


def test_zero_rho_converts_to_zero_epsilon_and_zero_delta() -> None:
    assert acc.epsilon_tight(0.0, 1e-5) == (0.0, math.inf)
    assert acc.delta_tight(0.0, 0.3) == 0.0


@pytest.mark.parametrize("rho,epsilon", [(1.0, 1.0), (0.01, 0.1), (5.0, 0.01), (0.1, 2.0)])
def test_tight_delta_matches_a_denser_search_over_alpha(rho: float, epsilon: float) -> None:
    # ρ = 1, ε = 1 has its optimum at α < 2: a search restricted to α ≥ 2 is far off
    assert acc.delta_tight(rho, epsilon) == pytest.approx(_reference_delta(rho, epsilon), rel=1e-4)


def test_tight_delta_is_a_probability() -> None:
    assert acc.delta_tight(100.0, 0.1) == 1.0


@pytest.mark.parametrize("rho", [-1.0, math.inf, math.nan])
def test_rho_must_be_finite_and_non_negative(rho: float) -> None:
    with pytest.raises(ParameterError, match=r"^ρ must be a finite number ≥ 0"):
        acc.epsilon_closed_form(rho, 1e-5)


def test_unknown_conversion_names_the_choices() -> None:
    with pytest.raises(ParameterError, match=r"^Unknown conversion 'exact'; choose one of tight, closed-form\.$"):
        acc.zcdp_to_epsilon(1.0, 1e-5, conversion="exact")


def test_gaussian_accounting_validators_name_their_argument() -> None:
    with pytest.raises(ParameterError, match=r"^μ must be a finite number > 0"):
        acc.gaussian_delta(mu=0.0, epsilon=1.0)
    with pytest.raises(ParameterError, match=r"^σ \(Gaussian noise\) must be a finite number > 0"):
        acc.composed_mu(sigma=-1.0, epochs=1)
    with pytest.raises(ParameterError, match=r"^epochs must be ≥ 1"):
        acc.composed_mu(sigma=1.0, epochs=0)
    with pytest.raises(ParameterError, match=r"^sensitivity must be a finite number > 0"):
        acc.composed_mu(sigma=1.0, epochs=1, sensitivity=0.0)


def test_composed_mu_is_sqrt_t_times_sensitivity_over_sigma() -> None:
    assert acc.composed_mu(sigma=2.0, epochs=9, sensitivity=0.5) == pytest.approx(math.sqrt(9) * 0.5 / 2.0)


@pytest.mark.parametrize("epsilon,delta", [(1.0, 1e-5), (4.0, 1e-6), (0.3, 1e-3)])
def test_max_rho_inverts_the_conversion(epsilon: float, delta: float) -> None:
    """The closed form solves ρ + 2√(ρ·log 1/δ) = ε exactly; the tight ρ is the largest ρ whose tight ε ≤ target
    (to the bisection's resolution), and is larger than the closed-form ρ."""
    closed = acc.max_rho_for(epsilon, delta, conversion="closed-form")
    assert acc.epsilon_closed_form(closed, delta) == pytest.approx(epsilon, rel=1e-12)
    tight = acc.max_rho_for(epsilon, delta)
    assert tight > closed
    assert acc.zcdp_to_epsilon(tight, delta) <= epsilon
    assert acc.zcdp_to_epsilon(tight, delta) == pytest.approx(epsilon, rel=1e-9)
    assert acc.zcdp_to_epsilon(tight * (1 + 1e-6), delta) > epsilon


def test_max_rho_validates_its_target() -> None:
    with pytest.raises(ParameterError, match=r"^ε must be a finite number > 0"):
        acc.max_rho_for(0.0, 1e-5)
    with pytest.raises(ParameterError, match=r"^δ must be in \(0, 1\)"):
        acc.max_rho_for(1.0, 1.0)


def test_gaussian_epsilon_is_zero_only_when_delta_at_zero_already_holds() -> None:
    assert acc.gaussian_epsilon(sigma=1e6, epochs=1, delta=1e-3) == 0.0
    eps = acc.gaussian_epsilon(sigma=2.0, epochs=1, delta=0.1)  # μ = 0.5: δ(0) ≈ 0.197 > 0.1
    assert 0.0 < eps < 1.0
    assert acc.gaussian_delta(mu=0.5, epsilon=eps) <= 0.1 < acc.gaussian_delta(mu=0.5, epsilon=eps - 1e-8)


@pytest.mark.parametrize("epsilon,delta,epochs", [(1.0, 1e-5, 4), (20.0, 1e-5, 1), (0.5, 1e-6, 100)])
def test_calibrated_sigma_is_the_smallest_four_digit_sigma(epsilon: float, delta: float, epochs: int) -> None:
    """σ is rounded UP to 4 significant digits: it meets (ε, δ), and one unit less in its 4th digit does not."""
    sigma = acc.calibrate_sigma(epsilon=epsilon, delta=delta, epochs=epochs)
    assert sigma == float(f"{sigma:.4g}")
    assert acc.gaussian_epsilon(sigma=sigma, epochs=epochs, delta=delta) <= epsilon
    unit = 10.0 ** (math.floor(math.log10(sigma)) - 3)
    assert acc.gaussian_epsilon(sigma=sigma - unit, epochs=epochs, delta=delta) > epsilon


def test_calibrate_sigma_validators_name_their_argument() -> None:
    with pytest.raises(ParameterError, match=r"^ε \(AugPE\) must be a finite number > 0"):
        acc.calibrate_sigma(epsilon=0.0, delta=1e-5, epochs=1)
    with pytest.raises(ParameterError, match=r"^epochs must be ≥ 1"):
        acc.calibrate_sigma(epsilon=1.0, delta=1e-5, epochs=0)
    with pytest.raises(ParameterError, match=r"^epochs = 101 is over the limit of 100; lower it\.$"):
        acc.calibrate_sigma(epsilon=1.0, delta=1e-5, epochs=101)


# (ε, δ, s, r, σ_svt): budgets and batches in the range the app offers (docs/DESIGN.md §3); r ≠ 1 and s·σ ≠ 1 throughout
# so that a term multiplied instead of divided by r, or raised to another power, changes the value.
PP_CASES = [
    (1.0, 1e-6, 64.0, 5, 2.0),
    (4.0, 1e-5, 32.0, 20, 0.8),
    (2.0, 1e-4, 64.0, 50, 1.5),
]


def _closed_form_rho_max(eps: float, delta: float) -> float:
    """ρ with ρ + 2√(ρ·L) = ε, L = log 1/δ ([PrivPred] Theorem 1, second form): √ρ = √(L + ε) − √L."""
    lid = math.log(1.0 / delta)
    return (math.sqrt(lid + eps) - math.sqrt(lid)) ** 2


def _reference_log_delta(rho: float, eps: float) -> float:
    """log of Theorem 1's first form, inf over α > 1 of e^{(α−1)(αρ−ε)}/(α−1)·(1 − 1/α)^α: a dense grid in
    log(α − 1), then a bounded search between the grid neighbours of its best point."""

    def log_delta(u: float) -> float:
        am1 = math.exp(u)
        a = 1.0 + am1
        return am1 * (a * rho - eps) - u + a * math.log1p(-1.0 / a)

    us = np.linspace(math.log(1e-7), math.log(1e9), 40001)
    vals = [log_delta(float(u)) for u in us]
    k = int(np.argmin(vals))
    res = minimize_scalar(log_delta, bounds=(float(us[max(k - 1, 0)]), float(us[min(k + 1, len(us) - 1)])),
                          method="bounded", options={"xatol": 1e-12})
    return min(float(res.fun), vals[k])


def _rho(*, s: float, r: int, c: float, tau: float, sigma: float | None) -> float:
    """Theorem 1's ρ, written out independently of the module."""
    svt = 0.0 if sigma is None else 2.0 / (s * sigma) ** 2
    return r * (0.5 * (c / (s * tau)) ** 2 + svt)


def test_rho_per_batch_matches_theorem_1() -> None:
    for s, r, c, tau, sigma in [(16.0, 5, 4.0, 1.5, 0.5), (100.0, 1, 10.0, 2.0, None), (7.0, 30, 0.3, 0.7, 2.0)]:
        got = acc.rho_per_batch(batch_size=s, private_tokens=r, clip=c, temperature=tau, svt_noise=sigma)
        assert got == pytest.approx(_rho(s=s, r=r, c=c, tau=tau, sigma=sigma), rel=1e-13)


# Each refusal names its parameter exactly as the app's forms do ("s (expected batch size)", …): anchored and
# case-sensitive, so a renamed, emptied or upper-cased name is caught.
_RPB_OK = dict(batch_size=16.0, private_tokens=5, clip=4.0, temperature=1.5, svt_noise=0.5)


@pytest.mark.parametrize("field,bad,pattern", [
    ("batch_size", 0.0, r"^s \(expected batch size\) must be a finite number > 0, got 0\.0\.$"),
    ("private_tokens", 0, r"^r \(private tokens per batch\) must be ≥ 1, got 0\.$"),
    ("clip", -1.0, r"^c \(clip\) must be a finite number > 0, got -1\.0\.$"),
    ("temperature", 0.0, r"^τ \(temperature\) must be a finite number > 0, got 0\.0\.$"),
    ("svt_noise", math.inf, r"^σ \(SVT noise\) must be a finite number > 0, got inf\.$"),
])
def test_rho_per_batch_refusals_name_the_parameter(field: str, bad: float, pattern: str) -> None:
    with pytest.raises(ParameterError, match=pattern):
        acc.rho_per_batch(**{**_RPB_OK, field: bad})


@pytest.mark.parametrize("eps,delta,s,r,sigma", PP_CASES)
def test_calibrated_clip_closed_form_matches_the_formula(eps: float, delta: float, s: float, r: int,
                                                         sigma: float) -> None:
    tau = 1.3
    rho_max = _closed_form_rho_max(eps, delta)
    room = rho_max / r - 2.0 / (s * sigma) ** 2
    assert room > 0
    c = acc.calibrate_private_prediction(epsilon=eps, delta=delta, batch_size=s, private_tokens=r, clip=1.0,
                                         temperature=tau, svt_noise=sigma, solve_for="clip",
                                         conversion="closed-form")
    assert c == pytest.approx(s * tau * math.sqrt(2.0 * room), rel=1e-12)
    # At that c the run's ρ is exactly the budget, and ε = ρ + √(4ρ log 1/δ) gives back the target ε.
    rho = _rho(s=s, r=r, c=c, tau=tau, sigma=sigma)
    assert rho == pytest.approx(rho_max, rel=1e-12)
    assert rho + math.sqrt(4.0 * rho * math.log(1.0 / delta)) == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("eps,delta,s,r,sigma", PP_CASES)
def test_calibrated_temperature_closed_form_matches_the_formula(eps: float, delta: float, s: float, r: int,
                                                                sigma: float) -> None:
    c = 3.0
    room = _closed_form_rho_max(eps, delta) / r - 2.0 / (s * sigma) ** 2
    tau = acc.calibrate_private_prediction(epsilon=eps, delta=delta, batch_size=s, private_tokens=r, clip=c,
                                           temperature=99.0, svt_noise=sigma, solve_for="temperature",
                                           conversion="closed-form")
    assert tau == pytest.approx(c / (s * math.sqrt(2.0 * room)), rel=1e-12)
    rho = _rho(s=s, r=r, c=c, tau=tau, sigma=sigma)
    assert rho + math.sqrt(4.0 * rho * math.log(1.0 / delta)) == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("eps,delta,s,r,sigma", PP_CASES)
def test_calibrated_clip_tight_spends_exactly_epsilon(eps: float, delta: float, s: float, r: int,
                                                      sigma: float) -> None:
    """The default (tight) conversion: the calibrated c's ρ meets Theorem 1's first form at (ε, δ) — with the
    independent inf-over-α δ — and 0.1 % more ρ breaks it; the tight c is larger than the closed-form one."""
    tau = 0.9
    kw = dict(epsilon=eps, delta=delta, batch_size=s, private_tokens=r, temperature=tau, svt_noise=sigma)
    c = acc.calibrate_private_prediction(clip=1.0, **kw)  # solve_for="clip", conversion="tight" by default
    rho = _rho(s=s, r=r, c=c, tau=tau, sigma=sigma)
    assert _reference_log_delta(rho, eps) == pytest.approx(math.log(delta), abs=1e-6)
    assert _reference_log_delta(rho * 1.001, eps) > math.log(delta) + 1e-4
    c_closed = acc.calibrate_private_prediction(clip=1.0, conversion="closed-form", **kw)
    assert c > c_closed * 1.001
    tau_tight = acc.calibrate_private_prediction(clip=c, solve_for="temperature", **kw)
    assert tau_tight == pytest.approx(tau, rel=1e-12)  # the two directions solve the same equation


def test_calibration_without_sparse_vector_drops_the_svt_term() -> None:
    """svt_noise=None: every token is private, room = ρ_max/r (Lemma 4 alone, no 2/(sσ)² term)."""
    eps, delta, s, r, tau, c = 1.0, 1e-6, 64.0, 5, 1.3, 2.0
    rho_max = _closed_form_rho_max(eps, delta)
    kw = dict(epsilon=eps, delta=delta, batch_size=s, private_tokens=r, svt_noise=None, conversion="closed-form")
    got_c = acc.calibrate_private_prediction(clip=1.0, temperature=tau, solve_for="clip", **kw)
    assert got_c == pytest.approx(s * tau * math.sqrt(2.0 * rho_max / r), rel=1e-12)
    got_tau = acc.calibrate_private_prediction(clip=c, temperature=1.0, solve_for="temperature", **kw)
    assert got_tau == pytest.approx(c / (s * math.sqrt(2.0 * rho_max / r)), rel=1e-12)
    # The SVT term only ever takes budget away: with σ the clip is strictly smaller.
    with_svt = acc.calibrate_private_prediction(clip=1.0, temperature=tau, solve_for="clip",
                                                **{**kw, "svt_noise": 2.0})
    assert with_svt < got_c


def test_calibration_is_monotone() -> None:
    """More ε, a larger batch, fewer private tokens or more SVT noise all allow a larger clip."""
    base = dict(epsilon=2.0, delta=1e-5, batch_size=32.0, private_tokens=20, clip=1.0, temperature=1.0,
                svt_noise=0.8)
    c0 = acc.calibrate_private_prediction(**base)
    for change in ({"epsilon": 3.0}, {"batch_size": 48.0}, {"private_tokens": 10}, {"svt_noise": 1.6}):
        assert acc.calibrate_private_prediction(**{**base, **change}) > c0, change
    # and a larger clip needs a higher temperature for the same budget
    t1 = acc.calibrate_private_prediction(**{**base, "clip": 2.0}, solve_for="temperature")
    t2 = acc.calibrate_private_prediction(**{**base, "clip": 4.0}, solve_for="temperature")
    assert t2 == pytest.approx(2.0 * t1, rel=1e-12)


_CPP_OK = dict(epsilon=1.0, delta=1e-6, batch_size=64.0, private_tokens=5, clip=2.0, temperature=1.3,
               svt_noise=2.0)


@pytest.mark.parametrize("field,bad,solve_for,pattern", [
    ("epsilon", 0.0, "clip", r"^ε must be a finite number > 0"),
    ("delta", 1.0, "clip", r"^δ must be in \(0, 1\)"),
    ("batch_size", 0.0, "clip", r"^s \(expected batch size\) must be a finite number > 0, got 0\.0\.$"),
    ("private_tokens", 0, "clip", r"^r \(private tokens per batch\) must be ≥ 1, got 0\.$"),
    ("svt_noise", -0.5, "clip", r"^σ \(SVT noise\) must be a finite number > 0, got -0\.5\.$"),
    ("temperature", 0.0, "clip", r"^τ \(temperature\) must be a finite number > 0, got 0\.0\.$"),
    ("clip", 0.0, "temperature", r"^c \(clip\) must be a finite number > 0, got 0\.0\.$"),
])
def test_calibration_refusals_name_the_parameter(field: str, bad: float, solve_for: str, pattern: str) -> None:
    with pytest.raises(ParameterError, match=pattern):
        acc.calibrate_private_prediction(**{**_CPP_OK, field: bad}, solve_for=solve_for)


@pytest.mark.parametrize("solve_for", ["CLIP", "tau", "", "XXclipXX"])
def test_calibration_refuses_an_unknown_target(solve_for: str) -> None:
    with pytest.raises(ParameterError, match=r"^solve_for must be 'clip' or 'temperature'\.$"):
        acc.calibrate_private_prediction(**_CPP_OK, solve_for=solve_for)


def test_calibration_refuses_when_the_sparse_vector_alone_exceeds_the_budget() -> None:
    """2r/(sσ)² above ρ_max: no clip can fit; the message reports that term, the budget and the ways out."""
    eps, delta, s, r, sigma = 1.0, 1e-6, 4.0, 3, 0.5
    svt = 2.0 / (s * sigma) ** 2  # 0.5 per token, 1.5 in all, far above ρ_max ≈ 0.02
    rho_max = _closed_form_rho_max(eps, delta)
    assert r * svt > rho_max
    for solve_for in ("clip", "temperature"):
        with pytest.raises(ParameterError) as info:
            acc.calibrate_private_prediction(epsilon=eps, delta=delta, batch_size=s, private_tokens=r, clip=1.0,
                                             temperature=1.0, svt_noise=sigma, solve_for=solve_for,
                                             conversion="closed-form")
        msg = str(info.value)
        assert msg == (
            f"At ε = {eps:g}, δ = {delta:g} the sparse-vector step alone (2r/(sσ)² = {r * svt:.3g}) uses more than "
            f"the budget (ρ = {rho_max:.3g}); raise the batch size s or the SVT noise σ, lower r, or switch the "
            "sparse vector off."
        )
        assert f"{r * svt:.3g}" == "1.5"


def test_calibration_refuses_the_exact_tie_where_no_room_is_left() -> None:
    """room = ρ_max/r − 2/(sσ)² exactly 0 would give c = 0 (no clip, the paper's c > 0 fails): it must be refused
    like a negative room. σ is searched, ulp by ulp, to make the tie exact in floating point."""
    eps, delta, s, r = 1.0, 1e-6, 16.0, 1
    rho_max = acc.max_rho_for(eps, delta, conversion="closed-form")
    sigma = math.sqrt(2.0 / rho_max) / s
    for _ in range(200):
        svt = 2.0 / (s * sigma) ** 2
        if rho_max / r - svt == 0.0:
            break
        sigma = float(np.nextafter(sigma, math.inf if svt > rho_max / r else 0.0))
    else:  # pragma: no cover - the search always lands within a few ulps
        pytest.fail("no σ gives an exact tie")
    with pytest.raises(ParameterError, match=r"sparse-vector step alone"):
        acc.calibrate_private_prediction(epsilon=eps, delta=delta, batch_size=s, private_tokens=r, clip=1.0,
                                         temperature=1.0, svt_noise=sigma, conversion="closed-form")
    # one ulp more SVT noise leaves a tiny positive room, and a tiny positive clip
    sigma_up = float(np.nextafter(np.nextafter(sigma, math.inf), math.inf))
    c = acc.calibrate_private_prediction(epsilon=eps, delta=delta, batch_size=s, private_tokens=r, clip=1.0,
                                         temperature=1.0, svt_noise=sigma_up, conversion="closed-form")
    assert 0.0 < c < 1e-5


@pytest.mark.parametrize("conversion", ["TIGHT", "XXtightXX", "exact", ""])
def test_an_unknown_conversion_is_refused_by_the_inverse_and_the_calibration_too(conversion: str) -> None:
    """max_rho_for (and the private-prediction calibration through it) refuses a conversion it does not know, as
    zcdp_to_epsilon does — a typo never silently falls back to the tight path."""
    with pytest.raises(ParameterError, match="^Unknown conversion"):
        acc.max_rho_for(1.0, 1e-6, conversion=conversion)
    with pytest.raises(ParameterError, match="^Unknown conversion"):
        acc.zcdp_to_epsilon(0.01, 1e-6, conversion=conversion)
