"""Validation helpers shared by the mechanisms (diffprivlib-style checked keyword arguments)."""

from __future__ import annotations

import math

import numpy as np

from dpkps_core.errors import ParameterError


def check_epsilon(epsilon: float, name: str = "ε") -> float:
    """Return ``epsilon`` as float, or raise :class:`ParameterError` unless it is finite and > 0."""
    try:
        value = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number > 0, got {epsilon!r}.") from None
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0 (ε ≤ 0 gives no privacy definition), got {epsilon!r}.")
    return value


def check_positive_int(value: int, name: str, *, maximum: int | None = None, minimum: int = 1) -> int:
    """Return ``value`` as int, or raise :class:`ParameterError` unless it is a whole number (not a bool) in
    [``minimum``, ``maximum``]."""
    if isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be a whole number ≥ {minimum}, got {value!r}.")
    if not isinstance(value, int):
        try:
            if float(value) != int(value):
                raise ValueError
            value = int(value)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} must be a whole number ≥ {minimum}, got {value!r}.") from None
    if value < minimum:
        raise ParameterError(f"{name} must be ≥ {minimum}, got {value}.")
    if maximum is not None and value > maximum:
        raise ParameterError(f"{name} = {value} is over the limit of {maximum:,}; lower it.")
    return int(value)


def check_positive_float(value: float, name: str, *, allow_zero: bool = False) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number, got {value!r}.") from None
    if not math.isfinite(out) or out < 0 or (out == 0 and not allow_zero):
        raise ParameterError(f"{name} must be a finite number {'≥' if allow_zero else '>'} 0, got {value!r}.")
    return out


def check_delta(delta: float) -> float:
    """Return δ as float, or raise :class:`ParameterError` unless 0 < δ < 1."""
    try:
        value = float(delta)
    except (TypeError, ValueError):
        raise ParameterError(f"δ must be a number in (0, 1), got {delta!r}.") from None
    if not 0.0 < value < 1.0:
        raise ParameterError(f"δ must be in (0, 1) (e.g. 1e-6, well below 1/n), got {delta!r}.")
    return value
