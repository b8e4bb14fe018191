"""Keyphrase-sequence sampling from the DP densities (docs/DESIGN.md §2.4; [DP-KPS] §2 Step 4). Post-processing only.

* Independent: score every term of Ṽ once per class; draw L i.i.d. terms ∝ max(s, 0)^(1/T).
* Iterative: for i = 1..L score every extension P·w of each prefix P with the ensemble member for step i and
  draw w ∝ max(s, 0)^(1/T). Fast path (docs/DESIGN.md §2.4): ωᵀ[P; w; 0] is a sum of per-block projections, so with
  A = √u·E_Ṽ Ω_bᵀ·√2/σ (|Ṽ| × I) and a running projection p per prefix,
  s = √2 [cos(A)(F̃ ∘ cos(p + β))ᵀ − sin(A)(F̃ ∘ sin(p + β))ᵀ] — two GEMMs per step for a batch of prefixes.
If every score of a row is ≤ 0 the draw falls back to uniform over Ṽ, and the result counts how often.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import numpy as np

from dpkps_core.dp.kde import RFFDensity, RFFMember
from dpkps_core.dp.rff import SQRT2
from dpkps_core.dp.validation import check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError
from dpkps_core.method.sequences import KeyphraseSequence

# The sequence samplers (docs/DESIGN.md §2.4; [DP-KPS] appendix B). Not to be confused with the generation methods of
# :data:`dpkps_core.baselines.compare.GENERATION_METHODS`.
SAMPLING_METHODS = ("independent", "iterative-linear", "iterative-log")


@dataclasses.dataclass(frozen=True)
class SamplingOutcome:
    sequences: tuple[KeyphraseSequence, ...]
    uniform_fallbacks: int  # draws where every score was ≤ 0 (uniform over Ṽ was used)
    draws: int


def weights_from_scores(scores: np.ndarray, temperature: float) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise sampling weights max(s, 0)^(1/T), normalised; rows with no positive score become uniform.

    ``temperature = 0`` is argmax. Returns (probabilities, boolean mask of uniform-fallback rows).
    """
    scores = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    pos = np.maximum(scores, 0.0)
    empty = ~(pos > 0).any(axis=1)
    if temperature == 0:
        w = (pos == pos.max(axis=1, keepdims=True)) & (pos > 0)
        w = w.astype(np.float64)
    else:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # scale rows first so that large powers 1/T cannot overflow
            top = np.where(empty, 1.0, pos.max(axis=1))[:, None]
            w = (pos / top) ** (1.0 / temperature)
    w[empty] = 1.0
    w /= w.sum(axis=1, keepdims=True)
    return w, empty


