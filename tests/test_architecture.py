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
    forbidden = ("dpkps_core.llm", "dpkps_core.evaluation", "dpkps_core.baselines", "dpkps_core.method.pipeline",
                 "dpkps_core.audit")
    bad = {m for m in _imports(path) if m.startswith(forbidden)}
    assert not bad, f"dp/{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize("path", sorted((CORE / "dp").glob("*.py")), ids=lambda p: p.name)
def test_dp_is_the_floor_no_import_runs_back_up(path: Path) -> None:
    """The mechanisms are the core's lowest floor: they import only each other and the ground (errors, progress) —
    never the admission layer (budget.py), the corpus, the pipeline or anything above (issue 32 §2: the one arrow
    that ran back up, dp/count.py → budget.admitted_indices, is gone: budget.release_unit_count admits and counts)."""
    ground = ("dpkps_core.dp", "dpkps_core.errors", "dpkps_core.progress")
    bad = {m for m in _imports(path) if m.startswith("dpkps_core") and not m.startswith(ground)}
    assert not bad, f"dp/{path.name} imports {sorted(bad)}"


#: The core's floors, ground first (docs/ARCHITECTURE.md "dpkps_core/"): a room imports only rooms on LOWER floors
#: (and its own folder). Two rooms on one floor never import each other, so no arrow runs back up and no folder
#: circle can form (issue 32 §2).
CORE_FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "progress", "packages"),
    ("device", "corpus", "dp"),
    ("embeddings", "risk", "ledger_store", "records"),
    ("method",),
    ("llm", "audit"),
    ("evaluation",),
    ("baselines", "dossier"),
    ("cli", "__init__", "__main__"),
)


def _room(module: str) -> str | None:
    """The core room of a dotted module name (``dpkps_core.method.pipeline`` → ``method``), None outside the core."""
    parts = module.split(".")
    if parts[0] != "dpkps_core":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _floor(room: str) -> int:
    for i, rooms in enumerate(CORE_FLOORS):
        if room in rooms:
            return i
    raise AssertionError(f"dpkps_core/{room} is on no floor of CORE_FLOORS: give it one (tests/test_architecture.py)")


@pytest.mark.parametrize("path", _core_modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_import_runs_back_up_a_floor_of_the_core(path: Path) -> None:
    """Every import of a core module goes down a floor or stays in its own room (issue 32 §2: ledger_store no longer
    reads the method's config or unit strings; the bundle, which carries the dossier, sits with the dossier)."""
    own = path.relative_to(CORE).parts[0].removesuffix(".py")
    up = sorted(m for m in _imports(path) - {"dpkps_core"}
                if (room := _room(m)) and room != own and _floor(room) >= _floor(own)
                and not (own in ("__init__", "__main__") and room in ("cli", "__init__", "__main__")))
    assert not up, f"{path.relative_to(ROOT)} (floor {_floor(own) + 1}) imports {up}"


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
            if re.match(r"(LIMITS|\w+_LIMITS)\s*=", line) and path != CORE / "method" / "config.py":
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()[:60]}")
            if re.match(r"METHODS\s*=", line):
                offenders.append(f"{path.relative_to(ROOT)}: {line.strip()[:60]}")
    assert not offenders, offenders


def test_the_page_labels_every_sampling_method() -> None:
    from dpkps_core.method.sampling import SAMPLING_METHODS

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


def test_studio_state_is_the_typed_state_and_nothing_else_holds_session_keys() -> None:
    """Issue 32 §1: the session's state is one typed object (``studio/state.py``: dataclasses and the accessors of
    ``st.session_state``), the accessors that derive from it in ``studio/session.py``, the thin actions that call the
    core in ``studio/steps.py`` (+ ``generation_steps``, ``evaluation_steps``). No other module of the app reads or
    writes ``st.session_state``: no string key outside the state module (issue 12: no second orchestrator)."""
    for name in ("state.py", "session.py", "steps.py", "resources.py", "jobs.py"):
        assert (ROOT / "studio" / name).is_file(), name
    tree = ast.parse((ROOT / "studio" / "state.py").read_text(encoding="utf-8"))
    typing_only = {id(n) for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
                   for n in ast.walk(node)}
    state_imports = {f"{node.module}.{a.name}" for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and id(node) not in typing_only and node.module
                     for a in node.names} | {a.name for node in ast.walk(tree)
                                             if isinstance(node, ast.Import) and id(node) not in typing_only
                                             for a in node.names}
    state_imports = {m for m in state_imports if m.startswith(("studio", "dpkps_core"))}
    allowed = ("studio.defaults", "dpkps_core.method.config")  # names imported from them count as their module
    assert all(m == "studio" or m.startswith(allowed) for m in state_imports), state_imports
    offenders = [p.relative_to(ROOT).as_posix() for p in [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py")),
                                                          *sorted((ROOT / "studio").glob("*.py"))]
                 if p.name != "state.py" and re.search(r"\b(st|streamlit)\.session_state\b",
                                                       p.read_text(encoding="utf-8"))]
    assert not offenders, offenders


