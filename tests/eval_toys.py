"""Tiny evaluation fixtures shared by the evaluation, CLI and review tests (docs/DESIGN.md §5, §6): a toy corpus of
word pools, its public vocabulary, a sampling config for it, and :class:`BowEmbedder`, a bag of hashed word vectors
that stands in for a real embedding model."""

from __future__ import annotations

import re

import numpy as np

from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.method.vocabulary import PublicVocabulary

POOLS = {
    "sport": "goal striker league match coach stadium cup referee penalty derby".split(),
    "tech": "software processor browser network console broadband chip laptop server update".split(),
    "business": "shares profit bank inflation market investor merger revenue tax airline".split(),
}
SHARED = "today week people year city report new big small early".split()


def _filler(n: int) -> list[str]:
    """Letter-only public filler terms that never occur in the toy documents (pure-noise candidates)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for i in range(n):
        a, b, c = i // 676 % 26, i // 26 % 26, i % 26
        out.append("qz" + letters[a] + letters[b] + letters[c])
    return out


def make_toy_corpus(per_class: int = 24, words: int = 14, seed: int = 0) -> Corpus:
    """Unique synthetic documents: class words mixed with shared words."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for label, pool in POOLS.items():
        for i in range(per_class):
            w = list(rng.choice(pool, size=words // 2)) + list(rng.choice(SHARED, size=words - words // 2))
            rng.shuffle(w)
            texts.append(f"Item {label[:2]}{i}: " + " ".join(w) + ".")
            labels.append(label)
    return Corpus(texts=tuple(texts), labels=tuple(labels), name="toy-eval", source="tests/evaluation/test_evaluation.py",
                  public_classes=tuple(POOLS))


def make_toy_vocabulary(n_filler: int = 400) -> PublicVocabulary:
    terms = [w for pool in POOLS.values() for w in pool] + SHARED + _filler(n_filler)
    return PublicVocabulary(name="toy-vocab", terms=tuple(terms), licence="test", source="tests")


class BowEmbedder:
    """Mean of per-word hashed unit vectors, unit-normalised: similar documents → similar vectors."""

    def __init__(self, dim: int = 48) -> None:
        self.dim = dim
        self.name = "bow-test"
        self._h = HashingEmbedder(dim)

    def encode(self, texts, batch_size: int = 0) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            toks = re.findall(r"[a-z]+", t.lower()) or ["empty"]
            v = self._h.encode(toks).mean(axis=0)
            out[i] = v / max(np.linalg.norm(v), 1e-9)
        return out


def toy_config(**kw) -> SamplingConfig:
    base = dict(corpus="toy", vocabulary="toy-vocab", eps_voc=20.0, eps_kde=20.0, vocab_size=30, terms_per_doc=5,
                length=5, per_class=20, test_fraction=0.25, embedding_model="all-MiniLM-L6-v2")
    base.update(kw)
    return SamplingConfig(**base).validate()
