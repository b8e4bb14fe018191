"""Baseline: AugPE with the private vocabulary, AugPE+Ṽ ([DP-KPS] §3 "Comparison to AugPE", App. C.1.3; docs/DESIGN.md §4).

Augmented Private Evolution (Xie et al. 2024) adapted as in the DP-KPS paper: class names are NOT put in any
prompt, and the random words of AugPE's first prompts are drawn from the DP private vocabulary Ṽ instead of a
class-specific word list. Per class, with a population of K synthetic texts:

1. *Random API*: K texts, each from a prompt holding ``words_per_prompt`` random words of Ṽ (the same,
   class-agnostic prompt distribution for every class).
2. For epoch t = 1..T (T = 10 by default, as in App. C.1.3):
   * every private document of the class votes once for its nearest synthetic text of the class in embedding
     space (unit-norm embeddings: nearest = largest dot product) — a histogram with L2 sensitivity 1 under
     add/remove of one document;
   * Gaussian noise N(0, σ²) is added to every bin (the DP release);
   * *selection*: K texts are drawn with replacement ∝ max(noisy votes − H, 0) (uniform if none is positive);
   * if t < T, *variation API*: each selected text is rewritten by the LLM (the prompt holds only that
     synthetic text and the public document type).
   The texts selected in epoch T are the output. Each synthetic document thus costs T prompts (1 random + T − 1
   variations) — ~T× DP-KPS's one prompt per document (the prompt budget :func:`prompt_budget` reports).

Privacy: T adaptive Gaussian mechanisms with sensitivity 1 compose EXACTLY to one Gaussian mechanism with
μ = √T/σ (Gaussian DP, Dong, Roth & Su 2022); its (ε, δ) curve is δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)
(Balle & Wang 2018). :func:`calibrate_sigma` picks the smallest σ (rounded up) whose curve gives δ at the target
ε_aug. Classes are disjoint sets of documents: parallel composition, one event. Ṽ is a separate pure
ε_voc-DP release, so AugPE+Ṽ as a whole is (ε_voc + ε_aug, δ)-DP: the budget split is total = ε_voc + ε_aug.
Private documents are embedded in memory only (never cached) and never enter a prompt.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import datetime as _dt
import math
import random
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dpkps_core.ledger_store.units import document_units
from dpkps_core.method.config import AUGPE_LIMITS
from dpkps_core.corpus.model import check_class_names
from dpkps_core.dp.accounting import calibrate_sigma, composed_mu, gaussian_epsilon
from dpkps_core.dp.baseline_events import AugPEVoteEvent
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, PrivacyEvent
from dpkps_core.dp.release import AdmittedUnits, ReleaseContext, admit_units, release
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_delta, check_epsilon, check_positive_float, check_positive_int
from dpkps_core.embeddings import Embedder, embed_texts
from dpkps_core.errors import ParameterError
from dpkps_core.records.privacy_report import PrivacyReport
from dpkps_core.progress import Progress

ChatMessages = list[dict[str, str]]

METHOD = "augpe"
MECHANISM = "augpe_gaussian_nn_vote_histogram"
STEP = "augpe"
SYSTEM_PROMPT = "You are a helpful assistant who writes realistic documents."
RANDOM_TEMPLATE = (
    "Write {doc_type} that uses some of the following words: {words}.\n"
    "Write only the document itself, with no title, preamble or explanation."
)
VARIATION_TEMPLATE = (
    "Rewrite the following text as {doc_type} in your own words: keep its subject and style, change the wording "
    "and some details.\n\n{text}\n\nWrite only the rewritten document, with no title, preamble or explanation."
)


# ----------------------------------------------------------------------------------------- Gaussian accounting

def prompt_budget(*, classes: int, population: int, epochs: int) -> dict[str, int]:
    """LLM prompts AugPE+Ṽ sends: C·K·T in all, T per synthetic document (DP-KPS: 1 per document)."""
    total = int(classes) * int(population) * int(epochs)
    return {"prompts": total, "documents": int(classes) * int(population), "prompts_per_document": int(epochs),
            "dpkps_prompts_for_same_documents": int(classes) * int(population)}


# ------------------------------------------------------------------------------------------------ votes

def nn_votes(private_embeddings: np.ndarray, synthetic_embeddings: np.ndarray) -> np.ndarray:
    """Each private document's one vote for its nearest synthetic text (unit-norm rows: max dot product).

    Returns integer counts of length ``len(synthetic_embeddings)``. Adding or removing one document changes one
    bin by 1: L1 = L2 sensitivity 1."""
    syn = np.asarray(synthetic_embeddings, dtype=np.float32)
    k = syn.shape[0]
    if k == 0:
        raise ParameterError("There are no synthetic texts to vote for.")
    priv = np.asarray(private_embeddings, dtype=np.float32)
    if priv.shape[0] == 0:
        return np.zeros(k, dtype=np.int64)
    # ‖x − y‖² = 2 − 2xᵀy on unit vectors; use the squared distance so non-normalised inputs still work
    d2 = (syn * syn).sum(1)[None, :] - 2.0 * priv @ syn.T
    return np.bincount(np.argmin(d2, axis=1), minlength=k).astype(np.int64)


def noisy_votes(votes: np.ndarray, *, sigma: float, noise: NoiseSource) -> np.ndarray:
    """votes + N(0, σ²) on every bin (the Gaussian mechanism; L2 sensitivity 1), drawn by ``noise``
    (OpenDP's Gaussian measurement by default, NumPy's when seeded)."""
    sigma = check_positive_float(sigma, "σ (Gaussian noise)")
    return noise.add_gaussian(np.asarray(votes, dtype=np.float64).reshape(-1), sigma=sigma)


def select(noisy: np.ndarray, *, k: int, threshold: float, rng: np.random.Generator) -> tuple[np.ndarray, bool]:
    """k indices drawn with replacement ∝ max(noisy − H, 0); uniform when no bin clears H (post-processing).

    Returns ``(indices, uniform_fallback)``."""
    w = np.maximum(np.asarray(noisy, dtype=np.float64) - float(threshold), 0.0)
    if w.sum() <= 0:
        return rng.integers(0, len(w), size=k), True
    return rng.choice(len(w), size=k, replace=True, p=w / w.sum()), False


# ---------------------------------------------------------------------------------------------- prompts

@dataclasses.dataclass(frozen=True)
class AugPEConfig:
    """Public parameters of AugPE+Ṽ.

    Attributes:
        epochs: T, vote/selection rounds (10 as in [DP-KPS] App. C.1.3); T prompts per synthetic document.
        population: K synthetic texts per class (the output size per class).
        words_per_prompt: random Ṽ words in each random-API prompt.
        vote_threshold: H, noisy votes below it count as 0 in the selection.
        doc_type: document type in words ("a news article").
        max_tokens: most tokens per LLM reply.
        temperature: LLM sampling temperature.
        retries: further attempts after a retryable backend failure.
        offline_batch: prompts per batched forward pass on the offline model.
    """

    epochs: int = 10
    population: int = 10
    words_per_prompt: int = 10
    vote_threshold: float = 0.0
    doc_type: str = "a document"
    max_tokens: int = 128
    temperature: float = 0.8
    retries: int = 2
    offline_batch: int = 16

    def validate(self) -> "AugPEConfig":
        check_positive_int(self.epochs, "epochs", maximum=AUGPE_LIMITS["epochs"])
        check_positive_int(self.population, "population per class", maximum=AUGPE_LIMITS["population"])
        check_positive_int(self.words_per_prompt, "words per prompt", maximum=AUGPE_LIMITS["words_per_prompt"])
        check_positive_float(self.vote_threshold, "vote threshold H", allow_zero=True)
        check_positive_int(self.max_tokens, "maximum tokens", maximum=AUGPE_LIMITS["max_tokens"])
        if not (isinstance(self.temperature, (int, float)) and 0 <= self.temperature <= 2):
            raise ParameterError(f"The temperature must be between 0 and 2, got {self.temperature!r}.")
        check_positive_int(self.retries, "retries", minimum=0, maximum=20)
        check_positive_int(self.offline_batch, "offline batch")
        if not str(self.doc_type).strip():
            raise ParameterError("The document type is empty; say what to write, e.g. 'a news article'.")
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def random_api_messages(words: Sequence[str], config: AugPEConfig) -> ChatMessages:
    """Random-API prompt: the public template + random words of Ṽ (no class name, no private text)."""
    user = RANDOM_TEMPLATE.format(doc_type=config.doc_type, words=", ".join(words))
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def variation_messages(text: str, config: AugPEConfig) -> ChatMessages:
    """Variation-API prompt: the public template + one SYNTHETIC text."""
    user = VARIATION_TEMPLATE.format(doc_type=config.doc_type, text=text)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def word_pool(terms: Sequence[str], classes: Sequence[str]) -> list[str]:
    """Ṽ without terms equal to a class name (so no prompt ever names a class, even by chance)."""
    names = {c.strip().lower() for c in classes}
    return [t for t in terms if t.strip().lower() not in names]


# -------------------------------------------------------------------------------------------- generation

@dataclasses.dataclass
class GenerationStats:
    """LLM usage of a batch of prompts."""

    calls: int = 0          # requests / generations attempted (retries included)
    prompts: int = 0        # distinct prompts
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def add(self, other: "GenerationStats") -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")


def generate_texts(
    messages: Sequence[ChatMessages], *, backend: Any, max_tokens: int, temperature: float, retries: int = 2,
    offline_batch: int = 16, audit: list[dict[str, Any]] | None = None, purpose: str = "",
    cancel: threading.Event | None = None, progress: Progress | None = None,
) -> tuple[list[str | None], GenerationStats]:
    """One reply per prompt (None where it failed). PUBLIC prompts only — every prompt goes to ``audit``.

    A local backend (offline or ``local`` model folder) runs batched forward passes (left-padded ``generate``
    over ``offline_batch`` prompts at a time, on its device); any other backend gets concurrent ``generate``
    calls with the runner's retry and full-jitter backoff."""
    from dpkps_core.llm.local import LocalTransformersBackend

    if audit is not None:
        for m in messages:
            audit.append({"timestamp": _now(), "purpose": purpose, "backend": backend.name, "model": backend.model,
                          "parameters": {"max_tokens": max_tokens, "temperature": temperature}, "messages": m})
    if isinstance(backend, LocalTransformersBackend):
        return _generate_offline(messages, backend=backend, max_tokens=max_tokens, temperature=temperature,
                                 batch=offline_batch, cancel=cancel, progress=progress)
    return _generate_remote(messages, backend=backend, max_tokens=max_tokens, temperature=temperature,
                            retries=retries, cancel=cancel, progress=progress)


