"""Repetition control of the local models' decoding (dpkps_core/llm/repetition.py): the settings are validated,
reach CTranslate2's ``generate_batch`` and transformers' ``generate`` with one meaning (the generated tokens only,
never the prompt), are recorded in the audit log for the local models only, and the CLI's flags set them."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Sequence

import pytest
import torch
from llm_fakes import FakeBackend, build_tiny_model

from dpkps_core.cli.generate import _generation_settings
from dpkps_core.cli.main import build_parser
from dpkps_core.errors import ParameterError
from dpkps_core.llm import PromptConfig, run_generation
from dpkps_core.llm.ct2 import CT2Engine
from dpkps_core.llm.local import LocalModelBackend
from dpkps_core.llm.repetition import (
    DEFAULT_NO_REPEAT_NGRAM,
    DEFAULT_REPETITION_PENALTY,
    MAX_NO_REPEAT_NGRAM,
    MAX_REPETITION_PENALTY,
    check_repetition,
    repetition_kwargs,
)
from dpkps_core.llm.settings import GenerationSettings
from dpkps_core.llm.torch_engine import (
    GeneratedNoRepeatNGram,
    GeneratedRepetitionPenalty,
    TorchEngine,
    repetition_processors,
)

def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


PROMPTS = [[{"role": "user", "content": f"write a short news article about term{i}"}] for i in (1, 2)]


# -- settings ----------------------------------------------------------------------------------------------------

def test_defaults_are_the_measured_ones_everywhere() -> None:
    s = GenerationSettings()
    assert (s.no_repeat_ngram, s.repetition_penalty) == (DEFAULT_NO_REPEAT_NGRAM, DEFAULT_REPETITION_PENALTY)
    from studio.defaults import default_settings

    d = default_settings()
    assert (d["llm_no_repeat_ngram"], d["llm_repetition_penalty"]) == (DEFAULT_NO_REPEAT_NGRAM,
                                                                        DEFAULT_REPETITION_PENALTY)


@pytest.mark.parametrize("ngram, penalty", [(1, 1.0), (-1, 1.0), (MAX_NO_REPEAT_NGRAM + 1, 1.0), (True, 1.0),
                                            (3.0, 1.0), (0, 0.9), (0, MAX_REPETITION_PENALTY + 0.01),
                                            (0, float("nan")), (0, "1.1"), (0, True)])
def test_out_of_bounds_settings_are_refused(ngram: Any, penalty: Any) -> None:
    with pytest.raises(ParameterError, match="no_repeat_ngram|repetition_penalty"):
        GenerationSettings(no_repeat_ngram=ngram, repetition_penalty=penalty)
    with pytest.raises(ParameterError):
        check_repetition(ngram, penalty)


@pytest.mark.parametrize("ngram, penalty", [(0, 1.0), (2, 1.0), (MAX_NO_REPEAT_NGRAM, MAX_REPETITION_PENALTY),
                                            (4, 1.15)])
def test_in_bounds_settings_are_kept(ngram: int, penalty: float) -> None:
    s = GenerationSettings(no_repeat_ngram=ngram, repetition_penalty=penalty)
    assert s.repetition_kwargs() == {"no_repeat_ngram": ngram, "repetition_penalty": penalty}
    on = {"no_repeat_ngram": ngram, "repetition_penalty": penalty} if (ngram, penalty) != (0, 1.0) else {}
    assert s.request_params(repetition=True) == {"max_tokens": 512, "temperature": 0.7, "timeout": 60.0, **on}
    assert "no_repeat_ngram" not in s.request_params()  # a backend that does not apply them: not recorded


def test_off_passes_no_keywords_to_an_engine() -> None:
    assert repetition_kwargs(0, 1.0) == {}
    assert repetition_kwargs(3, 1.0) == {"no_repeat_ngram": 3, "repetition_penalty": 1.0}


# -- CTranslate2 ---------------------------------------------------------------------------------------------------

class RecordingGenerator:
    """Stands in for ``ctranslate2.Generator``: records the keyword arguments of each ``generate_batch``."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def generate_batch(self, tokens: list[list[str]], **kwargs: Any) -> list[Any]:
        self.calls.append(kwargs)
        return [_result([5, 6, 2], kwargs) for _ in tokens]


