"""Metrics of the local evaluation (PRIVATE: they read real documents): accuracy, macro-F1, recall per class, chance,
mean ± sd over seeds, and percentile-bootstrap intervals over the test documents (of each accuracy, and of the
synthetic / real ratio, paired: both classifiers scored on the same resampled test documents; Efron & Tibshirani
1993, ch. 13). The sd over seeds is the classifier's spread on one test set; the interval is what the test set's
size allows one to say — with a few dozen test documents it is the larger of the two.

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
    #: per test document, whether the prediction was right (in memory only: the intervals are computed from it)
    correct: tuple[bool, ...] = dataclasses.field(default=(), compare=False, repr=False)

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
        correct=tuple(bool(t == p) for t, p in zip(y_true, y_pred)),
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


#: Percentile-bootstrap intervals: this many resamples of the test documents, at this level.
BOOTSTRAP_RESAMPLES = 2000
INTERVAL_LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate on the test documents and its percentile-bootstrap interval over them."""

    estimate: float
    low: float
    high: float
    n_test: int
    level: float = INTERVAL_LEVEL
    resamples: int = BOOTSTRAP_RESAMPLES

    @property
    def level_text(self) -> str:
        """``95 %``."""
        return f"{100 * self.level:.3g} %"

    def format(self, digits: int = 3) -> str:
        """``0.912 (95 % 0.871–0.944)``."""
        return f"{self.estimate:.{digits}f} ({self.level_text} {self.low:.{digits}f}–{self.high:.{digits}f})"

    def contains(self, value: float) -> bool:
        return self.low <= float(value) <= self.high

    def to_dict(self) -> dict[str, Any]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "n_test": int(self.n_test),
                "level": self.level, "resamples": int(self.resamples),
                "method": "percentile bootstrap over the test documents"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Interval":
        return cls(float(data["estimate"]), float(data["low"]), float(data["high"]), int(data["n_test"]),
                   float(data.get("level", INTERVAL_LEVEL)), int(data.get("resamples", BOOTSTRAP_RESAMPLES)))


def _per_document_correct(scores: Sequence[Scores]) -> np.ndarray | None:
    """Each test document's share of seeds that classified it right (None when a score has no per-document
    record, e.g. one read back from ``evaluation.json``, or the seeds scored different test sets)."""
    rows = [s.correct for s in scores]
    if not rows or any(not r for r in rows) or len({len(r) for r in rows}) != 1:
        return None
    return np.asarray(rows, dtype=np.float64).mean(axis=0)


def _bootstrap_means(columns: Sequence[np.ndarray], *, resamples: int, seed: int) -> list[np.ndarray]:
    """For each column, its mean over the same ``resamples`` resamples (with replacement) of the test documents;
    drawn in chunks so that memory stays ~1 M indices whatever the test set's size."""
    n = columns[0].size
    rng = np.random.default_rng(seed)
    out: list[list[np.ndarray]] = [[] for _ in columns]
    chunk = max(1, min(resamples, 1_000_000 // max(n, 1)))
    done = 0
    while done < resamples:
        b = min(chunk, resamples - done)
        idx = rng.integers(0, n, size=(b, n))
        for k, col in enumerate(columns):
            out[k].append(col[idx].mean(axis=1))
        done += b
    return [np.concatenate(parts) for parts in out]


def _check_interval_args(level: float, resamples: int) -> None:
    if not 0 < float(level) < 1:
        raise ParameterError("The interval level must be in (0, 1).")
    if not isinstance(resamples, int) or isinstance(resamples, bool) or resamples < 100:
        raise ParameterError("Use at least 100 bootstrap resamples.")


def accuracy_interval(scores: Sequence[Scores], *, level: float = INTERVAL_LEVEL,
                      resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Interval | None:
    """The mean accuracy over seeds and its percentile-bootstrap interval over the test documents (None without
    per-document records)."""
    _check_interval_args(level, resamples)
    c = _per_document_correct(scores)
    if c is None:
        return None
    (boot,) = _bootstrap_means([c], resamples=resamples, seed=seed)
    tail = 100 * (1 - level) / 2
    return Interval(float(c.mean()), float(np.percentile(boot, tail)), float(np.percentile(boot, 100 - tail)),
                    int(c.size), float(level), resamples)


def ratio_interval(numerator: Sequence[Scores], denominator: Sequence[Scores], *, level: float = INTERVAL_LEVEL,
                   resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> Interval | None:
    """Accuracy of ``numerator`` over accuracy of ``denominator`` (e.g. synthetic / real) and its PAIRED
    percentile-bootstrap interval: each resample of the test documents scores both, so what the two classifiers
    share (hard or easy test documents) cancels. None without per-document records of the same test documents, or
    when the denominator's accuracy is 0."""
    _check_interval_args(level, resamples)
    a, b = _per_document_correct(numerator), _per_document_correct(denominator)
    if a is None or b is None or a.size != b.size or b.mean() == 0:
        return None
    boot_a, boot_b = _bootstrap_means([a, b], resamples=resamples, seed=seed)
    ok = boot_b > 0
    ratios = boot_a[ok] / boot_b[ok]
    tail = 100 * (1 - level) / 2
    return Interval(float(a.mean() / b.mean()), float(np.percentile(ratios, tail)),
                    float(np.percentile(ratios, 100 - tail)), int(a.size), float(level), resamples)


@dataclasses.dataclass(frozen=True)
class MetricSummary:
    """Scores of one evaluation over several seeds: mean ± sd (sample sd, ddof = 1; 0 for one seed)."""

    name: str
    seeds: tuple[int, ...]
    scores: tuple[Scores, ...]
    n_train: int
    note: str = ""
    #: the mean accuracy's percentile-bootstrap interval over the test documents (:func:`accuracy_interval`)
    interval: Interval | None = dataclasses.field(default=None, compare=False)

    def with_interval(self, *, seed: int = 0) -> "MetricSummary":
        """This summary with its interval over the test documents (unchanged without per-document records)."""
        found = accuracy_interval(self.scores, seed=seed)
        return self if found is None else dataclasses.replace(self, interval=found)

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
            **({"interval": self.interval.to_dict()} if self.interval is not None else {}),
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
        interval = data.get("interval")
        return cls(name, tuple(seeds), tuple(scores), int(data["n_train"]), str(data.get("note") or ""),
                   Interval.from_dict(interval) if isinstance(interval, Mapping) else None)
