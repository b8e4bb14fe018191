"""One duration format (issue 32 §5): estimates, ETAs, the audit's plan and the comparison's rough times all write a
duration through dpkps_core.progress.format_duration."""

from __future__ import annotations

import math

import pytest

from dpkps_core.audit.report import format_seconds
from dpkps_core.progress import format_duration


@pytest.mark.parametrize("seconds,text", [(0, "0 s"), (42.4, "42 s"), (89.4, "89 s"), (90, "1.5 min"),
                                          (210, "3.5 min"), (5399, "90.0 min"), (5400, "1.5 h"), (7200, "2.0 h"),
                                          (-5, "0 s"), (math.nan, "0 s")])
def test_a_duration_reads_in_seconds_minutes_or_hours(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert format_duration(seconds, approximate=True) == "≈ " + text


def test_the_audit_writes_its_durations_the_same_way() -> None:
    assert format_seconds(185) == format_duration(185) == "3.1 min"
