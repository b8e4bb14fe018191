"""The session's typed state (``studio.state``, issue 32 §1): one object per session, every field declared with its
type, a typo is an error instead of a new silent key, the results of a step are dropped by name."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from dpkps_core.method.config import APP_AUTO, APP_PLAIN, APP_ZERO_NONE, setting_options
from studio import state as app_state
from studio.state import SessionState, Settings, clear_results, new_settings


def test_every_setting_has_a_type_and_its_default_has_that_type() -> None:
    settings = new_settings()
    for field in dataclasses.fields(Settings):
        value = getattr(settings, field.name)
        allowed = typing.get_args(field.type) or (field.type,)
        allowed = tuple(typing.get_origin(a) or a for a in allowed)
        assert value is None and type(None) in allowed or isinstance(value, allowed), (field.name, field.type, value)


def test_the_configs_app_settings_are_settings_with_the_configs_defaults() -> None:
    """A setting SamplingConfig declares for the app is a field here with no edit (generated from its metadata)."""
    names = set(app_state.setting_names())
    for name, option in setting_options().items():
        if option.app == APP_AUTO:
            assert {name, f"{name}_auto"} <= names
        elif option.app in (APP_PLAIN, APP_ZERO_NONE):
            assert name in names


def test_a_name_that_is_not_a_field_is_an_error_not_a_new_key() -> None:
    state = SessionState.new(eps_total=3.0)
    assert state.settings.eps_total == 3.0
    with pytest.raises(AttributeError):
        state.settings.eps_totl = 1.0  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        state.run.rundir = "x"  # type: ignore[attr-defined]
    with pytest.raises(KeyError, match="not a setting"):
        SessionState.new(eps_totl=1.0)
    with pytest.raises(KeyError, match="not a setting"):
        app_state.check_setting("corpus_id")          # the loaded corpus is not a user's choice
    with pytest.raises(KeyError, match="not a job slot"):
        state.jobs.get("job_generation")


def test_sessions_do_not_share_mutable_defaults() -> None:
    a, b = SessionState(), SessionState()
    a.settings.sweep_methods.append("iterative-log")
    a.run.run_dirs.append("/runs/x")
    a.notices.append("hello")
    assert b.settings.sweep_methods == ["independent"] and b.run.run_dirs == [] and b.notices == []
    assert a.token != b.token


def test_the_api_key_never_shows_in_a_repr() -> None:
    state = SessionState.new(api_key="sk-secret-123")
    assert state.settings.api_key == "sk-secret-123" and "sk-secret-123" not in repr(state)


def test_clearing_a_step_drops_its_results_and_those_after_it_and_hands_back_their_jobs() -> None:
    state = SessionState()
    state.loaded.split, state.loaded.split_key = object(), ("demo:bbc", 0.2)
    state.results.term_counts = ("key", [1, 2])
    state.results.vocab_check = {"recall": 1.0}
    state.results.no_llm_history.append({"accuracy": 0.5})
    writer, evaluation = object(), object()
    state.jobs.generation, state.jobs.evaluation = writer, evaluation
    assert clear_results(state, "sequences") == [writer, evaluation]
    assert state.jobs.generation is None and state.results.vocab_check == {"recall": 1.0}
    assert clear_results(state, "corpus", include=True) == []
    assert state.loaded.split is None and state.results.term_counts is None and state.results.no_llm_history == []
    assert state.results.vocab_check is None
