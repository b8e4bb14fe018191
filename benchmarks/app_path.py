"""The app's default path, timed: the demo BBC corpus sampled with the default settings, then the offline model writes
``--documents`` documents (default 100) with the app's default engine, max tokens, batch size, drafts and retries —
through the same core functions the app calls — and the estimate the app shows before the run is compared with
the wall time the run then takes.

    python -m benchmarks.app_path                  # 100 documents (issue 22's must-show: under 3 minutes on 2 cores)
    python -m benchmarks.app_path --documents 10   # a smoke run

Prints, one ``name: value`` a line: the estimate shown before the run (and the seconds spent measuring it: one
calibration batch of public prompts through the selected engine, llm/estimate.py), the run's wall time, their
ratio, the documents written and failed, the replies the non-document screen refused, and the engine's tokens/s.

The app's steps, mirrored here without Streamlit: page 5 samples ``per_class`` sequences per class (the CLI's
``sample`` runs the same pipeline functions, dpkps_core/method/pipeline.py); page 6 orders them round-robin over classes
(``studio.generation_steps.interleave_by_class``), builds the offline backend as ``studio.resources`` does (threads
from ``llm.local.default_threads``: ``$DPKPS_LLM_THREADS``, else the usable CPUs up to 2; the default device), its generation settings as
``studio.generation_steps.generation_settings`` does for a local backend (timeout 120 s, 2 retries, one request
at a time), shows ``estimate_cost`` and, on "Write documents", loads the model and calls ``run_generation``. The
model is loaded before the estimate, as the app's warm-up does at start. Everything lives under ``--out`` with a
ledger of its own (public demo data); the sampled sequences are reused, the documents written afresh each time.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

#: What the app's generation settings set for a local backend (studio/generation_steps.py, generation_settings).
LOCAL_TIMEOUT_S = 120.0
LOCAL_RETRIES = 2
#: The must-show: 100 BBC documents in under 3 minutes on 2 cores, the estimate within 30 % of the actual time.
TARGET_SECONDS_PER_100 = 180.0
TARGET_ESTIMATE_ERROR = 0.30
_SAMPLED = ("sequences.jsonl", "run_config.json", "privacy_report.json", "private_vocabulary.json", "split.json")


def app_defaults() -> dict[str, Any]:
    """The app's default settings and its document type per demo corpus (studio/)."""
    try:
        from studio.defaults import DOC_TYPE_FOR_DEMO, default_settings
    except ImportError:  # the settings' older home
        from studio.session import DOC_TYPE_FOR_DEMO, default_settings  # type: ignore[attr-defined,no-redef]
    return {**default_settings(), "doc_types": dict(DOC_TYPE_FOR_DEMO)}


def sample(spec: str, per_class: int, run: Path) -> float:
    """Page 5: DP sampling with the default settings (reused when the run folder has its sequences)."""
    from dpkps_core.cli.main import main as cli

    if (run / "sequences.jsonl").is_file():
        return 0.0
    run.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    t0 = time.perf_counter()
    rc = cli(["sample", "--corpus", spec, "--per-class", str(per_class), "--epsilon-cap", "1000", "--out", str(run)])
    if rc != 0:
        raise SystemExit(f"sampling {spec} failed (exit {rc})")
    return time.perf_counter() - t0