def _result(ids: list[int], kwargs: dict[str, Any]) -> Any:
    """A CTranslate2 result, or an already finished asynchronous one (the engine submits batches asynchronously)."""
    result = SimpleNamespace(sequences_ids=[ids])
    if kwargs.get("asynchronous"):
        return SimpleNamespace(done=lambda: True, result=lambda: result)
    return result


def _ct2_engine(tmp_path: Path) -> tuple[CT2Engine, RecordingGenerator]:
    engine = CT2Engine(tmp_path, compute_type="int8")
    gen = RecordingGenerator()
    engine._generator, engine._vocab = gen, [f"t{i}" for i in range(10)]  # loaded: load() keeps them
    return engine, gen


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_ct2_receives_the_setting_under_its_own_names(tmp_path: Path, temperature: float) -> None:
    engine, gen = _ct2_engine(tmp_path)
    out = engine.decode_batch([[1, 2], [3]], stops=[2], max_tokens=9, temperature=temperature, top_p=0.9,
                              no_repeat_ngram=4, repetition_penalty=1.2)
    assert out == [[5, 6, 2], [5, 6, 2]]
    (kw,) = gen.calls
    assert kw["no_repeat_ngram_size"] == 4 and kw["repetition_penalty"] == 1.2
    # The prompt is the decoder's prefix, not part of the result: CTranslate2's penalty and n-gram block look at
    # the generated tokens only (the meaning the torch engine reproduces).
    assert kw["include_prompt_in_result"] is False


def test_ct2_default_is_off_and_bad_values_are_refused_before_decoding(tmp_path: Path) -> None:
    engine, gen = _ct2_engine(tmp_path)
    engine.decode_batch([[1]], stops=[2], max_tokens=3, temperature=0.7, top_p=0.9)
    assert gen.calls[-1]["no_repeat_ngram_size"] == 0 and gen.calls[-1]["repetition_penalty"] == 1.0
    with pytest.raises(ParameterError, match="no_repeat_ngram"):
        engine.decode_batch([[1]], stops=[2], max_tokens=3, temperature=0.7, top_p=0.9, no_repeat_ngram=1)
    assert len(gen.calls) == 1


def test_ct2_halves_keep_the_setting(tmp_path: Path) -> None:
    engine, gen = _ct2_engine(tmp_path)
    calls: list[dict[str, Any]] = []

    def generate_batch(tokens: list[list[str]], **kwargs: Any) -> list[Any]:
        calls.append(kwargs)
        if len(tokens) > 1:
            raise RuntimeError("CUDA failed: out of memory")
        return [_result([5], kwargs)]

    gen.generate_batch = generate_batch  # type: ignore[method-assign]
    assert engine.decode_batch([[1], [2]], stops=[], max_tokens=2, temperature=0.7, top_p=0.9,
                               no_repeat_ngram=3, repetition_penalty=1.1) == [[5], [5]]
    assert len(calls) == 3 and all(c["no_repeat_ngram_size"] == 3 and c["repetition_penalty"] == 1.1
                                   for c in calls)


# -- torch: the processors ------------------------------------------------------------------------------------------

def test_no_repeat_ngram_bans_what_the_reply_wrote_never_what_the_prompt_holds() -> None:
    # prompt columns 0..3 hold "7 8 9"; the reply (columns 4..) wrote "1 2 3 1 2": "1 2 3" is banned after "1 2",
    # while the prompt's "7 8" → 9 stays allowed in the second row.
    ids = torch.tensor([[7, 8, 9, 0, 1, 2, 3, 1, 2],
                        [0, 7, 8, 9, 4, 5, 6, 7, 8]])
    scores = torch.zeros(2, 10)
    out = GeneratedNoRepeatNGram(3, start=4)(ids, scores.clone())
    assert out[0, 3] == float("-inf") and torch.isfinite(out[0, [0, 1, 2, 4, 5, 6, 7, 8, 9]]).all()
    assert torch.isfinite(out[1]).all()  # "7 8 9" is in the prompt only
    # shorter replies than one n-gram: nothing banned
    assert torch.isfinite(GeneratedNoRepeatNGram(3, start=7)(ids, torch.zeros(2, 10))).all()


