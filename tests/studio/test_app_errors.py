"""AppTest: bad uploads each show one specific message in the page — never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from app_helpers import (state_of, click, declare_classes, goto, ledger_total, new_app, private_vocabulary, problems,
                         toy_csv,
                         upload_corpus)

pytestmark = [pytest.mark.assets]


@pytest.fixture(autouse=True)
def _fast_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))


def visible(at, fragment: str) -> None:
    """``fragment`` is on the page (an error, a warning, a caption or a success message)."""
    assert not at.exception, [e.value for e in at.exception]
    texts = [e.value for group in (at.error, at.warning, at.caption, at.success, at.markdown) for e in group]
    assert any(fragment in t for t in texts), texts


def shows(at, fragment: str) -> None:
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    assert any(fragment in e for e in errors), errors
    assert not any("Traceback" in e for e in errors)


@pytest.mark.parametrize("filename,data,fragment", [
    ("data.csv", bytes(range(256)) * 8, "looks binary"),
    ("data.parquet", b"\x89PNG\r\n\x1a\n" + bytes(200), "Parquet file could not be read"),
    ("empty.csv", b"", "The file is empty"),
    ("header_only.csv", b"text,label\n", "only a header"),
    ("latin1.csv", "text,label\ncaf\xe9 au lait is nice enough,a\n".encode("latin-1"), "not valid UTF-8"),
    ("broken.zip", b"PK\x03\x04 definitely not a zip archive", "could not be opened"),
])
def test_unreadable_files(filename: str, data: bytes, fragment: str) -> None:
    at = new_app()
    upload_corpus(at, data, filename)
    shows(at, fragment)
    # a file that fails to load changes nothing (the corpus loaded before stays, with any results: they cost ε),
    # but none of it is the user's: the page says so and "Next" is disabled
    assert state_of(at).loaded.corpus_id == "demo:bbc"
    assert any("No corpus of yours is loaded" in w.value for w in at.warning)
    assert [b.disabled for b in at.button if b.label.startswith("Next")] == [True]
    at.run()                                                          # still said after any rerun
    assert any("could not be loaded" in w.value and fragment in w.value for w in at.warning)
    goto(at, "private-vocabulary")                                    # and no DP step runs on the hidden demo
    click(at, "Build Ṽ", clean=False)
    assert any("Your file is not loaded" in e.value for e in at.error)
    assert private_vocabulary(at) is None and not state_of(at).ledgers["demo:bbc"].events


def test_error_messages_name_a_control_the_page_has() -> None:
    """The cleaning message advises what the user can do here: choose the text column or upload longer text."""
    at = new_app()
    upload_corpus(at, b"text,label\nshort,a\ntiny,b\n", "short.csv")
    errors = " ".join(e.value for e in at.error)
    assert "choose the column that holds the documents" in errors and "minimum length" not in errors


def test_missing_label_column() -> None:
    csv = b"body_text,notes\n" + b"".join(f"document number {i} is long enough to keep,n{i}\n".encode()
                                          for i in range(20))
    at = new_app()
    upload_corpus(at, csv, "nolabel.csv", load=False)
    assert at.selectbox(key="upload_label_col").value is None    # nothing guessable: the user must choose
    click(at, "Load this corpus", clean=False)
    shows(at, "No label column was found")


def test_one_class_only() -> None:
    """One label in the file is a local note; declaring only one public class is the refusal (public input)."""
    csv = b"text,label\n" + b"".join(f"document number {i} is long enough to keep,same\n".encode() for i in range(20))
    at = new_app()
    upload_corpus(at, csv, "oneclass.csv", declare=False)
    visible(at, "same label")
    declare_classes(at)
    shows(at, "at least two public class names")
    assert not state_of(at).loaded.corpus.declared


def test_classes_must_be_declared_before_anything_is_built() -> None:
    at = new_app()
    upload_corpus(at, toy_csv(10), "toy.csv", declare=False)
    visible(at, "Declare the public class names to continue")
    declare_classes(at, ["sport", "tech", "weather"])
    assert state_of(at).loaded.corpus.classes == ["sport", "tech", "weather"]
    visible(at, "take part in no DP step")  # the business documents (a private count, shown locally)


def test_zero_vocabulary_matches_release_noise_and_warn_locally() -> None:
    """Issue 11 §2: no match must not decide whether Ṽ is released (a neighbour with one match would be); the
    release goes ahead (noise only) and the data owner sees a private warning."""
    at = new_app()
    upload_corpus(at, toy_csv(10), "toy.csv")
    goto(at, "budget")
    at.selectbox(key="_w.vocabulary").set_value("upload").run()
    # letters-only nonsense terms, more of them than N (N > |V| is refused before anything is spent)
    odd = "\n".join("zzq" + a + b + c for a in "vwxy" for b in "bcdfgh" for c in "jklmnpqrst")
    at.file_uploader(key="vocab_upload").set_value(("odd.txt", odd.encode(), "text/plain")).run()
    assert not problems(at)
    goto(at, "private-vocabulary")
    click(at, "Build Ṽ", clean=False)
    visible(at, "No training document contains any term")
    assert ledger_total(at) > 0 and private_vocabulary(at) is not None

