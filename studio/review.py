"""What the app shows must be right, readable and honest: the tables of results (rounded, with their training
documents and intervals), the comparison's rows and plan, the non-document share and the memorisation table.

Formatting only: every number comes from ``dpkps_core``; the jobs that make them are the pages' actions
(``studio.forecasts`` for the forecasts, ``studio.evaluation_steps`` for page 7, ``studio.runs`` for page 8).
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import pandas as pd

from dpkps_core.progress import format_duration
from studio.state import SessionState

#: Human names of the evaluation metrics (docs/ARCHITECTURE.md).
METRIC_NAMES = {
    "no_llm_accuracy": "No-LLM check: DP keyphrase sequences",
    "real_keyphrase_baseline_accuracy": "Real keyphrase baseline (upper bound)",
    "synthetic_accuracy": "Synthetic documents",
    "real_baseline_accuracy": "Real documents, same number",
    "synthetic_accuracy_no_coral": "Synthetic documents, torch head",
    "synthetic_accuracy_coral": "Synthetic documents + Deep CORAL",
}
#: Fewer training documents per class than this: the accuracy is too small a sample to judge a method by.
MIN_PER_CLASS_TO_JUDGE = 10


# ------------------------------------------------------------------------------------------- tables (§6)

def sig3(x: Any) -> float | None:
    """``x`` rounded to 3 significant digits (None for a missing or non-finite value)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    return float(f"{v:.3g}")


def judge_note(n_train: int, n_classes: int) -> str:
    """'' when ``n_train`` documents are enough to read an accuracy, else a short warning — in the words every
    such warning of page 7 uses (:func:`too_few_sentence`): fewer than MIN_PER_CLASS_TO_JUDGE per class."""
    need = MIN_PER_CLASS_TO_JUDGE * max(int(n_classes), 1)
    if int(n_train) < need:
        return f"⚠ too few to judge: fewer than {MIN_PER_CLASS_TO_JUDGE} per class ({int(n_train):,} < {need:,})"
    return ""


def too_few_sentence(what: str) -> str:
    """The page's one wording for rows resting on too few documents (the table's note says the same)."""
    return (f"Too few to judge: {what} — fewer than {MIN_PER_CLASS_TO_JUDGE} training documents per class, so the "
            "accuracy says little.")


def sd_or_none(sd: Any, seeds: int) -> float | None:
    """The sample sd over seeds, or None (shown blank) with one seed: one run has no spread, and "± 0.00" would
    claim a precision it does not have."""
    return sig3(sd) if int(seeds) > 1 else None


def interval_text(interval: Any) -> str:
    """``0.871–0.944`` for an accuracy's bootstrap interval over the test documents ('' when there is none, e.g.
    an evaluation stored before intervals were kept)."""
    if interval is None:
        return ""
    return f"{interval.low:.3f}–{interval.high:.3f}"


def ratio_sentence(ratio: Any) -> str:
    """The page's one sentence on synthetic / real accuracy and its paired interval ('' without one)."""
    if ratio is None:
        return ""
    return (f"**Synthetic / real accuracy: {ratio.estimate:.2f}** ({ratio.level_text} interval "
            f"{ratio.low:.2f}–{ratio.high:.2f}; paired bootstrap over the {ratio.n_test:,} test documents). The "
            "interval is what the size of the test set allows one to say; a new generation of documents varies "
            "on top of it.")


def evaluation_table(metrics: Mapping[str, Any], n_classes: int) -> pd.DataFrame:
    """The evaluation's metrics with human names, 3 significant digits, the bootstrap interval over the test
    documents and the training documents of each (the ± sd column is blank with one seed)."""
    rows = []
    for key, m in metrics.items():
        rows.append({"Classifier trained on": METRIC_NAMES.get(key, key.replace("_", " ")),
                     "Accuracy": sig3(m.accuracy_mean), "± sd": sd_or_none(m.accuracy_sd, len(m.scores)),
                     "95 % interval (test documents)": interval_text(getattr(m, "interval", None)),
                     "Seeds": len(m.scores),
                     "Macro-F1": sig3(m.macro_f1_mean), "Training documents": int(m.n_train),
                     "Enough to judge?": judge_note(m.n_train, n_classes) or "yes"})
    return pd.DataFrame(rows)


def _row_interval(row: Mapping[str, Any]) -> str:
    """A comparison row's accuracy interval over the test documents ('' for rows kept from before intervals)."""
    low, high = sig3(row.get("accuracy_low")), sig3(row.get("accuracy_high"))
    return "" if low is None or high is None else f"{row['accuracy_low']:.3f}–{row['accuracy_high']:.3f}"


