"""One intent, one release: the app's buttons that spend ε (docs/DESIGN.md §2.0 "charge first": a click that releases is
charged at once, so a stray click must never be one).

* A first release is one click. Once its result exists, the button in the same spot no longer spends: it only
  asks, and the release runs from a separate "Yes, spend ε … again" button below the question.
* Every spend button carries the release count it was drawn with (``on_click`` arguments are fixed when the page is
  drawn): a click on a button drawn before the last release of that step began (a double or triple click queued
  behind it) is ignored and said so; the step itself refuses a second release from one click (:func:`started`).

Usage on a page::

    if spend.button("vocabulary", epsilon=eps_voc, label="Build Ṽ (spends ε_voc = 5)", done=pv is not None,
                    again="Re-run Ṽ", what="ε_voc"):
        with spend.releasing("vocabulary"):
            steps.run_private_vocabulary()
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import streamlit as st
from studio.state import SessionState

IGNORED_NOTE = ("A repeated click was ignored: it was made on a button drawn before the release it repeats "
                "(a double or triple click), and one intent spends once.")


def version(state: SessionState, step: str) -> int:
    """How many releases of ``step`` this session has begun from its button."""
    return int(state.spend.versions.get(step, 0))


def _request(state: SessionState, step: str, drawn_at: int) -> None:
    """on_click: ask for one release of ``step`` — only if the button was drawn after the last one began; a stale
    click (a double or triple click queued behind the release it repeats) is ignored, and said."""
    if drawn_at != version(state, step):
        state.notices.append(IGNORED_NOTE)
        return
    state.spend.request = (step, drawn_at)
    state.spend.confirm.discard(step)


def _ask(state: SessionState, step: str, drawn_at: int) -> None:
    """on_click of the re-run button: open the question (it never spends)."""
    if drawn_at == version(state, step):
        state.spend.confirm.add(step)


def _cancel(state: SessionState, step: str) -> None:
    state.spend.confirm.discard(step)


def requested(state: SessionState, step: str) -> bool:
    """True once per accepted click on ``step``'s spend button (the request is taken)."""
    spend = state.spend
    req = spend.request
    if req is not None and req[0] == step:
        spend.request = None
        spend.taken[threading.get_ident()] = req  # per script run (runs may overlap in time)
        return True
    return False


def started(state: SessionState) -> None:
    """Called by the step right before its release (``studio.steps``): the click's intent is spent from here on,
    whatever happens next (docs/DESIGN.md §2.0: a release that fails after admission stays charged). Refuses, before
    anything is spent, a second release from the same click — two script runs that both took a click drawn at the
    same release count (Streamlit may start the next run before a stopped one has unwound). Outside a spend button
    (the command line, tests of the steps) it does nothing."""
    from dpkps_core.errors import ParameterError

    spend = state.spend
    with spend.lock:
        taken = spend.taken.pop(threading.get_ident(), None)
        if taken is None:
            return
        step, drawn_at = taken
        if version(state, step) != drawn_at:
            raise ParameterError("This click was ignored: the release it asked for was already made (one intent "
                                 "spends once). Nothing more was spent.")
        spend.versions[step] = drawn_at + 1
        spend.confirm.discard(step)


def button(state: SessionState, step: str, *, label: str, epsilon: float, done: bool, again: str, what: str = "ε",
           icon: str | None = None, disabled: bool = False, help: str | None = None) -> bool:
    """Draw the spend button of ``step``; True when a release should run now (once per deliberate intent).

    ``done``: a result of this step exists, so another release is a re-run: the button in this spot then only
    opens a question ("spends ``what`` = ``epsilon`` again"), answered by a separate button below it."""
    v = version(state, step)
    if not done:
        st.button(label, type="primary", icon=icon, key=f"spend.{step}", on_click=_request, args=(state, step, v),
                  disabled=disabled, help=help)
        return requested(state, step)
    asking = step in state.spend.confirm
    st.button(f"{again}…", type="secondary", icon=icon, key=f"spend.{step}.ask", on_click=_ask, args=(state, step, v),
              disabled=disabled or asking, help=f"Asks first: a re-run spends {what} = {epsilon:g} again.")
    if asking:
        with st.container(border=True):
            st.warning(f"**Spend {what} = {epsilon:g} again?** A re-run is a new release: it is charged to the ledger "
                       "on top of the earlier one (basic composition); the earlier result is not refunded.",
                       icon=":material/warning:")
            c1, c2 = st.columns(2)
            c1.button(f"Yes, spend {what} = {epsilon:g} again", key=f"spend.{step}.yes", on_click=_request,
                      args=(state, step, v), disabled=disabled)
            c2.button("No, keep the current result", key=f"spend.{step}.no", on_click=_cancel, args=(state, step),
                      type="primary")
    return requested(state, step)


@contextlib.contextmanager
def releasing(state: SessionState, step: str) -> Iterator[None]:
    """The block that runs ``step``'s release after an accepted click: when it ends, the re-run question is closed.
    (The count that makes earlier-drawn buttons stale moves in :func:`started`, when the release begins: a run that
    Streamlit stopped before that — another click arrived — spent nothing, and the next click still counts.)"""
    try:
        yield
    finally:
        state.spend.confirm.discard(step)
