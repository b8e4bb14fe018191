"""CTranslate2 as the offline/local backends' default engine (docs/ARCHITECTURE.md, llm/ct2.py): make_backend's
engine choice and its fallbacks, ``--engine`` in the CLI, the runner's behaviours through the engine (checkpoint,
resume, audit log, cancel, progress) and the estimate from the engine's measured speed. A tiny Llama saved by the
tests stands in for a real model; conversions go into a temporary cache."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ctranslate2")

from dpkps_core import cli  # noqa: E402
from dpkps_core.errors import LLMError, ParameterError  # noqa: E402
from dpkps_core.llm import ct2, ct2_convert  # noqa: E402
from dpkps_core.llm.estimate import estimate_cost  # noqa: E402
from dpkps_core.llm.factory import make_backend  # noqa: E402
from dpkps_core.llm.prompts import PromptConfig  # noqa: E402
from dpkps_core.llm.runner import run_generation  # noqa: E402
from dpkps_core.llm.settings import GenerationSettings  # noqa: E402
from dpkps_core.records.runfolder import read_documents, read_failures  # noqa: E402
from llm_fakes import build_tiny_model, make_sequences, write_jsonl  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("ct2b") / "tiny-llama")


@pytest.fixture(autouse=True)
def _cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every conversion of this module goes into one temporary cache (never the user's)."""
    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "ct2b-cache"))
    monkeypatch.delenv(ct2_convert.ENGINE_ENV, raising=False)


