"""Embedding cache (a term is embedded once, ever; only Ṽ is cached) and the whole sampling pipeline."""

import numpy as np
import pytest

from dpkps_core.corpus import Corpus
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import EmbeddingCache, HashingEmbedder, embed_terms, get_embedder
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.pipeline import run_sampling, write_run_folder
from dpkps_core.method.vocabulary import PublicVocabulary


class CountingEmbedder(HashingEmbedder):
    def __init__(self):
        super().__init__(dim=16, name="counting")
        self.seen: list[str] = []

    def encode(self, texts, batch_size=0):
        self.seen.extend(texts)
        return super().encode(texts)


def test_cache_embeds_each_term_once_ever(tmp_path):
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    emb = CountingEmbedder()
    a = embed_terms(["goal", "bank", "goal"], emb, cache=cache)
    b = embed_terms(["bank", "chip"], emb, cache=EmbeddingCache(tmp_path / "c.sqlite"))  # reopened: persistent
    assert emb.seen == ["goal", "bank", "chip"]
    assert np.allclose(a[1], b[0]) and np.allclose(a[0], a[2])
    assert cache.terms("counting") == {"goal", "bank", "chip"}
    assert oct((tmp_path / "c.sqlite").stat().st_mode)[-3:] == "600"


@pytest.mark.model
def test_minilm_embeddings_are_unit_norm_and_semantic():
    e = get_embedder()
    v = e.encode(["football match", "soccer game", "interest rates"])
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2]


def _planted_corpus():
    common = ["match goal league team", "bank shares profit market"]
    texts, labels = [], []
    for i in range(60):
        topic = i % 2
        rare = f" zyxcanary{i}" if i < 6 else ""  # six planted rare words, each in one document
        texts.append(f"{common[topic]} story {i}{rare}")
        labels.append(["sport", "business"][topic])
    return Corpus(tuple(texts), tuple(labels), "planted", "test", public_classes=("sport", "business"))


def test_cache_holds_only_private_vocabulary_terms_never_rare_private_ones(tmp_path):
    planted = {f"zyxcanary{i}" for i in range(6)}
    terms = ("match", "goal", "league", "team", "bank", "shares", "profit", "market", "story", *sorted(planted)) + tuple(
        f"public{i}" for i in range(500)
    )
    vocab = PublicVocabulary("test", terms, "test", "test")
    cache = EmbeddingCache(tmp_path / "c.sqlite")
    cfg = SamplingConfig(corpus="planted", eps_voc=0.5, eps_kde=1, vocab_size=20, terms_per_doc=5, per_class=4,
                         length=3, junk_filter=False, embedding_model="counting")
    # a seeded (demo) Ṽ is no DP release: it is embedded in memory only and never reaches the persistent cache
    run_sampling(_planted_corpus(), cfg, vocabulary=vocab, embedder=CountingEmbedder(), cache=cache,
                 context=ReleaseContext(noise=NoiseSource(seed=0)))
    assert cache.terms() == set()
    run = run_sampling(_planted_corpus(), cfg, vocabulary=vocab, embedder=CountingEmbedder(), cache=cache,
                       context=ReleaseContext(noise=NoiseSource(sampler="numpy")))  # OS entropy: a real release
    cached = cache.terms()
    assert cached == set(run.private_vocabulary.terms)
    unselected = planted - set(run.private_vocabulary.terms)
    assert len(unselected) >= 4  # rare private words in V that the noisy histogram did not select ...
    assert not unselected & cached  # ... never reach the persistent cache


def test_pipeline_touches_only_training_documents_and_writes_report(tmp_path):
    corpus = _planted_corpus()
    vocab = PublicVocabulary("test", ("match", "goal", "league", "team", "bank", "shares", "profit", "market"),
                             "test", "test")
    cfg = SamplingConfig(corpus="planted", eps_voc=3, eps_kde=2, vocab_size=8, terms_per_doc=4, per_class=5,
                         length=3, test_fraction=0.25, embedding_model="counting")
    run = run_sampling(corpus, cfg, vocabulary=vocab, embedder=CountingEmbedder(),
                       context=ReleaseContext(noise=NoiseSource(seed=1)))
    assert 5 <= len(run.split.test) <= 25 and not set(run.split.test) & set(run.split.train)  # 15 expected (hash)
    assert len(run.split.test) + len(run.split.train) == len(corpus)
    assert run.ledger.total_epsilon == pytest.approx(5)
    out = write_run_folder(run, tmp_path / "run")
    report = (out / "privacy_report.json").read_text()
    assert '"epsilon_total": 5.0' in report and "story" not in report
    assert len((out / "sequences.jsonl").read_text().splitlines()) == 10


@pytest.mark.model
def test_mpnet_is_assembled_from_its_parts_once_and_embeds():
    from dpkps_core.embeddings import model_path

    first = model_path("all-mpnet-base-v2")
    assert any((p / ".complete").exists() for p in (first, *first.parents))  # the unzip finished and was marked
    assert model_path("all-mpnet-base-v2") == first  # assembled once, then reused
    v = get_embedder("all-mpnet-base-v2").encode(["football match", "soccer game", "interest rates"])
    assert v.shape == (3, 768) and v[0] @ v[1] > v[0] @ v[2]


def test_embed_texts_batches_similar_lengths_and_keeps_the_order():
    """Documents go to the model in batches of similar length (less padding), each once, and come back in the
    order given."""
    from dpkps_core.embeddings import embed_texts

    class Recording(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(dim=16)
            self.batches: list[list[str]] = []

        def encode(self, texts, batch_size=64):
            self.batches.append(list(texts))
            return super().encode(texts, batch_size=batch_size)

    rng = np.random.default_rng(0)
    texts = [" ".join(["word"] * int(k)) + f" doc{i}" for i, k in enumerate(rng.integers(1, 300, size=70))]
    rec = Recording()
    fractions = []
    out = embed_texts(texts, rec, batch_size=16, progress=lambda f, m: fractions.append(f))
    assert np.allclose(out, HashingEmbedder(dim=16).encode(texts))  # row i is text i
    assert sorted(t for b in rec.batches for t in b) == sorted(texts)  # each document embedded once
    lengths = [[len(t) for t in b] for b in rec.batches]
    assert all(max(a) <= min(b) for a, b in zip(lengths, lengths[1:]))  # batches in increasing length
    assert fractions[-1] == 1.0 and len(fractions) == len(rec.batches) == 5
    assert embed_texts([], rec).shape == (0, 16)
