"""The local backends' decoding seam (dpkps_core/llm/local.py docstring): ``decode_batch`` is the one method an
injected engine or a subclass replaces; tokenising, stop ids, text decoding and token counts stay with the backend.
A tiny Llama saved by the tests stands in for a real model (nothing downloaded)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
from llm_fakes import build_tiny_model

from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import TransientLLMError
from dpkps_core.llm.local import LocalModelBackend, chat_token_ids
from dpkps_core.llm.torch_engine import TorchEngine

PROMPTS = [[{"role": "user", "content": f"write a short news article about term{i}" + " goal" * i}] for i in (1, 2, 3)]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("seam") / "tiny-llama")


class RecordingEngine:
    """An engine that answers fixed ids and records every call (the contract of DecodeEngine)."""

    name = "recording"

    def __init__(self, replies: list[list[int]]) -> None:
        self.replies = replies
        self.calls: list[dict[str, Any]] = []

    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                     top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                     on_step: Callable[[int, int], None] | None = None,
                     timeout: float | None = None, no_repeat_ngram: int = 0,
                     repetition_penalty: float = 1.0) -> list[list[int]]:
        self.calls.append(dict(rows=rows, stops=list(stops), max_tokens=max_tokens, temperature=temperature,
                               top_p=top_p, timeout=timeout, cancel=cancel, no_repeat_ngram=no_repeat_ngram,
                               repetition_penalty=repetition_penalty))
        return [list(r) for r in self.replies[: len(rows)]]

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name}


def test_an_injected_engine_decodes_and_the_torch_weights_stay_unloaded(tiny_model: Path) -> None:
    torch_backend = LocalModelBackend(model_path=tiny_model, device="cpu")
    tok = torch_backend._load_tokenizer()
    stop = tok.convert_tokens_to_ids("<|im_end|>")
    words = tok.convert_tokens_to_ids(["the", "match", "goal", "market", "bank"])
    engine = RecordingEngine([words + [stop], [stop], words[:2]])
    b = LocalModelBackend(model_path=tiny_model, device="cpu", top_p=0.8, engine=engine)
    out = b.generate_batch(PROMPTS, max_tokens=7, temperature=0.6, timeout=3.0)

    (call,) = engine.calls
    assert call["rows"] == [chat_token_ids(tok, p) for p in PROMPTS]
    assert call["max_tokens"] == 7 and call["temperature"] == 0.6 and call["top_p"] == 0.8 and call["timeout"] == 3.0
    assert stop in call["stops"] and set(call["stops"]) == set(torch_backend.stop_ids)  # same ids, no weights
    assert out[0] == "the match goal market bank" and out[2] == "the match"
    assert isinstance(out[1], TransientLLMError)  # only the stop id: an empty reply
    assert b.last_tokens == 6 + 1 + 2  # up to and including each stop id
    assert b._model is None  # the engine wrote everything: torch never loaded the weights
    assert b.describe()["engine"] == {"engine": "recording"} and "engine" not in torch_backend.describe()


def test_the_default_torch_path_honours_the_contract(tiny_model: Path) -> None:
    b = LocalModelBackend(model_path=tiny_model, device="cpu")
    tok = b._load_tokenizer()
    rows = [chat_token_ids(tok, p) for p in PROMPTS]
    stops = sorted(b.stop_ids)
    ids = b.decode_batch(rows, stops=stops, max_tokens=5, temperature=0.0, top_p=1.0)
    assert len(ids) == 3 and all(1 <= len(r) <= 5 for r in ids)
    # Up to and including the first stop id: nothing (no padding) after it.
    assert all(t not in stops for r in ids for t in r[:-1])
    texts = b.generate_batch(PROMPTS, max_tokens=5, temperature=0.0, timeout=30.0)
    for r, text in zip(ids, texts):
        cut = r[:-1] if r[-1] in stops else r
        assert text == tok.decode(cut, skip_special_tokens=True).strip() or isinstance(text, TransientLLMError)
    assert isinstance(b.torch_engine(), TorchEngine) and b.torch_engine() is b.torch_engine()


def test_a_subclass_can_replace_decode_batch(tiny_model: Path) -> None:
    class Echo(LocalModelBackend):
        """Answers each prompt with its own ids after the word "about" (a decoding that needs no model)."""

        def decode_batch(self, rows, **kw):  # type: ignore[override]
            about = self._load_tokenizer().convert_tokens_to_ids("term1")
            return [r[r.index(about):r.index(about) + 3] if about in r else [] for r in rows]

    b = Echo(model_path=tiny_model, device="cpu")
    out = b.generate_batch(PROMPTS, max_tokens=3, temperature=0.0, timeout=5.0)
    assert out[0] == "term1 goal" and isinstance(out[1], TransientLLMError)


def test_an_engine_without_decode_batch_is_refused(tiny_model: Path) -> None:
    with pytest.raises(ParameterError, match="decode_batch"):
        LocalModelBackend(model_path=tiny_model, device="cpu", engine=object())  # type: ignore[arg-type]


def test_prepare_loads_the_engine_and_tokenizer_but_not_the_torch_weights(tiny_model: Path) -> None:
    """What the app's generate step and warm-up call before the first batch (studio/generation_steps.py)."""

    class LoadingEngine(RecordingEngine):
        loads = 0

        def load(self) -> None:
            self.loads += 1

    engine = LoadingEngine([])
    b = LocalModelBackend(model_path=tiny_model, device="cpu", engine=engine)
    b.prepare()
    assert engine.loads == 1 and b._tokenizer is not None and b.stop_ids and b._model is None
    torch_backend = LocalModelBackend(model_path=tiny_model, device="cpu")
    torch_backend.prepare()  # no engine: the torch weights are what decodes
    assert torch_backend._model is not None
