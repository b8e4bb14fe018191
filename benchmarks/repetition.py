"""Repetition control of the offline model, measured: how the default ``no_repeat_ngram`` / ``repetition_penalty``
were chosen (dpkps_core/llm/repetition.py; docs/BENCHMARKS.md "Repetition control").

    python -m benchmarks.repetition                              # the grid {0,3,4} × {1.0,1.1,1.2}, one seed
    python -m benchmarks.repetition --grid 0:1.0,3:1.0 --seeds 1,2
    python -m benchmarks.repetition --engine torch --sequences 16 --grid 0:1.0,4:1.1   # the torch engine

The SAME 48 BBC DP keyphrase sequences for every cell: demo:bbc sampled once with the app's default settings and a
seeded DP run (``sample --seed``), ordered round-robin over classes as page 6 orders them, the first 48 kept. Each
is rendered with the app's default prompt (its document type for the demo, class names in the prompt) and written
by the offline model's CTranslate2 engine with the app's defaults (1 thread, batch 16, 200 tokens, temperature
0.7, top-p 0.95) and the cell's repetition setting; every cell decodes with the same sampling seeds, so that the
setting is the only difference. Per cell, one ``name: value`` block:

- ``refused``: replies the non-document screen refuses (dpkps_core/llm/quality.py: loops, lists, requests);
- ``at_token_limit``: replies that ran to the token budget without an end-of-text token (what holds a batch);
- ``coverage_half``: replies that use at least half of their sequence's distinct keyphrases (matched as the
  draft selection matches them, dpkps_core/llm/selection.py), over all replies and over the accepted ones;
  ``coverage_third``: at least a third; ``keyphrase_share``: the mean share of its keyphrases a reply uses;
- ``tokens_per_s`` and ``wall_s``: noisy on a shared machine (the refusal rate and the coverage are the figures
  that matter).

Public demo data only (its own ledger under ``--out``); nothing here is private.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_GRID = "0:1.0,3:1.0,4:1.0,0:1.1,3:1.1,4:1.1,0:1.2,3:1.2,4:1.2"
SEQUENCES = 48


def sequences(out: Path, *, seed: int, n: int) -> list[Any]:
    """The first ``n`` DP sequences of one seeded demo:bbc run with the app's defaults, round-robin over classes."""
    from benchmarks.app_path import app_defaults
    from dpkps_core.cli.main import main as cli
    from dpkps_core.llm import read_sequences
    from dpkps_core.method.sequences import KeyphraseSequence
    from studio.generation_steps import interleave_by_class

    run = out / f"bbc_seed{seed}"
    if not (run / "sequences.jsonl").is_file():
        os.environ.setdefault("DPKPS_LEDGER_DIR", str(out / "ledgers"))  # public demo data: a ledger of its own
        run.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        per_class = int(app_defaults()["per_class"])
        rc = cli(["sample", "--corpus", "demo:bbc", "--per-class", str(per_class), "--seed", str(seed),
                  "--epsilon-cap", "1000", "--out", str(run)])
        if rc != 0:
            raise SystemExit(f"sampling demo:bbc failed (exit {rc})")
    seqs = interleave_by_class([s.to_dict() for s in read_sequences(run / "sequences.jsonl")])
    if len(seqs) < n:
        raise SystemExit(f"only {len(seqs)} sequences in {run}")
    return [KeyphraseSequence.from_mapping(s) for s in seqs[:n]]


