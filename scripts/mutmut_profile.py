"""Switch a scratch copy's ``[tool.mutmut]`` between the two mutation profiles of docs/TESTING.md.

mutmut 3 reads its configuration only from ``pyproject.toml``. The checked-in block is the ``dp`` profile (every
mechanism module of ``dpkps_core/dp/`` against the fast DP tests). The ``mechanisms`` profile mutates the mechanism
functions outside dp/ — private prediction's token step and batching, AugPE's votes and event, the pipeline's
release path, the per-document budgets and the persistent ledger's filter — and runs the tests that reach them.
Run it INSIDE the scratch copy (it rewrites that copy's pyproject.toml), then run mutmut with the patterns it
prints::

    python scripts/mutmut_profile.py mechanisms
    python -m mutmut run --max-children 2 $(python scripts/mutmut_profile.py mechanisms --patterns)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PROFILES: dict[str, dict[str, list[str]]] = {
    "dp": {
        "only_mutate": ["dpkps_core/dp/*"],
        "also_copy": [],
        "markers": ["not slow"],
        "tests": ["tests/dp/", "tests/ledger_store/test_filter.py"],
        "patterns": ["dpkps_core.dp.*"],
    },
    "mechanisms": {
        "only_mutate": ["dpkps_core/baselines/private_prediction.py", "dpkps_core/baselines/augpe.py",
                        "dpkps_core/method/pipeline.py", "dpkps_core/method/budget.py", "dpkps_core/ledger_store/store.py",
                        "dpkps_core/ledger_store/persistent.py"],
        # the app-side tests among them need the app's packages in mutmut's copy
        "also_copy": ["studio/", "app_pages/", "app.py", "assets/", "scripts/", "benchmarks/"],
        "markers": ["not slow and not browser and not model"],
        "tests": ["tests/dp/", "tests/baselines/", "tests/ledger_store/", "tests/method/test_budget_units.py",
                  "tests/method/test_pipeline.py", "tests/test_charge_first.py",
                  "tests/test_person_unit.py", "tests/test_neighbours_from_files.py", "tests/method/test_sampling.py"],
        # the mechanism functions only (a whole module would add its I/O and messages to the score)
        "patterns": [
            *(f"dpkps_core.baselines.private_prediction.x_{f}*" for f in
              ("clip_logits", "svt_distance", "_sample", "generate_batch", "buckets_for", "assign_batches",
               "batch_key")),
            *(f"dpkps_core.baselines.augpe.x_{f}*" for f in
              ("nn_votes", "noisy_votes", "select", "augpe_event", "_vote_epochs", "prompt_budget")),
            *(f"dpkps_core.method.pipeline.x_{f}*" for f in
              ("build_private_vocabulary", "term_counts", "extract_keyphrases", "build_density", "_admit",
               "vocabulary_step", "density_step")),
            "dpkps_core.method.budget.*",
            "dpkps_core.ledger_store.store.xǁLedgerStoreǁadmit*", "dpkps_core.ledger_store.store.xǁLedgerStoreǁkeys*",
            "dpkps_core.ledger_store.persistent.xǁPersistentLedgerǁadmit*",
            "dpkps_core.ledger_store.persistent.xǁPersistentLedgerǁcharge*",
        ],
    },
}


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def mutmut_block(name: str, root: Path = Path(".")) -> str:
    """The ``[tool.mutmut]`` table of profile ``name`` (test paths that do not exist in ``root`` are left out)."""
    p = PROFILES[name]
    tests = [t for t in p["tests"] if (root / t).exists()]
    lines = ["[tool.mutmut]", 'source_paths = ["dpkps_core/"]', f"only_mutate = {_toml_list(p['only_mutate'])}"]
    if p["also_copy"]:
        lines.append(f"also_copy = {_toml_list(p['also_copy'])}")
    lines.append(f'pytest_add_cli_args = ["-m", "{p["markers"][0]}", "-p", "no:randomly", "-q"]')
    lines.append(f"pytest_add_cli_args_test_selection = {_toml_list(tests)}")
    return "\n".join(lines) + "\n"


def write_profile(name: str, pyproject: Path = Path("pyproject.toml")) -> None:
    """Replace the ``[tool.mutmut]`` table of ``pyproject`` by profile ``name``'s."""
    text = pyproject.read_text(encoding="utf-8")
    block = mutmut_block(name, pyproject.parent)
    new, count = re.subn(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[|\Z)", block + "\n", text)
    if count != 1:
        raise SystemExit(f"{pyproject} has no single [tool.mutmut] table")
    pyproject.write_text(new, encoding="utf-8")


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in PROFILES:
        print(f"usage: mutmut_profile.py {{{'|'.join(PROFILES)}}} [--patterns]", file=sys.stderr)
        return 2
    if "--patterns" in argv[1:]:
        print(" ".join(f'"{p}"' if " " in p else p for p in PROFILES[argv[0]]["patterns"]))
        return 0
    write_profile(argv[0])
    print(f"[tool.mutmut] set to the {argv[0]} profile; run: python -m mutmut run --max-children 2 "
          f"$(python scripts/mutmut_profile.py {argv[0]} --patterns)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
