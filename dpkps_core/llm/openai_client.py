"""The OpenAI-compatible backend: chat completions through the official ``openai`` client, for OpenAI itself and
any compatible server (vLLM, llama.cpp, Ollama, LM Studio, Azure), several requests in flight
(docs/ARCHITECTURE.md, llm/).

Failures follow the interface's two kinds (:mod:`dpkps_core.llm.backends`): 429, 408/409, 5xx, timeouts,
connection errors and empty or malformed replies are :class:`~dpkps_core.llm.backends.TransientLLMError` (with the
server's Retry-After when it sent one); a refused key, an unknown model or a bad request is an
:class:`~dpkps_core.errors.LLMError`. The client is built with ``max_retries=0``: retries are the runner's job
(:mod:`dpkps_core.llm.retry`). The API key is never written, logged or returned; error texts are redacted.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any

from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm.backends import ChatMessages, LLMBackend, TransientLLMError, public_url, redact

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
PLACEHOLDER_API_KEY = "not-needed"  # for local servers (vLLM, llama.cpp, Ollama, LM Studio) that need no key


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
    """The server's Retry-After header in seconds (≥ 0), or None when absent or not a number."""
    try:
        value = response.headers.get("retry-after") if response is not None else None
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None
