"""Distribution-level score of synthetic vs real held-out documents on embeddings: improved precision and recall
(Kynkäänniemi et al., "Improved Precision and Recall Metric for Assessing Generative Models", NeurIPS 2019), as the
private-evolution literature reports beside downstream accuracy (docs/DESIGN.md §5). PRIVATE: it reads real documents.

Each set's *manifold* is the union of balls around its points, each ball reaching the point's k-th nearest
neighbour within its own set. **Precision** = share of synthetic points inside the real manifold (are the synthetic
documents realistic?); **recall** = share of real points inside the synthetic manifold (do they cover the real
variety?). Both lie in [0, 1]; the k-NN radii depend on the sample size, so the two sets are compared at equal size
(the larger one subsampled, once per seed). Implemented in numpy: squared distances by one matrix product per block
of rows (‖a‖² + ‖b‖² − 2a·b), radii by ``np.partition``; no Python loop over points.

MAUVE (Pillutla et al. 2021, package ``mauve-text``) is not used: it quantises both sets with k-means into n/10
buckets, which at the few hundred documents of a run here is unstable, and it brings a native dependency (faiss).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.errors import ParameterError

#: k of the k-NN radii (Kynkäänniemi et al. 2019 use k = 3).
DEFAULT_K = 3
#: Rows of one block of the distance matrix (bounds memory at BLOCK × n floats).
BLOCK = 2048


def _as_matrix(x: Any, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0:
        raise ParameterError(f"The {name} embeddings must be a non-empty 2-D array (documents × dimensions).")
    if not np.all(np.isfinite(arr)):
        raise ParameterError(f"The {name} embeddings hold NaN or infinite values.")
    return arr


def _sq_norms(x: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", x, x)


def _sq_dists(a: np.ndarray, b: np.ndarray, a_norms: np.ndarray, b_norms: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``a`` and ``b`` (clipped at 0 against rounding)."""
    d = a_norms[:, None] + b_norms[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d, 0.0, out=d)


def knn_radii(x: np.ndarray, k: int = DEFAULT_K) -> np.ndarray:
    """Squared distance from each row of ``x`` to its k-th nearest OTHER row (its manifold ball's radius²)."""
    x = _as_matrix(x, "input")
    if not isinstance(k, int) or k < 1:
        raise ParameterError("k must be a positive integer.")
    if x.shape[0] <= k:
        raise ParameterError(f"The k-NN manifold needs more than k = {k} documents per set; got {x.shape[0]}.")
    norms = _sq_norms(x)
    out = np.empty(x.shape[0])
    for start in range(0, x.shape[0], BLOCK):
        d = _sq_dists(x[start:start + BLOCK], x, norms[start:start + BLOCK], norms)
        rows = np.arange(d.shape[0])
        d[rows, start + rows] = np.inf  # not its own neighbour
        out[start:start + BLOCK] = np.partition(d, k - 1, axis=1)[:, k - 1]
    return out


def coverage(points: np.ndarray, manifold: np.ndarray, radii: np.ndarray) -> float:
    """Share of ``points`` inside the union of balls of squared radius ``radii`` around the rows of ``manifold``."""
    p_norms, m_norms = _sq_norms(points), _sq_norms(manifold)
    inside = np.zeros(points.shape[0], dtype=bool)
    for start in range(0, points.shape[0], BLOCK):
        d = _sq_dists(points[start:start + BLOCK], manifold, p_norms[start:start + BLOCK], m_norms)
        inside[start:start + BLOCK] = np.any(d <= radii[None, :] * (1 + 1e-9) + 1e-12, axis=1)
    return float(inside.mean())


def precision_recall(real: Any, synthetic: Any, *, k: int = DEFAULT_K) -> tuple[float, float]:
    """(precision, recall) of ``synthetic`` against ``real`` embeddings (rows), k-NN manifolds (module docstring)."""
    r = _as_matrix(real, "real")
    s = _as_matrix(synthetic, "synthetic")
    if r.shape[1] != s.shape[1]:
        raise ParameterError("The real and synthetic embeddings have different dimensions; embed both with one model.")
    precision = coverage(s, r, knn_radii(r, k))
    recall = coverage(r, s, knn_radii(s, k))
    return precision, recall


@dataclasses.dataclass(frozen=True)
class DistributionScore:
    """Precision and recall on embeddings over seeds (each seed a balanced subsample), PRIVATE."""

    precision: tuple[float, ...]
    recall: tuple[float, ...]
    seeds: tuple[int, ...]
    k: int
    n_real: int
    n_synthetic: int
    n_compared: int
    embedding_model: str = ""

    @staticmethod
    def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
        arr = np.asarray(values, dtype=np.float64)
        return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0

    @property
    def precision_mean(self) -> float:
        return self._mean_sd(self.precision)[0]

    @property
    def recall_mean(self) -> float:
        return self._mean_sd(self.recall)[0]

    def format(self) -> str:
        """``precision 0.812 ± 0.010, recall 0.640 ± 0.020``."""
        (p, ps), (r, rs) = self._mean_sd(self.precision), self._mean_sd(self.recall)
        return f"precision {p:.3f} ± {ps:.3f}, recall {r:.3f} ± {rs:.3f}"

    def to_dict(self) -> dict[str, Any]:
        (p, ps), (r, rs) = self._mean_sd(self.precision), self._mean_sd(self.recall)
        return {
            "metric": "precision/recall on embeddings (k-NN manifolds, Kynkäänniemi et al. 2019)",
            "precision": {"mean": p, "sd": ps}, "recall": {"mean": r, "sd": rs},
            "seeds": [{"seed": int(sd), "precision": a, "recall": b}
                      for sd, a, b in zip(self.seeds, self.precision, self.recall)],
            "k": self.k, "n_real": self.n_real, "n_synthetic": self.n_synthetic, "n_compared": self.n_compared,
            "embedding_model": self.embedding_model,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "DistributionScore":
        """The score :meth:`to_dict` wrote (``evaluation.json``)."""
        seeds = data["seeds"]
        return cls(precision=tuple(float(e["precision"]) for e in seeds),
                   recall=tuple(float(e["recall"]) for e in seeds), seeds=tuple(int(e["seed"]) for e in seeds),
                   k=int(data["k"]), n_real=int(data["n_real"]), n_synthetic=int(data["n_synthetic"]),
                   n_compared=int(data["n_compared"]), embedding_model=str(data.get("embedding_model") or ""))


def distribution_score(real: Any, synthetic: Any, *, k: int = DEFAULT_K, seeds: Sequence[int] = (0,),
                       embedding_model: str = "") -> DistributionScore:
    """:func:`precision_recall` at equal sizes: per seed, the larger set is subsampled (without replacement) to
    the smaller one's size; mean ± sd over ``seeds``. With equal sizes every seed gives the same value."""
    r = _as_matrix(real, "real")
    s = _as_matrix(synthetic, "synthetic")
    seeds = tuple(int(x) for x in seeds)
    if not seeds:
        raise ParameterError("Give at least one seed.")
    n = min(r.shape[0], s.shape[0])
    precision, recall = [], []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        rs = r if r.shape[0] == n else r[np.sort(rng.choice(r.shape[0], n, replace=False))]
        ss = s if s.shape[0] == n else s[np.sort(rng.choice(s.shape[0], n, replace=False))]
        p, q = precision_recall(rs, ss, k=k)
        precision.append(p)
        recall.append(q)
    return DistributionScore(tuple(precision), tuple(recall), seeds, k, r.shape[0], s.shape[0], n, embedding_model)
