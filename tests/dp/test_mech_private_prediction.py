"""Statistical DP tests of private prediction's token step ([PrivPred] Algorithm 1; docs/DESIGN.md §3).

``generate_batch`` runs end to end on a scripted LM (tests/dp/scripted_lm.py) whose logits the test chooses, with
a seeded NoiseSource, so each trial takes about a millisecond. Neighbours: a batch D and D' = D plus one prompt.

* Exponential mechanism (sparse vector off: every token private). The clipped mean z̄ = Σ clip_c(z)/s moves by a
  vector in [−c/s, c/s]^V, so sampling from softmax(z̄/τ) has bounded range 2c/(sτ); Theorem 1's per-token
  ρ = ½(c/(sτ))² is exactly that range's zCDP (ε-bounded range ⇒ ε²/8-zCDP, Cesar & Rogers 2021). The test claims
  ε = √(8ρ) from the accountant and makes the added prompt push the token that D disfavours to the top (two
  tokens): the ratio on {that token} is ≈ e^{0.8·ε}.
* Sparse vector (threshold Laplace(σ), query Laplace(2σ), query sensitivity 1/s): pure 2/(sσ)-DP per private
  token (ρ = 2/(sσ)² = ε²/2). The event is k public tokens then a private one, with the added prompt raising the
  distance of the k public steps by 1/s and lowering the last by 1/s — the tight case of the standard proof.
Each mechanism is also run with its noise halved (or removed) and must then be flagged.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dp_stats import CONSISTENT, VIOLATION, dp_verdict, scale_noise
from dpkps_core.baselines import private_prediction as pp
from dpkps_core.dp.accounting import rho_per_batch
from dpkps_core.dp.rng import NoiseSource
from scripted_lm import PUBLIC_KIND, PUBLIC_PROMPT, ScriptedLM, ScriptedTokenizer, prompt, tokens


@pytest.fixture(autouse=True)
def _one_torch_thread() -> None:
    """Tiny tensors: one intra-op thread (on 2 shared cores the thread pool costs milliseconds per call)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

# ------------------------------------------------------------------------------- exponential mechanism

EM_CONFIG = pp.PrivatePredictionConfig(batch_size=2, private_tokens=1, clip=1.0, temperature=1.0,
                                       svt_threshold=None, max_new_tokens=1, public_top_k=None)
TOKEN_A = 0  # D's prompts put it far below the others; the added prompt puts it on top
_LOW_A = torch.tensor([[-20.0, 0.0]])
_HIGH_A = torch.tensor([[0.0, -20.0]])
EM_MODEL = ScriptedLM({PUBLIC_KIND: torch.zeros((1, 2)), 10: _LOW_A, 11: _HIGH_A})
EM_D = [prompt(10), prompt(10)]
EM_D2 = EM_D + [prompt(11)]


def em_epsilon(config: pp.PrivatePredictionConfig) -> float:
    """The pure bounded-range ε of one private token that the accountant's ρ stands for: √(8ρ) = 2c/(sτ)."""
    rho = rho_per_batch(batch_size=config.batch_size, private_tokens=1, clip=config.clip,
                           temperature=config.temperature, svt_noise=None)
    return math.sqrt(8.0 * rho)


def _em_hits(trials: int, *, seed: int) -> tuple[int, int]:
    noise = NoiseSource(seed)
    hits = []
    for batch in (EM_D, EM_D2):
        n = 0
        for _ in range(trials):
            out = pp.generate_batch(EM_MODEL, ScriptedTokenizer(), batch, PUBLIC_PROMPT, config=EM_CONFIG,
                                    noise=noise, stop_ids=set())
            n += tokens(out.texts[0]) == [TOKEN_A]
        hits.append(n)
    return hits[0], hits[1]


def test_exponential_mechanism_token_is_within_its_bounded_range() -> None:
    trials = 3_000
    eps = em_epsilon(EM_CONFIG)
    assert eps == pytest.approx(2 * EM_CONFIG.clip / (EM_CONFIG.batch_size * EM_CONFIG.temperature))
    verdict, eps_lb = dp_verdict(*_em_hits(trials, seed=51), trials, eps)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed {eps:.3f}"
    assert eps_lb > 0.35 * eps


