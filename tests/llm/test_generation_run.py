"""The generation-run object's pieces (dpkps_core/llm/runner.py, retry.py): the one retry delay (full jitter,
Retry-After), batch scheduling, result handling and resume — each on its own, with scripted fake backends."""

from __future__ import annotations

import collections
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from llm_fakes import FakeBackend, FakeBatchBackend, make_sequences

from dpkps_core.errors import LLMError
from dpkps_core.llm.backends import TransientLLMError
from dpkps_core.llm.prompts import PromptConfig, as_sequence
from dpkps_core.llm.quality import NON_DOCUMENT_PREFIX
from dpkps_core.llm.retry import backoff_delay, call_with_retries, retry_delay
from dpkps_core.llm.runner import GenerationRun, ItemFailure, QueuedItem, run_generation
from dpkps_core.llm.settings import GenerationSettings
from dpkps_core.records.runfolder import AUDIT_FILE, DOCUMENTS_FILE, FAILURES_FILE

CFG = PromptConfig(doc_type="a news article")
GOOD = "Document number {i} mentions term{i} and the goal of the market in plain words."


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] if path.exists() else []


def _run(tmp_path: Path, n: int = 4, *, backend: Any = None, rng: random.Random | None = None,
         **settings: Any) -> GenerationRun:
    seqs = [as_sequence(s) for s in make_sequences(n)]
    return GenerationRun(seqs, {s.id: s for s in seqs}, backend=backend or FakeBatchBackend(), prompt_config=CFG,
                         run_dir=tmp_path, settings=GenerationSettings(**settings), progress=None,
                         cancel=threading.Event(), rng=rng)


# ---- the one retry delay ---------------------------------------------------------------------------------------


def test_retry_delay_is_full_jitter_backoff_raised_to_retry_after_and_capped() -> None:
    plain = TransientLLMError("503")
    # Without Retry-After it IS the full-jitter backoff (same draw from the same generator).
    assert [retry_delay(a, plain, base=0.5, cap=10.0, rng=random.Random(3)) for a in (1, 2, 5)] == \
           [backoff_delay(a, base=0.5, cap=10.0, rng=random.Random(3)) for a in (1, 2, 5)]
    draws = [retry_delay(3, plain, base=0.5, cap=10.0, rng=random.Random(i)) for i in range(200)]
    assert all(0.0 <= d <= 2.0 for d in draws) and max(draws) > 1.5  # uniform on [0, 0.5·2²]
    # Retry-After is a floor, the cap a ceiling.
    assert retry_delay(1, TransientLLMError("429", retry_after=7.0), base=0.5, cap=10.0, rng=random.Random(0)) == 7.0
    assert retry_delay(1, TransientLLMError("429", retry_after=99.0), base=0.5, cap=10.0) == 10.0
    assert retry_delay(6, TransientLLMError("429", retry_after=0.0), base=4.0, cap=3.0, rng=random.Random(1)) <= 3.0