def fresh_folder(sampled: Path, folder: Path) -> Path:
    """A run folder with the sampled files and no documents yet (the run is timed from scratch)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, mode=0o700)
    for name in _SAMPLED:
        if (sampled / name).is_file():
            shutil.copy2(sampled / name, folder / name)
    return folder


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Sample, estimate, write; the figures of the must-show."""
    from dpkps_core.device import resolve_device
    from dpkps_core.llm import GenerationSettings, PromptConfig, estimate_cost, make_backend, read_sequences, run_generation
    from dpkps_core.llm.local import default_threads
    from dpkps_core.llm.speed import measured
    from studio.generation_steps import interleave_by_class

    d = app_defaults()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ.setdefault("DPKPS_LEDGER_DIR", str(out / "ledgers"))  # public demo data: a ledger of its own
    spec = args.corpus
    sampled = out / spec.replace(":", "_") / "sampled"
    sample_s = sample(spec, max(int(d["per_class"]), math.ceil(args.documents / args.classes)), sampled)
    seqs = interleave_by_class([s.to_dict() for s in read_sequences(sampled / "sequences.jsonl")])
    if len(seqs) < args.documents:
        raise SystemExit(f"only {len(seqs)} sequences in {sampled}; delete it to sample again")
    job = seqs[: args.documents]

    t0 = time.perf_counter()
    threads = default_threads()
    backend = make_backend("offline", threads=threads, device=resolve_device(d["device"]))
    backend.load()  # the app's warm-up loads the offline model at start
    load_s = time.perf_counter() - t0

    config = PromptConfig(doc_type=d["doc_type"] or d["doc_types"].get(spec, "a document"),
                          few_shot=tuple(d["few_shot"]), include_label=bool(d["include_label"]))
    settings = GenerationSettings(max_tokens=int(d["max_tokens"]), temperature=float(d["llm_temperature"]),
                                  timeout=LOCAL_TIMEOUT_S, retries=LOCAL_RETRIES, concurrency=1, limit=args.documents,
                                  batch_size=int(d["llm_batch_size"]), drafts=int(d["llm_drafts"]))
    t0 = time.perf_counter()
    est = estimate_cost([q for q in job for _ in range(settings.drafts)], prompt_config=config, backend=backend,
                        max_tokens=settings.max_tokens, concurrency=settings.concurrency,
                        batch_size=settings.batch_size, retries=settings.retries, temperature=settings.temperature,
                        drafts=settings.drafts, timeout=settings.timeout, repetition=settings.repetition_kwargs())
    estimate_s = time.perf_counter() - t0
    print(f"estimate shown before the run: {est.summary()}", flush=True)

    folder = fresh_folder(sampled, out / spec.replace(":", "_") / "documents")
    record = measured(backend, settings.max_tokens, settings.temperature)
    before = (record.replies, record.rejected, int(getattr(backend, "tokens_generated", 0)))
    last = [0.0]

    def progress(p: Any) -> None:
        if not args.quiet and (time.monotonic() - last[0] > 15 or p.done + p.failed == p.total):
            last[0] = time.monotonic()
            eta = f", ETA {p.eta_s:.0f} s" if p.eta_s is not None else ""
            print(f"  {p.done}/{p.total} written, {p.failed} failed{eta}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    summary = run_generation(seqs, backend=backend, prompt_config=config, run_dir=folder, settings=settings,
                             progress=progress)
    wall = time.perf_counter() - t0
    tokens = int(getattr(backend, "tokens_generated", 0)) - before[2]
    engine = backend.describe().get("engine") or {"engine": "torch"}
    backend.close()
    return {
        "corpus": spec, "documents": args.documents, "sample_s": sample_s, "load_s": load_s, "estimate_s": estimate_s,
        "measure_s": est.measure_seconds, "estimate": est.seconds, "attempts": est.attempts_per_document,
        "estimate_rejection": est.rejection_rate, "wall": wall, "written": summary.written, "failed": summary.failed,
        "replies": record.replies - before[0], "refused": record.rejected - before[1], "tokens": tokens,
        "engine": " ".join(str(engine[k]) for k in ("engine", "compute_type", "device") if engine.get(k)),
        "threads": threads,
    }


def report(r: dict[str, Any]) -> None:
    """``name: value`` lines (the lead's table reads them)."""
    ratio = r["estimate"] / r["wall"] if r["wall"] > 0 else float("nan")
    per_100 = r["wall"] * 100.0 / max(r["documents"], 1)
    lines = {
        "hardware": f"{platform.machine()}, {os.cpu_count()} CPU core(s) visible, {r['threads']} model thread(s), "
                    f"engine {r['engine']}",
        "documents_asked": r["documents"],
        "sampling_seconds": f"{r['sample_s']:.1f}" + (" (reused)" if r["sample_s"] == 0 else ""),
        "model_load_seconds": f"{r['load_s']:.1f}",
        "estimate_seconds": f"{r['estimate']:.1f}",
        "estimate_attempts_per_document": f"{r['attempts']:.2f}",
        "estimate_rejection_rate": "not measured" if r["estimate_rejection"] is None else f"{r['estimate_rejection']:.2f}",
        "estimate_computed_in_seconds": f"{r['estimate_s']:.1f} (calibration {r['measure_s']:.1f})",
        "actual_wall_seconds": f"{r['wall']:.1f}",
        "estimate_over_actual": f"{ratio:.2f}",
        "within_30_percent": "yes" if abs(ratio - 1.0) <= TARGET_ESTIMATE_ERROR else "no",
        "documents_written": r["written"],
        "documents_failed": r["failed"],
        "replies_refused": f"{r['refused']} of {r['replies']}" + (f" ({r['refused'] / r['replies']:.0%})"
                                                                  if r["replies"] else ""),
        "tokens_per_second": f"{r['tokens'] / r['wall']:.1f}" if r["wall"] > 0 else "nan",
        "seconds_per_100_documents": f"{per_100:.1f}",
        "under_3_minutes_per_100": "yes" if per_100 < TARGET_SECONDS_PER_100 else "no",
    }
    for k, v in lines.items():
        print(f"{k}: {v}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.app_path", description=__doc__.split("\n\n")[0])
    ap.add_argument("--documents", type=int, default=100, help="documents to write (default 100)")
    ap.add_argument("--corpus", default="demo:bbc", help="demo corpus (default demo:bbc)")
    ap.add_argument("--classes", type=int, default=5, help="classes of the corpus (sequences per class to sample)")
    ap.add_argument("--out", default="runs/app_path", help="working folder (sampled sequences are reused)")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    args = ap.parse_args(argv)
    if args.documents < 1 or args.classes < 1:
        ap.error("--documents and --classes must be positive")
    report(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
