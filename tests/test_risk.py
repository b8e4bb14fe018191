"""ε as risk: the posterior bound e^ε·p / (e^ε·p + 1 − p) (issue 14 §10)."""

from __future__ import annotations

import math

import pytest

from dpkps_core.errors import ParameterError
from dpkps_core.risk import posterior_bound, risk_sentences


def test_posterior_bound_values() -> None:
    assert posterior_bound(1.0, 0.5) == pytest.approx(math.e / (math.e + 1))       # 73 %
    assert posterior_bound(math.log(3), 0.5) == pytest.approx(0.75)
    assert posterior_bound(10.0, 0.01) == pytest.approx(math.exp(10) * 0.01 / (math.exp(10) * 0.01 + 0.99))
    assert posterior_bound(5.0, 0.0) == 0.0 and posterior_bound(5.0, 1.0) == 1.0
    assert posterior_bound(1000.0, 0.01) == 1.0
    assert posterior_bound(0.1, 0.01) < 0.012                                       # small ε: barely moves


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ParameterError):
        posterior_bound(1.0, 1.5)


def test_risk_sentences_are_plain() -> None:
    s = risk_sentences(1.0)
    assert s[0].startswith("an attacker 1% sure") and "2.7 %" in s[0]
    assert "73 %" in s[1]
    assert "99.6 %" in risk_sentences(10.0)[0] and "more than 99.9 %" in risk_sentences(10.0)[1]


def test_format_probability_never_rounds_up_to_certainty() -> None:
    from dpkps_core.risk import format_probability

    assert format_probability(0.99995) == "more than 99.9 %" and format_probability(0.9954) == "99.5 %"
    assert format_probability(0.027) == "2.7 %" and format_probability(0.73) == "73 %"