def test_both_paths_wait_the_same_retry_delay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batched path's retry time and call_with_retries' wait come from the same function: patching the one
    backoff both rely on changes both."""
    monkeypatch.setattr("dpkps_core.llm.retry.backoff_delay", lambda attempt, **kw: 0.25 * attempt)

    class Waits(threading.Event):
        def __init__(self) -> None:
            super().__init__()
            self.delays: list[float] = []

        def wait(self, timeout: float | None = None) -> bool:  # type: ignore[override]
            self.delays.append(float(timeout or 0.0))
            return False

    failures = [TransientLLMError("500"), TransientLLMError("500", retry_after=0.1)]

    def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "ok"

    waits = Waits()
    assert call_with_retries(flaky, retries=3, backoff_base=1.0, backoff_max=5.0, cancel=waits) == "ok"
    assert waits.delays == [0.25, 0.5]

    run = _run(tmp_path, 1, backoff_base=1.0, backoff_max=5.0)
    item = QueuedItem(run.seqs[0], attempt=2)
    before = time.monotonic()
    again = run.handle_result(item, TransientLLMError("500"))
    assert again is not None and again.attempt == 3 and again.seq is item.seq
    assert before + 0.5 <= again.not_before <= time.monotonic() + 0.5


# ---- scheduling ------------------------------------------------------------------------------------------------


def test_next_batch_takes_ready_items_in_order_and_puts_waiting_ones_back_in_front(tmp_path: Path) -> None:
    seqs = _run(tmp_path, 6).seqs
    now = 100.0
    queue = collections.deque([QueuedItem(seqs[0], 2, now + 5), QueuedItem(seqs[1]), QueuedItem(seqs[2], 2, now + 1),
                               QueuedItem(seqs[3]), QueuedItem(seqs[4]), QueuedItem(seqs[5])])
    ready = GenerationRun.next_batch(queue, 2, now)
    assert [i.seq.id for i in ready] == [seqs[1].id, seqs[3].id]
    # The two passed over go back to the front, in their order; the rest stays behind them untouched.
    assert [i.seq.id for i in queue] == [seqs[0].id, seqs[2].id, seqs[4].id, seqs[5].id]
    assert GenerationRun.next_batch(queue, 10, now + 1.5)[0].seq.id == seqs[2].id
    waiting = collections.deque([QueuedItem(seqs[0], 2, now + 5)])
    assert GenerationRun.next_batch(waiting, 4, now) == [] and len(waiting) == 1


def test_a_retried_item_goes_first_in_the_next_batch(tmp_path: Path) -> None:
    backend = FakeBatchBackend({2: ["transient", "ok"], 5: ["fatal"]}, max_batch_size=3)
    summary = run_generation(make_sequences(7), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                             settings=GenerationSettings(batch_size=3, backoff_base=0.0, backoff_max=0.01))
    assert backend.batches == [[1, 2, 3], [2, 4, 5], [6, 7]]
    assert summary.written == 6 and summary.failed == 1 and summary.failed_ids == ("seq-000005",)
    audit = _lines(tmp_path / AUDIT_FILE)
    assert [(a["id"][-1], a["attempt"], a["batch"]) for a in audit] == [
        ("1", 1, 1), ("2", 1, 1), ("3", 1, 1), ("2", 2, 2), ("4", 1, 2), ("5", 1, 2), ("6", 1, 3), ("7", 1, 3)]
    assert {a["parameters"]["batch_size"] for a in audit if a["batch"] == 3} == {2}


def test_remote_backends_get_concurrent_requests_not_batches(tmp_path: Path) -> None:
    backend = FakeBackend(delay=0.05, max_concurrency=3)
    run = _run(tmp_path, 9, backend=backend, concurrency=8, backoff_base=0.0, backoff_max=0.01)
    assert not run.batched
    summary = run.run()
    assert summary.written == 9 and 2 <= backend.max_in_flight <= 3
    assert all("batch" not in a for a in _lines(tmp_path / AUDIT_FILE))


# ---- handling a result -----------------------------------------------------------------------------------------


def test_handle_result_checkpoints_retries_or_fails(tmp_path: Path) -> None:
    run = _run(tmp_path, 6, retries=1, backoff_base=0.0, backoff_max=0.01)
    run.open_files()
    try:
        s = run.seqs
        assert run.handle_result(QueuedItem(s[0]), GOOD.format(i=1)) is None
        # A non-document reply is transient: retried while attempts are left, then a retryable failure.
        again = run.handle_result(QueuedItem(s[1]), "Sure! Please provide the keyphrases.")
        assert again is not None and again.attempt == 2
        assert run.handle_result(QueuedItem(s[1], attempt=2), "ok") is None
        assert run.handle_result(QueuedItem(s[2]), LLMError("bad request sk-SECRETKEY123456")) is None
        assert run.handle_result(QueuedItem(s[3], attempt=2), None) is None  # not text: an empty reply
        assert run.handle_result(QueuedItem(s[4]), ValueError("boom")) is None
    finally:
        run.close_files()
    docs = _lines(tmp_path / DOCUMENTS_FILE)
    assert [d["id"] for d in docs] == [s[0].id] and docs[0]["text"] == GOOD.format(i=1)
    fails = {f["id"]: f for f in _lines(tmp_path / FAILURES_FILE)}
    assert fails[s[1].id]["retryable"] and fails[s[1].id]["attempts"] == 2
    assert fails[s[1].id]["error"].startswith(NON_DOCUMENT_PREFIX)
    assert not fails[s[2].id]["retryable"] and "SECRETKEY" not in fails[s[2].id]["error"]
    assert fails[s[3].id]["retryable"] and "empty reply" in fails[s[3].id]["error"]
    assert fails[s[4].id]["error"] == "Unexpected ValueError in the backend."
    assert (run.written, run.failed) == (1, 4) and s[5].id not in fails


def test_attempt_item_outcomes(tmp_path: Path) -> None:
    backend = FakeBackend({1: ["fatal"], 2: ["transient", "transient"], 3: ["transient", "ok"]})
    run = _run(tmp_path, 4, backend=backend, retries=1, backoff_base=0.0, backoff_max=0.01)
    run.open_files()
    try:
        fatal, exhausted, retried = (run.attempt_item(s) for s in run.seqs[:3])
        run.cancel.set()
        cancelled = run.attempt_item(run.seqs[3])
    finally:
        run.close_files()
    assert fatal == ItemFailure("bad request (fake)", 1, retryable=False)
    assert isinstance(exhausted, ItemFailure) and exhausted.retryable and exhausted.attempts == 2
    assert retried == "Document number 3 mentions term3." and cancelled is None
    assert [(a["id"][-1], a["attempt"]) for a in _lines(tmp_path / AUDIT_FILE)] == [
        ("1", 1), ("2", 1), ("2", 2), ("3", 1), ("3", 2)]


# ---- resume ----------------------------------------------------------------------------------------------------


def test_resume_skips_done_items_and_keeps_only_unresolved_failures(tmp_path: Path) -> None:
    seqs = make_sequences(6)
    (tmp_path / DOCUMENTS_FILE).write_text(
        "".join(json.dumps({**s, "text": "x", "model": "m"}) + "\n" for s in seqs[:2])
        + '{"id": "seq-000003", "lab', encoding="utf-8")  # killed mid-write
    (tmp_path / FAILURES_FILE).write_text("".join(
        json.dumps({"id": i, "error": "e"}) + "\n" for i in ("seq-000001", "seq-000004", "seq-000006")),
        encoding="utf-8")
    run = _run(tmp_path, 6, limit=5)
    run.seqs = run.seqs[:5]  # what run_generation does with limit=5
    run.total = 5
    run.resume()
    assert [s.id for s in run.todo] == ["seq-000003", "seq-000004", "seq-000005"] and run.already == 2
    # seq-000001 is done and seq-000004 is about to be retried: dropped; seq-000006 is outside this run: kept.
    assert [f["id"] for f in _lines(tmp_path / FAILURES_FILE)] == ["seq-000006"]
    assert (tmp_path / DOCUMENTS_FILE).read_bytes().endswith(b"}\n")  # the truncated line is cut off


def test_resume_refuses_documents_of_another_sequences_file(tmp_path: Path) -> None:
    (tmp_path / DOCUMENTS_FILE).write_text(json.dumps(
        {"id": "seq-000001", "keyphrases": ["other"], "text": "x", "model": "m"}) + "\n", encoding="utf-8")
    with pytest.raises(LLMError, match="different sequences file"):
        _run(tmp_path, 2).resume()


def test_finish_counts_a_cancelled_run_and_progress_has_an_eta(tmp_path: Path) -> None:
    events: list[Any] = []
    run = _run(tmp_path, 4)
    run.progress = events.append
    run.resume()
    run.open_files()
    try:
        run.record_document(run.seqs[0], GOOD.format(i=1))
        run.report(in_flight=2, fraction=0.5)
    finally:
        run.close_files()
    run.cancel.set()
    summary = run.finish(False)
    assert summary.cancelled and summary.written == 1 and summary.remaining == 3
    assert events[0].done == 1 and events[0].eta_s is not None
    # The batch in flight counts pro rata: 1 + 2 × 0.5 items worked instead of 1.
    assert events[1].in_flight == 2 and events[1].in_flight_fraction == 0.5
    assert events[1].rate_per_s > events[0].rate_per_s and events[1].eta_s < events[0].eta_s
