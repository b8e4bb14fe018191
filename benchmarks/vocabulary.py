"""Benchmark of vocabulary matching (docs/DESIGN.md §2.1): ``python -m benchmarks.vocabulary [--docs N] [--S S]``.

Builds a :class:`~dpkps_core.method.matching.TermMatcher` over the full cleaned GloVe vocabulary, then times
first-S-distinct extraction + the histogram over all of V for N documents (the BBC demo texts cycled to N),
and — when ``dpkps_core.dp.vocabulary.privatize_vocabulary`` is available — the noisy histogram / top-N
selection too. Prints timings only (never document text); the last line is ``docs_per_second: X``.
Target: >= 2,000 documents/s for matching + counting on a 2-core machine; matcher build ~1 s for 400k terms.
"""

from __future__ import annotations

import argparse
import itertools
import time

from dpkps_core.corpus import load_demo_corpus
from dpkps_core.method.matching import TermMatcher
from dpkps_core.method.vocabulary import load_vocabulary


def main(argv: list[str] | None = None) -> float:
    """Run the benchmark and return matching + counting throughput in documents per second."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000, help="number of documents (BBC texts cycled)")
    parser.add_argument("--S", type=int, default=10, help="first S distinct terms per document")
    parser.add_argument("--vocabulary", default="glove", help="vocabulary spec (glove, wordfreq, medical, path)")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    vocab = load_vocabulary(args.vocabulary)
    t_load = time.perf_counter() - t0
    print(f"vocabulary: {vocab.name} ({len(vocab):,} terms, {vocab.multiword_count:,} multi-word)")
    print(f"vocabulary_load_seconds: {t_load:.3f}")

    t0 = time.perf_counter()
    matcher = TermMatcher(vocab.terms)
    t_build = time.perf_counter() - t0
    print(f"matcher_build_seconds: {t_build:.3f}")

    corpus = load_demo_corpus("bbc")
    texts = list(itertools.islice(itertools.cycle(corpus.texts), args.docs))
    mean_chars = sum(len(t) for t in texts) / max(len(texts), 1)
    print(f"documents: {len(texts):,} (BBC demo cycled, mean {mean_chars:,.0f} characters)")

    t0 = time.perf_counter()
    counts = matcher.counts_first_distinct(texts, args.S)
    t_match = time.perf_counter() - t0
    print(f"match_and_count_seconds: {t_match:.3f} (S={args.S}, {int(counts.sum()):,} term-document pairs)")

    t0 = time.perf_counter()
    occ = matcher.occurrences(texts)
    t_occ = time.perf_counter() - t0
    print(f"all_occurrences_seconds: {t_occ:.3f} ({sum(map(len, occ)):,} matches)")

    try:
        from dpkps_core.dp.release import ReleaseContext
        from dpkps_core.dp.rng import NoiseSource
        from dpkps_core.dp.vocabulary import privatize_vocabulary
    except ImportError:
        print("privatize_vocabulary: not available, skipped")
    else:
        t0 = time.perf_counter()
        try:
            private = privatize_vocabulary(
                counts,
                matcher.terms,
                epsilon=1.0,
                terms_per_doc=args.S,
                size=1000,
                vocabulary_name=vocab.name,
                context=ReleaseContext(noise=NoiseSource(seed=0)),
            )
        except TypeError as exc:  # signature changed under us: report, do not fail the benchmark
            print(f"privatize_vocabulary: skipped ({type(exc).__name__})")
        else:
            t_priv = time.perf_counter() - t0
            size = len(getattr(private, "terms", ()) or ())
            print(f"privatize_vocabulary_seconds: {t_priv:.3f} (noisy histogram over {len(counts):,} terms, |V~|={size})")

    docs_per_second = len(texts) / t_match if t_match > 0 else float("inf")
    print(f"docs_per_second: {docs_per_second:.0f}")
    return docs_per_second


if __name__ == "__main__":
    main()
