"""dp/validation.py — the checked keyword arguments every mechanism shares (diffprivlib style): what each accepts,
what it returns, and the one-sentence refusal that names the parameter (docs/ARCHITECTURE.md "Errors").

Exact behaviour pinned (mutation testing, docs/TESTING.md): whole numbers given as floats (2.0) are accepted, fractions refused, and each refusal names its parameter (the user-facing message).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkps_core.dp.validation import check_cap, check_delta, check_epsilon, check_positive_float, check_positive_int
from dpkps_core.errors import ParameterError, ParameterTypeError


@pytest.mark.parametrize("value", [1, 0.5, np.float32(0.25), np.int64(3), 1e-9, 1e6])
def test_epsilon_accepts_finite_positive_numbers_and_returns_a_float(value) -> None:
    out = check_epsilon(value)
    assert isinstance(out, float) and out == pytest.approx(float(value))


@pytest.mark.parametrize("value", [0, -1.0, math.inf, math.nan, "x", None, [1.0]])
def test_epsilon_refuses_zero_negative_non_finite_and_non_numbers_naming_the_parameter(value) -> None:
    with pytest.raises(ParameterError, match="^ε_kde must be a"):
        check_epsilon(value, "ε_kde")


@pytest.mark.parametrize("value", [True, False, np.bool_(True), "2", "2.5", b"1", None, [1.0], 1 + 0j])
def test_privacy_parameters_refuse_bools_strings_and_other_types_with_a_type_error(value) -> None:
    """ε, δ and the cap have one check each; ``True`` or ``"2"`` is a caller's bug, not ε = 1 or 2 (diffprivlib
    raises TypeError too). The error is still a ParameterError, so the app and the CLI show its sentence."""
    for check, pattern in ((lambda v: check_epsilon(v, "ε_voc"), r"^ε_voc must be a number > 0, got "),
                           (check_delta, r"^δ must be a number in \(0, 1\), got "),
                           (check_cap, r"^The budget cap must be a finite ε > 0, got ")):
        if value is None and check is check_cap:
            continue  # None is "no cap"
        with pytest.raises(ParameterTypeError, match=pattern) as raised:
            check(value)
        assert isinstance(raised.value, TypeError) and isinstance(raised.value, ParameterError)


@pytest.mark.parametrize("value", [0, -1.0, math.inf, math.nan])
def test_cap_refuses_non_positive_and_non_finite_values_and_accepts_none(value) -> None:
    with pytest.raises(ParameterError, match=r"^The budget cap must be a finite ε > 0, got "):
        check_cap(value)
    assert check_cap(None) is None and check_cap(np.int64(20)) == 20.0 and type(check_cap(20)) is float


def test_delta_may_be_zero_only_for_an_event() -> None:
    assert check_delta(0, "A privacy event's δ", allow_zero=True) == 0.0
    with pytest.raises(ParameterError, match=r"^δ must be in \(0, 1\)"):
        check_delta(0)


def test_epsilon_zero_says_why() -> None:
    with pytest.raises(ParameterError, match="no privacy definition"):
        check_epsilon(0.0)


@pytest.mark.parametrize("value", [1e-12, 1e-6, 0.5, np.float64(0.01)])
def test_delta_accepts_the_open_unit_interval(value) -> None:
    assert check_delta(value) == pytest.approx(float(value))


@pytest.mark.parametrize("value", [0, 1, 1.5, -1e-6, math.nan, "a", None])
def test_delta_refuses_everything_outside_zero_one(value) -> None:
    with pytest.raises(ParameterError, match="^δ must be"):
        check_delta(value)


@pytest.mark.parametrize(("value", "expected"), [(1, 1), (7, 7), (3.0, 3), (np.int64(5), 5), ("4", 4)])
def test_positive_int_accepts_whole_numbers_and_returns_an_int(value, expected: int) -> None:
    out = check_positive_int(value, "S (terms per document)")
    assert out == expected and type(out) is int


@pytest.mark.parametrize("value", [2.5, "two", None, True, False, np.bool_(True)])
def test_positive_int_refuses_fractions_booleans_and_non_numbers(value) -> None:
    with pytest.raises(ParameterError, match=r"^S \(terms per document\) must be"):
        check_positive_int(value, "S (terms per document)")


def test_positive_int_bounds_name_the_parameter_and_the_limit() -> None:
    with pytest.raises(ParameterError, match=r"^L must be ≥ 1, got 0\.$"):
        check_positive_int(0, "L")
    assert check_positive_int(0, "L", minimum=0) == 0
    assert check_positive_int(10, "I", maximum=10) == 10
    with pytest.raises(ParameterError, match=r"^I = 11 is over the limit of 10; lower it\.$"):
        check_positive_int(11, "I", maximum=10)
    with pytest.raises(ParameterError, match="over the limit of 20,000"):
        check_positive_int(20_001, "I", maximum=20_000)


@pytest.mark.parametrize("value", [0.1, 3, "2.0", np.float64(1e-3)])
def test_positive_float_accepts_positive_finite_numbers(value) -> None:
    out = check_positive_float(value, "σ (bandwidth)")
    assert isinstance(out, float) and out == pytest.approx(float(value))


@pytest.mark.parametrize("value", [0, -0.5, math.inf, math.nan])
def test_positive_float_refuses_zero_negative_and_non_finite(value) -> None:
    with pytest.raises(ParameterError, match=r"^σ \(bandwidth\) must be a finite number > 0"):
        check_positive_float(value, "σ (bandwidth)")


def test_positive_float_allows_zero_only_when_asked() -> None:
    assert check_positive_float(0, "σ", allow_zero=True) == 0.0
    with pytest.raises(ParameterError, match="≥ 0"):
        check_positive_float(-1e-9, "σ", allow_zero=True)
    with pytest.raises(ParameterError, match=r"^σ must be a number, got 'abc'\.$"):
        check_positive_float("abc", "σ")


def test_whole_number_floats_are_accepted_and_fractions_refused() -> None:
    assert check_positive_int(2.0, "I") == 2 and type(check_positive_int(2.0, "I")) is int  # noqa: E721
    assert check_positive_int(np.int64(3), "I") == 3
    with pytest.raises(ParameterError, match=r"^I \(random features\) must be a whole number ≥ 1, got 2\.5\.$"):
        check_positive_int(2.5, "I (random features)")


def test_non_numbers_are_refused_naming_the_parameter() -> None:
    with pytest.raises(ParameterError, match=r"^ε_kde must be a number > 0, got 'lots'\.$"):
        check_epsilon("lots", "ε_kde")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^σ \(bandwidth\) must be a number, got 'wide'\.$"):
        check_positive_float("wide", "σ (bandwidth)")  # type: ignore[arg-type]
