"""The result of a method comparison (:func:`dpkps_core.baselines.compare.compare_methods`): one row per method
(privacy level, cost, downstream accuracy), the table as CSV and Markdown, and the folder it is written to.

The accuracies are measured on real data: PRIVATE (local to the data owner, not for release)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
from pathlib import Path
from typing import Any

from dpkps_core.evaluation.metrics import MetricSummary
from dpkps_core.records.runfolder import json_default

PRIVATE_NOTE = "local evaluation on real data — not for release"
GUARANTEE_NOTE = ("DP-KPS is pure ε-DP (δ = 0); private prediction and AugPE+Ṽ are (ε, δ)-DP at the same ε "
                  "with the δ shown.")
JOINT_NOTE = ("basic composition: the methods' ε summed and their δ summed; a Ṽ shared by DP-KPS and AugPE+Ṽ is one "
              "release, counted once")
CSV_COLUMNS = ("method", "label", "epsilon", "delta", "guarantee", "documents", "llm_calls", "prompts_per_document",
               "prompt_tokens", "completion_tokens", "wall_seconds", "accuracy", "accuracy_sd", "accuracy_low",
               "accuracy_high", "macro_f1", "notes")


@dataclasses.dataclass
class MethodRow:
    """One line of the comparison table (public figures + PRIVATE accuracies)."""

    method: str
    label: str
    epsilon: float
    delta: float
    guarantee: str
    documents: int
    llm_calls: int
    prompts_per_document: float
    prompt_tokens: int
    completion_tokens: int
    wall_seconds: float
    accuracy: float = math.nan
    accuracy_sd: float = math.nan
    macro_f1: float = math.nan
    notes: str = ""
    #: the accuracy's 95 % percentile-bootstrap interval over the held-out documents (evaluation/metrics.py)
    accuracy_low: float = math.nan
    accuracy_high: float = math.nan

    def set_scores(self, summary: MetricSummary) -> None:
        """Accuracy (mean ± sd over seeds, its interval over the test documents) and macro-F1 of ``summary``."""
        self.accuracy, self.accuracy_sd, self.macro_f1 = (summary.accuracy_mean, summary.accuracy_sd,
                                                          summary.macro_f1_mean)
        if summary.interval is not None:
            self.accuracy_low, self.accuracy_high = summary.interval.low, summary.interval.high

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class CompareResult:
    """Every method's row, documents and privacy report, and the shared evaluation info (PRIVATE)."""

    rows: list[MethodRow]
    info: dict[str, Any]
    documents: dict[str, list[dict[str, Any]]]
    privacy: dict[str, dict[str, Any]]
    audit: dict[str, list[dict[str, Any]]]
    warnings: list[str]

    def table(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.rows]

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for r in self.rows:
            d = r.to_dict()
            w.writerow({k: _fmt_csv(d[k]) for k in CSV_COLUMNS})
        return buf.getvalue()

    def to_markdown(self) -> str:
        i = self.info
        lines = [
            f"# Method comparison on {i.get('corpus', 'the corpus')} at ε = {i['eps_total']:g}",
            "",
            f"*{PRIVATE_NOTE}.* Same stratified split for every method: {i['n_train']:,} training documents (the only "
            f"ones any DP step sees), {i['n_test']:,} held-out test documents (both counts: private, local — exact "
            f"sizes of the private corpus, not covered by ε); {i['per_class']} synthetic documents "
            f"per class; classifier: logistic regression on {i.get('embedding_model', 'sentence')} embeddings, "
            f"{len(i.get('seeds', []))} seed(s); chance (majority class) {i.get('chance_accuracy', math.nan):.3f}.",
            "",
            f"**Privacy:** {GUARANTEE_NOTE}",
            "",
        ]
        joint = i.get("joint")
        if joint:
            lines += [f"**Joint cost:** running these methods on the same data spends ε = {joint['epsilon']:.4g} and "
                      f"δ = {joint['delta']:g} in total ({JOINT_NOTE}).", ""]
        lines += [
            "| method | ε | δ | guarantee | docs | LLM calls | prompts/doc | prompt tokens | completion tokens | "
            "wall s | accuracy | macro-F1 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            acc = "—" if math.isnan(r.accuracy) else f"{r.accuracy:.3f} ± {r.accuracy_sd:.3f}"
            if not math.isnan(r.accuracy) and not math.isnan(r.accuracy_low):
                acc += f" (95 % {r.accuracy_low:.3f}–{r.accuracy_high:.3f})"
            f1 = "—" if math.isnan(r.macro_f1) else f"{r.macro_f1:.3f}"
            eps = "—" if math.isnan(r.epsilon) else f"{r.epsilon:.4g}"
            delta = "—" if math.isnan(r.delta) else f"{r.delta:g}"
            lines.append(f"| {r.label} | {eps} | {delta} | {r.guarantee} | {r.documents} | {r.llm_calls:,} | "
                         f"{r.prompts_per_document:g} | {r.prompt_tokens:,} | {r.completion_tokens:,} | "
                         f"{r.wall_seconds:.1f} | {acc} | {f1} |")
        notes = [(r.label, r.notes) for r in self.rows if r.notes]
        if notes:
            lines += ["", "Notes:"] + [f"- **{label}**: {note}" for label, note in notes]
        if self.warnings:
            lines += ["", "Warnings:"] + [f"- {w}" for w in self.warnings]
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str | os.PathLike[str]) -> Path:
        """``compare.csv``, ``compare.md``, ``compare_info.json`` (PRIVATE, local: accuracies on real data and the
        split's exact sizes), and per method its synthetic documents, privacy report and (public-prompt) audit log —
        these three hold DP releases and public settings only, never an exact private count (docs/DESIGN.md §2.0). The
        folder is owner-only."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        os.chmod(out, 0o700)
        (out / "compare.csv").write_text(self.to_csv(), encoding="utf-8")
        (out / "compare.md").write_text(self.to_markdown(), encoding="utf-8")
        for method, docs in self.documents.items():
            with open(out / f"documents_{method}.jsonl", "w", encoding="utf-8") as f:
                for d in docs:
                    f.write(json.dumps(d, ensure_ascii=False) + "\n")
        for method, rep in self.privacy.items():
            (out / f"privacy_{method}.json").write_text(json.dumps(rep, indent=2, ensure_ascii=False, default=_json),
                                                        encoding="utf-8")
        for method, entries in self.audit.items():
            with open(out / f"audit_{method}.jsonl", "w", encoding="utf-8") as f:
                for e in entries:
                    f.write(json.dumps(e, ensure_ascii=False, default=_json) + "\n")
        (out / "compare_info.json").write_text(json.dumps({"private": True, "note": PRIVATE_NOTE, **self.info},
                                                          indent=2, default=_json), encoding="utf-8")
        return out


def _fmt_csv(v: Any) -> Any:
    if isinstance(v, float):
        return "" if math.isnan(v) else f"{v:.6g}"
    return v


def _json(obj: Any) -> Any:
    """JSON for numpy values and mappings (the run folder's encoder); anything else as text."""
    try:
        return json_default(obj)
    except TypeError:
        return str(obj)