def compare_table(rows: Sequence[Mapping[str, Any]], n_classes: int) -> tuple[pd.DataFrame, list[str]]:
    """The comparison with human names, 3 significant digits and few, narrow columns; the long notes come back
    separately (one line per method) so the table fits the page."""
    out, notes = [], []
    for r in rows:
        docs = int(r.get("documents") or 0)
        out.append({"Method": r.get("label") or r.get("method"), "ε": sig3(r.get("epsilon")),
                    "δ": r.get("delta") or 0.0, "Training documents": docs, "Accuracy": sig3(r.get("accuracy")),
                    "± sd": sd_or_none(r.get("accuracy_sd"), int(r.get("seeds") or 1)),
                    "95 % interval": _row_interval(r),
                    "Macro-F1": sig3(r.get("macro_f1")),
                    "LLM calls": int(r.get("llm_calls") or 0),
                    "Minutes": sig3((r.get("wall_seconds") or 0.0) / 60.0),
                    "Enough to judge?": judge_note(docs, n_classes) or "yes"})
        if r.get("notes"):
            notes.append(f"**{r.get('label') or r.get('method')}** (ε = {sig3(r.get('epsilon'))}): {r['notes']}")
    return pd.DataFrame(out), notes


# ------------------------------------------------------------------------------------------- compare (§9)

def keep_compare_rows(state: SessionState, job: Any) -> list[dict[str, Any]]:
    """Merge a finished comparison's rows into the session's list (earlier rows are kept; a method re-run at the
    same ε, δ and size replaces its own row) and return the list, newest last."""
    rows: list[dict[str, Any]] = state.results.compare_rows
    if job is not None and getattr(job, "result", None) is not None and not getattr(job, "rows_kept", False):
        info = getattr(job.result, "info", {}) or {}
        for r in job.result.table():
            r = {**r, "per_class": info.get("per_class"), "seeds": len(info.get("seeds") or ()),
                 "finished": time.strftime("%H:%M:%S")}
            key = (r.get("method"), r.get("epsilon"), r.get("delta"), r.get("per_class"))
            rows[:] = [x for x in rows if (x.get("method"), x.get("epsilon"), x.get("delta"), x.get("per_class"))
                       != key]
            rows.append(r)
        job.rows_kept = True  # merged once (an id() could be reused by a later job)
    return rows


def compare_plan(methods: Sequence[str], *, n_classes: int, per_class: int, max_tokens: int,
                 epochs: int, gpu: bool) -> pd.DataFrame:
    """Per SELECTED method: LLM prompts and a rough time, before starting (offline/local model assumptions)."""
    from dpkps_core.baselines.compare_settings import COMPARE_PP_DEFAULTS, METHOD_LABELS

    docs = n_classes * per_class
    tps = 60.0 if gpu else 17.0  # tokens per second of the small local model (llm.backends' own assumption)
    per_call = 0.2 + max_tokens / tps
    rows = []
    for m in methods:
        if m == "dpkps":
            prompts, secs = docs, docs * per_call
        elif m == "augpe":
            prompts = docs * epochs
            secs = prompts * per_call
        else:  # private prediction: every token is one forward pass over a batch of private prompts
            prompts = docs * COMPARE_PP_DEFAULTS["batch_size"]
            secs = docs * max_tokens * (1 + COMPARE_PP_DEFAULTS["batch_size"] / 4) / tps
        rows.append({"Method": METHOD_LABELS.get(m, m), "Synthetic documents": docs, "LLM prompts": prompts,
                     "Rough time": _duration(secs)})
    return pd.DataFrame(rows)


def _duration(seconds: float) -> str:
    return format_duration(max(seconds, 1.0), approximate=True)


# ------------------------------------------------------------------------------------------- method outlook (§2)


# ------------------------------------------------------------------------------------------- DP forecast (default)


# ------------------------------------------------------------------------------------------- runs (§4)


# ------------------------------------------------------------------------------------------- non-documents (§5)

def non_document_share(documents: Sequence[Any], failures: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(items that finally failed as non-documents, items attempted: written + failed)."""
    from dpkps_core.llm.quality import is_non_document_failure

    bad = sum(1 for f in failures if is_non_document_failure(f.get("error", "")))
    return bad, len(documents) + len(failures)


# ------------------------------------------------------------------------------------------- memorisation (§11)


def memorisation_frame(result: Mapping[str, Any], excerpt: int = 160) -> pd.DataFrame:
    """One row per synthetic document: flagged or not, the longest shared run, the nearest real documents
    (excerpts: PRIVATE, for the data owner only)."""
    docs, real = result["documents"], result["real_texts"]
    rows = []
    for r in result["rows"]:
        d = docs[r.synthetic_index]
        near = r.nearest_by_overlap if r.nearest_by_overlap is not None else r.nearest_by_embedding
        rows.append({"Reproduces real text?": "⚠ yes" if r.flagged else "no", "Synthetic id": d["id"],
                     "Longest shared run (words)": r.longest_shared_words,
                     "Shared 8-word sequences": f"{r.shared_ngram_share:.0%}",
                     "Cosine to nearest real": sig3(r.similarity) if r.similarity is not None else None,
                     "Shared text": r.shared_text[:excerpt],
                     "Nearest real document (private)": real[near][:excerpt] if near is not None else ""})
    df = pd.DataFrame(rows)
    return df.sort_values("Longest shared run (words)", ascending=False, kind="stable") if len(df) else df
