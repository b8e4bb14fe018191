"""CLI `evaluate`, `sweep`, `forecast` on a tiny corpus written to disk (no real model: embedders are faked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_toys import _make_run, corpus_files, fake_models  # noqa: F401 (fixtures)
from eval_toys import POOLS, BowEmbedder

from dpkps_core.cli import main


def _check_metric(d: dict) -> None:
    assert 0 <= d["mean"] <= 1 and d["sd"] >= 0 and d["seeds"] and "accuracy" in d["seeds"][0]


def test_evaluate_writes_private_json_with_required_keys(tmp_path: Path, corpus_files, fake_models,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    run = _make_run(tmp_path, corpus_files[0], client_fraction=0.5, documents=True)
    assert main(["evaluate", "--run", str(run), "--seeds", "2"]) == 0
    data = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    assert data["private"] is True and "not for release" in data["note"]
    for key in ("no_llm_accuracy", "real_keyphrase_baseline_accuracy", "synthetic_accuracy", "real_baseline_accuracy",
                "synthetic_accuracy_coral", "synthetic_accuracy_no_coral"):
        _check_metric(data[key])
        assert len(data[key]["seeds"]) == 2
    assert data["n_client"] > 0 and data["n_documents"] == 36 and 0 < data["chance_accuracy"] < 1
    assert data["real_baseline_accuracy"]["n_train"] == 36  # same number of real documents (12 per class)
    assert (run / "evaluation.json").stat().st_mode & 0o077 == 0
    out = capsys.readouterr().out
    assert "synthetic_accuracy" in out and "not for release" in out
    corpus_text = corpus_files[0].read_text(encoding="utf-8")
    assert not any(line in out for line in corpus_text.splitlines()[1:])  # never prints document text
    from dpkps_core.evaluation import load_run, projection_for_run

    df = projection_for_run(load_run(run), embedder=BowEmbedder(), method="tsne", max_points_per_source=20)
    assert set(df.source) == {"real", "synthetic"} and df.attrs["synthetic"] == "documents"


def test_evaluate_without_documents_and_coral_errors(tmp_path: Path, corpus_files, fake_models,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    run = _make_run(tmp_path, corpus_files[0], client_fraction=0.0, documents=False)
    assert main(["evaluate", "--run", str(run), "--seeds", "1"]) == 0
    data = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    assert {"no_llm_accuracy", "real_keyphrase_baseline_accuracy"} <= set(data) and "synthetic_accuracy" not in data
    assert data["no_llm_accuracy"]["mean"] > 0.6  # the toy classes are easy
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--coral"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "CORAL" in err
    assert main(["evaluate", "--run", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_sweep_cli_rows_and_files(tmp_path: Path, corpus_files, fake_models, capsys: pytest.CaptureFixture[str]) -> None:
    corpus_csv, vocab = corpus_files
    out = tmp_path / "sweep"
    args = ["sweep", "--corpus", str(corpus_csv), "--vocabulary", str(vocab), "--out", str(out),
            "--eps-voc-grid", "2,20", "--eps-kde-grid", "5", "--methods", "independent,iterative-log", "--seeds", "2",
            "--per-class", "10", "-N", "30", "-S", "5", "-L", "5", "--test-fraction", "0.25",
            "--classes", ",".join(POOLS)]
    assert main(args) == 0
    import pandas as pd

    df = pd.read_csv(out / "sweep.csv")
    assert len(df) == 2 * 1 * 2 * 2
    meta = json.loads((out / "sweep.json").read_text(encoding="utf-8"))
    assert meta["private"] is True and meta["rows"] == len(df)
    assert (out / "sweep.html").stat().st_size > 1000
    assert "no-LLM accuracy" in capsys.readouterr().out
    assert main(["sweep", "--corpus", str(corpus_csv), "--out", str(out), "--methods", "magic"]) == 2


def test_forecast_cli(tmp_path: Path, corpus_files, fake_models, capsys: pytest.CaptureFixture[str]) -> None:
    corpus_csv, vocab = corpus_files
    base = ["forecast", "--corpus", str(corpus_csv), "--vocabulary", str(vocab), "-N", "30", "-S", "5", "-L", "5",
            "--classes", ",".join(POOLS)]
    assert main(base + ["--exact", "--eps-voc", "0.05", "--eps-kde", "0.05", "--method", "iterative-log",
                        "--out", str(tmp_path / "f")]) == 0
    low = capsys.readouterr().out
    data = json.loads((tmp_path / "f" / "forecast.json").read_text(encoding="utf-8"))
    assert data["private"] is True and data["usable"] is False and (tmp_path / "f" / "forecast.html").exists()
    assert "Verdict: Not usable" in low and "disclosure" in low and "not covered by ε" in low
    assert main(base + ["--exact", "--eps-voc", "100", "--eps-kde", "100", "--epsilon-cap", "300",
                        "--method", "independent"]) == 0
    high = capsys.readouterr().out
    assert "Verdict: Likely usable" in high
    assert set(POOLS) <= {line.split()[1].rstrip(":") for line in high.splitlines() if line.startswith("  density ")}
    # the default is the DP forecast: it charges ε_forecast to the corpus's persistent ledger
    assert main(base + ["--eps-voc", "5", "--eps-kde", "5", "--eps-forecast", "0.3", "--out", str(tmp_path / "g")]) == 0
    dp = capsys.readouterr().out
    assert "DP forecast" in dp and "ε_forecast = 0.3 charged" in dp and "Verdict:" in dp
    assert json.loads((tmp_path / "g" / "forecast.json").read_text(encoding="utf-8"))["covered_by_epsilon"] is True
    assert main(["ledger", "--corpus", str(corpus_csv), "--json"]) == 0
    listed = capsys.readouterr().out
    assert listed.count('"step": "forecast"') == 1 and '"mechanism": "laplace_forecast_statistics"' in listed


def test_help_lists_options(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd, options in (("evaluate", ["--run", "--seeds", "--classifier", "--coral", "--no-coral", "--coral-weight"]),
                         ("sweep", ["--corpus", "--out", "--eps-voc-grid", "--eps-kde-grid", "--methods", "--seeds",
                                    "--per-class", "--test-fraction"]),
                         ("forecast", ["--corpus", "--eps-voc", "--eps-kde", "--vocab-size", "--out"])):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = capsys.readouterr().out
        for opt in options:
            assert opt in out, (cmd, opt)
