"""The LLM writing step: one prompt per DP keyphrase sequence, reliably, resumably (post-processing, docs/DESIGN.md §2.5).

Files in the run folder (docs/ARCHITECTURE.md):
- ``documents.jsonl``: one finished document per line, appended at once (flush + fsync) by one writer. A re-run
  skips ids already there; a truncated last line (process killed mid-write) is cut off first.
- ``generation_failures.jsonl``: items that failed after all retries, with their final error. At the start of a
  run, entries for items that are done or about to be retried are dropped, so an id is never both written and
  failed.
- ``audit_log.jsonl``: every prompt actually sent (messages, backend, model, parameters, attempt, time); never
  the API key. Prompts sent together in one batched call share a ``batch`` number.

One :class:`GenerationRun` holds a run's state: it resumes (:meth:`~GenerationRun.resume`), schedules the work —
local backends (``max_batch_size > 1``) get batches of ``batch_size`` prompts in one call, remote backends get
``concurrency`` single requests in flight — handles each result (a document, a retry after
:func:`~dpkps_core.llm.retry.retry_delay`, or a failure), checkpoints every document as soon as it is back (a kill
loses at most the batch or requests in flight, never a finished document) and reports progress with an ETA from
this run's measured throughput, retries included (:class:`~dpkps_core.llm.speed.RunMeter`).
``settings.drafts = K > 1``: K prompts per attempt, the best draft kept (:mod:`dpkps_core.llm.selection`).

Only ids, counts and errors are logged; document text never is.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import functools
import logging
import os
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm.backends import ChatMessages, GenerationCancelled, LLMBackend, TransientLLMError, redact
from dpkps_core.llm.checkpoint import RunWriters, run_lock, utc_now
from dpkps_core.llm.prompts import PromptConfig, as_sequence, render_prompt
from dpkps_core.llm.quality import screen
from dpkps_core.llm.model_queue import model_queue_of
from dpkps_core.llm.selection import DraftChoice, DraftSelector, request_drafts
from dpkps_core.llm.retry import RetriesExhausted, call_with_retries, retry_delay
from dpkps_core.llm.settings import GenerationSettings, GenerationSummary, Progress
from dpkps_core.llm.speed import RunMeter, measured
from dpkps_core.records.runfolder import (DOCUMENTS_FILE, FAILURES_FILE, iter_jsonl, read_documents, repair_jsonl_tail,
                                  rewrite_jsonl)
from dpkps_core.method.sequences import KeyphraseSequence

log = logging.getLogger(__name__)


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
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    with run_lock(run):
        return GenerationRun(
            seqs, full_by_id, backend=backend, prompt_config=prompt_config, run_dir=run, settings=settings,
            progress=progress, cancel=cancel or threading.Event(),
            secrets=tuple(secrets) + tuple(getattr(backend, "secrets", ())),
        ).run()


@dataclasses.dataclass
class QueuedItem:
    """One sequence waiting in the batched queue: the attempt it is at and the earliest time it may be sent."""

    seq: KeyphraseSequence
    attempt: int = 1
    not_before: float = 0.0


@dataclasses.dataclass(frozen=True)
class ItemFailure:
    """How an item finally failed: the (redacted) error, the attempts made, whether the error was retryable."""

    message: str
    attempts: int
    retryable: bool


class GenerationRun:
    """One generation run in a locked run folder: resume, schedule, submit, handle results, checkpoint, finish.

    ``seqs`` are the sequences of this run (after ``limit``); ``full_by_id`` all sequences of the file (documents
    already in the folder must belong to it). ``secrets`` are masked in every error written or logged.
    """

    _writers: RunWriters

    def __init__(self, seqs: list[KeyphraseSequence], full_by_id: dict[str, KeyphraseSequence], *,
                 backend: LLMBackend, prompt_config: PromptConfig, run_dir: Path, settings: GenerationSettings,
                 progress: Callable[[Progress], None] | None, cancel: threading.Event,
                 secrets: tuple[str, ...] = (), rng: random.Random | None = None,
                 selector: DraftSelector | None = None) -> None:
        self.seqs, self.full_by_id = seqs, full_by_id
        self.backend, self.prompt_config, self.run_dir = backend, prompt_config, run_dir
        self.settings, self.progress, self.cancel, self.secrets = settings, progress, cancel, secrets
        self.rng = rng or random.Random()
        self.todo: list[KeyphraseSequence] = []
        self.total = len(seqs)
        self.already = 0
        self.written = 0
        self.failed = 0
        self.failed_ids: list[str] = []
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        # repetition control reaches the local models only (llm/repetition.py); recorded with the other settings
        self._repetition = settings.repetition_kwargs() if getattr(backend, "repetition_control", False) else {}
        self._params = settings.request_params(repetition=bool(self._repetition))
        self._described = backend.describe()
        self._prompt_public = prompt_config.to_dict()
        self._messages: dict[str, ChatMessages] = {}
        self.drafts = settings.drafts  # best of K, judged on the file's DP sequences only (never the private corpus)
        self.selector = selector or (DraftSelector(list(full_by_id.values())) if self.drafts > 1 else None)
        size = max(1, min(settings.batch_size, int(getattr(backend, "max_batch_size", 1))) // self.drafts)
        self.meter = RunMeter(measured(backend, settings.max_tokens, settings.temperature, self._repetition),
                              retries=settings.retries,
                              size=size if self.batched else None, drafts=self.drafts)
        self._queue: collections.deque[QueuedItem] | None = None
        self._settling: tuple[list[QueuedItem], list[QueuedItem]] = ([], [])
        self._queue_place: int | None = None  # the batch in flight's place in the shared model's line (2 = next)

    @property
    def batched(self) -> bool:
        """Whether the backend takes batches in one call (the local models) rather than concurrent requests."""
        return int(getattr(self.backend, "max_batch_size", 1)) > 1

    # -- the run -------------------------------------------------------------------------------------------------
    def run(self) -> GenerationSummary:
        """Resume, write every item still to do, and say what was done."""
        self.resume()
        self.t0 = time.monotonic()
        log.info("Generation: %d sequences, %d already done, %d to write (backend %s)", self.total, self.already,
                 len(self.todo), self.backend.name)
        self.report()
        if not self.todo:
            return GenerationSummary(self.total, self.already, 0, 0, False, 0.0)
        self.open_files()
        if self.batched:  # the one-row step share of the ETA's tail batches, from the engine when it measures it
            self.meter.measure_share(self.backend)
        self.meter.open()
        try:
            cancelled = self.run_batched() if self.batched else self.run_concurrent()
        finally:
            self.meter.close()
            self.close_files()
        return self.finish(cancelled)

    def open_files(self) -> None:
        """Open the audit log, the documents and the failures for appending (creates them)."""
        self._writers = RunWriters(self.run_dir)

    def close_files(self) -> None:
        """Close what :meth:`open_files` opened (every line was already flushed and fsynced)."""
        self._writers.close()

    def resume(self) -> None:
        """Cut truncated last lines, check the documents already there belong to these sequences, find what is
        left to do, and drop failures that are done or about to be retried."""
        docs_path, fail_path = self.run_dir / DOCUMENTS_FILE, self.run_dir / FAILURES_FILE
        repair_jsonl_tail(docs_path)
        repair_jsonl_tail(fail_path)
        existing = read_documents(self.run_dir)
        for doc in existing:
            seq = self.full_by_id.get(doc["id"])
            if seq is None or list(doc.get("keyphrases", [])) != list(seq.keyphrases):
                raise LLMError(
                    f"{DOCUMENTS_FILE} in {self.run_dir} belongs to a different sequences file (id {doc['id']!r}); "
                    "use a new output folder."
                )
        done_ids = {d["id"] for d in existing}
        self.todo = [s for s in self.seqs if s.id not in done_ids]
        todo_ids = {s.id for s in self.todo}
        self.already = len({s.id for s in self.seqs} & done_ids)
        # Keep only failures that stay unresolved: not done now, not retried in this run.
        unresolved = [f for f in iter_jsonl(fail_path) if f.get("id") not in done_ids and f.get("id") not in todo_ids]
        if fail_path.exists():
            rewrite_jsonl(fail_path, unresolved)

    def finish(self, cancelled: bool) -> GenerationSummary:
        """The summary; a run is also cancelled when ``cancel`` was set before every item was written or failed."""
        cancelled = cancelled or (self.cancel.is_set() and self.written + self.failed < len(self.todo))
        elapsed = time.monotonic() - self.t0
        log.info("Generation finished: %d written, %d failed in %.1f s", self.written, self.failed, elapsed)
        return GenerationSummary(
            total=self.total, already_done=self.already, written=self.written, failed=self.failed,
            cancelled=cancelled, elapsed_s=elapsed, failed_ids=tuple(self.failed_ids),
        )

    # -- progress and checkpoint ---------------------------------------------------------------------------------
    def report(self, in_flight: int = 0, fraction: float = 0.0) -> None:
        """Progress: done, failed, the rate (in-flight work counted pro rata) and the ETA from this run's measured
        speed and rejection rate, retries included (:meth:`~dpkps_core.llm.speed.RunMeter.eta`)."""
        if self.progress is None:
            return
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        worked = self.written + self.failed + in_flight * fraction
        rate = worked / elapsed if worked > 0 else 0.0
        levels = [0.0] * (self.settings.retries + 1)  # items waiting, by the attempt they are at
        if self._queue is None:
            levels[0] = max(0.0, len(self.todo) - self.written - self.failed - in_flight)
        unhandled, retried = self._settling  # a written batch's results still being handled count as decoded
        for item in list(self._queue or ()) + list(retried):
            levels[min(item.attempt, len(levels)) - 1] += 1
        eta = self.meter.eta(levels, in_flight=in_flight or len(unhandled),
                             fraction=fraction if in_flight else 1.0, elapsed=elapsed)
        self.progress(Progress(done=self.already + self.written, total=self.total, failed=self.failed,
                               rate_per_s=rate, eta_s=eta, in_flight=in_flight, in_flight_fraction=fraction,
                               queue_place=self._queue_place if in_flight else None))

    def audit(self, seq: KeyphraseSequence, attempt: int, messages: ChatMessages, *, batch: int | None = None,
              parameters: Mapping[str, Any] | None = None, draft: int | None = None) -> None:
        """Log one prompt about to be sent (docs/DESIGN.md §2.5: every prompt sent is in the audit log)."""
        record: dict[str, Any] = {"timestamp": utc_now(), "id": seq.id, "attempt": attempt}
        if batch is not None:
            record["batch"] = batch
        if draft is not None:
            record["draft"] = draft
        record.update(backend=self.backend.name, model=self.backend.model, backend_info=self._described,
                      parameters=self._params if parameters is None else parameters,
                      prompt_config=self._prompt_public, messages=messages)
        self._writers.audit.append(record)

    def record_document(self, seq: KeyphraseSequence, text: str) -> None:
        """Checkpoint one finished document (appended, flushed and fsynced at once)."""
        self._writers.docs.append({"id": seq.id, "label": seq.label, "keyphrases": list(seq.keyphrases),
                                   "text": text, "model": self.backend.model})
        self.meter.reply(True)
        with self._lock:
            self.written += 1
        self.report()

    def record_choice(self, seq: KeyphraseSequence, attempt: int, choice: DraftChoice) -> None:
        """Checkpoint the kept draft as the document; the audit log gets every draft's figures."""
        self._writers.audit.append({"timestamp": utc_now(), "id": seq.id, "attempt": attempt, **choice.audit_record()})
        self.record_document(seq, choice.text)

    def record_failure(self, seq: KeyphraseSequence, failure: ItemFailure) -> None:
        """Record an item that failed for good (the error is already redacted)."""
        self._writers.fails.append({
            "id": seq.id, "label": seq.label, "keyphrases": list(seq.keyphrases), "error": failure.message,
            "attempts": failure.attempts, "retryable": failure.retryable, "backend": self.backend.name,
            "model": self.backend.model, "timestamp": utc_now(),
        })
        self.meter.reply(False)
        with self._lock:
            self.failed += 1
            self.failed_ids.append(seq.id)
        log.warning("Item %s failed after %d attempt(s): %s", seq.id, failure.attempts, failure.message)
        self.report()

    def _log_retry(self, seq: KeyphraseSequence, attempt: int, error: Exception, delay: float) -> None:
        self.meter.reply(False)  # a refused or failed attempt: the rejection rate of the ETA
        log.info("Item %s attempt %d failed (%s); retrying in %.2f s", seq.id, attempt,
                 redact(str(error), self.secrets), delay)

    def _messages_of(self, seq: KeyphraseSequence) -> ChatMessages:
        """The prompt of ``seq`` (rendered once per run)."""
        if seq.id not in self._messages:
            self._messages[seq.id] = render_prompt(seq, self.prompt_config)
        return self._messages[seq.id]

    # -- remote backends: concurrent single requests ---------------------------------------------------------------
    def run_concurrent(self) -> bool:
        """Up to ``concurrency`` (capped by the backend) requests in flight, each retried in its own thread
        (:func:`~dpkps_core.llm.retry.call_with_retries`); no new item once cancelled. True if cancelled."""
        workers = max(1, min(self.settings.concurrency, self.backend.max_concurrency))
        cancelled = False
        with cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpkps-llm") as pool:
            pending: dict[cf.Future[str | ItemFailure | None], KeyphraseSequence] = {}
            queue = iter(self.todo)
            exhausted = False
            while True:
                while not exhausted and len(pending) < workers and not self.cancel.is_set():
                    seq = next(queue, None)
                    if seq is None:
                        exhausted = True
                        break
                    pending[pool.submit(self.attempt_item, seq)] = seq
                if not pending:
                    break
                finished, _ = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    self.handle_outcome(pending.pop(fut), fut.result())
                if self.cancel.is_set() and not exhausted:
                    cancelled = True
        return cancelled

    def attempt_item(self, seq: KeyphraseSequence) -> str | ItemFailure | None:
        """One item through :func:`~dpkps_core.llm.retry.call_with_retries` (a non-document reply is transient,
        :func:`~dpkps_core.llm.quality.screen`): the text, its failure, or None when cancelled."""
        messages = self._messages_of(seq)
        tried = [0]

        def before_attempt(attempt: int) -> None:
            tried[0] = attempt
            if self.selector is None:
                self.audit(seq, attempt, messages)

        s = self.settings
        gen = functools.partial(self.backend.generate, messages, max_tokens=s.max_tokens, temperature=s.temperature,
                                timeout=s.timeout)
        call: Callable[[], Any] = ((lambda: screen(gen())) if self.selector is None
                                   else functools.partial(self._drafts_of, seq, messages, tried, gen))
        try:
            return call_with_retries(
                call,
                retries=s.retries, backoff_base=s.backoff_base, backoff_max=s.backoff_max, cancel=self.cancel,
                rng=self.rng, before_attempt=before_attempt, on_retry=functools.partial(self._log_retry, seq))
        except GenerationCancelled:
            return None
        except RetriesExhausted as exc:
            return ItemFailure(redact(str(exc), self.secrets), exc.attempts, retryable=True)
        except LLMError as exc:
            return ItemFailure(redact(str(exc), self.secrets), tried[0], retryable=False)
        except Exception as exc:  # noqa: BLE001 - a backend bug must not kill the run
            return ItemFailure(f"Unexpected {type(exc).__name__} in the backend.", tried[0], retryable=False)

    def _drafts_of(self, seq: KeyphraseSequence, messages: ChatMessages, tried: list[int],
                   gen: Callable[[], str]) -> tuple[int, DraftChoice]:
        """One attempt with K drafts, one request after another: the kept draft, or what the drafts ended with."""
        drafts = request_drafts(gen, self.drafts, self.cancel, lambda j: self.audit(seq, tried[0], messages, draft=j))
        return tried[0], self.selector.choose(seq, drafts)  # type: ignore[union-attr]

    def handle_outcome(self, seq: KeyphraseSequence, outcome: str | tuple[int, DraftChoice] | ItemFailure | None
                       ) -> None:
        """Checkpoint a finished item's document (or kept draft) or failure (nothing for a cancelled one)."""
        if isinstance(outcome, ItemFailure):
            self.record_failure(seq, outcome)
        elif isinstance(outcome, tuple):
            self.record_choice(seq, outcome[0], outcome[1])
        elif outcome is not None:
            self.record_document(seq, outcome)

    # -- local backends: batches in one call ---------------------------------------------------------------------
    def run_batched(self) -> bool:
        """Batches of up to ``batch_size`` (capped by the backend) prompts per call; retried items rejoin the
        front of the queue once their delay is over. True if cancelled."""
        size = max(1, min(self.settings.batch_size, int(getattr(self.backend, "max_batch_size", 1))))
        size = max(1, size // self.drafts)  # K drafts per item: a call holds about batch_size prompts either way
        queue: collections.deque[QueuedItem] = collections.deque(QueuedItem(s) for s in self.todo)
        self._queue = queue
        batch_no = 0
        while queue:
            if self.cancel.is_set():
                return True
            now = time.monotonic()
            ready = self.next_batch(queue, size, now)
            if 0 < len(ready) < size and queue:  # retries due sooner than a batch of their own would take: wait
                soon = sorted(t for t in (item.not_before for item in queue) if t - now <= self.meter.fill_wait())
                if soon:  # for them to fill this batch
                    queue.extendleft(reversed(ready))
                    if self.cancel.wait(soon[: size - len(ready)][-1] - now):
                        return True
                    continue
            if not ready:
                if self.cancel.wait(max(0.0, min(item.not_before for item in queue) - time.monotonic())):
                    return True
                continue
            batch_no += 1
            results = self.submit_batch(ready, batch_no)
            if results is None:
                return True  # the rows of this batch are incomplete: nothing written, resumed next run
            retry: list[QueuedItem] = []
            k = self.drafts
            for i, item in enumerate(ready):
                self._settling = (ready[i + 1:], retry)  # for the ETA: results not handled yet, retries so far
                again = self.handle_result(item, results[i] if self.selector is None else
                                           self.selector.choose_or_error(item.seq, results[i * k:(i + 1) * k]))
                if again is not None:
                    retry.append(again)
            self._settling = ([], [])
            queue.extendleft(reversed(retry))  # retried items go first once their backoff is over
        return False

    @staticmethod
    def next_batch(queue: collections.deque[QueuedItem], size: int, now: float | None = None) -> list[QueuedItem]:
        """Take up to ``size`` items whose delay is over, scanning from the front; the items passed over because
        they must still wait go back to the front in their order. Empty when nothing is ready yet."""
        now = time.monotonic() if now is None else now
        ready: list[QueuedItem] = []
        deferred: list[QueuedItem] = []
        while queue and len(ready) < size:
            item = queue.popleft()
            (ready if item.not_before <= now else deferred).append(item)
        queue.extendleft(reversed(deferred))
        return ready

    def submit_batch(self, ready: list[QueuedItem], batch_no: int) -> list[Any] | None:
        """Log and send one batch: one result per prompt (text or its error; K drafts: K prompts per item), or None
        when the run was cancelled during the call. A failure of the whole call becomes every prompt's result."""
        k = self.drafts
        messages = [self._messages_of(item.seq) for item in ready for _ in range(k)]
        parameters = {**self._params, "batch_size": len(messages)}
        for n, msgs in enumerate(messages):
            item = ready[n // k]
            self.audit(item.seq, item.attempt, msgs, batch=batch_no, parameters=parameters,
                       draft=n % k if k > 1 else None)
        s = self.settings
        self.meter.batch_started = (turn := [time.monotonic()])[0]  # reset when the shared model becomes ours
        try:
            results: list[Any] = list(self.backend.generate_batch(
                messages, max_tokens=s.max_tokens, temperature=s.temperature, timeout=s.timeout,
                cancel=self.cancel, **self._callbacks(len(ready), turn), **self._repetition,
            ))
            if len(results) != len(messages):
                raise LLMError(f"The backend returned {len(results)} replies for {len(messages)} prompts.")
            self.meter.batch(len(ready), time.monotonic() - turn[0])
        except GenerationCancelled:
            return None
        except LLMError as exc:
            results = [exc] * len(messages)
        except Exception as exc:  # noqa: BLE001 - a backend bug must not kill the run
            results = [LLMError(f"Unexpected {type(exc).__name__} in the backend.")] * len(messages)
        return results

    def _callbacks(self, in_flight: int, turn: list[float]) -> dict[str, Callable[..., None]]:
        """The batch's ``on_step`` (its decoded share, reported at most once a second) and, with a shared model's
        line (llm/model_queue.py), ``on_place``: the progress says the batch's place (2 = next), and its clock
        starts when the model is ours (``turn[0]``), so that the measured speed never counts the wait."""
        last = [0.0]

        def on_step(step: int, steps: int) -> None:
            now = time.monotonic()
            if now - last[0] >= 1.0 and steps > 0:
                last[0] = now
                self.report(in_flight, min(1.0, step / steps))

        def on_place(place: int) -> None:
            if place <= 1:
                turn[0] = self.meter.batch_started = time.monotonic()
            self._queue_place = place if place > 1 else None
            self.report(in_flight, 0.0)

        return {"on_step": on_step, **({"on_place": on_place} if model_queue_of(self.backend) else {})}

    def handle_result(self, item: QueuedItem, result: Any) -> QueuedItem | None:
        """Checkpoint a document, or record a failure, or return the item to retry after :func:`retry_delay`
        (a transient error with attempts left; a non-document reply is transient), or keep a :class:`DraftChoice`."""
        seq, attempt = item.seq, item.attempt
        if isinstance(result, DraftChoice):
            return self.record_choice(seq, attempt, result)  # type: ignore[func-returns-value]
        if isinstance(result, str) and result.strip():
            try:
                text = screen(result)
            except TransientLLMError as exc:
                result = exc
            else:
                self.record_document(seq, text)
                return None
        if not isinstance(result, Exception):
            result = TransientLLMError("The backend returned an empty reply.")
        message = redact(str(result), self.secrets)
        if isinstance(result, TransientLLMError):
            if attempt < self.settings.retries + 1:
                s = self.settings
                delay = retry_delay(attempt, result, base=s.backoff_base, cap=s.backoff_max, rng=self.rng)
                self._log_retry(seq, attempt, result, delay)
                return QueuedItem(seq, attempt + 1, time.monotonic() + delay)
            self.record_failure(seq, ItemFailure(message or "Failed.", attempt, retryable=True))
        elif isinstance(result, LLMError):
            self.record_failure(seq, ItemFailure(message, attempt, retryable=False))
        else:
            self.record_failure(seq, ItemFailure(f"Unexpected {type(result).__name__} in the backend.", attempt,
                                                 retryable=False))
        return None
