"""Bootstrap intervals over the test documents (dpkps_core.evaluation.metrics): each accuracy's, and the PAIRED
interval of synthetic / real accuracy — what a test set of a few dozen documents allows one to say (the sd over
classifier seeds says nothing about it). In `evaluate`'s summary, evaluation.json, and read back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from cli_toys import _make_run, corpus_files, fake_models  # noqa: F401 (fixtures)

from dpkps_core.cli import main
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation import EvaluationResult, read_evaluation, write_evaluation
from dpkps_core.evaluation.metrics import (Interval, MetricSummary, Scores, accuracy_interval, classification_scores,
                                           ratio_interval)
from dpkps_core.evaluation.run import RATIO_KEY


def _scores(correct: np.ndarray) -> Scores:
    """Scores of a two-class classifier that is right exactly where ``correct`` says."""
    y = np.where(np.arange(correct.size) % 2 == 0, "a", "b")
    pred = np.where(correct, y, np.where(y == "a", "b", "a"))
    return classification_scores(list(y), list(pred))


def test_the_interval_holds_the_estimate_and_narrows_as_the_test_set_grows() -> None:
    rng = np.random.default_rng(0)
    small = accuracy_interval([_scores(rng.random(50) < 0.85)])
    large = accuracy_interval([_scores(rng.random(800) < 0.85)])
    assert small is not None and large is not None
    for iv in (small, large):
        assert iv.low <= iv.estimate <= iv.high and 0 <= iv.low and iv.high <= 1
    ratio = (small.high - small.low) / (large.high - large.low)
    assert 2.5 < ratio < 6.5  # ≈ √(800/50) = 4
    assert small.n_test == 50 and small.format().startswith(f"{small.estimate:.3f} (95 % ")


def test_the_95_percent_interval_covers_the_true_accuracy_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(1)
    hits = 0
    for rep in range(200):
        iv = accuracy_interval([_scores(rng.random(200) < 0.85)], resamples=400, seed=rep)
        hits += iv.contains(0.85)
    assert 0.88 <= hits / 200 <= 0.99


def test_the_ratio_interval_is_paired_what_both_classifiers_share_cancels() -> None:
    rng = np.random.default_rng(2)
    real = rng.random(60) < 0.9
    synthetic = real.copy()
    synthetic[np.flatnonzero(real)[:3]] = False  # wrong on 3 documents the real-trained one gets right
    paired = ratio_interval([_scores(synthetic)], [_scores(real)])
    assert paired is not None and paired.estimate == pytest.approx(synthetic.mean() / real.mean())
    # unpaired: each side resampled on its own: much wider (the shared hard documents no longer cancel)
    a = rng.choice(synthetic.astype(float), size=(2000, 60)).mean(axis=1)
    b = rng.choice(real.astype(float), size=(2000, 60)).mean(axis=1)
    unpaired = np.percentile(a / b, 97.5) - np.percentile(a / b, 2.5)
    assert paired.high - paired.low < 0.6 * unpaired
    assert paired.high <= 1.0  # never better than the real one on any resample
    same = ratio_interval([_scores(real)], [_scores(real)])
    assert (same.estimate, same.low, same.high) == (1.0, 1.0, 1.0)


def test_seeds_are_averaged_per_document() -> None:
    first = np.array([True, True, False, False])
    second = np.array([True, False, True, False])
    iv = accuracy_interval([_scores(first), _scores(second)], resamples=100)
    assert iv.estimate == 0.5


def test_no_interval_without_per_document_records_or_a_real_accuracy_of_zero() -> None:
    read_back = Scores(0.9, 0.9, {"a": 0.9})  # as MetricSummary.from_dict builds it: no per-document record
    assert accuracy_interval([read_back]) is None
    assert ratio_interval([_scores(np.ones(10, bool))], [read_back]) is None
    assert ratio_interval([_scores(np.ones(10, bool))], [_scores(np.zeros(10, bool))]) is None
    assert ratio_interval([_scores(np.ones(10, bool))], [_scores(np.ones(12, bool))]) is None
    summary = MetricSummary("x", (0,), (read_back,), 10)
    assert summary.with_interval() is summary


@pytest.mark.parametrize("kwargs", [{"level": 1.0}, {"level": 0}, {"resamples": 10}, {"resamples": 500.0}])
def test_bad_interval_settings_are_refused(kwargs: dict) -> None:
    with pytest.raises(ParameterError):
        accuracy_interval([_scores(np.ones(10, bool))], **kwargs)


def test_intervals_read_back_from_evaluation_json(tmp_path: Path) -> None:
    syn = MetricSummary("synthetic_accuracy", (0,), (_scores(np.arange(40) % 5 != 0),), 40).with_interval()
    real = MetricSummary("real_baseline_accuracy", (0,), (_scores(np.arange(40) % 10 != 0),), 40).with_interval()
    ratio = ratio_interval(syn.scores, real.scores)
    result = EvaluationResult({"synthetic_accuracy": syn, "real_baseline_accuracy": real}, {"n_test": 40}, None, ratio)
    write_evaluation(result, tmp_path)
    back = read_evaluation(tmp_path)
    assert back == result and back.synthetic_to_real == ratio
    assert back.metrics["synthetic_accuracy"].interval == syn.interval
    assert RATIO_KEY not in back.info and "interval" not in back.info
    assert back.summary_lines() == result.summary_lines()
    assert isinstance(back.synthetic_to_real, Interval)


def test_evaluate_prints_and_stores_the_intervals(tmp_path: Path, corpus_files, fake_models,  # noqa: F811
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = _make_run(tmp_path, corpus_files[0], client_fraction=0.0, documents=True)
    assert main(["evaluate", "--run", str(run), "--seeds", "2", "--no-coral"]) == 0
    data = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    ratio = data[RATIO_KEY]
    syn, real = data["synthetic_accuracy"], data["real_baseline_accuracy"]
    assert ratio["n_test"] == data["n_test"] and ratio["method"].startswith("percentile bootstrap")
    assert ratio["estimate"] == pytest.approx(syn["mean"] / real["mean"])
    assert ratio["low"] <= ratio["estimate"] <= ratio["high"]
    for m in (syn, real, data["no_llm_accuracy"]):
        assert m["interval"]["low"] <= m["mean"] <= m["interval"]["high"]
    out = capsys.readouterr().out
    assert "synthetic / real accuracy" in out and "interval over the test documents" in out
