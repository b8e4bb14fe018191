"""The internal edition's extra content: what the run folder holds that was computed on PRIVATE data (issue 34 §1).

Local only — the export refuses the internal edition by name (:data:`dpkps_core.runfolder.INTERNAL_DOSSIER_FILES`):
the corpus fingerprint (``run_config.json``'s ``corpus_sha256`` of the file, or the app's content fingerprint), the
local evaluation (``evaluation.json``: downstream accuracy with its bootstrap intervals, precision/recall on
embeddings, per-class recall, docs/DESIGN.md §5), the empirical audit's lower bound beside the claimed ε
(``audit_report.json`` when ``dpkps audit --out RUN_FOLDER`` wrote it there), and what the run folder cannot say
(left-out counts and the corpus's ε to date live in the ledger, docs/DESIGN.md §2.0) with the command that shows them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

from dpkps_core import runfolder

#: What ``dpkps audit --out DIR`` writes (dpkps_core/cli/audit.py); read when DIR is the run folder.
AUDIT_REPORT_NAME = "audit_report.json"
#: The app's PRIVATE content fingerprint of the corpus (``studio.session.CORPUS_FINGERPRINT_FILE``; a test keeps the
#: two names equal — the core must not import the app).
APP_FINGERPRINT_NAME = "corpus_fingerprint.json"

#: evaluation.json metric key → what it measures, in words.
METRIC_SHORT: dict[str, str] = {
    "synthetic_accuracy": "Synthetic documents", "real_baseline_accuracy": "Real documents",
    "synthetic_accuracy_no_coral": "Synthetic, no CORAL", "synthetic_accuracy_coral": "Synthetic + Deep CORAL",
    "no_llm_accuracy": "DP keyphrase sequences", "real_keyphrase_baseline_accuracy": "Real keyphrases",
}
#: evaluation.json metric keys trained on DP outputs (the others are trained on real data).
DP_SIDE = frozenset({"synthetic_accuracy", "synthetic_accuracy_no_coral", "synthetic_accuracy_coral",
                     "no_llm_accuracy"})
METRIC_LABELS: dict[str, str] = {
    "synthetic_accuracy": "Classifier trained on the synthetic documents",
    "real_baseline_accuracy": "Same classifier trained on as many real documents",
    "synthetic_accuracy_no_coral": "Synthetic, torch head without CORAL",
    "synthetic_accuracy_coral": "Synthetic, torch head with Deep CORAL",
    "no_llm_accuracy": "No-LLM check: classifier on the DP keyphrase sequences",
    "real_keyphrase_baseline_accuracy": "Real keyphrase baseline (noise-free top-N terms)",
}


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and not path.is_symlink() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return None
    return float(value)


def fingerprint(run_dir: Path, config: Mapping[str, Any]) -> dict[str, str]:
    """The corpus fingerprint(s) recorded in the run folder (PRIVATE: a digest of private data is not DP)."""
    out: dict[str, str] = {}
    if isinstance(config.get("corpus_sha256"), str):
        out["file_sha256"] = config["corpus_sha256"]
    app = _read(run_dir / APP_FINGERPRINT_NAME) or {}
    if isinstance(app.get("content_sha256"), str):
        out["content_sha256"] = app["content_sha256"]
    return out


def accuracy_rows(evaluation: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per accuracy of ``evaluation.json``: mean ± sd over seeds, its bootstrap interval, macro-F1, the
    training size, and per-class recall."""
    rows = []
    for key, value in evaluation.items():
        if not (isinstance(value, Mapping) and _float(value.get("mean")) is not None and "seeds" in value):
            continue
        interval = value.get("interval") if isinstance(value.get("interval"), Mapping) else {}
        recall = value.get("per_class_recall") if isinstance(value.get("per_class_recall"), Mapping) else {}
        f1 = value.get("macro_f1") if isinstance(value.get("macro_f1"), Mapping) else {}
        label = METRIC_LABELS.get(key, key.replace("_", " ").capitalize())
        rows.append({"key": key, "label": label, "short": METRIC_SHORT.get(key, label[:28]), "dp": key in DP_SIDE,
                     "mean": float(value["mean"]), "sd": _float(value.get("sd")),
                     "low": _float(interval.get("low")), "high": _float(interval.get("high")),
                     "level": _float(interval.get("level")), "macro_f1": _float(f1.get("mean")),
                     "n_train": value.get("n_train"),
                     "per_class_recall": {str(c): _float(v.get("mean") if isinstance(v, Mapping) else v)
                                          for c, v in recall.items()}})
    return rows