def cell(backend: Any, rows: list[list[int]], seqs: list[Any], *, ngram: int, penalty: float, seeds: list[int],
         batch: int, max_tokens: int, temperature: float) -> dict[str, float]:
    """Write every sequence once per seed with one repetition setting; the cell's figures."""
    from dpkps_core.llm.quality import clean_reply, document_problem
    from dpkps_core.llm.selection import SequenceClassifier

    tok, stops = backend._tokenizer_and_stops()
    stop_set = set(stops)
    clf = SequenceClassifier(seqs)
    engine = backend.engine if backend.engine is not None else backend.torch_engine()
    replies = refused = limit = half = half_ok = accepted = tokens = 0
    shares: list[float] = []
    t0 = time.perf_counter()
    for s in seeds:
        for b in range(0, len(rows), batch):
            out = engine.decode_batch(rows[b:b + batch], stops=stops, max_tokens=max_tokens, temperature=temperature,
                                      top_p=backend.top_p, seed=s * 1000 + b, no_repeat_ngram=ngram,
                                      repetition_penalty=penalty)
            for seq, ids in zip(seqs[b:b + batch], out):
                cut = next((i for i, t in enumerate(ids) if t in stop_set), None)
                tokens += len(ids)
                limit += cut is None
                text = clean_reply(tok.decode(ids if cut is None else ids[:cut], skip_special_tokens=True).strip())
                ok = document_problem(text) is None
                wanted = clf.indices(seq.keyphrases)
                used = len(wanted & set(clf.matches(text)))
                covers = bool(wanted) and 2 * used >= len(wanted)
                shares.append(used / len(wanted) if wanted else 0.0)
                replies += 1
                refused += not ok
                accepted += ok
                half += covers
                half_ok += covers and ok
    wall = time.perf_counter() - t0
    return {"replies": replies, "refused": refused, "at_token_limit": limit, "coverage_half": half,
            "coverage_half_accepted": half_ok, "accepted": accepted, "tokens": tokens, "wall_s": wall,
            "keyphrase_share": sum(shares) / max(1, len(shares)),
            "coverage_third": sum(x >= 1 / 3 for x in shares)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.repetition", description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default=DEFAULT_GRID, help="cells NGRAM:PENALTY, comma-separated")
    ap.add_argument("--seeds", default="1", help="sampling seeds of the decoding, comma-separated")
    ap.add_argument("--dp-seed", type=int, default=2024, help="seed of the DP sampling run (the app's demo seed)")
    ap.add_argument("--out", default="runs/repetition", help="working folder (the sampled sequences are reused)")
    ap.add_argument("--engine", choices=("ct2", "torch"), default="ct2",
                    help="the decoding engine (torch: the same setting through its logits processors)")
    ap.add_argument("--sequences", type=int, default=SEQUENCES, help=f"sequences (default {SEQUENCES})")
    args = ap.parse_args(argv)
    from dpkps_core.llm import PromptConfig, make_backend
    from dpkps_core.llm.local import chat_token_ids, default_threads
    from dpkps_core.llm.prompts import render_prompt
    from benchmarks.app_path import app_defaults

    d = app_defaults()
    seqs = sequences(Path(args.out), seed=args.dp_seed, n=args.sequences)
    backend = make_backend("offline", threads=default_threads(), device="cpu",
                           engine=args.engine)
    config = PromptConfig(doc_type=d["doc_type"] or d["doc_types"]["demo:bbc"], few_shot=tuple(d["few_shot"]),
                          include_label=bool(d["include_label"]))
    tok, _ = backend._tokenizer_and_stops()
    rows = [chat_token_ids(tok, render_prompt(s, config)) for s in seqs]
    seeds = [int(x) for x in args.seeds.split(",")]
    max_tokens, temperature, batch = int(d["max_tokens"]), float(d["llm_temperature"]), int(d["llm_batch_size"])
    print(f"sequences: {len(seqs)}; seeds {seeds}; batch {batch}; {max_tokens} tokens; temperature {temperature}; "
          f"engine {backend.describe().get('engine') or 'torch'}", flush=True)
    for spec in args.grid.split(","):
        ngram, penalty = int(spec.split(":")[0]), float(spec.split(":")[1])
        r = cell(backend, rows, seqs, ngram=ngram, penalty=penalty, seeds=seeds, batch=batch,
                 max_tokens=max_tokens, temperature=temperature)
        n = r["replies"]
        print(f"cell no_repeat_ngram={ngram} repetition_penalty={penalty}: refused {r['refused']}/{n} "
              f"({r['refused'] / n:.0%}); at_token_limit {r['at_token_limit']}; coverage_half {r['coverage_half']}/{n}"
              f" (accepted and covering {r['coverage_half_accepted']}/{n}); coverage_third {r['coverage_third']}/{n}; "
              f"keyphrase_share {r['keyphrase_share']:.3f}; tokens_per_s "
              f"{r['tokens'] / r['wall_s']:.1f}; wall_s {r['wall_s']:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
