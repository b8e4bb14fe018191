"""One path for a setting (docs/ARCHITECTURE.md): SamplingConfig checks itself on construction, one builder makes it
for the CLI, the app and a comparison, and the density plan has its own module (docs/DESIGN.md §2.2)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from dpkps_core.baselines.compare_settings import CompareSettings
from dpkps_core.baselines.compare_steps import sampling_config
from dpkps_core.cli.common import add_sampling_arguments, config_from_args
from dpkps_core.method.config import PAPER_SETTINGS, SamplingConfig, build_sampling_config, split_epsilon
from dpkps_core.method.density_plan import DensityPlan, density_plan
from dpkps_core.errors import ParameterError


@pytest.mark.parametrize("bad", [
    {"eps_voc": 0}, {"eps_kde": float("inf")}, {"method": "nope"}, {"density": "kde"},
    {"method": "iterative-log", "density": "histogram"}, {"length": 0}, {"vocab_size": 10**9},
    {"features": 0}, {"bandwidth": -1.0}, {"temperature": -0.5}, {"noise_sampler": "random"},
    {"max_keyphrases_per_doc": 0}, {"epsilon_cap": 0.0}, {"classes": ("only-one",)},
])
def test_an_invalid_config_cannot_be_built(bad: dict) -> None:
    with pytest.raises(ParameterError):
        SamplingConfig(**bad)
    with pytest.raises(ParameterError):
        dataclasses.replace(SamplingConfig(), **bad)  # a variant is checked the same way


def test_validate_is_the_config_itself_and_the_cap_is_the_ledgers() -> None:
    cfg = SamplingConfig(eps_voc=5, eps_kde=5, epsilon_cap=4)  # the ledger refuses such a run, not the config
    assert cfg.validate() is cfg
    assert SamplingConfig(classes=["b", "a"]).classes == ("b", "a")


def test_replace_drops_the_histogram_for_an_iterative_method() -> None:
    cfg = SamplingConfig(density="histogram").replace(method="iterative-log")
    assert (cfg.method, cfg.density) == ("iterative-log", "auto")


def test_the_builder_takes_fields_the_apps_split_and_the_paper_settings() -> None:
    assert build_sampling_config() == SamplingConfig()
    cfg = build_sampling_config(eps_total=10, eps_voc_share=0.3, length=4)
    assert (cfg.eps_voc, cfg.eps_kde, cfg.length) == (3.0, 7.0, 4)
    assert split_epsilon(1.0, 1 / 3) == (0.3333, 0.6667)
    paper = build_sampling_config(paper_settings=True, density="histogram")
    assert all(getattr(paper, k) == v for k, v in PAPER_SETTINGS.items())
    base = build_sampling_config({"length": 3, "not_a_field": 1}, per_class=7)  # a run_config.json's extras ignored
    assert (base.length, base.per_class) == (3, 7)
    with pytest.raises(ParameterError, match="Unknown sampling setting"):
        build_sampling_config(lenght=3)
    with pytest.raises(ParameterError, match="either as eps_total"):
        build_sampling_config(eps_total=10, eps_voc_share=0.5, eps_voc=2)
    with pytest.raises(ParameterError, match="share"):
        build_sampling_config(eps_total=10, eps_voc_share=1.0)


def test_the_cli_builds_its_config_through_the_builder() -> None:
    parser = argparse.ArgumentParser()
    add_sampling_arguments(parser)
    args = parser.parse_args(["--eps-voc", "2", "--eps-kde", "3", "--paper-settings", "--classes", "a,b"])
    cfg = config_from_args(args)
    assert (cfg.eps_voc, cfg.eps_kde, cfg.density, cfg.bandwidth, cfg.classes) == (2.0, 3.0, "rff", 1.0, ("a", "b"))
    with pytest.raises(ParameterError, match="only serves independent"):
        config_from_args(parser.parse_args(["--method", "iterative-log", "--density", "histogram"]))


def test_compare_holds_a_config_and_fixes_what_it_shares() -> None:
    settings = CompareSettings(eps_total=4, sampling={"length": 3, "eps_voc": -1, "seed": 9})
    assert isinstance(settings.sampling, SamplingConfig) and settings.sampling.length == 3
    with pytest.raises(ParameterError):
        CompareSettings(eps_total=4, sampling={"length": 0})
    cfg = sampling_config(eps_voc=1.0, eps_kde=3.0, per_class=2, sampling=settings.sampling, seed=None,
                          test_fraction=0.25, split_seed=4, corpus_name="mine")
    assert (cfg.length, cfg.eps_voc, cfg.eps_kde, cfg.seed, cfg.split_seed, cfg.corpus) == (3, 1.0, 3.0, None, 4, "mine")
    assert CompareSettings(eps_total=4).sampling is None


def test_the_density_plan_lives_in_its_own_module() -> None:
    plan = density_plan(SamplingConfig(method="iterative-log", length=4, eps_kde=6, class_size_estimate=100),
                        n_classes=2)
    assert isinstance(plan, DensityPlan) and plan.density == "rff"
    assert plan.members == 3 and plan.eps_member == pytest.approx(2.0) and plan.features == 100
    hist = density_plan(SamplingConfig(eps_kde=2), n_classes=2)
    assert hist.density == "histogram" and hist.expected_noise_per_term == pytest.approx(2 ** 0.5 / 2)
