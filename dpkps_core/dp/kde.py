"""RFF DP-KDE (ε_kde) for single keyphrases and for keyphrase-sequence ensembles (docs/DESIGN.md §2.2, §2.4).

Paper 001 §2 Step 3 and Appendix B; the mechanism of Wagner et al. (2023):

* Neighbouring relation: add/remove one document. Each document contributes ONE vector φ(doc) ∈ [−√2, √2]^I:
  for the independent method the mean of f(x) over its (at most M) keyphrases; for a sequence ensemble member
  over b blocks, f of the concatenation of its first b keyphrase embeddings, each block scaled to squared
  norm u. Documents with no keyphrase (or fewer than b) contribute nothing.
* Released statistic per class: F̃ = Σ_docs φ(doc) + Laplace(√2·I/ε) per coordinate (L1 sensitivity √2·I).
  Classes are disjoint (parallel composition). An ensemble of J members costs ε_kde in total: each member gets
  ε_kde/J, i.e. noise scale √2·I·J/ε_kde — one event with summed sensitivity √2·I·J (docs/DESIGN.md §2).
* Score of a query y: s(y) = Σ_i F̃_i f_i(y); sampling uses max(s, 0).

Ensembles (Appendix B): linear — member i over i blocks with u = 1/i (i = 1..L); log — member j over
min(2^j, L) blocks with u = 1/2^j (j = 0..⌈log₂L⌉), step i queries member ⌈log₂ i⌉ with the prefix zero-padded.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

import numpy as np

from dpkps_core.dp.contributions import class_keyphrase_histograms, prefix_matrix, prefix_weights
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, RFFKDEEvent
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rff import SQRT2, RandomFourierFeatures
from dpkps_core.dp.validation import check_epsilon, check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError

KINDS = ("independent", "iterative-linear", "iterative-log")
MECHANISM = "laplace_rff_dp_kde"
_CHUNK = 4096


@dataclasses.dataclass(frozen=True)
class RFFMember:
    """One DP-KDE over sequences of ``blocks`` keyphrases (``blocks = 1`` for single keyphrases)."""

    features: RandomFourierFeatures = dataclasses.field(repr=False)
    blocks: int
    block_scale: float  # √u: every block of a query / document vector is scaled by this
    noisy_sums: np.ndarray = dataclasses.field(repr=False)  # (C, I): the DP release F̃ per class
    epsilon: float
    noise_scale: float


@dataclasses.dataclass(frozen=True)
class RFFDensity:
    """Per-class RFF DP-KDE(s) over Ṽ (one member for independent sampling, an ensemble for iterative)."""

    kind: str
    classes: tuple[str, ...]
    members: tuple[RFFMember, ...]
    bandwidth: float
    n_features: int
    length: int
    epsilon: float

    def member_index_for_step(self, step: int) -> int:
        """Which member scores the extension at 1-based position ``step`` (docs/DESIGN.md §2.4)."""
        if self.kind == "independent":
            return 0
        if self.kind == "iterative-linear":
            return step - 1
        return int(math.ceil(math.log2(step))) if step > 1 else 0

    def single_term_scores(self, embeddings: np.ndarray) -> np.ndarray:
        """(C, |Ṽ|) scores of every single term under member 0 (the per-class keyphrase density)."""
        m = self.members[0]
        feats = m.features.transform(embeddings * m.block_scale)  # (N, I)
        return m.noisy_sums @ feats.T


def ensemble_blocks(kind: str, length: int) -> list[tuple[int, float]]:
    """(blocks, block_scale = √u) of each member for ``kind`` and sequence length L."""
    if kind == "independent":
        return [(1, 1.0)]
    if kind == "iterative-linear":
        return [(i, 1.0 / math.sqrt(i)) for i in range(1, length + 1)]
    if kind == "iterative-log":
        top = int(math.ceil(math.log2(length))) if length > 1 else 0
        return [(min(2**j, length), 1.0 / math.sqrt(2**j)) for j in range(top + 1)]
    raise ParameterError(f"Unknown density kind {kind!r}; choose one of {', '.join(KINDS)}.")


def _sum_features_over_prefixes(
    features: RandomFourierFeatures, embeddings: np.ndarray, prefixes: np.ndarray, block_scale: float,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Σ over rows of w_row · f(concat_b(√u · e[prefix_b])) — chunked GEMMs, no per-document loop over features."""
    total = np.zeros(features.n_features, dtype=np.float64)
    d = embeddings.shape[1]
    for start in range(0, prefixes.shape[0], _CHUNK):
        block = prefixes[start:start + _CHUNK]
        z = embeddings[block].reshape(block.shape[0], block.shape[1] * d) * block_scale
        f = features.transform(z)
        if weights is None:
            total += f.sum(axis=0, dtype=np.float64)
        else:
            total += weights[start:start + _CHUNK] @ f.astype(np.float64)
    return total


