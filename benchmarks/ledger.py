"""Benchmark of the persistent unit ledger (docs/DESIGN.md §2.0: fast at 200,000 units × many releases).

``python -m benchmarks.ledger [--units 200000] [--releases 50]`` prints one ``name: value`` row per figure, in a
temporary ledger folder (never the user's):

* ``admit_<n>_units_fresh_seconds`` — the first admission of n new units (keys hashed, units added, charged);
* ``admit_<n>_units_seconds`` — an admission of the same n units in a well-used store (after ``--releases``
  releases of the corpus and of an overlapping second corpus, each with an event), including the HMAC of the n
  unit strings;
* ``charge_event_seconds`` — attaching one event to its admission;
* ``view_<n>_units_seconds`` — the corpus view the sidebar and ``ledger --corpus`` read (largest spend, caps,
  the releases that touched the units), and ``ledger_command_seconds`` — the whole ``ledger --corpus`` listing
  through the CLI's formatter;
* ``store_bytes`` — the store's size; ``participation_bytes_per_release`` — the mean size of a release's
  compressed participation record.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def _units(n: int, offset: int = 0) -> list[str]:
    return [f"document\x1fA private note number {i} about a visit and its follow-up\x1fclass {i % 5}"
            for i in range(offset, offset + n)]


def _mean_bitmap_bytes(path: Path) -> float:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return float(conn.execute("SELECT AVG(LENGTH(bitmap)) FROM releases").fetchone()[0] or 0.0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--units", type=int, default=200_000)
    ap.add_argument("--releases", type=int, default=50)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dpkps-ledger-bench-") as tmp:
        os.environ["DPKPS_LEDGER_DIR"] = tmp
        from dpkps_core.cli.ledger import format_view
        from dpkps_core.dp.events import PrivacyEvent
        from dpkps_core.ledger_store import LedgerStore, PersistentLedger

        n = args.units
        corpus, other = _units(n), _units(n, offset=n // 2)      # two corpora sharing half their units
        store = LedgerStore(Path(tmp))
        led = PersistentLedger(store, corpus, tool="benchmark", run="bench", cap=None)
        led2 = PersistentLedger(store, other, tool="benchmark", run="bench-2", cap=None)

        def release(ledger: PersistentLedger, units: list[str], eps: float) -> float:
            t0 = time.perf_counter()
            ticket = ledger.admit(units, eps, what="benchmark release")
            took = time.perf_counter() - t0
            ticket.charge(PrivacyEvent("benchmark", "vocabulary", eps, 1.0, 1.0 / eps, "benchmark"))
            return took

        fresh = release(led, corpus, 0.1)
        for k in range(args.releases):
            release(led if k % 2 == 0 else led2, corpus if k % 2 == 0 else other, 0.1)
        used = min(release(led, corpus, 0.1) for _ in range(3))
        t0 = time.perf_counter()
        small = led.admit(corpus[:10], 0.1, what="benchmark release")
        admit_small = time.perf_counter() - t0
        t0 = time.perf_counter()
        small.charge(PrivacyEvent("benchmark", "kde", 0.1, 1.0, 10.0, "benchmark"))
        charge = time.perf_counter() - t0
        led._view_cache = None                                      # time a cold view (the cache is per change)
        t0 = time.perf_counter()
        view = led.view()
        view_s = time.perf_counter() - t0
        fresh_led = PersistentLedger(LedgerStore(Path(tmp)), corpus, tool="cli ledger", cap=None)
        t0 = time.perf_counter()
        text = format_view(fresh_led.view(), epsilon=1.0)
        ledger_cmd = time.perf_counter() - t0
        totals = store.totals()
        size = store.path.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob("ledger.sqlite-*"))
        rows = {
            f"admit_{n}_units_fresh_seconds": fresh,
            f"admit_{n}_units_seconds": used,
            "admit_10_units_seconds": admit_small,
            "charge_event_seconds": charge,
            f"view_{n}_units_seconds": view_s,
            "ledger_command_seconds": ledger_cmd,
            "store_units": totals["units"],
            "store_releases": totals["releases"],
            "releases_touching_corpus": len(view.releases),
            "store_bytes": size,
            "participation_bytes_per_release": _mean_bitmap_bytes(store.path),
            "ledger_command_lines": text.count("\n") + 1,
        }
        for name, value in rows.items():
            print(f"{name}: {value:.3f}" if isinstance(value, float) else f"{name}: {value}")


if __name__ == "__main__":
    main()