def test_repetition_penalty_is_ctrl_on_generated_tokens_only() -> None:
    ids = torch.tensor([[4, 5, 1, 2, 2]])  # prompt 4 5; reply 1 2 2
    scores = torch.tensor([[0.0, 2.0, -2.0, 3.0, 1.0, 1.0]])
    out = GeneratedRepetitionPenalty(2.0, start=2)(ids, scores.clone())
    assert out.tolist() == [[0.0, 1.0, -4.0, 3.0, 1.0, 1.0]]  # 1: /2, 2: ×2 once (not twice), prompt's 4 5 kept
    assert GeneratedRepetitionPenalty(2.0, start=5)(ids, scores.clone()).tolist() == scores.tolist()


def test_processors_are_built_only_for_what_is_on() -> None:
    assert repetition_processors(10, 0, 1.0) == []
    kinds = [type(p) for p in repetition_processors(10, 3, 1.2)]
    assert kinds == [GeneratedRepetitionPenalty, GeneratedNoRepeatNGram]


class RecordingModel:
    """Stands in for a causal LM: records ``generate``'s keyword arguments and answers token 3 (its stop id)."""

    device = "cpu"

    def __init__(self) -> None:
        self.kwargs: dict[str, Any] = {}

    def generate(self, *, input_ids: Any, attention_mask: Any, **kwargs: Any) -> Any:
        self.kwargs = kwargs
        return torch.cat([input_ids, torch.full((input_ids.shape[0], 1), 3)], dim=1)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_torch_gets_the_processors_at_the_prompts_end(temperature: float) -> None:
    model = RecordingModel()
    engine = TorchEngine(model, pad_id=0, device="cpu", threads=1, model_name="rec")
    out = engine.decode_batch([[5, 6, 7], [8]], stops=[3], max_tokens=4, temperature=temperature, top_p=0.9,
                              no_repeat_ngram=4, repetition_penalty=1.2)
    assert out == [[3], [3]]
    procs = list(model.kwargs["logits_processor"])
    assert [(type(p), p.start) for p in procs] == [(GeneratedRepetitionPenalty, 3), (GeneratedNoRepeatNGram, 3)]
    assert procs[0].penalty == 1.2 and procs[1].n == 4
    # transformers' own options would count the prompt: they are not used
    assert "no_repeat_ngram_size" not in model.kwargs and "repetition_penalty" not in model.kwargs
    TorchEngine(model, pad_id=0, device="cpu", threads=1, model_name="rec").decode_batch(
        [[5]], stops=[3], max_tokens=2, temperature=temperature, top_p=0.9)
    assert "logits_processor" not in model.kwargs  # off: generate is called as before


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("repetition") / "tiny-llama")


def _repeated_ngrams(row: list[int], n: int) -> int:
    grams = [tuple(row[i:i + n]) for i in range(len(row) - n + 1)]
    return len(grams) - len(set(grams))


def test_torch_no_repeat_ngram_holds_on_a_real_generate(tiny_model: Path) -> None:
    b = LocalModelBackend(model_path=tiny_model, device="cpu")
    engine = b.torch_engine()
    tok = b._load_tokenizer()
    from dpkps_core.llm.local import chat_token_ids

    rows = [chat_token_ids(tok, p) for p in PROMPTS]
    plain = engine.decode_batch(rows, stops=[], max_tokens=40, temperature=0.0, top_p=1.0)
    blocked = engine.decode_batch(rows, stops=[], max_tokens=40, temperature=0.0, top_p=1.0, no_repeat_ngram=2)
    assert any(_repeated_ngrams(r, 2) for r in plain)  # a random tiny model loops when greedy
    assert all(_repeated_ngrams(r, 2) == 0 for r in blocked)


# -- the backend and the runner -------------------------------------------------------------------------------------

class KwargsEngine:
    """An engine that records what reaches it (the seam of dpkps_core/llm/local.py)."""

    name = "kwargs"

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def decode_batch(self, rows: list[list[int]], **kw: Any) -> list[list[int]]:
        self.calls.append(kw)
        return [[7, 8] for _ in rows]

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name}


class OldEngine(KwargsEngine):
    """An engine written before repetition control: no such keywords."""

    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int,  # type: ignore[override]
                     temperature: float, top_p: float, seed: int | None = None,
                     cancel: threading.Event | None = None, on_step: Callable[[int, int], None] | None = None,
                     timeout: float | None = None) -> list[list[int]]:
        return [[7, 8] for _ in rows]


