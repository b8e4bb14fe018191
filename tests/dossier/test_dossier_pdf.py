"""The dossier printed by a real engine (issue 34 §1, "Done when"): headless Chromium's print-to-PDF and a screenshot
of the release edition's first page, saved under the test's tmp_path. Without Chromium the test fails, naming the install (scripts/test.sh
installs it)."""

from __future__ import annotations

from pathlib import Path

from dossier_helpers import pdf_page_texts, require_chromium

from dpkps_core.cli import main
from dpkps_core.dossier import build_dossier, screenshot, to_pdf
from dpkps_core.dossier.render import INTERNAL_MARK


def _chromium() -> str:
    return require_chromium()  # fails without Chromium


def _squash(text: str) -> str:
    return "".join(text.split())


def test_internal_pdf_marks_every_page(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    _chromium()
    html = build_dossier(dossier_runs["canary"], edition="internal").to_html()
    assert screenshot(html, tmp_path / "internal_first_page.png").stat().st_size > 20_000  # looked at in Chromium
    pdf = to_pdf(html, tmp_path / "internal.pdf")
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF-")
    pages = pdf_page_texts(data)
    assert len(pages) >= 3
    for number, text in enumerate(pages, start=1):
        squashed = _squash(text)
        assert squashed.count(_squash(INTERNAL_MARK)) >= 2, number  # running header and footer
        assert f"page{number}of{len(pages)}" in squashed
    assert "DONOTSHARE" in _squash(pages[0])  # the decision line opens the document


def test_release_pdf_and_first_page_screenshot(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    _chromium()
    html = build_dossier(dossier_runs["canary"]).to_html()
    pages = pdf_page_texts(to_pdf(html, tmp_path / "release.pdf").read_bytes())
    assert "INTERNAL" not in " ".join(pages)
    first = _squash(pages[0])
    assert "Releasedossier" in first and "Addingorremovinganyoneperson'sdocuments" in first
    assert _squash("7. NIST SP 800-226 checklist") in _squash(" ".join(pages))
    png = screenshot(html, tmp_path / "release_first_page.png")
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 20_000  # a rendered page, not a blank one


def test_report_pdf_from_the_command_line(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    _chromium()
    out = tmp_path / "out"
    assert main(["report", "--run", str(dossier_runs["cli"]), "--internal", "--pdf", "--out", str(out)]) == 0
    assert (out / "dossier_internal.pdf").read_bytes().startswith(b"%PDF-")
