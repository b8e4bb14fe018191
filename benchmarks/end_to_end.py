"""The headline metric end to end: sample → generate (offline model) → evaluate, on the public demo corpora.

    python -m benchmarks.end_to_end --corpus demo:bbc --corpus demo:drugs                  # hours on 2 CPU cores
    python -m benchmarks.end_to_end --corpus demo:bbc --readme README.md                   # + README table
    python -m benchmarks.end_to_end --corpus demo:drugs --per-class 2 --max-tokens 16 --seeds 1   # smoke run

Per corpus: ONE DP sampling run (ε_voc + ε_kde = 5 + 5 by default, `--per-class` keyphrase sequences per class),
then the offline SmolLM2-135M writes one document per sequence twice — without and with the class name in the
prompt (the demo corpora's class names are public) — and the local evaluation trains logistic regression on
MiniLM embeddings of (a) the synthetic documents, (b) as many real training documents per class, tested on the
held-out real documents; the no-LLM figure (TF-IDF on the DP keyphrase sequences themselves) comes from the same
run. Everything lives under ``--out`` (default ``runs/end_to_end``), with a ledger of its own (the demo corpora
are public data); re-running the same command resumes: sampling is skipped when its sequences exist and
finished documents are kept. Writes ``<out>/END_TO_END.md`` and, with ``--readme``, replaces the table between
``<!-- end_to_end:start -->`` and ``<!-- end_to_end:end -->`` (appended under "## Headline" when missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Sequence

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DOC_TYPES = {
    "demo:bbc": "a BBC news article",
    "demo:drugs": "a patient's review of a medicine on a drug-review website",
    "demo:drugs-rating": "a patient's review of a medicine on a drug-review website",
}
START, END = "<!-- end_to_end:start -->", "<!-- end_to_end:end -->"
_SAMPLED = ("sequences.jsonl", "run_config.json", "privacy_report.json", "private_vocabulary.json", "split.json")


@dataclasses.dataclass
class Row:
    """One line of the table."""

    corpus: str
    class_names: bool
    documents: int
    synthetic: tuple[float, float]
    real: tuple[float, float]
    no_llm: float
    generate_s: float
    evaluate_s: float


def format_table(rows: Sequence[Row], *, header: str) -> str:
    """The Markdown block (header line + table) that goes between the README markers."""
    lines = [header, "",
             "| corpus | class names in the prompt | synthetic documents | accuracy: trained on synthetic | "
             "accuracy: trained on as many real | no-LLM (keyphrases only) | generation | evaluation |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r.corpus} | {'yes' if r.class_names else 'no'} | {r.documents:,} | "
            f"{r.synthetic[0]:.3f} ± {r.synthetic[1]:.3f} | {r.real[0]:.3f} ± {r.real[1]:.3f} | {r.no_llm:.3f} | "
            f"{_minutes(r.generate_s)} | {_minutes(r.evaluate_s)} |")
    return "\n".join(lines)


def replace_block(text: str, block: str) -> str:
    """``text`` with the part between the markers replaced by ``block`` (a "## Headline" section added if none)."""
    wrapped = f"{START}\n{block}\n{END}"
    if START in text and END in text and text.index(START) < text.index(END):
        return text[: text.index(START)] + wrapped + text[text.index(END) + len(END):]
    return text.rstrip("\n") + "\n\n## Headline: synthetic documents vs real ones\n\n" + wrapped + "\n"


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def _sample(spec: str, run: Path, args: argparse.Namespace) -> float:
    from dpkps_core.cli import main as cli

    if (run / "sequences.jsonl").is_file():
        print(f"[{spec}] sampling: reusing {run}", file=sys.stderr)
        return 0.0
    t0 = time.perf_counter()
    rc = cli(["sample", "--corpus", spec, "--eps-voc", str(args.eps_voc), "--eps-kde", str(args.eps_kde),
              "--per-class", str(args.per_class), "--epsilon-cap", str(max(1000.0, args.eps_voc + args.eps_kde)),
              "--out", str(run)])
    if rc != 0:
        raise SystemExit(f"sampling {spec} failed (exit {rc})")
    return time.perf_counter() - t0


def _variant(run: Path, folder: Path) -> Path:
    """A run folder for one prompt variant: the sampled files copied (the DP release is drawn once)."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    for name in _SAMPLED:
        if (run / name).is_file() and not (folder / name).is_file():
            shutil.copy2(run / name, folder / name)
    return folder