def test_exponential_mechanism_at_half_the_temperature_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    original = pp._sample
    monkeypatch.setattr(pp, "_sample", lambda logits, temperature, candidates, rng:
                        original(logits, temperature / 2, candidates, rng))
    trials = 3_000
    verdict, eps_lb = dp_verdict(*_em_hits(trials, seed=51), trials, em_epsilon(EM_CONFIG))
    assert verdict == VIOLATION, f"half the temperature went unnoticed ({eps_lb:.3f})"


# ----------------------------------------------------------------------------------------- sparse vector

SVT_K = 3  # public steps before the private one
P, Q, V = 1, 2, 50
SIGMA = 2.0
SVT_CONFIG = pp.PrivatePredictionConfig(batch_size=1, private_tokens=1, clip=0.005, temperature=1.0,
                                        svt_threshold=1.5, svt_noise=SIGMA, max_new_tokens=SVT_K + 1,
                                        public_top_k=None)


def _peaked(*columns: int, steps: int = SVT_K + 1) -> torch.Tensor:
    t = torch.zeros((steps, V))
    for c in columns:
        t[:, c] = 30.0
    return t


def _svt_model() -> ScriptedLM:
    """Public prompt: token P at every step. With s = 1 the SVT distance d = ‖Σ softmax(z) − softmax(z_pub)‖₁:
    D (kind 10): ½P + ½Q for k steps (d = 1), then Q (d = 2);
    D' adds kind 11: Q for k steps (d = 2 = 1 + 1/s), then P (d = 1 = 2 − 1/s)."""
    d_prompt = _peaked(P, Q)
    d_prompt[SVT_K] = _peaked(Q)[0]
    added = _peaked(Q)
    added[SVT_K] = _peaked(P)[0]
    return ScriptedLM({PUBLIC_KIND: _peaked(P), 10: d_prompt, 11: added})


def svt_epsilon(config: pp.PrivatePredictionConfig) -> float:
    """The pure ε of one private token from the accountant's ρ: sparse vector √(2ρ_svt) + bounded range √(8ρ_em)."""
    kw = dict(batch_size=config.batch_size, private_tokens=1, clip=config.clip, temperature=config.temperature)
    rho_em = rho_per_batch(**kw, svt_noise=None)
    rho_svt = rho_per_batch(**kw, svt_noise=config.svt_noise) - rho_em
    return math.sqrt(2.0 * rho_svt) + math.sqrt(8.0 * rho_em)


def _svt_hits(trials: int, *, seed: int) -> tuple[int, int]:
    """Hits of {k public tokens (P), then a private token (≠ P)} for D and D'."""
    model, noise = _svt_model(), NoiseSource(seed)
    hits = []
    for batch in ([prompt(10)], [prompt(10), prompt(11)]):
        n = 0
        for _ in range(trials):
            out = pp.generate_batch(model, ScriptedTokenizer(), batch, PUBLIC_PROMPT, config=SVT_CONFIG,
                                    noise=noise, stop_ids=set())
            x = tokens(out.texts[0])
            n += x[:SVT_K] == [P] * SVT_K and len(x) > SVT_K and x[SVT_K] != P
        hits.append(n)
    return hits[0], hits[1]


def test_scripted_distances_move_by_the_query_sensitivity() -> None:
    """The neighbours really are the tight case: Eq. (2) moves by +1/s on the public steps, −1/s on the last."""
    model = _svt_model()
    for step, (d, d2) in enumerate([(1.0, 2.0)] * SVT_K + [(2.0, 1.0)]):
        pub = model.script[PUBLIC_KIND][step][None]
        one = model.script[10][step][None]
        two = torch.cat([one, model.script[11][step][None]])
        assert pp.svt_distance(one, pub[0], batch_size=1) == pytest.approx(d, abs=1e-6)
        assert pp.svt_distance(two, pub[0], batch_size=1) == pytest.approx(d2, abs=1e-6)


def test_sparse_vector_is_within_its_epsilon() -> None:
    trials = 2_000
    eps = svt_epsilon(SVT_CONFIG)
    assert eps == pytest.approx(2 / (SVT_CONFIG.batch_size * SIGMA) + 2 * SVT_CONFIG.clip / SVT_CONFIG.batch_size)
    verdict, eps_lb = dp_verdict(*_svt_hits(trials, seed=52), trials, eps)
    assert verdict == CONSISTENT, f"ε lower bound {eps_lb:.3f} > claimed {eps:.3f}"
    assert eps_lb > 0.3 * eps


