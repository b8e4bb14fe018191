"""AppTest: bad uploads each show one specific message in the page — never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from app_helpers import click, goto, ledger_total, new_app, problems, toy_csv, upload_corpus

pytestmark = [pytest.mark.assets]


@pytest.fixture(autouse=True)
def _fast_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))


def shows(at, fragment: str) -> None:
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any(fragment in e for e in errors), errors
    assert not any("Traceback" in e for e in errors)


@pytest.mark.parametrize("filename,data,fragment", [
    ("data.csv", bytes(range(256)) * 8, "looks binary"),
    ("data.parquet", b"\x89PNG\r\n\x1a\n" + bytes(200), "Parquet file could not be read"),
    ("empty.csv", b"", "The file is empty"),
    ("header_only.csv", b"text,label\n", "No documents are left after cleaning"),
    ("latin1.csv", "text,label\ncaf\xe9 au lait is nice enough,a\n".encode("latin-1"), "not valid UTF-8"),
    ("broken.zip", b"PK\x03\x04 definitely not a zip archive", "could not be opened"),
])
def test_unreadable_files(filename: str, data: bytes, fragment: str) -> None:
    at = new_app()
    upload_corpus(at, data, filename)
    shows(at, fragment)
    assert at.session_state["corpus_id"] == "demo:bbc"              # the previous corpus is untouched


def test_missing_label_column() -> None:
    csv = b"body_text,notes\n" + b"".join(f"document number {i} is long enough to keep,n{i}\n".encode()
                                          for i in range(20))
    at = new_app()
    upload_corpus(at, csv, "nolabel.csv", load=False)
    assert at.selectbox(key="upload_label_col").value is None    # nothing guessable: the user must choose
    click(at, "Load this corpus", clean=False)
    shows(at, "No label column was found")


def test_one_class_only() -> None:
    csv = b"text,label\n" + b"".join(f"document number {i} is long enough to keep,same\n".encode() for i in range(20))
    at = new_app()
    upload_corpus(at, csv, "oneclass.csv")
    shows(at, "at least two classes")


def test_zero_vocabulary_matches_charges_nothing() -> None:
    at = new_app()
    upload_corpus(at, toy_csv(10), "toy.csv")
    goto(at, 1)
    at.selectbox(key="_w.vocabulary").set_value("upload").run()
    at.file_uploader(key="vocab_upload").set_value(("odd.txt", b"zzqxv\nvvbbnnq\nqwxzz plorp\n", "text/plain")).run()
    assert not problems(at)
    goto(at, 2)
    click(at, "Build Ṽ", clean=False)
    shows(at, "No document contains any term of the")
    assert ledger_total(at) == 0
    assert "pv" not in at.session_state
