"""Test helpers for the LLM step: a scripted in-process backend, a fault-injecting chat-completions server
(pytest-httpserver bound to 127.0.0.1 only) and a fake run folder."""

from __future__ import annotations

import collections
import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import pytest

from dpkps_core.errors import LLMError
from dpkps_core.llm.backends import LLMBackend, TransientLLMError

TERM_RE = re.compile(r"\bterm(\d+)\b")


def make_sequences(n: int, *, labels: Sequence[str] = ("sport", "business")) -> list[dict[str, Any]]:
    """n sequences; sequence i carries the unique keyphrase ``term{i}``."""
    return [
        {"id": f"seq-{i:06d}", "label": labels[i % len(labels)], "keyphrases": [f"term{i}", "goal", "market"],
         "method": "independent"}
        for i in range(1, n + 1)
    ]


def write_jsonl(path: Path, objs: Sequence[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def make_run_dir(
    root: Path, n: int = 6, *, seed_policy: str = "os-entropy", canary: str | None = None
) -> Path:
    """A run folder as the sampling step writes it (+ private files holding ``canary`` when given)."""
    run = root / "run"
    run.mkdir(parents=True, exist_ok=True)
    write_jsonl(run / "sequences.jsonl", make_sequences(n))
    report = {
        "epsilon_total": 6.0, "epsilon_vocabulary": 1.0, "epsilon_kde": 5.0, "epsilon_cap": 10.0,
        "events": [
            {"mechanism": "laplace_vocabulary_histogram", "step": "vocabulary", "epsilon": 1.0, "delta": 0.0,
             "sensitivity": 10, "noise_scale": 10.0, "released": "noisy counts of 400,000 public terms",
             "neighbouring": "add/remove one document", "params": {}},
            {"mechanism": "smoothed_dp_histogram", "step": "kde", "epsilon": 5.0, "delta": 0.0,
             "sensitivity": 1, "noise_scale": 0.2, "released": "per-class keyphrase densities over Ṽ",
             "neighbouring": "add/remove one document", "params": {}},
        ],
        "seed_policy": seed_policy,
        "mechanisms": ["Laplace noisy histogram (vocabulary)", "smoothed DP histogram (densities)"],
        "parameters": {"S": 10, "N": 1000, "L": 5, "sigma": 0.3},
        "vocabulary": "GloVe 6B 400k",
        "embedding_model": "all-MiniLM-L6-v2",
    }
    (run / "privacy_report.json").write_text(json.dumps(report), encoding="utf-8")
    (run / "private_vocabulary.json").write_text(
        json.dumps({"vocabulary": "GloVe 6B 400k", "terms": ["goal", "market"], "noisy_counts": [12.5, 9.1]}),
        encoding="utf-8",
    )
    config = {"epsilon_vocabulary": 1.0, "epsilon_kde": 5.0, "method": "independent", "seed_policy": seed_policy}
    if canary is not None:
        corpus = root / "private_corpus.csv"
        corpus.write_text(
            "text,label\n" + "".join(f'"{canary} private note {i}",sport\n' for i in range(5)), encoding="utf-8"
        )
        config["corpus_path"] = str(corpus)
        (run / "split.json").write_text(json.dumps({"test": [1, 2], "note": canary}), encoding="utf-8")
        (run / "evaluation.json").write_text(json.dumps({"accuracy": 0.9, "example": canary}), encoding="utf-8")
    (run / "run_config.json").write_text(json.dumps(config), encoding="utf-8")
    return run


def term_index(messages: Sequence[Mapping[str, str]]) -> int:
    """The i of ``term{i}`` in the user message."""
    m = TERM_RE.search(messages[-1]["content"])
    assert m, "prompt has no term marker"
    return int(m.group(1))


class FakeBackend(LLMBackend):
    """Scripted in-process backend: ``script[i]`` lists outcomes per attempt for item i ("ok", "transient",
    "fatal", "slow"); records calls and the most requests seen in flight."""

    name = "fake"
    model = "fake-model"

    def __init__(self, script: Mapping[int, Sequence[str]] | None = None, *, delay: float = 0.0,
                 max_concurrency: int = 4, on_call: Callable[[int], None] | None = None) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.delay = delay
        self.max_concurrency = max_concurrency
        self.on_call = on_call
        self.calls: list[int] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[override]
        i = term_index(messages)
        with self._lock:
            self.calls.append(i)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            steps = self.script.get(i, [])
            outcome = steps.pop(0) if steps else "ok"
        try:
            if self.on_call:
                self.on_call(i)
            if self.delay:
                time.sleep(self.delay)
            if outcome == "transient":
                raise TransientLLMError("server error (fake)")
            if outcome == "fatal":
                raise LLMError("bad request (fake)")
            return f"Document number {i} mentions term{i}."
        finally:
            with self._lock:
                self.in_flight -= 1


# --------------------------------------------------------------------------------------------------------------
# A real HTTP server speaking the chat-completions protocol


def completion_json(text: str | None, model: str = "test-model") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class ChatServer:
    """Fault-injecting chat-completions handler; ``faults[i]`` lists what attempt 1, 2, … of item i get:
    "ok", "429", "500", "503", "slow" (sleeps ``slow_s``), "malformed" (bad JSON), "html", "empty",
    "nochoices", "401" (echoes the bearer token in the body, like some servers do), "ready" (a non-document
    reply), "preamble" (the document after a preamble line)."""

    def __init__(self, faults: Mapping[int, Sequence[str]] | None = None, *, delay: float = 0.0,
                 slow_s: float = 1.0) -> None:
        self.faults = {k: list(v) for k, v in (faults or {}).items()}
        self.delay = delay
        self.slow_s = slow_s
        self.bodies: list[str] = []
        self.auth_headers: list[str] = []
        self.attempts: collections.Counter[int] = collections.Counter()
        self._lock = threading.Lock()

    def handler(self, request: Any) -> Any:
        from werkzeug import Response

        raw = request.get_data(as_text=True)
        body = json.loads(raw)
        i = term_index(body["messages"])
        with self._lock:
            self.bodies.append(raw)
            self.auth_headers.append(request.headers.get("Authorization", ""))
            self.attempts[i] += 1
            steps = self.faults.get(i, [])
            fault = steps.pop(0) if steps else "ok"
        if self.delay:
            time.sleep(self.delay)
        js = "application/json"
        if fault == "429":
            return Response(json.dumps({"error": {"message": "rate limited"}}), status=429, content_type=js,
                            headers={"Retry-After": "0"})
        if fault in ("500", "503"):
            return Response(json.dumps({"error": {"message": "boom"}}), status=int(fault), content_type=js)
        if fault == "401":
            token = request.headers.get("Authorization", "")
            return Response(json.dumps({"error": {"message": f"Incorrect API key provided: {token}"}}),
                            status=401, content_type=js)
        if fault == "slow":
            time.sleep(self.slow_s)
        if fault == "malformed":
            return Response('{"choices": [ {"message": ', status=200, content_type=js)
        if fault == "html":
            return Response("<html>gateway</html>", status=200, content_type="text/html")
        if fault == "nochoices":
            return Response(json.dumps({"id": "x", "choices": []}), status=200, content_type=js)
        if fault == "ready":  # a non-document reply (issue 14 §5)
            text = "I'm ready to help. Please share your article"
        elif fault == "preamble":
            text = f"Here's a short news article:\n\nSynthetic document {i} about term{i}."
        else:
            text = "" if fault == "empty" else f"Synthetic document {i} about term{i}."
        return Response(json.dumps(completion_json(text, body.get("model", "m"))), status=200, content_type=js)


@pytest.fixture
def chat_server() -> Iterator[Any]:
    """A threaded pytest-httpserver on 127.0.0.1 (never another interface)."""
    from pytest_httpserver import HTTPServer

    server = HTTPServer(host="127.0.0.1", port=0, threaded=True)
    server.start()
    try:
        yield server
    finally:
        server.clear()
        if server.is_running():
            server.stop()


def serve(server: Any, script: ChatServer) -> str:
    """Route the chat-completions endpoint to ``script``; return the base URL."""
    server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(script.handler)
    return server.url_for("/v1")


class FakeBatchBackend(LLMBackend):
    """Scripted batched backend (like the local models): ``generate_batch`` takes up to ``max_batch_size``
    prompts per call; ``script[i]`` lists per-attempt outcomes of item i ("ok", "transient", "fatal", "empty");
    ``delay`` seconds per call; ``on_batch(indices)`` runs at the start of each call (e.g. to cancel)."""

    name = "fakebatch"
    model = "fake-batch-model"
    max_concurrency = 1

    def __init__(self, script: Mapping[int, Sequence[str]] | None = None, *, max_batch_size: int = 64,
                 delay: float = 0.0, on_batch: Callable[[list[int]], None] | None = None,
                 honour_cancel: bool = True) -> None:
        self.script = {k: list(v) for k, v in (script or {}).items()}
        self.max_batch_size = max_batch_size
        self.delay = delay
        self.on_batch = on_batch
        self.honour_cancel = honour_cancel
        self.batches: list[list[int]] = []

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[override]
        raise AssertionError("a batched backend must be driven through generate_batch")

    def generate_batch(self, batch, *, max_tokens, temperature, timeout, cancel=None,  # type: ignore[override]
                       on_step=None):
        from dpkps_core.llm.backends import GenerationCancelled

        idx = [term_index(m) for m in batch]
        self.batches.append(idx)
        if self.on_batch:
            self.on_batch(idx)
        if self.delay:
            for step in range(1, 5):  # four decoding "steps"
                time.sleep(self.delay / 4)
                if on_step is not None:
                    on_step(step, 4)
        if self.honour_cancel and cancel is not None and cancel.is_set():
            raise GenerationCancelled("Generation was cancelled.")
        out: list[Any] = []
        for i in idx:
            steps = self.script.get(i, [])
            outcome = steps.pop(0) if steps else "ok"
            if outcome == "transient":
                out.append(TransientLLMError("server error (fake)"))
            elif outcome == "fatal":
                out.append(LLMError("bad request (fake)"))
            elif outcome == "empty":
                out.append("  ")
            else:
                out.append(f"Document number {i} mentions term{i}.")
        return out


# --------------------------------------------------------------------------------------------------------------
# A tiny local Hugging Face model folder, built and saved by the tests (no download)

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }} {{ m['content'] }}<|im_end|> {% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant {% endif %}")
WORDS = ("write a short news article that uses these keyphrases in order the match goal market bank sport "
         "business term document football season shares profits , . : - and of to in is was").split()


def build_tiny_model(folder: Path, *, chat_template: bool = True) -> Path:
    """Save a random 2-layer Llama (hidden 32) and a word-level tokenizer into ``folder``."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    specials = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]
    vocab = {t: i for i, t in enumerate(specials + WORDS + [f"term{i}" for i in range(100)])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    core.add_special_tokens(specials)
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>")
    if chat_template:
        tok.chat_template = CHATML
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      pad_token_id=vocab["<pad>"], eos_token_id=vocab["<|im_end|>"], bos_token_id=None)
    model = LlamaForCausalLM(cfg)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


# --------------------------------------------------------------------------------------------------------------
# Charge-first tests (docs/DESIGN.md §2.0): a remote-style backend that records what it was sent and crashes mid-run


class SimulatedCrash(BaseException):
    """A crash the run cannot catch as an ordinary error (like the process dying mid-run): a BaseException, so no
    ``except Exception`` in a retry loop swallows it."""


class CrashingRemoteBackend(LLMBackend):
    """A remote-style backend (``generate`` only, concurrent calls, like an API) that records every prompt it is
    sent together with ``probe()`` at that moment (e.g. the ledger's ε spent so far), and raises ``crash`` (an
    exception class or instance; ``SimulatedCrash`` or ``KeyboardInterrupt``) on call number ``crash_at``
    (1-based). Replies are short synthetic texts; prompts are never echoed back."""

    name = "crashing-remote"
    model = "crashing-remote-model"

    def __init__(self, *, probe: Callable[[], Any] = lambda: None, crash_at: int | None = None,
                 crash: type[BaseException] | BaseException = SimulatedCrash, max_concurrency: int = 1) -> None:
        self.probe = probe
        self.crash_at = crash_at
        self.crash = crash
        self.max_concurrency = max_concurrency
        self.sent: list[tuple[list[dict[str, str]], Any]] = []  # (messages, probe() when the prompt arrived)
        self._lock = threading.Lock()

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[override]
        with self._lock:
            self.sent.append(([dict(m) for m in messages], self.probe()))
            n = len(self.sent)
        if self.crash_at is not None and n >= self.crash_at:
            raise self.crash if isinstance(self.crash, BaseException) else self.crash("simulated crash mid-run")
        return f"synthetic draft {n} about weather, rivers and travel"
