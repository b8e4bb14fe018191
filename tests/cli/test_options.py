"""The sampling settings' command-line options are generated from SamplingConfig's field metadata (issue 32 §4):
every setting with a SettingOption is offered by each sampling command, reaches its field through the one
builder, and shows the help and default written beside the field."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from dpkps_core.cli.common import add_sampling_arguments, config_from_args
from dpkps_core.cli.main import build_parser
from dpkps_core.cli.options import option_flag
from dpkps_core.dp.ledger import DEFAULT_EPSILON_CAP
from dpkps_core.method.config import SamplingConfig, setting_options

# One value per option, different from the default, valid together.
VALUES = {
    "corpus": ("demo:drugs", "demo:drugs"), "person_column": ("drug", "drug"), "test_fraction": ("0.3", 0.3),
    "client_fraction": ("0.1", 0.1), "split_seed": ("7", 7), "vocabulary": ("wordfreq", "wordfreq"),
    "remove_stopwords": (None, False), "junk_filter": (None, False), "vocab_max_terms": ("2000", 2000),
    "eps_voc": ("2.5", 2.5), "eps_kde": ("3.5", 3.5), "epsilon_cap": ("30", 30.0), "seed": ("11", 11),
    "noise_sampler": ("numpy", "numpy"), "method": ("iterative-log", "iterative-log"), "density": ("rff", "rff"),
    "length": ("7", 7), "per_class": ("9", 9), "vocab_size": ("300", 300), "terms_per_doc": ("4", 4),
    "selection_rule": ("noise-floor", "noise-floor"), "features": ("500", 500), "bandwidth": ("0.4", 0.4),
    "temperature": ("0.5", 0.5), "max_keyphrases_per_doc": ("6", 6), "class_size_estimate": ("120", 120.0),
    "embedding_model": (None, None),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="t")
    add_sampling_arguments(p)
    return p


def test_every_option_setting_is_in_the_table_above() -> None:
    assert set(setting_options()) == set(VALUES)


@pytest.mark.parametrize("name", sorted(setting_options()))
def test_each_generated_option_reaches_its_field(name: str) -> None:
    option = setting_options()[name]
    text, expected = VALUES[name]
    if option.switch_off:
        argv = [option.switch_off]
    elif text is None:  # a choice: take one that is not the default
        default = getattr(SamplingConfig(), name)
        text = expected = next(c for c in option.choices if c != default)
        argv = [option_flag(name, option), text]
    else:
        argv = [option_flag(name, option), text]
    config = config_from_args(_parser().parse_args(argv))
    assert getattr(config, name) == expected
    if option.short:
        assert getattr(config_from_args(_parser().parse_args([option.short, text])), name) == expected


def test_the_defaults_are_the_configs_except_the_documented_cap() -> None:
    config = config_from_args(_parser().parse_args([]))
    assert dataclasses.replace(config, epsilon_cap=None) == SamplingConfig()
    assert config.epsilon_cap == DEFAULT_EPSILON_CAP


def test_every_sampling_command_shows_each_options_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("sample", "audit"):
        text = " ".join(sub.choices[command].format_help().split())
        for name, option in setting_options().items():
            flag = option.switch_off or option_flag(name, option)
            assert flag in text, (command, flag)
            first_words = " ".join(option.help.split("%(default)s")[0].split()[:4])
            assert first_words in text, (command, name, first_words)
