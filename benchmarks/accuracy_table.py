"""No-LLM accuracy table of DP-KPS configurations ([DP-KPS] Table 5 style; docs/DESIGN.md §5, §6).

    python -m benchmarks.accuracy_table --corpus demo:bbc --corpus demo:drugs --seeds 3 --out docs/RESULTS.md

For each corpus, runs the no-LLM check (TF-IDF over keyphrase uni+bigrams + logistic regression, trained on
200 DP keyphrase sequences per class, tested on the held-out documents' own keyphrase sequences) at
ε_voc + ε_kde ∈ {1 + 5, 5 + 5, 1 + 10, 5 + 10} for: the paper's settings (both methods), each improvement alone
on top of them, and the current defaults (both methods); plus the real keyphrase baseline and chance. Seeds are
the noise seeds 0..n−1 with one fixed split. Also an ε sweep of the current defaults on the first corpus (plot
``docs/sweep_<name>.png`` when a PNG renderer is installed, else ``.html``). Writes Markdown to ``--out``.
The demo corpora are public data, so these numbers may be published (on a user's corpus they would be private).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpkps_core.method.config import load_vocabulary_for
from dpkps_core.corpus import load_corpus_spec
from dpkps_core.embeddings import EmbeddingCache, get_embedder
from dpkps_core.evaluation import NoLLMEvaluator, run_sweep, sweep_figures, sweep_summary
from dpkps_core.method.config import PAPER_SETTINGS, SamplingConfig

SPLITS = ((1.0, 5.0), (5.0, 5.0), (1.0, 10.0), (5.0, 10.0))
BOTH = ("independent", "iterative-log")
IND = ("independent",)

# (key, label, methods, overrides applied to SamplingConfig()); "paper" overrides start from PAPER_SETTINGS.
CONFIGS: tuple[tuple[str, str, tuple[str, ...], dict[str, Any]], ...] = (
    ("paper", "Paper settings (RFF, σ = 1, I = 2000, full GloVe)", BOTH, dict(PAPER_SETTINGS)),
    ("hist0", "paper + exact DP histogram, unsmoothed (σ = 0)", IND, {**PAPER_SETTINGS, "density": "histogram", "bandwidth": 0.0}),
    ("histauto", "paper + exact DP histogram, auto σ", IND, {**PAPER_SETTINGS, "density": "histogram", "bandwidth": None}),
    ("autobw", "paper + auto bandwidth σ (RFF)", BOTH, {**PAPER_SETTINGS, "bandwidth": None}),
    ("autoI", "paper + auto features I (RFF)", BOTH, {**PAPER_SETTINGS, "features": None}),
    ("junk", "paper + junk filter on V", BOTH, {**PAPER_SETTINGS, "junk_filter": True}),
    ("freq", "paper + frequency-limited V (50,000 terms)", BOTH, {**PAPER_SETTINGS, "vocab_max_terms": 50_000}),
    ("defaults", "Current defaults (SamplingConfig())", BOTH, {}),
    ("person", "Current defaults, unit = one PERSON (demo:drugs: all reviews of one drug as a synthetic person)", IND,
     {"person_column": "drug"}),
)
PERSON_COLUMNS = {"demo:drugs": "drug"}  # demo corpora with a (documented, synthetic) person column


def _fmt(values: list[float]) -> str:
    arr = np.asarray(values, dtype=np.float64)
    sd = arr.std(ddof=1) if arr.size > 1 else 0.0
    return f"{arr.mean():.3f} ± {sd:.3f}"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_corpus(spec: str, *, seeds: int, per_class: int, embedder: Any, cache: EmbeddingCache) -> dict[str, Any]:
    """All cells of one corpus → {"rows": [...], "info": {...}} (cell rows as from NoLLMEvaluator.evaluate)."""
    t0 = time.perf_counter()
    base = SamplingConfig(corpus=spec, per_class=per_class)
    corpus = load_corpus_spec(spec, person_column=PERSON_COLUMNS.get(spec))  # persons matter only in "person" cells
    evaluators: dict[tuple, NoLLMEvaluator] = {}
    rows: list[dict[str, Any]] = []
    cells = [(key, m, s, seed) for key, _, methods, ov in CONFIGS for m in methods for s in SPLITS for seed in range(seeds)
             if "person_column" not in ov or spec in PERSON_COLUMNS]
    overrides = {key: ov for key, _, _, ov in CONFIGS}
    for k, (key, method, (e_voc, e_kde), seed) in enumerate(cells):
        cfg = dataclasses.replace(base, method=method, eps_voc=e_voc, eps_kde=e_kde, **overrides[key])
        vkey = (cfg.junk_filter, cfg.effective_vocab_max_terms, cfg.remove_stopwords, cfg.person_column)
        if vkey not in evaluators:
            evaluators[vkey] = NoLLMEvaluator(corpus, config=cfg, vocabulary=load_vocabulary_for(cfg), embedder=embedder,
                                              cache=cache)
        row = evaluators[vkey].evaluate(cfg, seed=seed, per_class=per_class)
        row.update(config=key, vocabulary_key=str(vkey))
        rows.append(row)
        if (k + 1) % 12 == 0 or k + 1 == len(cells):
            el = time.perf_counter() - t0
            _log(f"[{spec}] {k + 1}/{len(cells)} cells, {el:.0f} s elapsed, ~{el / (k + 1) * (len(cells) - k - 1):.0f} s left")
    ev = next(e for e in evaluators.values() if not e.config.person_column)
    info = {"n_train": len(ev.train), "n_test": len(ev.test), "classes": ev.classes,
            "class_counts": dict(zip(*np.unique(np.asarray(ev.train.labels + ev.test.labels), return_counts=True))),
            "chance": ev.chance, "seconds": time.perf_counter() - t0, "cells": len(cells)}
    return {"rows": rows, "info": info}


def _configuration_rows(df: Any, column: str) -> list[str]:
    """One table row per configuration and method: ``column``'s mean ± sd at each ε split ("—" where not run)."""
    rows = []
    for key, label, methods, _ in CONFIGS:
        if not (df.config == key).any():  # e.g. the person row on a corpus without a person column
            continue
        for m in methods:
            cells = []
            for v, k in SPLITS:
                sub = df[(df.config == key) & (df.method == m) & (df.eps_voc == v) & (df.eps_kde == k)]
                cells.append(_fmt(sub[column].tolist()) if len(sub) else "—")
            rows.append(f"| {label} | {m} | " + " | ".join(cells) + " |")
    return rows


