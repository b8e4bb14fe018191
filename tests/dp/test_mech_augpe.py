"""Statistical DP test of AugPE+Ṽ's noisy vote histograms (docs/DESIGN.md §4; [DP-KPS] App. C.1.3; baselines/augpe.py).

The release: each epoch, every private document's one nearest-neighbour vote (L2 sensitivity 1) + N(0, σ²) on
every bin; T epochs compose to μ-GDP with μ = √T/σ (Dong, Roth & Su 2022), the ``gdp_mu`` of the ledger event,
whose (ε, δ) curve is δ_μ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2). Neighbours: D' = D plus one document, whose
vote moves one bin by 1 in each of the T epochs — the full sensitivity. The likelihood ratio of the T releases is
monotone in Z = Σ_t (noisy_t − votes_D)/(√T σ) ~ N(0, 1) under D, N(μ, 1) under D', so the event {Z > ε'/μ + μ/2}
attains δ_μ(ε') exactly (the tight event of the Gaussian mechanism). The test estimates the hockey-stick
divergence on a fixed family of events {Z > t} (Clopper–Pearson, tests/dp_stats.py, Bonferroni over the family)
and compares it with δ_μ(ε') at a few ε'; with half the noise it must report a violation at every ε'. ``noisy_votes`` adds the noise to the flattened votes of many trials and
epochs in one call.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dp_stats import CONSISTENT, VIOLATION, approx_dp_verdict, scale_noise
from dpkps_core.baselines import augpe
from dpkps_core.dp.accounting import gaussian_delta
from dpkps_core.dp.rng import NoiseSource

CONFIG = augpe.AugPEConfig(epochs=4, population=3)
EPSILON, DELTA = 4.0, 1e-5  # the run's (ε_aug, δ): σ is calibrated to it for T = 4 epochs
VOTES_D = np.array([5, 2, 1])
VOTES_D2 = np.array([6, 2, 1])  # one more document, voting for text 0
EPSILON_PRIMES = (0.0, 0.5, 1.0, 2.0)
THRESHOLDS = np.arange(0.0, 3.01, 0.25)  # a fixed family of events {Z > t}, judged together (Bonferroni)
ALPHA = 1e-3


def _event() -> tuple[float, float]:
    """(σ, μ) of the run, from its ledger event (calibration and accountant as the run uses them)."""
    sigma = augpe.calibrate_sigma(epsilon=EPSILON, delta=DELTA, epochs=CONFIG.epochs)
    event = augpe.augpe_event(CONFIG, sigma=sigma, delta=DELTA)
    assert event.noise_scale == sigma and event.epsilon <= EPSILON
    return sigma, float(event.params["gdp_mu"])


def _statistic(trials: int, *, seed: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Z for D and D' over ``trials`` runs of T epochs, each drawn by ``noisy_votes`` in one call."""
    sigma, mu = _event()
    noise = NoiseSource(seed)
    t = CONFIG.epochs
    out = []
    for votes in (VOTES_D, VOTES_D2):
        noisy = augpe.noisy_votes(np.tile(votes, trials * t), sigma=sigma, noise=noise).reshape(trials, t, -1)
        out.append((noisy[:, :, 0] - VOTES_D[0]).sum(axis=1) / (math.sqrt(t) * sigma))
    return out[0], out[1], sigma, mu


def _verdicts(trials: int, *, seed: int) -> list[tuple[float, float, str, float, float]]:
    """For every ε' and every event {Z > t} of the family: (ε', t, verdict, δ lower bound, δ_μ(ε')), each bound at
    α / (number of pairs) so that all hold together at 1 − α. The family holds the tight event t = ε'/μ + μ/2
    of the claimed μ for each ε' (up to the grid's step) and the tight events of a smaller noise."""
    z_d, z_d2, _, mu = _statistic(trials, seed=seed)
    pairs = len(EPSILON_PRIMES) * len(THRESHOLDS)
    rows = []
    for eps in EPSILON_PRIMES:
        delta = gaussian_delta(mu=mu, epsilon=eps)
        for t in THRESHOLDS:
            verdict, delta_lb = approx_dp_verdict(int((z_d2 > t).sum()), int((z_d > t).sum()), trials, eps, delta,
                                                  alpha=ALPHA / pairs)
            rows.append((eps, float(t), verdict, delta_lb, delta))
    return rows


def test_calibrated_sigma_gives_the_stated_gaussian_dp() -> None:
    sigma, mu = _event()
    assert mu == pytest.approx(math.sqrt(CONFIG.epochs) / sigma)
    assert gaussian_delta(mu=mu, epsilon=augpe.gaussian_epsilon(sigma=sigma, epochs=CONFIG.epochs, delta=DELTA)) <= DELTA


def test_vote_histograms_are_mu_gdp_on_a_full_sensitivity_neighbour() -> None:
    rows = _verdicts(20_000, seed=61)
    for eps, t, verdict, delta_lb, delta in rows:
        assert verdict == CONSISTENT, f"at ε' = {eps}, Z > {t}: δ lower bound {delta_lb:.4f} > δ_μ(ε') = {delta:.4f}"
    for eps in EPSILON_PRIMES:  # power: the best event of the family comes close to the claimed curve
        best = max(r[3] for r in rows if r[0] == eps)
        assert best > gaussian_delta(mu=_event()[1], epsilon=eps) - 0.05, f"at ε' = {eps}: no power ({best:.4f})"


def test_vote_histograms_with_half_the_noise_are_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5, gaussian=True)
    rows = _verdicts(20_000, seed=61)
    flagged = [r for r in rows if r[2] == VIOLATION]
    assert flagged, "half the noise went unnoticed"
    assert {r[0] for r in flagged} == set(EPSILON_PRIMES)  # at every ε' of the curve
