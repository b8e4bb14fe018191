"""LLM backends behind one interface: offline SmolLM2 (default), any local Hugging Face model folder, and any
OpenAI-compatible server; ``make_backend`` builds one by kind.

This module holds the interface (:class:`LLMBackend`, the two error kinds) and the OpenAI-compatible backend; the
two local backends (``offline``, ``local``) live in :mod:`dpkps_core.llm.local` and generate a whole batch of
prompts in one ``generate`` call on the configured device; remote backends take one request per call, several in
flight.

A backend turns chat messages into one reply. It raises :class:`TransientLLMError` for failures worth a retry
(429, 5xx, timeouts, connection errors, empty or malformed replies) and :class:`~dpkps_core.errors.LLMError`
for the rest (bad key, unknown model, bad request). Retries are the runner's job: the OpenAI client is built
with ``max_retries=0``. No backend ever writes, logs or returns its API key.
"""

from __future__ import annotations

import abc
import logging
import math
import os
import re
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from dpkps_core.errors import LLMError, ParameterError

log = logging.getLogger(__name__)

ChatMessages = Sequence[Mapping[str, str]]

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


# The local (transformers) backends live in dpkps_core.llm.local; their names stay importable from here.
from dpkps_core.llm.local import (  # noqa: E402,F401 - after the base classes local.py builds on
    DEFAULT_BATCH_SIZE,
    MAX_BATCH_SIZE,
    LocalModelBackend,
    LocalTransformersBackend,
    OfflineBackend,
    chat_token_ids,
    ensure_offline_model,
    offline_gguf_path,
    offline_model_dir,
    stop_token_ids,
)
