"""How sure the DP forecast is of its own verdict (docs/DESIGN.md §6; issue: "forecasts that say what they cannot know").

The DP forecast reads the corpus through one small Laplace release (:mod:`dpkps_core.dp.forecast`): at the
default ε_forecast = 0.2 the count curve carries noise of scale S/(a·ε) = 100 per threshold and the class sizes
1/((1 − a)·ε) = 10 — on a corpus of a hundred documents, more than what they measure. A verdict read off such a
release can be produced by the noise alone. Two simulations, both post-processing of the release and of PUBLIC
quantities (its noise scales, thresholds, classes, |V|, S), say how far the verdict can be trusted:

* **Noise alone.** :func:`noise_only` draws releases of a corpus with NO document at all (every statistic 0) under
  the same public parameters. If the observed release's verdict-driving quantities — the expected number of real
  terms in Ṽ and the weakest class's density signal/noise — do not exceed the largest of those noise-only releases,
  the release cannot tell this corpus from an empty one: *too small to forecast* at this ε_forecast.
* **The verdict under the forecast's own noise.** :func:`re_noised` adds a fresh draw of the release's own noise to
  the released values (a parametric bootstrap: what another release of the same corpus could have shown, to first
  order). The spread of the two quantities over these draws is the forecast's interval; a verdict is *confident*
  only when it holds over the whole interval (5th–95th percentile).

A green "usable" verdict then needs both: beyond noise alone, and usable over the interval — so noise alone cannot
produce it (except with the probability that an empty corpus' release beats every one of the ``draws`` noise-only
releases AND stays usable under re-noising). The simulation noise is seeded (``seed``), is not DP noise, and
nothing here is released or stored beyond the forecast itself.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from dpkps_core.dp.forecast import ForecastStatistics
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.forecast_outlook import Forecast

#: Noise draws the DP forecast simulates by default for each of its two checks.
DEFAULT_UNCERTAINTY_DRAWS = 40
#: The interval of the forecast's quantities: the 5th to the 95th percentile over the re-noised draws.
INTERVAL_PERCENTILES = (5.0, 95.0)

CONFIDENT = "confident"
UNCERTAIN = "uncertain"
TOO_SMALL = "too small"


@dataclasses.dataclass(frozen=True)
class ForecastQuantities:
    """What a verdict is read from: the expected number of real terms in Ṽ (usable at ≥ ``need``) and the weakest
    class's density signal/noise (usable at ≥ 1)."""

    real_terms: float
    min_snr: float
    need: int

    @property
    def vocabulary_usable(self) -> bool:
        return self.real_terms >= self.need

    @property
    def densities_usable(self) -> bool:
        return self.min_snr >= 1.0


@dataclasses.dataclass(frozen=True)
class ForecastConfidence:
    """The DP forecast's judgement of its own verdict (module docstring).

    ``level``: :data:`CONFIDENT`, :data:`UNCERTAIN` or :data:`TOO_SMALL`; ``vocabulary_trusted`` /
    ``densities_trusted``: whether a *usable* verdict of that half holds beyond noise alone and over the interval
    (a not-usable half is never upgraded); the intervals are (5th, 95th) percentiles over ``draws`` re-noised
    releases; ``noise_only_real_terms`` / ``noise_only_snr``: the largest values of ``draws`` releases of an empty
    corpus."""

    level: str
    draws: int
    vocabulary_trusted: bool
    densities_trusted: bool
    real_terms_interval: tuple[float, float]
    snr_interval: tuple[float, float]
    noise_only_real_terms: float
    noise_only_snr: float
    sentence: str


def noise_only(stats: ForecastStatistics, rng: np.random.Generator) -> ForecastStatistics:
    """A release of the same public parameters on a corpus with no document: every statistic 0, plus the
    release's own Laplace noise (post-processing of public quantities only)."""
    return dataclasses.replace(
        stats, curve=rng.laplace(0.0, stats.curve_noise_scale, len(stats.thresholds)),
        class_counts=rng.laplace(0.0, stats.class_noise_scale, len(stats.classes)))


def re_noised(stats: ForecastStatistics, rng: np.random.Generator) -> ForecastStatistics:
    """The release with a fresh draw of its own noise added (a parametric bootstrap of the forecast)."""
    return dataclasses.replace(
        stats, curve=np.asarray(stats.curve, dtype=np.float64)
        + rng.laplace(0.0, stats.curve_noise_scale, len(stats.thresholds)),
        class_counts=np.asarray(stats.class_counts, dtype=np.float64)
        + rng.laplace(0.0, stats.class_noise_scale, len(stats.classes)))


