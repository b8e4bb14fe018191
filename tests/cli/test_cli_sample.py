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
               "--seed", 1, "--classes", "sport,tech,business", "--out", out])
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
    rc = _run(["sample", "--corpus", corpus_csv, "--vocabulary", vocab_file, "--classes", "sport,tech,business",
               *extra, "--out", tmp_path / "r"])
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
    assert _run(["sample", "--corpus", p, "--vocabulary", vocab_file, "--classes", "sport", "--out", tmp_path / "r"]) == 2
    assert "at least two public class names" in capsys.readouterr().err


def test_undeclared_classes_are_refused_with_local_suggestions(tmp_path, corpus_csv, vocab_file, capsys):
    assert _run(["sample", "--corpus", corpus_csv, "--vocabulary", vocab_file, "--out", tmp_path / "r"]) == 2
    err = capsys.readouterr().err
    assert "--classes" in err and "business, sport, tech" in err and "\n" not in err.strip()
    assert not (tmp_path / "r").exists()


def test_classes_file_and_both_given(tmp_path, corpus_csv, vocab_file, capsys):
    f = tmp_path / "classes.txt"
    f.write_text("sport\ntech\n\nbusiness\n", encoding="utf-8")
    assert _run(["sample", "--corpus", corpus_csv, "--vocabulary", vocab_file, "--classes-file", f, "-K", 1,
                 "--vocab-size", 10, "--seed", 0, "--out", tmp_path / "r"]) == 0
    assert json.loads((tmp_path / "r" / "run_config.json").read_text())["classes"] == ["sport", "tech", "business"]
    assert _run(["sample", "--corpus", corpus_csv, "--vocabulary", vocab_file, "--classes-file", f, "--classes",
                 "a,b", "--out", tmp_path / "r2"]) == 2
    assert "not both" in capsys.readouterr().err


def test_declared_classes_decide_the_release(tmp_path, corpus_csv, vocab_file, capsys):
    """Issue 11 §2: an undeclared label is left out; a declared class without documents still gets its
    (noise-only) density and its sequences, so the release has the same shape whatever the data hold."""
    out = tmp_path / "r"
    assert _run(["sample", "--corpus", corpus_csv, "--vocabulary", vocab_file, "--classes", "sport,tech,weather",
                 "-K", 2, "--vocab-size", 10, "--seed", 0, "--out", out]) == 0
    printed = capsys.readouterr().out
    assert "30 training document(s) carry a label outside" not in printed  # the exact count depends on the split
    assert "outside the declared classes" in printed and "no training document" in printed
    seqs = [json.loads(line) for line in (out / "sequences.jsonl").read_text().splitlines()]
    assert [s["label"] for s in seqs] == ["sport", "sport", "tech", "tech", "weather", "weather"]
    report = json.loads((out / "privacy_report.json").read_text())
    assert report["classes"] == ["sport", "tech", "weather"]
    assert "business" not in json.dumps(report)


def test_no_vocabulary_match_still_releases_and_warns_locally(tmp_path, corpus_csv, capsys):
    """Issue 11 §2: "no document contains any term of V" must not decide whether Ṽ is released (a neighbour with
    one matching document would be released): the run goes ahead, noise only, with a local warning."""
    v = tmp_path / "v.txt"
    v.write_text("zebra\nquasar\n")
    assert _run(["sample", "--corpus", corpus_csv, "--vocabulary", v, "--classes", "sport,tech,business", "-K", 1,
                 "--vocab-size", 2, "--seed", 0, "--out", tmp_path / "r"]) == 0
    assert "No training document contains any term" in capsys.readouterr().out
    assert len((tmp_path / "r" / "sequences.jsonl").read_text().splitlines()) == 3


def test_text_column_not_decidable_from_names_asks_for_text_column(tmp_path, corpus_csv, vocab_file, capsys):
    """docs/DESIGN.md §2.0: two columns whose names both fit the text rule — the CLI asks for --text-column (one line,
    nothing written) instead of picking one by its values; with --text-column the run goes ahead."""
    lines = corpus_csv.read_text(encoding="utf-8").splitlines()
    rows = ["summary,notes,label"] + [f'"short",{ln}' for ln in lines[1:]]
    p = tmp_path / "two_texts.csv"
    p.write_text("\n".join(rows) + "\n", encoding="utf-8")
    args = ["sample", "--corpus", p, "--vocabulary", vocab_file, "--classes", "sport,tech,business", "-K", 1,
            "--vocab-size", 5, "--seed", 0]
    assert _run([*args, "--out", tmp_path / "r"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Several columns could hold the document text (summary, notes)" in err and "--text-column" in err
    assert "\n" not in err and not (tmp_path / "r").exists()
    assert _run([*args, "--text-column", "notes", "--out", tmp_path / "r2"]) == 0
