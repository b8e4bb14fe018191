"""``python -m dpkps_core report`` and ``sample --config`` (issue 34 §1 and §3): the bundle's reproduce_config.json,
with the private corpus given on the command line, re-runs the DP steps of a seeded run byte for byte."""

from __future__ import annotations

import json
import shlex
import stat
from pathlib import Path

import pytest
from dossier_helpers import CANARIES
from eval_toys import BowEmbedder

import dpkps_core.cli.sample as sample_cli
from dpkps_core.cli import main
from dpkps_core.dossier import build_dossier
from dpkps_core.dossier import pdf as dossier_pdf


def test_report_writes_the_release_edition_owner_only(dossier_runs: dict[str, Path], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["report", "--run", str(dossier_runs["canary"]), "--out", str(out)]) == 0
    names = {p.name for p in out.iterdir()}
    assert names == {"dossier.html", "dossier.json", "reproduce.md", "reproduce_config.json"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in out.iterdir())
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert json.loads((out / "dossier.json").read_text(encoding="utf-8"))["edition"] == "release"
    assert "wrote" in capsys.readouterr().out


def test_report_internal_prints_the_decision(dossier_runs: dict[str, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"max_epsilon_per_release": 20, "allow_seeded_demo": True}), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["report", "--run", str(dossier_runs["canary"]), "--internal", "--policy", str(policy),
                 "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == {"dossier_internal.html", "dossier_internal.json"}
    printed = capsys.readouterr().out
    assert "decision: SHARE" in printed and "max_epsilon_per_release" in printed and "PRIVATE" in printed


@pytest.mark.parametrize("args, message", [
    (["--policy", "{policy}"], "add --internal"),
    (["--internal", "--policy", "{missing}"], "does not exist"),
])
def test_report_one_line_errors(dossier_runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                args: list[str], message: str) -> None:
    policy = tmp_path / "p.json"
    policy.write_text("{}", encoding="utf-8")
    args = [a.format(policy=policy, missing=tmp_path / "none.json") for a in args]
    assert main(["report", "--run", str(dossier_runs["cli"]), *args, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_report_pdf_without_chromium_is_one_line(dossier_runs: dict[str, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dossier_pdf, "CHROMIUM_CANDIDATES", ("/nonexistent/chromium",))
    monkeypatch.delenv("DPKPS_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["report", "--run", str(dossier_runs["cli"]), "--pdf", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "No Chromium was found" in err and not (tmp_path / "o").exists()


def _rerun(tmp_path: Path, config: Path, extra: list[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sample_cli, "get_embedder", lambda name, **kw: BowEmbedder())
    out = tmp_path / "rerun"
    assert main(["sample", "--config", str(config), *extra, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("which", ["cli", "canary"])
def test_sample_config_reproduces_a_seeded_run(dossier_runs: dict[str, Path], tmp_path: Path, which: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    run = dossier_runs[which]
    config = tmp_path / "reproduce_config.json"
    config.write_bytes(build_dossier(run).files()["reproduce_config.json"])
    if which == "cli":
        extra = ["--corpus", str(run.parent / "corpus.csv")]
    else:  # the placeholders of reproduce.md, filled in by whoever holds the corpus
        extra = ["--corpus", str(dossier_runs["corpus"]), "--text-column", CANARIES["text_column"],
                 "--label-column", CANARIES["label_column"], "--person-column", CANARIES["person_column"]]
    out = _rerun(tmp_path, config, extra, monkeypatch)
    for name in ("sequences.jsonl", "private_vocabulary.json"):
        assert (out / name).read_bytes() == (run / name).read_bytes(), name
    old, new = (json.loads((p / "privacy_report.json").read_text()) for p in (run, out))
    assert [e["epsilon"] for e in old["events"]] == [e["epsilon"] for e in new["events"]]


@pytest.mark.parametrize("content, extra, message", [
    ({"corpus": "<YOUR_CORPUS.csv>", "eps_voc": 1}, [], "placeholder"),
    ({"corpus": "demo:bbc", "eps_vocab": 1}, [], "unknown setting(s) eps_vocab"),
    ([1, 2], [], "must hold a JSON object"),
    ({"corpus": "demo:bbc", "eps_voc": -1}, [], "ε_voc must be a finite number > 0"),
    ({"corpus": "demo:bbc"}, ["--eps-voc", "3", "--seed", "1"], "change --eps-voc, --seed in the file"),
])
def test_sample_config_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: object,
                                           extra: list[str], message: str) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps(content), encoding="utf-8")
    assert main(["sample", "--config", str(config), *extra, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert not (tmp_path / "r").exists()


def test_the_generate_command_carries_the_runs_llm_settings() -> None:
    """The generate line of reproduce.md: the settings the prompts were sent with, parsed by `generate` itself."""
    from dpkps_core.cli.main import build_parser
    from dpkps_core.dossier.reproduce import generate_command

    gen = {"backend": "offline", "models": ["SmolLM2-135M-Instruct"], "document_type": "a clinical note",
           "template": "Write {doc_type} about {keyphrases}.", "class_names_in_prompts": False,
           "few_shot_examples": 3, "parameters": {"max_tokens": 200, "temperature": 0.5, "batch_size": 8}}
    line = generate_command(gen)
    words = shlex.split(line.replace("<NEW_RUN_FOLDER>", "r").replace("<PUBLIC_FEW_SHOT_FILE>", "f.csv"))
    assert words[:3] == ["python", "-m", "dpkps_core"]
    args = build_parser().parse_args(words[3:])
    assert (args.backend, args.doc_type, args.template) == ("offline", "a clinical note",
                                                            "Write {doc_type} about {keyphrases}.")
    assert (args.include_labels, args.few_shot_count, args.max_tokens, args.temperature, args.batch_size) == (
        False, 3, 200, 0.5, 8)
    assert (args.no_repeat_ngram, args.repetition_penalty) == (0, 1.0)  # absent from the log = it was off
    remote = generate_command({**gen, "backend": "openai", "models": ["gpt-4o-mini"],
                               "base_url": "http://127.0.0.1:8000/v1"})
    assert "--model gpt-4o-mini --base-url http://127.0.0.1:8000/v1" in remote and "--batch-size" not in remote
    assert generate_command({**gen, "backend": "scripted"}).startswith("# the documents were written by")
