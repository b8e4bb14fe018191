"""The before-the-run estimate of a generation (docs/ARCHITECTURE.md, llm/): prompt and completion tokens, an
optional price and the time from the backend's speed assumptions. Prompts are rendered from the DP keyphrase
sequences and the public prompt settings only (post-processing, DESIGN §2.5).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend
from dpkps_core.llm.prompts import PromptConfig, render_prompt
from dpkps_core.sequences import KeyphraseSequence


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """Before-the-run estimate.

    ``completion_tokens`` is the upper bound ``prompts × max_tokens``; ``cost`` is None without a price.
    """

    prompts: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    price_per_1k: float | None
    cost: float | None
    seconds: float
    token_method: str

    def summary(self) -> str:
        """One line for the CLI/app."""
        cost = f", about {self.cost:.4f} at {self.price_per_1k:g} per 1k tokens" if self.cost is not None else ""
        return (
            f"{self.prompts} prompts, ~{self.prompt_tokens} prompt + ≤{self.completion_tokens} completion tokens "
            f"({self.token_method}){cost}, about {_fmt_seconds(self.seconds)}"
        )


def _fmt_seconds(s: float) -> str:
    """Seconds as a short duration (s, min or h)."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def _engine_batch_rate(backend: LLMBackend, batch: int) -> float | None:
    """Tokens/s of a whole batch of ``batch`` rows as the backend's inference engine measured it (e.g.
    :meth:`dpkps_core.llm.ct2.CT2Engine.batch_tokens_per_second`, from its batches or one calibration batch of
    public text), or None when the backend has no such engine."""
    rate = getattr(getattr(backend, "engine", None), "batch_tokens_per_second", None)
    if not callable(rate):
        return None
    value = float(rate(batch))
    return value if math.isfinite(value) and value > 0 else None


def estimate_cost(
    sequences: Sequence[KeyphraseSequence | Mapping[str, Any]],
    *,
    prompt_config: PromptConfig,
    backend: LLMBackend,
    max_tokens: int,
    concurrency: int = 1,
    price_per_1k: float | None = None,
    batch_size: int = 1,
) -> CostEstimate:
    """Prompt count × tokens, optional price per 1k tokens, and time from the backend's rate assumption.

    Prompt tokens come from ``backend.count_prompt_tokens`` (the tokenizer offline, ~4 chars/token remote). For a
    batched backend, ``batch_size`` prompts share one call whose decoding steps cost ``backend.batch_cost(b)``; a
    local backend with an inference engine that measures its speed (CTranslate2) uses that measurement instead.
    """
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ParameterError("max_tokens must be a positive integer.")
    if price_per_1k is not None and not (math.isfinite(price_per_1k) and price_per_1k >= 0):
        raise ParameterError("The price per 1k tokens must be a number ≥ 0.")
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ParameterError("Concurrency must be a positive integer.")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ParameterError("The batch size must be a positive integer.")
    prompt_tokens = sum(backend.count_prompt_tokens(render_prompt(s, prompt_config)) for s in sequences)
    n = len(sequences)
    completion = n * max_tokens
    total = prompt_tokens + completion
    cost = None if price_per_1k is None else total / 1000.0 * price_per_1k
    batch = max(1, min(batch_size, backend.max_batch_size))
    measured = _engine_batch_rate(backend, min(batch, n)) if n else None
    if measured:  # an inference engine's measured speed (tokens/s of a whole batch), every row at max_tokens
        per_batch = backend.latency_s + min(batch, n) * max_tokens / measured
        seconds = math.ceil(n / batch) * per_batch
    elif batch > 1:
        per_batch = backend.latency_s + max_tokens / backend.tokens_per_s * float(backend.batch_cost(batch))
        seconds = math.ceil(n / batch) * per_batch if n else 0.0
    else:
        parallel = max(1, min(concurrency, backend.max_concurrency))
        per_request = backend.latency_s + max_tokens / backend.tokens_per_s
        seconds = math.ceil(n / parallel) * per_request if n else 0.0
    method = "tokenizer" if type(backend).count_prompt_tokens is not LLMBackend.count_prompt_tokens else "~4 chars/token"
    return CostEstimate(
        prompts=n, prompt_tokens=prompt_tokens, completion_tokens=completion, total_tokens=total,
        price_per_1k=price_per_1k, cost=cost, seconds=float(seconds), token_method=method,
    )
