"""Behaviour unchanged across the llm/ split (docs/ARCHITECTURE.md, llm/): the same sequences, backend and seed give
the same documents, failures and audit log (timestamps and the model folder's path left out): every text, id and
count exactly, every float to 9 significant digits (tests/canonical.py).

The expected digests were first computed with the code BEFORE the split (the runner's one 248-line function and the
backends ↔ local cycle): the tiny Llama saved by the tests (seeded), greedy and seeded sampling, batched and one
at a time, and a scripted remote backend with retries and failures; the canonical digests were taken from the same,
unchanged files. A deliberate change of behaviour updates them
in the same commit and says why."""

from __future__ import annotations

from pathlib import Path

import pytest
from canonical import canonical_lines_digest, jsonl_records
from llm_fakes import FakeBackend, build_tiny_model, make_sequences

from dpkps_core.llm.local import LocalModelBackend
from dpkps_core.llm.prompts import PromptConfig
from dpkps_core.llm.runner import run_generation
from dpkps_core.llm.settings import GenerationSettings
from dpkps_core.records.runfolder import AUDIT_FILE, DOCUMENTS_FILE, FAILURES_FILE

CFG = PromptConfig(doc_type="a news article", include_label=False)  # the prompts the digests were computed with


def _digest(run: Path) -> str:
    """Canonical digest (tests/canonical.py: floats to 9 significant digits; docs/TESTING.md "Pinned digests") of the
    run's documents, failures and audit log, line by line, timestamps and the model folder's path left out."""
    records = []
    for name in (DOCUMENTS_FILE, FAILURES_FILE, AUDIT_FILE):
        path = run / name
        if path.exists():
            for obj in jsonl_records(path):
                obj.pop("timestamp", None)
                obj.get("backend_info", {}).pop("model_path", None)
                records.append(obj)
    return canonical_lines_digest(records)[:16]


@pytest.mark.parametrize("temperature, batch_size, expected", [
    (0.0, 4, "1bd2fba3a01bbfe1"),
    (0.7, 4, "5409669a4e11d3bb"),
    (0.7, 1, "4794664824062c71"),
])
def test_local_model_writes_the_same_documents(tmp_path: Path, temperature: float, batch_size: int,
                                               expected: str) -> None:
    import torch

    model = build_tiny_model(tmp_path / "tiny")
    torch.manual_seed(0)
    backend = LocalModelBackend(model_path=model, device="cpu")
    summary = run_generation(make_sequences(10), backend=backend, prompt_config=CFG, run_dir=tmp_path / "run",
                             settings=GenerationSettings(max_tokens=12, temperature=temperature, batch_size=batch_size,
                                                         retries=1, backoff_base=0.0, backoff_max=0.01,
                                                         # repetition control off, as when the digests were taken
                                                         no_repeat_ngram=0, repetition_penalty=1.0))
    assert summary.written + summary.failed == 10
    got = _digest(tmp_path / "run")
    assert got == expected, got


def test_remote_backend_writes_the_same_documents_failures_and_audit(tmp_path: Path) -> None:
    backend = FakeBackend({2: ["transient", "ok"], 3: ["fatal"], 4: ["transient"] * 5}, max_concurrency=1)
    summary = run_generation(make_sequences(10), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                             settings=GenerationSettings(retries=2, backoff_base=0.0, backoff_max=0.01))
    assert (summary.written, summary.failed) == (8, 2)
    assert backend.calls == [1, 2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 9, 10]
    got = _digest(tmp_path)
    assert got == "33e51e96ab512947", got
