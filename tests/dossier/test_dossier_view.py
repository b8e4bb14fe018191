"""What the export page's dossier panel offers (studio/dossier_view.py), without an AppTest: both editions' HTML and
JSON, the internal ones marked private, PDFs only where Chromium is found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dossier_helpers import in_ci, require_chromium

from dpkps_core.dossier import NoChromiumError, Policy, find_chromium
from dpkps_core.dossier.render import INTERNAL_MARK
from studio.dossier_view import dossier_offers


def test_the_panel_offers_both_editions_and_marks_the_internal_one_private(dossier_runs: dict[str, Path]) -> None:
    offers = dossier_offers(dossier_runs["canary"], policy=Policy(max_epsilon_per_release=5.0), pdf=False)
    assert [(o.file_name, o.private, o.mime) for o in offers] == [
        ("dossier.html", False, "text/html"), ("dossier.json", False, "application/json"),
        ("dossier_internal.html", True, "text/html"), ("dossier_internal.json", True, "application/json")]
    files = {o.file_name: o.make() for o in offers}
    assert INTERNAL_MARK.encode() in files["dossier_internal.html"]
    assert b"INTERNAL" not in files["dossier.html"] and b"INTERNAL" not in files["dossier.json"]
    decision = json.loads(files["dossier_internal.json"])["decision"]
    assert decision["verdict"] == "do not share"
    assert any(r["rule"] == "max_epsilon_per_release" for r in decision["reasons"])


def test_pdfs_are_offered_where_chromium_is(dossier_runs: dict[str, Path]) -> None:
    require_chromium()  # fails without Chromium
    offers = dossier_offers(dossier_runs["cli"])
    pdfs = [o for o in offers if o.is_pdf]
    assert [(o.file_name, o.private) for o in pdfs] == [("dossier.pdf", False), ("dossier_internal.pdf", True)]
    assert pdfs[0].make().startswith(b"%PDF-")


def _panel(run: str) -> None:
    from pathlib import Path

    from studio.dossier_view import show_dossier_panel
    from studio.state import session_state

    show_dossier_panel(session_state(), Path(run))


def test_the_panel_draws_and_makes_a_pdf_on_demand(dossier_runs: dict[str, Path]) -> None:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_panel, args=(str(dossier_runs["canary"]),), default_timeout=60).run()
    assert not at.exception
    labels = [d.proto.label for d in at.get("download_button")]
    assert labels[:2] == ["Download: Release dossier (HTML)", "Download: Release dossier (JSON)"]
    assert "Download: Internal dossier (HTML)" in labels
    assert any(m.value.startswith("**Decision:** DO NOT SHARE") for m in at.markdown)
    try:
        find_chromium()
    except NoChromiumError:
        if in_ci():
            require_chromium()  # fails: CI must print the PDF
        return
    at.button(key=next(b.key for b in at.button if "Release dossier (PDF)" in b.label)).click().run()
    assert not at.exception
    assert "Download: Release dossier (PDF)" in [d.proto.label for d in at.get("download_button")]


def test_missing_chromium_fails_and_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import dossier_helpers

    import dpkps_core.dossier as dossier

    def none() -> str:
        raise NoChromiumError("not found")

    monkeypatch.setattr(dossier, "find_chromium", none)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        dossier_helpers.require_chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        dossier_helpers.require_chromium()
