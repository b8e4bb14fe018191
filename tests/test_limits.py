"""Documented resource limits (issue 7): each is enforced with a clear message."""

import pytest

from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import CorpusError, ParameterError
from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.method.pipeline import run_sampling
from dpkps_core.method.vocabulary import PublicVocabulary


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
    run = run_sampling(corpus, cfg, vocabulary=vocab, embedder=HashingEmbedder(8),
                       context=ReleaseContext(noise=NoiseSource(seed=0)))
    assert run.truncated_documents == 10


def test_llm_max_tokens_limit():
    from dpkps_core.llm.settings import GenerationSettings

    with pytest.raises(ParameterError, match="max_tokens must be an integer from 1 to 32768"):
        GenerationSettings(max_tokens=32769)
    GenerationSettings(max_tokens=32768)


def test_user_vocabulary_file_size_limit(tmp_path, monkeypatch):
    import dpkps_core.method.vocabulary as vocabulary
    from dpkps_core.errors import VocabularyError

    monkeypatch.setattr(vocabulary, "MAX_USER_VOCABULARY_BYTES", 100)
    p = tmp_path / "big.txt"
    p.write_text("\n".join(f"term{i}" for i in range(100)))
    with pytest.raises(VocabularyError, match="larger than"):
        vocabulary._read_user_terms(p)


# ---- the loader's limits are settings (issue 31) ------------------------------------------------------------

def _many_rows_csv(tmp_path, n=200):
    p = tmp_path / "many.csv"
    p.write_text("text,label\n" + "".join(f'"document number {i} about things",{"ab"[i % 2]}\n' for i in range(n)))
    return p


def test_limit_errors_name_the_setting_and_how_to_raise_it(tmp_path):
    from dpkps_core.corpus.limits import LimitExceededError

    p = _many_rows_csv(tmp_path)
    with pytest.raises(LimitExceededError) as exc:
        load_corpus(p, max_documents=50)
    msg = str(exc.value)
    assert exc.value.setting == "max_documents" and exc.value.found == 200 and exc.value.limit == 50
    assert "has 200 documents, over the limit of 50 set by max_documents" in msg
    assert "--max-documents" in msg and "$DPKPS_MAX_DOCUMENTS" in msg and "\n" not in msg
    with pytest.raises(LimitExceededError) as exc:
        load_corpus(p, max_bytes=1000)
    assert exc.value.setting == "max_bytes"
    assert "over the 1,000 bytes limit set by max_bytes" in str(exc.value) and "--max-corpus-bytes" in str(exc.value)


@pytest.mark.parametrize("no_limit", [0, None, "0", "none"])
def test_zero_or_none_is_no_limit(tmp_path, no_limit):
    p = _many_rows_csv(tmp_path)
    assert len(load_corpus(p, max_documents=no_limit, max_bytes=no_limit)) == 200


def test_deployment_default_comes_from_the_environment(tmp_path, monkeypatch):
    from dpkps_core.corpus.limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_DOCUMENTS, LoadLimits

    assert LoadLimits.from_env({}) == LoadLimits(DEFAULT_MAX_BYTES, DEFAULT_MAX_DOCUMENTS)
    assert LoadLimits.from_env({"DPKPS_MAX_CORPUS_BYTES": "4GB", "DPKPS_MAX_DOCUMENTS": "none"}) == \
        LoadLimits(4 * 1024**3, None)
    p = _many_rows_csv(tmp_path)
    monkeypatch.setenv("DPKPS_MAX_DOCUMENTS", "100")
    with pytest.raises(CorpusError, match="over the limit of 100 set by max_documents"):
        load_corpus(p)
    assert len(load_corpus(p, max_documents=0)) == 200  # an explicit setting wins over the deployment's default
    monkeypatch.setenv("DPKPS_MAX_DOCUMENTS", "many")
    with pytest.raises(ParameterError, match=r"\$DPKPS_MAX_DOCUMENTS must be a whole number"):
        load_corpus(p)


