"""evaluation.json read back (dpkps_core.evaluation.run.read_evaluation): what the app's page 7 shows after a reload
and what the CLI's ``evaluate`` wrote are the same result, exactly (PRIVATE file of the run folder)."""

from __future__ import annotations

import json
from pathlib import Path

from dpkps_core.evaluation import EvaluationResult, read_evaluation, write_evaluation
from dpkps_core.evaluation.distribution import DistributionScore
from dpkps_core.evaluation.metrics import MetricSummary, Scores
from dpkps_core.records.runfolder import EVALUATION_FILE


def _result() -> EvaluationResult:
    synthetic = MetricSummary("synthetic_accuracy", (0, 1), (Scores(0.91, 0.9, {"a": 0.8, "b": 1.0}),
                                                             Scores(0.87, 0.85, {"a": 0.75, "b": 0.95})), 40,
                              "logistic regression on the synthetic documents")
    no_llm = MetricSummary("no_llm_accuracy", (0, 1), (Scores(0.7, 0.68, {"a": 0.6, "b": 0.8}),) * 2, 40, "det")
    dist = DistributionScore(precision=(0.5, 0.625), recall=(0.75, 0.5), seeds=(0, 1), k=3, n_real=60,
                             n_synthetic=40, n_compared=40, embedding_model="all-MiniLM-L6-v2")
    info = {"run": "r1", "seeds": [0, 1], "n_test": 60, "n_documents": 40, "chance_accuracy": 0.5,
            "timings_seconds": {"no_llm": 0.5, "documents": 3.25}}
    return EvaluationResult({"no_llm_accuracy": no_llm, "synthetic_accuracy": synthetic}, info, dist)


def test_the_file_reads_back_as_the_same_result(tmp_path: Path) -> None:
    result = _result()
    write_evaluation(result, tmp_path)
    back = read_evaluation(tmp_path)
    assert back == result
    assert back.metrics["synthetic_accuracy"].format() == "0.890 ± 0.028"
    assert back.distribution is not None and back.distribution.format() == result.distribution.format()
    assert list(back.metrics) == ["no_llm_accuracy", "synthetic_accuracy"]  # the order the page shows
    assert (tmp_path / EVALUATION_FILE).stat().st_mode & 0o077 == 0  # owner-only (PRIVATE)


def test_an_older_file_without_per_seed_recall_gives_each_seed_the_mean(tmp_path: Path) -> None:
    data = _result().to_dict()
    for entry in data["synthetic_accuracy"]["seeds"]:
        del entry["per_class_recall"]
    (tmp_path / EVALUATION_FILE).write_text(json.dumps(data), encoding="utf-8")
    back = read_evaluation(tmp_path)
    assert back is not None and back.distribution is not None
    m = back.metrics["synthetic_accuracy"]
    assert [s.accuracy for s in m.scores] == [0.91, 0.87] and m.n_train == 40
    assert all(s.per_class_recall == {"a": 0.775, "b": 0.975} for s in m.scores)


def test_no_file_or_an_unreadable_one_is_none(tmp_path: Path) -> None:
    assert read_evaluation(tmp_path) is None
    (tmp_path / EVALUATION_FILE).write_text("{not json", encoding="utf-8")
    assert read_evaluation(tmp_path) is None
    (tmp_path / EVALUATION_FILE).write_text(json.dumps({"synthetic_accuracy": {"mean": 1, "sd": 0, "seeds": [{}],
                                                                               "n_train": 3}}), encoding="utf-8")
    assert read_evaluation(tmp_path) is None