def utility(evaluation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The local evaluation's figures, or None when the run folder holds no (readable) ``evaluation.json``."""
    if evaluation is None:
        return None
    ratio = evaluation.get("synthetic_to_real") if isinstance(evaluation.get("synthetic_to_real"), Mapping) else None
    dist = evaluation.get("distribution") if isinstance(evaluation.get("distribution"), Mapping) else None
    rows = accuracy_rows(evaluation)
    out: dict[str, Any] = {
        "accuracies": rows, "n_test": evaluation.get("n_test"), "n_train": evaluation.get("n_train"),
        "chance_accuracy": _float(evaluation.get("chance_accuracy")), "classifier": evaluation.get("classifier"),
        "ratio": None, "precision": None, "recall": None,
    }
    if ratio is not None and _float(ratio.get("estimate")) is not None:
        out["ratio"] = {"estimate": float(ratio["estimate"]), "low": _float(ratio.get("low")),
                        "high": _float(ratio.get("high"))}
    else:
        by_key = {r["key"]: r for r in rows}
        syn, real = by_key.get("synthetic_accuracy"), by_key.get("real_baseline_accuracy")
        if syn and real and real["mean"] > 0:
            out["ratio"] = {"estimate": syn["mean"] / real["mean"], "low": None, "high": None}
    if dist is not None:
        p, r = dist.get("precision"), dist.get("recall")
        out["precision"] = _float(p.get("mean")) if isinstance(p, Mapping) else None
        out["recall"] = _float(r.get("mean")) if isinstance(r, Mapping) else None
        out["distribution_k"] = dist.get("k")
    for note in ("distribution_note", "real_keyphrase_baseline_note"):
        if isinstance(evaluation.get(note), str):
            out[note] = evaluation[note]
    return out


def audit_summary(audit: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The empirical audit's lower bound beside the claimed ε, its verdict and confidence (None without a report)."""
    if audit is None:
        return None
    return {"lower_bound": _float(audit.get("empirical_epsilon_lower_bound")),
            "claimed_epsilon": _float(audit.get("claimed_epsilon")),
            "confidence": _float(audit.get("confidence")),
            "verdict_kind": str(audit.get("verdict_kind") or ("violation" if audit.get("violation") else "consistent")),
            "verdict": str(audit.get("verdict") or ""), "violation": bool(audit.get("violation")),
            "noise_sampler_note": str(audit.get("noise_sampler_note") or "")}


def internal_content(run_dir: Path, config: Mapping[str, Any]) -> dict[str, Any]:
    """Everything the internal edition adds, read from the run folder (absent files are said so, not guessed)."""
    evaluation = _read(run_dir / runfolder.EVALUATION_FILE)
    audit = _read(run_dir / AUDIT_REPORT_NAME)
    return {
        "fingerprint": fingerprint(run_dir, config),
        "utility": utility(evaluation),
        "audit": audit_summary(audit),
        "audit_raw": audit,
        "not_in_run_folder": [
            "How many units were left out of each release because their budget was spent, and the corpus's total ε "
            "to date per unit, are kept in the persistent ledger, never in the run folder (docs/DESIGN.md §2.0): run "
            "python -m dpkps_core ledger --corpus <YOUR_CORPUS.csv> to see them.",
        ],
    }