def test_the_backend_passes_the_setting_to_its_engine(tiny_model: Path) -> None:
    engine = KwargsEngine()
    b = LocalModelBackend(model_path=tiny_model, device="cpu", engine=engine)
    b.generate_batch(PROMPTS, max_tokens=4, temperature=0.7, timeout=5.0, no_repeat_ngram=3, repetition_penalty=1.1)
    assert engine.calls[-1]["no_repeat_ngram"] == 3 and engine.calls[-1]["repetition_penalty"] == 1.1
    b.generate_batch(PROMPTS, max_tokens=4, temperature=0.7, timeout=5.0)  # the measured defaults
    assert repetition_kwargs(DEFAULT_NO_REPEAT_NGRAM, DEFAULT_REPETITION_PENALTY).items() <= engine.calls[-1].items()
    with pytest.raises(ParameterError):
        b.generate_batch(PROMPTS, max_tokens=4, temperature=0.7, timeout=5.0, repetition_penalty=3.0)
    old = LocalModelBackend(model_path=tiny_model, device="cpu", engine=OldEngine())
    assert len(old.generate_batch(PROMPTS, max_tokens=4, temperature=0.7, timeout=5.0, no_repeat_ngram=0,
                                  repetition_penalty=1.0)) == 2  # off: an older engine still decodes


def _sequences() -> list[dict[str, Any]]:
    return [{"id": f"s{i}", "label": "sport", "keyphrases": [f"term{i}", "goal"]} for i in range(3)]


def test_the_runner_passes_and_records_the_setting_for_a_local_model(tmp_path: Path, tiny_model: Path) -> None:
    engine = KwargsEngine()
    b = LocalModelBackend(model_path=tiny_model, device="cpu", engine=engine)
    settings = GenerationSettings(max_tokens=4, timeout=5.0, retries=0, batch_size=4, no_repeat_ngram=4,
                                  repetition_penalty=1.15)
    summary = run_generation(_sequences(), backend=b, prompt_config=PromptConfig(doc_type="a news article"),
                             run_dir=tmp_path, settings=settings)
    assert summary.written + summary.failed == 3 and engine.calls
    assert all(c["no_repeat_ngram"] == 4 and c["repetition_penalty"] == 1.15 for c in engine.calls)
    audit = [a for a in read_jsonl(tmp_path / "audit_log.jsonl") if "parameters" in a]
    assert audit and all(a["parameters"]["no_repeat_ngram"] == 4 and a["parameters"]["repetition_penalty"] == 1.15
                         for a in audit)


def test_a_remote_backend_gets_no_repetition_keywords_and_none_are_recorded(tmp_path: Path) -> None:
    backend = FakeBackend()  # generate_batch of the base class: no such keywords
    settings = GenerationSettings(max_tokens=4, timeout=5.0, retries=0, no_repeat_ngram=3, repetition_penalty=1.1)
    run_generation(_sequences(), backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                   run_dir=tmp_path, settings=settings)
    audit = [a for a in read_jsonl(tmp_path / "audit_log.jsonl") if "parameters" in a]
    assert audit and all("no_repeat_ngram" not in a["parameters"] for a in audit)


# -- the CLI ----------------------------------------------------------------------------------------------------------

def _args(*extra: str) -> Any:
    return build_parser().parse_args(["generate", "--sequences", "s.jsonl", "--doc-type", "a news article", *extra])


def test_cli_flags_set_the_setting_and_default_to_the_measured_one() -> None:
    s = _generation_settings(_args("--no-repeat-ngram", "3", "--repetition-penalty", "1.1"), local=True)
    assert (s.no_repeat_ngram, s.repetition_penalty) == (3, 1.1)
    s = _generation_settings(_args(), local=True)
    assert (s.no_repeat_ngram, s.repetition_penalty) == (DEFAULT_NO_REPEAT_NGRAM, DEFAULT_REPETITION_PENALTY)
    with pytest.raises(ParameterError, match="no_repeat_ngram"):
        _generation_settings(_args("--no-repeat-ngram", "1"), local=True)


def test_cli_help_documents_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--no-repeat-ngram N" in out and "--repetition-penalty P" in out and "benchmarks/repetition.py" in out


def test_cli_notes_that_a_remote_backend_ignores_them(capsys: pytest.CaptureFixture[str]) -> None:
    _generation_settings(_args("--backend", "openai"), local=False)
    assert "ignores them" not in capsys.readouterr().err  # the defaults: nothing to say
    _generation_settings(_args("--backend", "openai", "--repetition-penalty", "1.3"), local=False)
    assert "ignores them" in capsys.readouterr().err