def _generate_offline(messages: Sequence[ChatMessages], *, backend: Any, max_tokens: int, temperature: float,
                      batch: int, cancel: threading.Event | None, progress: Progress | None) -> tuple[list[str | None], GenerationStats]:
    from dpkps_core.llm.backends import GenerationCancelled

    backend.load()
    stats = GenerationStats()
    out: list[str | None] = [None] * len(messages)
    t0 = time.perf_counter()
    for start in range(0, len(messages), batch):
        if cancel is not None and cancel.is_set():
            break
        chunk = list(messages[start:start + batch])
        tokens0 = backend.tokens_generated
        try:
            replies = backend.generate_batch(chunk, max_tokens=int(max_tokens), temperature=float(temperature),
                                             timeout=0.0, cancel=cancel)
        except GenerationCancelled:
            break
        for j, reply in enumerate(replies):
            out[start + j] = reply if isinstance(reply, str) else None
            stats.prompt_tokens += backend.count_prompt_tokens(chunk[j])  # the backend's public API
        stats.completion_tokens += backend.tokens_generated - tokens0
        stats.calls += len(chunk)
        stats.prompts += len(chunk)
        if progress is not None:
            progress(min(start + batch, len(messages)) / max(len(messages), 1), "generating")
    stats.failed = sum(1 for t in out if t is None)
    stats.seconds = time.perf_counter() - t0
    return out, stats


