"""Re-check mutmut survivors against chosen test files, many mutants in one process (docs/TESTING.md
"Mutation testing").

mutmut 3.8.1's trampolines read ``MUTANT_UNDER_TEST`` on every call, so one Python process can run the given
test files once per mutant without mutmut's per-mutant fork and stats pass. A mutant whose run fails (or breaks
collection) is killed; one whose run passes survives. Run it inside the ``mutants/`` folder of a mutmut run::

    cd /tmp/mut-run/mutants
    python -m mutmut results | grep -E "survived|no tests" | cut -d: -f1 > /tmp/names.txt
    python ../scripts/mutmut_recheck.py /tmp/names.txt tests/dp/test_mut_vocabulary.py

Note: cached values built from unmutated code before a mutant is switched on (``functools.lru_cache`` such as
``dpkps_core.dp.rng._measurement``) are shared across mutants here, as they are in mutmut's forked workers.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys

import pytest


def recheck(names: list[str], tests: list[str]) -> dict[str, bool]:
    """Run ``tests`` once per mutant name; returns name → killed."""
    killed: dict[str, bool] = {}
    for name in names:
        os.environ["MUTANT_UNDER_TEST"] = name
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                rc = pytest.main(["-x", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", *tests])
            except BaseException:  # noqa: BLE001 - a mutant that breaks the run is killed
                rc = 99
        killed[name] = rc != 0
        print("killed  " if killed[name] else "SURVIVED", name, flush=True)
    return killed


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: mutmut_recheck.py NAMES_FILE TEST_PATH...", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        names = [line.strip() for line in fh if line.strip()]
    result = recheck(names, argv[1:])
    return 0 if all(result.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
