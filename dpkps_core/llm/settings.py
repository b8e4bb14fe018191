"""What a generation run is told and what it reports (docs/ARCHITECTURE.md, llm/): :class:`GenerationSettings`
(how the runner calls the backend), :class:`Progress` (for the CLI's and the app's progress bars) and
:class:`GenerationSummary` (what a run did). Counts and timings only: no document text (docs/DESIGN.md §2.5).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from dpkps_core.errors import ParameterError
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE
from dpkps_core.llm.repetition import (
    DEFAULT_NO_REPEAT_NGRAM,
    DEFAULT_REPETITION_PENALTY,
    check_repetition,
    repetition_kwargs,
    repetition_params,
)

#: Drafts per sequence (best of K, :mod:`dpkps_core.llm.selection`): 1 until K > 1 measures better on both demo
#: corpora (benchmarks/end_to_end.py).
DEFAULT_DRAFTS = 1
MAX_DRAFTS = 8


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
    """How the runner calls the backend.

    Attributes:
        max_tokens: most tokens per reply.
        temperature: sampling temperature (0 = greedy).
        timeout: seconds one request may take.
        retries: further attempts after the first, for retryable failures.
        concurrency: requests in flight (capped by the backend's own limit; 1 for offline).
        backoff_base: first retry delay in seconds (doubled each attempt, with full jitter).
        backoff_max: longest retry delay in seconds.
        limit: generate for at most the first ``limit`` sequences (None = all).
        batch_size: prompts per batched call for local backends (capped by the backend's ``max_batch_size``;
            1 = one document at a time). Remote backends ignore it.
        drafts: drafts written per sequence; the runner keeps the one that best fits its sequence, judged on DP
            outputs only (:mod:`dpkps_core.llm.selection`). 1 = no selection. Needs a temperature above 0.
        no_repeat_ngram: local backends: no n-gram of this many tokens twice in a reply (0 = off); remote
            backends ignore it (:mod:`dpkps_core.llm.repetition`, measured default).
        repetition_penalty: local backends: CTRL's penalty on the tokens a reply already holds (1.0 = off);
            remote backends ignore it.
    """

    max_tokens: int = 512
    temperature: float = 0.7
    timeout: float = 60.0
    retries: int = 4
    concurrency: int = 4
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    limit: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    drafts: int = DEFAULT_DRAFTS
    no_repeat_ngram: int = DEFAULT_NO_REPEAT_NGRAM
    repetition_penalty: float = DEFAULT_REPETITION_PENALTY

    def __post_init__(self) -> None:
        def _int(name: str, lo: int, hi: int) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ParameterError(f"{name} must be an integer from {lo} to {hi}, got {v!r}.")

        _int("max_tokens", 1, 32768)
        _int("retries", 0, 20)
        _int("concurrency", 1, 256)
        _int("batch_size", 1, 256)
        _int("drafts", 1, MAX_DRAFTS)
        if self.limit is not None:
            _int("limit", 1, 10_000_000)
        if not (isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 2):
            raise ParameterError(f"temperature must be between 0 and 2, got {self.temperature!r}.")
        if self.drafts > 1 and self.temperature == 0:
            raise ParameterError("Several drafts per sequence need a temperature above 0: greedy decoding writes the "
                                 "same draft every time.")
        for name in ("timeout", "backoff_max"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ParameterError(f"{name} must be a positive number of seconds, got {v!r}.")
        if not (isinstance(self.backoff_base, (int, float)) and 0 <= self.backoff_base <= self.backoff_max):
            raise ParameterError("backoff_base must be between 0 and backoff_max.")
        check_repetition(self.no_repeat_ngram, self.repetition_penalty)

    def request_params(self, *, repetition: bool = False) -> dict[str, Any]:
        """Parameters recorded with every prompt in the audit log; ``repetition``: with the repetition control
        when it is on (for a backend that applies it, the local models; absent = off, as in runs before it)."""
        params: dict[str, Any] = {"max_tokens": self.max_tokens, "temperature": self.temperature,
                                  "timeout": self.timeout}
        if repetition:
            params.update(repetition_kwargs(self.no_repeat_ngram, self.repetition_penalty))
        if self.drafts > 1:  # recorded with every prompt, so the run folder and the bundle say how it was written
            params["drafts"] = self.drafts
        return params

    def repetition_kwargs(self) -> dict[str, Any]:
        """``no_repeat_ngram`` and ``repetition_penalty`` as a local backend's ``generate_batch`` takes them."""
        return repetition_params(self.no_repeat_ngram, self.repetition_penalty)


@dataclasses.dataclass(frozen=True)
class Progress:
    """Progress of a generation run (for tqdm in the CLI and the app's progress bar).

    ``done`` counts saved documents. While a batch is being written, ``in_flight`` is its size and
    ``in_flight_fraction`` the share of its token budget already decoded (rows may end sooner), so that the rate
    (documents per second, in-flight work counted pro rata) and the ETA move before the first batch is saved.
    """

    done: int
    total: int
    failed: int
    rate_per_s: float
    eta_s: float | None
    in_flight: int = 0
    in_flight_fraction: float = 0.0
    #: while the batch in flight waits for a model shared with other runs (llm/model_queue.py): its place in line
    #: (2 = next; the batch writing now is 1st); None when it is writing or the backend has no line
    queue_place: int | None = None


@dataclasses.dataclass(frozen=True)
class GenerationSummary:
    """What a run did."""

    total: int
    already_done: int
    written: int
    failed: int
    cancelled: bool
    elapsed_s: float
    failed_ids: tuple[str, ...] = ()

    @property
    def done(self) -> int:
        """Documents present for the job after this run."""
        return self.already_done + self.written

    @property
    def remaining(self) -> int:
        """Items neither written nor failed (cancelled or never scheduled)."""
        return self.total - self.done - self.failed
