"""Speed of the iterative log-ensemble sampler against the bare matrix products it performs (docs/DESIGN.md §2.4).

    python -m benchmarks.sampler [--sequences 1000] [--length 10] [--vocab 1000] [--features 2000] [--dim 384]

Prints both times and ends with ``sampler_vs_gemm_ratio: X`` (target ≤ 2.0). The straightforward padded-vector
algorithm (``sampling.reference_extension_scores``) is timed on a few prefixes and extrapolated.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dpkps_core.dp.kde import build_rff_density
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.method.sampling import reference_extension_scores, sample_iterative


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sequences", type=int, default=1000)
    ap.add_argument("--length", type=int, default=10)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--features", type=int, default=2000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((args.vocab, args.dim)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    keyphrases = [list(rng.integers(0, args.vocab, size=args.length)) for _ in range(400)]
    labels = ["c"] * len(keyphrases)
    density = build_rff_density(keyphrases, labels, classes=("c",), embeddings=emb, kind="iterative-log", epsilon=5,
                                bandwidth=0.3, features=args.features, length=args.length,
                                context=ReleaseContext(noise=NoiseSource(seed=0)))
    terms = [f"t{i}" for i in range(args.vocab)]

    def run_sampler() -> None:
        sample_iterative(density, emb, terms=terms, per_class=args.sequences, rng=np.random.default_rng(1))

    b = args.sequences
    mats = {}
    for m, member in enumerate(density.members):
        mats[m] = member.features.omega

    left = rng.standard_normal((b, args.features)).astype(np.float32)
    prefix = rng.standard_normal((b, (args.length - 1) * args.dim)).astype(np.float32)

    def run_gemms() -> None:
        current = -1
        for step in range(1, args.length + 1):
            m = density.member_index_for_step(step)
            omega = mats[m]
            a = emb @ omega[:, (step - 1) * args.dim: step * args.dim].T  # A for the candidate block
            if m != current and step > 1:  # prefix projection for a new member
                _ = prefix[:, : (step - 1) * args.dim] @ omega[:, : (step - 1) * args.dim].T
            current = m
            _ = left @ a.T
            _ = left @ a.T

    run_sampler()  # warm-up
    t_sampler = _best(run_sampler, args.repeat)
    t_gemm = _best(run_gemms, args.repeat)
    t0 = time.perf_counter()
    for _ in range(3):
        reference_extension_scores(density, emb, [1, 2, 3, 4], 0)
    per_step = (time.perf_counter() - t0) / 3
    naive = per_step * args.sequences * args.length
    print(f"iterative log-ensemble sampler: {args.sequences} sequences, L={args.length}, |V~|={args.vocab}, "
          f"I={args.features}, d={args.dim}, float32")
    print(f"sampler time:            {t_sampler:8.3f} s")
    print(f"bare matrix products:    {t_gemm:8.3f} s")
    print(f"padded-vector algorithm: {naive:8.1f} s (extrapolated from {per_step:.3f} s per prefix step)")
    print(f"naive_vs_sampler_ratio: {naive / t_sampler:.0f}")
    print(f"sampler_vs_gemm_ratio: {t_sampler / t_gemm:.2f}")


if __name__ == "__main__":
    main()
