"""One intent, one release: the app's buttons that spend ε (DESIGN §2.0 "charge first": a click that releases is
charged at once, so a stray click must never be one).

* A first release is one click. Once its result exists, the button in the same spot no longer spends: it only
  asks, and the release runs from a separate "Yes, spend ε … again" button below the question.
* Every spend button carries the release count it was drawn with (``on_click`` arguments are fixed when the page is
  drawn): a click on a button drawn before the last release of that step (a double or triple click that arrived
  while the release ran) is ignored and said so, as is a click while a release of the session is in flight.

Usage on a page::

    if spend.button("vocabulary", epsilon=eps_voc, label="Build Ṽ (spends ε_voc = 5)", done=pv is not None,
                    again="Re-run Ṽ", what="ε_voc"):
        with spend.releasing("vocabulary"):
            steps.run_private_vocabulary()
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, MutableMapping

import streamlit as st

_VERSIONS = "_spend_versions"   # step -> number of releases made from its button in this session
_REQUEST = "_spend_request"     # the step whose release a click asked for (taken once)
_CONFIRM = "_spend_confirm"     # steps whose re-run question is open
_IN_FLIGHT = "_spend_in_flight"  # the step whose release is running now
_STARTED = "_spend_started"      # set by the step right before its release reads data or charges the ledger
IGNORED_NOTE = ("A repeated click was ignored: it arrived while the release was running or was made on a button "
                "drawn before it, and one intent spends once.")


def _s() -> MutableMapping[str, Any]:
    return st.session_state


def version(step: str) -> int:
    """How many releases of ``step`` this session has made from its button."""
    return int(_s().setdefault(_VERSIONS, {}).get(step, 0))


def _request(step: str, drawn_at: int) -> None:
    """on_click: ask for one release of ``step`` — only if the button was drawn after the last one and no release
    is in flight; a stale click is ignored (and said)."""
    s = _s()
    if s.get(_IN_FLIGHT) or drawn_at != version(step):
        s["notices"] = [*s.get("notices", []), IGNORED_NOTE]
        return
    s[_REQUEST] = step
    s.setdefault(_CONFIRM, set()).discard(step)


def _ask(step: str, drawn_at: int) -> None:
    """on_click of the re-run button: open the question (it never spends)."""
    if drawn_at == version(step):
        _s().setdefault(_CONFIRM, set()).add(step)


def _cancel(step: str) -> None:
    _s().setdefault(_CONFIRM, set()).discard(step)


def requested(step: str) -> bool:
    """True once per accepted click on ``step``'s spend button (the request is taken)."""
    s = _s()
    if s.get(_REQUEST) == step:
        s.pop(_REQUEST, None)
        return True
    return False


def button(step: str, *, label: str, epsilon: float, done: bool, again: str, what: str = "ε",
           icon: str | None = None, disabled: bool = False, help: str | None = None) -> bool:
    """Draw the spend button of ``step``; True when a release should run now (once per deliberate intent).

    ``done``: a result of this step exists, so another release is a re-run: the button in this spot then only
    opens a question ("spends ``what`` = ``epsilon`` again"), answered by a separate button below it."""
    v = version(step)
    if not done:
        st.button(label, type="primary", icon=icon, key=f"spend.{step}", on_click=_request, args=(step, v),
                  disabled=disabled, help=help)
        return requested(step)
    asking = step in _s().setdefault(_CONFIRM, set())
    st.button(f"{again}…", type="secondary", icon=icon, key=f"spend.{step}.ask", on_click=_ask, args=(step, v),
              disabled=disabled or asking, help=f"Asks first: a re-run spends {what} = {epsilon:g} again.")
    if asking:
        with st.container(border=True):
            st.warning(f"**Spend {what} = {epsilon:g} again?** A re-run is a new release: it is charged to the ledger "
                       "on top of the earlier one (basic composition); the earlier result is not refunded.",
                       icon=":material/warning:")
            c1, c2 = st.columns(2)
            c1.button(f"Yes, spend {what} = {epsilon:g} again", key=f"spend.{step}.yes", on_click=_request,
                      args=(step, v), disabled=disabled)
            c2.button("No, keep the current result", key=f"spend.{step}.no", on_click=_cancel, args=(step,),
                      type="primary")
    return requested(step)


def started() -> None:
    """Called by the step right before its release (``studio.steps``): from here on the click's intent is spent,
    whatever happens next (DESIGN §2.0: a release that fails after admission stays charged)."""
    s = _s()
    if s.get(_IN_FLIGHT):
        s[_STARTED] = s[_IN_FLIGHT]


@contextlib.contextmanager
def releasing(step: str) -> Iterator[None]:
    """Mark a release of ``step`` as in flight. When it ends — finished, failed or interrupted — after the step
    called :func:`started`, the buttons drawn before it go stale (their queued clicks are ignored). A run that was
    interrupted before the release began (Streamlit stops a script run at its next element when another click
    arrives) spent nothing, so the next click still counts."""
    s = _s()
    s[_IN_FLIGHT], s[_STARTED] = step, None
    try:
        yield
    finally:
        began = s.get(_STARTED) == step
        s[_IN_FLIGHT], s[_STARTED] = None, None
        if began:
            versions = s.setdefault(_VERSIONS, {})
            versions[step] = versions.get(step, 0) + 1
            s.setdefault(_CONFIRM, set()).discard(step)
