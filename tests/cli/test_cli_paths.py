"""Bad paths on the command line are one line on stderr with exit status 2, never a traceback (cli/common.py's
path checks, cli/main.py's OSError guard), and they are caught before a model is loaded or ε is charged.

Each command × each bad path: an output that exists as a file (or an output file that is a folder), an output
whose parent folder is missing, an output that cannot be written, and a missing input. Run in-process through
``dpkps_core.cli.main`` (no model is loaded: every check comes first).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from dpkps_core.cli import main

CORPUS_ARGS = ["--classes", "sport,tech,business", "--vocabulary", "wordfreq"]


def _unwritable_folder(tmp_path: Path) -> Path:
    """A folder nothing can be created in: a read-only folder (not for root), else /proc (refuses new files even
    for root); skipped where neither works."""
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        ro = tmp_path / "read-only"
        ro.mkdir()
        ro.chmod(0o500)
        return ro
    proc = Path("/proc")
    if proc.is_dir():
        try:
            with tempfile.TemporaryFile(dir=proc):
                pass
        except OSError:
            return proc
    pytest.fail("no folder on this machine refuses new files (run as a non-root user, or where /proc exists)")


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    a_file = tmp_path / "existing.txt"
    a_file.write_text("not a folder\n", encoding="utf-8")
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("text,label\n" + "".join(f"document number {i} about the match today,sport\n"
                                                for i in range(6)), encoding="utf-8")
    run = tmp_path / "run"
    run.mkdir()
    (run / "sequences.jsonl").write_text("", encoding="utf-8")
    return {"file": a_file, "missing_parent": tmp_path / "no" / "such" / "out", "corpus": corpus, "run": run,
            "missing": tmp_path / "missing.csv", "tmp": tmp_path}


def _out_commands(p: dict[str, Path]) -> dict[str, list[str]]:
    """Each command's arguments with its output path left for the test (the last element is appended)."""
    corpus = ["--corpus", str(p["corpus"]), *CORPUS_ARGS]
    return {
        "sample": ["sample", *corpus, "--out"],
        "sweep": ["sweep", *corpus, "--out"],
        "forecast": ["forecast", *corpus, "--out"],
        "compare": ["compare", "--corpus", str(p["corpus"]), "--classes", "sport,tech", "--eps", "2", "--out"],
        "audit": ["audit", *corpus, "--out"],
        "generate": ["generate", "--sequences", str(p["run"] / "sequences.jsonl"), "--doc-type", "a note", "--out"],
        "export --folder": ["export", "--run", str(p["run"]), "--zip", str(p["tmp"] / "b.zip"), "--folder"],
    }


OUT_COMMANDS = ("sample", "sweep", "forecast", "compare", "audit", "generate", "export --folder")


@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_output_folder_that_is_an_existing_file(paths, capsys, command):
    args = _out_commands(paths)[command] + [str(paths["file"])]
    assert main(args) == 2
    _one_line_error(capsys, "exists and is a file, not a folder", str(paths["file"]))


@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_output_folder_with_a_missing_parent(paths, capsys, command):
    args = _out_commands(paths)[command] + [str(paths["missing_parent"])]
    assert main(args) == 2
    _one_line_error(capsys, "parent folder", "does not exist")
    assert not paths["missing_parent"].parent.exists()  # nothing was created


@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_output_folder_that_cannot_be_written(paths, capsys, command, tmp_path):
    ro = _unwritable_folder(tmp_path)
    args = _out_commands(paths)[command] + [str(ro / "out")]
    assert main(args) == 2
    _one_line_error(capsys, "not writable")


def test_existing_output_folder_that_cannot_be_written(paths, capsys, tmp_path):
    ro = _unwritable_folder(tmp_path)
    assert main(["sample", "--corpus", str(paths["corpus"]), *CORPUS_ARGS, "--out", str(ro)]) == 2
    _one_line_error(capsys, "is not writable")


