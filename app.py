"""DP-KPS Studio: a guided, honest walk from a private corpus to a DP synthetic export.

Run with ``streamlit run app.py`` (or ``bash scripts/app.sh``). This file is only the router: it checks the
optional login, initialises the session, shows the privacy ledger in the sidebar and runs the current page.

The sidebar's ledger lines (docs/DESIGN.md §2.0, docs/PRIVACY.md "Per-document budgets"): the ledger is an individual
privacy filter, so they show the cap per document (person), the largest ε one of this corpus's documents (persons)
has spent over every release — app and CLI, any session, any file holding them — and this session's own spend.
With login, every figure is the signed-in account's own ledger's (``studio.tenancy``): its releases only.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dpkps_core.errors import DPKPSError
from dpkps_core.risk import format_probability, posterior_bound
from studio import PAGES, generation_steps, ledger_view, login, page_ref, resources, runs, session, tenancy, widgets
from studio.state import SessionState

def other_corpora_released_on(state: SessionState) -> int:
    """How many corpora OTHER than the loaded one this session released on (its in-session ledgers). Their ε is
    not summed: a total over different corpora is nobody's loss (each document's budget is its own, docs/DESIGN.md §2.0)."""
    current = state.loaded.corpus_id if session.corpus(state) is not None else None
    return sum(1 for cid, led in (state.ledgers or {}).items()
               if cid != current and led.total_epsilon > 0)


def _corpora(n: int) -> str:
    return "1 corpus" if n == 1 else f"{n} corpora"


def ledger_sidebar(state: SessionState) -> None:
    """The privacy ledger in the sidebar, on every page (the corpus's figures are PRIVATE, local).

    docs/DESIGN.md §2.0: the ledger is a per-document (per-person) filter, so its figures belong to a loaded corpus: the
    cap per unit, the largest spend among the corpus's units over every release, and this session's own spend.
    With no corpus loaded there is no such figure — it says so instead of a "0 / cap" that would look like a
    fresh budget."""
    st.subheader("Privacy ledger")
    others = other_corpora_released_on(state)
    if session.corpus(state) is None:
        st.info("No corpus is loaded, so there is no spend to show: the ledger keeps ε per document (per person) "
                f"of a corpus, and its figures appear here once one is loaded ({page_ref('corpus')}).",
                icon=":material/info:")
        if others:
            st.markdown(f"This session released on {_corpora(others)} loaded before; their documents keep that "
                        "spend in the ledger, shown here when a corpus is loaded again.")
        return
    try:
        status = ledger_view.ledger_status(state)
        led = ledger_view.ledger(state)
    except DPKPSError as exc:  # e.g. the ledger folder or store cannot be used: say so, spend nothing
        st.error(str(exc), icon=":material/error:")
        return
    unit, largest, cap = status.unit, status.largest, status.cap_high
    mine = tenancy.current().signed_in  # with login: this account's own ledger (studio.tenancy)
    where = "every session of your account" if mine else "app and CLI, every session"
    eps = widgets.eps  # one ε formatter everywhere (issue 33 §6)
    st.metric(f"Most-used {unit}: ε spent / cap", f"{eps(largest)} / {eps(cap)}" if cap else f"{eps(largest)} / no cap",
              help=f"The largest ε any one {unit} of this corpus has spent over every release — {where}, whatever "
                   f"file held it (the persistent ledger) — against the cap per {unit}. A {unit} "
                   "whose spend plus a step's ε would exceed its cap is left out of that step (a private, local "
                   "count); the others are charged. Pure ε-DP, basic composition: every run adds its ε, re-runs "
                   "included.")
    reserved = led.reserved(run=led.run) if hasattr(led, "reserved") else 0.0  # the open run's, not earlier runs
    if reserved > 0:  # issue 35 part 8: charged at Ṽ for this run's densities, not drawn on yet
        st.caption(f"Of that spend, ε = {eps(reserved)} is reserved for this run's densities (charged with Ṽ; drawn "
                   "on when they are built).")
    if cap:
        st.progress(min(largest / cap, 1.0), text=f"{largest / cap:.0%} of the cap for the most-used {unit}")
    setting = "no cap" if status.cap_setting is None else eps(status.cap_setting)
    differs = status.cap_low != status.cap_high or status.cap_high != status.cap_setting
    st.caption(f"Cap per {unit} (each {unit}'s total over every release of this corpus, "
               f"{'your account' if mine else 'app and command line'}): "
               f"**{status.cap_text}**"
               + (f" ({unit}s new to the ledger get {setting}, this session's setting)" if differs else "")
               + ". Private, local figures: never exported.")
    if mine:
        st.caption(tenancy.scope_note())
    if largest > 0:
        bounds = [format_probability(posterior_bound(largest, p)) for p in (0.01, 0.5)]
        bounds = [b if b.startswith("more than") else f"at most {b}" for b in bounds]
        st.caption(f"At ε = {eps(largest)}, an attacker 1 % or 50 % sure beforehand that any one {unit} was used can "
                   f"become {bounds[0]} or {bounds[1]} sure ({page_ref('budget')} explains).")
    # what this session's releases charged (a release that left every unit out charged no one; issue 35 part 5)
    by = led.charged_by_step() if hasattr(led, "charged_by_step") else led.by_step()
    lines = [f"- {widgets.step_name(k)}: **{eps(v)}**" for k, v in by.items()]
    if lines:
        st.markdown(f"This session, on this corpus: ε = **{eps(status.session)}** charged\n" + "\n".join(lines))
    elif led.events:
        st.markdown(f"This session's releases on this corpus charged no {unit}: every {unit} was left out.")
    elif largest > 0:
        st.markdown(f"This session has released nothing on this corpus yet; earlier releases ("
                    + ("your other sessions" if mine else "other sessions, the command line")
                    + f", other files holding these {unit}s) took the most-used {unit} to ε = "
                    f"**{eps(largest)}** ({page_ref('budget')} lists them).")
    else:
        st.markdown(f"No release has used this corpus's {unit}s yet.")
    if led.total_epsilon > status.session + 1e-9:
        st.caption(f"Not counted: ε = {eps(led.total_epsilon - status.session)} of releases that left every {unit} "
                   "out — they charged no one, and their output is noise (private, local).")
    if others:
        st.caption(f"This session also released on {_corpora(others)} loaded before; each corpus's figures are its "
                   "own (load it again to see them).")
    if led.events:
        with st.expander(f"Ledger events of this session on this corpus ({len(led.events)})"):
            st.dataframe(pd.DataFrame([{"time (UTC)": e.timestamp.replace("T", " ")[:19],
                                        "step": widgets.step_name(e.step), "ε": eps(e.epsilon), "noise scale": round(e.noise_scale, 4),
                                        "mechanism": e.mechanism} for e in led.events]), hide_index=True)


st.set_page_config(page_title="DP-KPS Studio", page_icon=":material/shield_lock:", layout="wide")

if login.require_login():
    tenancy.bind_session()  # with login: this account's runs and ledger only (a changed identity starts afresh)
    state = session.init_session()
    runs.follow_url(state)
    generation_steps.reattach_generation(state)  # a reload while its run is written: the writer's progress and Cancel
    resources.start_warm_up()
    page = st.navigation([st.Page(p.path, title=p.title, icon=p.icon, url_path=p.url_path, default=(p is PAGES[0]))
                          for p in PAGES])
    ledger_slot = st.sidebar.container()
    try:
        page.run()
    except DPKPSError as exc:
        st.error(str(exc), icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - never show a traceback to the user
        widgets.show_unexpected(exc)
    finally:
        with ledger_slot:
            ledger_sidebar(state)
            widgets.sidebar(state)
