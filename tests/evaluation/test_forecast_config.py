"""Both "Will this work?" forecasts take the sampling settings as one frozen SamplingConfig (docs/ARCHITECTURE.md
"One path for a setting"; docs/DESIGN.md §6) and give the same numbers as before they did.

The snapshots (snapshots/forecast_config.json) hold what the keyword-argument forecasts gave (``eps_voc=…,
eps_kde=…, terms_per_doc=…, vocab_size=…, method=…, density=…, length=…, features=…, bandwidth=…``) before the
settings became a config (first pinned as SHA-256s of the raw JSON; docs/TESTING.md "Pinned digests" says why they
became snapshots with a tolerance): a config-built forecast must reproduce every field of the old one, verdict text
included. No real model: the RFF
case embeds with the bag-of-words stand-in of tests/evaluation/test_evaluation.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpkps_core.method.config import SamplingConfig, build_sampling_config
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.forecast_dp import dp_forecast, forecast_from_release, release_forecast
from dpkps_core.evaluation.forecast_exact import forecast
from dpkps_core.evaluation.forecast_outlook import Forecast
from dpkps_core.evaluation.sweep import dp_forecast_grid
from canonical import assert_matches_snapshot, canonical_digest, snapshot
from eval_toys import BowEmbedder, make_toy_corpus, make_toy_vocabulary


SNAPSHOTS = Path(__file__).parent / "snapshots" / "forecast_config.json"


def _digest(f: Forecast) -> str:
    """A forecast's canonical digest (floats to 9 significant digits; docs/TESTING.md "Pinned digests")."""
    return canonical_digest(f.to_dict())


#: Fields added since the snapshots were taken: the DP forecast's judgement of its own verdict
#: (dpkps_core.evaluation.forecast_uncertainty), and what each forecast read (issue 31 §4).
ADDED = ("confidence", "real_terms_interval", "snr_interval", "computed_over")
#: What that judgement may change in a DP forecast: the verdict (qualified) and the usable flags (lowered).
JUDGED = ("verdict", "usable", "vocabulary_usable", "kde_usable")


def _pin(f: Forecast, name: str) -> None:
    """Every field of the forecast as pinned before the settings became a config: texts, counts and keys exactly,
    floats within 10⁻⁶ relative — the RFF cases embed terms in float32, whose kernels differ between CPUs by
    ≈ 10⁻⁸ relative (docs/TESTING.md "Pinned digests"). A DP forecast's verdict is the pinned one qualified by
    its confidence, and it is usable only where the pinned one was."""
    if not f.dp:
        assert (f.confidence, f.real_terms_interval, f.snr_interval) == ("", None, None)
        assert_matches_snapshot(f.to_dict(), file=SNAPSHOTS, name=name, ignore=ADDED)
        return
    assert_matches_snapshot(f.to_dict(), file=SNAPSHOTS, name=name, ignore=ADDED + JUDGED)
    pinned = snapshot(SNAPSHOTS, name)
    assert pinned["verdict"] in f.verdict or pinned["verdict"][:1].lower() + pinned["verdict"][1:] in f.verdict
    assert f.confidence in ("confident", "uncertain", "too small")
    assert (f.vocabulary_usable <= pinned["vocabulary_usable"]) and (f.kde_usable <= pinned["kde_usable"])


@pytest.fixture(scope="module")
def toy() -> tuple:
    return make_toy_corpus(), make_toy_vocabulary(n_filler=20_000), make_toy_vocabulary()


def test_exact_forecast_from_a_config_equals_the_keyword_forecast(toy: tuple) -> None:
    corpus, big, small = toy
    # histogram, a poor vocabulary (remedies in the verdict) and a poor density (a suggested ε_kde)
    poor = forecast(corpus.texts, corpus.labels, big,
                    build_sampling_config(eps_voc=0.05, eps_kde=0.01, terms_per_doc=5, vocab_size=30, length=5))
    _pin(poor, "exact_histogram_poor")
    assert poor.expected_noise_share == 1.0 and poor.noise_floor == pytest.approx(921.2338374638856, rel=1e-12)
    assert poor.suggested_eps_voc == 5.0 and poor.suggested_eps_kde == pytest.approx(1.9712966196628812, rel=1e-12)
    # RFF with the exact KDE over embedded stand-in terms, a user I
    rff = forecast(corpus.texts, corpus.labels, small,
                   build_sampling_config(eps_voc=3.0, eps_kde=2.0, terms_per_doc=5, vocab_size=30,
                                         method="iterative-log", length=5, features=300), embedder=BowEmbedder())
    _pin(rff, "exact_rff_iterative_log")
    assert rff.expected_real_terms == pytest.approx(24.2) and rff.kde["sport"]["snr"] == pytest.approx(0.010151539653)
    # RFF for independent sampling with the user's σ
    bw = forecast(corpus.texts, corpus.labels, small,
                  build_sampling_config(eps_voc=3.0, eps_kde=2.0, terms_per_doc=5, vocab_size=30, density="rff",
                                        length=5, bandwidth=0.7), embedder=BowEmbedder())
    _pin(bw, "exact_rff_independent_sigma")
    assert "σ = 0.7" in bw.kde_error_kind


