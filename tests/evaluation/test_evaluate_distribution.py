"""`evaluate` reports precision/recall of the synthetic against the real test documents on embeddings (PRIVATE,
local): in the printed summary and in evaluation.json; absent before the LLM step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_toys import _make_run, corpus_files, fake_models  # noqa: F401 (fixtures)

from dpkps_core.cli import main


def test_evaluate_reports_precision_and_recall_on_embeddings(tmp_path: Path, corpus_files,  # noqa: F811
                                                             fake_models, capsys: pytest.CaptureFixture[str]  # noqa: F811
                                                             ) -> None:
    run = _make_run(tmp_path, corpus_files[0], client_fraction=0.0, documents=True)
    assert main(["evaluate", "--run", str(run), "--seeds", "2", "--no-coral"]) == 0
    data = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    dist = data["distribution"]
    assert data["private"] is True and dist["k"] == 3 and len(dist["seeds"]) == 2
    assert 0.0 <= dist["precision"]["mean"] <= 1.0 and 0.0 <= dist["recall"]["mean"] <= 1.0
    assert dist["n_synthetic"] == data["n_documents"] and dist["n_real"] == data["n_test"]
    assert dist["n_compared"] == min(dist["n_real"], dist["n_synthetic"])
    out = capsys.readouterr().out
    assert "synthetic vs real test (embeddings)" in out and "precision" in out and "recall" in out


def test_no_distribution_score_without_documents(tmp_path: Path, corpus_files, fake_models,  # noqa: F811
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    run = _make_run(tmp_path, corpus_files[0], client_fraction=0.0, documents=False)
    assert main(["evaluate", "--run", str(run), "--seeds", "1"]) == 0
    assert "distribution" not in json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
