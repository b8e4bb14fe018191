"""Cost of vetted noise (docs/PRIVACY.md): ``python -m benchmarks.noise [--repeats R]``.

Times :class:`~dpkps_core.dp.rng.NoiseSource` releases with OpenDP's samplers (the default) against NumPy's (the
explicit fast option) at the default parameters:

- ``vocabulary_50k``: the integer vocabulary histogram over the 50,000-term default vocabulary (discrete
  Laplace, scale S/ε_voc = 10/5);
- ``vocabulary_400k``: the same over the full 400k-term GloVe vocabulary;
- ``histogram_5x1000``: a 5-class × |Ṽ| = 1,000 smoothed keyphrase histogram (float Laplace, scale 1/ε_kde);
- ``rff_5x2000``: 5 classes × I = 2,000 RFF feature sums (float Laplace, scale √2·I/ε_kde);
- ``votes_5x100``: AugPE vote histograms, 5 classes × 100 synthetic texts (Gaussian, σ = 10).

The statistics are synthetic (Zipf-like counts, uniform sums): only their sizes matter. Prints one
``name_sampler_seconds: X`` line per case (median of ``--repeats`` runs); the last line is
``opendp_vocabulary_50k_seconds: X`` (target: well under 1–2 s on a 2-core machine).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Callable

import numpy as np

from dpkps_core.dp.rng import NoiseSource

EPS_VOC, EPS_KDE, S, FEATURES = 5.0, 5.0, 10, 2000


def _cases(rng: np.random.Generator) -> list[tuple[str, Callable[[NoiseSource], np.ndarray]]]:
    def counts(n: int) -> np.ndarray:  # Zipf-like document counts, most terms 0
        return np.floor(2_000 / np.arange(1, n + 1) ** 1.1).astype(np.int64)

    c50, c400 = counts(50_000), counts(400_000)
    hist = rng.random((5, 1000)) * 3
    sums = rng.uniform(-math.sqrt(2), math.sqrt(2), (5, FEATURES)) * 100
    votes = rng.integers(0, 20, (5, 100))
    return [
        ("vocabulary_50k", lambda n: n.add_laplace(c50, scale=S / EPS_VOC, integer_valued=True)),
        ("vocabulary_400k", lambda n: n.add_laplace(c400, scale=S / EPS_VOC, integer_valued=True)),
        ("histogram_5x1000", lambda n: n.add_laplace(hist, scale=1 / EPS_KDE)),
        ("rff_5x2000", lambda n: n.add_laplace(sums, scale=math.sqrt(2) * FEATURES / EPS_KDE)),
        ("votes_5x100", lambda n: np.stack([n.add_gaussian(v, sigma=10.0) for v in votes])),
    ]


def _time(fn: Callable[[NoiseSource], np.ndarray], sampler: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        noise = NoiseSource(sampler=sampler)
        t0 = time.perf_counter()
        fn(noise)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> float:
    """Run the benchmark; return OpenDP's seconds for the 50k-term vocabulary histogram."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; the median is printed")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be ≥ 1")

    NoiseSource().laplace(1.0, 1)  # load OpenDP's library once, outside the timings
    results: dict[str, float] = {}
    for name, fn in _cases(np.random.default_rng(0)):
        for sampler in ("opendp", "numpy"):
            results[f"{name}_{sampler}"] = t = _time(fn, sampler, args.repeats)
            print(f"{name}_{sampler}_seconds: {t:.4f}")
        print(f"{name}_opendp_vs_numpy: {results[f'{name}_opendp'] / max(results[f'{name}_numpy'], 1e-9):,.0f}x")
    out = results["vocabulary_50k_opendp"]
    print(f"opendp_vocabulary_50k_seconds: {out:.3f}")
    return out


if __name__ == "__main__":
    main()
