"""A first-come, first-served line for a model shared by several runs (docs/ARCHITECTURE.md, llm/).

A local backend is one object per server (the app caches it, :mod:`studio.resources`): every session's run
writes through the same model, one batch at a time. :class:`ModelQueue` replaces a plain lock (which hands the
model to whichever waiting thread the scheduler wakes, so a run could wait behind many batches of another) by a
line served in order: each batch takes a ticket, the model goes to the oldest ticket, and a run whose batch is
done queues again behind those already waiting — the runs take turns, batch by batch.

Each place can be read while waiting (``place``: 1 is the batch using the model, 2 the next in line, …), so a page
can say "2nd in line for the model". A wait ends early when the caller's ``cancel`` is set. Someone who must not
wait at all (the before-the-run estimate's speed measurement) asks :meth:`ModelQueue.try_turn` and is turned away
while anyone uses the model or waits for it.

Only counts and short public labels (``"generation"``, ``"speed calibration"``) are kept; never prompt text.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Callable, Iterator

from dpkps_core.llm.backends import GenerationCancelled

#: How often a waiter looks at its ``cancel`` event (seconds); a release wakes every waiter at once anyway.
CANCEL_POLL_S = 0.2


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``22nd`` … (a place in line in words)."""
    if 10 <= n % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class ModelQueue:
    """A fair (FIFO) lock over one model, with each holder's and waiter's place readable.

    ``turn(label)`` is a context manager: it waits for the model in order of arrival and holds it for the
    block. ``place(ticket)`` is 1 for the holder, 2 for the next in line, and so on; ``length`` counts the holder
    and the waiters. Thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._line: list[tuple[int, str]] = []  # (ticket, label): the holder first, then the waiters in order
        self._tickets = itertools.count(1)

    # -- reading ---------------------------------------------------------------------------------------------
    @property
    def length(self) -> int:
        """The batches using the model (0 or 1) plus those waiting for it."""
        with self._cond:
            return len(self._line)

    @property
    def busy(self) -> bool:
        """Whether someone uses the model or waits for it."""
        return self.length > 0

    def labels(self) -> list[str]:
        """The labels in line, the holder first (public words only)."""
        with self._cond:
            return [label for _, label in self._line]

    def place(self, ticket: int) -> int | None:
        """1 for the ticket using the model, 2 for the next in line, …; None when the ticket is not in line."""
        with self._cond:
            for i, (t, _) in enumerate(self._line):
                if t == ticket:
                    return i + 1
        return None

    # -- taking turns ----------------------------------------------------------------------------------------
    def acquire(self, label: str = "batch", *, cancel: threading.Event | None = None,
                on_place: Callable[[int], None] | None = None) -> int:
        """Join the line and wait for the model; return the ticket that :meth:`release` takes.

        ``on_place(place)`` is called on joining and whenever the place changes (outside the queue's lock; a
        failing callback never breaks the wait), last with 1 when the model is ours. A set ``cancel`` leaves the
        line and raises :class:`~dpkps_core.llm.backends.GenerationCancelled`."""
        with self._cond:
            ticket = next(self._tickets)
            self._line.append((ticket, str(label)))
        last: int | None = None
        try:
            while True:
                with self._cond:
                    place = self._place_locked(ticket)
                    if place != 1 and not (cancel is not None and cancel.is_set()):
                        if place == last:
                            self._cond.wait(CANCEL_POLL_S)
                            place = self._place_locked(ticket)
                if cancel is not None and cancel.is_set():
                    raise GenerationCancelled("Generation was cancelled while waiting for the model.")
                if place != last:
                    last = place
                    _notify(on_place, place)
                if place == 1:
                    return ticket
        except BaseException:
            self.release(ticket)
            raise

    def release(self, ticket: int) -> None:
        """Leave the line (the holder hands the model to the next ticket); unknown tickets are ignored."""
        with self._cond:
            self._line = [(t, label) for t, label in self._line if t != ticket]
            self._cond.notify_all()

    @contextlib.contextmanager
    def turn(self, label: str = "batch", *, cancel: threading.Event | None = None,
             on_place: Callable[[int], None] | None = None) -> Iterator[int]:
        """Hold the model for the block, after waiting in line (:meth:`acquire`); yields the ticket."""
        ticket = self.acquire(label, cancel=cancel, on_place=on_place)
        try:
            yield ticket
        finally:
            self.release(ticket)

    @contextlib.contextmanager
    def try_turn(self, label: str = "speed calibration") -> Iterator[bool]:
        """Hold the model for the block only if nobody uses it or waits for it: yields True then, else False at
        once (never waits, never jumps the line)."""
        with self._cond:
            free = not self._line
            if free:
                ticket = next(self._tickets)
                self._line.append((ticket, str(label)))
        if not free:
            yield False
            return
        try:
            yield True
        finally:
            self.release(ticket)

    def _place_locked(self, ticket: int) -> int:
        for i, (t, _) in enumerate(self._line):
            if t == ticket:
                return i + 1
        raise RuntimeError("a ticket left the line while waiting")  # pragma: no cover - release() is ours only


def _notify(on_place: Callable[[int], None] | None, place: int) -> None:
    if on_place is None:
        return
    try:
        on_place(place)
    except Exception:  # noqa: BLE001 - a progress callback must not break the wait
        import logging

        logging.getLogger(__name__).debug("on_place callback failed", exc_info=True)


def model_queue_of(backend: object) -> ModelQueue | None:
    """The backend's :class:`ModelQueue` (the local backends have one), or None (remote backends)."""
    queue = getattr(backend, "model_queue", None)
    return queue if isinstance(queue, ModelQueue) else None
