"""``python -m dpkps_core sample``: outputs, and one specific one-line error per bad input."""

import json
import subprocess
import sys

import pytest

from dpkps_core.cli import main

TOPICS = {
    "sport": "striker goal match league stadium coach team cup final fans",
    "tech": "smartphone processor battery software browser broadband network console update chip",
    "business": "shares bank profits inflation interest rates airline fuel margins market",
}


@pytest.fixture
def corpus_csv(tmp_path):
    rows = ["text,label"]
    for label, words in TOPICS.items():
        w = words.split()
        for i in range(30):
            rows.append(f'"Report {i}: the {w[i % 10]} and the {w[(i + 3) % 10]} with {w[(i + 5) % 10]} today.",{label}')
    p = tmp_path / "corpus.csv"
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return p


@pytest.fixture
def vocab_file(tmp_path):
    p = tmp_path / "vocab.txt"
    p.write_text("\n".join(" ".join(TOPICS.values()).split() + ["cup final", "interest rates", "unused term"]) + "\n")
    return p


def _run(args):
    return main([str(a) for a in args])


@pytest.mark.model
def test_sample_writes_run_folder(tmp_path, corpus_csv, vocab_file, capsys):
    out = tmp_path / "run"
    rc = _run(["sample", "--corpus", corpus_csv, "--vocabulary", vocab_file, "--eps-voc", 5, "--eps-kde", 5,
               "--method", "iterative-log", "--length", 4, "--per-class", 3, "--vocab-size", 20, "-S", 3,
               "--seed", 1, "--out", out])
    assert rc == 0
    seqs = [json.loads(line) for line in (out / "sequences.jsonl").read_text().splitlines()]
    assert len(seqs) == 9 and {s["label"] for s in seqs} == set(TOPICS)
    assert all(len(s["keyphrases"]) == 4 and s["method"] == "iterative-log" for s in seqs)
    report = json.loads((out / "privacy_report.json").read_text())
    assert report["epsilon_total"] == 10 and report["epsilon_vocabulary"] == 5 and report["epsilon_kde"] == 5
    assert [e["step"] for e in report["events"]] == ["vocabulary", "kde"]
    assert report["seed_policy"] == "seeded-demo-not-for-release"
    assert (out / "split.json").exists() and (out / "run_config.json").exists()
    assert oct((out).stat().st_mode)[-3:] == "700"
    assert "NOT FOR RELEASE" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--eps-voc", "0"], "ε_voc must be a finite number > 0"),
        (["--eps-kde", "-1"], "ε_kde must be a finite number > 0"),
        (["--length", "1000"], "over the limit"),
        (["--vocab-size", "0"], "N (private vocabulary size) must be ≥ 1"),
        (["--eps-voc", "5", "--eps-kde", "5", "--epsilon-cap", "4"], "over the budget cap"),
        (["--method", "iterative-log", "--density", "histogram"], "only serves independent sampling"),
    ],
)
def test_bad_parameters_give_specific_errors(tmp_path, corpus_csv, vocab_file, capsys, extra, message):
    rc = _run(["sample", "--corpus", corpus_csv, "--vocabulary", vocab_file, *extra, "--out", tmp_path / "r"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.startswith("error: ") and message in err and "\n" not in err


def test_missing_corpus_file(tmp_path, vocab_file, capsys):
    assert _run(["sample", "--corpus", tmp_path / "nope.csv", "--vocabulary", vocab_file, "--out", tmp_path / "r"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_unknown_demo(tmp_path, capsys):
    assert _run(["sample", "--corpus", "demo:nope", "--out", tmp_path / "r"]) == 2
    assert "Unknown demo corpus" in capsys.readouterr().err


def test_one_class_corpus(tmp_path, vocab_file, capsys):
    p = tmp_path / "one.csv"
    p.write_text("text,label\n" + "".join(f'"goal number {i} in the league match",sport\n' for i in range(10)))
    assert _run(["sample", "--corpus", p, "--vocabulary", vocab_file, "--out", tmp_path / "r"]) == 2
    assert "two classes" in capsys.readouterr().err


def test_no_vocabulary_match(tmp_path, corpus_csv, capsys):
    v = tmp_path / "v.txt"
    v.write_text("zebra\nquasar\n")
    assert _run(["sample", "--corpus", corpus_csv, "--vocabulary", v, "--out", tmp_path / "r"]) == 2
    assert "No document contains any term" in capsys.readouterr().err


def test_subprocess_exit_code_and_one_line_message(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dpkps_core", "sample", "--corpus", "demo:nope", "--out",
                           str(tmp_path / "r")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: ")
    assert "Traceback" not in proc.stderr


def test_help_explains_every_option():
    proc = subprocess.run([sys.executable, "-m", "dpkps_core", "sample", "--help"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0
    for opt in ("--corpus", "--vocabulary", "--eps-voc", "--eps-kde", "--method", "--length", "--per-class",
                "--vocab-size", "--terms-per-doc", "--features", "--bandwidth", "--seed", "--out"):
        assert opt in proc.stdout
