"""Statistical DP test of the DP document count (dp/count.py; docs/PRIVACY.md, mechanism table).

The release: the number of training documents + Laplace(1/ε) (discrete with OpenDP, continuous when seeded);
L1 sensitivity 1. Neighbours: n and n + 1 documents. Event: the released value exceeds n + 1.5, which lies in the
upper tail of the noise for both neighbours, so the likelihood ratio is exactly e^ε (for the discrete and the
continuous Laplace alike). The test also runs with the noise halved and must then flag a violation.

Exact behaviour pinned (mutation testing, docs/TESTING.md): the DP count's frozen event and its unit count (docs/DESIGN.md §2.0: admit, count the admitted units, charge, then draw).
"""

from __future__ import annotations

import numpy as np
import pytest

from dp_stats import CONSISTENT, VIOLATION, dp_verdict, scale_noise
from dpkps_core.method import budget
from dpkps_core.dp import count as cnt, forecast as fc
from dpkps_core.dp.count import release_count
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError, PrivacyBudgetError


EPS = 1.0


N_DOCS = 40


THRESHOLD = N_DOCS + 1.5


def _hits(trials: int, *, seed: int | None, sampler: str = "numpy") -> tuple[int, int]:
    noise = NoiseSource(seed, sampler=sampler)
    hits = []
    for count in (N_DOCS, N_DOCS + 1):
        hits.append(sum(release_count(count, epsilon=EPS,
                                      context=ReleaseContext(noise=noise, ledger=PrivacyLedger())).value > THRESHOLD
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


def test_count_event_defaults_describe_the_training_part() -> None:
    ev = cnt.count_event(epsilon=0.5)
    assert (ev.mechanism, ev.step, ev.epsilon, ev.sensitivity, ev.noise_scale) == (cnt.MECHANISM, "size", 0.5, 1.0, 2.0)
    assert ev.released == "Laplace-noised number of documents in the training part"
    assert ev.neighbouring == ADD_REMOVE_ONE_DOCUMENT
    assert dict(ev.params) == {"noise": "Laplace(1/ε), integer-valued", "charged": "before the noise was drawn"}
    person = cnt.count_event(epsilon=1.0, what="persons", step="classes", neighbouring="add/remove one person")
    assert (person.step, person.released, person.neighbouring) == ("classes", "Laplace-noised number of persons",
                                                                   "add/remove one person")
    with pytest.raises(ParameterError, match=r"^ε \(count\) must be a finite number > 0"):
        cnt.count_event(epsilon=0.0)


def test_unit_count_counts_distinct_admitted_units_then_charges() -> None:
    ledger = PrivacyLedger(cap=5.0)
    released, left_out = budget.release_unit_count(["p1", "p2", "p1", "p3"], epsilon=2.0,
                                                   context=ReleaseContext(noise=NoiseSource(seed=4), ledger=ledger),
                                                   what="persons", step="persons",
                                                neighbouring="add/remove one person")
    noise = NoiseSource(seed=4).laplace(0.5, 1, integer_valued=True)[0]
    assert released.value == pytest.approx(3 + noise) and left_out == 0
    assert (released.epsilon, released.noise_scale) == (2.0, 0.5)
    (ev,) = ledger.events
    assert (ev.step, ev.released, ev.neighbouring, ev.epsilon) == ("persons", "Laplace-noised number of persons",
                                                                   "add/remove one person", 2.0)
    alone, none_left = budget.release_unit_count(["a", "a"], epsilon=1.0,
                                                 context=ReleaseContext(noise=NoiseSource(seed=1)))
    assert alone.value == pytest.approx(1 + NoiseSource(seed=1).laplace(1.0, 1, integer_valued=True)[0])
    assert none_left == 0


def test_release_defaults_name_the_training_part() -> None:
    for release in (lambda led: cnt.release_count(4, epsilon=1.0,
                                                  context=ReleaseContext(noise=NoiseSource(seed=0), ledger=led)),
                    lambda led: budget.release_unit_count(
                        ["a", "b"], epsilon=1.0, context=ReleaseContext(noise=NoiseSource(seed=0), ledger=led))):
        ledger = PrivacyLedger()
        release(ledger)
        (ev,) = ledger.events
        assert (ev.step, ev.released) == ("size", "Laplace-noised number of documents in the training part")
    with pytest.raises(ParameterError, match=r"^ε \(count\) must be a finite number > 0"):
        cnt.release_count(1, epsilon=0.0, context=ReleaseContext(noise=NoiseSource(seed=0)))


def test_unit_count_refusal_names_the_count() -> None:
    with pytest.raises(PrivacyBudgetError, match=r"^Running the DP count of persons would spend ε = 2"):
        budget.release_unit_count(["a"], epsilon=2.0,
                                  context=ReleaseContext(noise=NoiseSource(seed=0), ledger=PrivacyLedger(cap=1.0)),
                               what="persons")
    with pytest.raises(ParameterError, match=r"^ε \(count\) must be a finite number > 0"):
        budget.release_unit_count(["a"], epsilon=-1.0, context=ReleaseContext(noise=NoiseSource(seed=0)))


def test_noisy_count_clamps_to_one() -> None:
    assert cnt.NoisyCount(value=-3.0, epsilon=1.0, noise_scale=1.0).clamped == 1.0
    assert cnt.NoisyCount(value=7.5, epsilon=1.0, noise_scale=1.0).clamped == 7.5
