"""Random Fourier features for the Gaussian kernel k(x, y) = exp(−‖x − y‖²/σ²) (docs/DESIGN.md §2.2).

Features (Rahimi & Recht; DP-KDE of Wagner et al. 2023 as used by [DP-KPS] §2, Step 3): ω_i ~ N(0, I_D),
β_i ~ U[0, 2π), f_i(z) = √2 cos(√2 ω_iᵀ z/σ + β_i) ∈ [−√2, √2], so that E[f(x)ᵀf(y)]/I → k(x, y).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpkps_core.dp.validation import check_positive_float, check_positive_int

SQRT2 = float(np.sqrt(2.0))


@dataclasses.dataclass(frozen=True)
class RandomFourierFeatures:
    """I random Fourier features over ℝ^D for bandwidth σ. ``omega`` is (I, D), ``beta`` is (I,)."""

    omega: np.ndarray = dataclasses.field(repr=False)
    beta: np.ndarray = dataclasses.field(repr=False)
    bandwidth: float

    @classmethod
    def draw(cls, *, dim: int, features: int, bandwidth: float, rng: np.random.Generator,
             dtype: np.dtype = np.float32) -> "RandomFourierFeatures":
        dim = check_positive_int(dim, "embedding dimension")
        features = check_positive_int(features, "I (random features)")
        bandwidth = check_positive_float(bandwidth, "σ (bandwidth)")
        omega = rng.standard_normal((features, dim)).astype(dtype)
        beta = rng.uniform(0.0, 2.0 * np.pi, size=features).astype(dtype)
        return cls(omega=omega, beta=beta, bandwidth=bandwidth)

    @property
    def n_features(self) -> int:
        return int(self.omega.shape[0])

    @property
    def projection_scale(self) -> float:
        """The factor √2/σ in front of ωᵀz."""
        return SQRT2 / self.bandwidth

    def phases(self, z: np.ndarray) -> np.ndarray:
        """√2 ωᵀz/σ + β for each row z of ``z`` (n, D) → (n, I); one GEMM."""
        return (np.asarray(z, dtype=self.omega.dtype) @ self.omega.T) * self.projection_scale + self.beta

    def transform(self, z: np.ndarray) -> np.ndarray:
        """f(z) for each row: (n, D) → (n, I), values in [−√2, √2]."""
        return SQRT2 * np.cos(self.phases(z))


def exact_gaussian_kernel(x: np.ndarray, y: np.ndarray, bandwidth: float) -> np.ndarray:
    """k(x, y) = exp(−‖x − y‖²/σ²) for all row pairs: (n, D), (m, D) → (n, m)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * x @ y.T
    return np.exp(-np.maximum(sq, 0.0) / bandwidth**2)


def rff_expected_error(*, n_documents: float, epsilon: float, features: int) -> dict[str, float]:
    """Expected error of a normalised RFF DP-KDE score (docs/DESIGN.md §2.2): RFF ≈ 1/√I, DP noise ≈ 2√I/(nε)."""
    n = max(float(n_documents), 1.0)
    rff = 1.0 / np.sqrt(features)
    dp = 2.0 * np.sqrt(features) / (n * epsilon)
    return {"rff_error": float(rff), "noise_error": float(dp), "total_error": float(rff + dp)}


def optimal_features(*, n_documents: float, epsilon: float, minimum: int = 16, maximum: int = 20_000) -> int:
    """I ≈ n·ε/2 minimises 1/√I + 2√I/(nε) (docs/DESIGN.md §2.2, §6); clipped to [minimum, maximum]."""
    return int(np.clip(round(max(float(n_documents), 1.0) * epsilon / 2.0), minimum, maximum))