# ---------------------------------------------------------------------------------------- size and import cycles
# docs/ARCHITECTURE.md: no module over 500 lines, no function over 100 lines, no import cycle — in dpkps_core/,
# studio/ and app_pages/ (the cycle rule: dpkps_core/ and studio/, whose modules import each other by name).

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 100

# No exceptions: every module, function and import graph of dpkps_core/, studio/ and app_pages/ is within the limits
# (the allowlists of the redesign's first step have been emptied and removed).


def _sized_modules() -> list[Path]:
    files: list[Path] = []
    for folder in ("dpkps_core", "studio", "app_pages"):
        files += [p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    return sorted(files)


def _module_lines() -> dict[str, int]:
    return {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").splitlines()) for p in _sized_modules()}


def _function_lines() -> dict[str, int]:
    """``path::name`` → lines (``end_lineno − lineno + 1``, decorators excluded) of every function and method,
    nested ones included (a nested function's lines also count in its parent's)."""
    out: dict[str, int] = {}
    for path in _sized_modules():
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                key = f"{rel}::{node.name}"
                out[key] = max(out.get(key, 0), node.end_lineno - node.lineno + 1)
    return out


def test_no_module_over_500_lines() -> None:
    lines = _module_lines()
    over = {f: n for f, n in lines.items() if n > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them): {over}"


def test_no_function_over_100_lines() -> None:
    lines = _function_lines()
    over = {f: n for f, n in lines.items() if n > MAX_FUNCTION_LINES}
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (split them): {over}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports, from the AST: absolute and package-relative imports at any depth
    (imports inside functions count: a lazy import that closes a cycle still couples the two modules, it only
    defers the failure). ``from a.b import c`` is an edge to the module ``a.b.c`` when there is one, else to
    ``a.b``; a name that is not a project module resolves to its closest enclosing project module."""
    files = {_module_name(p): p for folder in ("dpkps_core", "studio")
             for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts}

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(owner(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets.update(f"{module}.{a.name}" if f"{module}.{a.name}" in files else owner(module)
                               for a in node.names)
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[tuple[str, ...]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(tuple(sorted(component)))
    return sorted(out)


def test_the_cycle_finder_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [("a", "b", "c")]


def test_no_import_cycle_in_the_core_or_the_app_side() -> None:
    found = _cycles(_import_graph())
    assert not found, f"import cycles (move the shared part into its own module): {found}"


# ---------------------------------------------------------------------------------------------- the llm/ package
# docs/ARCHITECTURE.md (llm/): one owner per name. The backend interface, the OpenAI-compatible client, the local
# models, the factory, the retry delay and the run object are separate modules with no cycle among them; only the
# package's __init__ re-exports, and callers import a name from the module that defines it.

LLM = CORE / "llm"


def _top_level_definitions(path: Path) -> set[str]:
    """Names a module defines itself at top level (functions, classes, assignments), not the ones it imports."""
    out: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


def test_llm_has_no_cycle_no_long_function_and_no_new_long_module() -> None:
    graph = {m: {t for t in ts if t.startswith("dpkps_core.llm")} for m, ts in _import_graph().items()
             if m.startswith("dpkps_core.llm")}
    assert "dpkps_core.llm.backends" in graph and "dpkps_core.llm.local" in graph
    assert not _cycles(graph), _cycles(graph)
    long_functions = {f: n for f, n in _function_lines().items()
                      if f.startswith("dpkps_core/llm/") and n > MAX_FUNCTION_LINES}
    assert not long_functions, long_functions
    long_modules = {f: n for f, n in _module_lines().items() if f.startswith("dpkps_core/llm/")
                    and n > MAX_MODULE_LINES}
    assert not long_modules, long_modules


@pytest.mark.parametrize("path", sorted(p for p in LLM.glob("*.py") if p.name != "__init__.py"), ids=lambda p: p.name)
def test_no_llm_module_re_exports_another_modules_names(path: Path) -> None:
    """Every name an llm/ module imports from the project is used there (an unused import is a re-export in
    disguise), and its ``__all__``, if any, lists only its own names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("dpkps_core")):
            imported.update(a.asname or a.name for a in node.names)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    assert not imported - used, f"{path.name} imports {sorted(imported - used)} without using them (a re-export)"
    exported = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
    foreign = {name for names in exported for name in names} - _top_level_definitions(path)
    assert not foreign, f"{path.name} lists names of other modules in __all__: {sorted(foreign)}"


def test_callers_import_llm_names_from_the_module_that_defines_them() -> None:
    """``from dpkps_core.llm.<module> import name`` anywhere in the project: ``name`` is defined in ``<module>``
    (or is one of its submodules), never a name that module imported from elsewhere."""
    owners = {p.stem: _top_level_definitions(p) for p in LLM.glob("*.py") if p.name != "__init__.py"}
    offenders = []
    for path in _project_modules():
        in_llm = path.parent == LLM
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            module = node.module or ""
            if module.startswith("dpkps_core.llm."):
                stem = module.split(".")[2]
            elif in_llm and node.level == 1 and module:
                stem = module
            else:
                continue
            wrong = [a.name for a in node.names if stem in owners and a.name not in owners[stem]]
            if wrong:
                offenders.append(f"{path.relative_to(ROOT)}: {module or stem} {wrong}")
    assert not offenders, offenders


# ------------------------------------------------------------------------------------ one public surface per package
# docs/ARCHITECTURE.md: a module exports only the names it defines; a package's __init__.py is the only place that
# re-exports. The llm/ rules above, generalised to every module of dpkps_core/.


def _names_used(tree: ast.AST) -> set[str]:
    """Names a module reads, including those inside string annotations (``"Corpus"`` under TYPE_CHECKING)."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    annotations = [n.annotation for n in ast.walk(tree) if isinstance(n, (ast.arg, ast.AnnAssign))]
    annotations += [n.returns for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for node in annotations:
        for sub in ast.walk(node) if node is not None else ():
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                try:
                    used |= {n.id for n in ast.walk(ast.parse(sub.value, mode="eval")) if isinstance(n, ast.Name)}
                except SyntaxError:
                    continue
    return used


def _project_names_imported_but_unused(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("dpkps_core")):
            imported.update(a.asname or a.name for a in node.names)
    return imported - _names_used(tree)


@pytest.mark.parametrize("path", [p for p in _core_modules() if p.name != "__init__.py"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_core_module_imports_a_name_it_does_not_use(path: Path) -> None:
    """An unused import of a project name is a re-export in disguise: callers must import it from its owner."""
    unused = _project_names_imported_but_unused(path)
    assert not unused, f"{path.relative_to(ROOT)} imports {sorted(unused)} without using them (a re-export)"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
    foreign = {name for names in exported for name in names} - _top_level_definitions(path)
    assert not foreign, f"{path.relative_to(ROOT)} lists names of other modules in __all__: {sorted(foreign)}"


def test_the_unused_import_rule_sees_a_planted_re_export(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
                       "from dpkps_core.method.config import LIMITS, SamplingConfig  # noqa: F401\n"
                       "if TYPE_CHECKING:\n    from dpkps_core.corpus import Corpus\n"
                       "def f(c: 'Corpus') -> SamplingConfig:\n    return SamplingConfig()\n", encoding="utf-8")
    assert _project_names_imported_but_unused(planted) == {"LIMITS"}


def test_callers_import_core_names_from_the_module_that_defines_them() -> None:
    """``from dpkps_core.<module> import name`` anywhere in the project (a module, not a package): ``name`` is
    defined in that module (or is one of its submodules), never a name it imported from elsewhere."""
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in _core_modules()
               if p.name != "__init__.py"}
    owners: dict[str, set[str]] = {}
    offenders = []
    for path in _project_modules():
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module not in modules:
                continue
            if module not in owners:
                owners[module] = _top_level_definitions(modules[module]) | _guarded_definitions(modules[module])
            wrong = [a.name for a in node.names if a.name not in owners[module] and f"{module}.{a.name}" not in modules]
            if wrong:
                offenders.append(f"{path.relative_to(ROOT)}: {module} {wrong}")
    assert not offenders, offenders


def _guarded_definitions(path: Path) -> set[str]:
    """Names defined inside top-level ``if``/``try`` blocks (optional dependencies, platform switches)."""
    out: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.If, ast.Try)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.add(sub.name)
                elif isinstance(sub, ast.Assign):
                    out.update(t.id for t in sub.targets if isinstance(t, ast.Name))
    return out
