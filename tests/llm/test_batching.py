"""Batched generation through the runner: every promise of the one-at-a-time path (checkpoint per document,
resume after SIGKILL without loss or duplicates, retries per item, audit per prompt, progress with rate/ETA)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from llm_fakes import FakeBackend, FakeBatchBackend, make_sequences, write_jsonl

from dpkps_core.errors import ParameterError
from dpkps_core.llm import GenerationSettings, Progress, PromptConfig, estimate_cost, read_documents, run_generation
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE
from dpkps_core.records.runfolder import AUDIT_FILE, DOCUMENTS_FILE, FAILURES_FILE

REPO = Path(__file__).resolve().parents[2]
CFG = PromptConfig(doc_type="a news article")
FAST = dict(backoff_base=0.001, backoff_max=0.01, timeout=5.0)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_batches_retries_failures_audit_and_progress(tmp_path: Path) -> None:
    seqs = make_sequences(11)
    backend = FakeBatchBackend({2: ["transient", "ok"], 3: ["fatal"], 4: ["transient"] * 5, 5: ["empty", "ok"]})
    events: list[Progress] = []
    summary = run_generation(seqs, backend=backend, prompt_config=CFG, run_dir=tmp_path,
                             settings=GenerationSettings(retries=2, batch_size=4, **FAST), progress=events.append)
    assert summary.written == 9 and summary.failed == 2 and not summary.cancelled
    assert all(len(b) <= 4 for b in backend.batches) and backend.batches[0] == [1, 2, 3, 4]
    calls = [i for b in backend.batches for i in b]
    assert calls.count(2) == 2 and calls.count(3) == 1 and calls.count(4) == 3 and calls.count(5) == 2
    docs = _lines(tmp_path / DOCUMENTS_FILE)
    ids = [d["id"] for d in docs]
    assert len(ids) == len(set(ids)) == 9 and "seq-000003" not in ids and "seq-000004" not in ids
    fails = {f["id"]: f for f in _lines(tmp_path / FAILURES_FILE)}
    assert set(fails) == {"seq-000003", "seq-000004"}
    assert fails["seq-000003"]["attempts"] == 1 and not fails["seq-000003"]["retryable"]
    assert fails["seq-000004"]["attempts"] == 3 and fails["seq-000004"]["retryable"]
    audit = _lines(tmp_path / AUDIT_FILE)
    assert len(audit) == len(calls)  # one audit line per prompt sent, attempt by attempt
    assert [a["attempt"] for a in audit if a["id"] == "seq-000004"] == [1, 2, 3]
    assert {a["batch"] for a in audit} == set(range(1, len(backend.batches) + 1))
    assert audit[0]["parameters"] == {"max_tokens": 512, "temperature": 0.7, "timeout": 5.0, "batch_size": 4}
    # progress after every finished item, not once per batch
    assert [e.done + e.failed for e in events] == list(range(0, 12))
    assert events[-1].done == 9 and events[-1].eta_s == 0 and events[-1].rate_per_s > 0
    # a re-run retries only the failures, in one batch
    again = FakeBatchBackend()
    s2 = run_generation(seqs, backend=again, prompt_config=CFG, run_dir=tmp_path,
                        settings=GenerationSettings(batch_size=4, **FAST))
    assert again.batches == [[3, 4]] and s2.written == 2 and s2.already_done == 9
    assert not (tmp_path / FAILURES_FILE).read_text().strip()


def test_batch_size_one_is_one_at_a_time_and_default_is_measured() -> None:
    assert GenerationSettings().batch_size == DEFAULT_BATCH_SIZE >= 2
    for bad in (0, 257, 1.5, True):
        with pytest.raises(ParameterError):
            GenerationSettings(batch_size=bad)  # type: ignore[arg-type]


def test_batch_size_capped_by_backend_and_one_means_serial(tmp_path: Path) -> None:
    b = FakeBatchBackend(max_batch_size=3)
    run_generation(make_sequences(7), backend=b, prompt_config=CFG, run_dir=tmp_path / "a",
                   settings=GenerationSettings(batch_size=16, **FAST))
    assert [len(x) for x in b.batches] == [3, 3, 1]
    one = FakeBatchBackend()
    run_generation(make_sequences(3), backend=one, prompt_config=CFG, run_dir=tmp_path / "b",
                   settings=GenerationSettings(batch_size=1, **FAST))
    assert one.batches == [[1], [2], [3]]
    # remote-style backends keep the concurrent single-request path whatever the batch size
    remote = FakeBackend(max_concurrency=2, delay=0.02)
    run_generation(make_sequences(6), backend=remote, prompt_config=CFG, run_dir=tmp_path / "c",
                   settings=GenerationSettings(batch_size=16, concurrency=2, **FAST))
    assert sorted(remote.calls) == list(range(1, 7)) and remote.max_in_flight <= 2


def test_cancel_during_a_batch_discards_only_that_batch(tmp_path: Path) -> None:
    cancel = threading.Event()
    b = FakeBatchBackend(on_batch=lambda idx: cancel.set() if 5 in idx else None)
    s = run_generation(make_sequences(10), backend=b, prompt_config=CFG, run_dir=tmp_path,
                       settings=GenerationSettings(batch_size=4, **FAST), cancel=cancel)
    assert s.cancelled and s.written == 4 and s.failed == 0 and s.remaining == 6
    assert [d["id"] for d in read_documents(tmp_path)] == [f"seq-{i:06d}" for i in range(1, 5)]
    s2 = run_generation(make_sequences(10), backend=FakeBatchBackend(), prompt_config=CFG, run_dir=tmp_path,
                        settings=GenerationSettings(batch_size=4, **FAST))
    assert s2.written == 6 and len(read_documents(tmp_path)) == 10


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    seq_path = write_jsonl(tmp_path / "sequences.jsonl", make_sequences(40))
    script = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(REPO)!r}, {str(REPO / "tests")!r}]
        from llm_fakes import FakeBatchBackend
        from dpkps_core.llm import GenerationSettings, PromptConfig, read_sequences, run_generation
        run_generation(read_sequences({str(seq_path)!r}), backend=FakeBatchBackend(delay=0.1),
                       prompt_config=PromptConfig(doc_type="a news article"), run_dir={str(tmp_path)!r},
                       settings=GenerationSettings(batch_size=3))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    docs = tmp_path / DOCUMENTS_FILE
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if docs.exists() and docs.read_bytes().count(b"\n") >= 7:
                break
            if proc.poll() is not None:
                pytest.fail(f"the run ended early: {proc.stderr.read().decode()}")
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
        proc.stderr.close()
    first = docs.read_bytes().count(b"\n")
    assert 7 <= first < 40
    with docs.open("ab") as fh:  # as if the kill had hit in the middle of a line
        fh.write(b'{"id": "seq-000040", "label": "bus')
    backend = FakeBatchBackend()
    s = run_generation(make_sequences(40), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                       settings=GenerationSettings(batch_size=8, **FAST))
    assert s.already_done == first and s.written == 40 - first
    ids = [d["id"] for d in _lines(docs)]
    assert sorted(ids) == [f"seq-{i:06d}" for i in range(1, 41)]
    assert not {f"seq-{i:06d}" for b in backend.batches for i in b} & set(ids[:first])


def test_estimate_accounts_for_batches() -> None:
    seqs = make_sequences(12)
    b = FakeBatchBackend(max_batch_size=64)
    serial = estimate_cost(seqs, prompt_config=CFG, backend=b, max_tokens=100, batch_size=1)
    batched = estimate_cost(seqs, prompt_config=CFG, backend=b, max_tokens=100, batch_size=4)
    # the base class assumes no batching gain: 3 calls of cost 4 ≈ 12 single calls
    assert batched.seconds == pytest.approx(3 * (b.latency_s + 100 / b.tokens_per_s * 4))
    assert serial.seconds == pytest.approx(12 * (b.latency_s + 100 / b.tokens_per_s))
    with pytest.raises(ParameterError):
        estimate_cost(seqs, prompt_config=CFG, backend=b, max_tokens=10, batch_size=0)


def test_progress_moves_within_a_batch(tmp_path: Path) -> None:
    events: list[Progress] = []
    run_generation(make_sequences(6), backend=FakeBatchBackend(delay=0.4), prompt_config=CFG, run_dir=tmp_path,
                   settings=GenerationSettings(batch_size=3, **FAST), progress=events.append)
    inside = [e for e in events if e.in_flight]
    assert inside and inside[0].done == 0 and inside[0].in_flight == 3 and inside[0].in_flight_fraction == 0.25
    assert inside[0].rate_per_s > 0 and inside[0].eta_s is not None  # an ETA before the first batch is saved
    assert events[-1].in_flight == 0 and events[-1].done == 6
