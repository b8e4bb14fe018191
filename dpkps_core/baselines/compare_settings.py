"""The public settings of a comparison of generation methods at equal ε (docs/DESIGN.md §3–§5): the methods and their
labels, the planned joint cost of running several on the same data, and :class:`CompareSettings`.

Everything here is public input; :func:`dpkps_core.baselines.compare.compare_methods` runs the comparison.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from dpkps_core.method.config import SamplingConfig, build_sampling_config
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.errors import ParameterError

# The ways to make a synthetic corpus compared side by side (not the sequence samplers of
# :data:`dpkps_core.method.sampling.SAMPLING_METHODS`).
GENERATION_METHODS = ("dpkps", "private-prediction", "augpe")
METHOD_LABELS = {"dpkps": "DP-KPS", "private-prediction": "Private prediction", "augpe": "AugPE+Ṽ"}
COMPARE_PP_DEFAULTS = {"batch_size": 16, "max_prompt_tokens": 96, "public_top_k": 20}
"""Private prediction in a comparison: small batches and short prompts keep a CPU run to minutes (compute per
synthetic document grows with s × prompt length; the paper's s = 250 needs an accelerator). At small s the
privacy budget allows an effective logit range of only c/τ (≈ 4 nats at s = 16, ε = 10), so the candidate set is
the public prediction's top 20 (a public set; [PrivPred] §E.1 restricts to the top 1024 for the same reason)."""


COMPARE_FIXED_SETTINGS = ("eps_voc", "eps_kde", "per_class", "seed", "test_fraction", "split_seed", "client_fraction",
                          "corpus", "person_column")
"""DP-KPS settings a comparison decides itself (the same for every method), whatever ``sampling`` says."""


def joint_cost(methods: Sequence[str], *, eps_total: float, eps_voc: float, delta: float) -> tuple[float, float]:
    """Planned (ε, δ) of running ``methods`` in this order on the same data: every method spends ε_total; AugPE+Ṽ
    after DP-KPS reuses its Ṽ (ε_voc not spent again); the (ε, δ) methods each add δ."""
    eps, dlt = 0.0, 0.0
    for k, m in enumerate(methods):
        eps += eps_total - (eps_voc if m == "augpe" and "dpkps" in methods[:k] else 0.0)
        dlt += 0.0 if m == "dpkps" else float(delta)
    return eps, dlt


def size_epsilon(eps_total: float) -> float:
    """ε spent on the DP training-part count that sizes private prediction's hash buckets when no public
    class-size estimate is given: 5 % of the method's ε, at most 0.1 (Laplace(10) on n is ample for ⌊n/s⌋)."""
    return min(0.1, 0.05 * float(eps_total))


@dataclasses.dataclass(frozen=True)
class CompareSettings:
    """The public settings of one comparison (validated on construction; ``dataclasses.replace`` for variants).

    Attributes:
        eps_total: the total ε every method spends.
        methods: any of :data:`GENERATION_METHODS` (duplicates dropped, order kept).
        delta: δ of the (ε, δ) methods (DP-KPS uses none).
        per_class: synthetic documents per class, for every method.
        eps_voc: ε of the private vocabulary Ṽ shared by DP-KPS (ε_kde = ε_total − ε_voc) and AugPE+Ṽ
            (ε_aug = ε_total − ε_voc); None → ε_total / 2.
        max_tokens: most tokens per synthetic document (all methods).
        doc_type: the public document type ("a news article").
        temperature: LLM temperature of DP-KPS and AugPE+Ṽ generations.
        sampling: DP-KPS's :class:`~dpkps_core.method.config.SamplingConfig` (length, method, vocabulary, …); the
            comparison fixes its ε split, documents per class, corpus, noise seed and split. A mapping of settings
            is accepted and built into one (:func:`~dpkps_core.method.config.build_sampling_config`); None → the defaults.
        private_prediction: a :class:`~dpkps_core.baselines.private_prediction.PrivatePredictionConfig` (c is
            calibrated); None → the comparison's defaults.
        augpe_config: an :class:`~dpkps_core.baselines.augpe.AugPEConfig` (population = ``per_class``).
        class_size_estimate: a PUBLIC documents-per-class figure that sets private prediction's hash buckets;
            None → a DP count of the training part, charged to private prediction's ε.
        seeds: classifier seeds of the evaluation.
        seed: REPRODUCIBLE DEMO ONLY: seeds all DP noise (default OS entropy).
        test_fraction, split_seed: the held-out split (the same for every method).
        real_baseline: add the row "real documents (same count)".
        threads: CPU threads of the offline model.
    """

    eps_total: float
    methods: tuple[str, ...] = GENERATION_METHODS
    delta: float = 1e-6
    per_class: int = 2
    eps_voc: float | None = None
    max_tokens: int = 48
    doc_type: str = "a document"
    temperature: float = 0.7
    sampling: SamplingConfig | None = None
    private_prediction: Any = None
    augpe_config: Any = None
    class_size_estimate: float | None = None
    seeds: tuple[int, ...] = (0, 1, 2)
    seed: int | None = None
    test_fraction: float = 0.2
    split_seed: int = 0
    real_baseline: bool = True
    threads: int = 1

    def __post_init__(self) -> None:
        methods = tuple(dict.fromkeys(self.methods))
        unknown = [m for m in methods if m not in GENERATION_METHODS]
        if unknown or not methods:
            raise ParameterError(f"Unknown method(s) {unknown}; choose from {', '.join(GENERATION_METHODS)}.")
        eps_total = check_epsilon(self.eps_total, "ε (total)")
        if not 0 < float(self.delta) < 1:
            raise ParameterError(f"δ must be in (0, 1), e.g. 1e-6; got {self.delta!r}.")
        eps_voc = eps_total / 2 if self.eps_voc is None else check_epsilon(self.eps_voc, "ε_voc")
        if self.needs_vocabulary(methods) and eps_voc >= eps_total:
            raise ParameterError(f"ε_voc = {eps_voc:g} leaves nothing of ε = {eps_total:g} for the densities / "
                                 "votes; lower ε_voc.")
        for name, value in (("methods", methods), ("eps_total", eps_total), ("eps_voc", eps_voc),
                            ("delta", float(self.delta)),
                            ("per_class", check_positive_int(self.per_class, "synthetic documents per class",
                                                             maximum=100_000)),
                            ("max_tokens", check_positive_int(self.max_tokens, "maximum tokens", maximum=8192)),
                            ("seeds", tuple(int(x) for x in self.seeds) or (0,)),
                            ("sampling", self._sampling_config(self.sampling))):
            object.__setattr__(self, name, value)

    @staticmethod
    def _sampling_config(sampling: SamplingConfig | Mapping[str, Any] | None) -> SamplingConfig | None:
        """A mapping of DP-KPS settings built into a checked config; the entries the comparison fixes are left out."""
        if sampling is None or isinstance(sampling, SamplingConfig):
            return sampling
        if not isinstance(sampling, Mapping):
            raise ParameterError("sampling must be a SamplingConfig or a mapping of its settings.")
        return build_sampling_config(**{k: v for k, v in sampling.items() if k not in COMPARE_FIXED_SETTINGS})

    @staticmethod
    def needs_vocabulary(methods: Sequence[str]) -> bool:
        """Whether DP-KPS or AugPE+Ṽ runs (both use the private vocabulary Ṽ and an LLM backend)."""
        return "dpkps" in methods or "augpe" in methods

    def joint_cost(self) -> tuple[float, float]:
        """(ε, δ) of all the selected methods on the same data (:func:`joint_cost`)."""
        return joint_cost(self.methods, eps_total=self.eps_total, eps_voc=float(self.eps_voc), delta=self.delta)
