"""The one progress-callback type of the core (docs/ARCHITECTURE.md): ``progress(fraction in [0, 1], message)``, and
the one way a duration is written (estimates, ETAs, the audit's plan, the comparison's rough times).

Long steps report through it; the app passes ``st.progress``/``st.status`` updates, the CLI a tqdm bar. Messages
carry counts and step names only, never document text."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:
    """A callback that reports nothing."""


def format_duration(seconds: float, *, approximate: bool = False) -> str:
    """A duration as people read it: "42 s" under 90 seconds, "3.5 min" under 90 minutes, else "1.2 h";
    ``approximate`` prefixes "≈ " (a rough time). Negative or NaN durations read as 0 s."""
    s = float(seconds)
    s = 0.0 if not s > 0 else s
    if s < 90:
        text = f"{s:.0f} s"
    elif s < 5400:
        text = f"{s / 60:.1f} min"
    else:
        text = f"{s / 3600:.1f} h"
    return ("≈ " + text) if approximate else text
