"""The DP forecast says what it cannot know (dpkps_core.evaluation.forecast_uncertainty; docs/DESIGN.md §6).

At ε_forecast = 0.2 a small corpus' release is mostly noise (count curve: Laplace scale 100 per threshold; class
sizes: 10). Before, the verdict read off one such release was green in about a third of the draws on a corpus
whose exact preview says "not usable" (a vocabulary that matches nothing). Now a green verdict needs to stand above
every one of the noise-only releases AND to hold over the interval of the forecast's own noise."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from eval_toys import make_toy_corpus, make_toy_vocabulary

from dpkps_core.method import pipeline
from dpkps_core.method.config import build_sampling_config
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.forecast_dp import dp_forecast, forecast_from_release
from dpkps_core.evaluation.forecast_exact import forecast
from dpkps_core.evaluation.forecast_uncertainty import (CONFIDENT, TOO_SMALL, UNCERTAIN, ForecastQuantities,
                                                        judge_confidence, noise_only, re_noised)
from dpkps_core.method.vocabulary import PublicVocabulary

#: A 12-term public vocabulary none of whose terms occurs in the toy documents.
NO_MATCH = PublicVocabulary(name="no-match", terms=tuple(f"zzword{i}" for i in range(12)), licence="t", source="t")
SMALL_CFG = build_sampling_config(eps_voc=5.0, eps_kde=5.0, terms_per_doc=10, vocab_size=10, length=5)


def _small_corpus(*, persons: bool = False):
    """87 training notes over 3 classes (the walk's size); with ``persons``, 66 patients (some with 2 notes)."""
    corpus = make_toy_corpus(per_class=29)
    if not persons:
        return corpus
    ids = tuple(f"p{i % 66}" for i in range(len(corpus)))
    return dataclasses.replace(corpus, persons=ids, person_column="patient_id")


@pytest.mark.parametrize("by_person", [False, True])
def test_a_corpus_the_exact_preview_calls_not_usable_is_never_called_usable(by_person: bool) -> None:
    corpus = _small_corpus(persons=by_person)
    counts = pipeline.term_counts(corpus.texts, NO_MATCH, terms_per_doc=10,
                                  groups=corpus.persons if by_person else None)
    assert not forecast(corpus.texts, corpus.labels, NO_MATCH, SMALL_CFG, counts=counts).usable
    levels = []
    for seed in range(60):
        _, f = dp_forecast(corpus, NO_MATCH, SMALL_CFG,
                           context=ReleaseContext(noise=NoiseSource(seed, sampler="numpy"), ledger=PrivacyLedger()),
                           by_person=by_person, epsilon=0.2, reps=2)
        assert not f.usable and not f.vocabulary_usable, (seed, f.verdict)
        assert not f.verdict.startswith(("Likely usable", "Usable")), (seed, f.verdict)
        levels.append(f.confidence)
    # the release cannot tell this corpus from an empty one: mostly said outright, never a confident verdict
    assert levels.count(TOO_SMALL) >= 40 and set(levels) <= {TOO_SMALL, UNCERTAIN}


def test_too_small_says_why_and_what_to_do() -> None:
    _, f = dp_forecast(_small_corpus(), NO_MATCH, SMALL_CFG,
                       context=ReleaseContext(noise=NoiseSource(3, sampler="numpy"), ledger=PrivacyLedger()),
                       epsilon=0.2, reps=2)
    if f.confidence != TOO_SMALL:  # seed 3 is one of the many "too small" draws
        pytest.fail(f"expected a too-small verdict, got {f.confidence}: {f.verdict}")
    assert f.verdict.startswith("Too small to forecast at ε_forecast = 0.2")
    assert "Raise ε_forecast" in f.verdict and "exact preview (private, local" in f.verdict
    assert "sd ≈ 141 terms" in f.verdict and "≈ 14 documents per class" in f.verdict  # √2·100 and √2·10
    assert "At the released values alone:" in f.verdict  # the point verdict stays visible, demoted


def test_a_strong_corpus_stays_confidently_usable_with_its_interval() -> None:
    corpus, vocab = make_toy_corpus(per_class=300), make_toy_vocabulary(n_filler=400)
    cfg = build_sampling_config(eps_voc=5.0, eps_kde=5.0, terms_per_doc=5, vocab_size=20, length=5)
    for seed in range(5):
        _, f = dp_forecast(corpus, vocab, cfg,
                           context=ReleaseContext(noise=NoiseSource(seed, sampler="numpy"), ledger=PrivacyLedger()),
                           epsilon=1.0, reps=2)
        assert f.usable and f.confidence == CONFIDENT and f.verdict.startswith("Likely usable")
        lo, hi = f.real_terms_interval
        assert lo <= f.expected_real_terms <= hi + 1e-9 and lo >= f.min_real_terms
        assert 1.0 <= f.snr_interval[0] <= f.snr_interval[1]
        assert f"The verdict holds over {40} draws" in f.verdict


def test_the_judgement_is_post_processing_seeded_and_charges_nothing() -> None:
    led = PrivacyLedger()
    stats, f = dp_forecast(_small_corpus(), NO_MATCH, SMALL_CFG,
                           context=ReleaseContext(noise=NoiseSource(5, sampler="numpy"), ledger=led),
                           epsilon=0.2, reps=2)
    spent = led.total_epsilon
    again = forecast_from_release(stats, SMALL_CFG, reps=2)
    assert led.total_epsilon == spent == pytest.approx(0.2)
    assert again.to_dict() == f.to_dict()  # the simulation is seeded: the same release gives the same verdict
    other = forecast_from_release(stats, SMALL_CFG, reps=2, seed=1, uncertainty_draws=10)
    assert other.confidence in (TOO_SMALL, UNCERTAIN)


def test_simulated_releases_keep_the_public_parameters_and_the_noise_scale() -> None:
    stats, _ = dp_forecast(_small_corpus(), NO_MATCH, SMALL_CFG,
                           context=ReleaseContext(noise=NoiseSource(1, sampler="numpy"), ledger=PrivacyLedger()),
                           epsilon=0.2, reps=2)
    rng = np.random.default_rng(0)
    empty = [noise_only(stats, rng) for _ in range(400)]
    assert all(e.thresholds == stats.thresholds and e.classes == stats.classes for e in empty)
    draws = np.concatenate([e.curve for e in empty])
    assert np.mean(np.abs(draws)) == pytest.approx(stats.curve_noise_scale, rel=0.02)  # E|Laplace(b)| = b
    shifted = re_noised(stats, rng)
    assert np.mean(np.abs(shifted.curve - stats.curve)) == pytest.approx(stats.curve_noise_scale, rel=0.1)


def test_judge_confidence_refuses_a_bad_draw_count() -> None:
    stats, _ = dp_forecast(_small_corpus(), NO_MATCH, SMALL_CFG,
                           context=ReleaseContext(noise=NoiseSource(1, sampler="numpy"), ledger=PrivacyLedger()),
                           epsilon=0.2, reps=2)
    observed = ForecastQuantities(real_terms=0.0, min_snr=0.0, need=10)
    for bad in (0, -1, True, 2.5, "4"):
        with pytest.raises(ParameterError, match="noise draw"):
            judge_confidence(stats, observed, lambda release, i: observed, draws=bad)  # type: ignore[arg-type]


def test_the_dp_forecast_chart_says_dp_and_the_exact_one_private() -> None:
    from dpkps_core.evaluation.forecast_outlook import forecast_figure

    corpus, vocab = make_toy_corpus(per_class=300), make_toy_vocabulary(n_filler=400)
    cfg = build_sampling_config(eps_voc=5.0, eps_kde=5.0, terms_per_doc=5, vocab_size=20, length=5)
    _, dp = dp_forecast(corpus, vocab, cfg,
                        context=ReleaseContext(noise=NoiseSource(0, sampler="numpy"), ledger=PrivacyLedger()),
                        epsilon=1.0, reps=2)
    exact = forecast(corpus.texts, corpus.labels, vocab, cfg,
                     counts=pipeline.term_counts(corpus.texts, vocab, terms_per_doc=5))
    dp_fig, exact_fig = forecast_figure(dp).to_dict(), forecast_figure(exact).to_dict()
    dp_text = str(dp_fig["layout"]) + " ".join(str(t.get("name", "")) for t in dp_fig["data"])
    assert "DP forecast, ε_forecast = 1: covered by ε" in dp_fig["layout"]["title"]["text"]
    assert "private" not in dp_text and "true" not in dp_text and "DP-estimated document count" in dp_text
    assert "(private — not for release)" in exact_fig["layout"]["title"]["text"]
    assert exact_fig["layout"]["xaxis"]["title"]["text"].startswith("true document count")
