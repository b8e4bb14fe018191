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

Exact behaviour pinned (mutation testing, docs/TESTING.md): the nearest-neighbour votes, their Gaussian release, the selection, the frozen ledger event and the T epochs of Private Evolution, driven end to end with a sequential echoing fake backend.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import types
from typing import Any, Mapping, Sequence

import numpy as np
import pytest
import torch

from dp_stats import CONSISTENT, VIOLATION, approx_dp_verdict, scale_noise
from dpkps_core.baselines import augpe, private_prediction as pp
from dpkps_core.method.config import PRIVATE_PREDICTION_LIMITS
from dpkps_core.dp.accounting import gaussian_delta
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend
from scripted_lm import PUBLIC_KIND, PUBLIC_PROMPT, ScriptedLM, ScriptedTokenizer, prompt, tokens


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


def test_nn_votes_use_the_squared_distance_on_non_normalised_rows() -> None:
    syn = np.array([[1.0, 1.0], [3.0, 3.0]])
    priv = np.array([[1.2, 1.2], [1.9, 1.9], [2.2, 2.2], [2.9, 2.9]])
    nearest = np.argmin(((priv[:, None, :] - syn[None, :, :]) ** 2).sum(-1), axis=1)  # brute force Euclidean
    votes = augpe.nn_votes(priv, syn)
    assert nearest.tolist() == [0, 0, 1, 1]
    assert votes.tolist() == [2, 2] and votes.dtype == np.int64


def test_nn_votes_with_one_synthetic_text_and_with_none() -> None:
    assert augpe.nn_votes(np.ones((5, 3)), np.ones((1, 3))).tolist() == [5]
    with pytest.raises(ParameterError, match=r"^There are no synthetic texts to vote for\.$"):
        augpe.nn_votes(np.ones((5, 3)), np.ones((0, 3)))


def test_nn_votes_of_an_empty_class_are_integer_zeros() -> None:
    votes = augpe.nn_votes(np.ones((0, 4)), np.eye(4)[:3])
    assert votes.tolist() == [0, 0, 0] and votes.dtype == np.int64


def test_noisy_votes_name_sigma_in_the_refusal_and_flatten_the_bins() -> None:
    for bad in (0.0, -1.0, math.nan):
        with pytest.raises(ParameterError, match=r"^σ \(Gaussian noise\) must be a finite number > 0"):
            augpe.noisy_votes(np.zeros(3), sigma=bad, noise=NoiseSource(0))
    noisy = augpe.noisy_votes(np.arange(6).reshape(2, 3), sigma=1.0, noise=NoiseSource(4))
    assert noisy.shape == (6,)
    assert noisy.tolist() == NoiseSource(4).add_gaussian(np.arange(6, dtype=np.float64), sigma=1.0).tolist()


def test_select_keeps_a_small_positive_mass_instead_of_falling_back() -> None:
    idx, fb = augpe.select(np.array([0.3, -5.0, -5.0]), k=40, threshold=0.0, rng=np.random.default_rng(0))
    assert fb is False and idx.tolist() == [0] * 40


def test_augpe_event_records_every_public_setting() -> None:
    cfg = augpe.AugPEConfig(epochs=4, population=3, vote_threshold=0.5)
    d = augpe.augpe_event(cfg, sigma=3.0, delta=1e-6).to_dict()
    assert d["released"] == ("4 noisy nearest-neighbour vote histograms per class over 3 synthetic texts "
                             "(Gaussian noise on every bin)")
    assert d["sensitivity"] == 1.0 and d["noise_scale"] == 3.0 and d["delta"] == 1e-6
    assert d["epsilon"] == augpe.gaussian_epsilon(sigma=3.0, epochs=4, delta=1e-6)
    assert d["params"] == {
        "epochs_T": 4, "population_K": 3, "sensitivity_norm": "L2 (one vote per document per epoch)",
        "gdp_mu": pytest.approx(2.0 / 3.0, rel=1e-12), "rho_zcdp": pytest.approx(4 / 18, rel=1e-12),
        "accounting": "exact Gaussian-DP composition of T Gaussian mechanisms (μ = √T/σ), Balle–Wang δ(ε)",
        "composition": "parallel across classes (disjoint documents)", "vote_threshold_H": 0.5,
        "budget_split": "Ṽ (ε_voc, pure DP) is a separate event; total = ε_voc + ε_aug with this δ",
        "charged": "all T epochs, before the first prompt was sent"}
    assert list(d["params"]) == ["epochs_T", "population_K", "sensitivity_norm", "gdp_mu", "rho_zcdp", "accounting",
                                 "composition", "vote_threshold_H", "budget_split", "charged"]


