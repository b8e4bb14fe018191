"""The LLM writing step: one prompt per DP keyphrase sequence, reliably, resumably.

Files in the run folder (docs/ARCHITECTURE.md):
- ``documents.jsonl``: one finished document per line, appended at once (flush + fsync) by one writer. A re-run
  skips ids already there; a truncated last line (process killed mid-write) is cut off first.
- ``generation_failures.jsonl``: items that failed after all retries, with their final error. At the start of a
  run, entries for items that are done or about to be retried are dropped, so an id is never both written and
  failed.
- ``audit_log.jsonl``: every prompt actually sent (messages, backend, model, parameters, attempt, time); never
  the API key. Prompts sent together in one batched call share a ``batch`` number.

Local backends (``max_batch_size > 1``) get batches of ``batch_size`` prompts in one call; every document of a
batch is appended as soon as the call returns, so a kill loses at most the batch in flight, never a finished
document. Remote backends get ``concurrency`` single requests in flight.

Only ids, counts and errors are logged; document text never is.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import dataclasses
import datetime as _dt
import logging
import math
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar

from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm.backends import GenerationCancelled, LLMBackend, TransientLLMError, redact
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE
from dpkps_core.llm.prompts import KeyphraseSequence, PromptConfig, as_sequence, render_prompt
from dpkps_core.llm.quality import screen
from dpkps_core.runfolder import (  # noqa: F401 - the run folder's JSONL files and their reads live there
    AUDIT_FILE,
    DOCUMENTS_FILE,
    FAILURES_FILE,
    LOCK_FILE,
    JsonlAppender,
    iter_jsonl,
    read_documents,
    read_failures,
    repair_jsonl_tail,
    rewrite_jsonl,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


# --------------------------------------------------------------------------------------------------------------
# Settings, progress, results


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

    def __post_init__(self) -> None:
        def _int(name: str, lo: int, hi: int) -> None:
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise ParameterError(f"{name} must be an integer from {lo} to {hi}, got {v!r}.")

        _int("max_tokens", 1, 32768)
        _int("retries", 0, 20)
        _int("concurrency", 1, 256)
        _int("batch_size", 1, 256)
        if self.limit is not None:
            _int("limit", 1, 10_000_000)
        if not (isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 2):
            raise ParameterError(f"temperature must be between 0 and 2, got {self.temperature!r}.")
        for name in ("timeout", "backoff_max"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ParameterError(f"{name} must be a positive number of seconds, got {v!r}.")
        if not (isinstance(self.backoff_base, (int, float)) and 0 <= self.backoff_base <= self.backoff_max):
            raise ParameterError("backoff_base must be between 0 and backoff_max.")

    def request_params(self) -> dict[str, Any]:
        """Parameters recorded with every prompt in the audit log."""
        return {"max_tokens": self.max_tokens, "temperature": self.temperature, "timeout": self.timeout}


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
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


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
    batched backend, ``batch_size`` prompts share one call whose decoding steps cost ``backend.batch_cost(b)``.
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
    if batch > 1:
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


# --------------------------------------------------------------------------------------------------------------
# The run


class _ItemFailed(Exception):
    def __init__(self, message: str, attempts: int, retryable: bool) -> None:
        super().__init__(message)
        self.message = message
        self.attempts = attempts
        self.retryable = retryable


class _Cancelled(Exception):
    pass


def backoff_delay(attempt: int, *, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Full-jitter exponential backoff: uniform(0, min(cap, base·2^(attempt-1)))."""
    r = rng or random
    return r.uniform(0.0, min(cap, base * (2 ** max(0, attempt - 1))))


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
    empty reply), waiting a full-jitter backoff (:func:`backoff_delay`, at least the server's Retry-After, at most
    ``backoff_max``) between attempts. Any other exception propagates at once; raises
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
            delay = backoff_delay(attempt, base=backoff_base, cap=backoff_max, rng=rng)
            if exc.retry_after is not None:
                delay = min(backoff_max, max(delay, exc.retry_after))
            if on_retry is not None:
                on_retry(attempt, exc, delay)
            if cancel.wait(delay):
                raise GenerationCancelled("Generation was cancelled.") from None
    raise RetriesExhausted(str(last) if last is not None else "Failed.", attempts)


