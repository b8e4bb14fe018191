"""Worker processes for the concurrent ledger test (tests/test_ledger_filter.py): importable by name, so that
``multiprocessing`` can start them with the ``spawn`` method (fresh interpreters, as separate CLI runs are)."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np


def admit_and_charge(root: str, pool: list[str], cap: float, seed: int, releases: int, barrier: Any,
                     results: Any) -> None:
    """Open the store in ``root`` (this run's cap setting ``cap``), wait at ``barrier`` for the other workers, then run ``releases`` admissions of
    random overlapping subsets of ``pool`` at random ε, charging one event after each. Reports to ``results``:
    (seed, [(admitted pool indices, ε), …], loop start, loop end, error or None)."""
    os.environ["DPKPS_LEDGER_DIR"] = root
    from dpkps_core.dp.events import PrivacyEvent
    from dpkps_core.ledger_store import LedgerStore, PersistentLedger

    rng = np.random.default_rng(seed)
    done: list[tuple[list[int], float]] = []
    error = None
    led = PersistentLedger(LedgerStore(root), pool, tool="worker", run=f"w{seed}", cap=cap)
    barrier.wait(timeout=120)
    start = time.monotonic()
    try:
        for _ in range(releases):
            chosen = np.sort(rng.choice(len(pool), size=int(rng.integers(len(pool) // 3, len(pool))), replace=False))
            eps = float(rng.choice([0.5, 1.0, 1.5]))
            ticket = led.admit([pool[i] for i in chosen], eps, what="concurrent test")
            ticket.charge(PrivacyEvent("test_mechanism", "vocabulary", eps, 1.0, 1.0 / eps, "a test release"))
            done.append((chosen[ticket.mask].tolist(), eps))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test with it
        error = f"{type(exc).__name__}: {exc}"
    results.put((seed, done, start, time.monotonic(), error))
