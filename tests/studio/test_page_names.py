"""The app's pages are addressed by name, never by position (issue 32 §1).

Code calls ``page_header("densities", …)``, ``next_button(…)``, ``go_to(…)``, ``studio.page(…)`` and builds every
"page N" users read with ``studio.page_ref`` / ``studio.pages_ref``, so renumbering the flow is one edit in
``studio.PAGES``. These tests scan the app's sources (``app.py``, ``app_pages/``, ``studio/``) so that no numeric
page index or literal "page N" comes back.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from studio import PAGES, next_page, page, page_ref, pages_ref

ROOT = Path(__file__).resolve().parents[2]

#: Functions whose first argument(s) are page names (called as ``navigation.go_to`` or a bare imported name).
PAGE_ARG_FUNCTIONS = {"page_header": 1, "next_button": 1, "go_to": 1, "page": 1, "page_ref": 1, "pages_ref": 2,
                      "next_page": 1}

#: Functions that only forward a page name they were given (their own calls use a variable on purpose).
FORWARDERS = {("studio/navigation.py", "page_header"), ("studio/navigation.py", "next_button"),
              ("studio/navigation.py", "go_to")}

#: A page number written into text: "page 4", "Page 1's", "pages 2–5".
LITERAL_PAGE = re.compile(r"\b[Pp]ages? [1-9]")


def _sources() -> list[Path]:
    """The app's own sources; ``studio/__init__.py`` defines the registry and the lookups, so it is left out."""
    files = [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py")), *sorted((ROOT / "studio").glob("*.py"))]
    return [p for p in files if p.name != "__init__.py" or p.parent.name != "studio"]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _page_calls(path: Path) -> list[tuple[int, str, list[ast.expr]]]:
    """(line, function, page-name arguments) of every call in ``path`` that takes page names, outside forwarders."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and (_rel(path), node.name) in FORWARDERS:
            skipped |= {id(n) for n in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in skipped:
            name = _called_name(node)
            if name in PAGE_ARG_FUNCTIONS:  # the session's state, passed first to a widget, is no page name
                args = [a for a in node.args if not (isinstance(a, ast.Name) and a.id == "state")]
                found.append((node.lineno, name, args[:PAGE_ARG_FUNCTIONS[name]]))
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string expressions that are docstrings or bare string statements (never shown to users)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            for stmt in body if isinstance(body, list) else []:
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str):
                    out.add(id(stmt.value))
    return out


def test_the_scan_sees_the_app() -> None:
    """The scans below read every page and the studio package (a moved folder must not make them pass vacuously)."""
    names = {_rel(p) for p in _sources()}
    assert {spec.path for spec in PAGES} <= names and "app.py" in names and "studio/widgets.py" in names
    calls = [c for p in _sources() for c in _page_calls(p)]
    assert {fn for _, fn, _ in calls} >= {"page_header", "next_button", "go_to", "page_ref"}
    assert sum(fn == "page_header" for _, fn, _ in calls) == len(PAGES)      # every page has its header


def test_pages_are_called_by_existing_names_never_by_number() -> None:
    known = {spec.name for spec in PAGES}
    bad = []
    for path in _sources():
        for line, fn, args in _page_calls(path):
            for arg in args:
                if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                    bad.append(f"{_rel(path)}:{line}: {fn}({ast.unparse(arg)}) — not a page name literal")
                elif arg.value not in known:
                    bad.append(f"{_rel(path)}:{line}: {fn}({arg.value!r}) — no page has this name")
    assert not bad, "\n".join(bad)


def test_no_literal_page_number_in_user_facing_text() -> None:
    """Every "page N" users read is built by page_ref/pages_ref (docstrings and comments may still say "page 4")."""
    bad = []
    for path in _sources():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and LITERAL_PAGE.search(node.value):
                bad.append(f"{_rel(path)}:{node.lineno}: {node.value[:80]!r}")
    assert not bad, "\n".join(bad)


def test_registry_names_numbers_and_files_agree() -> None:
    assert [spec.number for spec in PAGES] == list(range(1, len(PAGES) + 1))
    assert [spec.name for spec in PAGES] == ["corpus", "budget", "private-vocabulary", "densities", "sequences",
                                             "generate", "evaluate", "export", "audit"]
    for spec in PAGES:
        assert page(spec.name) is spec and spec.url_path == spec.name
        assert spec.title == f"{spec.number} · {spec.label}"
        assert Path(spec.path).name.startswith(f"{spec.number}_")              # the file name carries the number
        assert (ROOT / spec.path).is_file()


def test_unknown_page_name_is_a_clear_error() -> None:
    with pytest.raises(LookupError, match=r"No app page is named 'density'.*densities"):
        page("density")
    with pytest.raises(LookupError):
        page_ref("page 4")


def test_page_refs_and_next_page() -> None:
    assert page_ref("densities") == "page 4"
    assert page_ref("export", titled=True) == "page 8 (Export)"
    assert pages_ref("budget", "sequences") == "pages 2–5"
    with pytest.raises(ValueError):
        pages_ref("sequences", "budget")
    assert next_page("corpus") is page("budget") and next_page("audit") is None
    assert [next_page(a.name) for a in PAGES[:-1]] == list(PAGES[1:])