def test_make_backend_defaults_to_ct2_and_honours_the_setting(tiny_model: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    offline = make_backend("offline", threads=2, device="cpu")
    assert isinstance(offline.engine, ct2.LazyCT2Engine) and offline.engine_note is None
    assert offline.describe()["engine"] == {"engine": "ct2", "compute_type": ct2_convert.default_quantization("cpu"),
                                            "device": "cpu", "threads": 2}
    assert offline.engine.tokens_generated == 0  # building the backend converted nothing
    assert make_backend("offline", device="cpu", engine="torch").engine is None
    monkeypatch.setenv(ct2_convert.ENGINE_ENV, "torch")
    assert make_backend("local", model_path=tiny_model, device="cpu").engine is None
    monkeypatch.delenv(ct2_convert.ENGINE_ENV)
    local = make_backend("local", model_path=tiny_model, device="cpu")
    assert isinstance(local.engine, ct2.LazyCT2Engine)
    with pytest.raises(ParameterError, match="ct2, torch"):
        make_backend("offline", engine="fast")


def test_unsupported_architecture_or_missing_package_falls_back_to_torch_with_a_note(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    neo = tmp_path / "neo"
    neo.mkdir()
    (neo / "config.json").write_text(json.dumps({"model_type": "gpt_neo"}), encoding="utf-8")
    b = make_backend("local", model_path=neo, device="cpu")
    assert b.engine is None and b.engine_note is not None
    assert b.engine_note.startswith("note: writing with torch") and "GPTNeoConfig" in b.engine_note
    assert "\n" not in b.engine_note
    with pytest.raises(ParameterError, match="GPTNeoConfig"):  # asked for explicitly: an error, not a fallback
        make_backend("local", model_path=neo, device="cpu", engine="ct2")

    def missing() -> Any:
        raise LLMError("The CTranslate2 engine is not installed; run `pip install ctranslate2==4.8.5`.")

    monkeypatch.setattr(ct2, "require_ctranslate2", missing)
    b = make_backend("local", model_path=tiny_model, device="cpu")
    assert b.engine is None and "not installed" in (b.engine_note or "")
    with pytest.raises(LLMError, match="pip install ctranslate2"):
        make_backend("offline", device="cpu", engine="ct2")


def test_the_runner_writes_through_the_engine_with_checkpoint_resume_audit_and_cancel(
    tiny_model: Path, tmp_path: Path,
) -> None:
    backend = make_backend("local", model_path=tiny_model, device="cpu")
    seqs = make_sequences(5)
    steps: list[Any] = []
    settings = GenerationSettings(max_tokens=6, batch_size=2, retries=0, temperature=0.0)
    s = run_generation(seqs, backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                       run_dir=tmp_path / "run", settings=settings, progress=steps.append)
    docs, failures = read_documents(tmp_path / "run"), read_failures(tmp_path / "run")
    assert {d["id"] for d in docs} | {f["id"] for f in failures} == {q["id"] for q in seqs}
    assert (s.written, s.failed) == (len(docs), len(failures))
    assert backend.engine is not None and backend.engine.tokens_generated > 0  # the engine wrote them
    assert backend._model is None  # the torch weights were never loaded for writing
    audit = [json.loads(x) for x in (tmp_path / "run" / "audit_log.jsonl").read_text().splitlines()]
    assert audit and all(a["backend_info"]["engine"]["engine"] == "ct2" for a in audit)
    # every item ended as a document or a failure (the tiny random model's greedy reply may fail the screen)
    assert steps and (steps[-1].done, steps[-1].failed) == (s.written, s.failed)
    assert steps[-1].done + steps[-1].failed == len(seqs)

    before = backend.engine.tokens_generated
    again = run_generation(seqs, backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                           run_dir=tmp_path / "run", settings=settings)
    # Resume: a second run over the same folder writes no finished item again; only failed items are retried.
    assert again.written + again.failed == s.failed
    assert backend.engine.tokens_generated - before <= s.failed * settings.max_tokens

    # Cancel before anything is written: the run stops and says so.
    cancel = threading.Event()
    cancel.set()
    c = run_generation(make_sequences(4), backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                       run_dir=tmp_path / "cancelled", settings=settings, cancel=cancel)
    assert c.cancelled and c.written == 0


def test_the_estimate_comes_from_the_engine_speed(tiny_model: Path) -> None:
    backend = make_backend("local", model_path=tiny_model, device="cpu")
    engine = backend.engine
    assert isinstance(engine, ct2.LazyCT2Engine)
    seqs = make_sequences(4)  # two full batches of 2
    est = estimate_cost(seqs, prompt_config=PromptConfig(doc_type="a note"), backend=backend, max_tokens=40,
                        batch_size=2)
    step = engine.engine().step_seconds(2)  # measured by one calibration batch of public input
    assert step is not None and step > 0
    assert est.seconds == pytest.approx(math.ceil(4 / 2) * (backend.latency_s + 40 * step))
    # After real batches the running measurement is used.
    backend.generate_batch([[{"role": "user", "content": "write about goal"}]] * 2, max_tokens=8, temperature=0.0,
                           timeout=30)
    later = engine.engine().step_seconds(2)
    est2 = estimate_cost(seqs, prompt_config=PromptConfig(doc_type="a note"), backend=backend, max_tokens=40,
                         batch_size=2)
    assert est2.seconds == pytest.approx(2 * (backend.latency_s + 40 * later))


def test_cli_engine_flag(tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seq_file = write_jsonl(tmp_path / "sequences.jsonl", make_sequences(2))
    base = ["generate", "--sequences", str(seq_file), "--backend", "local", "--model-path", str(tiny_model),
            "--device", "cpu", "--doc-type", "a note", "--max-tokens", "4", "--estimate-only"]
    assert cli.main(base + ["--engine", "torch"]) == 0
    assert "engine torch" in capsys.readouterr().err
    assert cli.main(base) == 0
    assert f"engine ct2 {ct2_convert.default_quantization('cpu')}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(base + ["--engine", "vllm"])
    assert info.value.code == 2 and "--engine" in capsys.readouterr().err


def test_prepare_converts_and_loads_the_engine_without_the_torch_weights(tiny_model: Path) -> None:
    """The app's generate step calls ``prepare()``: with CTranslate2 it must not load the torch model too."""
    local = make_backend("local", model_path=tiny_model, device="cpu")
    assert isinstance(local.engine, ct2.LazyCT2Engine)
    local.prepare()
    assert local.engine._engine is not None and local._model is None and local.stop_ids