def _generate_remote(messages: Sequence[ChatMessages], *, backend: Any, max_tokens: int, temperature: float,
                     retries: int, cancel: threading.Event | None, progress: Progress | None) -> tuple[list[str | None], GenerationStats]:
    from dpkps_core.llm.retry import call_with_retries

    stats = GenerationStats(prompts=len(messages))
    lock = threading.Lock()
    rng = random.Random()
    cancel = cancel or threading.Event()
    t0 = time.perf_counter()

    def count_call(attempt: int) -> None:
        with lock:
            stats.calls += 1

    def one(m: ChatMessages) -> str | None:
        try:
            return call_with_retries(
                lambda: backend.generate(m, max_tokens=max_tokens, temperature=temperature, timeout=60.0),
                retries=retries, backoff_base=1.0, backoff_max=30.0, cancel=cancel, rng=rng,
                before_attempt=count_call)
        except Exception:  # noqa: BLE001 - cancelled, retries spent, a permanent error or a backend bug: no text
            return None

    workers = max(1, int(getattr(backend, "max_concurrency", 1)))
    out: list[str | None] = [None] * len(messages)
    done = 0
    with cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dpkps-augpe") as pool:
        futures = {pool.submit(one, m): i for i, m in enumerate(messages)}
        for fut in cf.as_completed(futures):
            out[futures[fut]] = fut.result()
            done += 1
            if progress is not None:
                progress(done / max(len(messages), 1), "generating")
    for m, text in zip(messages, out):
        stats.prompt_tokens += backend.count_prompt_tokens(m)
        if text is not None:
            stats.completion_tokens += math.ceil(len(text) / 4)
    stats.failed = sum(1 for t in out if t is None)
    stats.seconds = time.perf_counter() - t0
    return out, stats


