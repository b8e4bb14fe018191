"""NoiseSource: OpenDP's vetted samplers by default, NumPy when seeded or asked for (issue 11 §4).

Variance checks use n draws and a tolerance of 6 standard errors of the sample variance (Laplace: excess
kurtosis 3, so Var(s²) ≈ (2 + 3)·(2b²)²/n; Gaussian: Var(s²) ≈ 2σ⁴/n): a false failure has probability < 1e-8.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkps_core.dp import rng as rng_mod
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.dp.rng import NoiseSource, SEED_POLICY_DEMO, SEED_POLICY_OS
from dpkps_core.dp.validation import check_epsilon, check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError, PrivacyBudgetError


N = 20_000  # draws per variance check (OpenDP ≈ 10–20 µs each)


def _var_ok(x: np.ndarray, var: float, kurtosis_excess: float) -> bool:
    se = var * math.sqrt((2.0 + kurtosis_excess) / x.size)
    return abs(float(np.mean(x * x)) - var) < 6 * se  # mean zero known: E[x²] = Var


def test_default_sampler_is_opendp_and_os_entropy() -> None:
    noise = NoiseSource()
    assert noise.sampler == noise.requested_sampler == "opendp" and noise.policy == SEED_POLICY_OS
    rep = noise.describe()
    assert rep["sampler"] == "opendp" and rep["seed_policy"] == SEED_POLICY_OS and "sampler_note" not in rep
    assert set(rep["samplers"]) == {"integer_laplace", "float_laplace", "gaussian"}
    assert all(v.startswith("OpenDP") for v in rep["samplers"].values())
    assert rep["samplers"]["integer_laplace"].startswith("OpenDP discrete Laplace")


def test_seed_means_numpy_and_not_for_release() -> None:
    noise = NoiseSource(seed=5)  # sampler defaults to opendp, which cannot be seeded
    assert noise.sampler == "numpy" and noise.requested_sampler == "opendp" and noise.policy == SEED_POLICY_DEMO
    rep = noise.describe()
    assert rep["sampler"] == rep["laplace_sampler"] == "numpy" and rep["seed"] == 5
    assert "NOT FOR RELEASE" in rep["sampler_note"] and "cannot be seeded" in rep["sampler_note"]
    assert all(v.startswith("NumPy") for v in rep["samplers"].values())
    a, b = NoiseSource(seed=5), NoiseSource(seed=5, sampler="opendp")
    assert np.array_equal(a.add_laplace(np.arange(4), scale=2.0, integer_valued=True),
                          b.add_laplace(np.arange(4), scale=2.0, integer_valued=True))
    assert np.array_equal(a.gaussian(1.0, 3), b.gaussian(1.0, 3))


def test_numpy_is_an_explicit_option() -> None:
    noise = NoiseSource(sampler="numpy")
    assert noise.sampler == "numpy" and noise.policy == SEED_POLICY_OS
    assert "fast option" in noise.describe()["sampler_note"]
    assert noise.laplace(1.0, 5).shape == (5,)


def test_describe_counts_the_draws_of_each_kind() -> None:
    noise = NoiseSource()
    assert "noisy_values_drawn" not in noise.describe()
    noise.add_laplace(np.zeros(7, dtype=np.int64), scale=1.0, integer_valued=True)
    noise.add_laplace(np.zeros((2, 3)), scale=1.0)
    noise.gaussian(1.0, 4)
    assert noise.describe()["noisy_values_drawn"] == {"integer_laplace": 7, "float_laplace": 6, "gaussian": 4}


def test_opendp_integer_laplace_is_integer_with_variance_2b2() -> None:
    b = 3.0
    x = NoiseSource().laplace(b, N, integer_valued=True)
    assert x.dtype == np.float64 and np.array_equal(x, np.round(x))
    # discrete Laplace with scale b: Var = 2·e^{-1/b}/(1 − e^{-1/b})² ≈ 2b² − 1/6
    t = math.exp(-1.0 / b)
    assert _var_ok(x, 2 * t / (1 - t) ** 2, 3.0)
    assert abs(2 * t / (1 - t) ** 2 - 2 * b * b) < 0.2


def test_opendp_integer_release_keeps_the_counts() -> None:
    counts = np.array([[0, 5, 1_000_000], [7, 0, 3]])
    noisy = NoiseSource().add_laplace(counts, scale=0.5, integer_valued=True)
    assert noisy.shape == counts.shape and np.array_equal(noisy, np.round(noisy))
    assert np.abs(noisy - counts).max() < 30  # P(|noise| ≥ 30 at b = 0.5) ≈ e^-60
    floats = NoiseSource().add_laplace(np.array([1.0, 2.0]), scale=1.0, integer_valued=True)  # whole floats ok
    assert np.array_equal(floats, np.round(floats))


def test_opendp_float_laplace_variance_and_shape() -> None:
    b = 2.5
    noise = NoiseSource()
    x = noise.laplace(b, (4, N // 4))
    assert x.shape == (4, N // 4) and not np.array_equal(x, np.round(x))
    assert _var_ok(x.ravel(), 2 * b * b, 3.0)
    stat = np.array([[0.25, -3.5], [1e6, 2.0]])
    out = noise.add_laplace(stat, scale=1e-3)
    assert out.shape == stat.shape and np.abs(out - stat).max() < 0.1


def test_opendp_gaussian_variance_and_shape() -> None:
    sigma = 1.7
    noise = NoiseSource()
    x = noise.gaussian(sigma, N)
    assert x.shape == (N,) and _var_ok(x, sigma * sigma, 0.0)
    votes = np.array([0, 3, 10], dtype=np.int64)
    out = noise.add_gaussian(votes, sigma=1e-3)
    assert out.shape == (3,) and np.abs(out - votes).max() < 0.1


def test_numpy_sampler_variances() -> None:
    noise = NoiseSource(seed=0)
    assert _var_ok(noise.laplace(2.0, 50_000), 8.0, 3.0)
    assert _var_ok(noise.gaussian(3.0, 50_000), 9.0, 0.0)


@pytest.mark.parametrize("sampler", ["opendp", "numpy"])
def test_empty_and_multidimensional_shapes(sampler: str) -> None:
    noise = NoiseSource(sampler=sampler)
    assert noise.laplace(1.0, 0).shape == (0,)
    assert noise.laplace(1.0, (2, 0), integer_valued=True).shape == (2, 0)
    assert noise.gaussian(1.0, (2, 3, 2)).shape == (2, 3, 2)
    assert noise.add_laplace(np.zeros((3, 1)), scale=1.0).shape == (3, 1)


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, "x", None, True])
def test_invalid_scales_refused(bad: object) -> None:
    noise = NoiseSource()
    with pytest.raises(ParameterError, match="scale"):
        noise.laplace(bad, 3)  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="scale"):
        noise.add_gaussian(np.zeros(3), sigma=bad)  # type: ignore[arg-type]


def test_invalid_arguments_refused() -> None:
    with pytest.raises(ParameterError, match="sampler"):
        NoiseSource(sampler="random")
    with pytest.raises(ParameterError, match="seed"):
        NoiseSource(seed=-1)
    with pytest.raises(ParameterError, match="shape"):
        NoiseSource().laplace(1.0, (2, -1))
    with pytest.raises(ParameterError, match="integer counts"):
        NoiseSource().add_laplace(np.array([0.5, 1.0]), scale=1.0, integer_valued=True)
    with pytest.raises(ParameterError, match="finite"):
        NoiseSource().add_laplace(np.array([np.nan, 1.0]), scale=1.0)
    with pytest.raises(ParameterError, match="finite"):
        NoiseSource().add_gaussian(np.array([np.inf]), sigma=1.0)


def test_opendp_lattice_costs_no_measurable_epsilon() -> None:
    """OpenDP's own privacy map of the float measurement: rounding to the 2^k lattice adds ≤ n·2^-40 to ε."""
    n, scale = 400_000, 3000.0
    meas = rng_mod._measurement("float_laplace", scale, n)
    sensitivity = math.sqrt(2) * 2000
    eps = meas.map(sensitivity)
    assert sensitivity / scale <= eps <= sensitivity / scale + n * 2.0 ** -rng_mod.GRANULARITY_BITS


