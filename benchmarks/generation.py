"""Generation speed of the offline model: N documents one at a time vs batched, in one run on one machine.

    python -m benchmarks.generation                    # N=16, batch 16, 96 tokens, 1 thread (~4 min on 2 cores)
    python -m benchmarks.generation --sweep 1,2,4,8,16 # tokens/s per batch size (how the default was chosen)

Both timings go through the real runner (:func:`dpkps_core.llm.run_generation`: checkpointing, audit log,
progress), with the same prompts, sampling parameters and model instance, into throw-away run folders. Tokens
are the generated tokens of every document (up to and including its end-of-text token). The last lines are::

    serial_tokens_per_second: …
    batched_tokens_per_second: …
    batched_vs_serial_speedup: X
    gpu_tokens_per_second: Y        (only when torch sees CUDA)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_TOPICS = {
    "sport": ["football", "manager", "league", "goal", "season", "striker", "injury", "stadium"],
    "business": ["shares", "profits", "bank", "market", "investors", "quarter", "growth", "inflation"],
    "tech": ["software", "broadband", "mobile", "users", "security", "internet", "device", "games"],
    "politics": ["election", "minister", "labour", "government", "tax", "party", "vote", "parliament"],
    "entertainment": ["film", "music", "award", "band", "album", "actor", "festival", "show"],
}


def bench_sequences(n: int) -> list[dict[str, Any]]:
    """n keyphrase sequences over five news classes (public words; deterministic)."""
    labels = list(_TOPICS)
    out = []
    for i in range(n):
        label = labels[i % len(labels)]
        words = _TOPICS[label]
        k = i // len(labels)
        phrases = [words[(k + j) % len(words)] for j in range(5)]
        out.append({"id": f"bench-{i:05d}", "label": label, "keyphrases": phrases, "method": "independent"})
    return out


def timed_run(backend: Any, sequences: list[dict[str, Any]], *, batch_size: int, max_tokens: int,
              temperature: float) -> dict[str, float]:
    """Write the documents through the runner into a temporary folder; tokens, seconds, tokens/s."""
    from dpkps_core.llm import GenerationSettings, PromptConfig, run_generation

    settings = GenerationSettings(max_tokens=max_tokens, temperature=temperature, timeout=600.0, retries=1,
                                  batch_size=batch_size)
    tokens0 = backend.tokens_generated
    with tempfile.TemporaryDirectory(prefix="dpkps-bench-gen-") as tmp:
        t0 = time.perf_counter()
        summary = run_generation(sequences, backend=backend, prompt_config=PromptConfig(doc_type="a short news article"),
                                 run_dir=tmp, settings=settings)
        seconds = time.perf_counter() - t0
    tokens = backend.tokens_generated - tokens0
    if summary.written != len(sequences):
        print(f"warning: {summary.failed} document(s) failed", file=sys.stderr)
    return {"documents": float(summary.written), "tokens": float(tokens), "seconds": seconds,
            "tokens_per_s": tokens / seconds if seconds > 0 else 0.0}


def main(argv: list[str] | None = None) -> int:
    from dpkps_core.device import cuda_available, describe_device
    from dpkps_core.llm.local import DEFAULT_BATCH_SIZE, OfflineBackend

    ap = argparse.ArgumentParser(prog="python -m benchmarks.generation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16, help="documents per timing (serial and batched)")
    ap.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="batch size of the batched timing")
    ap.add_argument("--max-tokens", type=int, default=96, help="most tokens per document")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--threads", type=int, default=1, help="CPU threads for the model")
    ap.add_argument("--sweep", default=None, metavar="B1,B2,…",
                    help="instead: batched tokens/s for each batch size (N documents each; no serial timing)")
    ap.add_argument("--gpu-n", type=int, default=64, help="documents for the CUDA timing (when CUDA is present)")
    args = ap.parse_args(argv)
    if args.n < 1 or args.batch_size < 1 or args.max_tokens < 1:
        ap.error("--n, --batch-size and --max-tokens must be positive")

    import torch

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU core(s), torch {torch.__version__}, "
          f"threads {args.threads}; model SmolLM2-135M-Instruct; {args.n} documents, ≤{args.max_tokens} tokens each, "
          f"temperature {args.temperature}")
    cpu = OfflineBackend(threads=args.threads, device="cpu")
    t0 = time.perf_counter()
    cpu.load()
    print(f"model load: {time.perf_counter() - t0:.1f} s")
    seqs = bench_sequences(args.n)
    timed_run(cpu, seqs[:1], batch_size=1, max_tokens=8, temperature=args.temperature)  # warm-up

    if args.sweep:
        sizes = [int(x) for x in args.sweep.split(",") if x.strip()]
        for b in sizes:
            r = timed_run(cpu, bench_sequences(max(args.n, b)), batch_size=b, max_tokens=args.max_tokens,
                          temperature=args.temperature)
            print(f"batch {b:>3}: {r['documents']:.0f} docs, {r['tokens']:.0f} tokens in {r['seconds']:.1f} s = "
                  f"{r['tokens_per_s']:.1f} tokens/s, {r['seconds'] / max(r['documents'], 1):.1f} s/doc", flush=True)
        return 0

    serial = timed_run(cpu, seqs, batch_size=1, max_tokens=args.max_tokens, temperature=args.temperature)
    print(f"serial (one at a time): {serial['tokens']:.0f} tokens in {serial['seconds']:.1f} s", flush=True)
    batched = timed_run(cpu, seqs, batch_size=args.batch_size, max_tokens=args.max_tokens,
                        temperature=args.temperature)
    print(f"batched (batch {args.batch_size}): {batched['tokens']:.0f} tokens in {batched['seconds']:.1f} s", flush=True)
    print(f"serial_tokens_per_second: {serial['tokens_per_s']:.1f}")
    print(f"batched_tokens_per_second: {batched['tokens_per_s']:.1f}")
    print(f"serial_seconds_per_document: {serial['seconds'] / args.n:.2f}")
    print(f"batched_seconds_per_document: {batched['seconds'] / args.n:.2f}")
    # Documents per second is the figure a user waits on; token counts differ a little between sampled runs.
    speedup = serial["seconds"] / batched["seconds"] if batched["seconds"] > 0 else float("nan")
    print(f"batched_vs_serial_speedup: {speedup:.2f}")
    if cuda_available():
        gpu = OfflineBackend(threads=args.threads, device="cuda")
        gpu.load()
        timed_run(gpu, seqs[:2], batch_size=2, max_tokens=8, temperature=args.temperature)  # warm-up
        g = timed_run(gpu, bench_sequences(args.gpu_n), batch_size=args.gpu_n, max_tokens=args.max_tokens,
                      temperature=args.temperature)
        print(f"gpu: {describe_device('cuda')}, {args.gpu_n} documents in one batch, {g['tokens']:.0f} tokens in "
              f"{g['seconds']:.1f} s")
        print(f"gpu_tokens_per_second: {g['tokens_per_s']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
