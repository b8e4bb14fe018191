"""The dossier printed by a real engine: headless Chromium's print-to-PDF and screenshot (issue 34 §1).

Chromium runs with networking features off and a throwaway profile, on a ``file://`` copy of the HTML (the
dossier loads nothing; the flags keep Chromium itself from calling home). A missing browser is a
:class:`NoChromiumError` that says how to install one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dpkps_core.errors import DPKPSError

#: Where Chromium is looked for when ``$DPKPS_CHROMIUM`` is not set (Debian's package first; scripts/test.sh
#: installs it).
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio")
TIMEOUT_S = 120


class NoChromiumError(DPKPSError):
    """No Chromium / Chrome executable was found, so no PDF or screenshot can be made."""


class PrintError(DPKPSError):
    """Chromium ran but did not produce the file."""


def find_chromium() -> str:
    """The Chromium executable: ``$DPKPS_CHROMIUM``, else the first of :data:`CHROMIUM_CANDIDATES` found."""
    env = os.environ.get("DPKPS_CHROMIUM")
    for candidate in ((env,) if env else ()) + CHROMIUM_CANDIDATES:
        found = candidate if os.path.isabs(candidate) and os.access(candidate, os.X_OK) else shutil.which(candidate)
        if found:
            return found
    raise NoChromiumError("No Chromium was found to print the dossier; install it (`apt-get install chromium`) or "
                          "set DPKPS_CHROMIUM to its path — the HTML file prints the same from any browser.")


def _run(html: str, out_path: Path, flags: list[str], output_flag: str) -> Path:
    exe = find_chromium()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dpkps-print-") as tmp:
        page = Path(tmp) / "dossier.html"
        page.write_text(html, encoding="utf-8")
        tmp_out = Path(tmp) / ("out" + out_path.suffix)
        cmd = [exe, *FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}", *flags, f"{output_flag}={tmp_out}",
               page.as_uri()]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                                  env={**os.environ, "HOME": tmp})
        except subprocess.TimeoutExpired:
            raise PrintError(f"Chromium did not finish within {TIMEOUT_S} s.") from None
        if not tmp_out.is_file() or tmp_out.stat().st_size == 0:
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no message"]
            raise PrintError(f"Chromium made no file (exit status {proc.returncode}: {tail[0][:200]}).")
        shutil.copyfile(tmp_out, out_path)
    return out_path


def to_pdf(html: str, out_path: str | Path) -> Path:
    """Print ``html`` to ``out_path`` (A4 from the dossier's ``@page`` rules, no browser header or footer)."""
    return _run(html, Path(out_path), ["--no-pdf-header-footer"], "--print-to-pdf")


def screenshot(html: str, out_path: str | Path, *, width: int = 1000, height: int = 1300) -> Path:
    """A PNG of the first screen of ``html`` (``width`` × ``height`` CSS pixels), e.g. for the README."""
    if not (200 <= width <= 4000 and 200 <= height <= 12000):
        raise PrintError("A screenshot is 200–4000 pixels wide and 200–12000 high.")
    return _run(html, Path(out_path), ["--hide-scrollbars", f"--window-size={width},{height}"], "--screenshot")
