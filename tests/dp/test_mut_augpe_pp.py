"""Mutation-testing kills for the baselines' mechanism functions (docs/TESTING.md "Mutation testing").

* AugPE+Ṽ (docs/DESIGN.md §4; [DP-KPS] App. C.1.3): the nearest-neighbour votes, their Gaussian release, the selection,
  the frozen ledger event and the T epochs of Private Evolution, driven end to end with a sequential echoing fake
  backend.
* Private prediction (docs/DESIGN.md §3; [PrivPred] Algorithm 1): the clipping and SVT distance, the hash batches, the
  token sampler and ``generate_batch`` on the scripted LM of tests/dp/scripted_lm.py — stop tokens, padding,
  empty batches, examples restarting from the prompt, public top-k, Laplace draw counts, local diagnostics.
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

from dpkps_core.baselines import augpe
from dpkps_core.baselines import private_prediction as pp
from dpkps_core.config import PRIVATE_PREDICTION_LIMITS
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend
from scripted_lm import PUBLIC_KIND, PUBLIC_PROMPT, ScriptedLM, ScriptedTokenizer, prompt, tokens


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


# ================================================================================== private prediction

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


# ---------------------------------------------------------------------------------------- generate_batch

V = 6


def _rows(*tokens_by_step: int) -> torch.Tensor:
    """(steps, V) logits peaked (margin 40) on the given token at each step."""
    t = torch.zeros((len(tokens_by_step), V))
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
                              stop_ids=set()).texts for k in (None, V)]
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