def test_cli_and_config_carry_the_sampler_to_the_run() -> None:
    import argparse

    from dpkps_core.cli.common import add_sampling_arguments, config_from_args
    from dpkps_core.corpus import Corpus
    from dpkps_core.embeddings import HashingEmbedder
    from dpkps_core.method.config import SamplingConfig
    from dpkps_core.method.pipeline import run_sampling
    from dpkps_core.method.vocabulary import PublicVocabulary

    parser = argparse.ArgumentParser()
    add_sampling_arguments(parser)
    assert config_from_args(parser.parse_args([])).noise_sampler == "opendp"
    cfg = config_from_args(parser.parse_args(["--noise-sampler", "numpy"]))
    assert cfg.noise_sampler == "numpy"
    with pytest.raises(SystemExit):
        parser.parse_args(["--noise-sampler", "random"])
    with pytest.raises(ParameterError, match="noise sampler"):
        SamplingConfig(noise_sampler="random").validate()

    texts = tuple(["goal match team", "bank shares profit"] * 10)
    corpus = Corpus(texts, tuple(["a", "b"] * 10), "t", "t", public_classes=("a", "b"))
    vocab = PublicVocabulary("v", ("goal", "match", "team", "bank", "shares", "profit"), "x", "x")
    for sampler in ("opendp", "numpy"):
        cfg = SamplingConfig(eps_voc=2, eps_kde=2, vocab_size=4, per_class=2, length=3, test_fraction=0.0,
                             noise_sampler=sampler)
        run = run_sampling(corpus, cfg, vocabulary=vocab, embedder=HashingEmbedder(8))
        rep = run.privacy_report()["noise"]
        assert rep["sampler"] == sampler and rep["seed_policy"] == SEED_POLICY_OS
        assert set(rep["noisy_values_drawn"]) == {"integer_laplace", "float_laplace"}
    run = run_sampling(corpus, SamplingConfig(eps_voc=2, eps_kde=2, vocab_size=4, per_class=2, length=3,
                                              test_fraction=0.0, seed=1), vocabulary=vocab, embedder=HashingEmbedder(8))
    assert run.privacy_report()["noise"]["sampler"] == "numpy"


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.slow
def test_budget_page_offers_the_sampler_choice(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    from app_helpers import state_of, assert_clean, goto, new_app

    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    at = goto(new_app(), "budget")
    radio = at.radio(key="_w.noise_sampler")
    assert state_of(at).settings.noise_sampler == radio.value == "opendp" and list(radio.options) == [
        "OpenDP (vetted samplers, default)", "NumPy (faster, floating-point)"]
    radio.set_value("numpy").run()
    assert_clean(at)
    assert state_of(at).settings.noise_sampler == "numpy"
    at.radio(key="_w.noise_sampler").set_value("opendp").run()
    at.checkbox(key="_w.seeded_demo").check().run()
    assert any("seeded NumPy sampler is used" in c for c in at.caption.values)




def test_seeded_gaussian_is_numpys_normal_from_the_seed() -> None:
    v = np.array([1.0, -2.0, 3.0])
    got = NoiseSource(seed=11).add_gaussian(v, sigma=2.0)
    rng = np.random.default_rng(np.random.SeedSequence(11).spawn(1)[0])
    np.testing.assert_array_equal(got, v + rng.normal(0.0, 2.0, size=3))


def test_opendp_gaussian_accepts_integer_statistics() -> None:
    out = NoiseSource().add_gaussian(np.array([[1, 2], [3, 4]]), sigma=1e-3)
    assert out.dtype == np.float64 and out.shape == (2, 2)
    np.testing.assert_allclose(out, [[1, 2], [3, 4]], atol=0.05)


def test_gaussian_scale_refusal_names_the_gaussian() -> None:
    with pytest.raises(ParameterError, match=r"^The Gaussian noise scale must be finite and > 0, got 0\.$"):
        NoiseSource().add_gaussian(np.zeros(2), sigma=0)


def test_describe_names_the_requested_sampler_and_explains_the_choice() -> None:
    seeded = NoiseSource(seed=1).describe()
    assert seeded["sampler_requested"] == "opendp"
    assert seeded["sampler_note"] == ("Reproducible demo seed: NumPy's seeded sampler was used for all noise "
                                      "(OpenDP's samplers cannot be seeded). NOT FOR RELEASE.")
    fast = NoiseSource(sampler="numpy").describe()
    assert fast["sampler_requested"] == "numpy"
    assert fast["sampler_note"] == ("NumPy's floating-point samplers were chosen (fast option); OpenDP's vetted "
                                    "samplers are the default.")


@pytest.mark.parametrize("counts", [np.array([2**62], dtype=np.int64), np.array([-(2**62)], dtype=np.int64)])
def test_discrete_laplace_refuses_integer_counts_at_the_i64_limit(counts: np.ndarray) -> None:
    with pytest.raises(ParameterError, match=r"^The discrete Laplace sampler needs counts with \|count\| < 2\^62\.$"):
        NoiseSource().add_laplace(counts, scale=1.0, integer_valued=True)


@pytest.mark.parametrize("counts", [np.array([2.0**62]), np.array([0.5]), np.array([np.nan])])
def test_discrete_laplace_refuses_float_counts_that_are_not_small_whole_numbers(counts: np.ndarray) -> None:
    with pytest.raises(ParameterError, match=r"^The discrete Laplace sampler needs integer counts \(finite, whole, "
                                             r"\|count\| < 2\^62\)\.$"):
        NoiseSource().add_laplace(counts, scale=1.0, integer_valued=True)


def test_non_numeric_statistics_are_refused_clearly() -> None:
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be numeric\.$"):
        NoiseSource().add_laplace(np.array(["a", "b"]), scale=1.0)
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be numeric\.$"):
        NoiseSource().add_laplace(np.array(["a"]), scale=1.0, integer_valued=True)
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be finite \(no NaN or infinity\) for "
                                             r"OpenDP's sampler\.$"):
        NoiseSource().add_gaussian(np.array([np.inf]), sigma=1.0)