def draw_rows(probabilities: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per row (vectorised inverse CDF)."""
    cdf = np.cumsum(probabilities, axis=1)
    u = rng.random((probabilities.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf < u).sum(axis=1), probabilities.shape[1] - 1)


def sample_independent(
    class_scores: np.ndarray, *, classes: Sequence[str], terms: Sequence[str], per_class: int | dict[str, int],
    length: int, temperature: float = 1.0, rng: np.random.Generator,
) -> SamplingOutcome:
    """L i.i.d. draws per sequence from each class's term distribution ∝ max(s_c, 0)^(1/T)."""
    length = check_positive_int(length, "L (sequence length)")
    temperature = check_positive_float(temperature, "temperature T", allow_zero=True)
    probs, empty = weights_from_scores(class_scores, temperature)
    out: list[KeyphraseSequence] = []
    fallbacks = 0
    for ci, c in enumerate(classes):
        k = per_class[c] if isinstance(per_class, dict) else per_class
        if k <= 0:
            continue
        idx = rng.choice(len(terms), size=(k, length), p=probs[ci])
        fallbacks += int(empty[ci]) * k * length
        out.extend(KeyphraseSequence(id="", label=c, keyphrases=tuple(terms[i] for i in row), method="independent") for row in idx)
    return SamplingOutcome(_with_ids(out), fallbacks, sum(len(s.keyphrases) for s in out))


class IterativeScorer:
    """Scores of every extension of a batch of prefixes under one class's RFF ensemble (the GEMM fast path).

    Per step, for the member m of that step: A = √u·E Ω_{m,b}ᵀ·√2/σ; cos(A), sin(A) are cached per (member,
    block) and shared by all classes. ``scores(prefixes, class_index)`` returns (B, |Ṽ|).
    """

    def __init__(self, density: RFFDensity, embeddings: np.ndarray) -> None:
        self.density = density
        self.embeddings = np.asarray(embeddings, dtype=np.float32)
        self.d = self.embeddings.shape[1]
        self._trig: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def block_projection(self, member: RFFMember, block: int) -> np.ndarray:
        """A_{m,b} = √u · E_Ṽ Ω_{m,b}ᵀ · √2/σ (|Ṽ| × I), block 0-based."""
        omega_b = member.features.omega[:, block * self.d:(block + 1) * self.d]
        return (self.embeddings @ omega_b.T) * (member.block_scale * member.features.projection_scale)

    def trig_for(self, m: int, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        key = (m, block)
        if key not in self._trig:
            a = self.block_projection(self.density.members[m], block)
            self._trig = {key: (a, np.cos(a), np.sin(a))}  # keep only the current step's matrices
        return self._trig[key]

    def prefix_projection(self, member: RFFMember, prefixes: np.ndarray) -> np.ndarray:
        """Σ_b A_{m,b}[prefix_b] for each row (B, I) — one GEMM over the concatenated prefix embeddings."""
        b, n = prefixes.shape
        if n == 0:
            return np.zeros((b, member.features.n_features), dtype=np.float32)
        z = self.embeddings[prefixes].reshape(b, n * self.d)
        omega = member.features.omega[:, : n * self.d]
        return (z @ omega.T) * (member.block_scale * member.features.projection_scale)

    def scores_from_projection(self, m: int, step: int, proj: np.ndarray, class_index: int | np.ndarray) -> np.ndarray:
        """(B, |Ṽ|) scores from running projections ``proj`` (B, I); ``class_index`` is one class or one per row."""
        member = self.density.members[m]
        _, cos_a, sin_a = self.trig_for(m, step - 1)
        phase = proj + member.features.beta
        f_tilde = member.noisy_sums.astype(np.float32)[class_index]
        left = np.cos(phase) * f_tilde
        right = np.sin(phase) * f_tilde
        return SQRT2 * (left @ cos_a.T - right @ sin_a.T)

    def scores(self, prefixes: np.ndarray, class_index: int) -> np.ndarray:
        """(B, |Ṽ|) scores of every extension of each prefix (B, i−1) at step i = prefix length + 1."""
        step = prefixes.shape[1] + 1
        m = self.density.member_index_for_step(step)
        proj = self.prefix_projection(self.density.members[m], prefixes)
        return self.scores_from_projection(m, step, proj, class_index)


def reference_extension_scores(
    density: RFFDensity, embeddings: np.ndarray, prefix: Sequence[int], class_index: int
) -> np.ndarray:
    """The straightforward computation the fast path must match: for each candidate w build the zero-padded
    vector [√u·e(P); √u·e(w); 0…] of the member's dimension and evaluate Σ_i F̃_i f_i(·). (Slow; tests only.)"""
    step = len(prefix) + 1
    member = density.members[density.member_index_for_step(step)]
    d = embeddings.shape[1]
    out = np.empty(embeddings.shape[0])
    for w in range(embeddings.shape[0]):
        z = np.zeros(member.blocks * d)
        for b, t in enumerate(list(prefix) + [w]):
            z[b * d:(b + 1) * d] = member.block_scale * embeddings[t]
        out[w] = member.noisy_sums[class_index] @ member.features.transform(z[None, :])[0]
    return out


def sample_iterative(
    density: RFFDensity, embeddings: np.ndarray, *, terms: Sequence[str], per_class: int | dict[str, int],
    temperature: float = 1.0, rng: np.random.Generator, batch_size: int = 1024,
    progress: Callable[[float, str], None] | None = None,
) -> SamplingOutcome:
    """Autoregressive sampling (linear or log ensemble): w_i ∝ max(s(P·w), 0)^(1/T), batched GEMMs."""
    temperature = check_positive_float(temperature, "temperature T", allow_zero=True)
    if density.kind == "independent":
        raise ParameterError("Iterative sampling needs an iterative-linear or iterative-log density.")
    scorer = IterativeScorer(density, embeddings)
    length = density.length
    counts = [(per_class[c] if isinstance(per_class, dict) else per_class) for c in density.classes]
    row_class = np.repeat(np.arange(len(density.classes)), counts)
    seqs = np.zeros((row_class.size, length), dtype=np.int64)
    fallbacks = 0
    batches = [(s0, min(s0 + batch_size, row_class.size)) for s0 in range(0, row_class.size, batch_size)]
    proj = [None] * len(batches)
    current = -1
    for step in range(1, length + 1):  # steps outside, batches inside: each A_{m,b} is computed once
        m = density.member_index_for_step(step)
        for bi, (lo, hi) in enumerate(batches):
            if m != current:  # a new member: recompute the running projections of the prefixes
                proj[bi] = scorer.prefix_projection(density.members[m], seqs[lo:hi, : step - 1])
            s = scorer.scores_from_projection(m, step, proj[bi], row_class[lo:hi])
            probs, empty = weights_from_scores(s, temperature)
            fallbacks += int(empty.sum())
            chosen = draw_rows(probs, rng)
            seqs[lo:hi, step - 1] = chosen
            proj[bi] = proj[bi] + scorer.trig_for(m, step - 1)[0][chosen]
        current = m
        if progress is not None:
            progress(step / length, f"sampled position {step}/{length} of {row_class.size} sequences")
    out = [
        KeyphraseSequence(id="", label=density.classes[ci], keyphrases=tuple(terms[i] for i in row),
                          method=density.kind)
        for ci, row in zip(row_class, seqs)
    ]
    return SamplingOutcome(_with_ids(out), fallbacks, len(out) * length)


def _with_ids(seqs: list[KeyphraseSequence]) -> tuple[KeyphraseSequence, ...]:
    return tuple(dataclasses.replace(s, id=f"seq-{i + 1:06d}") for i, s in enumerate(seqs))