def corpus_markdown(spec: str, result: dict[str, Any], *, seeds: int) -> list[str]:
    import pandas as pd

    df = pd.DataFrame(result["rows"])
    info = result["info"]
    heads = [f"{v:g} + {k:g} (ε = {v + k:g})" for v, k in SPLITS]
    counts = ", ".join(f"{c} {int(n)}" for c, n in info["class_counts"].items())
    out = [f"## {spec}", "",
           f"{len(info['classes'])} classes ({counts}); {info['n_train']:,} training documents feed the DP steps, "
           f"{info['n_test']:,} held-out test documents. {info['cells']} cells in {info['seconds'] / 60:.1f} min.", "",
           "No-LLM accuracy (mean ± sd over noise seeds 0.." + str(seeds - 1) + "), columns ε_voc + ε_kde:", "",
           "| configuration | method | " + " | ".join(heads) + " |",
           "|---|---|" + "---|" * len(heads)]
    out += _configuration_rows(df, "no_llm_accuracy")
    for key, label in (("paper", "Real keyphrase baseline (noise-free top-N of the paper settings' V)"),
                       ("defaults", "Real keyphrase baseline (noise-free top-N of the defaults' V)")):
        cells = []
        for v, k in SPLITS:
            sub = df[(df.config == key) & (df.method == "independent") & (df.eps_voc == v) & (df.eps_kde == k)]
            cells.append(_fmt(sub.real_keyphrase_baseline_accuracy.tolist()))
        out.append(f"| {label} | — | " + " | ".join(cells) + " |")
    out.append(f"| Chance (majority class of the test set) | — | " + " | ".join([f"{info['chance']:.3f}"] * len(SPLITS)) + " |")
    out += ["", "Macro-F1 (mean ± sd; the classifiers are trained on balanced sequences, so on an imbalanced test set "
            "macro-F1 is the fairer view):", "",
            "| configuration | method | " + " | ".join(heads) + " |", "|---|---|" + "---|" * len(heads)]
    out += _configuration_rows(df, "no_llm_macro_f1")
    p_major = info["chance"]
    out.append("| Chance (always the majority class) | — | "
               + " | ".join([f"{2 * p_major / (1 + p_major) / len(info['classes']):.3f}"] * len(SPLITS)) + " |")
    out += ["", "Private vocabulary Ṽ (N = 1,000, S = 10) — recall of the true top-1,000 terms and share of Ṽ whose true "
            "count is 0 (in no training document's first S distinct terms: selected by noise alone), mean over seeds:", "",
            "| public vocabulary V | ε_voc | recall of true top-1,000 | pure-noise share of Ṽ |", "|---|---|---|---|"]
    vnames = {"paper": "GloVe, stop words removed (paper)", "junk": "GloVe + junk filter (also the defaults)",
              "freq": "GloVe, first 50,000 terms"}
    for key, name in vnames.items():
        for v in sorted({v for v, _ in SPLITS}):
            sub = df[(df.config == key) & (df.eps_voc == v)]
            out.append(f"| {name} | {v:g} | {_fmt(sub.vocabulary_recall.tolist())} | {_fmt(sub.noise_term_share.tolist())} |")
    out.append("")
    return out


