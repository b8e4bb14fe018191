"""The app's settings come from the config's field metadata (issue 32 §4): every SamplingConfig setting the field
metadata gives to the app has a session key with the config's default, and the session's settings reach the config
through the one builder unchanged."""

from __future__ import annotations

import dataclasses

from dpkps_core.method.config import (APP_AUTO, APP_NONE, APP_OWN, APP_PLAIN, APP_ZERO_NONE, SamplingConfig,
                               build_sampling_config, setting_options)
from studio import defaults


def test_every_config_setting_is_held_by_the_app_or_says_why_not() -> None:
    kinds = {o.app for o in setting_options().values()}
    assert kinds <= {APP_PLAIN, APP_AUTO, APP_ZERO_NONE, APP_OWN, APP_NONE}
    held = defaults.config_setting_defaults()
    for name, option in setting_options().items():
        if option.app in (APP_PLAIN, APP_ZERO_NONE, APP_AUTO):
            assert name in held, name
        if option.app == APP_AUTO:
            assert f"{name}_auto" in held, name


def test_the_default_session_builds_the_default_config_apart_from_the_apps_own_defaults() -> None:
    state = defaults.default_settings()
    config = build_sampling_config(**defaults.settings_from_state(state))
    app_own = {"vocab_size", "per_class"}  # fast mode and the app's smaller first run (studio/defaults.py)
    expected = dataclasses.replace(SamplingConfig(), **{k: getattr(config, k) for k in app_own})
    assert config == expected


def test_changed_session_values_reach_their_fields_with_the_fields_type() -> None:
    state = defaults.default_settings()
    state.update({"length": 7.0, "temperature": 1, "remove_stopwords": 0, "vocab_max_terms": 0, "features_auto": False,
                  "features": 640.0, "bandwidth_auto": True, "test_fraction": 0.25, "noise_sampler": "numpy"})
    got = defaults.settings_from_state(state)
    assert got["length"] == 7 and type(got["length"]) is int
    assert got["temperature"] == 1.0 and type(got["temperature"]) is float
    assert got["remove_stopwords"] is False and got["vocab_max_terms"] is None
    assert got["features"] == 640 and type(got["features"]) is int and got["bandwidth"] is None
    assert got["test_fraction"] == 0.25 and got["noise_sampler"] == "numpy"
    assert not {n for n, o in setting_options().items() if o.app in (APP_OWN, APP_NONE)} & set(got)
