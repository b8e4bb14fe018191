"""Validation helpers shared by the mechanisms (diffprivlib-style checked keyword arguments).

One check per rule: :func:`check_epsilon`, :func:`check_delta` and :func:`check_cap` are the only places that decide
what an ε, a δ or a cap may be, for the mechanisms, the events, both ledgers, the configs, the CLI and the app alike
(tests/test_privacy_parameters.py feeds every entry point the same bad values)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from dpkps_core.errors import ParameterError, ParameterTypeError


def _privacy_number(value: object, name: str, expected: str) -> float:
    """``value`` as a float when it is a real number; :class:`ParameterTypeError` for a bool, a string or any
    other type (``True`` and ``"2"`` are not ε = 1 and ε = 2: a caller passing them has a bug)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise ParameterTypeError(f"{name} must be {expected}, got {value!r}.")
    return float(value)


def check_epsilon(epsilon: float, name: str = "ε") -> float:
    """THE check of an ε (every mechanism, event, ledger and setting calls it; docs/DESIGN.md §2).

    Returns ``epsilon`` as a float. Raises :class:`ParameterTypeError` unless it is a real number (bools and strings
    are refused) and :class:`ParameterError` unless it is finite and > 0."""
    value = _privacy_number(epsilon, name, "a number > 0")
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a finite number > 0 (ε ≤ 0 gives no privacy definition), got {epsilon!r}.")
    return value


def check_cap(cap: float | None, name: str = "The budget cap") -> float | None:
    """THE check of an ε cap (a run's ledger, the persistent ledger's per-unit cap): ``None`` (no cap) or a finite
    ε > 0, as a float. Raises :class:`ParameterTypeError` for a bool, a string or another type."""
    if cap is None:
        return None
    value = _privacy_number(cap, name, "a finite ε > 0")
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(f"{name} must be a finite ε > 0, got {cap!r}.")
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


def check_delta(delta: float, name: str = "δ", *, allow_zero: bool = False) -> float:
    """THE check of a δ: 0 < δ < 1 (or 0 ≤ δ < 1 with ``allow_zero``, for an event of a pure ε-DP mechanism), as a
    float. Raises :class:`ParameterTypeError` for a bool, a string or another type."""
    value = _privacy_number(delta, name, "a number in (0, 1)")
    if allow_zero:
        if not 0.0 <= value < 1.0:
            raise ParameterError(f"{name} must be in [0, 1), got {delta!r}.")
    elif not 0.0 < value < 1.0:
        raise ParameterError(f"{name} must be in (0, 1) (e.g. 1e-6, well below 1/n), got {delta!r}.")
    return value
