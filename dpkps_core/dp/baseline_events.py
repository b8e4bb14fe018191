"""Typed privacy events of the baselines' (ε, δ) mechanisms (docs/DESIGN.md §3, §4): private prediction (ρ-zCDP, paper
004 Algorithm 1) and AugPE+Ṽ's Gaussian votes (μ-GDP, [DP-KPS] Appendix C.1.3).

The families follow :mod:`dpkps_core.dp.events` (frozen, typed and validated fields, ``params`` built from them,
registered for :meth:`~dpkps_core.dp.events.PrivacyEvent.from_dict`); what differs is the accounting: ε is the
(ε, δ) conversion of ρ or μ (``dp/accounting.py``), so δ > 0, and the noise scale is τ or σ rather than Δ/ε.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from typing import Any, ClassVar, Mapping

from dpkps_core.dp.accounting import CONVERSIONS, rho_per_batch, zcdp_to_epsilon
from dpkps_core.dp.events import (
    TypedPrivacyEvent,
    agrees,
    register_family,
    typed_flag,
    typed_int,
    typed_number,
    typed_optional_int,
    typed_text,
)
from dpkps_core.errors import ParameterError

_PP_COMPOSITION = "parallel over disjoint hash batches ([PrivPred] Lemma 2)"


def _svt_threshold_param(theta: float | None) -> float | str | None:
    """θ as :meth:`PrivatePredictionConfig.to_dict` writes it: ±∞ as the strings ``"inf"`` / ``"-inf"``."""
    if theta is not None and math.isinf(theta):
        return "inf" if theta > 0 else "-inf"
    return theta


def _svt_threshold_field(value: Any) -> float | None:
    return float(value) if value in ("inf", "-inf") else value


@dataclasses.dataclass(frozen=True, kw_only=True)
class _PredictionSettings(TypedPrivacyEvent):
    """The public settings private prediction's two events share ([PrivPred] Algorithm 1; docs/DESIGN.md §3)."""

    MECHANISM: ClassVar[str] = "private_prediction_clipped_logits_svt"

    conversion: str
    batch_size: int
    private_tokens: int
    temperature: float
    svt_threshold: float | None
    svt_noise: float | None
    group_by_label: bool
    public_top_k: int | None

    @property
    def svt(self) -> bool:
        """Whether the sparse vector step runs (θ finite or +∞; ``None`` and −∞ switch it off)."""
        return self.svt_threshold is not None and not (math.isinf(self.svt_threshold) and self.svt_threshold < 0)

    def _validate_settings(self) -> None:
        typed_text(self.conversion, "zCDP conversion", choices=CONVERSIONS)
        typed_int(self.batch_size, "s (expected batch size)")
        typed_int(self.private_tokens, "r (private tokens per batch)")
        typed_number(self.temperature, "τ (temperature)")
        if self.svt_threshold is not None and (isinstance(self.svt_threshold, bool) or not isinstance(
                self.svt_threshold, numbers.Real) or math.isnan(self.svt_threshold)):
            raise ParameterError(f"θ (SVT threshold) must be a number, −∞, +∞ or None, got {self.svt_threshold!r}.")
        if self.svt:
            typed_number(self.svt_noise, "σ (SVT noise)")
        elif self.svt_noise is not None:
            raise ParameterError("Without the sparse vector step there is no SVT noise σ.")
        typed_flag(self.group_by_label, "group_by_label")
        typed_optional_int(self.public_top_k, "public top-k")
        if not 0 < self.delta < 1:
            raise ParameterError(f"Private prediction's (ε, δ) needs 0 < δ < 1, got {self.delta!r}.")
        if not agrees(self.noise_scale, self.temperature):
            raise ParameterError(f"Private prediction's noise scale is τ = {self.temperature!r}, "
                                 f"got {self.noise_scale!r}.")

    def _svt_params(self) -> dict[str, Any]:
        return {"svt": self.svt, "svt_threshold_theta": _svt_threshold_param(self.svt_threshold),
                "svt_noise_sigma": self.svt_noise}

    @classmethod
    def fields_from_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        fields = super().fields_from_params(params)
        fields["svt_threshold"] = _svt_threshold_field(params["svt_threshold_theta"])
        fields["svt_noise"] = params["svt_noise_sigma"]
        return fields


