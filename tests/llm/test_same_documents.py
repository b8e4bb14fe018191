"""Behaviour unchanged across the llm/ split (docs/ARCHITECTURE.md, llm/): the same sequences, backend and seed give
the same documents, failures and audit log, byte for byte (timestamps and the model folder's path left out).

The expected digests were computed with the code BEFORE the split (the runner's one 248-line function and the
backends ↔ local cycle): the tiny Llama saved by the tests (seeded), greedy and seeded sampling, batched and one
at a time, and a scripted remote backend with retries and failures. A deliberate change of behaviour updates them
in the same commit and says why."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from llm_fakes import FakeBackend, build_tiny_model, make_sequences

from dpkps_core.llm.local import LocalModelBackend
from dpkps_core.llm.prompts import PromptConfig
from dpkps_core.llm.runner import run_generation
from dpkps_core.llm.settings import GenerationSettings
from dpkps_core.runfolder import AUDIT_FILE, DOCUMENTS_FILE, FAILURES_FILE

CFG = PromptConfig(doc_type="a news article", include_label=False)  # the prompts the digests were computed with


def _digest(run: Path) -> str:
    h = hashlib.sha256()
    for name in (DOCUMENTS_FILE, FAILURES_FILE, AUDIT_FILE):
        path = run / name
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                obj = json.loads(line)
                obj.pop("timestamp", None)
                obj.get("backend_info", {}).pop("model_path", None)
                h.update(json.dumps(obj, sort_keys=True).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize("temperature, batch_size, expected", [
    (0.0, 4, "96b5e867b965de8b"),
    (0.7, 4, "49641f28fef236b6"),
    (0.7, 1, "94642d1ca057d8a8"),
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
    assert _digest(tmp_path / "run") == expected


def test_remote_backend_writes_the_same_documents_failures_and_audit(tmp_path: Path) -> None:
    backend = FakeBackend({2: ["transient", "ok"], 3: ["fatal"], 4: ["transient"] * 5}, max_concurrency=1)
    summary = run_generation(make_sequences(10), backend=backend, prompt_config=CFG, run_dir=tmp_path,
                             settings=GenerationSettings(retries=2, backoff_base=0.0, backoff_max=0.01))
    assert (summary.written, summary.failed) == (8, 2)
    assert backend.calls == [1, 2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 9, 10]
    assert _digest(tmp_path) == "526adfcb567587be"
