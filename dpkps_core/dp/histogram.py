"""Exact smoothed DP keyphrase histogram (ε_kde) — the default density for independent sampling.

docs/DESIGN.md §6. Independent sampling only ever scores the finite Ṽ, and the class-conditional Gaussian
KDE at the points of Ṽ equals a kernel-smoothed keyphrase histogram. Mechanism, per class c:

* Neighbouring relation: add/remove one document.
* Statistic: h_c[v] = Σ_{docs of c} (occurrences of v in the doc's first M keyphrases) / m_doc, so every document
  has total weight 1 → L1 sensitivity 1 (classes are disjoint: parallel composition, ε_kde in total).
* Noise: i.i.d. Laplace(1/ε_kde) on **every** entry of Ṽ for every class (zero entries included).
* Post-processing: scores s_c = K h̃_c with the exact kernel K_vw = exp(−‖e_v − e_w‖²/σ²) over Ṽ's public
  embeddings (σ → 0 gives K = I, no smoothing); sampling uses max(s_c, 0).

Compared with the RFF DP-KDE (noise ≈ 2√I/ε per normalised score) the noise is ≈ 1/ε per term, and there is
no random-feature error.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, SmoothedHistogramEvent
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rff import exact_gaussian_kernel
from dpkps_core.dp.validation import check_epsilon, check_positive_float

MECHANISM = "laplace_smoothed_keyphrase_histogram"


@dataclasses.dataclass(frozen=True)
class SmoothedHistogramDensity:
    """Per-class DP densities over Ṽ. ``noisy_histograms`` (C, |Ṽ|) is the DP release; ``scores`` its
    smoothing."""

    classes: tuple[str, ...]
    noisy_histograms: np.ndarray = dataclasses.field(repr=False)
    bandwidth: float
    epsilon: float
    noise_scale: float
    kernel: np.ndarray | None = dataclasses.field(default=None, repr=False)

    def scores(self) -> np.ndarray:
        """(C, |Ṽ|) smoothed scores K h̃_c (before clipping at 0)."""
        if self.kernel is None:
            return self.noisy_histograms.copy()
        return self.noisy_histograms @ self.kernel  # K is symmetric

    def class_scores(self, class_name: str) -> np.ndarray:
        return self.scores()[self.classes.index(class_name)]


def smoothing_kernel(embeddings: np.ndarray, bandwidth: float) -> np.ndarray | None:
    """Exact Gaussian kernel matrix over Ṽ's embeddings, or ``None`` for σ = 0 (no smoothing)."""
    if bandwidth == 0:
        return None
    return exact_gaussian_kernel(embeddings, embeddings, bandwidth)


def histogram_event(*, epsilon: float, bandwidth: float, classes: int, private_vocabulary_size: int,
                    max_per_doc: int | None = None,
                    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT) -> SmoothedHistogramEvent:
    """The ε_kde release's event for the smoothed histogram density, from public quantities only (ε, sensitivity 1,
    |Ṽ|, σ, M, the number of classes), so it is recorded before the histograms are noised (docs/DESIGN.md §2.0).
    Refuses an invalid ε or σ (before anything is charged)."""
    epsilon = check_epsilon(epsilon, "ε_kde")
    bandwidth = check_positive_float(bandwidth, "σ (bandwidth)", allow_zero=True)
    return SmoothedHistogramEvent(
        mechanism=MECHANISM,
        step="kde",
        epsilon=epsilon,
        neighbouring=neighbouring,
        sensitivity=1.0,
        noise_scale=1.0 / epsilon,
        released=(
            f"Laplace-noised keyphrase histograms over all {private_vocabulary_size} terms of Ṽ, one per class "
            f"({classes} classes, parallel composition)"
        ),
        classes=classes, private_vocabulary_size=private_vocabulary_size, bandwidth=bandwidth,
        max_keyphrases_per_doc=max_per_doc,
    )


def build_smoothed_histogram_density(
    keyphrases: Sequence[Sequence[int]],
    labels: Sequence[str],
    *,
    classes: Sequence[str],
    embeddings: np.ndarray,
    epsilon: float,
    bandwidth: float,
    context: ReleaseContext,
    max_per_doc: int | None = None,
    groups: Sequence[str] | None = None,
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> SmoothedHistogramDensity:
    """Release the per-class keyphrase histograms over Ṽ with Laplace(1/ε_kde) and smooth them.

    Args:
        keyphrases: per document, indices into Ṽ in text order (repeats kept).
        labels: per document class label; ``classes``: the public class names (order of the output).
        embeddings: (|Ṽ|, d) unit-norm embeddings of Ṽ (public model applied to DP terms).
        epsilon: ε_kde (parallel composition over classes). bandwidth: σ ≥ 0 (0 → no smoothing).
        context: the release's ledger (charged here; None: the event is accounted elsewhere) and noise source
            (:class:`~dpkps_core.dp.release.ReleaseContext`).
        max_per_doc: M, truncation of each document's keyphrases.
        groups / neighbouring: one person per document and the person-level relation (docs/DESIGN.md §2, person unit): a person's
            occurrences over all their documents and classes weigh 1 in total, so sensitivity 1 and the same
            Laplace(1/ε) give ε-DP per person.

    Charge first (docs/DESIGN.md §2.0): the event (ε, sensitivity 1, |Ṽ|, σ, M: all public) is recorded in
    ``context.ledger`` after the statistic is computed and BEFORE the noise is drawn, so a failure from then on
    leaves ε_kde spent.
    """
    epsilon = check_epsilon(epsilon, "ε_kde")
    bandwidth = check_positive_float(bandwidth, "σ (bandwidth)", allow_zero=True)
    classes = tuple(classes)
    vocab_size = embeddings.shape[0]
    hist = class_keyphrase_histograms(keyphrases, labels, classes, vocab_size, max_per_doc=max_per_doc,
                                      groups=groups)
    scale = 1.0 / epsilon
    if context.ledger is not None:  # charge first (docs/DESIGN.md §2.0): the event holds public quantities only
        context.ledger.charge(histogram_event(epsilon=epsilon, bandwidth=bandwidth, classes=len(classes),
                                              private_vocabulary_size=vocab_size, max_per_doc=max_per_doc,
                                              neighbouring=neighbouring))
    noisy = context.noise.add_laplace(hist, scale=scale)  # the statistic goes through the (OpenDP) sampler
    return SmoothedHistogramDensity(
        classes=classes,
        noisy_histograms=noisy,
        bandwidth=bandwidth,
        epsilon=epsilon,
        noise_scale=scale,
        kernel=smoothing_kernel(embeddings, bandwidth),
    )
