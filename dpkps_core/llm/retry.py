"""Retries of retryable LLM failures (docs/ARCHITECTURE.md, llm/): ONE retry delay — full-jitter exponential
backoff, at least the server's Retry-After, at most the cap — shared by the runner's batched and concurrent paths
and by AugPE (:func:`call_with_retries`).

Full jitter: the delay of attempt a is uniform on [0, min(cap, base·2^(a-1))] ("Exponential Backoff And Jitter",
AWS Architecture Blog, 2015), so that many clients failing together do not retry together.
"""

from __future__ import annotations

import random
import threading
from typing import Callable, TypeVar

from dpkps_core.errors import LLMError
from dpkps_core.llm.backends import GenerationCancelled, TransientLLMError

T = TypeVar("T")


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform(0, min(cap, base·2^(attempt-1)))."""
    r = rng or random
    return r.uniform(0.0, min(cap, base * (2 ** max(0, attempt - 1))))


def retry_delay(attempt: int, error: TransientLLMError, *, base: float, cap: float,
                rng: random.Random | None = None) -> float:
    """Seconds to wait after failed ``attempt``: :func:`backoff_delay`, raised to the server's Retry-After when it
    sent one, never above ``cap``."""
    delay = backoff_delay(attempt, base=base, cap=cap, rng=rng)
    if error.retry_after is not None:
        delay = min(cap, max(delay, error.retry_after))
    return delay


class RetriesExhausted(LLMError):
    """Every attempt of :func:`call_with_retries` failed with a retryable error; ``attempts`` were made."""

    def __init__(self, message: str, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


def call_with_retries(
    call: Callable[[], T], *, retries: int, backoff_base: float, backoff_max: float, cancel: threading.Event,
    rng: random.Random | None = None, before_attempt: Callable[[int], None] | None = None,
    on_retry: Callable[[int, TransientLLMError, float], None] | None = None,
) -> T:
    """``call()`` with up to ``retries`` further attempts after a :class:`TransientLLMError` (429, 5xx, timeout,
    empty reply), waiting :func:`retry_delay` between attempts. Any other exception propagates at once; raises
    :class:`GenerationCancelled` when ``cancel`` is set before an attempt or during a wait and
    :class:`RetriesExhausted` when every attempt failed. ``before_attempt(attempt)`` runs before each attempt
    (e.g. the audit log); ``on_retry(attempt, error, delay)`` before each wait."""
    attempts = retries + 1
    last: TransientLLMError | None = None
    for attempt in range(1, attempts + 1):
        if cancel.is_set():
            raise GenerationCancelled("Generation was cancelled.")
        if before_attempt is not None:
            before_attempt(attempt)
        try:
            return call()
        except TransientLLMError as exc:
            last = exc
            if attempt == attempts:
                break
            delay = retry_delay(attempt, exc, base=backoff_base, cap=backoff_max, rng=rng)
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            if cancel.wait(delay):
                raise GenerationCancelled("Generation was cancelled.") from None
    raise RetriesExhausted(str(last) if last is not None else "Failed.", attempts)