def rff_feature_sums(
    keyphrases: Sequence[Sequence[int]], labels: Sequence[str], *, classes: Sequence[str], embeddings: np.ndarray,
    features: RandomFourierFeatures, blocks: int, block_scale: float, kind: str, max_per_doc: int,
    groups: Sequence[str] | None = None,
) -> np.ndarray:
    """The (C, I) statistic Σ_docs φ(doc) per class, before noise. Each document adds one φ ∈ [−√2, √2]^I, so
    adding or removing a document moves it by at most √2·I in L1. With ``groups`` (a person per document), a
    person's documents are weighted to total 1 across all classes, so adding or removing a person moves the
    stacked (C, I) statistic by at most √2·I in L1 as well (docs/DESIGN.md §2, person unit)."""
    emb32 = np.asarray(embeddings, dtype=np.float32)
    if kind == "independent":
        hist = class_keyphrase_histograms(keyphrases, labels, classes, emb32.shape[0], max_per_doc=max_per_doc,
                                          groups=groups)
        return hist @ features.transform(emb32).astype(np.float64)  # Σ_docs mean_x f(x) = h_c · F
    truncated = [k[:max_per_doc] for k in keyphrases]
    if groups is None:
        return np.stack([
            _sum_features_over_prefixes(features, emb32, prefix_matrix(truncated, labels, c, blocks), block_scale)
            for c in classes
        ])
    weights = prefix_weights(truncated, labels, classes, blocks, groups)
    out = []
    for c in classes:
        rows = [i for i, lab in enumerate(labels) if lab == c and weights[i] > 0]
        prefixes = (np.asarray([truncated[i][:blocks] for i in rows], dtype=np.int64) if rows
                    else np.zeros((0, blocks), dtype=np.int64))
        out.append(_sum_features_over_prefixes(features, emb32, prefixes, block_scale, weights[rows]))
    return np.stack(out)


def rff_event(*, kind: str, epsilon: float, bandwidth: float, features: int, length: int, classes: int,
              max_per_doc: int | None = None, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT) -> RFFKDEEvent:
    """The ε_kde release's one event for the whole RFF ensemble of ``kind``, from public quantities only (ε, I, σ,
    L, M, the members J, the number of classes), so it is recorded before any member's noise is drawn
    (docs/DESIGN.md §2.0). Refuses invalid settings (before anything is charged); ``max_per_doc`` None means L."""
    epsilon = check_epsilon(epsilon, "ε_kde")
    bandwidth = check_positive_float(bandwidth, "σ (bandwidth)")
    features = check_positive_int(features, "I (random features)")
    length = check_positive_int(length, "L (sequence length)")
    max_per_doc = length if max_per_doc is None else check_positive_int(max_per_doc, "M (keyphrases per document)")
    layout = ensemble_blocks(kind, length)
    return RFFKDEEvent(
        mechanism=MECHANISM,
        step="kde",
        epsilon=epsilon,
        neighbouring=neighbouring,
        sensitivity=SQRT2 * features * len(layout),
        noise_scale=SQRT2 * features / (epsilon / len(layout)),
        released=(
            f"Laplace-noised sums of {features} random Fourier features per class "
            f"({classes} classes, parallel composition), {len(layout)} ensemble member(s) ({kind})"
        ),
        kind=kind, features=features, bandwidth=bandwidth, member_blocks=tuple(b for b, _ in layout),
        length=length, max_keyphrases_per_doc=max_per_doc, classes=classes,
    )


