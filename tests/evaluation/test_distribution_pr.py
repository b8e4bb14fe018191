"""Precision/recall on embeddings (dpkps_core/evaluation/distribution.py, Kynkäänniemi et al. 2019): identical sets
score 1 and 1, far disjoint sets 0 and 0, a subset full precision and partial recall; k-NN radii and balanced
subsampling checked against a direct computation."""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.distribution import (DistributionScore, distribution_score, knn_radii,
                                                precision_recall)


def _cloud(n: int, d: int = 16, *, centre: float = 0.0, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)) + centre


def test_identical_sets_score_one_and_one() -> None:
    x = _cloud(200)
    assert precision_recall(x, x.copy()) == (1.0, 1.0)


def test_far_disjoint_sets_score_zero_and_zero() -> None:
    assert precision_recall(_cloud(150), _cloud(150, centre=100.0, seed=1)) == (0.0, 0.0)


def test_a_subset_has_full_precision_and_partial_recall() -> None:
    real = np.vstack([_cloud(100, seed=2), _cloud(100, centre=50.0, seed=3)])  # two far clusters
    subset = real[:100]                                                        # only the first one
    precision, recall = precision_recall(real, subset)
    assert precision == 1.0 and recall == pytest.approx(0.5, abs=0.02)


def test_two_samples_of_one_distribution_score_high_both_ways() -> None:
    p, r = precision_recall(_cloud(400, seed=4), _cloud(400, seed=5))
    assert 0.6 < p <= 1.0 and 0.6 < r <= 1.0
    narrow = _cloud(400, seed=6) * 0.2  # a synthetic set that collapsed to the centre: realistic, not diverse
    p2, r2 = precision_recall(_cloud(400, seed=4), narrow)
    assert p2 > 0.9 and r2 < 0.3


def test_knn_radii_match_a_direct_computation() -> None:
    x = _cloud(60, d=5, seed=7)
    d = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(d, np.inf)
    assert np.allclose(knn_radii(x, 3), np.sort(d, axis=1)[:, 2])


def test_distribution_score_balances_sizes_over_seeds() -> None:
    real, syn = _cloud(300, seed=8), _cloud(90, seed=9)
    score = distribution_score(real, syn, seeds=(0, 1, 2), embedding_model="m")
    assert isinstance(score, DistributionScore) and score.n_compared == 90 and len(score.precision) == 3
    assert len(set(score.precision)) > 1  # each seed another subsample of the real documents
    d = score.to_dict()
    assert d["n_real"] == 300 and d["n_synthetic"] == 90 and d["k"] == 3 and 0 <= d["recall"]["mean"] <= 1
    assert score.format().startswith("precision 0.")
    same = distribution_score(syn, syn, seeds=(0, 1))
    assert same.precision == (1.0, 1.0) and same.recall == (1.0, 1.0)


def test_refusals() -> None:
    with pytest.raises(ParameterError, match="more than k"):
        precision_recall(_cloud(3), _cloud(10))
    with pytest.raises(ParameterError, match="different dimensions"):
        precision_recall(_cloud(10, d=4), _cloud(10, d=5))
    with pytest.raises(ParameterError, match="NaN"):
        precision_recall(np.full((10, 3), np.nan), _cloud(10, d=3))
