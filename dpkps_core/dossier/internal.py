"""The internal edition's extra content: what the run folder holds that was computed on PRIVATE data (issue 34 §1).

Local only — the export refuses the internal edition by name (:data:`dpkps_core.records.runfolder.INTERNAL_DOSSIER_FILES`):
the corpus fingerprint (``run_config.json``'s ``corpus_sha256`` of the file, or the app's content fingerprint), the
local evaluation (``evaluation.json``: downstream accuracy with its bootstrap intervals, precision/recall on
embeddings, per-class recall, docs/DESIGN.md §5), the empirical audit's lower bound beside the claimed ε
(``audit_report.json`` when ``dpkps audit --out RUN_FOLDER`` wrote it there), and what the run folder cannot say
(left-out counts and the corpus's ε to date live in the ledger, docs/DESIGN.md §2.0) with the command that shows them.

Three further findings when the caller or the run folder has them: the **ledger figures** (a
:class:`~dpkps_core.ledger_store.CorpusView` of the run's corpus passed in by the caller — the app's loaded corpus,
``dpkps report --internal --corpus …``: how many units each of the run's releases left out because their budget was
spent, and the corpus's ε to date per unit, [Filter]); the **overlay** of real and synthetic documents' embeddings
(``projection.json``, written by page 7's t-SNE/UMAP job, docs/DESIGN.md §5); and the **disclosure test**
(``disclosure.json``, :mod:`dpkps_core.evaluation.disclosure`, [Phantoms], [OneRun]).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpkps_core.records import runfolder

#: What ``dpkps audit --out DIR`` writes (dpkps_core/cli/audit.py); read when DIR is the run folder.
AUDIT_REPORT_NAME = "audit_report.json"
#: The app's PRIVATE content fingerprint of the corpus (``studio.session.CORPUS_FINGERPRINT_FILE``; a test keeps the
#: two names equal — the core must not import the app).
APP_FINGERPRINT_NAME = "corpus_fingerprint.json"
#: Page 7's overlay (t-SNE / UMAP of real test and synthetic documents' embeddings): PRIVATE, owner-only, not on the
#: export allowlist. ``{"private": true, "method": "tsne", "points": [{"x", "y", "source", "label"}, …]}``.
PROJECTION_FILE = "projection.json"
#: At most this many points of each source are drawn (a subsample is already kept by the writer).
MAX_OVERLAY_POINTS = 1000

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


def overlay(run_dir: Path) -> dict[str, Any] | None:
    """The overlay's points from ``projection.json`` (PRIVATE), or None when page 7 drew none for this run."""
    data = _read(run_dir / PROJECTION_FILE)
    if data is None or not isinstance(data.get("points"), list):
        return None
    points = []
    for p in data["points"]:
        if not isinstance(p, Mapping) or p.get("source") not in ("real", "synthetic"):
            continue
        x, y = _float(p.get("x")), _float(p.get("y"))
        if x is not None and y is not None:
            points.append({"x": x, "y": y, "source": p["source"], "label": str(p.get("label", ""))})
    real = [p for p in points if p["source"] == "real"][:MAX_OVERLAY_POINTS]
    syn = [p for p in points if p["source"] == "synthetic"][:MAX_OVERLAY_POINTS]
    if not real or not syn:
        return None
    return {"method": str(data.get("method") or "tsne"), "points": real + syn, "real": len(real),
            "synthetic": len(syn)}


def disclosure(run_dir: Path) -> dict[str, Any] | None:
    """The disclosure test's result as ``disclosure.json`` holds it (None when it was not run for this run)."""
    from dpkps_core.evaluation.disclosure import DISCLOSURE_FILE

    data = _read(run_dir / DISCLOSURE_FILE)
    if data is None or _float(data.get("p_value")) is None or _float(data.get("epsilon_lower_bound")) is None:
        return None
    keep = ("synthetic_documents", "reference_per_part", "synthetic_matching_train", "synthetic_matching_holdout",
            "train_matched", "holdout_matched", "by_kind", "tiers", "p_value", "epsilon_lower_bound",
            "claimed_epsilon", "leakage", "verdict", "sentence", "settings")
    return {k: data.get(k) for k in keep}


def ledger_figures(view: Any, run_name: str) -> dict[str, Any] | None:
    """What the persistent ledger says about the run (docs/DESIGN.md §2.0, [Filter]) — PRIVATE, local: each of its
    releases with how many of the corpus's units took part and how many were left out because their budget was
    spent, and the corpus's ε to date per unit (largest, median, how many units have spent anything, how many have
    no room left for a release of ε = 0.1). ``view`` is the corpus's :class:`~dpkps_core.ledger_store.CorpusView`;
    None when the ledger holds no release of ``run_name`` on that corpus (a run of another corpus: nothing is
    claimed)."""
    releases = [r for r in getattr(view, "releases", ()) if r.run == run_name]
    if not releases:
        return None
    spent = np.asarray(view.spent, dtype=float)
    caps = np.asarray(view.caps, dtype=float)
    last = max(r.id for r in releases)
    later = sum(1 for r in view.releases if r.id > last and r.run != run_name)
    return {
        "run": run_name,
        "releases": [{"recorded": r.recorded, "what": r.what, "epsilon": float(r.epsilon), "units": int(r.in_corpus),
                      "left_out": int(r.left_out), "filtered": bool(r.filtered)} for r in releases],
        "left_out_total": int(sum(r.left_out for r in releases)),
        "units": int(view.units),
        "epsilon_to_date": {
            "largest": float(spent.max()) if spent.size else 0.0,
            "median": float(np.median(spent)) if spent.size else 0.0,
            "units_spent": int(np.count_nonzero(spent > 0)),
            "units_exhausted": int(np.count_nonzero(spent + 0.1 > caps)),
        },
        "cap_range": [None if c is None else float(c) for c in view.cap_range],
        "later_releases": int(later),
    }


def internal_content(run_dir: Path, config: Mapping[str, Any], *, ledger_view: Any | None = None,
                     run_name: str | None = None) -> dict[str, Any]:
    """Everything the internal edition adds, read from the run folder (absent files are said so, not guessed) and,
    when the caller passes the corpus's ledger view, the ledger's figures for the run named ``run_name``."""
    evaluation = _read(run_dir / runfolder.EVALUATION_FILE)
    audit = _read(run_dir / AUDIT_REPORT_NAME)
    ledger = ledger_figures(ledger_view, run_name or run_dir.name) if ledger_view is not None else None
    missing = []
    if ledger is None:
        missing.append(
            "How many units were left out of each release because their budget was spent, and the corpus's total ε "
            "to date per unit, are kept in the persistent ledger, never in the run folder (docs/DESIGN.md §2.0): run "
            "python -m dpkps_core ledger --corpus <YOUR_CORPUS.csv>, or build this dossier with the corpus loaded "
            "(the app's Export page, or dpkps report --internal --corpus <YOUR_CORPUS.csv>) to see them here.")
    return {
        "fingerprint": fingerprint(run_dir, config),
        "ledger": ledger,
        "utility": utility(evaluation),
        "overlay": overlay(run_dir),
        "disclosure": disclosure(run_dir),
        "audit": audit_summary(audit),
        "audit_raw": audit,
        "not_in_run_folder": missing,
    }