def build_rff_density(
    keyphrases: Sequence[Sequence[int]],
    labels: Sequence[str],
    *,
    classes: Sequence[str],
    embeddings: np.ndarray,
    kind: str,
    epsilon: float,
    bandwidth: float,
    features: int,
    length: int,
    context: ReleaseContext,
    max_per_doc: int | None = None,
    progress: Callable[[float, str], None] | None = None,
    groups: Sequence[str] | None = None,
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> RFFDensity:
    """Build the per-class RFF DP-KDE(s) of ``kind`` and record one ledger event (step ``"kde"``).

    Args:
        keyphrases: per document, indices into Ṽ in text order (repeats kept).
        labels / classes: per-document labels and the public class names.
        embeddings: (|Ṽ|, d) unit-norm public embeddings of Ṽ.
        kind: ``"independent"``, ``"iterative-linear"`` or ``"iterative-log"``.
        epsilon: ε_kde for the whole density (split evenly over ensemble members).
        bandwidth: σ > 0. features: I. length: L (sequence length). max_per_doc: M (default L).
        context: the release's ledger (charged here; None: the event is accounted elsewhere) and noise source
            (:class:`~dpkps_core.dp.release.ReleaseContext`: the random features and the Laplace noise).
        progress: told after each ensemble member.
        groups / neighbouring: one person per document and the person-level relation (docs/DESIGN.md §2, person unit): each
            person's documents weigh 1 in total, so the same noise scale gives ε-DP per person.

    Charge first (docs/DESIGN.md §2.0): the one event for the whole ensemble is recorded in ``context.ledger`` before
    the first member's statistic is computed or its noise drawn; a failure or cancellation after that leaves ε_kde
    spent.
    """
    epsilon = check_epsilon(epsilon, "ε_kde")
    bandwidth = check_positive_float(bandwidth, "σ (bandwidth)")
    features = check_positive_int(features, "I (random features)")
    length = check_positive_int(length, "L (sequence length)")
    max_per_doc = length if max_per_doc is None else check_positive_int(max_per_doc, "M (keyphrases per document)")
    classes = tuple(classes)
    layout = ensemble_blocks(kind, length)
    eps_member = epsilon / len(layout)
    scale = SQRT2 * features / eps_member
    if context.ledger is not None:  # charge first (docs/DESIGN.md §2.0): every field is public (ε, I, σ, L, M, J)
        context.ledger.charge(rff_event(kind=kind, epsilon=epsilon, bandwidth=bandwidth, features=features,
                                        length=length, classes=len(classes), max_per_doc=max_per_doc,
                                        neighbouring=neighbouring))
    noise = context.noise
    rng = noise.child()
    members = []
    for j, (blocks, block_scale) in enumerate(layout):
        rff = RandomFourierFeatures.draw(dim=embeddings.shape[1] * blocks, features=features, bandwidth=bandwidth, rng=rng)
        sums = rff_feature_sums(keyphrases, labels, classes=classes, embeddings=embeddings, features=rff,
                                blocks=blocks, block_scale=block_scale, kind=kind, max_per_doc=max_per_doc,
                                groups=groups)
        noisy = noise.add_laplace(sums, scale=scale)  # the statistic goes through the (OpenDP) sampler
        members.append(RFFMember(rff, blocks, block_scale, noisy, eps_member, scale))
        if progress is not None:
            progress((j + 1) / len(layout), f"DP-KDE member {j + 1}/{len(layout)} ({blocks} block(s))")
    return RFFDensity(kind, classes, tuple(members), bandwidth, features, length, epsilon)
