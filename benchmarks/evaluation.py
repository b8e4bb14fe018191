"""How long the local evaluation of a run takes: N synthetic documents + the real test and baseline documents.

    python -m benchmarks.evaluation                        # demo:bbc, 500 documents, 3 seeds (~3 min on 2 cores)
    python -m benchmarks.evaluation --documents 100 --seeds 1   # quick look

One DP sampling run of the public demo corpus (not timed; a ledger of its own in a temporary folder), then
``--documents`` stand-in synthetic documents are written to its ``documents.jsonl``: training documents of the
sequence's class cut to 40–160 words, the length range of what the offline model writes (only the time is
measured here, so their accuracy means nothing and is not printed). Then :func:`dpkps_core.evaluation.evaluate_run`
runs exactly as ``python -m dpkps_core evaluate`` would: every real test document and every document of the
real-document baseline is embedded once per evaluation, whatever the number of seeds. The last lines are::

    real_documents_embedded: …      (test documents + the union of the baseline's per-seed samples)
    synthetic_documents_embedded: …
    documents_per_second: …
    evaluation_seconds: X           (target ≤ 120 for 500 + ~1,700 documents on 2 CPU cores)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def stand_in_documents(run_dir: Path, n: int, *, seed: int = 0) -> list[dict[str, object]]:
    """``n`` documents for the run's sequences (in order): a training document of the same class, cut to
    40–160 words (deterministic in ``seed``)."""
    import numpy as np

    from dpkps_core.evaluation import load_run

    run = load_run(run_dir)
    rng = np.random.default_rng(seed)
    by_class: dict[str, list[str]] = {}
    for text, label in zip(run.train.texts, run.train.labels):
        by_class.setdefault(label, []).append(text)
    rows = []
    for seq in run.sequences[:n]:
        pool = by_class[seq["label"]]
        words = pool[int(rng.integers(len(pool)))].split()
        rows.append({"id": seq["id"], "label": seq["label"], "keyphrases": list(seq["keyphrases"]),
                     "text": " ".join(words[: int(rng.integers(40, 161))]), "model": "stand-in (benchmark)"})
    return rows


def baseline_union(run_dir: Path, docs: list[dict[str, object]], *, seeds: range) -> set[int]:
    """The real training documents the baseline embeds: the union of its per-seed samples (each embedded once)."""
    from dpkps_core.evaluation import load_run
    from dpkps_core.evaluation.classifiers import matched_real_sample

    labels = [str(d["label"]) for d in docs]
    per_class = {c: labels.count(c) for c in set(labels)}
    train_labels = load_run(run_dir).train.labels
    return set().union(*(matched_real_sample(train_labels, per_class, seed=s) for s in seeds))


def main(argv: list[str] | None = None) -> int:
    from dpkps_core.cli import main as cli
    from dpkps_core.device import DEVICE_CHOICES, describe_device, resolve_device
    from dpkps_core.evaluation import evaluate_run
    from dpkps_core.records.runfolder import RunFolder, write_jsonl

    ap = argparse.ArgumentParser(prog="python -m benchmarks.evaluation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default="demo:bbc", help="a demo corpus (default %(default)s)")
    ap.add_argument("--documents", type=int, default=500, help="stand-in synthetic documents (default %(default)s)")
    ap.add_argument("--seeds", type=int, default=3, help="classifier / baseline-sample seeds (default %(default)s)")
    ap.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    args = ap.parse_args(argv)
    if args.documents < 1:
        ap.error("--documents must be at least 1")
    with tempfile.TemporaryDirectory(prefix="dpkps-bench-eval-") as tmp:
        os.environ["DPKPS_LEDGER_DIR"] = str(Path(tmp) / "ledgers")  # public demo data: a throw-away ledger
        run = Path(tmp) / "run"
        from dpkps_core.corpus import load_corpus_spec

        per_class = -(-args.documents // len(load_corpus_spec(args.corpus).classes))  # the declared public classes
        rc = cli(["sample", "--corpus", args.corpus, "--per-class", str(per_class), "--epsilon-cap", "1000",
                  "--out", str(run)])
        if rc != 0:
            print(f"sampling {args.corpus} failed (exit {rc})", file=sys.stderr)
            return rc
        docs = stand_in_documents(run, args.documents)
        write_jsonl(RunFolder(run).documents, docs)
        device = resolve_device(args.device)
        from dpkps_core.embeddings import get_embedder
        from dpkps_core.evaluation import load_run

        config = load_run(run).config
        embedder = get_embedder(config.embedding_model, device=device)
        embedder.encode(["warm-up"])  # model load is not the evaluation's cost
        t0 = time.perf_counter()
        result = evaluate_run(run, seeds=args.seeds, coral=False, embedder=embedder)
        seconds = time.perf_counter() - t0
        baseline = len(baseline_union(run, docs, seeds=range(args.seeds)))
    info = result.info
    real = info["n_test"] + baseline
    total = real + len(docs)
    import torch

    print(f"{args.corpus}: {len(docs)} stand-in synthetic documents, {info['n_test']} real test documents, "
          f"{baseline} real baseline documents, {args.seeds} seed(s); "
          f"{platform.machine()}, {os.cpu_count()} CPU core(s), {describe_device(device)}, torch "
          f"{torch.__version__} ({torch.get_num_threads()} thread(s))")
    print(f"timings_seconds: {info.get('timings_seconds')}")
    print(f"real_documents_embedded: {real}")
    print(f"synthetic_documents_embedded: {len(docs)}")
    print(f"documents_per_second: {total / seconds:.1f}")
    print(f"evaluation_seconds: {seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