def _fmt_terms(x: float) -> str:
    return f"{x:,.0f}"


def judge_confidence(
    stats: ForecastStatistics, observed: ForecastQuantities,
    quantities_of: Callable[[ForecastStatistics, int], ForecastQuantities], *,
    draws: int = DEFAULT_UNCERTAINTY_DRAWS, seed: int = 0,
) -> ForecastConfidence:
    """:class:`ForecastConfidence` of a DP forecast whose release is ``stats`` and whose verdict was read from
    ``observed``; ``quantities_of(release, i)`` computes the same quantities for a simulated release (``i``: the
    draw's index, for a per-draw simulation seed)."""
    if isinstance(draws, bool) or not isinstance(draws, int) or draws < 1:
        raise ParameterError(f"The forecast's uncertainty needs at least 1 noise draw, got {draws!r}.")
    rng = np.random.default_rng([int(seed), 20261127])
    null = [quantities_of(noise_only(stats, rng), i) for i in range(draws)]
    boot = [quantities_of(re_noised(stats, rng), draws + i) for i in range(draws)]
    null_terms = max(q.real_terms for q in null)
    null_snr = max(q.min_snr for q in null)
    terms = np.array([q.real_terms for q in boot])
    snrs = np.array([q.min_snr for q in boot])
    t_lo, t_hi = (float(v) for v in np.percentile(terms, INTERVAL_PERCENTILES))
    s_lo, s_hi = (float(v) for v in np.percentile(snrs, INTERVAL_PERCENTILES))
    beyond_terms = observed.real_terms > null_terms
    beyond_snr = observed.min_snr > null_snr
    vocab_trusted = observed.vocabulary_usable and beyond_terms and t_lo >= observed.need
    kde_trusted = observed.densities_usable and beyond_snr and s_lo >= 1.0
    vocab_sure = vocab_trusted or (not observed.vocabulary_usable and t_hi < observed.need)
    kde_sure = kde_trusted or (not observed.densities_usable and s_hi < 1.0)
    interval = (f"over {draws} draws of the forecast's own noise, {_fmt_terms(t_lo)}–{_fmt_terms(t_hi)} real terms "
                f"(usable from {observed.need:,}) and the weakest class's signal/noise {s_lo:.2f}–{s_hi:.2f} "
                "(usable from 1)")
    if not beyond_terms and not beyond_snr:
        level = TOO_SMALL
        sentence = (f"Too small to forecast at ε_forecast = {stats.epsilon:g}: a release of NO documents at all "
                    f"gives forecasts like this one (its noise: sd ≈ {np.sqrt(2) * stats.curve_noise_scale:,.0f} "
                    f"terms at each count threshold, ≈ {np.sqrt(2) * stats.class_noise_scale:,.0f} documents per "
                    "class). Raise ε_forecast, or use the exact preview (private, local — not covered by ε); "
                    "the verdict below is not evidence either way.")
    elif vocab_sure and kde_sure:
        level = CONFIDENT
        sentence = f"The verdict holds {interval}."
    else:
        level = UNCERTAIN
        sentence = (f"Uncertain at ε_forecast = {stats.epsilon:g}: {interval} — the release cannot settle it; "
                    "a larger ε_forecast or the exact preview (private, local) can.")
    return ForecastConfidence(
        level=level, draws=draws, vocabulary_trusted=vocab_trusted, densities_trusted=kde_trusted,
        real_terms_interval=(t_lo, t_hi), snr_interval=(s_lo, s_hi), noise_only_real_terms=float(null_terms),
        noise_only_snr=float(null_snr), sentence=sentence)


def apply_confidence(forecast: Forecast, confidence: ForecastConfidence) -> Forecast:
    """``forecast`` with its verdict qualified by ``confidence``: a half that is usable at the released values but
    not beyond noise alone or over the interval is no longer called usable (so no green verdict), and the verdict
    says how sure it is — first when it is not sure, last when it is."""
    if confidence.level == CONFIDENT:
        verdict = f"{forecast.verdict} {confidence.sentence}"
    else:
        point = forecast.verdict
        verdict = f"{confidence.sentence} At the released values alone: {point[:1].lower()}{point[1:]}"
    return dataclasses.replace(
        forecast, verdict=verdict, confidence=confidence.level,
        vocabulary_usable=forecast.vocabulary_usable and confidence.vocabulary_trusted,
        kde_usable=forecast.kde_usable and confidence.densities_trusted,
        real_terms_interval=confidence.real_terms_interval, snr_interval=confidence.snr_interval)
