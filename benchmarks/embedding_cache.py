"""Speed-up of a second embedding run of the same 2,000 public terms served from the on-disk cache.

    python -m benchmarks.embedding_cache [--terms 2000] [--model all-MiniLM-L6-v2]

Uses a fresh cache file in a temporary folder; ends with ``cache_speedup: X`` (target ≥ 50).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from dpkps_core.embeddings import DEFAULT_MODEL, EmbeddingCache, embed_terms, get_embedder
from dpkps_core.method.vocabulary import load_vocabulary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--terms", type=int, default=2000)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    args = ap.parse_args()
    terms = list(load_vocabulary("glove").terms[: args.terms])
    embedder = get_embedder(args.model)
    embedder.encode(["warm up"])
    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(Path(tmp) / "emb.sqlite")
        t = time.perf_counter()
        first = embed_terms(terms, embedder, cache=cache)
        t_first = time.perf_counter() - t
        t = time.perf_counter()
        second = embed_terms(terms, embedder, cache=cache)
        t_second = time.perf_counter() - t
    assert np.allclose(first, second)
    print(f"{len(terms)} GloVe terms, model {args.model}")
    print(f"first run (model):  {t_first:7.3f} s ({len(terms) / t_first:,.0f} terms/s)")
    print(f"second run (cache): {t_second:7.3f} s ({len(terms) / t_second:,.0f} terms/s)")
    print(f"cache_speedup: {t_first / t_second:.0f}")


if __name__ == "__main__":
    main()
