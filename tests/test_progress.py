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


def test_the_generation_estimate_and_the_cli_eta_write_their_durations_the_same_way() -> None:
    """The estimate's 'about …' and the CLI bar's time left used their own roundings ('5400 s' left for what the
    estimate called '1.5 h'); both are format_duration now."""
    from dpkps_core.cli.generate import _progress_bar
    from dpkps_core.llm.estimate import CostEstimate
    from dpkps_core.llm.settings import Progress

    est = CostEstimate(prompts=4, prompt_tokens=100, completion_tokens=200, total_tokens=300, price_per_1k=None,
                       cost=None, seconds=210.0, token_method="~4 chars/token")
    assert "about 3.5 min (no retries)" in est.summary()
    bar, on_progress = _progress_bar(10, quiet=False)
    try:
        for eta, text in ((42.4, "42 s"), (5400.0, "1.5 h")):
            on_progress(Progress(done=2, total=10, failed=0, rate_per_s=0.1, eta_s=eta))
            assert bar.postfix.endswith(f"left={text}"), bar.postfix
    finally:
        bar.close()