def test_sparse_vector_without_query_noise_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """No query noise: D' can never show k public tokens then a private one (its distances cross the
    threshold the wrong way), D often does — an unbounded privacy loss."""
    scale_noise(monkeypatch, 0.0, only_scale=2 * SIGMA)
    trials = 400
    hits_d, hits_d2 = _svt_hits(trials, seed=52)
    verdict, eps_lb = dp_verdict(hits_d, hits_d2, trials, svt_epsilon(SVT_CONFIG))
    assert hits_d2 == 0 and verdict == VIOLATION, f"no query noise went unnoticed ({eps_lb:.3f})"


@pytest.mark.slow
def test_sparse_vector_with_half_the_noise_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    scale_noise(monkeypatch, 0.5)
    trials = 10_000
    verdict, eps_lb = dp_verdict(*_svt_hits(trials, seed=52), trials, svt_epsilon(SVT_CONFIG))
    assert verdict == VIOLATION, f"half the noise went unnoticed ({eps_lb:.3f})"


# ----------------------------------------------------------------------------------- public candidates

TOP_K = 2
_PUBLIC_TOP = torch.tensor([[5.0, 4.0, 0.0, 0.0, 0.0, 0.0]])  # public top-2: tokens 0, 1
CANDIDATE_MODEL = ScriptedLM({PUBLIC_KIND: _PUBLIC_TOP,
                              10: torch.tensor([[0.0, 0.0, 9.0, 9.0, 0.0, 0.0]]),   # D favours tokens 2, 3
                              11: torch.tensor([[0.0, 0.0, 0.0, 0.0, 0.0, 30.0]])})  # the added prompt: token 5
CANDIDATE_CONFIG = pp.PrivatePredictionConfig(batch_size=1, private_tokens=1, clip=0.5, temperature=1.0,
                                              svt_threshold=None, max_new_tokens=1, public_top_k=TOP_K)


def test_candidates_come_from_the_public_prediction_only() -> None:
    """Top-k candidates must be the PUBLIC prediction's ([PrivPred] §E.1): then no token outside {0, 1} can ever
    appear, whatever the private prompts favour. Taken from the private logits instead, the added prompt's
    token 5 appears under D' and never under D — an unbounded privacy loss."""
    noise = NoiseSource(53)
    trials = 400
    seen: list[set[int]] = []
    hits = []
    for batch in ([prompt(10)], [prompt(10), prompt(11)]):
        out = [tokens(pp.generate_batch(CANDIDATE_MODEL, ScriptedTokenizer(), batch, PUBLIC_PROMPT,
                                        config=CANDIDATE_CONFIG, noise=noise, stop_ids=set()).texts[0])[0]
               for _ in range(trials)]
        seen.append(set(out))
        hits.append(sum(t == 5 for t in out))
    assert seen[0] <= {0, 1} and seen[1] <= {0, 1}, f"tokens outside the public top-{TOP_K}: {seen}"
    assert seen[0] == seen[1] == {0, 1}  # both public candidates are drawn (the sampling is not degenerate)
    verdict, _ = dp_verdict(hits[0], hits[1], trials, em_epsilon(CANDIDATE_CONFIG))
    assert verdict == CONSISTENT


def test_private_top_k_candidates_would_be_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above has power: candidates taken from the private mean logits make token 5 appear under D'."""
    original_topk = torch.topk
    calls = {"n": 0}

    def private_topk(z, k, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        return original_topk(torch.as_tensor(_private_mean[0]), k, *args, **kwargs)

    noise = NoiseSource(53)
    trials = 400
    hits = []
    for batch in ([prompt(10)], [prompt(10), prompt(11)]):
        kinds = [10] if len(batch) == 1 else [10, 11]
        _private_mean[0] = torch.stack([CANDIDATE_MODEL.script[k][0] for k in kinds]).mean(0)
        monkeypatch.setattr(torch, "topk", private_topk)
        out = [tokens(pp.generate_batch(CANDIDATE_MODEL, ScriptedTokenizer(), batch, PUBLIC_PROMPT,
                                        config=CANDIDATE_CONFIG, noise=noise, stop_ids=set()).texts[0])[0]
               for _ in range(trials)]
        monkeypatch.setattr(torch, "topk", original_topk)
        hits.append(sum(t == 5 for t in out))
    assert calls["n"] > 0
    verdict, eps_lb = dp_verdict(hits[0], hits[1], trials, em_epsilon(CANDIDATE_CONFIG))
    assert hits[0] == 0 and hits[1] > 0 and verdict == VIOLATION, (hits, eps_lb)


_private_mean: list[torch.Tensor] = [torch.zeros(6)]
