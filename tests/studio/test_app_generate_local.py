"""Page 6 with the ``local`` backend: a model folder on this server, the device and the batch size."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import state_of, assert_clean, click, fast_env, local_model_page, wait_job  # noqa: F401

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def test_page6_local_model_folder_device_and_batch_size(tmp_path: Path) -> None:
    at = local_model_page(tmp_path)
    at.number_input(key="_w.llm_batch_size").set_value(2).run()
    assert_clean(at)
    assert state_of(at).settings.device == "cpu" and state_of(at).settings.llm_batch_size == 2
    assert any("tokenizer" in c for c in at.caption.values)  # exact prompt tokens from the local tokenizer
    at.number_input(key="_w.n_documents").set_value(2).run()
    click(at, "Write documents (2 to go)")
    job = wait_job(at, "generation")
    assert job.error is None, job.error
    assert job.result.written + job.result.failed == 2
    audit = (Path(state_of(at).run.run_dir) / "audit_log.jsonl").read_text()
    assert '"backend":"local"' in audit and '"batch_size":2' in audit and '"device":"cpu"' in audit
