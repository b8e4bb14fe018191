"""Page 6 with the ``local`` backend: a model folder on this server, the device and the batch size."""

from __future__ import annotations

from pathlib import Path

import pytest
from app_helpers import assert_clean, click, fast_env, goto, new_app, toy_csv, upload_corpus, wait_job, walk  # noqa: F401
from llm_fakes import build_tiny_model

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def test_page6_local_model_folder_device_and_batch_size(tmp_path: Path) -> None:
    folder = build_tiny_model(tmp_path / "my-model")
    at = new_app()
    upload_corpus(at, toy_csv(20), "toy.csv")
    walk(at, 4)
    goto(at, 5)
    at.radio(key="_w.backend").set_value("local").run()
    assert any("Give the folder of your local model" in e.value for e in at.error)
    at.text_input(key="_w.local_model_path").input(str(folder)).run()
    at.radio(key="_w.device").set_value("cpu").run()
    at.number_input(key="_w.llm_batch_size").set_value(2).run()
    assert_clean(at)
    assert at.session_state["device"] == "cpu" and at.session_state["llm_batch_size"] == 2
    assert any("tokenizer" in c for c in at.caption.values)  # exact prompt tokens from the local tokenizer
    at.number_input(key="_w.n_documents").set_value(2).run()
    click(at, "Write documents (2 to go)")
    job = wait_job(at, "job_generation")
    assert job.error is None, job.error
    assert job.result.written + job.result.failed == 2
    audit = (Path(at.session_state["run_dir"]) / "audit_log.jsonl").read_text()
    assert '"backend":"local"' in audit and '"batch_size":2' in audit and '"device":"cpu"' in audit
