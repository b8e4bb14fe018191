"""Runner: retries, failures, checkpoint/resume, cancellation, progress, cost estimate, real HTTP faults."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from llm_fakes import ChatServer, FakeBackend, chat_server, make_sequences, serve  # noqa: F401 (fixture)

from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm import (
    GenerationSettings,
    OpenAICompatibleBackend,
    Progress,
    PromptConfig,
    estimate_cost,
    read_documents,
    render_prompt,
    repair_jsonl_tail,
    run_generation,
)
from dpkps_core.llm.retry import backoff_delay
from dpkps_core.records.runfolder import AUDIT_FILE, DOCUMENTS_FILE, FAILURES_FILE

CFG = PromptConfig(doc_type="a news article")
FAST = dict(backoff_base=0.001, backoff_max=0.01, timeout=5.0)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_item_written_or_failed_once_with_fake_backend(tmp_path: Path) -> None:
    seqs = make_sequences(10)
    backend = FakeBackend({2: ["transient", "transient", "ok"], 3: ["fatal"], 4: ["transient"] * 5})
    events: list[Progress] = []
    summary = run_generation(
        seqs, backend=backend, prompt_config=CFG, run_dir=tmp_path, settings=GenerationSettings(retries=2, **FAST),
        progress=events.append,
    )
    docs = _lines(tmp_path / DOCUMENTS_FILE)
    fails = _lines(tmp_path / FAILURES_FILE)
    assert sorted(d["id"] for d in docs) == sorted(s["id"] for s in seqs if s["id"] not in ("seq-000003", "seq-000004"))
    assert {f["id"] for f in fails} == {"seq-000003", "seq-000004"}
    assert summary.written == 8 and summary.failed == 2 and not summary.cancelled
    f3 = next(f for f in fails if f["id"] == "seq-000003")
    assert f3["attempts"] == 1 and not f3["retryable"] and "bad request" in f3["error"]
    f4 = next(f for f in fails if f["id"] == "seq-000004")
    assert f4["attempts"] == 3 and f4["retryable"]
    assert backend.calls.count(2) == 3
    audit = _lines(tmp_path / AUDIT_FILE)
    assert len(audit) == len(backend.calls)
    assert {a["attempt"] for a in audit if a["id"] == "seq-000002"} == {1, 2, 3}
    by_id = {s["id"]: s for s in seqs}
    assert all(a["messages"] == render_prompt(by_id[a["id"]], CFG) for a in audit)
    assert {a["backend"] for a in audit} == {"fake"} and all("timestamp" in a for a in audit)
    assert audit[0]["parameters"] == {"max_tokens": 512, "temperature": 0.7, "timeout": 5.0}
    assert set(docs[0]) == {"id", "label", "keyphrases", "text", "model"} and docs[0]["model"] == "fake-model"
    assert events[0].done == 0 and events[-1].done == 8 and events[-1].failed == 2 and events[-1].total == 10
    assert events[-1].eta_s == 0

    # Re-run: failed items are retried, failures file holds only what is still failing, nothing duplicated.
    backend2 = FakeBackend({4: ["fatal"]})
    s2 = run_generation(seqs, backend=backend2, prompt_config=CFG, run_dir=tmp_path,
                        settings=GenerationSettings(retries=0, **FAST))
    assert sorted(backend2.calls) == [3, 4] and s2.already_done == 8 and s2.written == 1 and s2.failed == 1
    ids = [d["id"] for d in _lines(tmp_path / DOCUMENTS_FILE)]
    assert len(ids) == len(set(ids)) == 9
    assert [f["id"] for f in _lines(tmp_path / FAILURES_FILE)] == ["seq-000004"]


def test_resume_after_truncated_last_line(tmp_path: Path) -> None:
    seqs = make_sequences(5)
    run_generation(seqs[:3], backend=FakeBackend(), prompt_config=CFG, run_dir=tmp_path,
                   settings=GenerationSettings(**FAST))
    path = tmp_path / DOCUMENTS_FILE
    # Simulate a kill in the middle of writing the 4th document.
    with path.open("ab") as fh:
        fh.write(b'{"id": "seq-000004", "label": "sport", "keyph')
    backend = FakeBackend()
    summary = run_generation(seqs, backend=backend, prompt_config=CFG, run_dir=tmp_path,
                             settings=GenerationSettings(**FAST))
    assert sorted(backend.calls) == [4, 5] and summary.already_done == 3
    docs = _lines(path)  # every line parses
    assert sorted(d["id"] for d in docs) == [s["id"] for s in seqs]
    assert path.read_bytes().endswith(b"\n")


def test_repair_jsonl_tail(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"a":1}\n{"b":')
    assert repair_jsonl_tail(p) == 5 and p.read_bytes() == b'{"a":1}\n'
    assert repair_jsonl_tail(p) == 0
    p.write_bytes(b'{"partial')
    repair_jsonl_tail(p)
    assert p.read_bytes() == b""
    assert repair_jsonl_tail(tmp_path / "missing.jsonl") == 0


def test_damaged_middle_line_is_ignored_and_regenerated(tmp_path: Path) -> None:
    seqs = make_sequences(2)
    (tmp_path / DOCUMENTS_FILE).write_text('{"id": "seq-000001", garbage\n', encoding="utf-8")
    run_generation(seqs, backend=FakeBackend(), prompt_config=CFG, run_dir=tmp_path, settings=GenerationSettings(**FAST))
    assert sorted(d["id"] for d in read_documents(tmp_path)) == ["seq-000001", "seq-000002"]


def test_documents_from_another_sequences_file_are_refused(tmp_path: Path) -> None:
    run_generation(make_sequences(2), backend=FakeBackend(), prompt_config=CFG, run_dir=tmp_path,
                   settings=GenerationSettings(**FAST))
    other = [{**s, "keyphrases": ["term1", "other"]} for s in make_sequences(2)]
    with pytest.raises(LLMError, match="different sequences file"):
        run_generation(other, backend=FakeBackend(), prompt_config=CFG, run_dir=tmp_path)


def test_limit_and_offline_style_concurrency(tmp_path: Path) -> None:
    backend = FakeBackend(delay=0.01, max_concurrency=1)
    s = run_generation(make_sequences(6), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                       settings=GenerationSettings(concurrency=8, limit=4, **FAST))
    assert s.total == 4 and s.written == 4 and backend.max_in_flight == 1
    backend2 = FakeBackend(delay=0.05, max_concurrency=8)
    run_generation(make_sequences(12), backend=backend2, prompt_config=CFG, run_dir=tmp_path / "b",
                   settings=GenerationSettings(concurrency=4, **FAST))
    assert 2 <= backend2.max_in_flight <= 4


def test_cancel_stops_scheduling_and_keeps_finished(tmp_path: Path) -> None:
    cancel = threading.Event()
    backend = FakeBackend(delay=0.01, max_concurrency=1, on_call=lambda i: cancel.set() if i == 3 else None)
    s = run_generation(make_sequences(10), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                       settings=GenerationSettings(**FAST), cancel=cancel)
    assert s.cancelled and s.written == 3 and s.failed == 0 and s.remaining == 7
    assert len(read_documents(tmp_path)) == 3
    s2 = run_generation(make_sequences(10), backend=FakeBackend(), prompt_config=CFG, run_dir=tmp_path,
                        settings=GenerationSettings(**FAST))
    assert s2.written == 7 and len(read_documents(tmp_path)) == 10


def test_second_concurrent_run_in_same_folder_is_refused(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def hold(i: int) -> None:
        started.set()
        release.wait(5)

    backend = FakeBackend(max_concurrency=1, on_call=hold)
    t = threading.Thread(target=run_generation, args=(make_sequences(1),),
                         kwargs=dict(backend=backend, prompt_config=CFG, run_dir=tmp_path))
    t.start()
    try:
        assert started.wait(5)
        with pytest.raises(LLMError, match="already writing"):
            run_generation(make_sequences(1), backend=FakeBackend(), prompt_config=CFG, run_dir=tmp_path)
    finally:
        release.set()
        t.join(10)


def test_settings_validation() -> None:
    for bad in (dict(max_tokens=0), dict(retries=-1), dict(concurrency=0), dict(temperature=3.0),
                dict(timeout=0), dict(limit=0), dict(backoff_base=100.0)):
        with pytest.raises(ParameterError):
            GenerationSettings(**bad)


def test_backoff_is_exponential_with_jitter() -> None:
    import random

    rng = random.Random(0)
    d = [backoff_delay(a, base=1.0, cap=30.0, rng=rng) for a in (1, 2, 3, 4, 10) for _ in range(50)]
    assert all(0 <= x <= 30 for x in d)
    assert max(d[:50]) <= 1.0 and max(d[150:200]) > 2.0 and len(set(d)) > 200


def test_call_with_retries_retries_transient_errors_only() -> None:
    """The one retry loop the runner and AugPE share: transient errors are retried with backoff (at least the
    server's Retry-After), permanent ones propagate at once, exhaustion and cancellation are their own errors."""
    from dpkps_core.llm import RetriesExhausted, TransientLLMError, call_with_retries
    from dpkps_core.llm.backends import GenerationCancelled

    class Waits(threading.Event):
        def __init__(self) -> None:
            super().__init__()
            self.delays: list[float] = []

        def wait(self, timeout: float | None = None) -> bool:  # type: ignore[override]
            self.delays.append(float(timeout or 0.0))
            return self.is_set()

    def flaky(failures: list[Exception]):
        def call() -> str:
            if failures:
                raise failures.pop(0)
            return "ok"
        return call

    cancel, attempts, retried = Waits(), [], []
    out = call_with_retries(flaky([TransientLLMError("429", retry_after=7.0), TransientLLMError("503")]),
                            retries=3, backoff_base=0.5, backoff_max=10.0, cancel=cancel,
                            before_attempt=attempts.append, on_retry=lambda a, e, d: retried.append((a, str(e))))
    assert out == "ok" and attempts == [1, 2, 3] and retried == [(1, "429"), (2, "503")]
    assert cancel.delays[0] == 7.0 and 0.0 <= cancel.delays[1] <= 1.0  # Retry-After honoured, then jitter ≤ 0.5·2

    with pytest.raises(RetriesExhausted) as info:
        call_with_retries(flaky([TransientLLMError("500")] * 5), retries=2, backoff_base=0.1, backoff_max=1.0,
                          cancel=Waits())
    assert info.value.attempts == 3 and "500" in str(info.value)

    attempts.clear()
    with pytest.raises(LLMError, match="bad key"):
        call_with_retries(flaky([LLMError("bad key")]), retries=5, backoff_base=0.1, backoff_max=1.0,
                          cancel=Waits(), before_attempt=attempts.append)
    assert attempts == [1]

    stopped = Waits()
    stopped.set()
    with pytest.raises(GenerationCancelled):
        call_with_retries(flaky([]), retries=1, backoff_base=0.1, backoff_max=1.0, cancel=stopped)


def test_cost_estimate_arithmetic() -> None:
    seqs = make_sequences(3)
    backend = FakeBackend(max_concurrency=2)
    chars = sum(len(m["content"]) for m in render_prompt(seqs[0], CFG))
    per_prompt = -(-chars // 4)  # same length for all three (term1..term3)
    est = estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=100, concurrency=4, price_per_1k=0.5)
    assert est.prompts == 3 and est.prompt_tokens == 3 * per_prompt and est.completion_tokens == 300
    assert est.total_tokens == 3 * per_prompt + 300
    assert est.cost == pytest.approx((3 * per_prompt + 300) / 1000 * 0.5)
    # 3 prompts, 2 at a time -> 2 rounds of (latency + max_tokens / tokens_per_s)
    assert est.seconds == pytest.approx(2 * (backend.latency_s + 100 / backend.tokens_per_s))
    assert est.token_method == "~4 chars/token" and "3 prompts" in est.summary()
    assert estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=10).cost is None
    with pytest.raises(ParameterError):
        estimate_cost(seqs, prompt_config=CFG, backend=backend, max_tokens=10, price_per_1k=-1.0)