def test_sample_out_an_existing_file_is_refused_before_anything_is_charged(paths, capsys, monkeypatch, tmp_path):
    """The reported case (issue 24 §6): ``sample --out <an existing file>`` printed a FileExistsError traceback
    after the run. Now it is refused first: no ledger is opened, nothing is spent."""
    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(tmp_path / "ledgers"))
    assert main(["sample", "--corpus", str(paths["corpus"]), *CORPUS_ARGS, "--out", str(paths["file"])]) == 2
    _one_line_error(capsys, "--out")
    assert not (tmp_path / "ledgers").exists() or not any((tmp_path / "ledgers").iterdir())


# ---- output files (export --zip) ---------------------------------------------------------------------------


def test_export_zip_that_is_a_folder(paths, capsys):
    assert main(["export", "--run", str(paths["run"]), "--zip", str(paths["tmp"])]) == 2
    _one_line_error(capsys, "--zip", "is a folder")


def test_export_zip_with_a_missing_parent(paths, capsys):
    assert main(["export", "--run", str(paths["run"]), "--zip", str(paths["missing_parent"] / "b.zip")]) == 2
    _one_line_error(capsys, "--zip", "does not exist")


def test_export_zip_that_cannot_be_written(paths, capsys, tmp_path):
    ro = _unwritable_folder(tmp_path)
    assert main(["export", "--run", str(paths["run"]), "--zip", str(ro / "b.zip")]) == 2
    _one_line_error(capsys, "--zip", "not writable")


# ---- missing inputs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["sample", "sweep", "forecast", "compare", "audit", "ledger"])
def test_missing_corpus(paths, capsys, command):
    corpus = ["--corpus", str(paths["missing"])]
    out = ["--out", str(paths["tmp"] / "o")]
    args = {
        "sample": ["sample", *corpus, *CORPUS_ARGS, *out],
        "sweep": ["sweep", *corpus, *CORPUS_ARGS, *out],
        "forecast": ["forecast", *corpus, *CORPUS_ARGS],
        "compare": ["compare", *corpus, "--classes", "a,b", "--eps", "2", *out],
        "audit": ["audit", *corpus, *CORPUS_ARGS],
        "ledger": ["ledger", *corpus],
    }[command]
    assert main(args) == 2
    _one_line_error(capsys, "missing.csv", "does not exist")


@pytest.mark.parametrize("args, needle", [
    (["generate", "--sequences", "{tmp}/nope/sequences.jsonl", "--doc-type", "a note"], "--sequences"),
    (["generate", "--sequences", "{run}/sequences.jsonl", "--doc-type", "a note", "--few-shot", "{tmp}/none.csv"],
     "--few-shot"),
    (["generate", "--sequences", "{run}/sequences.jsonl", "--doc-type", "a note", "--backend", "local",
      "--model-path", "{tmp}/no-model"], "--model-path"),
    (["evaluate", "--run", "{tmp}/no-run"], "--run"),
    (["evaluate", "--run", "{file}"], "--run"),
    (["export", "--run", "{tmp}/no-run", "--zip", "{tmp}/b.zip"], "--run"),
])
def test_missing_or_wrong_inputs(paths, capsys, args, needle):
    filled = [a.format(tmp=paths["tmp"], run=paths["run"], file=paths["file"]) for a in args]
    assert main(filled) == 2
    _one_line_error(capsys, needle)


# ---- the top-level guard -----------------------------------------------------------------------------------


def test_an_unforeseen_os_error_is_one_line(paths, capsys, monkeypatch):
    """cli/main.py turns any OSError a command did not check for into one line, exit status 2."""
    import dpkps_core.dossier.export

    def refuse(*_a, **_k):
        raise PermissionError(13, "Permission denied", str(paths["tmp"] / "b.zip"))

    monkeypatch.setattr(dpkps_core.dossier.export, "build_bundle", refuse)
    assert main(["export", "--run", str(paths["run"]), "--zip", str(paths["tmp"] / "b.zip")]) == 2
    _one_line_error(capsys, "Permission denied", "b.zip")
