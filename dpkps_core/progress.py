"""The one progress-callback type of the core (docs/ARCHITECTURE.md): ``progress(fraction in [0, 1], message)``.

Long steps report through it; the app passes ``st.progress``/``st.status`` updates, the CLI a tqdm bar. Messages
carry counts and step names only, never document text."""

from __future__ import annotations

from typing import Callable

Progress = Callable[[float, str], None]


def no_progress(fraction: float, message: str) -> None:
    """A callback that reports nothing."""
