"""The corpus file's text encoding is a public user choice (docs/DESIGN.md §1, §2.0): UTF-8 by default, Latin-1 or
Windows-1252 when chosen; the WHOLE file is decoded with it (never guessed from a sample of its bytes). The loader,
the CLI's ``--encoding`` and page 1's "Encoding" choice, and the UTF-8 error that names each one's way out."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dpkps_core.cli.common import add_sampling_arguments, config_from_args
from dpkps_core.cli.main import main
from dpkps_core.method.config import SamplingConfig, load_config_corpus
from dpkps_core.corpus import (
    ENCODINGS,
    NotUTF8Error,
    check_encoding,
    list_columns,
    load_corpus,
    read_rows,
    suggest_columns,
)
from dpkps_core.errors import CorpusError, ParameterError

_WORDS = ("Café crème naïve résumé déjà vu — señor", "Über straße grüße für alle Menschen hier")


def _rows(n: int = 6) -> list[tuple[str, str]]:
    return [(f"{_WORDS[i % 2]} document number {i}", "ab"[i % 2]) for i in range(n)]


def _csv(encoding: str, *, header: str = "texte_é,label", n: int = 6, tail: str = "") -> bytes:
    lines = [header] + [f"{t},{l}" for t, l in _rows(n)]
    return ("\n".join(lines) + "\n" + tail).replace("—", "-").encode(encoding)


# ------------------------------------------------------------------------------------------------ loader


def test_a_latin1_csv_loads_with_latin1_and_reads_every_accent() -> None:
    data = _csv("latin-1", header="text,label")
    with pytest.raises(NotUTF8Error, match="not valid UTF-8"):
        load_corpus(data, filename="notes.csv")
    c = load_corpus(data, filename="notes.csv", encoding="latin-1")
    assert c.texts[0].startswith("Café crème naïve résumé déjà vu - señor")
    assert any(t.startswith("Über straße grüße") for t in c.texts)
    assert len(c) == 6


def test_column_helpers_and_raw_rows_decode_with_the_chosen_encoding() -> None:
    data = _csv("latin-1", header="texte_é,label")
    assert list_columns(data, filename="f.csv", encoding="latin-1") == ["texte_é", "label"]
    assert suggest_columns(data, filename="f.csv", encoding="latin-1") == (None, "label")
    raw = read_rows(data, filename="f.csv", text_column="texte_é", label_column="label", encoding="latin-1")
    assert raw.column("texte_é")[0].startswith("Café")
    with pytest.raises(NotUTF8Error):
        list_columns(data, filename="f.csv")


def test_the_whole_file_is_decoded_never_a_sample() -> None:
    """A file whose only non-UTF-8 byte is far past the first rows is refused as UTF-8 (a sample would pass it);
    chosen as Latin-1 every row, that one included, is decoded with Latin-1."""
    head = "\n".join(f"plain ascii document number {i} with words,{'ab'[i % 2]}" for i in range(3000))
    data = ("text,label\n" + head + "\n").encode("ascii") + "the last row says café,a\n".encode("latin-1")
    assert len(data) > 100_000
    with pytest.raises(NotUTF8Error) as err:
        load_corpus(data, filename="long.csv")
    assert err.value.line == 3002 and "line 3002" in str(err.value)
    c = load_corpus(data, filename="long.csv", encoding="latin-1", drop_duplicates=False)
    assert c.texts[-1] == "the last row says café" and len(c) == 3001


def test_utf8_stays_the_default_and_a_bom_is_allowed() -> None:
    data = "\ufefftext,label\n".encode("utf-8") + _csv("utf-8", header="").lstrip(b"\n")
    c = load_corpus(data, filename="u.csv")
    assert c.texts[0].startswith("Café crème") and c.text_column == "text"


def test_cp1252_reads_its_own_characters_and_refuses_its_undefined_bytes() -> None:
    text = "text,label\n" + "\n".join(f"“Quoted” — €{i} for the café’s review,{'ab'[i % 2]}" for i in range(6))
    c = load_corpus(text.encode("cp1252"), filename="w.csv", encoding="cp1252")
    assert c.texts[0] == "“Quoted” — €0 for the café’s review"
    bad = text.encode("cp1252") + b"\nundefined \x81 byte here in this row,a\n"
    with pytest.raises(NotUTF8Error, match="not valid Windows-1252"):
        load_corpus(bad, filename="w.csv", encoding="cp1252")


def test_txt_zip_members_decode_with_the_chosen_encoding(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "c.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for i, (t, l) in enumerate(_rows(4)):
            zf.writestr(f"{l}/{i}.txt", t.replace("—", "-").encode("latin-1"))
    with pytest.raises(NotUTF8Error, match="file 'a/0.txt'"):
        load_corpus(path)
    c = load_corpus(path, encoding="latin-1")
    assert sorted(c.labels) == ["a", "a", "b", "b"] and any(t.startswith("Café") for t in c.texts)


@pytest.mark.parametrize("given,canonical", [("UTF-8", "utf-8"), ("utf8", "utf-8"), ("latin1", "latin-1"),
                                             ("ISO-8859-1", "latin-1"), ("windows-1252", "cp1252")])
def test_encoding_names_are_normalised(given: str, canonical: str) -> None:
    assert check_encoding(given) == canonical and canonical in ENCODINGS


@pytest.mark.parametrize("bad", ["utf-16", "ascii", "", None, 8])
def test_other_encodings_are_refused_before_reading(bad: object, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="encoding must be one of"):
        load_corpus(tmp_path / "does-not-exist.csv", encoding=bad)  # type: ignore[arg-type]


def test_binary_and_utf16_stay_refused_whatever_the_encoding() -> None:
    with pytest.raises(CorpusError, match="looks binary"):
        load_corpus(b"text,label\n\x00\x01\x02 binary,a\n", filename="b.csv", encoding="latin-1")
    with pytest.raises(CorpusError, match="UTF-16"):
        load_corpus("text,label\n".encode("utf-16"), filename="b.csv", encoding="latin-1")


def test_the_error_names_the_way_out_without_document_text() -> None:
    with pytest.raises(NotUTF8Error) as err:
        load_corpus(_csv("latin-1", header="text,label"), filename="notes.csv")
    msg = str(err.value)
    assert "encoding='latin-1'" in msg and "Café" not in msg and "caf" not in msg.lower()
    assert "`--encoding latin-1`" in str(err.value.with_hint("run it again with `--encoding latin-1`"))


# ------------------------------------------------------------------------------------------------ CLI


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_sampling_arguments(p)
    return p.parse_args(list(argv))


def test_cli_encoding_flag_reaches_the_loader_and_the_run_config(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    path.write_bytes(_csv("latin-1", header="text,label"))
    assert _parse("--corpus", str(path)).encoding == "utf-8"
    config = config_from_args(_parse("--corpus", str(path), "--encoding", "latin-1", "--classes", "a,b"))
    assert config.encoding == "latin-1" and config.to_run_dict()["encoding"] == "latin-1"
    corpus = load_config_corpus(config)
    assert corpus.texts[0].startswith("Café crème")
    # a run folder's config read back decodes the file the same way
    assert SamplingConfig.from_dict(config.to_run_dict()).encoding == "latin-1"
    with pytest.raises(SystemExit):
        _parse("--encoding", "utf-16")


def test_cli_utf8_error_says_which_flag_to_add(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "notes.csv"
    path.write_bytes(_csv("latin-1", header="text,label"))
    rc = main(["sample", "--corpus", str(path), "--classes", "a,b", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and "not valid UTF-8" in err and "`--encoding latin-1`" in err and "Traceback" not in err
    assert "Café" not in err


# ------------------------------------------------------------------------------------------------ app


@pytest.mark.assets
def test_app_a_latin1_file_loads_after_choosing_latin1(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from app_helpers import state_of, goto, new_app

    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    data = _csv("latin-1", header="text,label", n=12)
    at = new_app()
    goto(at, "corpus")
    at.radio(key="_w.corpus_source").set_value("upload").run()
    at.file_uploader(key="corpus_upload").set_value(("latin.csv", data, "text/csv")).run()
    errors = [e.value for e in at.error]
    assert any("not valid UTF-8" in e and "choose Latin-1 under Encoding" in e for e in errors), errors
    assert not any("--encoding" in e for e in errors)
    at.selectbox(key="upload_encoding").set_value("latin-1").run()
    assert not at.error and not at.exception
    [b for b in at.button if b.label.startswith("Load this corpus")][0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    corpus = state_of(at).loaded.corpus
    assert str(state_of(at).loaded.corpus_id).startswith("upload:") and len(corpus) == 12
    assert corpus.texts[0].startswith("Café crème")
    assert state_of(at).loaded.encoding == "latin-1"
