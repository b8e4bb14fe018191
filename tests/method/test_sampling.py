"""Sequence sampling follows the class-conditional DP densities (docs/DESIGN.md §2.4)."""

import numpy as np
import pytest

from dpkps_core.dp.histogram import build_smoothed_histogram_density
from dpkps_core.dp.kde import build_rff_density
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.method.sampling import draw_rows, sample_independent, sample_iterative, weights_from_scores

TERMS = [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
RNG = np.random.default_rng(0)
# Topic structure as a real embedding model has it: a-terms cluster around one direction, b-terms another.
_CENTRES = HashingEmbedder(dim=32).encode(["topic a", "topic b"])
EMB = np.repeat(_CENTRES, 10, axis=0) + 0.35 * RNG.standard_normal((20, 32)) / np.sqrt(32)
EMB = (EMB / np.linalg.norm(EMB, axis=1, keepdims=True)).astype(np.float32)
# 300 documents per class; class "A" uses only a-terms, class "B" only b-terms.
KP = [list(RNG.integers(0, 10, size=8)) for _ in range(300)] + [list(RNG.integers(10, 20, size=8)) for _ in range(300)]
LABELS = ["A"] * 300 + ["B"] * 300
CLASSES = ("A", "B")


def _share_own(outcome):
    own = {"A": "a", "B": "b"}
    hits = [kp.startswith(own[s.label]) for s in outcome.sequences for kp in s.keyphrases]
    return float(np.mean(hits))


@pytest.mark.parametrize("density", ["histogram", "rff"])
def test_independent_follows_classes_at_large_eps_and_is_near_uniform_at_tiny_eps(density):
    def run(eps, seed=1):
        noise = NoiseSource(seed=seed)
        if density == "histogram":
            d = build_smoothed_histogram_density(KP, LABELS, classes=CLASSES, embeddings=EMB, epsilon=eps,
                                                 bandwidth=0.3, context=ReleaseContext(noise=noise))
            scores = d.scores()
        else:
            d = build_rff_density(KP, LABELS, classes=CLASSES, embeddings=EMB, kind="independent", epsilon=eps,
                                  bandwidth=0.5, features=500, length=8, context=ReleaseContext(noise=noise))
            scores = d.single_term_scores(EMB)
        return sample_independent(scores, classes=CLASSES, terms=TERMS, per_class=200, length=8, rng=noise.child())

    assert _share_own(run(10.0)) > 0.9
    # tiny ε: the noise decides, so over noise draws the own-class share is ≈ 1/2 (classes indistinguishable)
    assert abs(np.mean([_share_own(run(1e-4, seed)) for seed in range(12)]) - 0.5) < 0.08


def test_iterative_log_follows_classes():
    noise = NoiseSource(seed=2)
    d = build_rff_density(KP, LABELS, classes=CLASSES, embeddings=EMB, kind="iterative-log", epsilon=10,
                          bandwidth=0.6, features=600, length=6, context=ReleaseContext(noise=noise))
    out = sample_iterative(d, EMB, terms=TERMS, per_class=100, rng=noise.child())
    assert len(out.sequences) == 200 and all(len(s.keyphrases) == 6 for s in out.sequences)
    assert _share_own(out) > 0.8
    assert out.sequences[0].id == "seq-000001" and out.sequences[0].method == "iterative-log"


def test_nonpositive_scores_fall_back_to_uniform_and_are_counted():
    probs, empty = weights_from_scores(np.array([[-1.0, -2.0, 0.0], [0.0, 3.0, 1.0]]), 1.0)
    assert empty.tolist() == [True, False]
    assert np.allclose(probs[0], 1 / 3) and np.allclose(probs[1], [0, 0.75, 0.25])
    out = sample_independent(np.array([[-1.0, -1.0], [1.0, 0.0]]), classes=("p", "q"), terms=["u", "v"],
                             per_class=5, length=2, rng=np.random.default_rng(0))
    assert out.uniform_fallbacks == 10


def test_temperature_zero_is_argmax_and_high_temperature_flattens():
    probs, _ = weights_from_scores(np.array([[1.0, 3.0, 2.0]]), 0)
    assert probs.tolist() == [[0.0, 1.0, 0.0]]
    flat, _ = weights_from_scores(np.array([[1.0, 3.0, 2.0]]), 100.0)
    assert flat.max() - flat.min() < 0.02


def test_draw_rows_follows_probabilities():
    p = np.tile([0.1, 0.6, 0.3], (100_000, 1))
    draws = draw_rows(p, np.random.default_rng(0))
    assert np.bincount(draws, minlength=3) / 100_000 == pytest.approx([0.1, 0.6, 0.3], abs=0.01)