def test_a_single_count_gets_its_noise() -> None:
    out = NoiseSource().add_laplace(np.array([7]), scale=1e-3, integer_valued=True)
    assert out.tolist() == [7.0]


def test_lattice_granularity_is_forty_bits_below_the_scale() -> None:
    assert rng_mod._granularity(1.0) == -40
    assert rng_mod._granularity(3.0) == -39
    assert rng_mod._granularity(0.25) == -42




@pytest.mark.parametrize("seed", [True, 1.5, -1, "3"])
def test_seed_must_be_a_non_negative_integer(seed: object) -> None:
    with pytest.raises(ParameterError, match=r"^The seed must be a non-negative integer, got "):
        NoiseSource(seed=seed)  # type: ignore[arg-type]


def test_unknown_sampler_lists_the_choices() -> None:
    with pytest.raises(ParameterError, match=r"^Unknown noise sampler 'gpu'; choose one of opendp, numpy\.$"):
        NoiseSource(sampler="gpu")


def test_seeded_children_are_the_seed_sequence_spawns_in_order() -> None:
    """A seeded demo run is reproducible (its bundle is compared byte for byte): the noise generator is the seed
    sequence's first spawn and each ``child()`` the next one, so the random features of a rerun are the same."""
    spawns = np.random.SeedSequence(21).spawn(3)
    source = NoiseSource(seed=21)
    children = [source.child().random(4) for _ in range(2)]
    for got, spawn in zip(children, spawns[1:]):
        np.testing.assert_array_equal(got, np.random.default_rng(spawn).random(4))
    assert not np.array_equal(children[0], children[1])
    again = NoiseSource(seed=21)
    np.testing.assert_array_equal(again.child().random(4), children[0])


