"""Mutation-testing kills for dpkps_core.dp.accounting (docs/TESTING.md "Mutation testing").

The zCDP → (ε, δ) conversions (Bun & Steinke 2016, Lemma 3.5; Canonne et al. 2020, Cor. 13) are checked against
an independent, more precise minimisation over α, so a conversion that stops refining its grid optimum, evaluates
a formula at the wrong α or loses its edge cases (ρ = 0) fails; the validators' messages name the argument.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from dpkps_core.dp import accounting as acc
from dpkps_core.errors import ParameterError

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
