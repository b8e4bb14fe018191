"""The layering rules of docs/ARCHITECTURE.md, enforced by reading every module's imports (issue 12)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "dpkps_core"


def _imports(path: Path) -> set[str]:
    """Every module name imported by ``path`` (absolute and relative, at any depth of the file)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
    return out


def _is_cli(path: Path) -> bool:
    rel = path.relative_to(CORE).as_posix()
    return rel.startswith("cli") or rel == "__main__.py"


def _core_modules() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", [p for p in _core_modules() if not _is_cli(p)], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_core_never_imports_streamlit_studio_or_a_cli_module(path: Path) -> None:
    bad = {m for m in _imports(path)
           if m.split(".")[0] in ("streamlit", "studio") or m.startswith("dpkps_core.cli")}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", sorted((CORE / "dp").glob("*.py")), ids=lambda p: p.name)
def test_dp_imports_nothing_of_llm_evaluation_or_baselines(path: Path) -> None:
    forbidden = ("dpkps_core.llm", "dpkps_core.evaluation", "dpkps_core.baselines", "dpkps_core.pipeline",
                 "dpkps_core.audit")
    bad = {m for m in _imports(path) if m.startswith(forbidden)}
    assert not bad, f"dp/{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", sorted((ROOT / "app_pages").glob("*.py")) + sorted((ROOT / "studio").glob("*.py")),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_app_side_holds_no_dp_mechanism(path: Path) -> None:
    """Pages and studio call the core's steps; they never run a DP mechanism themselves."""
    bad = {m for m in _imports(path) if m.startswith(("dpkps_core.dp.histogram", "dpkps_core.dp.kde",
                                                       "dpkps_core.dp.vocabulary.privatize", "dpkps_core.dp.rff",
                                                       "dpkps_core.dp.contributions"))}
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_no_run_folder_file_name_literal_outside_its_owner() -> None:
    names = ('"sequences.jsonl"', '"privacy_report.json"', '"private_vocabulary.json"', '"run_config.json"',
             '"split.json"', '"documents.jsonl"', '"audit_log.jsonl"', '"generation_failures.jsonl"',
             '"evaluation.json"')
    offenders = []
    for path in _core_modules() + sorted((ROOT / "studio").glob("*.py")):
        if path.name == "runfolder.py":
            continue
        text = path.read_text(encoding="utf-8")
        offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n in text]
    assert not offenders, offenders


def test_one_owner_for_parameter_bounds_and_one_meaning_per_method_list() -> None:
    """Every parameter bound lives in config.py; no module defines a bare ``METHODS`` (sampling methods and
    generation methods are different things with different names)."""
    offenders = []
    for path in _project_modules():
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.match(r"(LIMITS|\w+_LIMITS)\s*=", line) and path != CORE / "config.py":
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()[:60]}")
            if re.match(r"METHODS\s*=", line):
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()[:60]}")
    assert not offenders, offenders


def test_the_page_labels_every_sampling_method() -> None:
    from dpkps_core.sampling import SAMPLING_METHODS

    text = (ROOT / "app_pages" / "4_densities.py").read_text(encoding="utf-8")
    block = text[text.index("SAMPLING_METHOD_LABELS = {"):]
    block = block[: block.index("}")]
    assert re.findall(r'^\s+"([a-z-]+)":', block, flags=re.M) == list(SAMPLING_METHODS)


def _project_modules() -> list[Path]:
    """Every Python file of the project (the core, the app, its pages, benchmarks, scripts and tests)."""
    files = [ROOT / "app.py"]
    for folder in ("dpkps_core", "studio", "app_pages", "benchmarks", "scripts", "tests"):
        files += [p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)


def test_studio_state_is_split_and_nothing_imports_it() -> None:
    """Issue 12: the app's second orchestrator is gone — session keys and accessors in ``studio/session.py``, the
    thin actions that call the core in ``studio/steps.py`` (+ ``generation_steps``, ``evaluation_steps``)."""
    assert not (ROOT / "studio" / "state.py").exists()
    for name in ("session.py", "steps.py", "resources.py", "jobs.py"):
        assert (ROOT / "studio" / name).is_file(), name
    offenders = [p.relative_to(ROOT).as_posix() for p in _project_modules()
                 if any(m == "studio.state" or m.startswith("studio.state.") for m in _imports(p))]
    assert not offenders, offenders
