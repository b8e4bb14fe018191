"""The public side of private prediction ([PrivPred], Algorithm 1; docs/DESIGN.md §3): its parameters
(:class:`PrivatePredictionConfig`), their privacy under Theorem 1 (ρ-zCDP per batch, :func:`~dpkps_core.dp.accounting.rho_per_batch`), their
calibration to a target (ε, δ) (:func:`calibrate`), the ledger events charged for a run before it starts
(:func:`prediction_event`, :func:`reservation_event`: public input only, docs/DESIGN.md §2.0 "charge first"), and the
prompt templates.

Everything here is public input; the mechanism that reads the private documents is
:mod:`dpkps_core.baselines.private_prediction`. The private text DOES enter the (local) model's prompt:
:data:`PRIVATE_PROMPT_WARNING` must be shown wherever the method is offered.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from dpkps_core.method.config import PRIVATE_PREDICTION_LIMITS
from dpkps_core.dp.accounting import calibrate_private_prediction, rho_per_batch, zcdp_to_epsilon
from dpkps_core.dp.baseline_events import PrivatePredictionEvent, PrivatePredictionReservationEvent
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.validation import check_delta, check_epsilon, check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError

METHOD = "private-prediction"
MECHANISM = "private_prediction_clipped_logits_svt"
STEP = "private_prediction"
PRIVATE_PROMPT_WARNING = (
    "Private prediction puts PRIVATE documents into the language model's prompt. Run it only on a local model "
    "(the bundled offline model); never send these prompts to a remote API."
)
PUBLIC_PLACEHOLDER = "<text of {doc_type}>"
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant who writes realistic documents."
PRIVATE_TEMPLATE = (
    "Here is {doc_type}:\n\n{text}\n\n"
    "Write {doc_type} similar to the one above. Write only the document itself, with no title or preamble."
)
LABEL_SENTENCE = "The document is about: {label}."


# ---------------------------------------------------------------------------------------------- configuration

@dataclasses.dataclass(frozen=True)
class PrivatePredictionConfig:
    """Public parameters of Algorithm 1 ([PrivPred] Table 7 names in brackets).

    Attributes:
        batch_size: expected batch size s — the divisor of the batch sums (public; sets the sensitivity c/s).
        private_tokens: r, the most private tokens per batch.
        clip: c, the clip bound of Eq. (1).
        temperature: τ, the private sampling temperature.
        public_temperature: τ_public.
        svt_threshold: θ; ``None`` (or −∞) = no sparse vector (every token private, no SVT cost);
            +∞ = every token public (zero private tokens).
        svt_noise: σ, the SVT Laplace scale (threshold Laplace(σ), query Laplace(2σ)).
        max_new_tokens: most tokens per synthetic example.
        examples_per_batch: most synthetic examples written from one batch.
        public_top_k: sample only among the public prediction's top-k tokens ([PrivPred] §E.1, after Tang et al.;
            a public candidate set, so the exponential-mechanism analysis is unchanged); ``None`` = full vocabulary.
        max_prompt_tokens: each private document is cut to this many tokens before it enters its prompt.
        group_by_label: batches hold documents of one label (batch key = hash(label) ‖ hash(prompt)).
        doc_type: document type in words ("a news article").
        include_label: put the class name into the prompts (only when class names are public; default off).
        hash_key: public salt of the batch hash.
        rows_per_forward: most prompts in one forward pass (memory bound; the batch is split into chunks).
    """

    batch_size: int = 32
    private_tokens: int = 48
    clip: float = 10.0
    temperature: float = 2.0
    public_temperature: float = 1.5
    svt_threshold: float | None = None
    svt_noise: float = 0.2
    max_new_tokens: int = 48
    examples_per_batch: int = 1
    public_top_k: int | None = 100
    max_prompt_tokens: int = 192
    group_by_label: bool = True
    doc_type: str = "a document"
    include_label: bool = False
    hash_key: str = "dpkps-private-prediction"
    rows_per_forward: int = 64

    def validate(self) -> "PrivatePredictionConfig":
        check_positive_int(self.batch_size, "s (expected batch size)", maximum=PRIVATE_PREDICTION_LIMITS["batch_size"])
        check_positive_int(self.private_tokens, "r (private tokens per batch)", maximum=PRIVATE_PREDICTION_LIMITS["private_tokens"])
        check_positive_float(self.clip, "c (clip)")
        check_positive_float(self.temperature, "τ (temperature)")
        check_positive_float(self.public_temperature, "τ_public (public temperature)")
        if self.svt_enabled:
            check_positive_float(self.svt_noise, "σ (SVT noise)")
        if self.svt_threshold is not None and math.isnan(float(self.svt_threshold)):
            raise ParameterError("θ (SVT threshold) must be a number, −∞, +∞ or None.")
        check_positive_int(self.max_new_tokens, "maximum new tokens", maximum=PRIVATE_PREDICTION_LIMITS["max_new_tokens"])
        check_positive_int(self.examples_per_batch, "examples per batch", maximum=PRIVATE_PREDICTION_LIMITS["examples_per_batch"])
        if self.public_top_k is not None:
            check_positive_int(self.public_top_k, "public top-k")
        check_positive_int(self.max_prompt_tokens, "maximum prompt tokens", maximum=PRIVATE_PREDICTION_LIMITS["max_prompt_tokens"])
        check_positive_int(self.rows_per_forward, "rows per forward pass")
        if not isinstance(self.group_by_label, bool) or not isinstance(self.include_label, bool):
            raise ParameterError("group_by_label and include_label must be True or False.")
        if not str(self.doc_type).strip():
            raise ParameterError("The document type is empty; say what to write, e.g. 'a news article'.")
        return self

    @property
    def svt_enabled(self) -> bool:
        """Whether the sparse vector step runs (θ finite or +∞; None and −∞ switch it off)."""
        return self.svt_threshold is not None and not (math.isinf(self.svt_threshold) and self.svt_threshold < 0)

    def rho(self) -> float:
        return rho_per_batch(batch_size=self.batch_size, private_tokens=self.private_tokens, clip=self.clip,
                             temperature=self.temperature, svt_noise=self.svt_noise if self.svt_enabled else None)

    def epsilon(self, delta: float, *, conversion: str = "tight") -> float:
        return zcdp_to_epsilon(self.rho(), delta, conversion=conversion)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if out["svt_threshold"] is not None and math.isinf(out["svt_threshold"]):
            out["svt_threshold"] = "inf" if out["svt_threshold"] > 0 else "-inf"
        return out


def calibrate(
    config: PrivatePredictionConfig, *, epsilon: float, delta: float, solve_for: str = "clip",
    conversion: str = "tight",
) -> PrivatePredictionConfig:
    """The config with c (``solve_for="clip"``) or τ (``"temperature"``) set so that the reported ε ≤ target.

    Conservative: ρ_max = the largest ρ converting to at most ε (:func:`max_rho_for`); c is rounded *down* (τ
    *up*) to 4 significant digits and the result re-checked. Raises :class:`ParameterError` when the SVT term
    alone (2r/(sσ)²) already exceeds the budget."""
    config = config.validate()
    eps = check_epsilon(epsilon)
    delta = check_delta(delta)
    if solve_for not in ("clip", "temperature"):
        raise ParameterError("solve_for must be 'clip' or 'temperature'.")
    value = calibrate_private_prediction(
        epsilon=eps, delta=delta, batch_size=config.batch_size, private_tokens=config.private_tokens,
        clip=config.clip, temperature=config.temperature, svt_noise=config.svt_noise if config.svt_enabled else None,
        solve_for=solve_for, conversion=conversion)
    if solve_for == "clip":
        out = dataclasses.replace(config, clip=_round_sig(value, down=True))
    else:
        out = dataclasses.replace(config, temperature=_round_sig(value, down=False))
    for _ in range(1000):  # re-check after rounding; nudge further the safe way if round-off bites
        if out.epsilon(delta, conversion=conversion) <= eps:
            return out.validate()
        if solve_for == "clip":
            out = dataclasses.replace(out, clip=out.clip * (1 - 1e-4))
        else:
            out = dataclasses.replace(out, temperature=out.temperature * (1 + 1e-4))
    raise ParameterError("Could not calibrate private prediction to the target ε; lower r or raise s.")  # pragma: no cover


def _round_sig(x: float, *, down: bool, digits: int = 4) -> float:
    if x <= 0:
        return x
    scale = 10 ** (digits - 1 - math.floor(math.log10(x)))
    return (math.floor(x * scale) if down else math.ceil(x * scale)) / scale


# ------------------------------------------------------------------------------------------------ ledger events

def prediction_event(
    config: PrivatePredictionConfig, *, delta: float, conversion: str = "tight", num_buckets: int, batches: int,
    documents: int, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> PrivatePredictionEvent:
    """The frozen ledger event of one run of Algorithm 1 with the (calibrated) ``config``, from public input only
    (the planned batches and documents), so that it is charged BEFORE the first private prompt reaches the model
    (docs/DESIGN.md §2.0 "charge first")."""
    rho = config.rho()
    eps = zcdp_to_epsilon(rho, delta, conversion=conversion)
    return PrivatePredictionEvent(
        mechanism=MECHANISM, step=STEP, epsilon=eps, delta=delta, sensitivity=config.clip / config.batch_size,
        noise_scale=config.temperature, neighbouring=neighbouring,
        released=f"at most {documents} synthetic texts from {batches} disjoint hash batches (at most r = "
                 f"{config.private_tokens} private tokens each)",
        rho=rho, conversion=conversion, batch_size=config.batch_size, private_tokens=config.private_tokens,
        clip=config.clip, temperature=config.temperature, svt_threshold=config.svt_threshold,
        svt_noise=config.svt_noise if config.svt_enabled else None, num_buckets=num_buckets,
        group_by_label=config.group_by_label, public_top_k=config.public_top_k,
    )


def reservation_event(
    config: PrivatePredictionConfig, *, epsilon: float, delta: float, conversion: str = "tight", documents: int,
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> PrivatePredictionReservationEvent:
    """A charge-first reservation of ``epsilon`` for a run of Algorithm 1 whose clip c (and r) are calibrated
    later from a DP release (e.g. the hash buckets from a DP count): the run's calibrated ε never exceeds it
    (:func:`calibrate` is conservative), so charging the reservation up front over-states nothing the ledger must
    bound. The run passes it as ``charged_event`` to
    :func:`dpkps_core.baselines.private_prediction.run_private_prediction`."""
    eps = check_epsilon(epsilon, "ε (private prediction)")
    bound = calibrate(config, epsilon=eps, delta=delta, conversion=conversion)  # the largest c this ε allows
    return PrivatePredictionReservationEvent(
        mechanism=MECHANISM, step=STEP, epsilon=eps, delta=check_delta(delta),
        sensitivity=bound.clip / bound.batch_size, noise_scale=config.temperature, neighbouring=neighbouring,
        released=f"at most {documents} synthetic texts from disjoint hash batches (Algorithm 1 of [PrivPred])",
        conversion=conversion, batch_size=config.batch_size, private_tokens=config.private_tokens,
        temperature=config.temperature, svt_threshold=config.svt_threshold,
        svt_noise=config.svt_noise if config.svt_enabled else None, group_by_label=config.group_by_label,
        public_top_k=config.public_top_k,
    )


# ------------------------------------------------------------------------------------------------- prompts

def _label_suffix(label: str | None, config: PrivatePredictionConfig) -> str:
    return f"\n{LABEL_SENTENCE.format(label=label)}" if config.include_label and label else ""


def private_messages(text: str, config: PrivatePredictionConfig, label: str | None = None) -> list[dict[str, str]]:
    """Chat messages of one PRIVATE prompt (holds the private document; never logged)."""
    user = PRIVATE_TEMPLATE.format(doc_type=config.doc_type, text=text) + _label_suffix(label, config)
    return [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, {"role": "user", "content": user}]


def public_messages(config: PrivatePredictionConfig, label: str | None = None) -> list[dict[str, str]]:
    """The public prompt p_public: the private template with the document replaced by a fixed public stand-in text ([PrivPred]
    §E.2)."""
    return private_messages(PUBLIC_PLACEHOLDER.format(doc_type=config.doc_type), config, label)