def test_laplace_scale_refusal_names_the_laplace() -> None:
    with pytest.raises(ParameterError, match=r"^The Laplace noise scale must be finite and > 0, got 0\.$"):
        NoiseSource().add_laplace(np.zeros(2), scale=0)


def test_seeded_releases_are_float64_whatever_the_statistic_dtype() -> None:
    """``add_laplace`` / ``add_gaussian`` return float64 (docstrings), also for an object-dtype statistic."""
    values = np.array([1.0, 2.5], dtype=object)
    lap = NoiseSource(seed=3).add_laplace(values, scale=1.0)
    gau = NoiseSource(seed=3).add_gaussian(values, sigma=1.0)
    rng = np.random.default_rng(np.random.SeedSequence(3).spawn(1)[0])
    assert lap.dtype == np.float64 and gau.dtype == np.float64
    np.testing.assert_allclose(lap, [1.0, 2.5] + rng.laplace(0.0, 1.0, size=2))


def test_draw_counts_add_up_per_kind() -> None:
    source = NoiseSource(seed=0)
    source.add_laplace(np.zeros(2), scale=1.0)
    source.laplace(1.0, 3)
    source.laplace(1.0, (2, 2), integer_valued=True)
    assert source.describe()["noisy_values_drawn"] == {"integer_laplace": 4, "float_laplace": 5}


@pytest.mark.parametrize("size", [(2.5,), (True,), (-1,)])
def test_noise_shape_must_be_non_negative_integers(size: tuple) -> None:
    with pytest.raises(ParameterError, match=r"^The noise shape must be non-negative integers, got "):
        NoiseSource(seed=0).laplace(1.0, size)


def test_opendp_gaussian_refuses_a_non_numeric_statistic() -> None:
    with pytest.raises(ParameterError, match=r"^The noisy statistic must be numeric\.$"):
        NoiseSource().add_gaussian(np.array(["a", "b"]), sigma=1.0)
