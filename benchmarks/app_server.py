"""``streamlit run app.py`` on a free localhost port for the benchmarks and the browser tests (one starter for both):
waited for until ``/_stcore/health`` answers, stopped afterwards."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A free localhost TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def app_server(env: Mapping[str, str], log_path: Path, *, start_timeout: float = 120.0, port: int | None = None,
               fail: Callable[[str], Any] | None = None) -> Iterator[str]:
    """``streamlit run app.py`` with ``env`` (its output in ``log_path``); yields its URL once ``/_stcore/health``
    answers ok, then stops it. When it does not start: ``fail`` (e.g. ``pytest.fail``) with the log's tail, else a
    RuntimeError. ``port``: a port chosen beforehand (a login's redirect address must know it), else a free one."""
    port = port or free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                 "--server.headless", "true"], cwd=ROOT, env=dict(env), stdout=log,
                                stderr=subprocess.STDOUT)
        url = f"http://localhost:{port}"
        deadline = time.monotonic() + start_timeout
        try:
            while True:
                try:
                    with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                        if r.read().strip() == b"ok":
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    message = "streamlit did not start:\n" + log_path.read_text()[-3000:]
                    if fail is not None:
                        fail(message)
                    raise RuntimeError(message)
                time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
