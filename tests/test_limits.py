"""Documented resource limits (issue 7): each is enforced with a clear message."""

import pytest

from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import CorpusError, ParameterError
from dpkps_core.config import LIMITS, SamplingConfig
from dpkps_core.pipeline import run_sampling
from dpkps_core.vocabulary import PublicVocabulary


@pytest.mark.parametrize(
    "field,name",
    [("vocab_size", "N (private vocabulary size)"), ("terms_per_doc", "S (terms per document)"),
     ("length", "L (sequence length)"), ("per_class", "sequences per class"), ("features", "I (random features)")],
)
def test_parameter_limits(field, name):
    with pytest.raises(ParameterError, match="over the limit") as exc:
        SamplingConfig(**{field: LIMITS[field] + 1}).validate()
    assert name in str(exc.value)
    SamplingConfig(**{field: LIMITS[field]}).validate()  # the limit itself is allowed


def test_corpus_byte_limit(tmp_path):
    p = tmp_path / "big.csv"
    p.write_text("text,label\n" + "".join(f'"document number {i} about things",{"ab"[i % 2]}\n' for i in range(200)))
    with pytest.raises(CorpusError, match="too big|over|limit"):
        load_corpus(p, max_bytes=1000)


def test_corpus_document_limit(tmp_path):
    p = tmp_path / "many.csv"
    p.write_text("text,label\n" + "".join(f'"document number {i} about things",{"ab"[i % 2]}\n' for i in range(200)))
    with pytest.raises(CorpusError, match="documents"):
        load_corpus(p, max_documents=50)


def test_long_documents_are_truncated_for_extraction_and_counted(monkeypatch):
    monkeypatch.setitem(LIMITS, "max_chars_per_doc", 40)
    texts = tuple(["goal match " * 50, "bank shares profit"] * 10)
    corpus = Corpus(texts, tuple(["a", "b"] * 10), "t", "t", public_classes=("a", "b"))
    vocab = PublicVocabulary("v", ("goal", "match", "bank", "shares", "profit"), "x", "x")
    cfg = SamplingConfig(eps_voc=2, eps_kde=2, vocab_size=5, per_class=2, length=3, test_fraction=0.0)
    run = run_sampling(corpus, cfg, vocabulary=vocab, embedder=HashingEmbedder(8), noise=NoiseSource(seed=0))
    assert run.truncated_documents == 10


def test_llm_max_tokens_limit():
    from dpkps_core.llm.settings import GenerationSettings

    with pytest.raises(ParameterError, match="max_tokens must be an integer from 1 to 32768"):
        GenerationSettings(max_tokens=32769)
    GenerationSettings(max_tokens=32768)


def test_user_vocabulary_file_size_limit(tmp_path, monkeypatch):
    import dpkps_core.vocabulary as vocabulary
    from dpkps_core.errors import VocabularyError

    monkeypatch.setattr(vocabulary, "MAX_USER_VOCABULARY_BYTES", 100)
    p = tmp_path / "big.txt"
    p.write_text("\n".join(f"term{i}" for i in range(100)))
    with pytest.raises(VocabularyError, match="larger than"):
        vocabulary._read_user_terms(p)
