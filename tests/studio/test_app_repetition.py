"""Page 6's repetition control (dpkps_core/llm/repetition.py): the advanced settings reach the run's generation
settings and its audit log, next to the other decoding settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_helpers import state_of, assert_clean, click, fast_env, local_model_page, wait_job  # noqa: F401

from dpkps_core.llm.repetition import DEFAULT_NO_REPEAT_NGRAM, DEFAULT_REPETITION_PENALTY

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def test_page6_repetition_settings_reach_the_audit_log(tmp_path: Path) -> None:
    at = local_model_page(tmp_path)
    assert at.number_input(key="_w.llm_no_repeat_ngram").value == DEFAULT_NO_REPEAT_NGRAM
    assert at.number_input(key="_w.llm_repetition_penalty").value == DEFAULT_REPETITION_PENALTY
    at.number_input(key="_w.llm_no_repeat_ngram").set_value(3).run()
    at.number_input(key="_w.llm_repetition_penalty").set_value(1.15).run()
    assert_clean(at)
    at.number_input(key="_w.n_documents").set_value(2).run()
    click(at, "Write documents (2 to go)")
    job = wait_job(at, "generation")
    assert job.error is None, job.error
    audit = [json.loads(line) for line in
             (Path(state_of(at).run.run_dir) / "audit_log.jsonl").read_text().splitlines() if line.strip()]
    params = [a["parameters"] for a in audit if "parameters" in a]
    assert params and all(p["no_repeat_ngram"] == 3 and p["repetition_penalty"] == pytest.approx(1.15)
                          for p in params)
