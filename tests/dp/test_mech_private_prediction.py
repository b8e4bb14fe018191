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

Exact behaviour pinned (mutation testing, docs/TESTING.md; docs/DESIGN.md §3; [PrivPred] Algorithm 1): the clipping and SVT distance, the hash batches, the token sampler and generate_batch on the scripted LM of tests/dp/scripted_lm.py — stop tokens, padding, empty batches, examples restarting from the prompt, public top-k, Laplace draw counts, local diagnostics.
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

from dp_stats import CONSISTENT, VIOLATION, dp_verdict, scale_noise
from dpkps_core.baselines import augpe, private_prediction as pp
from dpkps_core.method.config import PRIVATE_PREDICTION_LIMITS
from dpkps_core.dp.accounting import rho_per_batch
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend
from scripted_lm import PUBLIC_KIND, PUBLIC_PROMPT, ScriptedLM, ScriptedTokenizer, prompt, tokens


@pytest.fixture(autouse=True)
def _one_torch_thread() -> None:
    """Tiny tensors: one intra-op thread (on 2 shared cores the thread pool costs milliseconds per call)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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


def test_clip_logits_work_on_a_single_row_in_float64() -> None:
    z = np.array([4.0, 5.0, -20.0], dtype=np.float32)
    out = pp.clip_logits(z, 2.0)
    assert out.tolist() == [1.0, 2.0, -2.0] and out.dtype == np.float64
    assert pp.clip_logits(torch.tensor([4.0, 5.0, -20.0]), 2.0).tolist() == [1.0, 2.0, -2.0]


def test_svt_distance_accepts_integer_logits() -> None:
    p = np.exp([2.0, 0.0]) / np.exp([2.0, 0.0]).sum()
    expected = float(np.abs(p - p[::-1]).sum())
    assert pp.svt_distance([[2, 0]], [0, 2], batch_size=1) == pytest.approx(expected, rel=1e-6)


def test_batch_key_is_sha256_of_key_and_text_modulo_b() -> None:
    h = hashlib.sha256("k\x00a private note".encode("utf-8")).digest()
    expected = int.from_bytes(h[:8], "big") % 997
    assert pp.batch_key("a private note", label="x", key="k", num_buckets=997) == ("x", expected)


def test_assign_batches_follow_each_prompt_its_label_and_the_key() -> None:
    texts = [f"note {i}" for i in range(30)]
    labels = ["a", "b"] * 15
    out = pp.assign_batches(texts, labels, num_buckets=7)
    assert out == pp.assign_batches(texts, labels, num_buckets=7, key="dpkps-private-prediction")
    for (lab, b), idx in out.items():
        for i in idx:
            assert pp.batch_key(texts[i], label=labels[i], key="dpkps-private-prediction", num_buckets=7) == (lab, b)
    other = pp.assign_batches(texts, labels, num_buckets=7, key="another key")
    assert other != out
    for (lab, b), idx in other.items():
        assert all(pp.batch_key(texts[i], label=lab, key="another key", num_buckets=7)[1] == b for i in idx)
    mixed = pp.assign_batches(texts, labels, num_buckets=7, group_by_label=False)
    assert {lab for lab, _ in mixed} == {None}


def test_assign_batches_refusals_name_the_setting() -> None:
    limit = PRIVATE_PREDICTION_LIMITS["num_buckets"]
    with pytest.raises(ParameterError, match=r"^number of hash buckets must be"):
        pp.assign_batches(["a"], ["x"], num_buckets=0)
    with pytest.raises(ParameterError, match=r"^number of hash buckets = 1000001 is over the limit of 1,000,000"):
        pp.assign_batches(["a"], ["x"], num_buckets=limit + 1)
    assert limit == 1_000_000
    with pytest.raises(ParameterError, match=r"^Grouping batches by label needs the labels\.$"):
        pp.assign_batches(["a"], None, num_buckets=3)


def test_buckets_for_divides_by_the_batch_size() -> None:
    assert pp.buckets_for(10, 1) == 10 and pp.buckets_for(10.5, 2) == 5 and pp.buckets_for(3, 5) == 1


def test_the_token_sampler_is_stable_for_large_logits() -> None:
    assert pp._sample(torch.tensor([800.0, 0.0]), 1.0, None, np.random.default_rng(0)) == 0


VOCAB_SIZE = 6


def _rows(*tokens_by_step: int) -> torch.Tensor:
    """(steps, V) logits peaked (margin 40) on the given token at each step."""
    t = torch.zeros((len(tokens_by_step), VOCAB_SIZE))
    for step, tok in enumerate(tokens_by_step):
        t[step, tok] = 40.0
    return t


def _config(**kw: Any) -> pp.PrivatePredictionConfig:
    base: dict[str, Any] = dict(batch_size=1, private_tokens=20, clip=50.0, temperature=1.0, svt_threshold=None,
                                max_new_tokens=3, public_top_k=None, examples_per_batch=1)
    base.update(kw)
    return pp.PrivatePredictionConfig(**base)


def test_each_example_restarts_from_the_prompts_and_the_diagnostics_count_every_pass() -> None:
    model = ScriptedLM({PUBLIC_KIND: _rows(1), 10: _rows(3, 4, 5), 11: _rows(3, 4, 5)})
    cfg = _config(examples_per_batch=2, rows_per_forward=1)
    t0 = time.perf_counter()
    out = pp.generate_batch(model, ScriptedTokenizer(), [prompt(10), prompt(11)], PUBLIC_PROMPT, config=cfg,
                            noise=NoiseSource(1), key=("a", 3), stop_ids=set())
    wall = time.perf_counter() - t0
    assert out.texts == ["3 4 5", "3 4 5"] and out.key == ("a", 3) and out.size == 2
    assert (out.private_tokens, out.public_tokens, out.public_after_budget) == (6, 0, 0)
    # prefill: 1 public + 2 private chunks (one row each); then 2 appends per example (none after the last token)
    assert out.forward_passes == 3 + 2 * 2 * 3 and out.rows_decoded == 2 * 2 * 3
    assert 0.0 <= out.seconds <= wall


def test_the_stop_tokens_given_or_else_the_model_and_tokenizer_eos() -> None:
    model = ScriptedLM({PUBLIC_KIND: _rows(1), 10: _rows(3, 4, 5), 11: _rows(3, 5, 4)})
    out = pp.generate_batch(model, ScriptedTokenizer(), [prompt(10)], PUBLIC_PROMPT, config=_config(),
                            noise=NoiseSource(1), stop_ids={5})
    assert out.texts == ["3 4"]
    model.generation_config = types.SimpleNamespace(eos_token_id=[4])
    tok = ScriptedTokenizer()
    tok.eos_token_id = 5
    for kind in (10, 11):  # 4 is the model's EOS, 5 the tokenizer's: either stops
        out = pp.generate_batch(model, tok, [prompt(kind)], PUBLIC_PROMPT, config=_config(), noise=NoiseSource(1))
        assert out.texts == ["3"], kind


class RecordingLM(ScriptedLM):
    """Records the input ids of every prefill (the padded prompts)."""

    def __init__(self, script: Mapping[int, torch.Tensor]) -> None:
        super().__init__(script)
        self.prefills: list[list[list[int]]] = []

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, past_key_values: Any = None,
                use_cache: bool = True) -> Any:
        if past_key_values is None:
            self.prefills.append(input_ids.tolist())
        return super().forward(input_ids, attention_mask, position_ids, past_key_values, use_cache)

    __call__ = forward


class LongPromptTokenizer(ScriptedTokenizer):
    """A private prompt of kind k is k − 9 tokens long (filler 9s, then the kind), so prompts get padded."""

    def __init__(self, pad: int | None) -> None:
        self.pad_token_id = pad

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], **kw: Any) -> dict[str, list[int]]:
        ids = super().apply_chat_template(messages, **kw)["input_ids"]
        kind = ids[-1]
        return {"input_ids": [9] * max(kind - 10, 0) + [kind]}


@pytest.mark.parametrize(("pad", "stops", "expected"), [(42, {5}, 42), (None, {5}, 5), (None, set(), 0)])
def test_prompts_are_left_padded_with_the_tokenizers_pad_else_a_stop_token_else_0(
        pad: int | None, stops: set[int], expected: int) -> None:
    model = RecordingLM({PUBLIC_KIND: _rows(1), 10: _rows(3), 12: _rows(3)})
    pp.generate_batch(model, LongPromptTokenizer(pad), [prompt(10), prompt(12)], PUBLIC_PROMPT,
                      config=_config(max_new_tokens=1), noise=NoiseSource(1), stop_ids=stops)
    private = [p for p in model.prefills if len(p) == 2]
    assert private == [[[expected, expected, 10], [9, 9, 12]]]


class NoPadTokenizer(LongPromptTokenizer):
    """A tokenizer without any ``pad_token_id`` attribute."""

    def __init__(self) -> None:
        pass

    @property
    def pad_token_id(self) -> int:  # type: ignore[override]
        raise AttributeError("pad_token_id")


def test_a_tokenizer_without_a_pad_attribute_pads_with_a_stop_token() -> None:
    model = RecordingLM({PUBLIC_KIND: _rows(1), 10: _rows(3), 12: _rows(3)})
    pp.generate_batch(model, NoPadTokenizer(), [prompt(10), prompt(12)], PUBLIC_PROMPT,
                      config=_config(max_new_tokens=1), noise=NoiseSource(1), stop_ids={5})
    assert [p for p in model.prefills if len(p) == 2] == [[[5, 5, 10], [9, 9, 12]]]


def test_an_empty_batch_releases_from_public_input_only() -> None:
    model = ScriptedLM({PUBLIC_KIND: _rows(1)})
    noise = NoiseSource(4)
    out = pp.generate_batch(model, ScriptedTokenizer(), [], PUBLIC_PROMPT, config=_config(), noise=noise,
                            stop_ids=set())
    assert out.size == 0 and out.private_tokens == 3 and len(tokens(out.texts[0])) == 3  # z̄ = 0: uniform
    assert "noisy_values_drawn" not in noise.describe()  # no sparse vector: no Laplace draw at all
    noise = NoiseSource(4)
    cfg = _config(svt_threshold=1.5, svt_noise=1e-6)
    out = pp.generate_batch(model, ScriptedTokenizer(), [], PUBLIC_PROMPT, config=cfg, noise=noise, stop_ids=set())
    # d = ‖0 − softmax(z_pub)‖₁ = 1 < θ: every token public
    assert out.texts == ["1 1 1"] and (out.private_tokens, out.public_tokens) == (0, 3)
    assert noise.describe()["noisy_values_drawn"] == {"float_laplace": 1 + 3}  # θ̂ once, one query per token


def test_sparse_vector_draws_a_fresh_threshold_after_each_private_token() -> None:
    model = ScriptedLM({PUBLIC_KIND: _rows(1), 10: _rows(3, 4, 5)})
    noise = NoiseSource(4)
    cfg = _config(svt_threshold=1.5, svt_noise=1e-6)
    out = pp.generate_batch(model, ScriptedTokenizer(), [prompt(10)], PUBLIC_PROMPT, config=cfg, noise=noise,
                            stop_ids=set())
    # d = 2 > θ at every step: three private tokens, each after a query, each followed by a fresh θ̂
    assert out.texts == ["3 4 5"] and out.private_tokens == 3
    assert noise.describe()["noisy_values_drawn"] == {"float_laplace": 1 + 3 + 3}


def test_a_top_k_as_large_as_the_vocabulary_is_no_candidate_set() -> None:
    z_pub = torch.tensor([[0.0, 2.0, 1.0, 0.5, 1.5, 0.2]])
    z_priv = torch.tensor([[0.1, 0.5, 0.3, 0.2, 0.4, 0.0]])
    model = ScriptedLM({PUBLIC_KIND: z_pub, 10: z_priv})
    outs = [pp.generate_batch(model, ScriptedTokenizer(), [prompt(10)], PUBLIC_PROMPT,
                              config=_config(public_top_k=k, max_new_tokens=30), noise=NoiseSource(8),
                              stop_ids=set()).texts for k in (None, VOCAB_SIZE)]
    assert outs[0] == outs[1] and len(set(tokens(outs[0][0]))) > 2


class SpecialTokenizer(ScriptedTokenizer):
    """Token 0 is special: dropped only when asked (as Hugging Face tokenizers do; their default keeps it)."""

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return " ".join(str(int(i)) for i in ids if not (skip_special_tokens and int(i) == 0))


def test_special_tokens_are_left_out_of_the_texts() -> None:
    model = ScriptedLM({PUBLIC_KIND: _rows(1), 10: _rows(3, 0, 4)})
    out = pp.generate_batch(model, SpecialTokenizer(), [prompt(10)], PUBLIC_PROMPT, config=_config(),
                            noise=NoiseSource(1), stop_ids=set())
    assert out.texts == ["3 4"]
