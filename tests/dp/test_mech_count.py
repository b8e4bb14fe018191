"""Statistical DP test of the DP document count (dp/count.py; docs/PRIVACY.md, mechanism table).

The release: the number of training documents + Laplace(1/ε) (discrete with OpenDP, continuous when seeded);
L1 sensitivity 1. Neighbours: n and n + 1 documents. Event: the released value exceeds n + 1.5, which lies in the
upper tail of the noise for both neighbours, so the likelihood ratio is exactly e^ε (for the discrete and the
continuous Laplace alike). The test also runs with the noise halved and must then flag a violation.
"""

from __future__ import annotations

import pytest

from dp_stats import CONSISTENT, VIOLATION, dp_verdict, scale_noise
from dpkps_core.dp.count import release_count
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource

EPS = 1.0
N_DOCS = 40
THRESHOLD = N_DOCS + 1.5


def _hits(trials: int, *, seed: int | None, sampler: str = "numpy") -> tuple[int, int]:
    noise = NoiseSource(seed, sampler=sampler)
    hits = []
    for count in (N_DOCS, N_DOCS + 1):
        hits.append(sum(release_count(count, epsilon=EPS, noise=noise, ledger=PrivacyLedger()).value > THRESHOLD
                        for _ in range(trials)))
    return hits[0], hits[1]


def test_dp_count_is_eps_dp() -> None:
    trials = 20_000
    verdict, eps_lb = dp_verdict(*_hits(trials, seed=31), trials, EPS)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed ε = {EPS}"
    assert eps_lb > 0.75 * EPS


def test_dp_count_with_half_the_noise_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    trials = 20_000
    verdict, eps_lb = dp_verdict(*_hits(trials, seed=31), trials, EPS)
    assert verdict == VIOLATION, f"half the noise went unnoticed: ε lower bound {eps_lb:.3f} ≤ {EPS}"


@pytest.mark.slow
def test_dp_count_with_opendp_discrete_laplace_is_eps_dp() -> None:
    trials = 20_000
    hits_d, hits_d2 = _hits(trials, seed=None, sampler="opendp")
    verdict, eps_lb = dp_verdict(hits_d, hits_d2, trials, EPS, alpha=1e-6)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed ε = {EPS}"
    assert eps_lb > 0.6 * EPS
