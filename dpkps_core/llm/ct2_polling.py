"""CTranslate2 decoding without a per-token Python callback (issue 35 §8; used by :mod:`dpkps_core.llm.ct2`).

CTranslate2 calls a ``callback`` for every token of every row and takes the GIL for each call. On a server whose
other threads hold the GIL (Streamlit sessions rerunning their scripts) each token then waits for it: a batch of
16 rows × 96 tokens on 2 cores took 48.9 s with a thread collecting garbage beside it, against 9.2 s alone (9.3 s
alone without the callback, 8.8–12.1 s without it beside the same thread). So a batch is submitted asynchronously,
with no callback, and the calling thread looks every :data:`POLL_S` seconds:

* for a cancel — answered at once with :class:`CancelledInFlight`; CTranslate2 cannot stop a batch it decodes, so
  the engine waits for it in the background (:func:`finish_then_release`, its rows discarded) before it takes the
  next batch;
* for the progress — the step the measured seconds per step say the batch has reached.

Only sizes and times are handled here; prompts never leave the process (docs/DESIGN.md §2.5).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

log = logging.getLogger(__name__)

#: Seconds between two looks at a decoding batch (cancel, progress): a few GIL takings a second, not one per token.
POLL_S = 0.2


class CancelledInFlight(Exception):
    """A cancel arrived while an asynchronous batch was decoding: ``pending`` are its unfinished results, which
    the engine waits for (:func:`finish_then_release`) before it takes the next batch."""

    def __init__(self, pending: list[Any]) -> None:
        super().__init__("cancelled in flight")
        self.pending = pending


def decode_polled(generator: Any, tokens: list[list[str]], kwargs: dict[str, Any], *, max_tokens: int,
                  cancel: threading.Event | None, on_step: Callable[[int, int], None] | None,
                  step_seconds: float | None) -> list[list[int]]:
    """``generator.generate_batch(tokens, asynchronous=True, **kwargs)`` with no callback: the generated ids of
    each row. Looks every :data:`POLL_S` seconds for ``cancel`` (raises :class:`CancelledInFlight`) and, with
    ``step_seconds`` (the measured seconds per decoding step), reports ``on_step(step, max_tokens)`` — the step
    reached by the time gone by, below ``max_tokens``. CTranslate2's errors (out of memory…) propagate."""
    t0 = time.monotonic()
    pending = list(generator.generate_batch(tokens, asynchronous=True, **kwargs))
    reported = 0
    while not all(r.done() for r in pending):
        if cancel is not None:
            if cancel.wait(POLL_S):
                raise CancelledInFlight(pending)
        else:
            time.sleep(POLL_S)
        if on_step is not None and step_seconds:
            reached = min(max_tokens - 1, int((time.monotonic() - t0) / step_seconds))
            if reached > reported:
                reported = reached
                try:
                    on_step(reached, int(max_tokens))
                except Exception:  # noqa: BLE001 - a progress callback must not break generation
                    log.debug("on_step callback failed", exc_info=True)
    results = [r.result() for r in pending]
    if cancel is not None and cancel.is_set():
        raise CancelledInFlight([])
    return [[int(t) for t in r.sequences_ids[0]] for r in results]


def finish_then_release(pending: list[Any], lock: threading.Lock) -> None:
    """Wait for a cancelled batch's results (discarded), then release the engine's ``lock`` for the next batch."""
    try:
        for result in pending:
            try:
                result.result()
            except Exception:  # noqa: BLE001 - the batch was cancelled: its outcome no longer matters
                pass
    finally:
        lock.release()