@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivatePredictionEvent(_PredictionSettings):
    """One run of private prediction ([PrivPred] Algorithm 1; docs/DESIGN.md §3) with its calibrated settings.

    Neighbouring: add/remove one document (person unit: one person), each prompt in one disjoint hash batch.
    Sensitivity: L∞ = c/s of the averaged clipped logits (Lemma 3); the SVT query's is 1/s. Noise scale: the
    sampling temperature τ (exponential mechanism); the SVT adds Laplace(σ) / Laplace(2σ). Privacy:
    ρ = r·(½(c/(sτ))² + 2/(sσ)²) zCDP per batch (:attr:`rho`; parallel composition over batches), and ε its
    (ε, δ) conversion (:attr:`conversion`, ``dp/accounting.py``)."""

    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {
        "rho_zcdp": "rho", "conversion": "conversion", "batch_size_s": "batch_size",
        "private_tokens_r": "private_tokens", "clip_c": "clip", "temperature_tau": "temperature",
        "num_buckets": "num_buckets", "group_by_label": "group_by_label", "public_top_k": "public_top_k"}

    rho: float
    clip: float
    num_buckets: int

    def _validate_fields(self) -> None:
        self._validate_settings()
        typed_number(self.rho, "ρ (zCDP)")
        typed_number(self.clip, "c (clip)")
        typed_int(self.num_buckets, "The number of hash buckets")
        if not agrees(self.sensitivity, self.clip / self.batch_size):
            raise ParameterError(f"Private prediction's sensitivity is c/s = {self.clip!r}/{self.batch_size}, "
                                 f"got {self.sensitivity!r}.")
        rho = rho_per_batch(batch_size=self.batch_size, private_tokens=self.private_tokens, clip=self.clip,
                            temperature=self.temperature, svt_noise=self.svt_noise)
        if not agrees(self.rho, rho):
            raise ParameterError(f"ρ = {self.rho!r} is not Theorem 1's ρ = {rho!r} for these settings.")
        eps = zcdp_to_epsilon(self.rho, self.delta, conversion=self.conversion)
        if not agrees(self.epsilon, eps):
            raise ParameterError(f"ε = {self.epsilon!r} is not the {self.conversion} conversion of ρ = {self.rho!r} "
                                 f"at δ = {self.delta!r} ({eps!r}).")

    def _build_params(self) -> dict[str, Any]:
        return {"rho_zcdp": self.rho, "conversion": self.conversion, "batch_size_s": self.batch_size,
                "private_tokens_r": self.private_tokens, "clip_c": self.clip, "temperature_tau": self.temperature,
                **self._svt_params(), "num_buckets": self.num_buckets, "group_by_label": self.group_by_label,
                "public_top_k": self.public_top_k, "composition": _PP_COMPOSITION,
                "sensitivity_note": "L∞ sensitivity c/s of the averaged clipped logits (Lemma 3); SVT query 1/s",
                "charged": "before the first private prompt reached the model"}


_RESERVED_R = re.compile(r"^upper bound c/s with r = (\d+);")


