"""The real app for the browser tests (tests/studio/test_browser*.py): Debian's Chromium, and ``streamlit run app.py``
on a free localhost port, waited for until healthy and stopped afterwards."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator, Mapping

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_chromium() -> None:
    """scripts/test.sh installs Debian's chromium when it is missing; without it the browser tests fail (never
    skip)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing; install it with `apt-get install -y chromium` (scripts/test.sh does "
                    "this as root)." + (" (CI=true: the browser test must run)" if in_ci() else ""))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: Mapping[str, str], log_path: Path, *, start_timeout: float = 90.0,
                     port: int | None = None) -> Iterator[str]:
    """``streamlit run app.py`` with ``env`` (its output in ``log_path``) on ``port`` (a free one when not given: a
    login test must know it beforehand, for the ``redirect_uri`` of the app's ``[auth]`` secrets); yields its URL once
    ``/_stcore/health`` answers ok (the test fails with the log's tail when it does not start), then stops it."""
    port = port or free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                 "--server.headless", "true"], cwd=ROOT, env=dict(env), stdout=log,
                                stderr=subprocess.STDOUT)
        url = f"http://localhost:{port}"
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                log.flush()
                pytest.fail("streamlit did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.5)
        try:
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
