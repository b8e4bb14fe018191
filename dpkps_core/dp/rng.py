"""Where DP noise comes from (DESIGN §2, "noise comes from the OS entropy source").

:class:`NoiseSource` draws all randomness of a run. By default it is seeded from the operating system's
entropy (``numpy.random.SeedSequence()`` reads ``os.urandom``); a seed is used only for a *reproducible demo*,
and then :attr:`NoiseSource.policy` says ``"seeded-demo-not-for-release"`` so that reports and bundles carry
that warning. Laplace noise is drawn with NumPy's ``Generator.laplace`` (inverse-CDF on 53-bit floats).

Floating-point Laplace samplers have a known weakness (Mironov 2012): the low-order bits of a noisy value can
leak information about the true value. Values released by DP-KPS are only ever *ranked* (vocabulary top-N) or
used as non-negative sampling weights and are rounded before export (see ``round_released``), which limits —
but does not formally remove — that channel. ``sampler="opendp"`` switches the Laplace draws to OpenDP's
vetted discrete sampler (``opendp.measurements.make_laplace`` over integers) where the released statistic is
integer-valued (the vocabulary histogram).
"""

from __future__ import annotations

import numpy as np

from dpkps_core.errors import ParameterError

SEED_POLICY_OS = "os-entropy"
SEED_POLICY_DEMO = "seeded-demo-not-for-release"
SAMPLERS = ("numpy", "opendp")


class NoiseSource:
    """All randomness of one run (DP noise, random features, sequence sampling).

    Args:
        seed: ``None`` (default) for OS entropy; an integer only for a reproducible demo, never for release.
        sampler: ``"numpy"`` (continuous Laplace, default) or ``"opendp"`` (OpenDP's discrete Laplace for
            integer-valued histograms).
    """

    def __init__(self, seed: int | None = None, *, sampler: str = "numpy") -> None:
        if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ParameterError(f"The seed must be a non-negative integer, got {seed!r}.")
        if sampler not in SAMPLERS:
            raise ParameterError(f"Unknown noise sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}.")
        self.seed = None if seed is None else int(seed)
        self.sampler = sampler
        self._seed_sequence = np.random.SeedSequence(self.seed)
        self.rng = np.random.default_rng(self._seed_sequence.spawn(1)[0])

    @property
    def policy(self) -> str:
        return SEED_POLICY_OS if self.seed is None else SEED_POLICY_DEMO

    def child(self) -> np.random.Generator:
        """An independent generator for a sub-task (e.g. random features), from the same source."""
        return np.random.default_rng(self._seed_sequence.spawn(1)[0])

    def laplace(self, scale: float, size: int | tuple[int, ...], *, integer_valued: bool = False) -> np.ndarray:
        """I.i.d. Laplace(0, ``scale``) noise of shape ``size``.

        With ``sampler="opendp"`` and ``integer_valued=True`` the draws come from OpenDP's discrete Laplace
        (a vetted, exact sampler); otherwise from NumPy's continuous Laplace.
        """
        if not (np.isfinite(scale) and scale > 0):
            raise ParameterError(f"The Laplace noise scale must be finite and > 0, got {scale!r}.")
        if self.sampler == "opendp" and integer_valued:
            return _opendp_discrete_laplace(scale, size)
        return self.rng.laplace(0.0, scale, size=size)

    def describe(self) -> dict[str, object]:
        return {"seed_policy": self.policy, "seed": self.seed, "laplace_sampler": self.sampler}


def _opendp_discrete_laplace(scale: float, size: int | tuple[int, ...]) -> np.ndarray:
    import opendp.prelude as dp  # imported lazily: only this sampler needs it

    dp.enable_features("contrib")
    shape = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
    n = int(np.prod(shape))
    space = (dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int))
    meas = dp.m.make_laplace(*space, scale=float(scale))
    return np.asarray(meas([0] * n), dtype=np.float64).reshape(shape)
