"""Private prediction: clipped-logit exponential mechanism + sparse vector ([PrivPred], Algorithm 1; docs/DESIGN.md §3).

Every private document becomes one *private prompt* ("Here is a document: … Write a similar one."). Prompts are
partitioned into disjoint batches by a keyed hash of the prompt (Assumption 1; optionally grouped by label). For
each batch, synthetic text is decoded token by token from ALL the batch's prompts in parallel (one batched
forward pass per token, KV cache over the batch), plus one public prompt in the same forward pass:

* Eq. (1): each logit vector z is clipped and re-centred, clip_c(z)_i = max(−c, z_i − max_j z_j + c);
  z̄ = (1/s)·Σ clip_c(z) over the batch (s = the *expected* batch size, a public constant), x ~ softmax(z̄/τ).
* Sparse vector (optional): d = ‖(1/s)·Σ softmax(z) − softmax(z_public)‖₁ (Eq. 2) + Laplace(2σ) is compared
  with a noisy threshold θ + Laplace(σ); below it the token is drawn from the public distribution
  softmax(z_public/τ_public) at no privacy cost; at or above it a private token is drawn and the threshold is
  refreshed.
* At most r private tokens per batch (Theorem 1 bounds the privacy loss by r). Once r is reached, the example
  being written is finished from the public distribution only (post-processing of the released prefix) and no
  new example starts.

Privacy (Theorem 1): ρ = r·(½(c/(sτ))² + 2/(sσ)²)-zCDP per batch (the SVT term only when the SVT runs),
parallel composition across the disjoint batches, converted to (ε, δ)-DP with ε = ρ + √(4ρ·log(1/δ)) or the
tighter ε = inf_{α>1} αρ + (log(1/δ) + (α−1)·log(1 − 1/α) − log α)/(α − 1) (Canonne et al. 2020, Cor. 13; the
paper's δ-form of the same bound). :func:`~dpkps_core.baselines.prediction_config.calibrate` picks the clip c (or
τ) for a target (ε, δ); the public parameters and prompt templates live in :mod:`.prediction_config`.

The private text DOES enter the (local) model's prompt: :data:`PRIVATE_PROMPT_WARNING` must be shown wherever
this method is offered. Prompts holding private text are never logged or written; only counts are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
import time
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.baselines.prediction_config import (
    METHOD,
    PRIVATE_PROMPT_WARNING,
    PrivatePredictionConfig,
    calibrate,
    prediction_event,
    private_messages,
    public_messages,
)
from dpkps_core.ledger_store.units import document_units
from dpkps_core.method.config import PRIVATE_PREDICTION_LIMITS
from dpkps_core.corpus.model import check_class_names
from dpkps_core.dp.accounting import zcdp_to_epsilon
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, PrivacyEvent
from dpkps_core.dp.release import AdmittedUnits, ReleaseContext, admit_units, release
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_delta, check_positive_int
from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm.decoder import BatchedDecoder  # noqa: F401 - the lock-step decoder Algorithm 1 drives
from dpkps_core.llm.local import chat_token_ids, stop_token_ids  # one definition each, shared with the backends
from dpkps_core.records.privacy_report import PrivacyReport
from dpkps_core.progress import Progress


# ------------------------------------------------------------------------------------------------ Eq. 1 / Eq. 2

def clip_logits(z: Any, c: float) -> Any:
    """Eq. (1): clip_c(z)_i = max(−c, z_i − max_j z_j + c), row-wise for a (…, V) array or tensor."""
    try:
        import torch

        if isinstance(z, torch.Tensor):
            return torch.clamp(z - z.max(dim=-1, keepdim=True).values + c, min=-c)
    except ImportError:  # pragma: no cover
        pass
    z = np.asarray(z, dtype=np.float64)
    return np.maximum(-c, z - z.max(axis=-1, keepdims=True) + c)


def svt_distance(private_logits: Any, public_logits: Any, *, batch_size: float) -> float:
    """Eq. (2): d(Z, z_pub) = ‖(1/s)·Σ_{z∈Z} softmax(z) − softmax(z_pub)‖₁ (sensitivity 1/s)."""
    import torch

    z = torch.as_tensor(private_logits, dtype=torch.float32)
    zp = torch.as_tensor(public_logits, dtype=torch.float32)
    mean = torch.softmax(z, dim=-1).sum(dim=0) / float(batch_size) if z.shape[0] else torch.zeros_like(zp)
    return float((mean - torch.softmax(zp, dim=-1)).abs().sum())


# ----------------------------------------------------------------------------------------------------- batches

def batch_key(text: str, *, label: str | None, key: str, num_buckets: int) -> tuple[str | None, int]:
    """Batch of one prompt from the prompt alone (Assumption 1): ``(label, SHA-256(key ‖ text) mod B)``.

    The private document's text stands for its prompt (the prompt is that text in a public template)."""
    h = hashlib.sha256(f"{key}\x00{text}".encode("utf-8")).digest()
    return label, int.from_bytes(h[:8], "big") % num_buckets


