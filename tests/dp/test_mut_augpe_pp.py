"""Mutation-testing kills for AugPE+Ṽ's mechanism functions (docs/TESTING.md "Mutation testing"; DESIGN §4;
paper 001 App. C.1.3): the nearest-neighbour votes, their Gaussian release, the selection, the frozen ledger event
and the T epochs of Private Evolution, driven end to end with a sequential echoing fake backend."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from dpkps_core.baselines import augpe
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend


# ------------------------------------------------------------------------------------------------ votes

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


# ------------------------------------------------------------------------------------------------ the event

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


# ------------------------------------------------------------------------------------------------ the epochs

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
                          embedder=HashingEmbedder(dim=16), backend=EchoBackend(), noise=NoiseSource(7),
                          ledger=PrivacyLedger(cap=10.0), progress=lambda f, m: progress.append((f, m)))
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