def run_corpus(spec: str, args: argparse.Namespace, backend: Any) -> list[Row]:
    from dpkps_core.evaluation import evaluate_run, write_evaluation
    from dpkps_core.llm import GenerationSettings, PromptConfig, read_sequences, run_generation

    base = Path(args.out) / spec.replace(":", "_")
    run = base / "sampled"
    _sample(spec, run, args)
    sequences = read_sequences(run / "sequences.jsonl")
    rows = []
    for labels in args.variants:
        folder = _variant(run, base / ("with_class_names" if labels else "without_class_names"))
        config = PromptConfig(doc_type=DOC_TYPES.get(spec, "a document"), include_label=labels)
        settings = GenerationSettings(max_tokens=args.max_tokens, temperature=0.7, timeout=600.0, retries=2,
                                      batch_size=args.batch_size)
        t0 = time.perf_counter()
        last = [0.0]

        def progress(p: Any, spec: str = spec, labels: bool = labels) -> None:
            if time.monotonic() - last[0] > 30 or p.done + p.failed == p.total:
                last[0] = time.monotonic()
                eta = f", ETA {_minutes(p.eta_s)}" if p.eta_s is not None else ""
                print(f"[{spec}, class names {'on' if labels else 'off'}] {p.done}/{p.total} documents{eta}",
                      file=sys.stderr, flush=True)

        summary = run_generation(sequences, backend=backend, prompt_config=config, run_dir=folder,
                                 settings=settings, progress=progress)
        generate_s = time.perf_counter() - t0
        if summary.failed:
            print(f"[{spec}] {summary.failed} document(s) failed; re-run to retry them", file=sys.stderr)
        t0 = time.perf_counter()
        result = evaluate_run(folder, seeds=args.seeds, coral=False, device=args.device)
        write_evaluation(result, folder)
        evaluate_s = time.perf_counter() - t0
        m = result.metrics
        rows.append(Row(spec, labels, summary.done, (m["synthetic_accuracy"].accuracy_mean,
                                                     m["synthetic_accuracy"].accuracy_sd),
                        (m["real_baseline_accuracy"].accuracy_mean, m["real_baseline_accuracy"].accuracy_sd),
                        m["no_llm_accuracy"].accuracy_mean, generate_s, evaluate_s))
        print(f"[{spec}] class names {'on' if labels else 'off'}: synthetic {rows[-1].synthetic[0]:.3f}, real "
              f"{rows[-1].real[0]:.3f}, no-LLM {rows[-1].no_llm:.3f}", file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    from dpkps_core.device import DEVICE_CHOICES, describe_device, resolve_device
    from dpkps_core.llm.local import DEFAULT_BATCH_SIZE, OfflineBackend

    ap = argparse.ArgumentParser(prog="python -m benchmarks.end_to_end", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", action="append", default=None, help="demo corpus (repeatable; default demo:bbc)")
    ap.add_argument("--per-class", type=int, default=100, help="keyphrase sequences (= documents) per class")
    ap.add_argument("--eps-voc", type=float, default=5.0)
    ap.add_argument("--eps-kde", type=float, default=5.0)
    ap.add_argument("--max-tokens", type=int, default=200, help="most tokens per document")
    ap.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads of the offline model")
    ap.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    ap.add_argument("--seeds", type=int, default=3, help="classifier / baseline-sample seeds")
    ap.add_argument("--class-names", choices=("both", "without", "with"), default="both",
                    help="prompt variants: without and/or with each sequence's (public) class name")
    ap.add_argument("--out", default="runs/end_to_end", help="working folder (resumable)")
    ap.add_argument("--readme", default=None, metavar="FILE", help="also replace the table in this README")
    args = ap.parse_args(argv)
    specs = args.corpus or ["demo:bbc"]
    args.variants = {"both": (False, True), "without": (False,), "with": (True,)}[args.class_names]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ.setdefault("DPKPS_LEDGER_DIR", str(out / "ledgers"))  # public demo data: a ledger of its own
    device = resolve_device(args.device)
    backend = OfflineBackend(threads=args.threads, device=device)
    t0 = time.perf_counter()
    rows: list[Row] = []
    for spec in specs:
        rows.extend(run_corpus(spec, args, backend))
    wall = time.perf_counter() - t0
    import torch

    hardware = (f"{platform.machine()}, {os.cpu_count()} CPU core(s), {describe_device(device)}, torch "
                f"{torch.__version__}, {args.threads} model thread(s)")
    header = (f"`python -m benchmarks.end_to_end {' '.join('--corpus ' + s for s in specs)} --per-class "
              f"{args.per_class} --max-tokens {args.max_tokens}` ({_dt.date.today().isoformat()}): ε_voc + ε_kde = "
              f"{args.eps_voc:g} + {args.eps_kde:g}, {args.per_class} documents per class written by the offline "
              f"SmolLM2-135M-Instruct (≤ {args.max_tokens} tokens, temperature 0.7, batches of {args.batch_size}); "
              f"logistic regression on all-MiniLM-L6-v2 embeddings, mean ± sd over {args.seeds} seed(s), tested on "
              f"the held-out real documents. Wall time {_minutes(wall)} on {hardware}.")
    block = format_table(rows, header=header)
    (out / "END_TO_END.md").write_text(block + "\n", encoding="utf-8")
    print(block)
    if args.readme:
        path = Path(args.readme)
        path.write_text(replace_block(path.read_text(encoding="utf-8"), block), encoding="utf-8")
        print(f"updated {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
