"""The headline metric end to end: sample → generate (offline model) → evaluate, on the public demo corpora.

    # the headline table of docs/BENCHMARKS.md: each lever in its own row (engine, class names, selection), 100 documents per class
    python -m benchmarks.end_to_end --corpus demo:bbc --corpus demo:drugs --table levers --readme docs/BENCHMARKS.md
    # the same, one process per corpus (one model thread each: both cores busy), then one command writes the table
    python -m benchmarks.end_to_end --corpus demo:bbc --table levers &
    python -m benchmarks.end_to_end --corpus demo:drugs --table levers; wait
    python -m benchmarks.end_to_end --corpus demo:bbc --corpus demo:drugs --table levers --readme docs/BENCHMARKS.md
    # chosen variants, ENGINE,NAMES,DRAFTS[,rep|norep] each (engine ct2|torch; names|nonames; drafts per sequence;
    # repetition control on (default) or off)
    python -m benchmarks.end_to_end --corpus demo:bbc --per-class 10 --variant ct2,names,1 --variant ct2,names,2
    python -m benchmarks.end_to_end --corpus demo:drugs --per-class 2 --max-tokens 16 --seeds 1   # smoke run
    # the run-to-run noise: the defaults written three times from the same DP draw (spread said under the table)
    python -m benchmarks.end_to_end --corpus demo:bbc --variant ct2,names,1 --generations 3

Per corpus: ONE DP sampling run (ε_voc + ε_kde = 5 + 5 by default, `--per-class` keyphrase sequences per class),
then the offline SmolLM2-135M writes one document per sequence once per variant, and the local evaluation trains
logistic regression on MiniLM embeddings of (a) the synthetic documents, (b) as many real training documents per
class, tested on the held-out real documents; it also scores precision/recall of the synthetic against the real
test documents on those embeddings (k-NN manifolds, Kynkäänniemi et al. 2019); the no-LLM figure (TF-IDF on the
DP keyphrase sequences themselves) comes from the same run. ``--table levers`` writes, per corpus, the rows
torch / no class names / no repetition control / 1 draft (before issue 22's levers), then + the CTranslate2 engine,
+ class names in the prompt, + repetition control, + best of 2 drafts — each lever's effect in its own row, with the
wall time of each row's generation and evaluation. Everything lives under ``--out`` (default
``runs/end_to_end``), with a ledger of its own (the demo corpora are public data); re-running the same command
resumes: sampling is skipped when its sequences exist, finished documents are kept (an interrupted row's generation
time adds up across runs) and a finished row (``benchmark_row.json``, same settings) is reused as it is (documents the screen
refused after every retry stay counted as lost). Writes
``<out>/END_TO_END.md`` and, with ``--readme``, replaces the table between ``<!-- end_to_end:start -->`` and
``<!-- end_to_end:end -->`` (appended under "## Headline" when missing).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
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
ROW_FILE, TIMING_FILE = "benchmark_row.json", "benchmark_timing.json"
_SAMPLED = ("sequences.jsonl", "run_config.json", "privacy_report.json", "private_vocabulary.json", "split.json")


@dataclasses.dataclass(frozen=True)
class Variant:
    """How the documents of one row are written: the engine, class names in the prompt, drafts per sequence and
    repetition control (the backend's defaults, :mod:`dpkps_core.llm.repetition`, or both options off)."""

    engine: str = "ct2"
    class_names: bool = True
    drafts: int = 1
    repetition: bool = True

    @classmethod
    def parse(cls, text: str) -> "Variant":
        """``ENGINE,NAMES,DRAFTS[,REP]``, e.g. ``ct2,names,2`` or ``torch,nonames,1,norep`` (REP: rep | norep,
        default rep)."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) == 3:
            parts.append("rep")
        if len(parts) != 4 or parts[0] not in ("ct2", "torch") or parts[1] not in ("names", "nonames") \
                or not parts[2].isdigit() or int(parts[2]) < 1 or parts[3] not in ("rep", "norep"):
            raise argparse.ArgumentTypeError(f"expected ENGINE,NAMES,DRAFTS[,rep|norep] like ct2,names,2; got {text!r}")
        return cls(parts[0], parts[1] == "names", int(parts[2]), parts[3] == "rep")

    @property
    def spelled(self) -> str:
        """The ``--variant`` text of this variant."""
        return (f"{self.engine},{'names' if self.class_names else 'nonames'},{self.drafts}"
                f"{'' if self.repetition else ',norep'}")

    @property
    def folder(self) -> str:
        return (f"{self.engine}_{'names' if self.class_names else 'nonames'}_d{self.drafts}"
                f"{'' if self.repetition else '_norep'}")

    def describe(self) -> str:
        return (f"{self.engine}, class names {'on' if self.class_names else 'off'}, {self.drafts} draft(s), "
                f"repetition control {'on' if self.repetition else 'off'}")


#: ``--table levers``: before issue 22's levers, then each lever added in turn (its effect in its own row).
LEVERS = (Variant("torch", False, 1, False), Variant("ct2", False, 1, False), Variant("ct2", True, 1, False),
          Variant("ct2", True, 1, True), Variant("ct2", True, 2, True))
LEVER_NAMES = {LEVERS[0]: "before (torch, no class names, no repetition control, 1 draft)",
               LEVERS[1]: "+ CTranslate2 engine", LEVERS[2]: "+ class names in the prompt",
               LEVERS[3]: "+ repetition control", LEVERS[4]: "+ best of 2 drafts"}


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
    engine: str = ""
    drafts: int = 1
    precision: float | None = None
    recall: float | None = None
    label: str = ""
    repetition: bool = True
    #: synthetic / real accuracy's paired 95 % bootstrap interval over the test documents, and their number
    ratio_interval: tuple[float, float] | None = None
    n_test: int = 0
    #: which independent generation of the same variant on the same DP draw (``--generations``)
    generation: int = 1


def format_table(rows: Sequence[Row], *, header: str) -> str:
    """The Markdown block (header line + table) that goes between the markers of docs/BENCHMARKS.md."""
    lines = [header, "",
             "| corpus | variant | engine | class names in the prompt | repetition control | drafts | synthetic documents | "
             "accuracy: trained on synthetic | accuracy: trained on as many real | synthetic / real (95 % interval) | "
             "precision / recall (embeddings) | no-LLM (keyphrases only) | generation | evaluation |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r.synthetic[0] / r.real[0]:.2f}" if r.real[0] else "—"
        if r.ratio_interval is not None:
            ratio += f" ({r.ratio_interval[0]:.2f}–{r.ratio_interval[1]:.2f})"
        pr = "—" if r.precision is None or r.recall is None else f"{r.precision:.3f} / {r.recall:.3f}"
        lines.append(
            f"| {r.corpus} | {r.label or '—'} | {r.engine or '—'} | {'yes' if r.class_names else 'no'} | "
            f"{'yes' if r.repetition else 'no'} | {r.drafts} | "
            f"{r.documents:,} | {r.synthetic[0]:.3f} ± {r.synthetic[1]:.3f} | {r.real[0]:.3f} ± {r.real[1]:.3f} | "
            f"{ratio} | {pr} | {r.no_llm:.3f} | {_minutes(r.generate_s)} | {_minutes(r.evaluate_s)} |")
    spread = generation_spread(rows)
    if spread:
        lines += ["", *spread]
    return "\n".join(lines)


def generation_spread(rows: Sequence[Row]) -> list[str]:
    """One line per variant written more than once (``--generations``): its synthetic accuracy and synthetic / real
    over the independent generations (mean ± sample sd) — the run-to-run noise a difference between rows must
    exceed to be a finding."""
    import statistics

    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.corpus, r.engine, r.class_names, r.repetition, r.drafts), []).append(r)
    out = []
    for (corpus, engine, names, rep, drafts), group in groups.items():
        if len({r.generation for r in group}) < 2:
            continue
        acc = [r.synthetic[0] for r in group]
        ratio = [r.synthetic[0] / r.real[0] for r in group if r.real[0]]
        out.append(f"- {corpus}, {engine or '—'}, class names {'on' if names else 'off'}, repetition control "
                   f"{'on' if rep else 'off'}, {drafts} draft(s): synthetic accuracy {statistics.mean(acc):.3f} ± "
                   f"{statistics.stdev(acc):.3f} over {len(acc)} generations ({', '.join(f'{a:.3f}' for a in acc)}); "
                   f"synthetic / real {statistics.mean(ratio):.3f} ± {statistics.stdev(ratio):.3f}.")
    return out


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
    run.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # `sample --out` wants an existing parent
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


def _row_key(variant: Variant, args: argparse.Namespace, generation: int = 1) -> dict[str, Any]:
    """What a finished row's numbers depend on besides the DP draw: a stored row is reused only when this matches."""
    key = {"variant": variant.spelled, "per_class": args.per_class, "max_tokens": args.max_tokens,
           "batch_size": args.batch_size, "seeds": args.seeds, "eps_voc": args.eps_voc, "eps_kde": args.eps_kde}
    return key if generation == 1 else {**key, "generation": generation}


def _folder_name(variant: Variant, generation: int = 1) -> str:
    """The run folder of one generation of ``variant`` (the first keeps the variant's own folder)."""
    return variant.folder if generation == 1 else f"{variant.folder}_g{generation}"


def _slots(args: argparse.Namespace) -> list[tuple[Variant, int]]:
    """(variant, generation) of every row, in table order: each variant's generations together."""
    return [(v, g) for v in args.variants for g in range(1, int(getattr(args, "generations", 1)) + 1)]


def _label(variant: Variant, generation: int, args: argparse.Namespace) -> str:
    base = LEVER_NAMES.get(variant, "") if args.table == "levers" else ""
    if generation == 1:
        return base
    return f"{base or variant.describe()} (generation {generation})"


def _stored_row(folder: Path, key: dict[str, Any]) -> Row | None:
    """The row a finished run of the same variant left in ``folder`` (``benchmark_row.json``), if any."""
    path = folder / ROW_FILE
    if not path.is_file():
        return None
    stored = json.loads(path.read_text(encoding="utf-8"))
    if stored.get("key") != key:
        return None
    fields = stored["row"]
    fields["synthetic"], fields["real"] = tuple(fields["synthetic"]), tuple(fields["real"])
    if fields.get("ratio_interval") is not None:
        fields["ratio_interval"] = tuple(fields["ratio_interval"])
    return Row(**fields)


#: One in-memory embedding memo per model for the whole process: every row of a corpus is scored on the same real
#: test and training documents, so they are embedded once, not once per row (memory only: never written).
_EMBEDDERS: dict[str, Any] = {}


def _memo_embedder(folder: Path, device: str) -> Any:
    """The process's memo embedder of the model ``folder``'s run was sampled with."""
    from dpkps_core.embeddings import DEFAULT_MODEL, MemoEmbedder, get_embedder

    config = json.loads((folder / "run_config.json").read_text(encoding="utf-8"))
    name = str(config.get("embedding_model") or DEFAULT_MODEL)
    if name not in _EMBEDDERS:
        _EMBEDDERS[name] = MemoEmbedder(get_embedder(name, device=device))
    return _EMBEDDERS[name]


def _evaluated_row(spec: str, variant: Variant, folder: Path, args: argparse.Namespace, *, documents: int,
                   generate_s: float, generation: int = 1) -> Row:
    """Evaluate the documents in ``folder`` (writing its evaluation.json) and make the table's row of them."""
    from dpkps_core.evaluation import evaluate_run, write_evaluation

    t0 = time.perf_counter()
    result = evaluate_run(folder, seeds=args.seeds, coral=False, embedder=_memo_embedder(folder, args.device))
    write_evaluation(result, folder)
    evaluate_s = time.perf_counter() - t0
    m, dist, ratio = result.metrics, result.distribution, result.synthetic_to_real
    return Row(spec, variant.class_names, documents,
               (m["synthetic_accuracy"].accuracy_mean, m["synthetic_accuracy"].accuracy_sd),
               (m["real_baseline_accuracy"].accuracy_mean, m["real_baseline_accuracy"].accuracy_sd),
               m["no_llm_accuracy"].accuracy_mean, generate_s, evaluate_s, engine=variant.engine,
               drafts=variant.drafts, precision=dist.precision_mean if dist else None,
               recall=dist.recall_mean if dist else None,
               label=_label(variant, generation, args), repetition=variant.repetition,
               ratio_interval=(ratio.low, ratio.high) if ratio is not None else None,
               n_test=int(result.info.get("n_test", 0)), generation=generation)


def _generation_seconds(folder: Path) -> float:
    """Generation seconds spent on this row by earlier, interrupted runs (``benchmark_timing.json``)."""
    path = folder / TIMING_FILE
    return float(json.loads(path.read_text(encoding="utf-8"))["generate_s"]) if path.is_file() else 0.0


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def run_corpus(spec: str, args: argparse.Namespace, backends: dict[str, Any]) -> list[Row]:
    """Sample once, then write and evaluate every variant of ``args.variants`` on the same DP sequences.

    A finished row is stored in its folder and reused by a later run with the same settings (so the corpora can be
    run as separate processes and one last command writes the table); an interrupted row's generation time is
    accumulated across runs."""
    from dpkps_core.llm import GenerationSettings, PromptConfig, read_sequences, run_generation

    base = Path(args.out) / spec.replace(":", "_")
    run = base / "sampled"
    _sample(spec, run, args)
    sequences = read_sequences(run / "sequences.jsonl")
    rows: dict[tuple[Variant, int], Row] = {}
    # the slow torch rows last: a session cut off mid-way has the new defaults' rows first (the table keeps its order)
    for variant, generation in sorted(_slots(args), key=lambda vg: vg[0].engine == "torch"):
        folder = _variant(run, base / _folder_name(variant, generation))
        key = _row_key(variant, args, generation)
        stored = _stored_row(folder, key)
        if stored is not None and args.re_evaluate:
            # the same documents, evaluated again (e.g. by a newer evaluation): generation is not run again
            print(f"[{spec}] {variant.describe()}: evaluating the stored documents again", file=sys.stderr)
            rows[variant, generation] = _evaluated_row(spec, variant, folder, args, documents=stored.documents,
                                                       generate_s=stored.generate_s, generation=generation)
            _write_json(folder / ROW_FILE, {"key": key, "row": dataclasses.asdict(rows[variant, generation])})
            continue
        if stored is not None:
            stored.label = _label(variant, generation, args)
            print(f"[{spec}] {variant.describe()}: reusing the finished row in {folder}", file=sys.stderr)
            rows[variant, generation] = stored
            continue
        config = PromptConfig(doc_type=DOC_TYPES.get(spec, "a document"), include_label=variant.class_names)
        repetition = {} if variant.repetition else {"no_repeat_ngram": 0, "repetition_penalty": 1.0}
        settings = GenerationSettings(max_tokens=args.max_tokens, temperature=0.7, timeout=600.0, retries=2,
                                      batch_size=args.batch_size, drafts=variant.drafts, **repetition)
        earlier = _generation_seconds(folder)
        t0 = time.perf_counter()
        last = [0.0]

        def progress(p: Any, spec: str = spec, variant: Variant = variant, folder: Path = folder,
                     earlier: float = earlier, t0: float = t0) -> None:
            if time.monotonic() - last[0] > 30 or p.done + p.failed == p.total:
                last[0] = time.monotonic()
                _write_json(folder / TIMING_FILE, {"generate_s": earlier + time.perf_counter() - t0})
                eta = f", ETA {_minutes(p.eta_s)}" if p.eta_s is not None else ""
                print(f"[{spec}, {variant.describe()}] {p.done}/{p.total} documents{eta}", file=sys.stderr,
                      flush=True)

        summary = run_generation(sequences, backend=_backend(backends, variant.engine, args), prompt_config=config,
                                 run_dir=folder, settings=settings, progress=progress)
        generate_s = earlier + time.perf_counter() - t0
        _write_json(folder / TIMING_FILE, {"generate_s": generate_s})
        if summary.failed:
            print(f"[{spec}] {summary.failed} document(s) failed after every retry (the row counts what was written)",
                  file=sys.stderr)
        rows[variant, generation] = _evaluated_row(spec, variant, folder, args, documents=summary.done,
                                                   generate_s=generate_s, generation=generation)
        r = rows[variant, generation]
        # stored with its failures: documents the screen refused after every retry are part of the row's result
        _write_json(folder / ROW_FILE, {"key": key, "row": dataclasses.asdict(r)})
        print(f"[{spec}] {variant.describe()}: synthetic {r.synthetic[0]:.3f}, real {r.real[0]:.3f}, no-LLM "
              f"{r.no_llm:.3f}, precision/recall {r.precision} / {r.recall}, generation {_minutes(generate_s)}",
              file=sys.stderr, flush=True)
    return [rows[slot] for slot in _slots(args)]


def stored_rows(spec: str, args: argparse.Namespace) -> tuple[list[Row], list[str]]:
    """The finished rows of ``spec`` under ``args.out`` in the order of ``args.variants`` (nothing is run), and a
    description of each variant that has none yet."""
    base = Path(args.out) / spec.replace(":", "_")
    rows, missing = [], []
    for variant, generation in _slots(args):
        row = _stored_row(base / _folder_name(variant, generation), _row_key(variant, args, generation))
        label = _label(variant, generation, args)
        if row is None:
            missing.append(f"{spec} {label or variant.describe()}")
            continue
        row.label = label
        rows.append(row)
    return rows, missing


def _backend(backends: dict[str, Any], engine: str, args: argparse.Namespace) -> Any:
    """The offline backend of ``engine`` (built once per engine; asking for ct2 where it cannot run is an error)."""
    if engine not in backends:
        from dpkps_core.llm import make_backend

        backends[engine] = make_backend("offline", threads=args.threads, device=args.device, engine=engine)
        note = getattr(backends[engine], "engine_note", None)
        if note:
            print(note, file=sys.stderr)
    return backends[engine]


def _variants(args: argparse.Namespace) -> list[Variant]:
    """The rows to write: ``--table levers``, else ``--variant`` options, else ``--class-names`` with the
    default engine and ``--drafts``."""
    if args.table == "levers":
        return list(LEVERS)
    if args.variant:
        return list(dict.fromkeys(args.variant))
    names = {"both": (False, True), "without": (False,), "with": (True,)}[args.class_names]
    return [Variant(args.engine, n, args.drafts) for n in names]


def main(argv: list[str] | None = None) -> int:
    from dpkps_core.device import DEVICE_CHOICES, describe_device, resolve_device
    from dpkps_core.llm.local import DEFAULT_BATCH_SIZE

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
    ap.add_argument("--table", choices=("levers",), default=None,
                    help="levers: per corpus the rows torch/no class names/1 draft, + ct2, + class names, + 2 drafts")
    ap.add_argument("--variant", action="append", type=Variant.parse, default=None, metavar="ENGINE,NAMES,DRAFTS",
                    help="one row's variant, e.g. ct2,names,2 (repeatable)")
    ap.add_argument("--class-names", choices=("both", "without", "with"), default="with",
                    help="without --table/--variant: prompt variants without and/or with the (public) class name")
    ap.add_argument("--engine", choices=("ct2", "torch"), default="ct2", help="without --table/--variant")
    ap.add_argument("--drafts", type=int, default=1, help="without --table/--variant: drafts per sequence")
    ap.add_argument("--out", default="runs/end_to_end", help="working folder (resumable)")
    ap.add_argument("--readme", default=None, metavar="FILE", help="also replace the table between the end_to_end markers in this file (docs/BENCHMARKS.md)")
    ap.add_argument("--stored-only", action="store_true",
                    help="run nothing: write the table from the finished rows under --out (the missing ones named "
                         "below it), e.g. while the slow rows still run in other processes")
    ap.add_argument("--re-evaluate", action="store_true",
                    help="evaluate the finished rows' stored documents again (nothing is generated again; their "
                         "generation times are kept), e.g. after the evaluation gained a figure")
    ap.add_argument("--generations", type=int, default=1, metavar="N",
                    help="write each variant's documents N times, independently, from the same DP draw (one row "
                         "each, the first in the variant's own folder) and say the spread under the table: the "
                         "run-to-run noise a lever's effect must exceed")
    args = ap.parse_args(argv)
    if args.generations < 1:
        ap.error("--generations must be at least 1")
    if args.stored_only and args.re_evaluate:
        ap.error("--stored-only runs nothing; --re-evaluate evaluates the stored rows again: choose one")
    specs = args.corpus or ["demo:bbc"]
    args.variants = _variants(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ.setdefault("DPKPS_LEDGER_DIR", str(out / "ledgers"))  # public demo data: a ledger of its own
    device = resolve_device(args.device)
    backends: dict[str, Any] = {}
    rows: list[Row] = []
    missing: list[str] = []
    for spec in specs:
        if args.stored_only:
            found, lacking = stored_rows(spec, args)
            rows.extend(found)
            missing.extend(lacking)
        else:
            rows.extend(run_corpus(spec, args, backends))
    for b in backends.values():
        b.close()
    import torch

    hardware = (f"{platform.machine()}, {os.cpu_count()} CPU core(s), {describe_device(device)}, torch "
                f"{torch.__version__}, {args.threads} model thread(s)")
    command = " ".join(["python -m benchmarks.end_to_end", *(f"--corpus {s}" for s in specs),
                        f"--per-class {args.per_class}", f"--max-tokens {args.max_tokens}",
                        *(["--table levers"] if args.table else [f"--variant {v.spelled}" for v in args.variants]),
                        *([f"--generations {args.generations}"] if args.generations > 1 else [])])
    header = (f"`{command}` ({_dt.date.today().isoformat()}): ε_voc + ε_kde = {args.eps_voc:g} + {args.eps_kde:g}, "
              f"{args.per_class} documents per class written by the offline SmolLM2-135M-Instruct (≤ "
              f"{args.max_tokens} tokens, temperature 0.7, batches of {args.batch_size} prompts) from ONE DP sampling "
              f"run per corpus; logistic regression on all-MiniLM-L6-v2 embeddings, mean ± sd over {args.seeds} "
              f"seed(s), tested on the held-out real documents; precision / recall: the synthetic against the real "
              f"test documents on the same embeddings (k = 3 nearest neighbours, equal sizes). Generation and "
              f"evaluation: wall time of each row (rows of one corpus share one process, which embeds each real document "
              f"once; corpora may run as parallel processes). Rows' total {_minutes(sum(r.generate_s + r.evaluate_s for r in rows))} on {hardware}.")
    block = format_table(rows, header=header)
    if missing:
        block += ("\n\nNot finished yet (the same command finishes them; written documents are kept): "
                  + "; ".join(missing) + ".")
    (out / "END_TO_END.md").write_text(block + "\n", encoding="utf-8")
    print(block)
    if args.readme:
        path = Path(args.readme)
        path.write_text(replace_block(path.read_text(encoding="utf-8"), block), encoding="utf-8")
        print(f"updated {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
