"""The dossier panel of the export page (issue 34 §1; docs/DOSSIER.md): download buttons for both editions' HTML,
JSON and PDF. The release edition is what the bundle carries (DP outputs and public inputs); the internal edition
sits under the PRIVATE badge, takes an optional policy file for its share decision, and is never exported. Both are
also shown on the page (the self-contained HTML in a sandboxed frame: no script, nothing loaded), for the current run
and for any reopened one, since both are built from the run folder alone.

:func:`dossier_offers` says what the panel offers (no Streamlit: tested without an AppTest);
:func:`show_dossier_panel` draws it. The page calls ``show_dossier_panel(run_dir)``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Callable

import streamlit as st

from dpkps_core.dossier import (INTERNAL_HTML, INTERNAL_JSON, INTERNAL_PDF, RELEASE_HTML, RELEASE_JSON, RELEASE_PDF,
                                Dossier, NoChromiumError, Policy, build_dossier, find_chromium, to_pdf)
from dpkps_core.dossier.policy import parse_policy
from dpkps_core.errors import DPKPSError
from studio.widgets import DP_BADGE, PRIVATE_BADGE
from studio.state import SessionState

_MIME = {".html": "text/html", ".json": "application/json", ".pdf": "application/pdf"}


@dataclasses.dataclass(frozen=True)
class DossierOffer:
    """One file the panel offers: its button label, file name, MIME type, whether it is private, and how it is made
    (``make`` is called only when the file is wanted: a PDF takes Chromium a few seconds)."""

    label: str
    file_name: str
    private: bool
    make: Callable[[], bytes]

    @property
    def mime(self) -> str:
        return _MIME[Path(self.file_name).suffix]

    @property
    def is_pdf(self) -> bool:
        return self.file_name.endswith(".pdf")


def chromium_available() -> bool:
    try:
        find_chromium()
    except NoChromiumError:
        return False
    return True


def dossier_offers(run_dir: Path, *, policy: Policy | None = None, pdf: bool | None = None) -> list[DossierOffer]:
    """What the panel offers for ``run_dir``: the release edition's HTML and JSON (+ PDF), then the internal
    edition's (private) HTML and JSON (+ PDF) under ``policy``; PDFs only where Chromium is found (``pdf`` None) or
    when ``pdf`` is True. Both editions are built now (a refusal is raised here, before any button is drawn)."""
    return offers_for(build_dossier(run_dir, edition="release"),
                      build_dossier(run_dir, edition="internal", policy=policy), pdf=pdf)


def offers_for(release: Dossier, internal: Dossier, *, pdf: bool | None = None) -> list[DossierOffer]:
    """The offers of two built editions (see :func:`dossier_offers`)."""
    with_pdf = chromium_available() if pdf is None else pdf
    offers = [DossierOffer("Release dossier (HTML)", RELEASE_HTML, False, lambda: release.to_html().encode("utf-8")),
              DossierOffer("Release dossier (JSON)", RELEASE_JSON, False, lambda: release.to_json().encode("utf-8"))]
    if with_pdf:
        offers.append(DossierOffer("Release dossier (PDF)", RELEASE_PDF, False, lambda: _pdf(release.to_html())))
    offers += [DossierOffer("Internal dossier (HTML)", INTERNAL_HTML, True, lambda: internal.to_html().encode("utf-8")),
               DossierOffer("Internal dossier (JSON)", INTERNAL_JSON, True, lambda: internal.to_json().encode("utf-8"))]
    if with_pdf:
        offers.append(DossierOffer("Internal dossier (PDF)", INTERNAL_PDF, True, lambda: _pdf(internal.to_html())))
    return offers


def private_summary(internal: dict) -> list[str]:
    """One line each for what the internal edition found on private data beyond the decision (PRIVATE, shown under
    the badge on page 8): the ledger's left-out count and ε to date per unit, and the disclosure test's verdict."""
    lines = []
    led = internal.get("ledger")
    if led:
        e = led["epsilon_to_date"]
        lines.append(f"**Ledger:** {led['left_out_total']:,} unit(s) left out of this run's releases (budget spent); "
                     f"the corpus's ε to date per unit — largest {e['largest']:g}, median {e['median']:g} over "
                     f"{led['units']:,} units.")
    disc = internal.get("disclosure")
    if disc:
        lines.append(f"**Disclosure test:** {str(disc['verdict']).upper()} — empirical ε lower bound "
                     f"{float(disc['epsilon_lower_bound']):.3g} beside the claimed ε = {disc['claimed_epsilon']} "
                     f"(p = {float(disc['p_value']):.3g}).")
    return lines


def ledger_view_for(state: SessionState, run_name: str) -> object | None:
    """The loaded corpus's ledger view (PRIVATE, local) when the persistent ledger holds releases of ``run_name``
    on its units — the internal edition's left-out counts and ε to date per unit; None otherwise (no corpus loaded,
    an in-memory ledger, or a run of another corpus: nothing is claimed about it)."""
    from dpkps_core.ledger_store import PersistentLedger
    from studio import ledger_view, session

    if session.corpus(state) is None:
        return None
    try:
        led = ledger_view.ledger(state)
        if not isinstance(led, PersistentLedger):
            return None
        view = led.view()
    except DPKPSError:
        return None
    return view if any(r.run == run_name for r in view.releases) else None


def _pdf(html: str) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dpkps-dossier-") as tmp:
        return to_pdf(html, Path(tmp) / "dossier.pdf").read_bytes()


def _policy_from_upload() -> Policy | None:
    up = st.file_uploader("Release policy (optional: JSON or TOML, see docs/DOSSIER.md)", type=["json", "toml"],
                          key="dossier.policy")
    if up is None:
        return None
    return parse_policy(up.getvalue(), name=up.name)


def _buttons(state: SessionState, offers: list[DossierOffer], run_name: str) -> None:
    cols = st.columns(len(offers))
    for col, offer in zip(cols, offers):
        key = f"dossier.{run_name}.{offer.file_name}"
        if offer.is_pdf:  # made on demand, then offered for download
            ready = state.results.downloads.get(key)
            if ready is None:
                if col.button(f"Make: {offer.label}", key=f"{key}.make", icon=":material/picture_as_pdf:"):
                    with st.spinner("Printing with headless Chromium…"):
                        state.results.downloads[key] = offer.make()
                    st.rerun()
                continue
            data = ready
        else:
            data = offer.make()
        col.download_button(f"Download: {offer.label}", data=data, file_name=offer.file_name, mime=offer.mime,
                            key=f"{key}.download", icon=":material/lock:" if offer.private else ":material/download:")


#: Height in pixels of the frame a dossier is viewed in on the page (it scrolls).
VIEW_HEIGHT = 900


def _view(html: str, *, private: bool) -> None:
    """The dossier itself on the page: its HTML in a sandboxed frame (the file has no script and loads nothing)."""
    import streamlit.components.v1 as components

    if private:
        st.markdown(PRIVATE_BADGE + " — the internal edition, **INTERNAL — NOT FOR RELEASE** on every page.")
    components.html(html, height=VIEW_HEIGHT, scrolling=True)


def show_dossier_panel(state: SessionState, run_dir: Path, *, ledger_view: object | None = None,
                       run_name: str | None = None) -> None:
    """The dossier panel: the release edition (it is also in the bundle) and, under the PRIVATE badge, the internal
    edition with its share decision; each can be viewed on the page and downloaded as HTML, JSON and (with
    Chromium) PDF. ``ledger_view`` (a :class:`~dpkps_core.ledger_store.CorpusView` of the loaded corpus, PRIVATE)
    adds the left-out counts and the corpus's ε to date per unit to the internal edition when the ledger holds
    releases of ``run_name`` (docs/DESIGN.md §2.0). A user error is one sentence, nothing is offered then."""
    st.subheader("Release dossier")
    st.markdown(DP_BADGE)
    st.caption("One self-contained HTML file (and its JSON) a privacy officer can file: the guarantee in one "
               "sentence, ε per step, what each mechanism released, the model and prompt, a sample of documents, "
               "the public inputs with licences and the NIST SP 800-226 checklist. The bundle carries it, with "
               "reproduce.md and reproduce_config.json.")
    try:
        with st.expander("Internal edition: private findings and the share decision", expanded=False):
            st.markdown(PRIVATE_BADGE)
            policy = _policy_from_upload()
        release = build_dossier(Path(run_dir), edition="release")
        internal = build_dossier(Path(run_dir), edition="internal", policy=policy, ledger_view=ledger_view,
                                 run_name=run_name or Path(run_dir).name)
    except DPKPSError as exc:
        st.error(str(exc))
        return
    offers = offers_for(release, internal)
    # a PDF made once is kept for these editions' content only (the run folder, the policy, the private findings
    # and the ledger's figures: any change makes a new one; the generation time is left out)
    digest = hashlib.sha256(json.dumps([{k: v for k, v in d.content.items() if k != "generated"}
                                       for d in (release, internal)], sort_keys=True, default=str).encode()
                           ).hexdigest()
    key_name = f"{Path(run_dir).name}.{digest[:12]}"
    _buttons(state, [o for o in offers if not o.private], key_name)
    if st.toggle("View the release dossier here", key=f"dossier.view.release.{Path(run_dir).name}"):
        _view(release.to_html(), private=False)
    decision = internal.content["decision"]
    st.markdown(PRIVATE_BADGE + " — INTERNAL, NOT FOR RELEASE: accuracy on real data, the audit's bound, the corpus "
                "fingerprint and the decision line. The export refuses these files.")
    st.markdown(f"**Decision:** {decision['verdict'].upper()} — " + "; ".join(r["text"] for r in decision["reasons"]))
    for line in private_summary(internal.content["internal"]):
        st.markdown(PRIVATE_BADGE + " " + line)
    _buttons(state, [o for o in offers if o.private], key_name)
    if st.toggle("View the internal dossier here (private)", key=f"dossier.view.internal.{Path(run_dir).name}"):
        _view(internal.to_html(), private=True)
    if not any(o.is_pdf for o in offers):
        st.caption("No Chromium was found on this machine, so no PDF is offered: print the HTML from your browser.")
