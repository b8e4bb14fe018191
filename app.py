"""DP-KPS Studio: a guided, honest walk from a private corpus to a DP synthetic export.

Run with ``streamlit run app.py`` (or ``bash scripts/app.sh``). This file is only the router: it checks the
optional login, initialises the session, shows the privacy ledger in the sidebar and runs the current page.
"""

from __future__ import annotations

import streamlit as st

from dpkps_core.errors import DPKPSError
from studio import PAGES, resources, session, widgets

st.set_page_config(page_title="DP-KPS Studio", page_icon=":material/shield_lock:", layout="wide")

if widgets.require_login():
    session.init_session()
    resources.start_warm_up()
    page = st.navigation([st.Page(p.path, title=p.title, icon=p.icon, url_path=p.url_path, default=(i == 0))
                          for i, p in enumerate(PAGES)])
    ledger_slot = st.sidebar.container()
    try:
        page.run()
    except DPKPSError as exc:
        st.error(str(exc), icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - never show a traceback to the user
        widgets.show_unexpected(exc)
    finally:
        with ledger_slot:
            widgets.sidebar()
