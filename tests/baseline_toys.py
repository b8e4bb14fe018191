"""Toys shared by the baseline tests and the tests that reuse them (tests/llm, tests/ledger_store): a tiny fake causal
LM and tokenizer for private prediction ([PrivPred]), and a three-topic corpus, vocabulary and echo backend for
``compare_methods`` — importable by name (tests/ is on pytest's pythonpath), never from another test module."""

from __future__ import annotations

import hashlib
import re
import threading
import types
from pathlib import Path

import torch

from dpkps_core.baselines import compare as cmp
from dpkps_core.baselines.compare_settings import GENERATION_METHODS
from dpkps_core.baselines.prediction_config import PrivatePredictionConfig
from dpkps_core.corpus import Corpus
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.llm.backends import LLMBackend
from dpkps_core.method.vocabulary import PublicVocabulary

# ------------------------------------------------------------------------------------------- fake model

WORDS = ["<pad>", "<eos>", "the", "match", "goal", "team", "bank", "market", "shares", "phone", "chip", "new",
         "here", "is", "a", "document", "write", "similar", "one", "above"]


class FakeTokenizer:
    """Stand-in tokenizer: words of a fixed list (unknown words hash onto it); id 0 = pad, 1 = EOS."""

    eos_token_id = 1
    pad_token_id = 0
    unk_token_id = None
    chat_template = "role: content lines"  # has a chat template: prompts go through apply_chat_template

    def __init__(self) -> None:
        self.index = {w: i for i, w in enumerate(WORDS)}
        self.seen_texts: list[str] = []

    def _ids(self, text: str) -> list[int]:
        out = []
        for w in text.lower().replace(".", " ").replace(":", " ").replace(",", " ").split():
            if w in self.index:
                out.append(self.index[w])
            else:
                out.append(2 + int(hashlib.sha256(w.encode()).hexdigest(), 16) % (len(WORDS) - 2))
        return out

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True, return_dict=True):
        ids: list[int] = []
        for m in messages:
            self.seen_texts.append(m["content"])
            ids += self._ids(m["content"])
        return {"input_ids": ids}

    def encode(self, text, add_special_tokens=False):
        return self._ids(text)

    def decode(self, ids, skip_special_tokens=True):
        return " ".join(WORDS[i] for i in ids if not (skip_special_tokens and i in (0, 1)))

    def convert_tokens_to_ids(self, token):
        return None


class FakeCache:
    """Per-position contributions (rows, T, H); ``crop`` like transformers' DynamicCache."""

    def __init__(self) -> None:
        self.h: torch.Tensor | None = None

    def crop(self, n: int) -> None:
        assert self.h is not None
        self.h = self.h[:, :n]


class FakeLM(torch.nn.Module):
    """Tiny causal LM: hidden_t = Σ_{j≤t, unmasked} E[x_j]·(1 + pos_j/10); logits = 4·tanh(hidden)·W.

    The output depends on every earlier token, on the attention mask and on the position ids, so any slip in
    left padding, positions or KV caching changes the logits."""

    def __init__(self, vocab: int = len(WORDS), hidden: int = 8, seed: int = 0, eos_bias: float = -3.0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.randn(vocab, hidden, generator=g)
        self.out = torch.randn(hidden, vocab, generator=g)
        self.bias = torch.zeros(vocab)
        self.bias[0] = -30.0  # never the pad token
        self.bias[1] = eos_bias
        self.calls: list[tuple[int, int]] = []
        self.generation_config = types.SimpleNamespace(eos_token_id=1)

    def forward(self, input_ids, attention_mask, position_ids, past_key_values=None, use_cache=True,
                logits_to_keep=0):
        self.calls.append(tuple(input_ids.shape))
        t = input_ids.shape[1]
        mask = attention_mask[:, -t:].unsqueeze(-1).float()
        contrib = self.emb[input_ids] * (1 + position_ids.unsqueeze(-1).float() / 10) * mask
        cache = past_key_values if past_key_values is not None else FakeCache()
        cache.h = contrib if cache.h is None else torch.cat([cache.h, contrib], dim=1)
        hidden = cache.h.cumsum(dim=1)[:, -t:]
        logits = 4 * torch.tanh(hidden) @ self.out + self.bias
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return types.SimpleNamespace(logits=logits, past_key_values=cache)

    def full_logits(self, ids: list[int]) -> torch.Tensor:
        """Last-position logits of one unpadded sequence, computed from scratch."""
        x = torch.tensor([ids])
        n = len(self.calls)
        out = self.forward(x, torch.ones_like(x), torch.arange(len(ids)).unsqueeze(0), None)
        del self.calls[n:]  # reference computations are not the decoder's calls
        return out.logits[0, -1]


# ------------------------------------------------------------------------------------- compare_methods

TOPICS = {
    "sport": ["match", "goal", "league", "team", "coach", "stadium"],
    "business": ["bank", "market", "shares", "profit", "inflation", "airline"],
    "tech": ["phone", "chip", "software", "browser", "network", "console"],
}


def compare_corpus() -> Corpus:
    """Three topics × 20 documents, each with a private marker word (zzprivate…)."""
    texts, labels = [], []
    for c, words in TOPICS.items():
        for i in range(20):
            texts.append(f"zzprivate{c}{i} " + " ".join(words[(i + j) % 6] for j in range(4)) + f" story {i}")
            labels.append(c)
    return Corpus(tuple(texts), tuple(labels), "topics", "tests", public_classes=tuple(TOPICS))


VOCAB = PublicVocabulary("test", tuple(w for ws in TOPICS.values() for w in ws) + ("story", "river", "city"),
                         "test", "test")


class EchoBackend(LLMBackend):
    """Writes a 'document' from the words of its prompt (keyphrases, Ṽ words or the text to rewrite)."""

    name = "echo"
    model = "echo-model"
    max_concurrency = 2

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.lock = threading.Lock()

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[override]
        user = messages[-1]["content"]
        with self.lock:
            self.prompts.append(" ".join(m["content"] for m in messages))
        words = [w for w in re.findall(r"[a-z]+", user.lower()) if any(w in ws for ws in TOPICS.values())]
        return "a text about " + " ".join(words[:8] or ["nothing"])


def run_compare(tmp_path: Path, methods=GENERATION_METHODS, *, ledger=None, **kw):
    """``compare_methods`` on :func:`compare_corpus` with the echo backend, the fake LM and a hashing embedder."""
    backend = EchoBackend()
    settings = cmp.CompareSettings(
        eps_total=8.0, methods=methods, delta=1e-6, per_class=2, max_tokens=6,
        sampling={"vocab_size": 12, "terms_per_doc": 4, "length": 3, "junk_filter": False,
                  "embedding_model": "hashing-test"},
        private_prediction=PrivatePredictionConfig(batch_size=4, private_tokens=6, public_top_k=None),
        augpe_config=None, class_size_estimate=16, seeds=(0, 1), seed=11, **kw)
    res = cmp.compare_methods(compare_corpus(), settings, backend=backend, embedder=HashingEmbedder(dim=32),
                              vocabulary=VOCAB, local_lm=(FakeLM(seed=7), FakeTokenizer()), out_dir=tmp_path / "cmp",
                              ledger=ledger)
    return res, backend
