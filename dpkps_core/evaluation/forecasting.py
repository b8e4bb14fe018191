""""Will this work?" (DESIGN §6): the vocabulary noise floor, the expected share of Ṽ that is pure noise, the
density error against the spread of scores, a verdict.

Two ways to compute it (docs/PRIVACY.md "Previews that steer choices"):

* **DP forecast (default)** — :func:`dp_forecast`: a small, charged ε_forecast release of the statistics the
  forecast needs (``dpkps_core.dp.forecast``), then :func:`forecast_from_release` as post-processing. Choosing ε,
  N or a method from it stays inside the ledger's ε; re-forecasting other settings from the same release is free.
* **Exact preview** — :func:`forecast` on the training part's TRUE counts: private, local — NOT covered by ε
  (a choice made from it is a use of the data no ledger entry accounts for). Only behind an explicit
  ``exact=True`` (:func:`forecast_preview`, the CLI's ``--exact``) or the app's badged switch.

Nothing here logs or prints document text."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from dpkps_core import pipeline
from dpkps_core.density_plan import DensityPlan, default_bandwidth, density_plan
from dpkps_core.config import DENSITIES, LIMITS, SamplingConfig
from dpkps_core.budget import admit
from dpkps_core.corpus import Corpus
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.forecast import (DEFAULT_CURVE_SHARE, DEFAULT_FORECAST_EPSILON, ForecastStatistics,
                                    release_forecast_statistics)
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.rff import exact_gaussian_kernel
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.dp.vocabulary import PrivateVocabulary, noise_floor
from dpkps_core.embeddings import Embedder
from dpkps_core.errors import ParameterError
from dpkps_core.sampling import SAMPLING_METHODS
from dpkps_core.matching import TermMatcher
from dpkps_core.vocabulary import PublicVocabulary
from dpkps_core.evaluation.metrics import DISCLOSURE_NOTE, PRIVATE_NOTE

if TYPE_CHECKING:  # heavy imports stay lazy
    import plotly.graph_objects as go


# ------------------------------------------------------------------------------------------- forecast

@dataclasses.dataclass
class Forecast:
    """"Will this work?" before any ε is spent (DESIGN §6). Computed from the TRUE counts of the training part:
    PRIVATE, local only. Numbers, a verdict, and the data of :func:`forecast_figure`."""

    eps_voc: float
    eps_kde: float
    terms_per_doc: int
    vocab_size: int
    public_vocabulary_size: int
    method: str
    density: str
    n_documents: int
    class_sizes: dict[str, int]
    noise_scale: float
    noise_floor: float
    terms_in_corpus: int
    terms_above_floor: int
    nth_true_count: float
    expected_noise_share: float
    expected_real_terms: float
    count_curve: list[tuple[int, int]]
    kde: dict[str, dict[str, float]]
    kde_error_kind: str
    min_real_terms: int
    vocabulary_quality: str  # "good" (noise share ≤ max_noise_share), "usable" (≥ min_real_terms real terms), "poor"
    vocabulary_usable: bool
    kde_usable: bool
    suggested_eps_voc: float | None
    suggested_max_terms: int | None
    suggested_eps_kde: float | None
    verdict: str
    max_noise_share: float
    private: bool = True
    note: str = PRIVATE_NOTE
    disclosure_note: str = DISCLOSURE_NOTE
    #: True for the default DP forecast (post-processing of a charged ε_forecast release); False for the exact
    #: preview on true counts (private, local — not covered by ε; docs/PRIVACY.md "Previews").
    dp: bool = False
    epsilon_forecast: float = 0.0

    @property
    def covered_by_epsilon(self) -> bool:
        """Whether choosing settings from this forecast stays inside the ledger's ε (only the DP forecast)."""
        return self.dp

    @property
    def usable(self) -> bool:
        return self.vocabulary_usable and self.kde_usable

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["usable"] = self.usable
        d["covered_by_epsilon"] = self.covered_by_epsilon
        d["count_curve"] = [list(p) for p in self.count_curve]
        return d


