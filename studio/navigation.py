"""Moving through the flow by page name (``studio.PAGES``): each page's header, the button to the next step and links
to other pages."""

from __future__ import annotations

import streamlit as st

from studio import next_page, page
from studio.state import SessionState
from studio.widgets import show_notices


def page_header(state: SessionState, name: str, intro: str) -> None:
    """The title of the page called ``name`` (its number, icon and label), its intro, then the pending notices."""
    spec = page(name)
    st.title(f"{spec.icon} {spec.title}")
    st.caption(intro)
    show_notices(state)


def next_button(name: str, *, enabled: bool = True, help: str | None = None) -> None:
    """The button to the step after the page called ``name`` (nothing after the last page)."""
    nxt = next_page(name)
    if nxt is None:
        return
    if st.button(f"Next: {nxt.label} →", type="primary", disabled=not enabled, help=help, key=f"next.{name}"):
        st.switch_page(nxt.path)


def go_to(name: str, label: str | None = None) -> None:
    """A link to the page called ``name`` (``label`` or "Go to <its title>")."""
    spec = page(name)
    st.page_link(spec.path, label=label or f"Go to {spec.title}", icon=spec.icon)