def test_exact_forecast_remedies_a_smaller_n_and_a_prefix_of_v_as_before() -> None:
    corpus, big = make_toy_corpus(per_class=200), make_toy_vocabulary(n_filler=20_000)
    cfg = build_sampling_config(eps_voc=0.5, eps_kde=0.5, terms_per_doc=5, vocab_size=30, length=4,
                                method="iterative-log", features=20)
    f = forecast(corpus.texts, corpus.labels, big, cfg, min_real_terms=20, embedder=BowEmbedder())
    _pin(f, "exact_remedies")
    assert f.vocabulary_quality == "poor" and f.suggested_eps_voc == 1.0 and f.suggested_max_terms == 10_000
    assert "a smaller N = 20" in f.verdict


def test_dp_forecast_from_a_config_equals_the_keyword_forecast(toy: tuple) -> None:
    corpus, big, _ = toy
    led = PrivacyLedger()
    stats, f = dp_forecast(corpus, big, build_sampling_config(eps_voc=1.0, eps_kde=2.0, terms_per_doc=5,
                                                              vocab_size=30, length=5),
                           context=ReleaseContext(noise=NoiseSource(7, sampler="numpy"), ledger=led), epsilon=0.5,
                           reps=3)
    assert led.total_epsilon == pytest.approx(0.5) and f.dp and f.epsilon_forecast == 0.5
    _pin(f, "dp_histogram")
    assert f.suggested_eps_voc == 8.0 and f.suggested_eps_kde == pytest.approx(1.4695507056190422, rel=1e-12)
    rff = forecast_from_release(stats, build_sampling_config(eps_voc=1.0, eps_kde=2.0, vocab_size=30, length=5,
                                                             method="iterative-log", features=500, terms_per_doc=5))
    _pin(rff, "dp_rff_iterative_log")
    assert rff.kde["sport"]["snr"] == pytest.approx(0.010076292073)  # the error at the unrounded noisy class size


def test_what_if_eps_voc_and_the_dp_sweep_are_the_config_with_that_eps_voc(toy: tuple) -> None:
    corpus, big, _ = toy
    stats = release_forecast(corpus, big,
                             context=ReleaseContext(noise=NoiseSource(3, sampler="numpy"), ledger=PrivacyLedger()),
                             epsilon=1.0, terms_per_doc=5)
    cfg = SamplingConfig(eps_voc=1.0, eps_kde=2.0, terms_per_doc=5, vocab_size=30, length=5)
    assert _digest(forecast_from_release(stats, cfg, eps_voc=4.0, reps=2)) == \
        _digest(forecast_from_release(stats, cfg.replace(eps_voc=4.0), reps=2))
    df = dp_forecast_grid(stats, cfg, eps_voc_grid=(0.5, 4.0), eps_kde_grid=(2.0,), methods=("independent",), reps=2)
    cell = forecast_from_release(stats, cfg.replace(eps_voc=4.0), reps=2)
    row = df[df["eps_voc"] == 4.0].iloc[0]
    assert row["expected_noise_share"] == cell.expected_noise_share and bool(row["usable"]) == cell.usable


def test_settings_come_only_as_a_config(toy: tuple) -> None:
    corpus, big, _ = toy
    stats = release_forecast(corpus, big,
                             context=ReleaseContext(noise=NoiseSource(3, sampler="numpy"), ledger=PrivacyLedger()),
                             epsilon=1.0, terms_per_doc=5)
    with pytest.raises(ParameterError, match="SamplingConfig"):
        forecast_from_release(stats, {"eps_voc": 1.0, "terms_per_doc": 5})
    with pytest.raises(TypeError):
        forecast_from_release(stats, SamplingConfig(terms_per_doc=5), vocab_size=30)  # no loose settings
    with pytest.raises(ParameterError, match="needs a new release"):
        forecast_from_release(stats, SamplingConfig(terms_per_doc=10))
    led = PrivacyLedger()
    with pytest.raises(ParameterError, match="ε_voc"):  # refused before anything is charged
        dp_forecast(corpus, big, SamplingConfig(terms_per_doc=5),
                    context=ReleaseContext(noise=NoiseSource(1), ledger=led), eps_voc=-1.0)
    assert led.total_epsilon == 0
