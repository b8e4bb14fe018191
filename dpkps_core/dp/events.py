"""Privacy events: one frozen, typed event per mechanism family (docs/DESIGN.md §2, §2.0).

In the manner of Google's ``dp_accounting`` (whose ``DpEvent`` subclasses — ``LaplaceDpEvent``,
``GaussianDpEvent`` … — describe a mechanism run by typed fields), every mechanism run is recorded as a frozen
event. :class:`PrivacyEvent` holds what every release has (mechanism, step, ε, δ, neighbouring relation,
sensitivity, noise scale, what was released, when); it is also the *generic* event, with a free-form ``params``
mapping, for mechanisms without a family here and for files whose parameters no family fits.

Each family — here DP-KPS's pure ε-DP Laplace releases (:class:`LaplaceCountEvent`,
:class:`VocabularyHistogramEvent`, :class:`SmoothedHistogramEvent`, :class:`RFFKDEEvent`,
:class:`ForecastStatisticsEvent`), in :mod:`dpkps_core.dp.baseline_events` the baselines' (ε, δ) releases — knows
its mechanism name (:func:`register_family` files it under that name), takes its public parameters as typed,
validated keyword fields, and checks them against ε, sensitivity and noise scale (e.g.
b = Δ/ε for the Laplace mechanism, Dwork & Roth 2014 Thm 3.6). Its ``params`` is a read-only mapping built from
those fields, so :meth:`PrivacyEvent.to_dict` writes the JSON layout the ledger, the privacy report and the bundle
have always held, and :meth:`PrivacyEvent.from_dict` reads it back into the right family — or, for an unknown
mechanism or parameters that do not fit (older files), into the generic event, never an error. The package's
``__init__`` imports every family module, so whichever module a reader imports, every family is registered.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import numbers
from types import MappingProxyType
from typing import Any, ClassVar, Mapping, TypeVar

from dpkps_core.dp.rng import SAMPLERS
from dpkps_core.dp.validation import check_delta, check_epsilon
from dpkps_core.errors import ParameterError

ADD_REMOVE_ONE_DOCUMENT = "add/remove one document"

#: the keys of :meth:`PrivacyEvent.to_dict`, in the order every ledger, report and bundle has written them
EVENT_KEYS = ("mechanism", "step", "epsilon", "sensitivity", "noise_scale", "released", "neighbouring", "delta",
              "params", "timestamp")

_REL_TOL = 1e-9  # floating-point slack of the consistency checks (ε, Δ and b are computed, not typed in)

#: mechanism name → the families that record it, tried in order by :meth:`PrivacyEvent.from_dict`
EVENT_FAMILIES: dict[str, tuple[type["TypedPrivacyEvent"], ...]] = {}


def _freeze(params: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(params or {}))


def agrees(a: float, b: float) -> bool:
    """Whether two computed figures agree up to floating-point slack (a family's consistency checks)."""
    return math.isclose(float(a), float(b), rel_tol=_REL_TOL, abs_tol=0.0)


# ------------------------------------------------------------------------------------------ field validation

def typed_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """A whole number ≥ ``minimum`` (bool and fractions refused: a typed field is not coerced)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(f"{name} must be a whole number ≥ {minimum}, got {value!r}.")
    if value < minimum:
        raise ParameterError(f"{name} must be ≥ {minimum}, got {value!r}.")
    return int(value)


def typed_optional_int(value: Any, name: str) -> int | None:
    return None if value is None else typed_int(value, name)


def typed_number(value: Any, name: str, *, allow_zero: bool = False) -> Any:
    """A finite real number > 0 (≥ 0 with ``allow_zero``), returned unchanged so that ``to_dict`` writes it as the
    mechanism computed it (an int stays an int)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or value < 0 or (value == 0 and not allow_zero):
        raise ParameterError(f"{name} must be a finite number {'≥' if allow_zero else '>'} 0, got {value!r}.")
    return value


def typed_text(value: Any, name: str, *, choices: tuple[str, ...] = ()) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(f"{name} must be a non-empty string, got {value!r}.")
    if choices and value not in choices:
        raise ParameterError(f"Unknown {name} {value!r}; choose one of {', '.join(choices)}.")
    return value


def typed_flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ParameterError(f"{name} must be True or False, got {value!r}.")
    return value


def _json(value: Any) -> str:
    """The JSON text of ``value`` (key order kept; NumPy scalars as their Python value)."""
    def plain(o: Any) -> Any:
        if hasattr(o, "tolist"):
            return o.tolist()
        raise TypeError(type(o).__name__)
    return json.dumps(value, default=plain, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------- the base event

@dataclasses.dataclass(frozen=True)
class PrivacyEvent:
    """One run of a DP mechanism (docs/DESIGN.md §2: "name, ε, sensitivity, noise scale, what it released").

    The generic event: the typed families below subclass it; this class itself holds a mechanism without a family
    (or an older file no family fits) with its parameters in ``params``.

    Attributes:
        mechanism: name of the mechanism (e.g. ``"laplace_vocabulary_histogram"``).
        step: pipeline step that ran it (``"vocabulary"``, ``"kde"``, ``"class_counts"``…).
        epsilon: ε spent by this event (after parallel composition where it applies).
        delta: δ spent (0 for the pure ε-DP mechanisms of DP-KPS).
        neighbouring: the neighbouring relation the guarantee is stated for.
        sensitivity: L1 (or L2, say so in ``params``) sensitivity of the released statistic.
        noise_scale: scale of the noise actually added (Laplace b, or Gaussian σ).
        released: what left the private side, in words.
        params: further public parameters (vocabulary size, features, …); stored read-only. A typed family
            builds it from its fields.
        timestamp: UTC time of the release, ISO 8601.
    """

    mechanism: str
    step: str
    epsilon: float
    sensitivity: float
    noise_scale: float
    released: str
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT
    delta: float = 0.0
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    timestamp: str = dataclasses.field(
        default_factory=lambda: _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "A privacy event's ε"))
        object.__setattr__(self, "delta", check_delta(self.delta, "A privacy event's δ", allow_zero=True))
        self._validate()
        object.__setattr__(self, "params", _freeze(self._build_params()))

    def _validate(self) -> None:
        """Check the family's typed fields (the generic event has none)."""

    def _build_params(self) -> Mapping[str, Any]:
        return self.params

    def to_dict(self) -> dict[str, Any]:
        """The event as written to ledgers, reports and bundles: :data:`EVENT_KEYS`, ``params`` a plain dict."""
        out = {key: getattr(self, key) for key in EVENT_KEYS}
        out["params"] = dict(self.params)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PrivacyEvent":
        """Read an event written by :meth:`to_dict` (this or an older version), whichever class it is called on.

        Dispatches on ``mechanism`` to its family; the family is used only when ``params`` holds exactly the
        family's keys, in its order, with values it would write itself (so ``to_dict`` gives the same JSON back).
        Otherwise — an unknown mechanism, missing or extra keys — the generic :class:`PrivacyEvent` keeps the
        params as they are. Keys other than :data:`EVENT_KEYS` are ignored."""
        common = {k: data[k] for k in EVENT_KEYS if k in data and k != "params"}
        params = data.get("params")
        for family in EVENT_FAMILIES.get(str(data.get("mechanism")), ()):
            event = family.read(common, params)
            if event is not None:
                return event
        if "params" in data:
            common["params"] = params
        return PrivacyEvent(**common)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TypedPrivacyEvent(PrivacyEvent):
    """Base of the typed families: ``mechanism`` must be the family's :attr:`MECHANISM`; ``params`` is built from
    the typed fields (read-only, not a constructor argument)."""

    MECHANISM: ClassVar[str] = ""
    #: params key → typed field, for the keys that are read back as they are written
    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {}

    params: Mapping[str, Any] = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    def _validate(self) -> None:
        if self.mechanism != self.MECHANISM:
            raise ParameterError(f"A {type(self).__name__} records mechanism {self.MECHANISM!r}, "
                                 f"got {self.mechanism!r}.")
        typed_number(self.sensitivity, "The sensitivity")
        typed_number(self.noise_scale, "The noise scale")
        self._validate_fields()

    def _validate_fields(self) -> None:
        """The family's own checks of its typed fields (every registered family defines them; the base class is
        never instantiated as an event)."""
        raise TypeError(f"{type(self).__name__} is a typed event family without its field checks; define "
                        "_validate_fields.")

    def _build_params(self) -> dict[str, Any]:
        """``params`` in the family's written order; by default :attr:`PARAM_FIELDS` in order."""
        return {key: getattr(self, name) for key, name in self.PARAM_FIELDS.items()}

    def _check_laplace(self) -> None:
        """The Laplace mechanism's scale: b = Δ/ε (Dwork & Roth 2014 Thm 3.6), so ε = Δ/b."""
        if not agrees(self.noise_scale * self.epsilon, self.sensitivity):
            raise ParameterError(f"A {type(self).__name__}'s Laplace scale b = {self.noise_scale!r} is not "
                                 f"Δ/ε = {self.sensitivity!r}/{self.epsilon!r}.")

    @classmethod
    def fields_from_params(cls, params: Mapping[str, Any]) -> dict[str, Any]:
        """The typed fields stored in a written ``params`` (KeyError when one is missing)."""
        return {name: params[key] for key, name in cls.PARAM_FIELDS.items()}

    @classmethod
    def read(cls, common: Mapping[str, Any], params: Any) -> "TypedPrivacyEvent | None":
        """This family's event from a written event's common keys and ``params``, or ``None`` when they do not
        fit it exactly (see :meth:`PrivacyEvent.from_dict`)."""
        if not isinstance(params, Mapping):
            return None
        try:
            event = cls(**common, **cls.fields_from_params(params))
            fits = _json(dict(event.params)) == _json(dict(params))
        except (ParameterError, KeyError, TypeError, ValueError):
            return None
        return event if fits else None


_Family = TypeVar("_Family", bound=type[TypedPrivacyEvent])


def register_family(family: _Family) -> _Family:
    """Class decorator: file ``family`` under its :attr:`~TypedPrivacyEvent.MECHANISM` for
    :meth:`PrivacyEvent.from_dict` (several families may share a mechanism; they are tried in order)."""
    if not family.MECHANISM:
        raise ParameterError(f"{family.__name__} names no mechanism.")
    EVENT_FAMILIES[family.MECHANISM] = EVENT_FAMILIES.get(family.MECHANISM, ()) + (family,)
    return family


# --------------------------------------------------------------------------------------------- Laplace families

@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class LaplaceCountEvent(TypedPrivacyEvent):
    """A Laplace(1/ε) count of documents (or persons) — the DP size estimate (docs/DESIGN.md §2.0, §2.2 "a DP estimate of
    n"; docs/PRIVACY.md, ``dp/count.py``).

    Neighbouring: add/remove one document (person unit: one person). Sensitivity: 1 (the count moves by one).
    Noise scale: the integer-valued Laplace scale b = 1/ε. No further parameters."""

    MECHANISM: ClassVar[str] = "laplace_document_count"

    def _validate_fields(self) -> None:
        if self.sensitivity != 1:
            raise ParameterError(f"A count has sensitivity 1, got {self.sensitivity!r}.")
        self._check_laplace()

    def _build_params(self) -> dict[str, Any]:
        return {"noise": "Laplace(1/ε), integer-valued", "charged": "before the noise was drawn"}


@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class VocabularyHistogramEvent(TypedPrivacyEvent):
    """The ε_voc release: a Laplace-noised histogram over EVERY term of the public vocabulary V, of each
    document's first S distinct terms, and its top N (docs/DESIGN.md §2.1).

    Neighbouring: add/remove one document (person unit: one person's first S distinct terms over all their
    documents). Sensitivity: L1 = S. Noise scale: Laplace b = S/ε_voc per term. The event is built before the
    noise exists, so it holds the requested N, never |Ṽ| (the noise-floor rule may keep fewer)."""

    MECHANISM: ClassVar[str] = "laplace_vocabulary_histogram"
    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {
        "vocabulary": "vocabulary", "vocabulary_size": "vocabulary_size", "terms_per_doc": "terms_per_doc",
        "requested_size": "requested_size", "selection_rule": "selection_rule", "laplace_sampler": "laplace_sampler"}

    vocabulary: str
    vocabulary_size: int
    terms_per_doc: int
    requested_size: int
    selection_rule: str
    laplace_sampler: str

    def _validate_fields(self) -> None:
        typed_text(self.vocabulary, "The public vocabulary's name")
        typed_int(self.vocabulary_size, "|V| (public vocabulary size)")
        typed_int(self.terms_per_doc, "S (terms per document)")
        typed_int(self.requested_size, "N (private vocabulary size)")
        if self.requested_size > self.vocabulary_size:
            raise ParameterError(f"N = {self.requested_size} is larger than |V| = {self.vocabulary_size}.")
        typed_text(self.selection_rule, "vocabulary selection rule")
        typed_text(self.laplace_sampler, "Laplace sampler", choices=SAMPLERS)
        if self.sensitivity != self.terms_per_doc:
            raise ParameterError(f"The vocabulary histogram's sensitivity is S = {self.terms_per_doc}, "
                                 f"got {self.sensitivity!r}.")
        self._check_laplace()


@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class SmoothedHistogramEvent(TypedPrivacyEvent):
    """The exact smoothed density (``dp/histogram.py``): per class, a Laplace-noised histogram of the documents'
    keyphrases over all of Ṽ, smoothed by a kernel of bandwidth σ afterwards (post-processing; docs/DESIGN.md §2.2's
    density without random features).

    Neighbouring: add/remove one document (person unit: one person). Sensitivity: L1 = 1 (a document's at most M
    keyphrases weigh 1 in total, in its one class). Noise scale: Laplace b = 1/ε_kde per bin. One event for all
    classes: parallel composition over their disjoint documents (docs/DESIGN.md §2)."""

    MECHANISM: ClassVar[str] = "laplace_smoothed_keyphrase_histogram"
    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {
        "classes": "classes", "private_vocabulary_size": "private_vocabulary_size", "bandwidth": "bandwidth",
        "max_keyphrases_per_doc": "max_keyphrases_per_doc"}

    classes: int
    private_vocabulary_size: int
    bandwidth: float
    max_keyphrases_per_doc: int | None = None

    def _validate_fields(self) -> None:
        typed_int(self.classes, "The number of classes", minimum=0)
        typed_int(self.private_vocabulary_size, "|Ṽ| (private vocabulary size)", minimum=0)
        typed_number(self.bandwidth, "σ (bandwidth)", allow_zero=True)
        typed_optional_int(self.max_keyphrases_per_doc, "M (keyphrases per document)")
        if self.sensitivity != 1:
            raise ParameterError(f"The smoothed histogram has sensitivity 1, got {self.sensitivity!r}.")
        self._check_laplace()


@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class RFFKDEEvent(TypedPrivacyEvent):
    """The ε_kde release of DP-KDE by random Fourier features (docs/DESIGN.md §2.2; Wagner et al. 2023) and its
    sequence ensembles (docs/DESIGN.md §2.4): per class and ensemble member, Laplace-noised sums of I features.

    Neighbouring: add/remove one document (person unit: one person). Sensitivity: L1 = √2·I per member, √2·I·J
    over the J members together (``sensitivity``). Noise scale: Laplace b = √2·I/(ε_kde/J) per coordinate —
    the J members split ε_kde evenly (:attr:`epsilon_per_member`). One event for all classes: parallel
    composition over their disjoint documents (docs/DESIGN.md §2)."""

    MECHANISM: ClassVar[str] = "laplace_rff_dp_kde"
    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {
        "kind": "kind", "features": "features", "bandwidth": "bandwidth", "member_blocks": "member_blocks",
        "length": "length", "max_keyphrases_per_doc": "max_keyphrases_per_doc", "classes": "classes"}

    kind: str
    features: int
    bandwidth: float
    member_blocks: tuple[int, ...]
    length: int
    max_keyphrases_per_doc: int
    classes: int

    def _validate_fields(self) -> None:
        typed_text(self.kind, "density kind")
        typed_int(self.features, "I (random features)")
        typed_number(self.bandwidth, "σ (bandwidth)")
        if isinstance(self.member_blocks, (str, bytes)) or not hasattr(self.member_blocks, "__iter__"):
            raise ParameterError(f"The ensemble's member blocks must be a sequence, got {self.member_blocks!r}.")
        blocks = tuple(typed_int(b, "A member's blocks") for b in self.member_blocks)
        if not blocks:
            raise ParameterError("A DP-KDE has at least one ensemble member.")
        object.__setattr__(self, "member_blocks", blocks)
        typed_int(self.length, "L (sequence length)")
        typed_int(self.max_keyphrases_per_doc, "M (keyphrases per document)")
        typed_int(self.classes, "The number of classes", minimum=0)
        if not agrees(self.sensitivity, math.sqrt(2.0) * self.features * self.members):
            raise ParameterError(f"The DP-KDE's sensitivity is √2·I·J = √2·{self.features}·{self.members}, "
                                 f"got {self.sensitivity!r}.")
        self._check_laplace()

    @property
    def members(self) -> int:
        """J, the number of ensemble members."""
        return len(self.member_blocks)

    @property
    def epsilon_per_member(self) -> float:
        """ε_kde/J, each member's share."""
        return self.epsilon / self.members

    def _build_params(self) -> dict[str, Any]:
        return {"kind": self.kind, "features": self.features, "bandwidth": self.bandwidth, "members": self.members,
                "member_blocks": list(self.member_blocks), "length": self.length,
                "max_keyphrases_per_doc": self.max_keyphrases_per_doc, "classes": self.classes}


@register_family
@dataclasses.dataclass(frozen=True, kw_only=True)
class ForecastStatisticsEvent(TypedPrivacyEvent):
    """The DP forecast (ε_forecast; docs/DESIGN.md §2, §6; ``dp/forecast.py``): V's count curve at K public thresholds
    and the per-class sizes, released together as one vector u = (a·G/S, (1 − a)·n).

    Neighbouring: add/remove one document (person unit: one person). Sensitivity: L1 = 1 for u (‖ΔG‖₁ ≤ S and
    ‖Δn‖₁ ≤ 1). Noise scale: Laplace b = 1/ε on u, i.e. S/(a·ε) per curve entry (:attr:`curve_noise_scale`) and
    1/((1 − a)·ε) per class (:attr:`class_noise_scale`) after rescaling."""

    MECHANISM: ClassVar[str] = "laplace_forecast_statistics"
    PARAM_FIELDS: ClassVar[Mapping[str, str]] = {
        "thresholds": "thresholds", "terms_per_doc": "terms_per_doc", "curve_share": "curve_share",
        "curve_noise_scale": "curve_noise_scale", "class_noise_scale": "class_noise_scale", "classes": "classes",
        "public_vocabulary_size": "public_vocabulary_size"}

    thresholds: int
    terms_per_doc: int
    curve_share: float
    curve_noise_scale: float
    class_noise_scale: float
    classes: int
    public_vocabulary_size: int

    def _validate_fields(self) -> None:
        typed_int(self.thresholds, "The number of thresholds")
        typed_int(self.terms_per_doc, "S (terms per document)")
        share = typed_number(self.curve_share, "The curve share")
        if not share < 1:
            raise ParameterError(f"The forecast's curve share must lie strictly between 0 and 1, got {share!r}.")
        typed_int(self.classes, "The number of classes")
        typed_int(self.public_vocabulary_size, "|V| (public vocabulary size)", minimum=0)
        if self.sensitivity != 1:
            raise ParameterError(f"The forecast vector has sensitivity 1, got {self.sensitivity!r}.")
        self._check_laplace()
        # the rescaled scales are recorded as the mechanism drew them (dp/forecast.py ``noise_scales``): that the
        # draws match S/(a·ε) and 1/((1 − a)·ε) is the mechanism's statistical test, not the event's
        typed_number(self.curve_noise_scale, "The curve's noise scale")
        typed_number(self.class_noise_scale, "The class sizes' noise scale")