# ------------------------------------------------------------------------------------------------- the run

@dataclasses.dataclass
class AugPEResult:
    """Synthetic documents and the public accounting of one AugPE+Ṽ run."""

    documents: list[dict[str, Any]]
    config: AugPEConfig
    epsilon: float          # of the Gaussian votes (ε_aug); Ṽ's ε_voc is a separate event
    delta: float
    sigma: float
    event: PrivacyEvent
    stats: dict[str, Any]
    audit: list[dict[str, Any]]

    def privacy_report(self) -> PrivacyReport:
        """The run's typed privacy report (:class:`~dpkps_core.records.privacy_report.PrivacyReport`): its one ledger event
        and public settings, in the JSON layout AugPE+Ṽ has always written."""
        return PrivacyReport(
            method=METHOD, neighbouring=self.event.neighbouring, epsilon_total=self.epsilon, delta_total=self.delta,
            guarantee="(ε_aug, δ)-DP for the vote histograms (T composed Gaussian mechanisms, exact Gaussian-DP "
                      "accounting); with Ṽ (pure ε_voc-DP) the synthetic texts are (ε_voc + ε_aug, δ)-DP",
            events=(self.event,), parameters=self.config.to_dict(),
            details={"epsilon_votes": self.epsilon, "delta": self.delta, "sigma": self.sigma,
                     "prompt_budget": self.stats.get("prompt_budget")},
            layout=("method", "epsilon_votes", "delta", "sigma", "neighbouring", "guarantee", "events", "parameters",
                    "prompt_budget"))


def augpe_event(config: AugPEConfig, *, sigma: float, delta: float,
                neighbouring: str = ADD_REMOVE_ONE_DOCUMENT) -> AugPEVoteEvent:
    """The frozen ledger event of one AugPE+Ṽ run (all T vote rounds, every class), from public input only, so
    that it is charged BEFORE the first prompt goes to the backend (docs/DESIGN.md §2.0 "charge first")."""
    n_epochs, k = config.epochs, config.population
    return AugPEVoteEvent(
        mechanism=MECHANISM, step=STEP, epsilon=gaussian_epsilon(sigma=sigma, epochs=n_epochs, delta=delta),
        delta=delta, sensitivity=1.0, noise_scale=sigma, neighbouring=neighbouring,
        released=f"{n_epochs} noisy nearest-neighbour vote histograms per class over {k} synthetic texts "
                 "(Gaussian noise on every bin)",
        epochs=n_epochs, population=k, gdp_mu=composed_mu(sigma=sigma, epochs=n_epochs),
        rho=n_epochs / (2 * sigma ** 2), vote_threshold=config.vote_threshold,
    )



