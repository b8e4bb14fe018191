"""Where DP noise comes from (docs/DESIGN.md §2, "noise comes from the OS entropy source"; docs/PRIVACY.md).

:class:`NoiseSource` draws all randomness of a run. Every released Laplace or Gaussian value is drawn, by default,
by OpenDP's vetted samplers (``sampler="opendp"``):

- integer-valued releases (the vocabulary histogram): OpenDP's discrete Laplace
  (``make_laplace`` over ``vector_domain(atom_domain(T="i64"))`` / ``l1_distance``), exact on the integers;
- float releases (smoothed keyphrase histogram, RFF feature sums, sparse-vector noise): OpenDP's float Laplace
  (``make_laplace`` over ``vector_domain(atom_domain(T=float, nan=False), size=n)`` / ``l1_distance``), which
  rounds the statistic to the lattice 2^k·ℤ and adds discrete Laplace noise on that lattice, so the low-order
  bits of a noisy value carry no information about the true value (the floating-point weakness of Mironov 2012);
- Gaussian releases (AugPE vote histograms): OpenDP's float Gaussian (``make_gaussian`` over the same NaN-free
  float vector domain / ``l2_distance``), a discrete Gaussian on the same kind of lattice.

The lattice granularity is 2^k with k = ⌊log₂ scale⌋ − :data:`GRANULARITY_BITS` (≈ 10⁻¹² of the noise scale):
far below the rounding of exported values, and OpenDP's own privacy map shows the rounding adds at most
n·2^k/scale ≤ n·2⁻⁴⁰ to ε for an n-value release (< 4·10⁻⁷ for the 400k-term GloVe vocabulary).
The OpenDP measurements are used as samplers only: sensitivity, ε and the ledger entry stay with each mechanism.

``sampler="numpy"`` is the explicit fast option: NumPy's ``Generator.laplace`` / ``Generator.normal``
(inverse-CDF / ziggurat on 53-bit floats; continuous Laplace also for integer counts). OpenDP's samplers draw
from the OS entropy source and **cannot be seeded**, so a reproducible demo seed always uses the NumPy sampler;
:attr:`NoiseSource.policy` then says ``"seeded-demo-not-for-release"`` and :meth:`NoiseSource.describe` records
which sampler each kind of release used, so reports and bundles carry both facts.

Randomness that is not DP noise (random Fourier features, sequence sampling, the AugPE selection) comes from
NumPy generators seeded from the same :class:`numpy.random.SeedSequence` (:meth:`NoiseSource.child`).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from dpkps_core.errors import ParameterError

SEED_POLICY_OS = "os-entropy"
SEED_POLICY_DEMO = "seeded-demo-not-for-release"
SAMPLERS = ("opendp", "numpy")
DEFAULT_SAMPLER = "opendp"
#: kinds of noisy release, in the order reports list them
RELEASE_KINDS = ("integer_laplace", "float_laplace", "gaussian")
#: OpenDP float lattice: granularity 2^k with k = ⌊log₂ scale⌋ − GRANULARITY_BITS
GRANULARITY_BITS = 40
#: the largest integer count the discrete Laplace sampler accepts (OpenDP i64; saturating arithmetic)
_MAX_INT = 2**62

SAMPLER_NAMES = {
    ("opendp", "integer_laplace"): "OpenDP discrete Laplace (make_laplace, i64 vector, l1_distance)",
    ("opendp", "float_laplace"): f"OpenDP float Laplace (make_laplace, NaN-free f64 vector, l1_distance, "
                                 f"lattice 2^(floor(log2 scale) - {GRANULARITY_BITS}))",
    ("opendp", "gaussian"): f"OpenDP float Gaussian (make_gaussian, NaN-free f64 vector, l2_distance, "
                            f"lattice 2^(floor(log2 scale) - {GRANULARITY_BITS}))",
    ("numpy", "integer_laplace"): "NumPy Generator.laplace (continuous, 53-bit float)",
    ("numpy", "float_laplace"): "NumPy Generator.laplace (continuous, 53-bit float)",
    ("numpy", "gaussian"): "NumPy Generator.normal (53-bit float)",
}


class NoiseSource:
    """All randomness of one run (DP noise, random features, sequence sampling).

    Args:
        seed: ``None`` (default) for OS entropy; an integer only for a reproducible demo, never for release.
            OpenDP's samplers cannot be seeded, so a seed always means the NumPy sampler (and the
            ``"seeded-demo-not-for-release"`` policy), whatever ``sampler`` asks for.
        sampler: ``"opendp"`` (default: OpenDP's vetted samplers for every released Laplace / Gaussian value)
            or ``"numpy"`` (NumPy's floating-point samplers: the explicit fast option).

    Attributes:
        sampler: the sampler actually used (``"numpy"`` whenever a seed is given).
        requested_sampler: the sampler asked for.
        rng: a NumPy generator for non-DP randomness of the caller (and the NumPy sampler's draws).
    """

    def __init__(self, seed: int | None = None, *, sampler: str = DEFAULT_SAMPLER) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ParameterError(f"The seed must be a non-negative integer, got {seed!r}.")
        if sampler not in SAMPLERS:
            raise ParameterError(f"Unknown noise sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}.")
        self.seed = None if seed is None else int(seed)
        self.requested_sampler = sampler
        self.sampler = "numpy" if self.seed is not None else sampler
        self._seed_sequence = np.random.SeedSequence(self.seed)
        self.rng = np.random.default_rng(self._seed_sequence.spawn(1)[0])
        self._draws: dict[str, int] = {}

    @property
    def policy(self) -> str:
        return SEED_POLICY_OS if self.seed is None else SEED_POLICY_DEMO

    def child(self) -> np.random.Generator:
        """An independent generator for a sub-task (e.g. random features), from the same source."""
        return np.random.default_rng(self._seed_sequence.spawn(1)[0])

    # ------------------------------------------------------------------------------------------ releases

    def add_laplace(self, values: Any, *, scale: float, integer_valued: bool = False) -> np.ndarray:
        """The release ``values`` + i.i.d. Laplace(0, ``scale``) on every entry (same shape, float64).

        The caller's statistic must have L1 sensitivity Δ with ``scale`` = Δ/ε for ε-DP (the mechanism records
        that in the ledger). With the OpenDP sampler the statistic itself goes through the measurement:
        ``integer_valued=True`` (integer counts, checked) uses the exact discrete Laplace, otherwise the float
        Laplace on a 2^k lattice (the statistic must be finite).
        """
        scale = _check_scale(scale, "Laplace")
        x = np.asarray(values)
        kind = "integer_laplace" if integer_valued else "float_laplace"
        self._count(kind, x.size)
        if self.sampler == "numpy":
            return np.asarray(x, dtype=np.float64) + self.rng.laplace(0.0, scale, size=x.shape)
        if integer_valued:
            return _opendp_integer_laplace(_as_int64(x), scale).reshape(x.shape)
        return _opendp_float(x if x.dtype == np.float64 else _as_float64(x), scale, gaussian=False)

    def add_gaussian(self, values: Any, *, sigma: float) -> np.ndarray:
        """The release ``values`` + i.i.d. N(0, ``sigma``²) on every entry (same shape, float64).

        For L2 sensitivity Δ this is the Gaussian mechanism with noise multiplier σ/Δ (the caller does the
        accounting). The OpenDP sampler passes the statistic through ``make_gaussian`` (float lattice 2^k)."""
        sigma = _check_scale(sigma, "Gaussian")
        x = np.asarray(values)
        self._count("gaussian", x.size)
        if self.sampler == "numpy":
            return np.asarray(x, dtype=np.float64) + self.rng.normal(0.0, sigma, size=x.shape)
        return _opendp_float(x if x.dtype == np.float64 else _as_float64(x), sigma, gaussian=True)

    # ----------------------------------------------------------------------------------------- noise only

    def laplace(self, scale: float, size: int | tuple[int, ...], *, integer_valued: bool = False) -> np.ndarray:
        """I.i.d. Laplace(0, ``scale``) noise of shape ``size`` (the noise alone, float64).

        Prefer :meth:`add_laplace` for a released value: adding float noise to a statistic outside OpenDP loses
        the lattice protection. Noise alone is right where only a comparison is released (sparse vector)."""
        return self.add_laplace(np.zeros(_shape(size), dtype=np.int64 if integer_valued else np.float64),
                                scale=scale, integer_valued=integer_valued)

    def gaussian(self, sigma: float, size: int | tuple[int, ...]) -> np.ndarray:
        """I.i.d. N(0, ``sigma``²) noise of shape ``size`` (the noise alone, float64); see :meth:`add_gaussian`."""
        return self.add_gaussian(np.zeros(_shape(size), dtype=np.float64), sigma=sigma)

    # ------------------------------------------------------------------------------------------- reports

    def samplers(self) -> dict[str, str]:
        """Which sampler each kind of release uses in this source."""
        return {kind: SAMPLER_NAMES[(self.sampler, kind)] for kind in RELEASE_KINDS}

    def describe(self) -> dict[str, object]:
        """The seed policy and the sampler of every kind of release (for the privacy report and bundle)."""
        out: dict[str, object] = {
            "seed_policy": self.policy, "seed": self.seed,
            "sampler": self.sampler, "sampler_requested": self.requested_sampler,
            "laplace_sampler": self.sampler,  # older reports' key
            "samplers": self.samplers(),
        }
        if self._draws:  # a source that drew the noise also says how many values of each kind
            out["noisy_values_drawn"] = {k: self._draws[k] for k in RELEASE_KINDS if k in self._draws}
        if self.seed is not None:
            out["sampler_note"] = ("Reproducible demo seed: NumPy's seeded sampler was used for all noise "
                                   "(OpenDP's samplers cannot be seeded). NOT FOR RELEASE.")
        elif self.sampler == "numpy":
            out["sampler_note"] = ("NumPy's floating-point samplers were chosen (fast option); OpenDP's vetted "
                                   "samplers are the default.")
        return out

    def _count(self, kind: str, n: int) -> None:
        self._draws[kind] = self._draws.get(kind, 0) + int(n)


# ------------------------------------------------------------------------------------------------ helpers

def _check_scale(scale: float, what: str) -> float:
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise ParameterError(f"The {what} noise scale must be a number, got {scale!r}.") from None
    if isinstance(scale, bool) or not (math.isfinite(value) and value > 0):
        raise ParameterError(f"The {what} noise scale must be finite and > 0, got {scale!r}.")
    return value


def _shape(size: int | tuple[int, ...]) -> tuple[int, ...]:
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        raise ParameterError(f"The noise shape must be non-negative integers, got {size!r}.")
    return tuple(int(d) for d in shape)


def _as_int64(x: np.ndarray) -> np.ndarray:
    """``x`` as int64 counts; refuses non-integer, non-finite or huge values."""
    if x.size == 0:
        return np.zeros(x.shape, dtype=np.int64)
    if x.dtype.kind in "iub":
        xi = x.astype(np.int64)
        if x.dtype.kind != "b" and np.abs(xi).max() >= _MAX_INT:
            raise ParameterError("The discrete Laplace sampler needs counts with |count| < 2^62.")
        return xi
    xf = _as_float64(x)
    if not (np.isfinite(xf).all() and (xf == np.round(xf)).all() and np.abs(xf).max() < _MAX_INT):
        raise ParameterError("The discrete Laplace sampler needs integer counts (finite, whole, |count| < 2^62).")
    return xf.astype(np.int64)


def _as_float64(x: np.ndarray) -> np.ndarray:
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ParameterError("The noisy statistic must be numeric.") from None


def _granularity(scale: float) -> int:
    """k of the OpenDP float lattice 2^k for noise of this scale."""
    return math.floor(math.log2(scale)) - GRANULARITY_BITS


@functools.lru_cache(maxsize=64)
def _measurement(kind: str, scale: float, n: int) -> Any:
    """The OpenDP measurement used as sampler (cached: building one costs ~0.3 ms; the sparse vector draws per
    token)."""
    import opendp.prelude as dp  # imported lazily: the NumPy sampler does not need it

    dp.enable_features("contrib")
    if kind == "integer_laplace":
        return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale)
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n)  # a known size lets us choose k
    if kind == "float_laplace":
        return dp.m.make_laplace(domain, dp.l1_distance(T=float), scale=scale, k=_granularity(scale))
    return dp.m.make_gaussian(domain, dp.l2_distance(T=float), scale=scale, k=_granularity(scale))


def _opendp_integer_laplace(x: np.ndarray, scale: float) -> np.ndarray:
    """OpenDP's discrete Laplace added to the integer vector ``x`` (any shape; returned flat, float64)."""
    flat = x.reshape(-1)
    if flat.size == 0:
        return np.zeros(0, dtype=np.float64)
    return np.asarray(_measurement("integer_laplace", scale, 0)(flat.tolist()), dtype=np.float64)


def _opendp_float(x: np.ndarray, scale: float, *, gaussian: bool) -> np.ndarray:
    """OpenDP's float Laplace / Gaussian measurement applied to the float vector ``x`` (shape kept)."""
    flat = x.reshape(-1)
    if flat.size == 0:
        return np.zeros(x.shape, dtype=np.float64)
    if not np.isfinite(flat).all():
        raise ParameterError("The noisy statistic must be finite (no NaN or infinity) for OpenDP's sampler.")
    meas = _measurement("gaussian" if gaussian else "float_laplace", scale, int(flat.size))
    return np.asarray(meas(flat.tolist()), dtype=np.float64).reshape(x.shape)