def expected_noise_share(counts: np.ndarray, *, eps_voc: float, terms_per_doc: int, vocab_size: int,
                         reps: int = 5, seed: int = 0) -> tuple[float, float]:
    """Expected share of Ṽ that is pure noise — terms whose true count is 0 but whose noisy count makes the top N —
    and the expected number of real terms in Ṽ, by simulating the top-N selection ``reps`` times with Laplace(S/ε)
    on the TRUE counts (a local, private forecast; the simulation noise is not DP noise and nothing is released)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = min(int(vocab_size), counts.size)
    if n == 0:
        return 1.0, 0.0
    b = terms_per_doc / check_epsilon(eps_voc, "ε_voc")
    rng = np.random.default_rng(seed)
    shares = []
    for _ in range(max(int(reps), 1)):
        noisy = counts + rng.laplace(0.0, b, counts.size)
        top = np.argpartition(-noisy, n - 1)[:n] if n < counts.size else np.arange(n)
        shares.append(float(np.mean(counts[top] == 0)))
    share = float(np.mean(shares))
    return share, (1.0 - share) * n


def _count_curve(counts: np.ndarray, max_points: int = 200) -> list[tuple[int, int]]:
    """(c, number of terms with true count ≥ c) at the distinct positive counts (thinned to ≤ max_points)."""
    pos = np.sort(np.asarray(counts)[np.asarray(counts) > 0])
    if pos.size == 0:
        return []
    values = np.unique(pos)
    if values.size > max_points:
        values = np.unique(np.geomspace(values[0], values[-1], max_points).round().astype(np.int64))
    ge = pos.size - np.searchsorted(pos, values, side="left")
    return [(int(v), int(g)) for v, g in zip(values, ge)]


def forecast(
    corpus_train_texts: Sequence[str], labels: Sequence[str], vocabulary: PublicVocabulary, *, eps_voc: float,
    eps_kde: float, terms_per_doc: int = 10, vocab_size: int = 1000, method: str = "independent",
    density: str = "auto", length: int = 10, features: int | None = None, bandwidth: float | None = None,
    counts: np.ndarray | None = None, embedder: Embedder | None = None, min_real_terms: int | None = None,
    max_noise_share: float = 0.5, reps: int = 5, seed: int = 0,
) -> Forecast:
    """"Will this work?" — the EXACT preview from the training part's true statistics (DESIGN §6). PRIVATE, local —
    not covered by ε: a choice made from it is a use of the data no ledger entry accounts for; the default is
    :func:`dp_forecast` (docs/PRIVACY.md "Previews that steer choices").

    Vocabulary: noise scale b = S/ε_voc, noise floor b·ln(|V|/2) (:func:`~dpkps_core.dp.vocabulary.noise_floor`),
    the true count curve, and the expected share of Ṽ that is pure noise (:func:`expected_noise_share`). The
    vocabulary is *usable* when at least ``min_real_terms`` real terms (default min(100, N/2)) are expected in Ṽ
    (DESIGN §6: ~30 real terms gave 0.54 no-LLM accuracy on BBC, ~300 gave 0.88 with the exact histogram) and
    *good* when at most ``max_noise_share`` of Ṽ is noise (noise terms still reach prompts and smoothed or RFF
    scores). If not usable: the smallest ε_voc on a grid, and the largest public-order prefix of V (approximated
    by the prefix's counts), that would be.
    Density: the true top-N terms stand in for Ṽ; per class, the expected error against the spread (sd over Ṽ) of
    the true scores — histogram: Laplace sd √2/ε_kde against the class's keyphrase-histogram entries; RFF:
    1/√I + 2√I/(n_c·ε_member) against the normalised exact-KDE scores (needs ``embedder``; the stand-in terms come
    from private counts and are embedded in memory, never cached; without an embedder the unsmoothed histogram
    share is the proxy). Usable when every class's signal-to-noise ratio is ≥ 1. Iterative members use more
    blocks and fewer documents than this single-keyphrase view: optimistic for them.
    """
    eps_voc = check_epsilon(eps_voc, "ε_voc")
    eps_kde = check_epsilon(eps_kde, "ε_kde")
    terms_per_doc = check_positive_int(terms_per_doc, "S (terms per document)", maximum=LIMITS["terms_per_doc"])
    vocab_size = check_positive_int(vocab_size, "N (private vocabulary size)", maximum=LIMITS["vocab_size"])
    length = check_positive_int(length, "L (sequence length)", maximum=LIMITS["length"])
    if method not in SAMPLING_METHODS:
        raise ParameterError(f"Unknown method {method!r}; choose one of {', '.join(SAMPLING_METHODS)}.")
    if density not in DENSITIES:
        raise ParameterError(f"Unknown density {density!r}; choose one of {', '.join(DENSITIES)}.")
    if not 0 < max_noise_share < 1:
        raise ParameterError("max_noise_share must lie strictly between 0 and 1.")
    if len(corpus_train_texts) != len(labels) or not len(labels):
        raise ParameterError("The forecast needs one label per training document and at least one document.")
    kind = ("histogram" if method == "independent" else "rff") if density == "auto" else density
    if counts is None:
        counts = pipeline.term_counts(corpus_train_texts, vocabulary, terms_per_doc=terms_per_doc)
    counts = np.asarray(counts)
    v_size = counts.size
    b = terms_per_doc / eps_voc
    floor = noise_floor(epsilon=eps_voc, terms_per_doc=terms_per_doc, vocabulary_size=v_size)
    share, real_terms = expected_noise_share(counts, eps_voc=eps_voc, terms_per_doc=terms_per_doc,
                                             vocab_size=vocab_size, reps=reps, seed=seed)
    order = np.argsort(-counts, kind="stable")
    nth = float(counts[order[min(vocab_size, v_size) - 1]]) if v_size else 0.0
    if min_real_terms is None:
        min_real_terms = max(1, min(100, vocab_size // 2))
    min_real_terms = check_positive_int(min_real_terms, "minimum number of real terms")
    voc_ok = real_terms >= min_real_terms
    quality = ("good" if share <= max_noise_share else "usable") if voc_ok else "poor"

    def real_at(e: float, c: np.ndarray = counts) -> float:
        return expected_noise_share(c, eps_voc=e, terms_per_doc=terms_per_doc, vocab_size=vocab_size,
                                    reps=3, seed=seed)[1]

    suggested_eps = suggested_terms = suggested_n = None
    if not voc_ok:
        suggested_n = suggest_smaller_n(counts, eps_voc=eps_voc, terms_per_doc=terms_per_doc, vocab_size=vocab_size,
                                        seed=seed)
        eps_grid = [0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100]
        suggested_eps = next((float(e) for e in eps_grid if e > eps_voc and real_at(e) >= min_real_terms), None)
        prefixes = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000)
        for k in sorted((k for k in prefixes if vocab_size <= k < v_size), reverse=True):
            if real_at(eps_voc, counts[:k]) >= min_real_terms:
                suggested_terms = k
                break

    # density forecast on the true top-N stand-in for Ṽ
    classes = sorted(set(map(str, labels)))
    class_sizes = {c: int(sum(1 for y in labels if y == c)) for c in classes}
    stand_in = [vocabulary.terms[i] for i in order[:vocab_size] if counts[i] > 0]
    kde: dict[str, dict[str, float]] = {}
    kde_kind = ""
    suggested_kde = None
    if stand_in:
        kp = TermMatcher(stand_in).occurrences(corpus_train_texts, length, max_chars=LIMITS["max_chars_per_doc"])
        hist = class_keyphrase_histograms(kp, labels, classes, len(stand_in), max_per_doc=length)
        contributing = {c: int(sum(1 for k_, y in zip(kp, labels) if y == c and k_)) for c in classes}
        if kind == "histogram":
            kde_kind = "Laplace sd √2/ε_kde vs sd of the class's keyphrase histogram over Ṽ (before smoothing)"
            err = math.sqrt(2) / eps_kde
            for ci, c in enumerate(classes):
                spread = float(hist[ci].std())
                kde[c] = {"documents": contributing[c], "error": err, "spread": spread, "snr": spread / err}
            worst = min(v["snr"] for v in kde.values())
            suggested_kde = float(eps_kde / worst) if worst > 0 else None
        else:
            def plan_for(n_c: float, e_kde: float) -> DensityPlan:  # the one density plan (density_plan.py)
                cfg = SamplingConfig(method=method, density="rff", length=length, eps_kde=e_kde,
                                     features=features, class_size_estimate=max(float(n_c), 1.0))
                return density_plan(cfg, n_classes=len(classes))

            members = plan_for(1.0, eps_kde).members
            scores = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1e-12)
            if embedder is not None:
                emb = np.asarray(embedder.encode(stand_in), dtype=np.float32)  # private-derived terms: never cached
                emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
                sigma = bandwidth if bandwidth else default_bandwidth(emb)
                scores = scores @ exact_gaussian_kernel(emb, emb, sigma)
                kde_kind = (f"RFF + DP error 1/√I + 2√I/(n_c·ε_kde/{members}) vs sd of the normalised exact KDE scores "
                            f"(σ = {sigma:g})")
            else:
                kde_kind = (f"RFF + DP error 1/√I + 2√I/(n_c·ε_kde/{members}) vs sd of the normalised keyphrase "
                            "histogram (proxy: no embedder given)")

            def rff_err(n_c: float, e_kde: float) -> float:
                return float(plan_for(n_c, e_kde).total_error)

            for ci, c in enumerate(classes):
                spread = float(scores[ci].std())
                err = rff_err(contributing[c], eps_kde)
                kde[c] = {"documents": contributing[c], "error": err, "spread": spread, "snr": spread / err}
            for e in (0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100, 200):
                if all(v["spread"] / rff_err(v["documents"], e) >= 1 for v in kde.values()):
                    suggested_kde = float(e)
                    break
    kde_ok = bool(kde) and all(v["snr"] >= 1 for v in kde.values())

    verdict = _forecast_verdict(share=share, real_terms=real_terms, quality=quality, kde_ok=kde_ok, kde=kde,
                                eps_voc=eps_voc, eps_kde=eps_kde, floor=floor, suggested_eps=suggested_eps,
                                suggested_terms=suggested_terms, suggested_kde=suggested_kde, v_size=v_size,
                                vocab_size=vocab_size, min_real_terms=min_real_terms, suggested_n=suggested_n)
    return Forecast(
        eps_voc=eps_voc, eps_kde=eps_kde, terms_per_doc=terms_per_doc, vocab_size=vocab_size,
        public_vocabulary_size=v_size, method=method, density=kind, n_documents=len(labels), class_sizes=class_sizes,
        noise_scale=b, noise_floor=floor, terms_in_corpus=int((counts > 0).sum()),
        terms_above_floor=int((counts > floor).sum()), nth_true_count=nth, expected_noise_share=share,
        expected_real_terms=real_terms, count_curve=_count_curve(counts), kde=kde, kde_error_kind=kde_kind,
        min_real_terms=min_real_terms, vocabulary_quality=quality, vocabulary_usable=voc_ok, kde_usable=kde_ok, suggested_eps_voc=suggested_eps,
        suggested_max_terms=suggested_terms, suggested_eps_kde=suggested_kde, verdict=verdict,
        max_noise_share=max_noise_share,
    )


#: Smaller private vocabulary sizes N the verdict may suggest (a public grid).
SMALLER_N_GRID = (500, 200, 100, 50, 20)


def suggest_smaller_n(counts: np.ndarray, *, eps_voc: float, terms_per_doc: int, vocab_size: int,
                      min_real_terms: int | None = None, seed: int = 0) -> int | None:
    """The largest N of :data:`SMALLER_N_GRID` below ``vocab_size`` at which Ṽ is expected to hold enough real
    terms (``min_real_terms``, by default min(100, N/2) as in :func:`forecast`) at the same ε_voc — fewer, surer
    terms cost no extra ε, so the verdict offers this before a larger ε_voc (DESIGN §6)."""
    for n in SMALLER_N_GRID:
        if n >= vocab_size:
            continue
        need = min_real_terms if min_real_terms is not None else max(1, min(100, n // 2))
        if expected_noise_share(counts, eps_voc=eps_voc, terms_per_doc=terms_per_doc, vocab_size=n, reps=3,
                                seed=seed)[1] >= need:
            return n
    return None


#: |V| above which a general vocabulary (GloVe's 400k terms) is large enough that a domain vocabulary helps.
LARGE_VOCABULARY = 50_000


def _vocabulary_tips(*, eps_voc: float, suggested_eps: float | None, suggested_terms: int | None,
                     suggested_n: int | None, v_size: int, vocab_size: int) -> list[str]:
    """What to change for a poor vocabulary, cheapest first (DESIGN §6 "free remedies"): a smaller N, a smaller
    or domain-specific V, and only then a larger ε_voc."""
    tips = []
    if suggested_n is not None:
        tips.append(f"a smaller N = {suggested_n:,} (instead of {vocab_size:,}: fewer, surer terms at the same ε)")
    if suggested_terms is not None:
        tips.append(f"keep ε_voc = {eps_voc:g} and limit V to its {suggested_terms:,} most frequent terms")
    if v_size > LARGE_VOCABULARY:
        tips.append(f"a smaller, domain-specific public vocabulary (V has {v_size:,} terms; the medical one for "
                    "clinical text, or your own list)")
    if suggested_eps is not None:
        tips.append(f"ε_voc ≥ {suggested_eps:g}" + (" (a weak guarantee: try the others first)"
                                                   if suggested_eps > 10 else ""))
    return tips


def _forecast_verdict(*, share: float, real_terms: float, quality: str, kde_ok: bool, kde: dict, eps_voc: float,
                      eps_kde: float, floor: float, suggested_eps: float | None, suggested_terms: int | None,
                      suggested_kde: float | None, v_size: int, vocab_size: int, min_real_terms: int,
                      suggested_n: int | None = None) -> str:
    voc_ok = quality != "poor"
    if voc_ok and kde_ok:
        parts = ["Likely usable." if quality == "good" else "Usable, with a noisy vocabulary."]
    elif voc_ok or kde_ok:
        parts = ["Partly usable."]
    else:
        parts = ["Not usable as set."]
    parts.append(f"About {share:.0%} of the {vocab_size:,} private terms are expected to be pure noise (terms that "
                 f"never occur in your documents; about {real_terms:,.0f} real terms make it), because the largest "
                 f"noise among {v_size:,} public terms reaches about {_num(floor)} at ε_voc = {eps_voc:g}.")
    if not voc_ok:
        tips = _vocabulary_tips(eps_voc=eps_voc, suggested_eps=suggested_eps, suggested_terms=suggested_terms,
                                suggested_n=suggested_n, v_size=v_size, vocab_size=vocab_size)
        parts.append(f"For enough real terms (at least {min_real_terms:,} at N = {vocab_size:,}): "
                     + ("; or ".join(tips) if tips else
                     "no ε_voc up to 100 is enough; use a smaller, domain-specific public vocabulary or a larger corpus") + ".")
    if kde:
        worst = min(kde, key=lambda c: kde[c]["snr"])
        if kde_ok:
            parts.append(f"The densities stand above their noise in every class (weakest: {worst}, "
                         f"signal/noise {kde[worst]['snr']:.1f}).")
        else:
            weak = sum(1 for v in kde.values() if v["snr"] < 1)
            tip = f"; ε_kde ≈ {suggested_kde:.3g} would lift every class to signal/noise 1" if suggested_kde else ""
            parts.append(f"The density noise outweighs the signal in {weak} of {len(kde)} classes at ε_kde = {eps_kde:g} "
                         f"(weakest: {worst}, signal/noise {kde[worst]['snr']:.2f}){tip}.")
    else:
        parts.append("No term of V occurs in the training documents: the densities would be pure noise.")
    if quality != "good" and kde and min(v["snr"] for v in kde.values()) >= 2 and eps_kde > eps_voc:
        parts.append(f"The ε split matters more than the total here: the densities have headroom, so moving ε from "
                     f"ε_kde to ε_voc (e.g. {min(eps_voc + eps_kde / 2, eps_voc + eps_kde - 1):g} + "
                     f"{max(eps_kde / 2, 1):g}) buys more than adding ε (measured on BBC News: 5 + 5 → 0.89 no-LLM "
                     "accuracy, 1 + 10 → 0.53).")
    return " ".join(parts)


# ------------------------------------------------------------------------------------------- DP forecast

#: Shown with a DP forecast: what it is, and that choosing from it stays inside ε.
DP_FORECAST_NOTE = ("DP forecast: post-processing of the ε_forecast release recorded in the ledger — choosing ε, N "
                    "or a method from it is covered by ε (docs/PRIVACY.md).")
#: Shown with an exact preview (the badge's words).
EXACT_PREVIEW_NOTE = "private, local — not covered by ε"


def release_forecast(
    train: Corpus, vocabulary: PublicVocabulary, *, ledger: PrivacyLedger, noise: NoiseSource,
    epsilon: float = DEFAULT_FORECAST_EPSILON, terms_per_doc: int = 10, by_person: bool = False,
    curve_share: float = DEFAULT_CURVE_SHARE,
) -> ForecastStatistics:
    """The DP forecast's release path (DESIGN §2.0 order): admit the training part's units
    (``dpkps_core.budget.admit``, which charges them) → count on the admitted documents only → charge the frozen
    event (step ``"forecast"``) → draw the noise (:func:`~dpkps_core.dp.forecast.release_forecast_statistics`).

    ``train`` is the training part; documents of undeclared labels enter no DP step."""
    epsilon = check_epsilon(epsilon, "ε_forecast")
    terms_per_doc = check_positive_int(terms_per_doc, "S (terms per document)", maximum=LIMITS["terms_per_doc"])
    train = train.declared_only() if train.public_classes is not None else train
    classes = tuple(train.classes)
    if by_person and train.persons is None:
        raise ParameterError("The privacy unit is a person, but the corpus has no person column.")
    admitted = admit(train, ledger, epsilon, by_person=by_person, what="the DP forecast").corpus
    groups = admitted.persons if by_person else None
    counts = pipeline.term_counts(admitted.texts, vocabulary, terms_per_doc=terms_per_doc, groups=groups)
    return release_forecast_statistics(
        counts, admitted.labels, classes=classes, epsilon=epsilon, terms_per_doc=terms_per_doc, noise=noise,
        ledger=ledger, public_vocabulary=vocabulary.name, groups=groups, curve_share=curve_share,
        neighbouring=admitted.privacy_unit if by_person else "add/remove one document")


def dp_forecast(
    train: Corpus, vocabulary: PublicVocabulary, *, ledger: PrivacyLedger, noise: NoiseSource,
    epsilon: float = DEFAULT_FORECAST_EPSILON, terms_per_doc: int = 10, by_person: bool = False,
    curve_share: float = DEFAULT_CURVE_SHARE, **settings: Any,
) -> tuple[ForecastStatistics, Forecast]:
    """The default "Will this work?": :func:`release_forecast` (charges ε_forecast), then
    :func:`forecast_from_release` with ``settings`` (ε_voc, ε_kde, N, method…). Returns the release — keep it:
    forecasts for other ε, N or methods are free post-processing of it — and the forecast."""
    stats = release_forecast(train, vocabulary, ledger=ledger, noise=noise, epsilon=epsilon,
                             terms_per_doc=terms_per_doc, by_person=by_person, curve_share=curve_share)
    return stats, forecast_from_release(stats, terms_per_doc=terms_per_doc, **settings)


def reconstructed_counts(stats: ForecastStatistics) -> np.ndarray:
    """A count vector over V consistent with the DP count curve (post-processing), in decreasing order: each
    band [c_k, c_{k+1}) holds round(G̃_k) − round(G̃_{k+1}) terms at the band's integer midpoint, the rest 0."""
    g = np.round(stats.smoothed_curve())
    t = np.asarray(stats.thresholds, dtype=np.float64)
    per_band = np.maximum(g - np.append(g[1:], 0.0), 0.0).astype(np.int64)
    upper = np.append(t[1:] - 1.0, t[-1])
    values = np.repeat((t + upper) / 2.0, per_band)[::-1][: stats.public_vocabulary_size]
    out = np.zeros(stats.public_vocabulary_size, dtype=np.float64)
    out[: values.size] = values
    return out


def forecast_from_release(
    stats: ForecastStatistics, *, eps_voc: float, eps_kde: float, terms_per_doc: int | None = None,
    vocab_size: int = 1000, method: str = "independent", density: str = "auto", length: int = 10,
    features: int | None = None, min_real_terms: int | None = None, max_noise_share: float = 0.5, reps: int = 5,
    seed: int = 0, **_ignored: Any,
) -> Forecast:
    """"Will this work?" as post-processing of a DP forecast release (DESIGN §6; no further ε, safe to show).

    Vocabulary: the same simulation as :func:`forecast` on :func:`reconstructed_counts` (the DP count curve as a
    count vector). Densities: with the noisy class sizes ñ_c (n = Σ ñ_c) and the reconstructed top-N counts r,
    a class's keyphrase histogram is modelled as (ñ_c/n)·r/s̄, s̄ = Σr/n the mean number of distinct terms per
    document — classes assumed to share one term distribution, which understates the spread of classes with
    their own vocabulary (so the verdict errs on the cautious side). Histogram: its sd against Laplace sd
    √2/ε_kde; RFF: the sd of the normalised histogram against the density plan's error at n_c = ñ_c.
    ``terms_per_doc`` must be the release's S (it is the curve's S)."""
    eps_voc = check_epsilon(eps_voc, "ε_voc")
    eps_kde = check_epsilon(eps_kde, "ε_kde")
    if terms_per_doc is not None and int(terms_per_doc) != stats.terms_per_doc:
        raise ParameterError(f"This DP forecast release counted S = {stats.terms_per_doc} terms per document; "
                             f"forecasting S = {terms_per_doc} needs a new release.")
    S = stats.terms_per_doc
    vocab_size = check_positive_int(vocab_size, "N (private vocabulary size)", maximum=LIMITS["vocab_size"])
    length = check_positive_int(length, "L (sequence length)", maximum=LIMITS["length"])
    if method not in SAMPLING_METHODS:
        raise ParameterError(f"Unknown method {method!r}; choose one of {', '.join(SAMPLING_METHODS)}.")
    if density not in DENSITIES:
        raise ParameterError(f"Unknown density {density!r}; choose one of {', '.join(DENSITIES)}.")
    if not 0 < max_noise_share < 1:
        raise ParameterError("max_noise_share must lie strictly between 0 and 1.")
    kind = ("histogram" if method == "independent" else "rff") if density == "auto" else density
    counts = reconstructed_counts(stats)
    v_size = counts.size
    floor = noise_floor(epsilon=eps_voc, terms_per_doc=S, vocabulary_size=v_size)
    share, real_terms = expected_noise_share(counts, eps_voc=eps_voc, terms_per_doc=S, vocab_size=vocab_size,
                                             reps=reps, seed=seed)
    nth = float(counts[min(vocab_size, v_size) - 1]) if v_size else 0.0
    if min_real_terms is None:
        min_real_terms = max(1, min(100, vocab_size // 2))
    min_real_terms = check_positive_int(min_real_terms, "minimum number of real terms")
    voc_ok = real_terms >= min_real_terms
    quality = ("good" if share <= max_noise_share else "usable") if voc_ok else "poor"
    suggested_eps = suggested_n = None
    if not voc_ok:
        suggested_n = suggest_smaller_n(counts, eps_voc=eps_voc, terms_per_doc=S, vocab_size=vocab_size, seed=seed)
        for e in (0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100):
            if e > eps_voc and expected_noise_share(counts, eps_voc=e, terms_per_doc=S, vocab_size=vocab_size,
                                                    reps=3, seed=seed)[1] >= min_real_terms:
                suggested_eps = float(e)
                break

    sizes = stats.class_sizes()
    n = max(sum(sizes.values()), 1.0)
    top = counts[:vocab_size]
    top = top[top > 0]
    kde: dict[str, dict[str, float]] = {}
    kde_kind = ""
    suggested_kde = None
    if top.size:
        mean_terms = float(np.clip(counts.sum() / n, 1.0, S))
        if kind == "histogram":
            kde_kind = ("Laplace sd √2/ε_kde vs the modelled sd of the class's keyphrase histogram over Ṽ "
                        "(from the DP forecast release)")
            err = math.sqrt(2) / eps_kde
            for c, n_c in sizes.items():
                spread = float(n_c / n * top.std() / mean_terms)
                kde[c] = {"documents": float(round(n_c)), "error": err, "spread": spread, "snr": spread / err}
            worst = min(v["snr"] for v in kde.values())
            suggested_kde = float(eps_kde / worst) if worst > 0 else None
        else:
            def rff_err(n_c: float, e_kde: float) -> float:  # the one density plan (density_plan.py)
                cfg = SamplingConfig(method=method, density="rff", length=length, eps_kde=e_kde,
                                     features=features, class_size_estimate=max(float(n_c), 1.0))
                return float(density_plan(cfg, n_classes=len(sizes)).total_error)

            members = density_plan(SamplingConfig(method=method, density="rff", length=length,
                                                  eps_kde=eps_kde, features=features,
                                                  class_size_estimate=1.0),
                                   n_classes=len(sizes)).members
            kde_kind = (f"RFF + DP error 1/√I + 2√I/(n_c·ε_kde/{members}) vs the modelled sd of the normalised "
                        "keyphrase histogram (from the DP forecast release)")
            spread = float(top.std() / top.sum())
            for c, n_c in sizes.items():
                err = rff_err(n_c, eps_kde)
                kde[c] = {"documents": float(round(n_c)), "error": err, "spread": spread, "snr": spread / err}
            for e in (0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100, 200):
                if all(v["spread"] / rff_err(v["documents"], e) >= 1 for v in kde.values()):
                    suggested_kde = float(e)
                    break
    kde_ok = bool(kde) and all(v["snr"] >= 1 for v in kde.values())
    verdict = _forecast_verdict(share=share, real_terms=real_terms, quality=quality, kde_ok=kde_ok, kde=kde,
                                eps_voc=eps_voc, eps_kde=eps_kde, floor=floor, suggested_eps=suggested_eps,
                                suggested_terms=None, suggested_kde=suggested_kde, v_size=v_size,
                                vocab_size=vocab_size, min_real_terms=min_real_terms, suggested_n=suggested_n)
    curve = stats.smoothed_curve()
    points = [(int(c), int(round(g))) for c, g in zip(stats.thresholds, curve) if round(g) >= 1]
    return Forecast(
        eps_voc=eps_voc, eps_kde=eps_kde, terms_per_doc=S, vocab_size=vocab_size, public_vocabulary_size=v_size,
        method=method, density=kind, n_documents=int(round(n)), class_sizes={c: int(round(v)) for c, v in sizes.items()},
        noise_scale=S / eps_voc, noise_floor=floor, terms_in_corpus=int(round(curve[0])) if curve.size else 0,
        terms_above_floor=int((counts > floor).sum()), nth_true_count=nth, expected_noise_share=share,
        expected_real_terms=real_terms, count_curve=points, kde=kde, kde_error_kind=kde_kind,
        min_real_terms=min_real_terms, vocabulary_quality=quality, vocabulary_usable=voc_ok, kde_usable=kde_ok,
        suggested_eps_voc=suggested_eps, suggested_max_terms=None, suggested_eps_kde=suggested_kde,
        verdict=verdict, max_noise_share=max_noise_share, private=False, note=DP_FORECAST_NOTE,
        disclosure_note=DP_FORECAST_NOTE, dp=True, epsilon_forecast=stats.epsilon)


def forecast_preview(
    train: Corpus, vocabulary: PublicVocabulary, *, exact: bool = False, ledger: PrivacyLedger | None = None,
    noise: NoiseSource | None = None, epsilon_forecast: float = DEFAULT_FORECAST_EPSILON, by_person: bool = False,
    terms_per_doc: int = 10, embedder: Embedder | None = None, **settings: Any,
) -> Forecast:
    """One entry point for the CLI and scripts: the DP forecast by default (charges ``ledger`` ε_forecast), the
    exact preview only with ``exact=True`` (private, local — not covered by ε; charges nothing)."""
    if exact:
        train = train.declared_only() if train.public_classes is not None else train
        groups = train.persons if by_person else None
        counts = pipeline.term_counts(train.texts, vocabulary, terms_per_doc=terms_per_doc, groups=groups)
        return forecast(train.texts, train.labels, vocabulary, terms_per_doc=terms_per_doc, counts=counts,
                        embedder=embedder, **settings)
    if ledger is None or noise is None:
        raise ParameterError("The DP forecast charges ε_forecast: give the corpus's ledger and a noise source "
                             "(or ask for the exact preview, which is not covered by ε).")
    return dp_forecast(train, vocabulary, ledger=ledger, noise=noise, epsilon=epsilon_forecast,
                       terms_per_doc=terms_per_doc, by_person=by_person, **settings)[1]


def vocabulary_noise_share(pv: PrivateVocabulary, *, zero_terms: float | None = None) -> dict[str, float]:
    """How much of Ṽ is expected to be pure noise, from DP quantities only (Ṽ's noisy counts, ε_voc, S, |V|):
    with b = S/ε_voc and τ the smallest noisy count in Ṽ (the cut), a term no document uses clears the cut with
    probability P[Lap(b) > τ]; about ``zero_terms`` (default |V|, an upper bound) such terms compete. Also the
    number of Ṽ's terms whose noisy count is below the noise floor (DESIGN §6). Post-processing: safe to show."""
    counts = np.asarray(pv.noisy_counts, dtype=np.float64)
    floor = noise_floor(epsilon=pv.epsilon, terms_per_doc=pv.terms_per_doc, vocabulary_size=pv.public_vocabulary_size)
    if counts.size == 0:
        return {"expected_noise_share": 0.0, "expected_noise_terms": 0.0, "cut": float("nan"),
                "below_floor": 0.0, "noise_floor": floor}
    b = float(pv.noise_scale)
    tau = float(counts.min())
    tail = 0.5 * math.exp(-tau / b) if tau >= 0 else 1.0 - 0.5 * math.exp(tau / b)
    zeros = float(pv.public_vocabulary_size if zero_terms is None else max(zero_terms, 0.0))
    expected = min(zeros * tail, float(counts.size))
    return {"expected_noise_share": expected / counts.size, "expected_noise_terms": expected, "cut": tau,
            "below_floor": float((counts < floor).sum()), "noise_floor": floor}


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.2g}"


def forecast_figure(f: Forecast) -> "go.Figure":
    """Plotly chart: number of public terms with true count ≥ c (log–log, private) with the noise floor and the
    N-th largest true count as vertical lines.

    The lines are drawn as traces in data coordinates (shapes and annotations on log axes use log10 units and
    misplace labels) and both axis ranges are set from the data and the lines, in log10 units as plotly expects."""
    import plotly.graph_objects as go

    fig = go.Figure()
    xs: list[float] = [max(f.noise_floor, 1.0)]
    ys: list[float] = [1.0]
    if f.count_curve:
        x, y = zip(*f.count_curve)
        xs += [float(v) for v in x]
        ys += [float(v) for v in y]
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name="terms with true count ≥ c",
                                 hovertemplate="%{y:,} terms occur in ≥ %{x:,} documents<extra></extra>"))
    if f.nth_true_count > 0:
        xs.append(float(f.nth_true_count))
    x_lo, x_hi = math.log10(max(min(xs), 1.0)) - 0.1, math.log10(max(xs)) + 0.15
    y_lo, y_hi = -0.1, math.log10(max(max(ys), 10.0)) + 0.3
    y_bottom, y_top = 10 ** y_lo, 10 ** (y_hi - 0.05)

    def vline(x: float, text: str, colour: str, dash: str, top: bool) -> None:
        fig.add_trace(go.Scatter(x=[x, x], y=[y_bottom, y_top], mode="lines", line={"color": colour, "dash": dash},
                                 name=text, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=[x], y=[y_top if top else y_bottom * 1.6], mode="text", text=[text],
                                 textposition="bottom right" if top else "top right",
                                 textfont={"color": colour}, showlegend=False, hoverinfo="skip"))

    vline(max(f.noise_floor, 1.0), f"noise floor ≈ {_num(f.noise_floor)}", "red", "dash", True)
    if f.nth_true_count > 0:
        vline(float(f.nth_true_count), f"{f.vocab_size:,}-th largest true count = {f.nth_true_count:,.0f}",
              "grey", "dot", False)
    fig.update_layout(
        title=f"Vocabulary forecast at ε_voc = {f.eps_voc:g}: expected noise share of Ṽ {f.expected_noise_share:.0%} "
              "(private — not for release)",
        xaxis={"title": "true document count c (first S distinct terms)", "type": "log", "range": [x_lo, x_hi],
               "dtick": 1},
        yaxis={"title": "number of public terms with count ≥ c", "type": "log", "range": [y_lo, y_hi], "dtick": 1},
        showlegend=False, height=380, margin={"t": 50})
    return fig