def assign_batches(
    texts: Sequence[str], labels: Sequence[str] | None = None, *, num_buckets: int, group_by_label: bool = True,
    key: str = "dpkps-private-prediction",
) -> dict[tuple[str | None, int], list[int]]:
    """Disjoint, deterministic batches (indices into ``texts``) keyed by ``(label or None, bucket)``.

    A prompt's batch depends only on the prompt (and its label when grouping), never on the other prompts, so
    adding or removing one document changes exactly one batch ([PrivPred] Assumption 1, Lemma 2)."""
    b = check_positive_int(num_buckets, "number of hash buckets", maximum=PRIVATE_PREDICTION_LIMITS["num_buckets"])
    if group_by_label and labels is None:
        raise ParameterError("Grouping batches by label needs the labels.")
    out: dict[tuple[str | None, int], list[int]] = {}
    for i, t in enumerate(texts):
        lab = labels[i] if group_by_label and labels is not None else None
        out.setdefault(batch_key(t, label=lab, key=key, num_buckets=b), []).append(i)
    return out


def buckets_for(class_size: float, batch_size: int) -> int:
    """Hash buckets per class so that batches hold ≈ s prompts: ⌊n_c / s⌋ (at least 1). ``class_size`` must be a
    public figure (an estimate) — deriving it from the private corpus makes the batch layout depend on n."""
    return max(1, int(float(class_size) // max(int(batch_size), 1)))


# ---------------------------------------------------------------------------------------- batched decoding

def _truncate(tokenizer: Any, text: str, max_tokens: int) -> str:
    ids = tokenizer.encode(text[: max_tokens * 12], add_special_tokens=False)
    if len(ids) <= max_tokens:
        return text
    return tokenizer.decode(ids[:max_tokens], skip_special_tokens=True)


# --------------------------------------------------------------------------------------------- Algorithm 1

@dataclasses.dataclass
class BatchOutcome:
    """What one batch produced: texts, and (local diagnostics) how many tokens were private or public."""

    key: tuple[str | None, int]
    size: int
    texts: list[str]
    private_tokens: int
    public_tokens: int
    public_after_budget: int
    prompt_tokens: int
    forward_passes: int
    rows_decoded: int
    seconds: float


def _sample(logits: Any, temperature: float, candidates: Any, rng: np.random.Generator) -> int:
    """x ~ softmax(logits/τ) over ``candidates`` (all tokens when None), in float64."""
    z = logits if candidates is None else logits[candidates]
    z = z.double().cpu().numpy() / temperature
    z = z - z.max()
    p = np.exp(z)
    p /= p.sum()
    k = int(rng.choice(p.shape[0], p=p))
    return int(candidates[k]) if candidates is not None else k


def generate_batch(
    model: Any, tokenizer: Any, prompts: Sequence[Sequence[Mapping[str, str]]], public_prompt: Sequence[Mapping[str, str]],
    *, config: PrivatePredictionConfig, noise: NoiseSource, key: tuple[str | None, int] = (None, 0),
    stop_ids: set[int] | None = None, cancel: threading.Event | None = None,
) -> BatchOutcome:
    """Algorithm 1 on ONE batch: the batch's private prompts decoded together, the public prompt in its own pass.

    The public prompt has its own decoder (its own forward passes), so its logits never depend on the private
    prompts — not even through the padded width of a shared batch, which moves a real model's logits by round-off
    ([PrivPred] §3: z_public must be a function of public input only)."""
    import torch

    t0 = time.perf_counter()
    s = float(config.batch_size)
    stop_ids = stop_token_ids(model, tokenizer) if stop_ids is None else stop_ids
    rows = [chat_token_ids(tokenizer, m) for m in prompts]
    pad = getattr(tokenizer, "pad_token_id", None)
    pad = pad if pad is not None else (next(iter(stop_ids)) if stop_ids else 0)
    dec_pub = BatchedDecoder(model, [chat_token_ids(tokenizer, public_prompt)], pad_id=pad, rows_per_forward=1)
    dec_priv = BatchedDecoder(model, rows, pad_id=pad, rows_per_forward=config.rows_per_forward) if rows else None
    decoders = [d for d in (dec_priv, dec_pub) if d is not None]
    n_priv = len(prompts)
    svt = config.svt_enabled
    theta = float(config.svt_threshold) if svt else -math.inf
    sigma = float(config.svt_noise)
    lap = lambda scale: float(noise.laplace(scale, 1)[0])  # noqa: E731
    theta_hat = theta + lap(sigma) if svt else -math.inf  # line 4: noisy threshold
    t = 0
    texts: list[str] = []
    n_public = n_after = 0
    for e in range(config.examples_per_batch):
        if t >= config.private_tokens or (cancel is not None and cancel.is_set()):
            break
        if e > 0:
            for dec in decoders:
                dec.reset()
        x: list[int] = []
        while len(x) < config.max_new_tokens:
            z_pub = dec_pub.logits()[0]
            z_priv = dec_priv.logits() if dec_priv is not None else z_pub.new_zeros((0, z_pub.shape[0]))
            cand = None
            if config.public_top_k is not None and config.public_top_k < z_pub.shape[0]:
                cand = torch.topk(z_pub, config.public_top_k).indices  # a PUBLIC candidate set ([PrivPred] §E.1)
            if t >= config.private_tokens:
                private = False  # budget spent: public continuation (post-processing of the released prefix)
                n_after += 1
            elif svt:
                d = svt_distance(z_priv, z_pub, batch_size=s)  # Eq. (2)
                private = d + lap(2 * sigma) >= theta_hat  # line 12–13
            else:
                private = True
            if private:
                zbar = clip_logits(z_priv, config.clip).sum(dim=0) / s if n_priv else torch.zeros_like(z_pub)  # Eq. 1
                token = _sample(zbar, config.temperature, cand, noise.rng)  # line 15
                t += 1
                if svt:
                    theta_hat = theta + lap(sigma)  # line 17: fresh noisy threshold
            else:
                token = _sample(z_pub, config.public_temperature, cand, noise.rng)  # line 19
                n_public += 1
            if token in stop_ids:
                break
            x.append(token)
            if len(x) < config.max_new_tokens:
                for dec in decoders:
                    dec.append(token)
        texts.append(tokenizer.decode(x, skip_special_tokens=True).strip())
    return BatchOutcome(key, n_priv, texts, t, n_public - n_after, n_after,
                        sum(dec.prompt_tokens for dec in decoders), sum(dec.forward_passes for dec in decoders),
                        sum(dec.rows_decoded for dec in decoders), time.perf_counter() - t0)


@dataclasses.dataclass
class PrivatePredictionResult:
    """Synthetic documents and the public accounting of one private-prediction run.

    ``stats`` are LOCAL diagnostics: its prompt counts, batch sizes and prompt tokens are exact private figures
    (private, local — never written to a release, an audit log or a progress message)."""

    documents: list[dict[str, Any]]
    config: PrivatePredictionConfig
    epsilon: float
    delta: float
    rho: float
    conversion: str
    event: PrivacyEvent
    stats: dict[str, Any]
    warning: str = PRIVATE_PROMPT_WARNING

    def privacy_report(self) -> PrivacyReport:
        """The run's typed privacy report (:class:`~dpkps_core.records.privacy_report.PrivacyReport`): its ledger event and
        public settings, in the JSON layout private prediction has always written."""
        return PrivacyReport(
            method=METHOD, epsilon_total=self.epsilon, delta_total=self.delta, neighbouring=self.event.neighbouring,
            guarantee="(ε, δ)-differential privacy of the synthetic texts (Theorem 1 of [PrivPred]: ρ-zCDP per "
                      "batch, parallel composition over disjoint hash batches)",
            events=(self.event,), parameters=self.config.to_dict(),
            details={"rho_zcdp": self.rho, "conversion": self.conversion, "warning": self.warning},
            layout=("method", "epsilon_total", "delta_total", "rho_zcdp", "conversion", "neighbouring", "guarantee",
                    "warning", "events", "parameters"))


def run_private_prediction(
    texts: Sequence[str], labels: Sequence[str], *, model: Any, tokenizer: Any, config: PrivatePredictionConfig,
    epsilon: float | None = None, delta: float, per_class: int | Mapping[str, int], num_buckets: int,
    classes: Sequence[str], context: ReleaseContext | None = None, conversion: str = "tight",
    model_name: str = "local-model", progress: Progress | None = None, cancel: threading.Event | None = None,
    units: Sequence[str] | None = None, neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
    charged_event: PrivacyEvent | None = None,
) -> PrivatePredictionResult:
    """Algorithm 1 over a labelled PRIVATE corpus (training part only).

    Charge first (docs/DESIGN.md §2.0): every refusal on public input happens first; then, with a ledger in
    ``context``, the units are admitted (the individual privacy filter charges them) and the run's event is charged —
    all BEFORE the first private prompt is built or reaches the model. A crash, Ctrl-C or cancellation after that
    leaves ε charged. Only the admitted documents take part.

    Args:
        texts, labels: the private documents (each becomes one private prompt) and their labels.
        model, tokenizer: a local causal LM returning logits (HF-style forward with a KV cache).
        config: public parameters; with ``epsilon`` given, c is calibrated first (:func:`calibrate`).
        delta: the δ of the (ε, δ) guarantee.
        per_class: synthetic documents wanted per class (int or mapping) — ⌈K/examples_per_batch⌉ batches per
            class are run: the first buckets 0, 1, … (a public choice; unused batches are never touched). Without
            ``group_by_label`` the batches mix classes and Σ per_class documents come out with an empty label.
        num_buckets: hash buckets per class (public; see :func:`buckets_for`).
        classes: the DECLARED public class names (required: a list read off the private labels would be a
            data-dependent choice steering which batches run).
        context: the release's noise source (Laplace SVT noise and token sampling) and ledger, which admits the
            units and is charged ONE event (parallel composition over batches) with δ, up front
            (:class:`~dpkps_core.dp.release.ReleaseContext`; default: OS-entropy noise, no ledger).
        units: one unit string per document (:func:`dpkps_core.ledger_store.units.unit_strings`); default: document units.
        neighbouring: the neighbouring relation of the guarantee (the corpus's privacy unit).
        charged_event: the caller has ALREADY admitted the units and charged this event (e.g. a
            :func:`reservation_event` charged with a DP count before it); the run checks that its calibrated ε
            fits it and charges nothing more.
    """
    if len(texts) != len(labels):
        raise ParameterError("Private prediction needs exactly one label per document.")
    if units is not None and len(units) != len(texts):
        raise ParameterError("Private prediction needs exactly one privacy unit per document.")
    if epsilon is not None:
        config = calibrate(config, epsilon=epsilon, delta=delta, conversion=conversion)
    config = config.validate()
    delta = check_delta(delta)
    noise = context.noise if context is not None else NoiseSource()
    plan, num_buckets = _batch_plan(config, per_class=per_class, num_buckets=num_buckets, classes=classes)
    rho = config.rho()
    eps = zcdp_to_epsilon(rho, delta, conversion=conversion)
    planned_docs = sum(max(n, 1) for _, _, n in plan)
    report = progress or (lambda f, m: None)
    stops = stop_token_ids(model, tokenizer)
    if charged_event is not None:  # the caller admitted the units and charged this event: nothing more here
        if eps > charged_event.epsilon * (1 + 1e-9) or delta > charged_event.delta * (1 + 1e-9):
            raise ParameterError(f"Private prediction would spend ε = {eps:g}, δ = {delta:g}, more than the "
                                 f"ε = {charged_event.epsilon:g}, δ = {charged_event.delta:g} charged for it.")
        event, accountant = charged_event, None
    else:
        event = prediction_event(config, delta=delta, conversion=conversion, num_buckets=num_buckets,
                                 batches=len(plan), documents=planned_docs, neighbouring=neighbouring)
        accountant = context.ledger if context is not None else None

    def decode(_: AdmittedUnits, docs: tuple[Sequence[str], Sequence[str]]) -> tuple[Any, list[dict[str, Any]], float]:
        t0 = time.perf_counter()
        outcomes, documents = _decode_plan(plan, *docs, model=model, tokenizer=tokenizer, config=config,
                                           num_buckets=num_buckets, noise=noise, stops=stops, model_name=model_name,
                                           report=report, cancel=cancel)
        return outcomes, documents, time.perf_counter() - t0

    # charge first (docs/DESIGN.md §2.0; the order is dpkps_core.dp.release's): the units admitted, the admitted
    # documents only (the left-out count is private: it goes nowhere), the event charged; only then prompts are built
    done = release(
        lambda: admit_units(accountant, units if units is not None else document_units(texts, labels),
                            epsilon=eps, what="private prediction"),  # no ledger: everyone, nothing charged here
        statistic=lambda admitted: admitted.rows(texts, labels),
        event=event, draw=decode)
    outcomes, documents, elapsed = done.value
    report(1.0, f"private prediction: {len(documents)} documents")
    return PrivatePredictionResult(documents, config, eps, delta, rho, conversion, event,
                                   _local_stats(outcomes, documents, batches=len(plan), elapsed=elapsed))


_Plan = list[tuple[tuple[str | None, int], str | None, int]]  # (batch key, label given to its documents, examples)


def _batch_plan(config: PrivatePredictionConfig, *, per_class: int | Mapping[str, int], num_buckets: int,
                classes: Sequence[str]) -> tuple[_Plan, int]:
    """Which batches run and how many documents each writes — from public input only (the declared classes, the
    documents wanted, the buckets): the first buckets 0, 1, … of each class ([PrivPred] Assumption 1). Returns the
    plan and the checked number of buckets."""
    classes = check_class_names(classes, minimum=1)  # declared public input, never read off the labels
    wanted = {c: int(per_class[c]) if isinstance(per_class, Mapping) else int(per_class) for c in classes}
    for c, k in wanted.items():
        check_positive_int(k, f"synthetic documents for class {c!r}", minimum=0)
    need = {c: math.ceil(k / config.examples_per_batch) for c, k in wanted.items()}
    num_buckets = check_positive_int(num_buckets, "number of hash buckets", maximum=PRIVATE_PREDICTION_LIMITS["num_buckets"])
    if config.group_by_label and max(need.values(), default=0) > num_buckets:
        raise ParameterError(
            f"{max(need.values())} batches per class are needed but only {num_buckets} hash buckets exist; raise "
            "examples per batch or the number of buckets (a smaller batch size s)."
        )
    plan: _Plan = []
    if config.group_by_label:
        for c in classes:
            left = wanted[c]
            for b in range(need[c]):
                plan.append(((c, b), c, min(config.examples_per_batch, left)))
                left -= config.examples_per_batch
    else:
        total = sum(wanted.values())
        n_batches = math.ceil(total / config.examples_per_batch)
        if n_batches > num_buckets:
            raise ParameterError(f"{n_batches} batches are needed but only {num_buckets} hash buckets exist.")
        for b in range(n_batches):
            plan.append(((None, b), None, config.examples_per_batch))
    return plan, num_buckets


def _decode_plan(plan: _Plan, texts: Sequence[str], labels: Sequence[str], *, model: Any, tokenizer: Any,
                 config: PrivatePredictionConfig, num_buckets: int, noise: NoiseSource, stops: set[int],
                 model_name: str, report: Progress, cancel: threading.Event | None
                 ) -> tuple[list[BatchOutcome], list[dict[str, Any]]]:
    """Algorithm 1 on every planned batch (the admitted documents' prompts, private, in memory only); returns the
    batches' outcomes and the synthetic documents."""
    label_seq = list(labels) if config.group_by_label else None
    batches = assign_batches(texts, label_seq, num_buckets=num_buckets, group_by_label=config.group_by_label,
                             key=config.hash_key)
    outcomes: list[BatchOutcome] = []
    documents: list[dict[str, Any]] = []
    for i, (key, label, n_examples) in enumerate(plan):
        if cancel is not None and cancel.is_set():
            break
        members = batches.get(key, [])
        report(i / max(len(plan), 1), f"private prediction: batch {i + 1}/{len(plan)}")  # batch sizes are private
        bcfg = dataclasses.replace(config, examples_per_batch=max(n_examples, 1))
        prompts = [private_messages(_truncate(tokenizer, texts[j], config.max_prompt_tokens), config, labels[j])
                   for j in members]
        pub_label = label if config.include_label else None
        out = generate_batch(model, tokenizer, prompts, public_messages(config, pub_label), config=bcfg, noise=noise,
                             key=key, stop_ids=stops, cancel=cancel)
        del prompts
        outcomes.append(out)
        for text in out.texts:
            documents.append({"id": f"pp-{len(documents) + 1:06d}", "label": label if label is not None else "",
                              "text": text, "model": model_name, "method": METHOD})
    return outcomes, documents


def _local_stats(outcomes: Sequence[BatchOutcome], documents: Sequence[Mapping[str, Any]], *, batches: int,
                 elapsed: float) -> dict[str, Any]:
    """LOCAL diagnostics of a run; prompts, batch sizes and prompt tokens are exact private figures."""
    n_priv = sum(o.private_tokens for o in outcomes)
    n_pub = sum(o.public_tokens + o.public_after_budget for o in outcomes)
    generated = n_priv + n_pub
    return {
        "batches": batches, "prompts": sum(o.size for o in outcomes) + len(outcomes),
        "private_prompts": sum(o.size for o in outcomes), "public_prompts": len(outcomes),
        "batch_sizes": [o.size for o in outcomes], "prompt_tokens": sum(o.prompt_tokens for o in outcomes),
        "generated_tokens": generated, "private_tokens": n_priv, "public_tokens": n_pub,
        "public_tokens_after_budget": sum(o.public_after_budget for o in outcomes),
        "forward_passes": sum(o.forward_passes for o in outcomes),
        "row_tokens_decoded": sum(o.rows_decoded for o in outcomes), "seconds": elapsed,
        "tokens_per_s": generated / elapsed if elapsed > 0 else None,
        "empty_documents": sum(1 for d in documents if not d["text"]),
        "private_local": ["prompts", "private_prompts", "batch_sizes", "prompt_tokens", "forward_passes",
                          "row_tokens_decoded"],
    }


# --------------------------------------------------------------------------------------------- local model

def load_local_lm(backend: Any = None, *, threads: int | None = None, device: str | None = None) -> tuple[Any, Any, str]:
    """``(model, tokenizer, name)`` of a local model: the bundled offline model (default) or any
    :class:`~dpkps_core.llm.local.LocalTransformersBackend` (``local`` backend: a model folder on disk), on the
    backend's device (``device`` = auto/cpu/cuda for the default offline model)."""
    from dpkps_core.llm.local import LocalTransformersBackend, OfflineBackend

    if backend is None:
        import os

        backend = OfflineBackend(threads=threads or max(1, os.cpu_count() or 1), device=device)
    if not isinstance(backend, LocalTransformersBackend):
        raise LLMError("Private prediction needs token logits, so it runs only on a local model (offline or local "
                       "backend), never on a remote API.")
    model, tok = backend.model_and_tokenizer()
    return model, tok, backend.model