# ---- a real local HTTP server with injected faults -----------------------------------------------------------


def test_http_faults_every_document_written_or_failed_none_twice(tmp_path: Path, chat_server) -> None:  # noqa: F811
    faults = {
        1: ["429", "ok"], 2: ["500", "503", "ok"], 3: ["slow", "ok"], 4: ["malformed", "ok"], 5: ["empty", "ok"],
        6: ["html", "ok"], 7: ["500"] * 10, 8: ["401"], 9: ["nochoices", "ok"], 10: ["slow"] * 10,
    }
    script = ChatServer(faults, slow_s=2.0)
    url = serve(chat_server, script)
    key = "sk-test-RUNNER-KEY-0123456789"
    backend = OpenAICompatibleBackend(model="test-model", base_url=url, api_key=key, timeout=1.0, max_concurrency=4)
    seqs = make_sequences(14)
    summary = run_generation(
        seqs, backend=backend, prompt_config=CFG, run_dir=tmp_path,
        settings=GenerationSettings(retries=2, concurrency=4, timeout=1.0, backoff_base=0.01, backoff_max=0.05),
    )
    doc_lines = _lines(tmp_path / DOCUMENTS_FILE)
    fails = _lines(tmp_path / FAILURES_FILE)
    doc_ids = [d["id"] for d in doc_lines]
    fail_ids = [f["id"] for f in fails]
    assert len(doc_ids) == len(set(doc_ids)) and len(fail_ids) == len(set(fail_ids))
    assert set(doc_ids) | set(fail_ids) == {s["id"] for s in seqs} and not set(doc_ids) & set(fail_ids)
    assert set(fail_ids) == {"seq-000007", "seq-000008", "seq-000010"}
    assert summary.written == 11 and summary.failed == 3
    errors = {f["id"]: f["error"] for f in fails}
    assert "HTTP 500" in errors["seq-000007"]
    assert "HTTP 401" in errors["seq-000008"] and key not in errors["seq-000008"]
    assert "within 1 s" in errors["seq-000010"]
    for d in doc_lines:
        i = int(d["id"][-6:])
        assert d["text"] == f"Synthetic document {i} about term{i}." and d["model"] == "test-model"
    assert script.attempts[2] == 3 and script.attempts[7] == 3 and script.attempts[8] == 1
    assert all(h == f"Bearer {key}" for h in script.auth_headers)  # the key reached the server…
    audit = _lines(tmp_path / AUDIT_FILE)
    assert len(audit) == sum(script.attempts.values())
    for path in tmp_path.iterdir():  # …and no file in the run folder
        assert key not in path.read_text(encoding="utf-8", errors="replace")