@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class PrivatePredictionReservationEvent(_PredictionSettings):
    """A charge-first reservation of ε for a private prediction run whose clip c (and r) are calibrated later from
    a DP release (docs/DESIGN.md §2.0, §3): the run's calibrated ε never exceeds the reserved one.

    Neighbouring: as :class:`PrivatePredictionEvent`. Sensitivity: an upper bound c/s, with the largest c the
    reserved ε allows at r = :attr:`private_tokens`. Noise scale: the sampling temperature τ."""

    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {
        "conversion": "conversion", "batch_size_s": "batch_size", "temperature_tau": "temperature",
        "group_by_label": "group_by_label", "public_top_k": "public_top_k"}

    def _validate_fields(self) -> None:
        self._validate_settings()

    @classmethod
    def fields_from_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        fields = super().fields_from_params(params)
        match = _RESERVED_R.match(str(params["sensitivity_note"]))
        if match is None:
            raise KeyError("sensitivity_note")
        fields["private_tokens"] = int(match.group(1))
        return fields

    def _build_params(self) -> dict[str, Any]:
        return {"reserved": True, "conversion": self.conversion, "batch_size_s": self.batch_size,
                "temperature_tau": self.temperature, **self._svt_params(), "group_by_label": self.group_by_label,
                "public_top_k": self.public_top_k, "composition": _PP_COMPOSITION,
                "calibration": "c calibrated to ε ≤ the reserved ε once the hash buckets are known (the run's "
                               "privacy report holds the calibrated c, r and ρ)",
                "sensitivity_note": f"upper bound c/s with r = {self.private_tokens}; a larger r after the DP count "
                                    "lowers c",
                "charged": "before any noise was drawn and before the first private prompt reached the model"}


@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class AugPEVoteEvent(TypedPrivacyEvent):
    """AugPE+Ṽ's T rounds of Gaussian-noised nearest-neighbour vote histograms (docs/DESIGN.md §4; [DP-KPS] Appendix
    C.1.3), all classes and epochs in one event.

    Neighbouring: add/remove one document (person unit: one person), one vote per document per epoch.
    Sensitivity: L2 = 1 per histogram. Noise scale: the Gaussian σ on every bin. Privacy: T composed Gaussian
    mechanisms are exactly μ-GDP with μ = √T/σ (:attr:`gdp_mu`; also ρ = T/(2σ²) zCDP, :attr:`rho`), converted
    to (ε, δ) by Balle–Wang δ(ε) (``dp/accounting.py``); parallel across classes (disjoint documents)."""

    MECHANISM: ClassVar[str] = "augpe_gaussian_nn_vote_histogram"
    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {
        "epochs_T": "epochs", "population_K": "population", "gdp_mu": "gdp_mu", "rho_zcdp": "rho",
        "vote_threshold_H": "vote_threshold"}

    epochs: int
    population: int
    gdp_mu: float
    rho: float
    vote_threshold: float

    def _validate_fields(self) -> None:
        typed_int(self.epochs, "T (epochs)")
        typed_int(self.population, "K (population)")
        typed_number(self.vote_threshold, "H (vote threshold)", allow_zero=True)
        if self.sensitivity != 1:
            raise ParameterError(f"A vote histogram has L2 sensitivity 1, got {self.sensitivity!r}.")
        if not 0 < self.delta < 1:
            raise ParameterError(f"AugPE's (ε, δ) needs 0 < δ < 1, got {self.delta!r}.")
        sigma = self.noise_scale
        if not agrees(typed_number(self.gdp_mu, "μ (GDP)"), math.sqrt(self.epochs) / sigma):
            raise ParameterError(f"μ = {self.gdp_mu!r} is not √T/σ for T = {self.epochs}, σ = {sigma!r}.")
        if not agrees(typed_number(self.rho, "ρ (zCDP)"), self.epochs / (2 * sigma ** 2)):
            raise ParameterError(f"ρ = {self.rho!r} is not T/(2σ²) for T = {self.epochs}, σ = {sigma!r}.")

    def _build_params(self) -> dict[str, Any]:
        return {"epochs_T": self.epochs, "population_K": self.population,
                "sensitivity_norm": "L2 (one vote per document per epoch)", "gdp_mu": self.gdp_mu,
                "rho_zcdp": self.rho,
                "accounting": "exact Gaussian-DP composition of T Gaussian mechanisms (μ = √T/σ), Balle–Wang δ(ε)",
                "composition": "parallel across classes (disjoint documents)", "vote_threshold_H": self.vote_threshold,
                "budget_split": "Ṽ (ε_voc, pure DP) is a separate event; total = ε_voc + ε_aug with this δ",
                "charged": "all T epochs, before the first prompt was sent"}