@pytest.mark.parametrize("value,expected", [("200000", 200_000), ("200,000", 200_000), ("640MB", 640 * 1024**2),
                                            ("1.5 GB", int(1.5 * 1024**3)), ("none", None), (0, None), (12, 12)])
def test_parse_limit(value, expected):
    from dpkps_core.corpus.limits import parse_limit

    assert parse_limit(value, name="x", sizes=True) == expected


@pytest.mark.parametrize("value", [-1, "-3", "lots", True, 1.5])
def test_parse_limit_refuses(value):
    from dpkps_core.corpus.limits import parse_limit

    with pytest.raises(ParameterError, match="x must be a whole number"):
        parse_limit(value, name="x")


def test_cli_options_reach_the_loader(tmp_path, capsys):
    from dpkps_core.cli import main

    p = _many_rows_csv(tmp_path)
    rc = main(["sample", "--corpus", str(p), "--classes", "a,b", "--max-documents", "50", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "over the limit of 50 set by max_documents" in err and "\n" not in err
    rc = main(["sample", "--corpus", str(p), "--classes", "a,b", "--max-corpus-bytes", "1KB", "--out",
               str(tmp_path / "r")])
    assert rc == 2 and "over the 1 KB limit set by max_bytes" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sample", "--corpus", str(p), "--max-documents", "lots"])
    assert "--max-documents must be a whole number" in capsys.readouterr().err


def test_config_carries_the_limits(tmp_path):
    from dpkps_core.method.config import load_config_corpus, load_limits_of

    p = _many_rows_csv(tmp_path)
    cfg = SamplingConfig(corpus=str(p), classes=("a", "b"), max_documents=0)
    assert load_limits_of(cfg) == {"max_documents": 0} and load_limits_of(SamplingConfig()) == {}
    assert len(load_config_corpus(cfg)) == 200
    with pytest.raises(CorpusError, match="over the limit of 10"):
        load_config_corpus(cfg.replace(max_documents=10))
    with pytest.raises(ParameterError, match="max_documents must be a whole number"):
        SamplingConfig(max_documents=-1)


def test_ledger_command_and_run_config_carry_the_limits(tmp_path, capsys, monkeypatch):
    from dpkps_core.cli import main
    from dpkps_core.cli.generate import _private_texts
    from dpkps_core.method.config import load_limits_of

    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(tmp_path / "ledgers"))
    p = _many_rows_csv(tmp_path)
    assert main(["ledger", "--corpus", str(p), "--max-documents", "50"]) == 2
    assert "over the limit of 50 set by max_documents" in capsys.readouterr().err
    assert load_limits_of({"max_documents": 0, "max_corpus_bytes": None}) == {"max_documents": 0}
    with pytest.raises(ParameterError, match="max_documents must be a whole number"):
        load_limits_of({"max_documents": "many"})
    # a run sampled with --max-documents 0 checks its few-shot examples against all of its corpus, not none
    run = tmp_path / "run"
    run.mkdir()
    config = SamplingConfig(corpus=str(p), classes=("a", "b"), max_documents=0).to_run_dict()
    (run / "run_config.json").write_text(__import__("json").dumps(config))
    monkeypatch.setenv("DPKPS_MAX_DOCUMENTS", "100")
    texts = _private_texts(None, run)
    assert texts is not None and len(texts) == 200


def test_the_audit_reads_raw_rows_with_the_runs_limits(tmp_path, monkeypatch):
    from dpkps_core.audit.raw import raw_table_for

    p = _many_rows_csv(tmp_path)
    monkeypatch.setenv("DPKPS_MAX_DOCUMENTS", "100")
    with pytest.raises(CorpusError, match="over the limit of 100 set by max_documents"):
        raw_table_for(SamplingConfig(corpus=str(p), classes=("a", "b")))
    table = raw_table_for(SamplingConfig(corpus=str(p), classes=("a", "b"), max_documents=0))
    assert len(table) == 200 and len(table.load_corpus()) == 200