def run_generation(
    sequences: Sequence[KeyphraseSequence | Mapping[str, Any]],
    *,
    backend: LLMBackend,
    prompt_config: PromptConfig,
    run_dir: str | os.PathLike[str],
    settings: GenerationSettings | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    secrets: Sequence[str] = (),
) -> GenerationSummary:
    """Write one document per sequence into ``run_dir/documents.jsonl``, resuming a previous run.

    Args:
        sequences: the DP keyphrase sequences (``KeyphraseSequence`` or their dicts).
        backend: where prompts go.
        prompt_config: the public prompt settings.
        run_dir: the run folder (created if missing).
        settings: retries, timeout, concurrency…
        progress: called with a :class:`Progress` at the start and after each finished item.
        cancel: when set, no new item is started; finished documents are kept.
        secrets: extra strings (e.g. an API key) to mask in error messages.
    """
    settings = settings or GenerationSettings()
    if not isinstance(backend, LLMBackend):
        raise ParameterError("backend must be an LLMBackend (see dpkps_core.llm.make_backend).")
    if not isinstance(prompt_config, PromptConfig):
        raise ParameterError("prompt_config must be a PromptConfig.")
    all_seqs = [as_sequence(s) for s in sequences]
    full_by_id = {s.id: s for s in all_seqs}
    if len(full_by_id) != len(all_seqs):
        raise ParameterError("Sequence ids must be unique.")
    seqs = all_seqs[: settings.limit] if settings.limit is not None else all_seqs
    cancel = cancel or threading.Event()
    mask = tuple(secrets) + tuple(getattr(backend, "secrets", ()))
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)

    docs_path, fail_path = run / DOCUMENTS_FILE, run / FAILURES_FILE
    with _run_lock(run):
        return _run_locked(
            seqs, full_by_id, backend=backend, prompt_config=prompt_config, run=run, settings=settings,
            progress=progress, cancel=cancel, mask=mask, docs_path=docs_path, fail_path=fail_path,
        )


@contextlib.contextmanager
def _run_lock(run: Path) -> Iterator[None]:
    """One generation per run folder at a time (an OS lock, released by the kernel if the process dies)."""
    path = run / LOCK_FILE
    fh = path.open("a+b")
    try:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - non-POSIX
            pass
        except OSError:
            raise LLMError(f"Another generation is already writing into {run}; wait for it or cancel it.") from None
        yield
    finally:
        fh.close()


