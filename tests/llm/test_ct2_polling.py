"""The CTranslate2 engine decodes without a per-token Python callback (issue 35 §8, dpkps_core/llm/ct2_polling.py):
a batch is submitted asynchronously and the calling thread looks a few times a second — for a cancel
(answered at once; the engine finishes the batch in flight before it takes the next) and for the progress (the
step the measured speed says the batch has reached). A fake generator stands in for CTranslate2's, so that the
test sees exactly which calls the engine makes."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dpkps_core.llm import ct2, ct2_polling
from dpkps_core.llm.backends import GenerationCancelled

VOCAB = [f"tok{i}" for i in range(50)]
ROWS = [[1, 2, 3], [4, 5], [6]]


class FakeResult:
    """An AsyncGenerationResult: done once its batch's ``finished`` event is set."""

    def __init__(self, ids: list[int], finished: threading.Event) -> None:
        self._ids, self._finished = ids, finished

    def done(self) -> bool:
        return self._finished.is_set()

    def result(self) -> Any:
        self._finished.wait()
        return SimpleNamespace(sequences_ids=[list(self._ids)])


class FakeGenerator:
    """CTranslate2's Generator as the engine uses it: records each call; an asynchronous batch finishes after
    ``seconds`` (or when the test sets ``release``); a synchronous one calls the callback once per token."""

    def __init__(self, *, tokens: int = 6, seconds: float = 0.0) -> None:
        self.tokens, self.seconds = tokens, seconds
        self.calls: list[dict[str, Any]] = []
        self.release = threading.Event()
        self.callback_calls = 0

    def generate_batch(self, tokens: list[list[str]], **kwargs: Any) -> list[Any]:
        self.calls.append(kwargs)
        n = min(self.tokens, int(kwargs["max_length"]))
        ids = [[7] * n for _ in tokens]
        if kwargs.get("asynchronous"):
            finished = threading.Event()

            def finish() -> None:
                if self.seconds:
                    time.sleep(self.seconds)
                else:
                    self.release.wait()
                finished.set()

            threading.Thread(target=finish, daemon=True).start()
            return [FakeResult(r, finished) for r in ids]
        callback = kwargs.get("callback")
        for step in range(n):
            for b in range(len(tokens)):
                if callback is not None:
                    self.callback_calls += 1
                    if callback(SimpleNamespace(batch_id=b, step=step)):
                        break
        return [SimpleNamespace(sequences_ids=[r]) for r in ids]


def engine_with(gen: FakeGenerator, tmp_path: Path) -> ct2.CT2Engine:
    engine = ct2.CT2Engine(tmp_path, compute_type="float32")
    engine._generator, engine._vocab = gen, list(VOCAB)
    return engine


def test_a_batch_decodes_with_no_per_token_callback_and_polled_progress(tmp_path: Path) -> None:
    gen = FakeGenerator(tokens=6, seconds=0.9)
    engine = engine_with(gen, tmp_path)
    engine._step_s[3] = 0.01  # measured earlier: 10 ms per step
    steps: list[tuple[int, int]] = []
    out = engine.decode_batch(ROWS, stops=[], max_tokens=500, temperature=0.7, top_p=0.9,
                              on_step=lambda s, m: steps.append((s, m)), cancel=threading.Event(), timeout=120.0)
    assert out == [[7] * 6] * 3
    (call,) = gen.calls
    assert call["asynchronous"] is True and "callback" not in call  # the C++ loop never calls into Python
    assert gen.callback_calls == 0
    # The progress: a handful of reports (one per poll), not one per token; rising, below the budget.
    assert 1 <= len(steps) <= 0.9 / ct2_polling.POLL_S + 2
    assert [s for s, _ in steps] == sorted({s for s, _ in steps}) and all(m == 500 and s < 500 for s, m in steps)
    assert engine.step_seconds(3) is not None  # the batch's speed was measured as before


def test_cancel_returns_at_once_and_the_engine_finishes_the_batch_before_the_next(tmp_path: Path) -> None:
    gen = FakeGenerator(tokens=4)  # finishes when the test sets gen.release
    engine = engine_with(gen, tmp_path)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(GenerationCancelled):
        engine.decode_batch(ROWS, stops=[], max_tokens=20, temperature=0.0, top_p=1.0, cancel=cancel)
    assert time.monotonic() - t0 < 0.3 + 3 * ct2_polling.POLL_S  # within a poll of the cancel
    assert engine._lock.locked()  # the cancelled batch still runs in the engine: the next one waits for it

    got: list[list[list[int]]] = []
    nxt = threading.Thread(target=lambda: got.append(
        engine.decode_batch(ROWS, stops=[], max_tokens=20, temperature=0.0, top_p=1.0)))
    nxt.start()
    time.sleep(0.3)
    assert not got and len(gen.calls) == 1  # not started while the cancelled batch decodes
    gen.release.set()  # the cancelled batch ends (and so does the next, which shares the event)
    nxt.join(5)
    assert got == [[[7] * 4] * 3] and len(gen.calls) == 2
    assert not engine._lock.locked()


def test_cancel_between_batches_of_a_run(tmp_path: Path) -> None:
    """Cancellation still works when set between two batches: the next call raises before any decoding."""
    gen = FakeGenerator(tokens=3, seconds=0.05)
    engine = engine_with(gen, tmp_path)
    cancel = threading.Event()
    assert engine.decode_batch(ROWS, stops=[], max_tokens=3, temperature=0.0, top_p=1.0, cancel=cancel)
    cancel.set()
    with pytest.raises(GenerationCancelled):
        engine.decode_batch(ROWS, stops=[], max_tokens=3, temperature=0.0, top_p=1.0, cancel=cancel)


def test_a_batch_that_could_reach_its_timeout_keeps_the_per_token_callback(tmp_path: Path) -> None:
    gen = FakeGenerator(tokens=5)
    engine = engine_with(gen, tmp_path)
    engine._step_s[3] = 0.5  # 0.5 s per step: 20 steps × 2 (margin) = 20 s > 1 s × 3 rows
    steps: list[int] = []
    out = engine.decode_batch(ROWS, stops=[], max_tokens=20, temperature=0.0, top_p=1.0, timeout=1.0,
                              on_step=lambda s, _m: steps.append(s))
    (call,) = gen.calls
    assert "callback" in call and not call.get("asynchronous")
    assert steps == [1, 2, 3, 4, 5] and len(out) == 3
    # …while a generous timeout (or none) decodes without it.
    gen.release.set()
    engine.decode_batch(ROWS, stops=[], max_tokens=20, temperature=0.0, top_p=1.0, timeout=1000.0)
    assert gen.calls[-1].get("asynchronous") is True and "callback" not in gen.calls[-1]


def test_the_expected_step_without_a_measure_of_that_size() -> None:
    engine = ct2.CT2Engine(Path("."), compute_type="float32")
    assert engine._expected_step(4) == ct2.UNMEASURED_STEP_S
    engine._step_s[8] = 0.1
    assert engine._expected_step(8) == 0.1 and engine._expected_step(16) == pytest.approx(0.2)
    assert engine._expected_step(2) == 0.1  # never less than the largest measured size's step
    assert engine.measured_tokens_per_second(8) == pytest.approx(80.0) and engine.measured_tokens_per_second(3) == 0
