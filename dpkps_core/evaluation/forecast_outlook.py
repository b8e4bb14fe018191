"""What both "Will this work?" forecasts share (docs/DESIGN.md §6): the :class:`Forecast` they return, the vocabulary
outlook (the noise floor and the simulated share of Ṽ that is pure noise, with the cheapest remedies), the density
outlook (per class, the expected error against the spread of the scores), the ONE verdict, the chart, and Ṽ's noise
share from DP quantities alone.

The exact preview (:mod:`dpkps_core.evaluation.forecast_exact`) feeds these with the training part's TRUE counts;
the DP forecast (:mod:`dpkps_core.evaluation.forecast_dp`) with the post-processed ε_forecast release
(docs/PRIVACY.md "Previews that steer choices"). Nothing here logs or prints document text."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.density_plan import density_plan
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.dp.vocabulary import PrivateVocabulary, noise_floor
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.metrics import DISCLOSURE_NOTE, PRIVATE_NOTE

if TYPE_CHECKING:  # heavy imports stay lazy
    import plotly.graph_objects as go


@dataclasses.dataclass
class Forecast:
    """"Will this work?" before the sampling ε is spent (docs/DESIGN.md §6): numbers, a verdict, and the data of
    :func:`forecast_figure`. The exact preview is PRIVATE, local only; the DP forecast (``dp=True``) is
    post-processing of a charged ε_forecast release."""

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
    #: The DP forecast's judgement of its own verdict (dpkps_core.evaluation.forecast_uncertainty): "confident",
    #: "uncertain" or "too small"; "" for the exact preview (no release noise to judge).
    confidence: str = ""
    #: (5th, 95th) percentile of the expected real terms in Ṽ and of the weakest class's signal/noise over draws
    #: of the forecast's own noise (DP forecast only).
    real_terms_interval: tuple[float, float] | None = None
    snr_interval: tuple[float, float] | None = None
    #: What the forecast read and how, so its cost at scale is stated (issue 31 §4): the exact preview reads every
    #: training document in chunks; the DP forecast is post-processing of its release (no document read).
    computed_over: str = ""

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


def forecast_epsilons(config: SamplingConfig, eps_voc: float | None) -> tuple[float, float]:
    """(ε_voc, ε_kde) a forecast of ``config`` is made for, as floats: ``eps_voc`` (a what-if value, e.g. one cell
    of a sweep) in place of the config's when given (docs/DESIGN.md §6)."""
    if not isinstance(config, SamplingConfig):
        raise ParameterError("A forecast takes the sampling settings as a SamplingConfig "
                             "(dpkps_core.method.config.build_sampling_config builds one).")
    return (check_epsilon(config.eps_voc if eps_voc is None else eps_voc, "ε_voc"),
            check_epsilon(config.eps_kde, "ε_kde"))


# ------------------------------------------------------------------------------------------- vocabulary

#: Smaller private vocabulary sizes N the verdict may suggest (a public grid).
SMALLER_N_GRID = (500, 200, 100, 50, 20)
#: ε_voc values the verdict may suggest (a public grid).
EPS_VOC_GRID = (0.1, 0.25, 0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100)
#: Public-order prefixes of V the exact preview may suggest limiting V to.
PREFIX_GRID = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000)
#: |V| above which a general vocabulary (GloVe's 400k terms) is large enough that a domain vocabulary helps.
LARGE_VOCABULARY = 50_000


def expected_noise_share(counts: np.ndarray, *, eps_voc: float, terms_per_doc: int, vocab_size: int,
                         reps: int = 5, seed: int = 0) -> tuple[float, float]:
    """Expected share of Ṽ that is pure noise — terms whose true count is 0 but whose noisy count makes the top N —
    and the expected number of real terms in Ṽ, by simulating the top-N selection ``reps`` times with Laplace(S/ε)
    on the given counts (docs/DESIGN.md §2.1; the simulation noise is not DP noise and nothing is released)."""
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