def _run_locked(
    seqs: list[KeyphraseSequence],
    full_by_id: dict[str, KeyphraseSequence],
    *,
    backend: LLMBackend,
    prompt_config: PromptConfig,
    run: Path,
    settings: GenerationSettings,
    progress: Callable[[Progress], None] | None,
    cancel: threading.Event,
    mask: tuple[str, ...],
    docs_path: Path,
    fail_path: Path,
) -> GenerationSummary:
    repair_jsonl_tail(docs_path)
    repair_jsonl_tail(fail_path)
    existing = read_documents(run)
    for doc in existing:
        seq = full_by_id.get(doc["id"])
        if seq is None or list(doc.get("keyphrases", [])) != list(seq.keyphrases):
            raise LLMError(
                f"{DOCUMENTS_FILE} in {run} belongs to a different sequences file (id {doc['id']!r}); "
                "use a new output folder."
            )
    done_ids = {d["id"] for d in existing}
    seq_ids = {s.id for s in seqs}
    todo = [s for s in seqs if s.id not in done_ids]
    todo_ids = {s.id for s in todo}
    # Keep only failures that stay unresolved: not done now, not retried in this run.
    old_failures = [
        f for f in iter_jsonl(fail_path) if f.get("id") not in done_ids and f.get("id") not in todo_ids
    ]
    if fail_path.exists():
        rewrite_jsonl(fail_path, old_failures)

    total = len(seqs)
    already = len(seq_ids & done_ids)
    state = {"written": 0, "failed": 0}
    failed_ids: list[str] = []
    t0 = time.monotonic()
    lock = threading.Lock()

    def report(in_flight: int = 0, fraction: float = 0.0) -> None:
        if progress is None:
            return
        elapsed = max(time.monotonic() - t0, 1e-9)
        finished = state["written"] + state["failed"]
        worked = finished + in_flight * fraction
        rate = worked / elapsed if worked > 0 else 0.0
        left = total - already - worked
        eta = max(0.0, left / rate) if rate > 0 else None
        progress(Progress(done=already + state["written"], total=total, failed=state["failed"], rate_per_s=rate,
                          eta_s=eta, in_flight=in_flight, in_flight_fraction=fraction))

    log.info("Generation: %d sequences, %d already done, %d to write (backend %s)", total, already, len(todo), backend.name)
    report()
    if not todo:
        return GenerationSummary(total, already, 0, 0, False, 0.0)

    params = settings.request_params()
    described = backend.describe()
    prompt_public = prompt_config.to_dict()
    rng = random.Random()
    audit = JsonlAppender(run / AUDIT_FILE)
    docs = JsonlAppender(docs_path)
    fails = JsonlAppender(fail_path)

    def attempt_item(seq: KeyphraseSequence) -> str:
        messages = render_prompt(seq, prompt_config)
        tried = [0]

        def log_attempt(attempt: int) -> None:
            tried[0] = attempt
            audit.append({
                "timestamp": _now(), "id": seq.id, "attempt": attempt, "backend": backend.name,
                "model": backend.model, "backend_info": described, "parameters": params,
                "prompt_config": prompt_public, "messages": messages,
            })

        def log_retry(attempt: int, exc: TransientLLMError, delay: float) -> None:
            log.info("Item %s attempt %d failed (%s); retrying in %.2f s", seq.id, attempt, redact(str(exc), mask), delay)

        try:
            return call_with_retries(  # a non-document is transient (issue 14 §5)
                lambda: screen(backend.generate(messages, max_tokens=settings.max_tokens,
                                                temperature=settings.temperature, timeout=settings.timeout)),
                retries=settings.retries, backoff_base=settings.backoff_base, backoff_max=settings.backoff_max,
                cancel=cancel, rng=rng, before_attempt=log_attempt, on_retry=log_retry)
        except GenerationCancelled:
            raise _Cancelled() from None
        except RetriesExhausted as exc:
            raise _ItemFailed(redact(str(exc), mask), exc.attempts, retryable=True) from None
        except LLMError as exc:
            raise _ItemFailed(redact(str(exc), mask), tried[0], retryable=False) from None
        except Exception as exc:  # noqa: BLE001 - a backend bug must not kill the run
            raise _ItemFailed(f"Unexpected {type(exc).__name__} in the backend.", tried[0], retryable=False) from None

    def record_failure(seq: KeyphraseSequence, exc: _ItemFailed) -> None:
        fails.append({
            "id": seq.id, "label": seq.label, "keyphrases": list(seq.keyphrases), "error": exc.message,
            "attempts": exc.attempts, "retryable": exc.retryable, "backend": backend.name,
            "model": backend.model, "timestamp": _now(),
        })
        with lock:
            state["failed"] += 1
            failed_ids.append(seq.id)
        log.warning("Item %s failed after %d attempt(s): %s", seq.id, exc.attempts, exc.message)
        report()

    def record_document(seq: KeyphraseSequence, text: str) -> None:
        docs.append({
            "id": seq.id, "label": seq.label, "keyphrases": list(seq.keyphrases), "text": text,
            "model": backend.model,
        })
        with lock:
            state["written"] += 1
        report()

    def finish(seq: KeyphraseSequence, fut: cf.Future[str]) -> None:
        try:
            text = fut.result()
        except _Cancelled:
            return
        except _ItemFailed as exc:
            record_failure(seq, exc)
        else:
            record_document(seq, text)

    def run_batched(batch_size: int) -> bool:
        """Batches of up to ``batch_size`` prompts per call; retried items rejoin the queue. True if cancelled."""
        attempts = settings.retries + 1
        queue: collections.deque[list[Any]] = collections.deque([s, 1, 0.0] for s in todo)  # seq, attempt, not before
        messages_of: dict[str, Any] = {}
        batch_no = 0
        while queue:
            if cancel.is_set():
                return True
            now = time.monotonic()
            ready: list[list[Any]] = []
            deferred: list[list[Any]] = []
            while queue and len(ready) < batch_size:
                item = queue.popleft()
                (ready if item[2] <= now else deferred).append(item)
            queue.extendleft(reversed(deferred))
            if not ready:
                if cancel.wait(max(0.0, min(item[2] for item in queue) - now)):
                    return True
                continue
            batch_no += 1
            batch_params = {**params, "batch_size": len(ready)}
            batch_msgs = []
            for seq, attempt, _ in ready:
                msgs = messages_of.setdefault(seq.id, render_prompt(seq, prompt_config))
                batch_msgs.append(msgs)
                audit.append({
                    "timestamp": _now(), "id": seq.id, "attempt": attempt, "batch": batch_no, "backend": backend.name,
                    "model": backend.model, "backend_info": described, "parameters": batch_params,
                    "prompt_config": prompt_public, "messages": msgs,
                })
            last_step = [0.0]

            def on_step(step: int, steps: int, n: int = len(ready)) -> None:
                now = time.monotonic()
                if now - last_step[0] >= 1.0 and steps > 0:  # at most once a second
                    last_step[0] = now
                    report(n, min(1.0, step / steps))

            try:
                results: list[Any] = list(backend.generate_batch(
                    batch_msgs, max_tokens=settings.max_tokens, temperature=settings.temperature,
                    timeout=settings.timeout, cancel=cancel, on_step=on_step,
                ))
                if len(results) != len(ready):
                    raise LLMError(f"The backend returned {len(results)} replies for {len(ready)} prompts.")
            except GenerationCancelled:
                return True  # the rows of this batch are incomplete: nothing written, resumed next run
            except LLMError as exc:
                results = [exc] * len(ready)
            except Exception as exc:  # noqa: BLE001 - a backend bug must not kill the run
                results = [LLMError(f"Unexpected {type(exc).__name__} in the backend.")] * len(ready)
            retry: list[list[Any]] = []
            for item, res in zip(ready, results):
                seq, attempt = item[0], item[1]
                if isinstance(res, str) and res.strip():
                    try:
                        res = screen(res)  # a non-document is transient (issue 14 §5)
                    except TransientLLMError as exc:
                        res = exc
                    else:
                        record_document(seq, res)
                        continue
                if not isinstance(res, Exception):
                    res = TransientLLMError("The backend returned an empty reply.")
                message = redact(str(res), mask)
                if isinstance(res, TransientLLMError):
                    if attempt < attempts:
                        delay = backoff_delay(attempt, base=settings.backoff_base, cap=settings.backoff_max, rng=rng)
                        if res.retry_after is not None:
                            delay = min(settings.backoff_max, max(delay, res.retry_after))
                        log.info("Item %s attempt %d failed (%s); retrying in %.2f s", seq.id, attempt, message, delay)
                        retry.append([seq, attempt + 1, time.monotonic() + delay])
                    else:
                        record_failure(seq, _ItemFailed(message or "Failed.", attempt, retryable=True))
                elif isinstance(res, LLMError):
                    record_failure(seq, _ItemFailed(message, attempt, retryable=False))
                else:
                    record_failure(seq, _ItemFailed(f"Unexpected {type(res).__name__} in the backend.", attempt,
                                                    retryable=False))
            queue.extendleft(reversed(retry))  # retried items go first once their backoff is over
        return False

    batch_size = max(1, min(settings.batch_size, int(getattr(backend, "max_batch_size", 1))))
    batched = int(getattr(backend, "max_batch_size", 1)) > 1
    cancelled = False
    try:
        if batched:
            cancelled = run_batched(batch_size)
        else:
            workers = max(1, min(settings.concurrency, backend.max_concurrency))
            with cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpkps-llm") as pool:
                pending: dict[cf.Future[str], KeyphraseSequence] = {}
                queue = iter(todo)
                exhausted = False
                while True:
                    while not exhausted and len(pending) < workers and not cancel.is_set():
                        seq = next(queue, None)
                        if seq is None:
                            exhausted = True
                            break
                        pending[pool.submit(attempt_item, seq)] = seq
                    if not pending:
                        break
                    finished, _ = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                    for fut in finished:
                        finish(pending.pop(fut), fut)
                    if cancel.is_set() and not exhausted:
                        cancelled = True
    finally:
        audit.close()
        docs.close()
        fails.close()
    cancelled = cancelled or (cancel.is_set() and state["written"] + state["failed"] < len(todo))
    elapsed = time.monotonic() - t0
    log.info("Generation finished: %d written, %d failed in %.1f s", state["written"], state["failed"], elapsed)
    return GenerationSummary(
        total=total, already_done=already, written=state["written"], failed=state["failed"],
        cancelled=cancelled, elapsed_s=elapsed, failed_ids=tuple(failed_ids),
    )
