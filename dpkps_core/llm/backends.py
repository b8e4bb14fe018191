"""The interface every LLM backend implements (:class:`LLMBackend`), its two error kinds and the helpers all
backends share (the user cache folder, redaction of secrets, public URLs). The backends themselves live with
their owners: :mod:`dpkps_core.llm.local` (the offline SmolLM2 and any local Hugging Face folder, batched),
:mod:`dpkps_core.llm.openai_client` (any OpenAI-compatible server, concurrent requests);
:func:`dpkps_core.llm.factory.make_backend` builds one by kind (docs/ARCHITECTURE.md, llm/).

A backend turns chat messages into one reply. It raises :class:`TransientLLMError` for failures worth a retry
(429, 5xx, timeouts, connection errors, empty or malformed replies) and :class:`~dpkps_core.errors.LLMError`
for the rest (bad key, unknown model, bad request). Retries are the runner's job (:mod:`dpkps_core.llm.retry`).
No backend ever writes, logs or returns its API key (docs/DESIGN.md §2.5).
"""

from __future__ import annotations

import abc
import math
import os
import re
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from dpkps_core.errors import LLMError

ChatMessages = Sequence[Mapping[str, str]]

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
