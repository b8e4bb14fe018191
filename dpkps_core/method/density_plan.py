"""The density plan: the public choices of the density step, decided in ONE place ([DP-KPS] §2 Step 3; docs/DESIGN.md
§2.2, §2.4, §6).

:func:`density_plan` decides σ, the ensemble members, ε per member, the number of random features I and the
expected error from a :class:`~dpkps_core.method.config.SamplingConfig` and public inputs or DP releases only (Ṽ's
embeddings, the DP size estimate of the vocabulary release). The pipeline, the app's previews, the forecast and
the audit all read it from here.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, PrivacyEvent
from dpkps_core.dp.histogram import histogram_event
from dpkps_core.dp.kde import ensemble_blocks, rff_event
from dpkps_core.errors import ParameterError
from dpkps_core.dp.rff import optimal_features, rff_expected_error
from dpkps_core.dp.vocabulary import PrivateVocabulary, estimate_documents_from_noisy_total


def default_bandwidth(embeddings: np.ndarray, *, factor: float = 0.25, max_points: int = 2000, seed: int = 0) -> float:
    """Data-free σ: ``factor`` × median pairwise distance among Ṽ's embeddings (Ṽ is DP, the model public).

    With MiniLM the median distance between vocabulary words is ≈ 1.2, giving σ ≈ 0.3, the range that
    worked best in docs/DESIGN.md §6 (σ = 1 samples almost uniformly).
    """
    e = np.asarray(embeddings, dtype=np.float64)
    if e.shape[0] < 2:
        return 0.3
    if e.shape[0] > max_points:
        e = e[np.random.default_rng(seed).choice(e.shape[0], max_points, replace=False)]
    sq = np.maximum((e * e).sum(1)[:, None] + (e * e).sum(1)[None, :] - 2 * e @ e.T, 0.0)
    dist = np.sqrt(sq[np.triu_indices(e.shape[0], 1)])
    return float(round(factor * np.median(dist), 4))


def estimate_class_size(
    private_vocabulary: PrivateVocabulary, n_classes: int, *, user_estimate: float | None = None
) -> tuple[float, str]:
    """Per-class size estimate for choosing I, without touching private counts (docs/DESIGN.md §6).

    A user-supplied estimate wins; otherwise the free DP estimate Σ(noisy counts over V)/S divided by the
    number of classes (post-processing of the ε_voc release)."""
    if user_estimate is not None:
        return float(user_estimate), "user estimate"
    n = estimate_documents_from_noisy_total(private_vocabulary.noisy_total, terms_per_doc=private_vocabulary.terms_per_doc)
    return max(n / max(n_classes, 1), 1.0), "DP estimate from the vocabulary release"


@dataclasses.dataclass(frozen=True)
class DensityPlan:
    """The public choices of the density step (docs/DESIGN.md §2.2, §2.4): decided before ε_kde is spent.

    ``features``, ``members`` and the errors apply to the RFF DP-KDE; the smoothed histogram has one member and
    a Laplace(1/ε_kde) noise per term of Ṽ (sd √2/ε_kde)."""

    density: str                       # "histogram" or "rff"
    kind: str                          # "independent", "iterative-linear" or "iterative-log"
    bandwidth: float | None            # σ (None: not yet known — auto σ needs Ṽ's embeddings)
    bandwidth_source: str
    members: int                       # ensemble members J (each gets ε_kde / J)
    eps_member: float
    max_keyphrases_per_doc: int        # M
    features: int | None = None        # I (RFF only)
    features_source: str = ""
    class_size_estimate: float | None = None
    class_size_source: str = ""
    expected_noise_per_term: float | None = None   # histogram: sd of the Laplace noise per term
    rff_error: float | None = None
    noise_error: float | None = None
    total_error: float | None = None

    def info(self) -> dict[str, Any]:
        """The plan as the flat dict the run reports under ``density_*`` (only the entries that apply)."""
        out: dict[str, Any] = {"bandwidth": self.bandwidth, "bandwidth_source": self.bandwidth_source,
                               "density": self.density, "max_keyphrases_per_doc": self.max_keyphrases_per_doc}
        if self.density == "histogram":
            out["expected_noise_per_term"] = self.expected_noise_per_term
            return out
        out.update({"features": self.features, "features_source": self.features_source,
                    "class_size_estimate": None if self.class_size_estimate is None else round(self.class_size_estimate, 1),
                    "ensemble_members": self.members, "rff_error": self.rff_error, "noise_error": self.noise_error,
                    "total_error": self.total_error})
        return out

    def event(self, config: SamplingConfig, *, classes: int, private_vocabulary_size: int,
              neighbouring: str = ADD_REMOVE_ONE_DOCUMENT) -> PrivacyEvent:
        """The ε_kde release's event under this plan (public quantities only), as the density's mechanism records
        it. Built before any unit is admitted (docs/DESIGN.md §2.0), it also refuses a density the public settings
        cannot build (an RFF σ or I that is not > 0) at no cost."""
        if self.density == "histogram":
            return histogram_event(epsilon=config.eps_kde, bandwidth=self.bandwidth, classes=classes,
                                   private_vocabulary_size=private_vocabulary_size,
                                   max_per_doc=self.max_keyphrases_per_doc, neighbouring=neighbouring)
        if not self.bandwidth:
            raise ParameterError("The RFF DP-KDE needs a bandwidth σ > 0.")
        if not self.features:
            raise ParameterError("The RFF DP-KDE needs a number of random features I ≥ 1.")
        return rff_event(kind=self.kind, epsilon=config.eps_kde, bandwidth=self.bandwidth, features=self.features,
                         length=config.length, classes=classes, max_per_doc=self.max_keyphrases_per_doc,
                         neighbouring=neighbouring)


def density_plan(
    config: SamplingConfig, *, n_classes: int, private_vocabulary: PrivateVocabulary | None = None,
    embeddings: np.ndarray | None = None,
) -> DensityPlan:
    """Decide σ, the ensemble members, ε per member and I for ``config`` ([DP-KPS] §2 Step 3; docs/DESIGN.md §2.2, §6).

    σ: the user's, else 0.25 × the median distance among Ṽ's embeddings (``embeddings``; ``None`` leaves it open).
    I: the user's, else ≈ n_c·ε_member/2 with n_c the user's class-size estimate or the free DP estimate from the
    vocabulary release (Σ noisy counts / S / classes). Everything here is public or post-processing of DP output."""
    kind = "independent" if config.method == "independent" else config.method
    max_per_doc = config.max_keyphrases_per_doc or config.length
    if config.bandwidth is not None:
        bandwidth, bw_source = float(config.bandwidth), "user"
    elif embeddings is not None:
        bandwidth, bw_source = default_bandwidth(embeddings), "auto (0.25 × median distance in Ṽ)"
    else:
        bandwidth, bw_source = None, "auto (0.25 × median distance in Ṽ; decided when Ṽ is embedded)"
    if config.density_kind == "histogram":
        return DensityPlan("histogram", kind, bandwidth, bw_source, 1, config.eps_kde, max_per_doc,
                           expected_noise_per_term=float(np.sqrt(2) / config.eps_kde))
    members = len(ensemble_blocks(kind, config.length))
    eps_member = config.eps_kde / members
    if config.class_size_estimate is not None:
        n_est, n_source = float(config.class_size_estimate), "user estimate"
    elif private_vocabulary is not None:
        n_est, n_source = estimate_class_size(private_vocabulary, n_classes)
    else:
        n_est, n_source = None, "DP estimate from the vocabulary release (not built yet)"
    if config.features:
        features, f_source = int(config.features), "user"
    elif n_est is not None:
        features = optimal_features(n_documents=n_est, epsilon=eps_member, maximum=LIMITS["features"])
        f_source = f"auto (n_c·ε/2, n_c from {n_source})"
    else:
        features, f_source = None, "auto (n_c·ε/2; needs the class-size estimate)"
    errors = (rff_expected_error(n_documents=n_est, epsilon=eps_member, features=features)
              if features is not None and n_est is not None else {})
    return DensityPlan("rff", kind, bandwidth, bw_source, members, eps_member, max_per_doc, features, f_source,
                       n_est, n_source, rff_error=errors.get("rff_error"), noise_error=errors.get("noise_error"),
                       total_error=errors.get("total_error"))
