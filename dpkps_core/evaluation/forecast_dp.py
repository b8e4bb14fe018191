"""The default "Will this work?" (docs/DESIGN.md §6): a small, charged ε_forecast release of the statistics the forecast
needs (:mod:`dpkps_core.dp.forecast`), then :func:`forecast_from_release` as post-processing. Choosing ε, N or a
method from it stays inside the ledger's ε; re-forecasting other settings from the same release is free
(docs/PRIVACY.md "Previews that steer choices"). :func:`forecast_preview` is the one entry point that also offers
the exact preview (:mod:`dpkps_core.evaluation.forecast_exact`), only on request.

Nothing here logs or prints document text."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkps_core.method import pipeline
from dpkps_core.method.budget import admit
from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.method.training_source import StreamedCorpus
from dpkps_core.corpus import Corpus
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.forecast import (DEFAULT_CURVE_SHARE, DEFAULT_FORECAST_EPSILON, DEFAULT_THRESHOLDS,
                                    ForecastStatistics, forecast_event, release_forecast_statistics)
from dpkps_core.dp.release import ReleaseContext, release
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.embeddings import Embedder
from dpkps_core.errors import ParameterError
from dpkps_core.progress import Progress
from dpkps_core.evaluation.forecast_exact import forecast
from dpkps_core.evaluation.forecast_outlook import (Forecast, assemble_forecast, density_outlook,
                                                    expected_noise_share, forecast_epsilons, rff_members,
                                                    vocabulary_outlook)
from dpkps_core.evaluation.forecast_uncertainty import (DEFAULT_UNCERTAINTY_DRAWS, ForecastQuantities,
                                                        apply_confidence, judge_confidence)
from dpkps_core.method.vocabulary import PublicVocabulary

#: Shown with a DP forecast: what it is, and that choosing from it stays inside ε.
DP_FORECAST_NOTE = ("DP forecast: post-processing of the ε_forecast release recorded in the ledger — choosing ε, N "
                    "or a method from it is covered by ε (docs/PRIVACY.md).")
#: What a DP forecast read (issue 31 §4): its cost does not grow with the corpus once the release is drawn.
DP_FORECAST_SCOPE = ("post-processing of the ε_forecast release (the noisy count curve over V and the noisy class "
                     "sizes: a fixed size, whatever the corpus); the release counted every admitted training document "
                     "in one streamed pass over chunks of rows (memory: one chunk and one count per term of V)")
#: Shown with an exact preview (the badge's words).
EXACT_PREVIEW_NOTE = "private, local — not covered by ε"


def release_forecast(
    train: Corpus | StreamedCorpus, vocabulary: PublicVocabulary, *, context: ReleaseContext,
    epsilon: float = DEFAULT_FORECAST_EPSILON, terms_per_doc: int = 10, by_person: bool = False,
    curve_share: float = DEFAULT_CURVE_SHARE, progress: Progress | None = None,
) -> ForecastStatistics:
    """The DP forecast's release, in the one order of :func:`dpkps_core.dp.release.release` (docs/DESIGN.md §2.0):
    admit the training part's units (charged at once) → count on the admitted documents only → charge the frozen
    event (:func:`~dpkps_core.dp.forecast.forecast_event`, step ``"forecast"``) → draw the noise
    (:func:`~dpkps_core.dp.forecast.release_forecast_statistics`).

    ``train`` is the training part, in memory or streamed from its file
    (:class:`~dpkps_core.method.training_source.StreamedCorpus`: its admitted rows counted chunk by chunk by the
    vocabulary pass, ``progress`` told after each chunk — the same counts, so the same release, issue 31 §4);
    documents of undeclared labels enter no DP step. ``terms_per_doc`` is the S the release counts (a release serves
    forecasts of that S only). ``context``: the ledger that admits and is charged (the corpus's ledger), and the
    noise source (:class:`~dpkps_core.dp.release.ReleaseContext`)."""
    epsilon = check_epsilon(epsilon, "ε_forecast")
    terms_per_doc = check_positive_int(terms_per_doc, "S (terms per document)", maximum=LIMITS["terms_per_doc"])
    if not 0.0 < float(curve_share) < 1.0:  # refusals on public input come before anything is admitted
        raise ParameterError("The forecast's curve share must lie strictly between 0 and 1.")
    if isinstance(train, StreamedCorpus):
        if bool(by_person) != train.by_person:
            raise ParameterError("This streamed corpus was prepared for another unit of privacy; open it again.")
        classes, unit = tuple(train.classes), train.privacy_unit
        admit_rows: Any = lambda: train.admit_training_rows(context.ledger, epsilon, "the DP forecast")  # noqa: E731
        statistic: Any = lambda part: (  # noqa: E731 - its rows chunk by chunk (the vocabulary pass)
            pipeline.admitted_term_counts(part, vocabulary, terms_per_doc=terms_per_doc, progress=progress),
            part.labels, part.groups)
    else:
        train = train.declared_only() if train.public_classes is not None else train
        classes = tuple(train.classes)
        if by_person and train.persons is None:
            raise ParameterError("The privacy unit is a person, but the corpus has no person column.")
        unit = train.privacy_unit if by_person else ADD_REMOVE_ONE_DOCUMENT
        admit_rows = lambda: admit(train, context.ledger, epsilon, by_person=by_person,  # noqa: E731
                                   what="the DP forecast")

        def statistic(admission: Any) -> tuple[np.ndarray, Any, Any]:
            docs = admission.corpus
            groups = docs.persons if by_person else None
            return (pipeline.term_counts(docs.texts, vocabulary, terms_per_doc=terms_per_doc, groups=groups),
                    docs.labels, groups)
    if not classes:
        raise ParameterError("The forecast needs the declared class names.")
    event = forecast_event(epsilon=epsilon, terms_per_doc=terms_per_doc, curve_share=float(curve_share),
                           thresholds=len(DEFAULT_THRESHOLDS), classes=len(classes),
                           public_vocabulary_size=len(vocabulary), neighbouring=unit)
    # the one release order (dpkps_core.dp.release): admit → count the admitted → charge the event → draw the noise
    return release(admit_rows, statistic=statistic, event=event, draw=lambda _, stat: release_forecast_statistics(
        stat[0], stat[1], classes=classes, epsilon=epsilon, terms_per_doc=terms_per_doc, context=context.for_draw(),
        public_vocabulary=vocabulary.name, groups=stat[2], curve_share=curve_share, neighbouring=unit)).value


def dp_forecast(
    train: Corpus, vocabulary: PublicVocabulary, config: SamplingConfig, *, context: ReleaseContext,
    epsilon: float = DEFAULT_FORECAST_EPSILON, by_person: bool = False,
    curve_share: float = DEFAULT_CURVE_SHARE, **options: Any,
) -> tuple[ForecastStatistics, Forecast]:
    """The default "Will this work?": :func:`release_forecast` of ``config``'s S (charges ε_forecast), then
    :func:`forecast_from_release` of ``config`` (``options``: its keyword arguments — ``eps_voc``,
    ``min_real_terms``, ``max_noise_share``, ``reps``, ``seed``; ``context``: the release's ledger and noise source,
    :class:`~dpkps_core.dp.release.ReleaseContext`). Returns the release — keep it: forecasts for other ε, N or
    methods are free post-processing of it — and the forecast."""
    forecast_epsilons(config, options.get("eps_voc"))  # refuse a bad setting before anything is charged
    stats = release_forecast(train, vocabulary, context=context, epsilon=epsilon,
                             terms_per_doc=config.terms_per_doc, by_person=by_person, curve_share=curve_share)
    return stats, forecast_from_release(stats, config, **options)


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


def _modelled_density(config: SamplingConfig, stats: ForecastStatistics, counts: np.ndarray, *, eps_kde: float
                      ) -> tuple[dict[str, dict[str, float]], str, float | None]:
    """The density half of the DP forecast: with the noisy class sizes ñ_c (n = Σ ñ_c) and the reconstructed top-N
    counts r, a class's keyphrase histogram is modelled as (ñ_c/n)·r/s̄, s̄ = Σr/n the mean number of distinct
    terms per document — classes assumed to share one term distribution, which understates the spread of classes
    with their own vocabulary (so the verdict errs on the cautious side). Histogram: its sd; RFF: the sd of the
    normalised histogram (the same for every class), each against :func:`density_outlook`'s error."""
    sizes = stats.class_sizes()
    n = max(sum(sizes.values()), 1.0)
    top = counts[:config.vocab_size]
    top = top[top > 0]
    if not top.size:
        return {}, "", None
    if config.density_kind == "histogram":
        kind = ("Laplace sd √2/ε_kde vs the modelled sd of the class's keyphrase histogram over Ṽ "
                "(from the DP forecast release)")
        mean_terms = float(np.clip(counts.sum() / n, 1.0, stats.terms_per_doc))
        spreads = {c: (float(round(n_c)), float(n_c / n * top.std() / mean_terms)) for c, n_c in sizes.items()}
    else:
        members = rff_members(config, n_classes=len(sizes))
        kind = (f"RFF + DP error 1/√I + 2√I/(n_c·ε_kde/{members}) vs the modelled sd of the normalised "
                "keyphrase histogram (from the DP forecast release)")
        spread = float(top.std() / top.sum())
        spreads = {c: (float(round(n_c)), spread) for c, n_c in sizes.items()}
    kde, suggested = density_outlook(config, spreads, eps_kde=eps_kde, class_sizes=sizes)
    return kde, kind, suggested


def forecast_from_release(
    stats: ForecastStatistics, config: SamplingConfig, *, eps_voc: float | None = None,
    min_real_terms: int | None = None, max_noise_share: float = 0.5, reps: int = 5, seed: int = 0,
    uncertainty_draws: int = DEFAULT_UNCERTAINTY_DRAWS,
) -> Forecast:
    """"Will this work?" for ``config`` as post-processing of a DP forecast release (docs/DESIGN.md §6; no further ε, safe
    to show). ``eps_voc``: a what-if ε_voc in place of the config's. ``config.terms_per_doc`` must be the release's
    S (it is the curve's S).

    Vocabulary: the same outlook as the exact preview
    (:func:`~dpkps_core.evaluation.forecast_outlook.vocabulary_outlook`) on :func:`reconstructed_counts` (the DP
    count curve as a count vector). Densities: :func:`_modelled_density`. Then the verdict is judged against the
    release's own noise (:mod:`~dpkps_core.evaluation.forecast_uncertainty`, ``uncertainty_draws`` simulated
    releases of each kind): a verdict that an empty corpus' release could give, or that does not hold over the
    interval, is never called usable."""
    eps_voc, eps_kde = forecast_epsilons(config, eps_voc)
    if config.terms_per_doc != stats.terms_per_doc:
        raise ParameterError(f"This DP forecast release counted S = {stats.terms_per_doc} terms per document; "
                             f"forecasting S = {config.terms_per_doc} needs a new release.")
    counts = reconstructed_counts(stats)
    vocab = vocabulary_outlook(counts, eps_voc=eps_voc, terms_per_doc=stats.terms_per_doc,
                               vocab_size=config.vocab_size, min_real_terms=min_real_terms,
                               max_noise_share=max_noise_share, reps=reps, seed=seed)
    kde, kde_kind, suggested_kde = _modelled_density(config, stats, counts, eps_kde=eps_kde)
    sizes = stats.class_sizes()
    curve = stats.smoothed_curve()
    point = assemble_forecast(
        config, vocab, kde, eps_voc=eps_voc, eps_kde=eps_kde, kde_error_kind=kde_kind, suggested_eps_kde=suggested_kde,
        max_noise_share=max_noise_share, n_documents=int(round(max(sum(sizes.values()), 1.0))),
        class_sizes={c: int(round(v)) for c, v in sizes.items()},
        terms_in_corpus=int(round(curve[0])) if curve.size else 0,
        count_curve=[(int(c), int(round(g))) for c, g in zip(stats.thresholds, curve) if round(g) >= 1],
        private=False, note=DP_FORECAST_NOTE, disclosure_note=DP_FORECAST_NOTE, dp=True,
        epsilon_forecast=stats.epsilon, computed_over=DP_FORECAST_SCOPE)

    def quantities_of(release: ForecastStatistics, draw: int) -> ForecastQuantities:
        """The verdict's two quantities for a simulated release (one noise-share simulation of 2 repetitions)."""
        c = reconstructed_counts(release)
        real = expected_noise_share(c, eps_voc=eps_voc, terms_per_doc=stats.terms_per_doc,
                                    vocab_size=config.vocab_size, reps=2, seed=seed + 1 + draw)[1]
        return ForecastQuantities(real, _min_snr(_modelled_density(config, release, c, eps_kde=eps_kde)[0]),
                                  vocab.min_real_terms)

    observed = ForecastQuantities(vocab.expected_real_terms, _min_snr(kde), vocab.min_real_terms)
    confidence = judge_confidence(stats, observed, quantities_of, draws=uncertainty_draws, seed=seed)
    return apply_confidence(point, confidence)


def _min_snr(kde: dict[str, dict[str, float]]) -> float:
    """The weakest class's density signal/noise (0 with no density: no term of V occurs)."""
    return min((float(v["snr"]) for v in kde.values()), default=0.0)


def forecast_preview(
    train: Corpus, vocabulary: PublicVocabulary, config: SamplingConfig, *, exact: bool = False,
    context: ReleaseContext | None = None, epsilon_forecast: float = DEFAULT_FORECAST_EPSILON, by_person: bool = False,
    embedder: Embedder | None = None, **options: Any,
) -> Forecast:
    """One entry point for the CLI and scripts: the DP forecast of ``config`` by default (charges ``context``'s ledger
    ε_forecast and draws its noise, :class:`~dpkps_core.dp.release.ReleaseContext`), the exact preview only with
    ``exact=True`` (private, local — not covered by ε; charges nothing, needs no context).
    ``options``: the forecasts' keyword arguments (``eps_voc``, ``min_real_terms``, ``max_noise_share``, ``reps``,
    ``seed``)."""
    if exact:
        train = train.declared_only() if train.public_classes is not None else train
        groups = train.persons if by_person else None
        counts = pipeline.term_counts(train.texts, vocabulary, terms_per_doc=config.terms_per_doc, groups=groups)
        return forecast(train.texts, train.labels, vocabulary, config, counts=counts, embedder=embedder, **options)
    if context is None or context.ledger is None:
        raise ParameterError("The DP forecast charges ε_forecast: give the corpus's ledger and a noise source "
                             "(or ask for the exact preview, which is not covered by ε).")
    return dp_forecast(train, vocabulary, config, context=context, epsilon=epsilon_forecast,
                       by_person=by_person, **options)[1]
