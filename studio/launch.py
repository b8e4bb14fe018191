"""``dpkps-studio``: start the app from an installed package or from a checkout (same as ``streamlit run app.py``).

The wheel installs the router and its pages as the package ``dpkps_app`` (``app.py``, ``app_pages/``,
``.streamlit/config.toml``: localhost only, no usage statistics); in a checkout they are the repository's root.
Streamlit reads ``.streamlit/config.toml`` from the working folder, so the app starts from the app's folder.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Sequence


def app_folder() -> Path:
    """The folder that holds ``app.py`` and ``app_pages/``: the installed ``dpkps_app`` package, else the checkout."""
    spec = importlib.util.find_spec("dpkps_app")
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            if (Path(loc) / "app.py").is_file():
                return Path(loc)
    root = Path(__file__).resolve().parents[1]
    if (root / "app.py").is_file():
        return root
    raise SystemExit("error: the DP-KPS Studio app files (app.py, app_pages/) are not installed.")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``streamlit run app.py [ARGS…]`` in the app's folder, offline (no model hub is ever contacted)."""
    from streamlit.web import cli as stcli

    folder = app_folder()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.chdir(folder)
    sys.argv = ["streamlit", "run", str(folder / "app.py"), *(sys.argv[1:] if argv is None else argv)]
    return int(stcli.main() or 0)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