def _vote_epochs(population: dict[str, list[str]], by_class: Mapping[str, np.ndarray], *, classes: Sequence[str],
                 config: AugPEConfig, embedder: Embedder, noise: NoiseSource, rng: np.random.Generator, sigma: float,
                 generate: Callable[[list[ChatMessages], str, float, float], list[str | None]],
                 report: Callable[[float, str], None], cancel: threading.Event | None
                 ) -> tuple[dict[str, list[str]], int, list[dict[str, Any]]]:
    """The T epochs of Private Evolution ([DP-KPS] Appendix C.1.3; docs/DESIGN.md §4): per class, every private document
    votes for its nearest synthetic text, the histogram is released with Gaussian noise, the texts above the
    threshold are kept and varied by the LLM (not after the last epoch). Returns the final population, how many
    selections fell back to uniform, and the noisy vote histograms (DP releases)."""
    k, n_epochs = config.population, config.epochs
    fallbacks = 0
    vote_log: list[dict[str, Any]] = []
    for epoch in range(1, n_epochs + 1):
        if cancel is not None and cancel.is_set():
            break
        lo = 0.05 + 0.9 * epoch / n_epochs
        report(lo, f"AugPE+Ṽ: epoch {epoch}/{n_epochs}: nearest-neighbour votes + Gaussian noise (σ = {sigma:.3g})")
        flat = [t for c in classes for t in population[c]]
        syn = embed_texts(flat, embedder)
        selected: dict[str, list[str]] = {}
        for i, c in enumerate(classes):
            votes = nn_votes(by_class[c], syn[i * k:(i + 1) * k])  # private; released only with noise
            noisy = noisy_votes(votes, sigma=sigma, noise=noise)
            del votes
            idx, fb = select(noisy, k=k, threshold=config.vote_threshold, rng=rng)
            fallbacks += int(fb)
            vote_log.append({"epoch": epoch, "class": c, "noisy_votes": [round(float(v), 2) for v in noisy]})
            selected[c] = [population[c][j] for j in idx]
        if epoch < n_epochs:
            msgs = [variation_messages(t, config) for c in classes for t in selected[c]]
            replies = generate(msgs, f"variation (epoch {epoch})", lo, 0.05 + 0.9 * (epoch + 0.9) / n_epochs)
            population = {c: [replies[i * k + j] or selected[c][j] for j in range(k)] for i, c in enumerate(classes)}
        else:
            population = selected
    return population, fallbacks, vote_log


