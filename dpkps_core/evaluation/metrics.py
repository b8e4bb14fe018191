"""Metrics of the local evaluation (PRIVATE: they read real documents): accuracy, macro-F1, recall per class, chance, mean ± sd over seeds.

Nothing here logs or prints document text."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.errors import ParameterError



PRIVATE_NOTE = "local evaluation on real data — not for release"
DISCLOSURE_NOTE = (
    "Choosing ε (or |V|) after looking at private statistics — this forecast, a sweep, an evaluation — is itself a "
    "small disclosure about the corpus that no DP accounting covers; decide once, early, and prefer public or "
    "DP estimates where you can."
)
def _noop(frac: float, message: str) -> None:
    return None


# ----------------------------------------------------------------------------------------------- metrics

@dataclasses.dataclass(frozen=True)
class Scores:
    """One classifier's scores on one test set (private)."""

    accuracy: float
    macro_f1: float
    per_class_recall: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"accuracy": self.accuracy, "macro_f1": self.macro_f1, "per_class_recall": dict(self.per_class_recall)}


def classification_scores(y_true: Sequence[str], y_pred: Sequence[str], *, classes: Sequence[str] | None = None) -> Scores:
    """Accuracy, macro-F1 and per-class recall over ``classes`` (default: the classes present in ``y_true``)."""
    from sklearn.metrics import accuracy_score, f1_score, recall_score

    y_true = [str(y) for y in y_true]
    y_pred = [str(y) for y in y_pred]
    if not y_true or len(y_true) != len(y_pred):
        raise ParameterError("Scoring needs one prediction per test document and at least one test document.")
    labels = sorted(set(y_true)) if classes is None else list(classes)
    recalls = recall_score(y_true, y_pred, labels=labels, average=None, zero_division=0)
    return Scores(
        accuracy=float(accuracy_score(y_true, y_pred)),
        macro_f1=float(f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)),
        per_class_recall={c: float(r) for c, r in zip(labels, recalls)},
    )


def chance_accuracy(test_labels: Sequence[str]) -> float:
    """Majority-class share of the test labels (accuracy of always guessing the largest class)."""
    if not test_labels:
        return 0.0
    _, counts = np.unique(np.asarray(test_labels), return_counts=True)
    return float(counts.max() / counts.sum())


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return float("nan"), float("nan")
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


@dataclasses.dataclass(frozen=True)
class MetricSummary:
    """Scores of one evaluation over several seeds: mean ± sd (sample sd, ddof = 1; 0 for one seed)."""

    name: str
    seeds: tuple[int, ...]
    scores: tuple[Scores, ...]
    n_train: int
    note: str = ""

    @property
    def accuracy_mean(self) -> float:
        return _mean_sd([s.accuracy for s in self.scores])[0]

    @property
    def accuracy_sd(self) -> float:
        return _mean_sd([s.accuracy for s in self.scores])[1]

    @property
    def macro_f1_mean(self) -> float:
        return _mean_sd([s.macro_f1 for s in self.scores])[0]

    def format(self) -> str:
        """``0.912 ± 0.010`` (accuracy)."""
        return f"{self.accuracy_mean:.3f} ± {self.accuracy_sd:.3f}"

    def to_dict(self) -> dict[str, Any]:
        acc = [s.accuracy for s in self.scores]
        f1 = [s.macro_f1 for s in self.scores]
        classes = sorted({c for s in self.scores for c in s.per_class_recall})
        recall = {}
        for c in classes:
            m, sd = _mean_sd([s.per_class_recall.get(c, 0.0) for s in self.scores])
            recall[c] = {"mean": m, "sd": sd}
        m_acc, sd_acc = _mean_sd(acc)
        m_f1, sd_f1 = _mean_sd(f1)
        return {
            "mean": m_acc, "sd": sd_acc,
            "seeds": [{"seed": int(seed), "accuracy": sc.accuracy, "macro_f1": sc.macro_f1,
                       "per_class_recall": dict(sc.per_class_recall)} for seed, sc in zip(self.seeds, self.scores)],
            "macro_f1": {"mean": m_f1, "sd": sd_f1},
            "per_class_recall": recall,
            "n_train": int(self.n_train),
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, name: str, data: Mapping[str, Any]) -> "MetricSummary":
        """The summary :meth:`to_dict` wrote (``evaluation.json``). Files written before each seed kept its per-class
        recall give every seed the mean recall of each class."""
        mean_recall = {c: float(v["mean"]) for c, v in (data.get("per_class_recall") or {}).items()}
        seeds, scores = [], []
        for entry in data["seeds"]:
            seeds.append(int(entry["seed"]))
            recall = entry.get("per_class_recall")
            scores.append(Scores(float(entry["accuracy"]), float(entry["macro_f1"]),
                                 {c: float(v) for c, v in recall.items()} if recall is not None else dict(mean_recall)))
        return cls(name, tuple(seeds), tuple(scores), int(data["n_train"]), str(data.get("note") or ""))
