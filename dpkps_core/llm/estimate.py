"""The before-the-run estimate of a generation (docs/ARCHITECTURE.md, llm/): prompt and completion tokens, an
optional price and the time, retries included, from the selected engine's measured speed.

Prompts are rendered from the DP keyphrase sequences and the public prompt settings only (post-processing,
docs/DESIGN.md §2.5). The time follows :mod:`dpkps_core.llm.speed`: the expected attempts per document from the measured
share of replies the non-document screen refuses and the retry cap, and the measured seconds of a batch. Both are
measured on this backend — by earlier runs at the same settings, else by ONE calibration batch: the prompts of the
job's first sequences (DP outputs and public settings: the very prompts the run sends first, post-processing),
written by a LOCAL backend's own engine in this process, screened and thrown away; only counts and a time are
kept. Never private text; never a remote backend (a calibration there would cost money and leave the machine).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Mapping, Sequence

from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend, TransientLLMError
from dpkps_core.llm.prompts import PromptConfig, as_sequence, render_prompt
from dpkps_core.llm.quality import screen
from dpkps_core.llm.speed import (MIN_REPLIES, BatchTimes, Measured, engine_tokens_per_second, expected_attempts,
                                  measured)
from dpkps_core.method.sequences import KeyphraseSequence
from dpkps_core.progress import format_duration

@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """Before-the-run estimate.

    ``completion_tokens`` is the upper bound ``attempts × max_tokens`` with the expected attempts (retries
    included); ``cost`` is None without a price. ``attempts_per_document`` is the expected attempts of one document
    at ``rejection_rate`` (the share of replies the screen refuses, measured as ``rejection_source`` says) and at
    most ``retries`` retries; ``measure_seconds`` the time spent measuring (a calibration batch) for this estimate.
    """

    prompts: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    price_per_1k: float | None
    cost: float | None
    seconds: float
    token_method: str
    attempts_per_document: float = 1.0
    rejection_rate: float | None = None
    rejection_source: str = ""
    retries: int = 0
    measure_seconds: float = 0.0

    def summary(self) -> str:
        """One line for the CLI/app, stating the retry assumption."""
        cost = f", about {self.cost:.4f} at {self.price_per_1k:g} per 1k tokens" if self.cost is not None else ""
        line = (f"{self.prompts} prompts, ~{self.prompt_tokens} prompt + ≤{self.completion_tokens} completion tokens "
                f"({self.token_method}){cost}, about {format_duration(self.seconds)}")
        if self.retries <= 0:
            return line + " (no retries)"
        if self.rejection_rate is None:
            return line + (f"; retries not included: no measured share of refused replies ({self.rejection_source}), "
                           "so every reply is assumed to pass the screen")
        return line + (f"; retries included: {self.rejection_rate:.0%} of replies refused by the non-document screen "
                       f"(measured on {self.rejection_source}; attempts taken as independent), up to {self.retries} "
                       f"retries → {self.attempts_per_document:.2f} attempts per document on average")


def _engine_batch_rate(backend: LLMBackend, batch: int) -> float | None:
    """Tokens/s of a whole batch of ``batch`` rows as the backend's inference engine measured it (e.g.
    :meth:`dpkps_core.llm.ct2.CT2Engine.batch_tokens_per_second`, from its batches or one calibration batch of
    public text), or None when the backend has no such engine."""
    rate = getattr(getattr(backend, "engine", None), "batch_tokens_per_second", None)
    if not callable(rate):
        return None
    value = engine_tokens_per_second(backend, batch)  # never waits for a model other runs are using
    return value if math.isfinite(value) and value > 0 else None


def calibrate_screen(backend: LLMBackend, *, prompt_config: PromptConfig, sequences: Sequence[KeyphraseSequence],
                     rows: int, max_tokens: int, temperature: float, timeout: float = 120.0,
                     repetition: Mapping[str, Any] | None = None) -> Measured:
    """Write ONE batch of ``rows`` replies to the prompts of the first ``rows`` sequences (in turn when there are
    fewer) through the backend (its selected engine, the run's settings), judge each with
    :func:`~dpkps_core.llm.quality.screen` and record the replies and the batch's seconds in the backend's
    :class:`~dpkps_core.llm.speed.Measured`. The sequences are DP outputs and the settings public (post-processing,
    docs/DESIGN.md §2.5): the replies are thrown away, only counts and a time are kept, nothing private is read."""
    if not sequences:
        raise ParameterError("A calibration needs at least one sequence.")
    messages = [render_prompt(sequences[i % len(sequences)], prompt_config) for i in range(max(1, int(rows)))]
    t0 = time.monotonic()
    results = backend.generate_batch(messages, max_tokens=max_tokens, temperature=temperature, timeout=timeout,
                                     **dict(repetition or {}))
    seconds = time.monotonic() - t0
    record = measured(backend, max_tokens, temperature, repetition)
    for result in results:
        try:
            accepted = isinstance(result, str) and bool(screen(result))
        except TransientLLMError:
            accepted = False
        record.add_reply(accepted, calibration=True)
    record.add_batch(len(messages), seconds)
    return record


def _rejection(backend: LLMBackend, record: Measured, *, given: float | None, retries: int, calibrate: bool,
               run_calibration: Any) -> tuple[float | None, str, float]:
    """The rejection rate, its source in words and the seconds spent measuring it."""
    if given is not None:
        if not (isinstance(given, (int, float)) and 0 <= given < 1):
            raise ParameterError("The rejection rate must be a number in [0, 1).")
        return float(given), "a rate given by the caller", 0.0
    spent = 0.0
    if (retries > 0 and calibrate and record.replies < MIN_REPLIES and not record.calibration_replies
            and not record.active_runs and int(getattr(backend, "max_batch_size", 1)) > 1):
        # once per backend and settings, local models only (a calibration batch costs no money), never while a run
        # writes on the engine (its own replies are measured then)
        t0 = time.monotonic()
        run_calibration()
        spent = time.monotonic() - t0
    rate = record.rejection()
    if rate is None:
        return None, "none measured for this backend yet", spent
    return rate, record.source(), spent


def estimate_cost(
    sequences: Sequence[KeyphraseSequence | Mapping[str, Any]],
    *,
    prompt_config: PromptConfig,
    backend: LLMBackend,
    max_tokens: int,
    concurrency: int = 1,
    price_per_1k: float | None = None,
    batch_size: int = 1,
    retries: int = 0,
    temperature: float = 0.7,
    drafts: int = 1,
    rejection_rate: float | None = None,
    calibrate: bool = True,
    timeout: float = 120.0,
    repetition: Mapping[str, Any] | None = None,
) -> CostEstimate:
    """Prompt count × tokens, optional price per 1k tokens, and the time, retries included (:mod:`~dpkps_core.llm.speed`).

    Prompt tokens come from ``backend.count_prompt_tokens`` (the tokenizer offline, ~4 chars/token remote). With
    ``retries`` > 0 each document takes the expected attempts at the measured rejection rate (``rejection_rate``
    overrides it; ``calibrate=False`` never runs a calibration batch). ``drafts`` = K: the sequences hold each
    sequence K times (K prompts per attempt; an attempt is refused when all K drafts are). A batched backend
    (``batch_size`` > 1) takes its seconds per batch from, in turn: batches measured at these settings (earlier runs
    or the calibration batch), its inference engine's measured tokens/s (CTranslate2), or ``backend.batch_cost``.
    ``repetition``: the run's repetition control (``GenerationSettings.repetition_kwargs()``), measured apart from the
    other settings on a backend that applies it (the local models), ignored by the others as the runner does.
    """
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ParameterError("max_tokens must be a positive integer.")
    if price_per_1k is not None and not (math.isfinite(price_per_1k) and price_per_1k >= 0):
        raise ParameterError("The price per 1k tokens must be a number ≥ 0.")
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ParameterError("Concurrency must be a positive integer.")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise ParameterError("The batch size must be a positive integer.")
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ParameterError("retries must be a non-negative integer.")
    if not isinstance(drafts, int) or isinstance(drafts, bool) or drafts < 1:
        raise ParameterError("drafts must be a positive integer.")
    seqs = [as_sequence(s) for s in sequences]
    n = len(seqs)
    batch = max(1, min(batch_size, backend.max_batch_size))  # the run's batch; fewer rows make one partial batch
    rep = dict(repetition or {}) if getattr(backend, "repetition_control", False) else {}
    record = measured(backend, max_tokens, temperature, rep)
    rate, source, spent = _rejection(
        backend, record, given=rejection_rate, retries=retries, calibrate=calibrate and n > 0,
        run_calibration=lambda: calibrate_screen(backend, prompt_config=prompt_config, sequences=seqs,
                                                 rows=min(batch, n), max_tokens=max_tokens, temperature=temperature,
                                                 timeout=timeout, repetition=rep))
    per_attempt = (rate or 0.0) ** drafts  # an attempt is refused when all of its drafts are
    attempts = expected_attempts(per_attempt, retries)
    prompt_tokens = round(attempts * sum(backend.count_prompt_tokens(render_prompt(s, prompt_config)) for s in seqs))
    completion = math.ceil(n * attempts - 1e-9) * max_tokens
    total = prompt_tokens + completion
    cost = None if price_per_1k is None else total / 1000.0 * price_per_1k
    if n == 0:
        seconds = 0.0
    elif batch > 1 or int(getattr(backend, "max_batch_size", 1)) > 1:  # the runner batches for such backends
        seconds = _batch_times(backend, record, batch, max_tokens).run_seconds(
            [float(n)] + [0.0] * retries, per_attempt)
    else:
        parallel = max(1, min(concurrency, backend.max_concurrency))
        seconds = math.ceil(n * attempts / parallel - 1e-9) * (backend.latency_s + max_tokens / backend.tokens_per_s)
    method = "tokenizer" if type(backend).count_prompt_tokens is not LLMBackend.count_prompt_tokens else "~4 chars/token"
    return CostEstimate(
        prompts=n, prompt_tokens=prompt_tokens, completion_tokens=completion, total_tokens=total,
        price_per_1k=price_per_1k, cost=cost, seconds=float(seconds), token_method=method,
        attempts_per_document=attempts, rejection_rate=rate if retries > 0 else None,
        rejection_source=source if retries > 0 else "", retries=retries, measure_seconds=spent,
    )


def _batch_times(backend: LLMBackend, record: Measured, batch: int, max_tokens: int) -> BatchTimes:
    """Seconds of a batch of ``batch`` rows — every batch measured at these settings, scaled to ``batch`` rows
    (:meth:`Measured.full_batch_seconds`), else the engine's measured tokens/s with every row at ``max_tokens``, else
    ``tokens_per_s`` × ``batch_cost`` — and the one-row share."""
    share = record.step_share(backend, batch)
    full = record.full_batch_seconds(batch, share)
    if full is None:
        measured_rate = _engine_batch_rate(backend, batch)
        if measured_rate:
            full = backend.latency_s + batch * max_tokens / measured_rate
        else:
            full = backend.latency_s + max_tokens / backend.tokens_per_s * float(backend.batch_cost(batch))
    return BatchTimes(batch, full, share)