class EchoBackend(LLMBackend):
    """Sequential fake: a random-API prompt gets ``seed<n>`` (n counts up), a variation prompt gets its text + "+"."""

    name = "echo"
    model = "echo-model"
    max_concurrency = 1

    def __init__(self) -> None:
        self.seeds = 0
        self.lock = threading.Lock()

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[override]
        user = messages[-1]["content"]
        with self.lock:
            if user.startswith("Rewrite the following text"):
                return user.split("\n\n")[1] + "+"
            self.seeds += 1
            return f"seed{self.seeds - 1}"


def _run(*, vote_threshold: float, epochs: int = 3, population: int = 2) -> tuple[augpe.AugPEResult, list]:
    texts = [f"patient {i} has a fever" for i in range(8)] + [f"invoice {i} shows a payment" for i in range(6)]
    labels = ["medicine"] * 8 + ["finance"] * 6
    cfg = augpe.AugPEConfig(epochs=epochs, population=population, vote_threshold=vote_threshold)
    progress: list[tuple[float, str]] = []
    res = augpe.run_augpe(texts, labels, vocabulary_terms=("fever", "payment", "river", "school"),
                          classes=("finance", "medicine"), config=cfg, epsilon=4.0, delta=1e-6,
                          embedder=HashingEmbedder(dim=16), backend=EchoBackend(),
                          context=ReleaseContext(noise=NoiseSource(7), ledger=PrivacyLedger(cap=10.0)),
                          progress=lambda f, m: progress.append((f, m)))
    return res, progress


def test_documents_are_the_last_rewrites_of_their_own_class() -> None:
    res, _ = _run(vote_threshold=0.0)
    k, t = 2, 3
    for i, c in enumerate(("finance", "medicine")):
        own = {f"seed{n}" for n in range(i * k, (i + 1) * k)}  # the sequential backend's first-round replies
        docs = [d["text"] for d in res.documents if d["label"] == c]
        assert len(docs) == k
        for text in docs:  # one rewrite per epoch but the last, of a text of this class
            assert text.endswith("+" * (t - 1)) and not text.endswith("+" * t) and text.rstrip("+") in own
    purposes = [a["purpose"] for a in res.audit]
    assert purposes == (["random API (Ṽ words)"] * 4 + ["variation (epoch 1)"] * 4 + ["variation (epoch 2)"] * 4)


def test_every_selection_that_falls_back_is_counted() -> None:
    res, _ = _run(vote_threshold=1e6)  # no noisy vote clears H: every selection is uniform
    assert res.stats["uniform_fallbacks"] == 3 * 2
    res, _ = _run(vote_threshold=0.0, epochs=2)
    expected = sum(1 for row in res.stats["noisy_votes"] if max(row["noisy_votes"]) <= 0.0)
    assert res.stats["uniform_fallbacks"] == expected  # H = 0: only a round with no positive noisy vote


def test_the_vote_log_holds_every_noisy_histogram_rounded_to_cents() -> None:
    res, _ = _run(vote_threshold=0.0)
    log = res.stats["noisy_votes"]
    assert [(row["epoch"], row["class"]) for row in log] == [(e, c) for e in (1, 2, 3) for c in ("finance", "medicine")]
    assert all(set(row) == {"epoch", "class", "noisy_votes"} for row in log)
    values = [v for row in log for v in row["noisy_votes"]]
    assert all(len(row["noisy_votes"]) == 2 for row in log)
    assert all(isinstance(v, float) and v == round(v, 2) for v in values)
    assert any(v != round(v) for v in values)  # rounded to cents, not to integers


def test_progress_of_each_epoch_and_of_its_rewrites() -> None:
    _, progress = _run(vote_threshold=0.0)
    t = 3
    for e in range(1, t + 1):
        (f,) = [f for f, m in progress if m.startswith(f"AugPE+Ṽ: epoch {e}/{t}:")]
        assert f == pytest.approx(0.05 + 0.9 * e / t, abs=1e-12)
    for e in range(1, t):
        fs = [f for f, m in progress if m == f"AugPE+Ṽ: variation (epoch {e})"]
        lo, hi = 0.05 + 0.9 * e / t, 0.05 + 0.9 * (e + 0.9) / t
        assert fs and min(fs) > lo and max(fs) == pytest.approx(hi, abs=1e-12)
    assert all(0.0 <= f <= 1.0 for f, _ in progress)
