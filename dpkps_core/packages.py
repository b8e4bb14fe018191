"""Locating data packages without importing them (ASSETS: their ``__init__`` may be heavy or broken)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path


def find_package_dir(module: str, distribution: str, marker: str) -> Path | None:
    """The installed folder that contains ``marker`` (a file or sub-folder) for ``module`` / ``distribution``,
    or ``None`` when the package is not installed. Never imports the package."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            if (Path(loc) / marker).exists():
                return Path(loc)
    try:
        dist = importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        posix = str(f).replace("\\", "/")
        if posix.endswith("/" + marker) or posix == marker or f"/{marker}/" in f"/{posix}":
            for parent in Path(str(dist.locate_file(f))).parents:
                if (parent / marker).exists():
                    return parent
    return None