def run_augpe(
    texts: Sequence[str], labels: Sequence[str], *, vocabulary_terms: Sequence[str], classes: Sequence[str],
    config: AugPEConfig, epsilon: float, delta: float, embedder: Embedder, backend: Any,
    context: ReleaseContext | None = None, model_name: str | None = None,
    progress: Progress | None = None, cancel: threading.Event | None = None, units: Sequence[str] | None = None,
    neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> AugPEResult:
    """AugPE+Ṽ over a labelled PRIVATE corpus (training part only).

    Charge first (docs/DESIGN.md §2.0): after the refusals on public input, the units are admitted (the individual privacy
    filter charges them) and ONE event for all T epochs is charged — before any private document is embedded and
    before the first prompt reaches the backend (possibly a remote API; from epoch 1 on, the rewrite prompts are
    chosen by the noisy votes). A crash, Ctrl-C, backend error or cancellation after that leaves ε charged.

    Args:
        texts, labels: the private documents (embedded in memory only; never in a prompt).
        vocabulary_terms: Ṽ — a DP release (its ε_voc is accounted by whoever built it).
        classes: the DECLARED public class names (required: a list read off the private labels would be a
            data-dependent choice); never put in prompts.
        config: public parameters (epochs T, population K, …).
        epsilon, delta: the (ε_aug, δ) of the Gaussian votes; σ is calibrated to it.
        embedder: public embedding model for the nearest-neighbour votes.
        backend: an :class:`~dpkps_core.llm.backends.LLMBackend`.
        context: the release's noise source (Gaussian noise, word draws, selection) and ledger, which admits the
            units and is charged ONE event (parallel composition across classes) with δ, up front
            (:class:`~dpkps_core.dp.release.ReleaseContext`; default: OS-entropy noise, no ledger).
        units: one unit string per document (:func:`dpkps_core.ledger_store.units.unit_strings`); default: document units.
        neighbouring: the neighbouring relation of the guarantee (the corpus's privacy unit).
    """
    config = config.validate()
    eps = check_epsilon(epsilon, "ε (AugPE votes)")
    delta = check_delta(delta)
    if len(texts) != len(labels):
        raise ParameterError("AugPE needs exactly one label per document.")
    if units is not None and len(units) != len(texts):
        raise ParameterError("AugPE needs exactly one privacy unit per document.")
    classes = check_class_names(classes, minimum=1)  # declared public input, never read off the labels
    pool = word_pool(vocabulary_terms, classes)
    if not pool:
        raise ParameterError("The private vocabulary Ṽ is empty; AugPE+Ṽ needs its words for the first prompts.")
    ledger = context.ledger if context is not None else None
    if ledger is not None:
        ledger.require(eps, "AugPE+Ṽ")  # a refusal on public input (the cap), before anything is read
    noise = context.noise if context is not None else NoiseSource()
    rng = noise.child()
    report = progress or (lambda f, m: None)
    t0 = time.perf_counter()
    sigma = calibrate_sigma(epsilon=eps, delta=delta, epochs=config.epochs)
    event = augpe_event(config, sigma=sigma, delta=delta, neighbouring=neighbouring)
    eps_reported = event.epsilon
    k, n_epochs = config.population, config.epochs
    audit: list[dict[str, Any]] = []
    gen = GenerationStats()

    def generate(msgs: list[ChatMessages], purpose: str, lo: float, hi: float) -> list[str | None]:
        out, st = generate_texts(msgs, backend=backend, max_tokens=config.max_tokens, temperature=config.temperature,
                                 retries=config.retries, offline_batch=config.offline_batch, audit=audit,
                                 purpose=purpose, cancel=cancel,
                                 progress=lambda f, m: report(lo + (hi - lo) * f, f"AugPE+Ṽ: {purpose}"))
        gen.add(st)
        return out

    def evolve(_: AdmittedUnits, docs: tuple[Sequence[str], Sequence[str]]) -> tuple[dict[str, list[str]], int, Any]:
        """The admitted documents embedded per class (in memory only; how many: private, local — not in the
        message), the random API, then the T noisy vote epochs (the release's noise)."""
        report(0.01, "AugPE+Ṽ: embedding the private documents (in memory only)")
        label_arr = np.asarray(docs[1])
        priv_emb = embed_texts(list(docs[0]), embedder)
        by_class = {c: priv_emb[label_arr == c] for c in classes}
        del priv_emb
        # 1. random API: class-agnostic prompts with random words of Ṽ
        n_words = min(config.words_per_prompt, len(pool))
        first = [random_api_messages([pool[i] for i in rng.choice(len(pool), size=n_words, replace=False)], config)
                 for _ in range(len(classes) * k)]
        replies = generate(first, "random API (Ṽ words)", 0.05, 0.05 + 0.9 / n_epochs)
        population = {c: [r or "" for r in replies[i * k:(i + 1) * k]] for i, c in enumerate(classes)}
        return _vote_epochs(population, by_class, classes=classes, config=config, embedder=embedder, noise=noise,
                            rng=rng, sigma=sigma, generate=generate, report=report, cancel=cancel)

    # charge first (docs/DESIGN.md §2.0; the order is dpkps_core.dp.release's): the units admitted (charged at once),
    # the admitted documents only (the left-out count is private: it goes nowhere), the event for all T epochs
    # charged; only then are the documents embedded and the first prompt sent
    done = release(
        lambda: admit_units(ledger, units if units is not None else document_units(texts, labels),
                            epsilon=eps_reported, what="AugPE+Ṽ"),  # no ledger: everyone, nothing charged here
        statistic=lambda admitted: admitted.rows(texts, labels),
        event=event, draw=evolve)
    population, fallbacks, vote_log = done.value
    name = model_name or getattr(backend, "model", "")
    documents = [{"id": f"augpe-{n + 1:06d}", "label": c, "text": t, "model": name, "method": METHOD}
                 for n, (c, t) in enumerate((c, t) for c in classes for t in population[c])]
    elapsed = time.perf_counter() - t0
    report(1.0, f"AugPE+Ṽ: {len(documents)} documents")
    stats = {**gen.to_dict(), "llm_calls": gen.calls, "wall_seconds": elapsed, "uniform_fallbacks": fallbacks,
             "distinct_documents": len({d["text"] for d in documents}), "noisy_votes": vote_log,
             "prompt_budget": prompt_budget(classes=len(classes), population=k, epochs=n_epochs),
             "sigma": sigma, "words_pool_size": len(pool)}
    return AugPEResult(documents, config, eps_reported, delta, sigma, event, stats, audit)
