"""Privacy accounting (dpkps_core.dp.accounting): zCDP → (ε, δ) for private prediction, μ-GDP for AugPE."""

from __future__ import annotations

import math

import pytest

from dpkps_core.baselines import prediction_config as pp
from dpkps_core.dp import accounting as acc
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
