"""Generation speed of the offline model: N documents one at a time vs batched, in one run on one machine.

    python -m benchmarks.generation                    # N=16, batch 16, 96 tokens, 1 thread (~4 min on 2 cores)
    python -m benchmarks.generation --sweep 1,2,4,8,16 # tokens/s per batch size (how the default was chosen)
    python -m benchmarks.generation --engine-only      # only the CTranslate2-vs-torch comparison (~3 min)

Both timings go through the real runner (:func:`dpkps_core.llm.run_generation`: checkpointing, audit log,
progress), with the same prompts, sampling parameters and model instance, into throw-away run folders. Tokens
are the generated tokens of every document (up to and including its end-of-text token). The last lines are::

    serial_tokens_per_second: …
    batched_tokens_per_second: …
    batched_vs_serial_speedup: X
    engine_runner_tokens_per_second: …          (CTranslate2 through the runner: screen, retries, checkpoints)
    engine_estimate_vs_actual: …                (the runner's estimate before that run / its wall time)
    engine_tokens_per_second: …
    engine_torch_batched_tokens_per_second: …
    engine_speedup_median_of_rounds: …
    engine_cpu_time_speedup_vs_torch_batched: … (tokens per CPU-second: robust to other load on the machine)
    engine_speedup_vs_torch_batched: X
    gpu_tokens_per_second: Y        (only when torch sees CUDA; then also gpu_engine_tokens_per_second)

The engine comparison (:mod:`dpkps_core.llm.ct2`, CTranslate2 int8 against batched torch float32) gives both
engines the same chat-template prompts, batch, threads, token budget and sampling parameters; each engine writes
the batch in one batched call, and generated tokens (up to and including each row's end-of-text token) are
counted for both. The two run interleaved in one process for several rounds and the medians are reported, so
that other load on a shared machine slows both alike.
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


def _tokens_until_stop(rows: list[list[int]], stops: set[int]) -> int:
    """Generated tokens of each row up to and including its first end-of-text token (padding after it ignored)."""
    n = 0
    for row in rows:
        cut = next((i for i, t in enumerate(row) if t in stops), len(row))
        n += cut + (1 if cut < len(row) else 0)
    return n


def engine_comparison(backend: Any, engine: Any, sequences: list[dict[str, Any]], *, batch_size: int,
                      max_tokens: int, temperature: float, rounds: int) -> dict[str, float]:
    """CTranslate2 vs batched torch, interleaved in one process for ``rounds`` rounds: median tokens/s of each.

    Both decode the same prompt token ids (chat template of the runner's prompts) in batches of ``batch_size``,
    with the same stop ids, token budget, temperature and top-p; both texts are detokenised the same way."""
    from dpkps_core.llm.local import chat_token_ids
    from dpkps_core.llm.prompts import PromptConfig, render_prompt

    model, tok = backend.model_and_tokenizer()
    cfg = PromptConfig(doc_type="a short news article")
    rows = [chat_token_ids(tok, render_prompt(s, cfg)) for s in sequences]
    stops = sorted(backend.stop_ids)
    stop_set = set(stops)
    batches = [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]

    def torch_round() -> tuple[int, float, float]:
        import torch

        n, t0, c0 = 0, time.perf_counter(), time.process_time()
        torch.set_num_threads(backend.threads)
        for b in batches:
            out = backend.torch_engine().decode_batch(b, stops=stops, max_tokens=max_tokens,
                                                      temperature=temperature, top_p=backend.top_p, timeout=600.0)
            n += _tokens_until_stop(out, stop_set)
            [tok.decode(r, skip_special_tokens=True) for r in out]
        return n, time.perf_counter() - t0, time.process_time() - c0

    def ct2_round() -> tuple[int, float, float]:
        n, t0, c0 = 0, time.perf_counter(), time.process_time()
        for b in batches:
            out = engine.decode_batch(b, stops=stops, max_tokens=max_tokens, temperature=temperature,
                                      top_p=backend.top_p)
            n += _tokens_until_stop(out, stop_set)
            [tok.decode(r, skip_special_tokens=True) for r in out]
        return n, time.perf_counter() - t0, time.process_time() - c0

    engine.decode_batch(batches[0][:2], stops=stops, max_tokens=8, temperature=temperature, top_p=backend.top_p)
    rates: dict[str, list[float]] = {"torch": [], "ct2": [], "torch_cpu": [], "ct2_cpu": []}
    for r in range(rounds):
        order = (torch_round, ct2_round) if r % 2 == 0 else (ct2_round, torch_round)
        for fn in order:
            n, sec, cpu = fn()
            name = "torch" if fn is torch_round else "ct2"
            rates[name].append(n / sec if sec > 0 else 0.0)
            rates[name + "_cpu"].append(n / cpu if cpu > 0 else 0.0)
            print(f"round {r + 1} {name:<5}: {n} tokens in {sec:.1f} s = {rates[name][-1]:.1f} tokens/s "
                  f"({cpu:.1f} s of CPU time)", flush=True)
    import statistics

    med = {k: statistics.median(v) for k, v in rates.items()}
    ratios = [c / t for c, t in zip(rates["ct2"], rates["torch"]) if t > 0]
    return {"torch_tokens_per_s": med["torch"], "ct2_tokens_per_s": med["ct2"],
            "speedup": med["ct2"] / med["torch"] if med["torch"] > 0 else float("nan"),
            "speedup_median_of_rounds": statistics.median(ratios) if ratios else float("nan"),
            "cpu_speedup": med["ct2_cpu"] / med["torch_cpu"] if med["torch_cpu"] > 0 else float("nan")}


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
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the engine comparison (medians)")
    ap.add_argument("--engine-only", action="store_true", help="only the CTranslate2-vs-torch comparison")
    ap.add_argument("--no-engine", action="store_true", help="skip the CTranslate2-vs-torch comparison")
    args = ap.parse_args(argv)
    if args.n < 1 or args.batch_size < 1 or args.max_tokens < 1 or args.rounds < 1:
        ap.error("--n, --batch-size, --max-tokens and --rounds must be positive")

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

    if not args.engine_only:
        _serial_vs_batched(cpu, seqs, args)
    if not args.no_engine:
        from dpkps_core.llm.ct2 import CT2Engine

        t0 = time.perf_counter()
        engine = CT2Engine.for_offline(device="cpu", threads=args.threads)
        engine.load()
        print(f"ct2 engine ({engine.compute_type}): ready in {time.perf_counter() - t0:.1f} s", flush=True)
        on_engine = OfflineBackend(threads=args.threads, device="cpu", engine=engine)
        est = _estimate(on_engine, seqs, args)  # from one calibration batch (the engine has written nothing yet)
        e = engine_comparison(cpu, engine, seqs, batch_size=args.batch_size, max_tokens=args.max_tokens,
                              temperature=args.temperature, rounds=args.rounds)
        run = timed_run(on_engine, seqs, batch_size=args.batch_size, max_tokens=args.max_tokens,
                        temperature=args.temperature)
        print(f"engine through the runner: {run['tokens']:.0f} tokens in {run['seconds']:.1f} s "
              f"(estimated {est:.1f} s before the run)", flush=True)
        print(f"engine_runner_tokens_per_second: {run['tokens_per_s']:.1f}")
        print(f"engine_estimate_vs_actual: {est / run['seconds']:.2f}")
        print(f"engine_tokens_per_second: {e['ct2_tokens_per_s']:.1f}")
        print(f"engine_torch_batched_tokens_per_second: {e['torch_tokens_per_s']:.1f}")
        print(f"engine_speedup_median_of_rounds: {e['speedup_median_of_rounds']:.2f}")
        # Tokens per second of the process's CPU time: what each engine costs, whatever else shares the machine.
        print(f"engine_cpu_time_speedup_vs_torch_batched: {e['cpu_speedup']:.2f}")
        print(f"engine_speedup_vs_torch_batched: {e['speedup']:.2f}")
    if cuda_available():
        gpu = OfflineBackend(threads=args.threads, device="cuda")
        gpu.load()
        timed_run(gpu, seqs[:2], batch_size=2, max_tokens=8, temperature=args.temperature)  # warm-up
        g = timed_run(gpu, bench_sequences(args.gpu_n), batch_size=args.gpu_n, max_tokens=args.max_tokens,
                      temperature=args.temperature)
        print(f"gpu: {describe_device('cuda')}, {args.gpu_n} documents in one batch, {g['tokens']:.0f} tokens in "
              f"{g['seconds']:.1f} s")
        print(f"gpu_tokens_per_second: {g['tokens_per_s']:.1f}")
        if not args.no_engine:
            from dpkps_core.llm.ct2 import CT2Engine
            from dpkps_core.llm.ct2_convert import ct2_device

            try:
                ct2_device("cuda")
            except Exception as exc:  # noqa: BLE001 - a report line, not a failure
                print(f"gpu engine: not run ({exc})")
            else:
                ge = CT2Engine.for_offline(device="cuda", threads=args.threads)
                ge.load()
                r = engine_comparison(gpu, ge, bench_sequences(args.gpu_n), batch_size=args.gpu_n,
                                      max_tokens=args.max_tokens, temperature=args.temperature, rounds=args.rounds)
                print(f"gpu_engine_tokens_per_second: {r['ct2_tokens_per_s']:.1f} ({ge.compute_type})")
                print(f"gpu_engine_speedup_vs_torch_batched: {r['speedup']:.2f}")
    return 0


def _estimate(backend: Any, seqs: list[dict[str, Any]], args: argparse.Namespace) -> float:
    """The runner's before-the-run estimate in seconds (llm/estimate.py) for these documents."""
    from dpkps_core.llm import PromptConfig, estimate_cost

    return estimate_cost(seqs, prompt_config=PromptConfig(doc_type="a short news article"), backend=backend,
                         max_tokens=args.max_tokens, batch_size=args.batch_size).seconds


def _serial_vs_batched(cpu: Any, seqs: list[dict[str, Any]], args: argparse.Namespace) -> None:
    """The runner's serial and batched timings (how the batch default was chosen)."""
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


if __name__ == "__main__":
    sys.exit(main())
