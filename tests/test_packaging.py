"""The installable package: `pip install .` gives every package, the app, the pinned dependencies and two commands.

The wheel is built from a copy of the checkout (so the checkout gets no build/ or egg-info folder), without build
isolation (setuptools comes with the venv: no network), and inspected; its files are then used from a folder
outside the checkout.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "requirements.txt", "app.py", "app_pages", "dpkps_core", "studio",
           ".streamlit")


def _packages_on_disk() -> set[str]:
    found = set()
    for top in ("dpkps_core", "studio"):
        for init in (ROOT / top).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                found.add(".".join(init.parent.relative_to(ROOT).parts))
    return found


def test_every_package_is_listed_in_pyproject() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    missing = _packages_on_disk() - listed
    assert not missing, f"pyproject.toml's package list misses {sorted(missing)}"
    assert {"dpkps_app", "dpkps_app.app_pages"} <= listed


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "secrets.toml"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation",
                           "--disable-pip-version-check", "-q", "-w", str(out)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (whl,) = out.glob("dpkps_studio-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_holds_every_module_page_and_data_file(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {str(p.relative_to(ROOT)) for top in ("dpkps_core", "studio") for p in (ROOT / top).rglob("*.py")
                if "__pycache__" not in p.parts}
    expected |= {f"dpkps_app/app_pages/{p.name}" for p in (ROOT / "app_pages").glob("*.py")}
    expected |= {"dpkps_app/app.py", "dpkps_app/.streamlit/config.toml"}
    assert not expected - names, f"missing from the wheel: {sorted(expected - names)[:10]}"
    assert not any(n.endswith("secrets.toml") or n.startswith("tests/") for n in names)


@pytest.mark.slow
def test_wheel_declares_the_pinned_dependencies_and_two_commands(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(zf.read(n).decode() for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        entry = next(zf.read(n).decode() for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
    requires = {line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")}
    pins = {line.split("#")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()}
    pins.discard("")
    assert pins <= {r.split(";")[0].strip() for r in requires}
    assert "dpkps = dpkps_core.cli:main" in entry
    assert "dpkps-studio = studio.launch:main" in entry


@pytest.mark.slow
def test_installed_files_work_outside_the_checkout(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = ("import dpkps_core, studio.launch as l; from dpkps_core.cli import main; "
            "print(dpkps_core.__file__); print(l.app_folder()); raise SystemExit(main(['ledger', '--help']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=elsewhere, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    core_file, app_dir = proc.stdout.splitlines()[:2]
    assert Path(core_file).is_relative_to(site)
    assert Path(app_dir) == site / "dpkps_app"
    assert (Path(app_dir) / "app_pages" / "1_corpus.py").is_file()
