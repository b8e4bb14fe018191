"""The ``local`` backend: any Hugging Face model folder on disk, loaded offline. The tests build and save a
tiny randomly initialised Llama (2 layers, hidden 32) and its tokenizer themselves — nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpkps_core.cli import main
from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm import GenerationSettings, PromptConfig, make_backend, read_documents, read_failures, run_generation
from dpkps_core.llm.local import LocalModelBackend, LocalTransformersBackend, chat_token_ids
from llm_fakes import build_tiny_model, make_sequences, write_jsonl

@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-llama")


def _norm(results: list) -> list[str]:
    return [r if isinstance(r, str) else f"<{type(r).__name__}>" for r in results]


def test_batched_greedy_equals_one_at_a_time(tiny_model: Path) -> None:
    b = LocalModelBackend(model_path=tiny_model, device="cpu")
    assert b.name == "local" and b.model == "tiny-llama" and isinstance(b, LocalTransformersBackend)
    prompts = [[{"role": "user", "content": f"write a short news article about term{i}" + " goal" * i}]
               for i in range(1, 5)]  # different lengths → left padding
    batched = b.generate_batch(prompts, max_tokens=6, temperature=0.0, timeout=30.0)
    alone = [b.generate_batch([p], max_tokens=6, temperature=0.0, timeout=30.0)[0] for p in prompts]
    assert _norm(batched) == _norm(alone) and any(isinstance(r, str) for r in batched)
    assert 1 <= b.last_tokens <= 6 and b.tokens_generated >= b.last_tokens
    assert b.describe()["device"] == "cpu" and b.describe()["model_path"] == str(tiny_model.resolve())
    assert b.count_prompt_tokens(prompts[0]) == len(chat_token_ids(b._tokenizer, prompts[0])) > 8
    sampled = b.generate_batch(prompts, max_tokens=4, temperature=0.9, timeout=30.0)
    assert len(sampled) == 4


def test_runner_cli_and_errors_with_a_local_folder(tiny_model: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    backend = make_backend("local", model_path=tiny_model, device="cpu")
    seqs = make_sequences(5)
    s = run_generation(seqs, backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                       run_dir=tmp_path / "run", settings=GenerationSettings(max_tokens=5, batch_size=2, retries=0))
    docs, failures = read_documents(tmp_path / "run"), read_failures(tmp_path / "run")
    # every sequence ends as exactly one document or one recorded failure, and the summary says which
    assert {d["id"] for d in docs} | {f["id"] for f in failures} == {q["id"] for q in seqs}
    assert not {d["id"] for d in docs} & {f["id"] for f in failures}
    assert (s.written, s.failed) == (len(docs), len(failures))
    assert all(d["text"].strip() for d in docs)
    audit = [json.loads(x) for x in (tmp_path / "run" / "audit_log.jsonl").read_text().splitlines()]
    assert {a["backend"] for a in audit} == {"local"} and audit[0]["backend_info"]["device"] == "cpu"
    assert max(a["batch"] for a in audit) >= 3 and all(a["parameters"]["batch_size"] <= 2 for a in audit)
    # the CLI: --backend local --model-path DIR --device cpu --batch-size N
    seq_file = write_jsonl(tmp_path / "sequences.jsonl", seqs)
    rc = main(["generate", "--sequences", str(seq_file), "--backend", "local", "--model-path", str(tiny_model),
               "--device", "cpu", "--batch-size", "3", "--max-tokens", "4", "--retries", "0", "--doc-type",
               "a news article", "--quiet", "--out", str(tmp_path / "cli")])
    err = capsys.readouterr().err
    assert "tiny-llama on cpu, 3 prompt(s) per batch" in err
    cli_docs, cli_failures = read_documents(tmp_path / "cli"), read_failures(tmp_path / "cli")
    assert {d["id"] for d in cli_docs} | {f["id"] for f in cli_failures} == {q["id"] for q in seqs}
    # the exit status is the documented one: 0 when every sequence became a document, 1 (with the count and
    # where the failures are) when some did not
    if cli_failures:
        assert rc == 1 and f"error: {len(cli_failures)} document(s) failed" in err
    else:
        assert rc == 0 and "failed" not in err
    assert main(["generate", "--sequences", str(seq_file), "--backend", "local", "--doc-type", "a note"]) == 2
    assert "--model-path" in capsys.readouterr().err
    with pytest.raises(ParameterError, match="does not exist"):
        LocalModelBackend(model_path=tmp_path / "missing")
    with pytest.raises(ParameterError, match="no config.json"):
        LocalModelBackend(model_path=tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    with pytest.raises(LLMError):
        LocalModelBackend(model_path=broken).load()


def test_tokenizer_without_chat_template_falls_back_to_plain_lines(tmp_path: Path) -> None:
    folder = build_tiny_model(tmp_path / "plain", chat_template=False)
    b = LocalModelBackend(model_path=folder)
    out = b.generate_batch([[{"role": "user", "content": "write a goal"}]], max_tokens=3, temperature=0.0, timeout=10)
    assert len(out) == 1 and b.count_prompt_tokens([{"role": "user", "content": "write a goal"}]) >= 4


def test_private_prediction_and_augpe_accept_the_local_backend(tiny_model: Path) -> None:
    from dpkps_core.baselines import augpe
    from dpkps_core.baselines import private_prediction as pp
    from dpkps_core.dp.rng import NoiseSource

    backend = LocalModelBackend(model_path=tiny_model, device="cpu")
    model, tok, name = pp.load_local_lm(backend)
    assert name == "tiny-llama" and next(model.parameters()).device.type == "cpu"
    assert backend.model_and_tokenizer() == (model, tok)  # the public API private prediction reads logits through
    assert tok.eos_token_id in backend.stop_ids and tok.pad_token_id is not None
    cfg = pp.PrivatePredictionConfig(batch_size=2, private_tokens=3, max_new_tokens=3, max_prompt_tokens=16,
                                     doc_type="a news article", public_top_k=8)
    prompts = [pp.private_messages(t, cfg) for t in ("the match goal", "bank shares profits")]
    out = pp.generate_batch(model, tok, prompts, pp.public_messages(cfg), config=cfg, noise=NoiseSource())
    assert out.size == 2 and len(out.texts) == 1 and out.private_tokens >= 1
    acfg = augpe.AugPEConfig(doc_type="a news article")
    msgs = [augpe.random_api_messages(["goal", "match"], acfg), augpe.random_api_messages(["bank"], acfg)]
    texts, st = augpe.generate_texts(msgs, backend=backend, max_tokens=4, temperature=0.7, offline_batch=2)
    assert len(texts) == 2 and st.calls == 2 and st.prompt_tokens > 10


def test_compare_runs_private_prediction_on_the_local_backend(tiny_model: Path, tmp_path: Path) -> None:
    from baseline_toys import VOCAB, compare_corpus as _corpus

    from dpkps_core.baselines import compare as cmp
    from dpkps_core.embeddings import HashingEmbedder
    from dpkps_core.baselines.prediction_config import PrivatePredictionConfig

    settings = cmp.CompareSettings(
        eps_total=8.0, methods=("private-prediction",), delta=1e-6, per_class=1, max_tokens=3,
        private_prediction=PrivatePredictionConfig(batch_size=4, private_tokens=3, public_top_k=8),
        class_size_estimate=16, seeds=(0,), seed=11, real_baseline=False)
    res = cmp.compare_methods(_corpus(), settings, backend=LocalModelBackend(model_path=tiny_model),
                              embedder=HashingEmbedder(dim=32), vocabulary=VOCAB, out_dir=tmp_path / "cmp")
    assert [r.method for r in res.rows] == ["private-prediction"]
    docs = [json.loads(x) for x in (tmp_path / "cmp" / "documents_private-prediction.jsonl").read_text().splitlines()]
    assert docs and {d["model"] for d in docs} == {"tiny-llama"}


def test_out_of_memory_splits_the_batch_in_halves(tiny_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    b = LocalModelBackend(model_path=tiny_model, device="cpu")
    prompts = [[{"role": "user", "content": f"write about term{i}" + " goal" * i}] for i in range(1, 6)]
    expected = _norm(b.generate_batch(prompts, max_tokens=4, temperature=0.0, timeout=30.0))
    real = b._model.generate
    sizes: list[int] = []

    def small_memory(*args, **kwargs):  # noqa: ANN002, ANN003
        sizes.append(int(kwargs["input_ids"].shape[0]))
        if kwargs["input_ids"].shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(*args, **kwargs)

    monkeypatch.setattr(b._model, "generate", small_memory)
    assert _norm(b.generate_batch(prompts, max_tokens=4, temperature=0.0, timeout=30.0)) == expected
    assert sizes == [5, 2, 3, 1, 2]

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003
        raise RuntimeError("shape mismatch")

    monkeypatch.setattr(b._model, "generate", broken)
    with pytest.raises(LLMError, match=r"failed \(RuntimeError\)"):
        b.generate_batch(prompts, max_tokens=4, temperature=0.0, timeout=30.0)


# --------------------------------------------------------------------------- the model's CPU threads by default

def test_default_threads_come_from_one_setting_with_a_clear_error() -> None:
    from dpkps_core.llm.local import THREADS_ENV, default_threads

    assert default_threads({}, cpus=1) == 1 and default_threads({THREADS_ENV: " "}, cpus=1) == 1
    assert default_threads({}, cpus=2) == 2 and default_threads({}, cpus=16) == 2   # measured up to 2 (app path)
    assert 1 <= default_threads({}) <= 2
    assert default_threads({THREADS_ENV: "2"}, cpus=1) == 2 and default_threads({THREADS_ENV: "8"}) == 8
    for bad in ("two", "0", "-1", "257", "1.5"):
        with pytest.raises(ParameterError, match=f"{THREADS_ENV}=.*whole number of threads from 1 to 256"):
            default_threads({THREADS_ENV: bad})


def test_generate_reads_the_threads_setting_before_loading_a_model(tmp_path, monkeypatch, capsys) -> None:
    import json

    from dpkps_core.cli import main
    from dpkps_core.llm.local import THREADS_ENV

    seqs = tmp_path / "sequences.jsonl"
    seqs.write_text(json.dumps({"id": "s1", "label": "a", "keyphrases": ["x"]}) + "\n", encoding="utf-8")
    monkeypatch.setenv(THREADS_ENV, "many")
    assert main(["generate", "--sequences", str(seqs), "--doc-type", "a note", "--estimate-only"]) == 2
    assert "whole number of threads" in capsys.readouterr().err