def default_min_real_terms(vocab_size: int) -> int:
    """Real terms Ṽ needs to be usable by default: min(100, N/2) (docs/DESIGN.md §6: ~30 real terms gave 0.54 no-LLM
    accuracy on BBC, ~300 gave 0.88)."""
    return max(1, min(100, int(vocab_size) // 2))


def suggest_smaller_n(counts: np.ndarray, *, eps_voc: float, terms_per_doc: int, vocab_size: int,
                      min_real_terms: int | None = None, seed: int = 0) -> int | None:
    """The largest N of :data:`SMALLER_N_GRID` below ``vocab_size`` at which Ṽ is expected to hold enough real
    terms (``min_real_terms``, by default :func:`default_min_real_terms` of that N) at the same ε_voc — fewer, surer
    terms cost no extra ε, so the verdict offers this before a larger ε_voc (docs/DESIGN.md §6)."""
    for n in SMALLER_N_GRID:
        if n >= vocab_size:
            continue
        need = min_real_terms if min_real_terms is not None else default_min_real_terms(n)
        if expected_noise_share(counts, eps_voc=eps_voc, terms_per_doc=terms_per_doc, vocab_size=n, reps=3,
                                seed=seed)[1] >= need:
            return n
    return None


@dataclasses.dataclass(frozen=True)
class VocabularyOutlook:
    """The vocabulary half of a forecast (docs/DESIGN.md §6): the noise floor, the simulated noise share of Ṽ, and, when
    too few real terms are expected, the remedies (a smaller N, a prefix of V, a larger ε_voc)."""

    public_vocabulary_size: int
    noise_floor: float
    terms_above_floor: int
    nth_count: float
    expected_noise_share: float
    expected_real_terms: float
    min_real_terms: int
    quality: str
    suggested_n: int | None = None
    suggested_eps_voc: float | None = None
    suggested_max_terms: int | None = None

    @property
    def usable(self) -> bool:
        return self.quality != "poor"


def vocabulary_outlook(counts: np.ndarray, *, eps_voc: float, terms_per_doc: int, vocab_size: int,
                       min_real_terms: int | None = None, max_noise_share: float = 0.5, reps: int = 5,
                       seed: int = 0, suggest_prefix: bool = False) -> VocabularyOutlook:
    """The vocabulary outlook of ``counts`` (one per term of V, in V's public order): noise scale b = S/ε_voc, noise
    floor b·ln(|V|/2) (:func:`~dpkps_core.dp.vocabulary.noise_floor`), the simulated noise share of Ṽ
    (:func:`expected_noise_share`). *Usable* with ≥ ``min_real_terms`` real terms expected, *good* with at most
    ``max_noise_share`` of Ṽ noise. If not usable: :func:`suggest_smaller_n`, the smallest ε_voc of
    :data:`EPS_VOC_GRID` that would do, and (``suggest_prefix``, counts in V's order) the largest prefix of V."""
    if not 0 < max_noise_share < 1:
        raise ParameterError("max_noise_share must lie strictly between 0 and 1.")
    counts = np.asarray(counts)
    v_size = counts.size
    floor = noise_floor(epsilon=eps_voc, terms_per_doc=terms_per_doc, vocabulary_size=v_size)
    share, real_terms = expected_noise_share(counts, eps_voc=eps_voc, terms_per_doc=terms_per_doc,
                                             vocab_size=vocab_size, reps=reps, seed=seed)
    k = min(vocab_size, v_size)
    nth = float(np.partition(counts, v_size - k)[v_size - k]) if v_size else 0.0  # the N-th largest count
    need = check_positive_int(default_min_real_terms(vocab_size) if min_real_terms is None else min_real_terms,
                              "minimum number of real terms")
    common = dict(public_vocabulary_size=v_size, noise_floor=floor, terms_above_floor=int((counts > floor).sum()),
                  nth_count=nth, expected_noise_share=share, expected_real_terms=real_terms, min_real_terms=need)
    if real_terms >= need:
        return VocabularyOutlook(**common, quality="good" if share <= max_noise_share else "usable")

    def real_at(e: float, c: np.ndarray = counts) -> float:
        return expected_noise_share(c, eps_voc=e, terms_per_doc=terms_per_doc, vocab_size=vocab_size, reps=3,
                                    seed=seed)[1]

    suggested_n = suggest_smaller_n(counts, eps_voc=eps_voc, terms_per_doc=terms_per_doc, vocab_size=vocab_size,
                                    seed=seed)
    suggested_eps = next((float(e) for e in EPS_VOC_GRID if e > eps_voc and real_at(e) >= need), None)
    suggested_terms = None
    if suggest_prefix:
        for k_ in sorted((p for p in PREFIX_GRID if vocab_size <= p < v_size), reverse=True):
            if real_at(eps_voc, counts[:k_]) >= need:
                suggested_terms = k_
                break
    return VocabularyOutlook(**common, quality="poor", suggested_n=suggested_n, suggested_eps_voc=suggested_eps,
                             suggested_max_terms=suggested_terms)


# ------------------------------------------------------------------------------------------- densities

#: ε_kde values the verdict may suggest for the RFF DP-KDE (a public grid).
EPS_KDE_GRID = (0.5, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50, 100, 200)


def rff_error(config: SamplingConfig, *, class_size: float, eps_kde: float, n_classes: int) -> float:
    """The expected error 1/√I + 2√I/(n_c·ε_member) of the RFF DP-KDE at n_c = ``class_size`` — from the one
    density plan (:func:`~dpkps_core.method.density_plan.density_plan`; docs/DESIGN.md §2.2, §6)."""
    cfg = config.replace(density="rff", eps_kde=eps_kde, class_size_estimate=max(float(class_size), 1.0))
    return float(density_plan(cfg, n_classes=n_classes).total_error)


def rff_members(config: SamplingConfig, *, n_classes: int) -> int:
    """Ensemble members J of the RFF DP-KDE for ``config``'s method and L (each gets ε_kde/J; docs/DESIGN.md §2.4)."""
    cfg = config.replace(density="rff", class_size_estimate=1.0)
    return density_plan(cfg, n_classes=n_classes).members


def density_outlook(config: SamplingConfig, spreads: dict[str, tuple[float, float]], *, eps_kde: float,
                    class_sizes: dict[str, float] | None = None) -> tuple[dict[str, dict[str, float]], float | None]:
    """Per class (``spreads``: class → (documents, spread of its scores over Ṽ)): the expected density error, the
    spread and their ratio; and the ε_kde at which every class would reach signal/noise 1 (docs/DESIGN.md §6).
    Histogram: Laplace sd √2/ε_kde; RFF: :func:`rff_error` at n_c = ``class_sizes[c]`` (the DP forecast's unrounded
    noisy sizes) for ``eps_kde``, and at n_c = the class's documents on the suggestion grid."""
    kde: dict[str, dict[str, float]] = {}
    if config.density_kind == "histogram":
        err = math.sqrt(2) / eps_kde
        for c, (documents, spread) in spreads.items():
            kde[c] = {"documents": documents, "error": err, "spread": spread, "snr": spread / err}
        worst = min(v["snr"] for v in kde.values())
        return kde, (float(eps_kde / worst) if worst > 0 else None)
    n_classes = len(spreads)
    for c, (documents, spread) in spreads.items():
        n_c = documents if class_sizes is None else class_sizes[c]
        err = rff_error(config, class_size=n_c, eps_kde=eps_kde, n_classes=n_classes)
        kde[c] = {"documents": documents, "error": err, "spread": spread, "snr": spread / err}
    for e in EPS_KDE_GRID:
        if all(v["spread"] / rff_error(config, class_size=v["documents"], eps_kde=e, n_classes=n_classes) >= 1
               for v in kde.values()):
            return kde, float(e)
    return kde, None


# ------------------------------------------------------------------------------------------- verdict

def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.2g}"


def _vocabulary_tips(*, eps_voc: float, suggested_eps: float | None, suggested_terms: int | None,
                     suggested_n: int | None, v_size: int, vocab_size: int, vocabulary: str = "") -> list[str]:
    """What to change for a poor vocabulary, cheapest first (docs/DESIGN.md §6 "free remedies"): a smaller N, a smaller
    or domain-specific V, and only then a larger ε_voc. ``vocabulary`` is the public vocabulary in use (its spec, e.g.
    ``"medical"``): the advice never suggests what is already chosen, and a large ε_voc names the cheaper changes it
    lists before it."""
    tips = []
    if suggested_n is not None:
        tips.append(f"a smaller N = {suggested_n:,} (instead of {vocab_size:,}: fewer, surer terms at the same ε)")
    if suggested_terms is not None:
        tips.append(f"keep ε_voc = {eps_voc:g} and limit V to its {suggested_terms:,} most frequent terms")
    if v_size > LARGE_VOCABULARY:
        if vocabulary.strip().lower() == "medical":
            tips.append(f"a smaller public vocabulary of your own (the medical one has {v_size:,} terms: a list of the "
                        "terms your documents' field uses)")
        else:
            tips.append(f"a smaller, domain-specific public vocabulary (V has {v_size:,} terms; the medical one for "
                        "clinical text, or your own list)")
    if suggested_eps is not None:
        weak = ""
        if suggested_eps > 10:
            weak = (" (a weak guarantee: try " + ("the change above" if len(tips) == 1 else "the changes above")
                    + " first)") if tips else " (a weak guarantee)"
        tips.append(f"ε_voc ≥ {suggested_eps:g}{weak}")
    return tips


def forecast_verdict(vocab: VocabularyOutlook, kde: dict[str, dict[str, float]], *, eps_voc: float, eps_kde: float,
                     vocab_size: int, suggested_kde: float | None, vocabulary: str = "") -> tuple[bool, str]:
    """(whether the densities are usable, the verdict in plain words) — the ONE verdict of both forecasts
    (docs/DESIGN.md §6): usable when every class's signal/noise is ≥ 1; the vocabulary's remedies cheapest first."""
    kde_ok = bool(kde) and all(v["snr"] >= 1 for v in kde.values())
    quality, v_size = vocab.quality, vocab.public_vocabulary_size
    if vocab.usable and kde_ok:
        parts = ["Likely usable." if quality == "good" else "Usable, with a noisy vocabulary."]
    elif vocab.usable or kde_ok:
        parts = ["Partly usable."]
    else:
        parts = ["Not usable as set."]
    parts.append(f"About {vocab.expected_noise_share:.0%} of the {vocab_size:,} private terms are expected to be pure "
                 f"noise (terms that never occur in your documents; about {vocab.expected_real_terms:,.0f} real terms "
                 f"make it), because the largest noise among {v_size:,} public terms reaches about "
                 f"{_num(vocab.noise_floor)} at ε_voc = {eps_voc:g}.")
    if not vocab.usable:
        tips = _vocabulary_tips(eps_voc=eps_voc, suggested_eps=vocab.suggested_eps_voc,
                                suggested_terms=vocab.suggested_max_terms, suggested_n=vocab.suggested_n,
                                v_size=v_size, vocab_size=vocab_size, vocabulary=vocabulary)
        parts.append(f"For enough real terms (at least {vocab.min_real_terms:,} at N = {vocab_size:,}): "
                     + ("; or ".join(tips) if tips else "no ε_voc up to 100 is enough; use a smaller, "
                        "domain-specific public vocabulary or a larger corpus") + ".")
    if kde:
        worst = min(kde, key=lambda c: kde[c]["snr"])
        if kde_ok:
            parts.append(f"The densities stand above their noise in every class (weakest: {worst}, "
                         f"signal/noise {kde[worst]['snr']:.1f}).")
        else:
            weak = sum(1 for v in kde.values() if v["snr"] < 1)
            tip = f"; ε_kde ≈ {suggested_kde:.3g} would lift every class to signal/noise 1" if suggested_kde else ""
            parts.append(f"The density noise outweighs the signal in {weak} of {len(kde)} classes at ε_kde = "
                         f"{eps_kde:g} (weakest: {worst}, signal/noise {kde[worst]['snr']:.2f}){tip}.")
    else:
        parts.append("No term of V occurs in the training documents: the densities would be pure noise.")
    if quality != "good" and kde and min(v["snr"] for v in kde.values()) >= 2 and eps_kde > eps_voc:
        parts.append(f"The ε split matters more than the total here: the densities have headroom, so moving ε from "
                     f"ε_kde to ε_voc (e.g. {min(eps_voc + eps_kde / 2, eps_voc + eps_kde - 1):g} + "
                     f"{max(eps_kde / 2, 1):g}) buys more than adding ε (measured on BBC News: 5 + 5 → 0.89 no-LLM "
                     "accuracy, 1 + 10 → 0.53).")
    return kde_ok, " ".join(parts)


def assemble_forecast(config: SamplingConfig, vocab: VocabularyOutlook, kde: dict[str, dict[str, float]], *,
                      eps_voc: float, eps_kde: float, kde_error_kind: str, suggested_eps_kde: float | None,
                      max_noise_share: float, **facts: Any) -> Forecast:
    """The :class:`Forecast` of both forecasts from their outlooks and :func:`forecast_verdict`; ``facts``: the
    fields that differ between them (documents, class sizes, the count curve, DP or private)."""
    kde_ok, verdict = forecast_verdict(vocab, kde, eps_voc=eps_voc, eps_kde=eps_kde, vocab_size=config.vocab_size,
                                       suggested_kde=suggested_eps_kde, vocabulary=config.vocabulary)
    return Forecast(
        eps_voc=eps_voc, eps_kde=eps_kde, terms_per_doc=config.terms_per_doc, vocab_size=config.vocab_size,
        public_vocabulary_size=vocab.public_vocabulary_size, method=config.method, density=config.density_kind,
        noise_scale=config.terms_per_doc / eps_voc, noise_floor=vocab.noise_floor,
        terms_above_floor=vocab.terms_above_floor, nth_true_count=vocab.nth_count,
        expected_noise_share=vocab.expected_noise_share, expected_real_terms=vocab.expected_real_terms, kde=kde,
        kde_error_kind=kde_error_kind, min_real_terms=vocab.min_real_terms, vocabulary_quality=vocab.quality,
        vocabulary_usable=vocab.usable, kde_usable=kde_ok, suggested_eps_voc=vocab.suggested_eps_voc,
        suggested_max_terms=vocab.suggested_max_terms, suggested_eps_kde=suggested_eps_kde, verdict=verdict,
        max_noise_share=max_noise_share, **facts)


# ------------------------------------------------------------------------------------------- Ṽ as built

def vocabulary_noise_share(pv: PrivateVocabulary, *, zero_terms: float | None = None) -> dict[str, float]:
    """How much of Ṽ is expected to be pure noise, from DP quantities only (Ṽ's noisy counts, ε_voc, S, |V|):
    with b = S/ε_voc and τ the smallest noisy count in Ṽ (the cut), a term no document uses clears the cut with
    probability P[Lap(b) > τ]; about ``zero_terms`` (default |V|, an upper bound) such terms compete. Also the
    number of Ṽ's terms whose noisy count is below the noise floor (docs/DESIGN.md §6). Post-processing: safe to show."""
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


# ------------------------------------------------------------------------------------------- chart

def forecast_figure(f: Forecast) -> "go.Figure":
    """Plotly chart: number of public terms with count ≥ c (log–log) with the noise floor and the N-th largest
    count as vertical lines — the TRUE counts for the exact preview (private), the DP release's counts for the DP
    forecast (``f.dp``: covered by ε, and said so in the title and the axes).

    The lines are drawn as traces in data coordinates (shapes and annotations on log axes use log10 units and
    misplace labels) and both axis ranges are set from the data and the lines, in log10 units as plotly expects."""
    import plotly.graph_objects as go

    kind = "DP-estimated" if f.dp else "true"
    approx = f" (DP estimate, ε_forecast = {f.epsilon_forecast:g})" if f.dp else ""
    fig = go.Figure()
    xs: list[float] = [max(f.noise_floor, 1.0)]
    ys: list[float] = [1.0]
    if f.count_curve:
        x, y = zip(*f.count_curve)
        xs += [float(v) for v in x]
        ys += [float(v) for v in y]
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line_shape="hv", name=f"terms with {kind} count ≥ c",
                                 hovertemplate=f"%{{y:,}} terms occur in ≥ %{{x:,}} documents{approx}"
                                               "<extra></extra>"))
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
        vline(float(f.nth_true_count), f"{f.vocab_size:,}-th largest {kind} count = {f.nth_true_count:,.0f}",
              "grey", "dot", False)
    where = (f"DP forecast, ε_forecast = {f.epsilon_forecast:g}: covered by ε" if f.dp
             else "private — not for release")
    fig.update_layout(
        title=f"Vocabulary forecast at ε_voc = {f.eps_voc:g}: expected noise share of Ṽ {f.expected_noise_share:.0%} "
              f"({where})",
        xaxis={"title": f"{kind} document count c (first S distinct terms)", "type": "log", "range": [x_lo, x_hi],
               "dtick": 1},
        yaxis={"title": "number of public terms with count ≥ c", "type": "log", "range": [y_lo, y_hi], "dtick": 1},
        showlegend=False, height=380, margin={"t": 50})
    return fig
