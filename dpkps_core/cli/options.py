"""The command line's options for the sampling settings, generated from :class:`~dpkps_core.method.config.SamplingConfig`'s
field metadata (:class:`~dpkps_core.method.config.SettingOption`): flag, help, group, choices and default are written once,
beside the field (issue 32 §4). Settings that need their own parsing (the columns, the class names, the encoding and
the load limits) keep their hand-written options in :mod:`dpkps_core.cli.common`.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Iterable

from dpkps_core.method.config import FIELD_DEFAULT, SamplingConfig, SettingOption, setting_options, setting_value_type

def option_flag(name: str, option: SettingOption) -> str:
    """The option's long flag: its own, else ``--`` + the field name with dashes."""
    return option.flag or "--" + name.replace("_", "-")


def _default(name: str, option: SettingOption) -> Any:
    if option.option_default != FIELD_DEFAULT:
        return option.option_default
    return {f.name: f.default for f in dataclasses.fields(SamplingConfig)}[name]


def add_setting_options(group: Any, names: Iterable[str]) -> None:
    """Add the options of the settings ``names`` (in the order given) to ``group`` (a parser or an argument group)."""
    options = setting_options()
    for name in names:
        option = options[name]
        if option.switch_off:
            group.add_argument(option.switch_off, dest=name, action="store_false", help=option.help)
            continue
        flags = [option_flag(name, option)] + ([option.short] if option.short else [])
        kwargs: dict[str, Any] = dict(dest=name, default=_default(name, option), help=option.help)
        if option.choices:
            kwargs["choices"] = option.choices
        else:
            kwargs["type"] = setting_value_type(name)
        group.add_argument(*flags, **kwargs)


def names_in_group(group: str) -> list[str]:
    """The settings of one of :data:`~dpkps_core.method.config.OPTION_GROUPS`, in help order."""
    return [name for name, option in setting_options().items() if option.group == group]


def settings_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """Every generated setting's value from parsed options, by field name (a setting whose option the command
    does not offer is left out, so the config keeps its default)."""
    return {name: getattr(args, name) for name in setting_options() if hasattr(args, name)}
