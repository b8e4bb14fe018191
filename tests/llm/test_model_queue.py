"""The shared model's line (issue 35 §8, dpkps_core/llm/model_queue.py): batches of several runs take the model in
order of arrival, each waiting run knows its place (page 6: "2nd in line for the model"), a cancel leaves the line,
and the estimate's speed measurement never waits behind a run."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest
from llm_fakes import build_tiny_model, make_sequences

from dpkps_core.llm import GenerationSettings, PromptConfig, run_generation
from dpkps_core.llm.backends import GenerationCancelled
from dpkps_core.llm.local import LocalModelBackend
from dpkps_core.llm.model_queue import ModelQueue, model_queue_of, ordinal
from dpkps_core.llm.speed import engine_tokens_per_second
from dpkps_core.records.runfolder import read_documents


def wait_until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_ordinals() -> None:
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]


def test_first_come_first_served_with_places_and_cancel() -> None:
    q = ModelQueue()
    holder = q.acquire("a")
    assert q.place(holder) == 1 and q.length == 1 and q.busy
    places: dict[str, list[int]] = {"b": [], "c": []}
    order: list[str] = []
    cancel_c = threading.Event()

    def waiter(name: str, cancel: threading.Event | None = None) -> None:
        try:
            with q.turn(name, cancel=cancel, on_place=places[name].append):
                order.append(name)
                time.sleep(0.05)
        except GenerationCancelled:
            order.append(name + " cancelled")

    tb = threading.Thread(target=waiter, args=("b",))
    tb.start()
    wait_until(lambda: q.length == 2)
    tc = threading.Thread(target=waiter, args=("c", cancel_c))
    tc.start()
    wait_until(lambda: q.length == 3)
    assert q.labels() == ["a", "b", "c"]
    wait_until(lambda: places["b"] == [2] and places["c"] == [3])
    cancel_c.set()  # c leaves the line while waiting
    tc.join(5)
    assert order == ["c cancelled"] and q.length == 2
    q.release(holder)
    tb.join(5)
    assert order == ["c cancelled", "b"] and places["b"] == [2, 1] and not q.busy


def test_try_turn_never_waits_nor_jumps_the_line() -> None:
    q = ModelQueue()
    with q.try_turn() as ours:
        assert ours and q.labels() == ["speed calibration"]
        with q.try_turn() as again:
            assert again is False  # busy: turned away at once
    assert not q.busy
    t = q.acquire("run")
    with q.try_turn() as ours:
        assert ours is False
    q.release(t)


class GatedEngine:
    """A fake decoding engine: each batch blocks until the test opens its gate; records who decoded."""

    name = "gated"

    def __init__(self, reply: list[int]) -> None:
        self.reply = reply
        self.gate = threading.Semaphore(0)
        self.started: list[int] = []
        self.calibrations = 0

    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                     top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                     on_step: Callable[[int, int], None] | None = None, timeout: float | None = None,
                     no_repeat_ngram: int = 0, repetition_penalty: float = 1.0) -> list[list[int]]:
        self.started.append(len(rows))
        assert self.gate.acquire(timeout=20), "the test never opened the gate"
        return [list(self.reply) + [list(stops)[0]] for _ in rows]  # one document, then the end of the reply

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name}

    def batch_tokens_per_second(self, batch_size: int) -> float:
        self.calibrations += 1  # a calibration batch (the real engine decodes one when unmeasured)
        return 100.0 * batch_size

    def measured_tokens_per_second(self, batch_size: int) -> float:
        return 0.0


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("queue") / "tiny-llama")


DOCUMENT = ("the match was a goal in the season , and the market of the bank was in the football season . the shares "
            "and profits of the business was in the sport .")


def gated_backend(tiny_model: Path) -> tuple[LocalModelBackend, GatedEngine]:
    tok = LocalModelBackend(model_path=tiny_model, device="cpu")._load_tokenizer()
    engine = GatedEngine(tok.convert_tokens_to_ids(DOCUMENT.split()))
    return LocalModelBackend(model_path=tiny_model, device="cpu", engine=engine), engine


def test_two_concurrent_runs_take_turns_and_know_their_place(tiny_model: Path, tmp_path: Path) -> None:
    backend, engine = gated_backend(tiny_model)
    line = model_queue_of(backend)
    assert line is not None
    settings = GenerationSettings(max_tokens=4, batch_size=2, retries=0, temperature=0.0)
    progress: dict[str, list[Any]] = {"a": [], "b": []}
    results: dict[str, Any] = {}

    def run(name: str) -> None:
        results[name] = run_generation(make_sequences(4), backend=backend, run_dir=tmp_path / name,
                                       prompt_config=PromptConfig(doc_type="a news article"), settings=settings,
                                       progress=progress[name].append)

    ta = threading.Thread(target=run, args=("a",))
    ta.start()
    wait_until(lambda: len(engine.started) == 1)  # a's first batch holds the model
    tb = threading.Thread(target=run, args=("b",))
    tb.start()
    wait_until(lambda: line.length == 2)
    wait_until(lambda: any(p.queue_place == 2 for p in progress["b"]))  # "2nd in line for the model"
    assert all(p.queue_place is None for p in progress["a"])
    # Page 6's estimate meanwhile: no calibration, no wait.
    calibrations, t0 = engine.calibrations, time.monotonic()
    assert engine_tokens_per_second(backend, 2) == 0.0
    assert time.monotonic() - t0 < 1.0 and engine.calibrations == calibrations

    engine.gate.release()  # a's first batch ends: b's batch is next (a queues behind it)
    wait_until(lambda: len(engine.started) == 2)
    wait_until(lambda: any(p.queue_place == 2 for p in progress["a"]))  # now a waits, 2nd in line
    for _ in range(3):  # b's first batch, then the last batch of each run
        engine.gate.release()
    ta.join(10)
    tb.join(10)
    assert engine.started == [2, 2, 2, 2] and not line.busy
    for name in ("a", "b"):
        assert results[name].written == 4 and len(read_documents(tmp_path / name)) == 4  # none lost or twice
        assert progress[name][-1].queue_place is None


def test_a_run_cancelled_while_in_line_leaves_it(tiny_model: Path, tmp_path: Path) -> None:
    backend, engine = gated_backend(tiny_model)
    line = backend.model_queue
    holder = line.acquire("another session")
    cancel = threading.Event()
    places: list[Any] = []
    done: dict[str, Any] = {}
    t = threading.Thread(target=lambda: done.setdefault("r", run_generation(
        make_sequences(2), backend=backend, run_dir=tmp_path / "r", prompt_config=PromptConfig(doc_type="a note"),
        settings=GenerationSettings(max_tokens=4, batch_size=2, retries=0), cancel=cancel,
        progress=places.append)))
    t.start()
    wait_until(lambda: line.length == 2)
    cancel.set()
    t.join(5)
    assert done["r"].cancelled and done["r"].written == 0 and engine.started == []
    assert line.labels() == ["another session"]
    line.release(holder)


def test_the_estimate_does_not_wait_for_an_engine_being_loaded() -> None:
    from dpkps_core.llm.ct2 import LazyCT2Engine

    gate = threading.Event()

    def source() -> Path:  # the model folder "converts" until the test opens the gate
        gate.wait(10)
        raise RuntimeError("no model here")

    lazy = LazyCT2Engine(source)
    loader = threading.Thread(target=lambda: pytest.raises(Exception, lazy.load))
    loader.start()
    wait_until(lambda: lazy.building)
    backend = type("B", (), {"engine": lazy, "model_queue": ModelQueue()})()
    t0 = time.monotonic()
    assert engine_tokens_per_second(backend, 4) == 0.0 and time.monotonic() - t0 < 1.0
    gate.set()
    loader.join(10)
    assert not lazy.building