def sweep_markdown(spec: str, df: Any, plot: Path, seconds: float) -> list[str]:
    s = sweep_summary(df)
    out = [f"## ε sweep of the current defaults on {spec}", "",
           f"Plot: [{plot.name}]({plot.name}). {len(df)} cells in {seconds / 60:.1f} min; no-LLM accuracy, mean ± sd "
           "over noise seeds; vocabulary recall of the true top-1,000 terms.", "",
           "| method | ε_voc | ε_kde | no-LLM accuracy | vocabulary recall |", "|---|---|---|---|---|"]
    for _, r in s.iterrows():
        out.append(f"| {r['method']} | {r['eps_voc']:g} | {r['eps_kde']:g} | {r['no_llm_accuracy_mean']:.3f} ± "
                   f"{r['no_llm_accuracy_sd']:.3f} | {r['vocabulary_recall_mean']:.3f} |")
    out.append("")
    return out


def write_sweep_plot(df: Any, stem: Path) -> Path:
    """``stem.png`` when kaleido or matplotlib is installed, else ``stem.html`` (plotly from a CDN)."""
    from dpkps_core.evaluation import _write_png

    figs = sweep_figures(df)
    png = stem.with_suffix(".png")
    if _write_png(figs["curves"], df, png):
        return png
    html = stem.with_suffix(".html")
    parts = [fig.to_html(full_html=False, include_plotlyjs="cdn" if k == 0 else False) for k, fig in enumerate(figs.values())]
    html.write_text("<html><head><meta charset='utf-8'><title>ε sweep</title></head><body>\n" + "\n".join(parts)
                    + "\n</body></html>\n", encoding="utf-8")
    return html


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", action="append", help="demo:bbc, demo:drugs, … (repeatable)")
    p.add_argument("--seeds", type=int, default=3, help="noise seeds 0..n−1 (default %(default)s)")
    p.add_argument("--per-class", type=int, default=200, help="sequences per class (default %(default)s)")
    p.add_argument("--out", default="docs/RESULTS.md", help="Markdown file to write (default %(default)s)")
    p.add_argument("--no-sweep", action="store_true", help="skip the ε sweep plot of the first corpus")
    p.add_argument("--cells-csv", help="also write every cell's row to this CSV (not needed for the tables)")
    args = p.parse_args(argv)
    corpora = args.corpus or ["demo:bbc", "demo:drugs"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    t_all = time.perf_counter()
    embedder = get_embedder(SamplingConfig().embedding_model)
    cache = EmbeddingCache()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.accuracy_table " + " ".join(f"--corpus {c}" for c in corpora) + \
        f" --seeds {args.seeds} --out {args.out}" + (f" --per-class {args.per_class}" if args.per_class != 200 else "") + \
        (" --no-sweep" if args.no_sweep else "")
    sections: list[str] = []
    all_rows: list[dict[str, Any]] = []

    def write(final: bool) -> None:
        wall = time.perf_counter() - t_all
        head = ["# Results: no-LLM utility of DP-KPS configurations", "",
                f"Produced by one command: `{command}`", "",
                f"- date: {_dt.date.today().isoformat()}; machine: 2-core CPU ({platform.machine()}, shared with other "
                f"jobs, no GPU), Python {platform.python_version()}; wall time: {wall / 60:.1f} min"
                + ("" if final else " (partial: still running)"),
                "- no-LLM check ([DP-KPS] Table 5): TF-IDF over keyphrase unigrams + bigrams (each keyphrase one token) "
                f"+ logistic regression, trained on {args.per_class} sampled sequences per class (L = 10), tested on the "
                "held-out documents' own keyphrase sequences (matches of Ṽ in text order, repeats kept, first 10)",
                "- one held-out split (test fraction 0.2, split seed 0; each document assigned by a keyed hash of its "
                "text, whole persons together in the person row); seeds = DP noise seeds 0.."
                f"{args.seeds - 1}; N = 1,000, S = 10, embeddings all-MiniLM-L6-v2; public vocabulary GloVe",
                "- \"paper + …\" rows change ONE thing relative to the paper settings (`pipeline.PAPER_SETTINGS`: RFF "
                "DP-KDE, σ = 1, I = 2,000, stop words removed, no junk filter); the histogram only serves independent "
                "sampling; \"Current defaults\" is `SamplingConfig()` with the method shown",
                "- real keyphrase baseline (`evaluation.real_keyphrase_baseline`, the one definition every page shows): "
                "the same classifier trained on the real training documents' keyphrase sequences over the noise-free "
                "top-N terms of V (non-private upper bound, independent of ε); demo corpora are public data", ""]
        out.write_text("\n".join(head + sections) + "\n", encoding="utf-8")

    for spec in corpora:
        _log(f"== {spec}")
        result = run_corpus(spec, seeds=args.seeds, per_class=args.per_class, embedder=embedder, cache=cache)
        all_rows.extend(dict(r, corpus=spec) for r in result["rows"])
        if args.cells_csv:
            import pandas as pd

            pd.DataFrame(all_rows).to_csv(args.cells_csv, index=False)
        sections += corpus_markdown(spec, result, seeds=args.seeds)
        write(final=False)
    if not args.no_sweep:
        spec = corpora[0]
        _log(f"== ε sweep of the defaults on {spec}")
        t = time.perf_counter()
        corpus = load_corpus_spec(spec)
        cfg = SamplingConfig(corpus=spec)
        df = run_sweep(corpus, config=cfg, vocabulary=load_vocabulary_for(cfg), embedder=embedder, cache=cache,
                       seeds=args.seeds, per_class=args.per_class,
                       progress=lambda f, m: _log(f"[sweep {100 * f:5.1f}%] {m}") if m.startswith("cell") and
                       int(m.split()[1].split("/")[0]) % 12 == 0 else None)
        plot = write_sweep_plot(df, out.parent / f"sweep_{spec.split(':')[-1]}")
        sections += sweep_markdown(spec, df, plot, time.perf_counter() - t)
    write(final=True)
    _log(f"wrote {out} in {(time.perf_counter() - t_all) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
