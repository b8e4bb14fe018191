"""One backend by kind (docs/ARCHITECTURE.md, llm/): ``offline`` (the bundled SmolLM2, no key), ``local`` (a Hugging
Face model folder on disk) or ``openai`` (any OpenAI-compatible server). The CLI, the app and compare build their
backend here; the backends themselves live in :mod:`dpkps_core.llm.local` and :mod:`dpkps_core.llm.openai_client`.
"""

from __future__ import annotations

import os

from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend
from dpkps_core.llm.local import LocalModelBackend, OfflineBackend
from dpkps_core.llm.openai_client import DEFAULT_API_KEY_ENV, OpenAICompatibleBackend

BACKEND_KINDS = ("offline", "local", "openai")


def make_backend(
    kind: str = "offline",
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str = DEFAULT_API_KEY_ENV,
    timeout: float = 60.0,
    concurrency: int = 4,
    threads: int = 1,
    device: str | None = None,
    model_path: str | os.PathLike[str] | None = None,
    engine: str | None = None,
) -> LLMBackend:
    """Build a backend by kind: ``"offline"`` (SmolLM2, no key), ``"local"`` (a Hugging Face model folder at
    ``model_path``) or ``"openai"`` (any compatible server). ``device`` (auto/cpu/cuda) applies to the local two,
    and so does ``engine``: ``"ct2"`` (CTranslate2, converted once; the default, or ``$DPKPS_ENGINE``) or
    ``"torch"`` (:func:`dpkps_core.llm.ct2.choose_engine`; a default that cannot be met falls back to torch and
    says so in ``backend.engine_note``)."""
    if kind in ("offline", "local"):
        from dpkps_core.device import resolve_device
        from dpkps_core.llm.ct2 import choose_engine

        if kind == "local" and model_path is None:
            raise ParameterError("The local backend needs the model folder (--model-path DIR).")
        decoder, note = choose_engine(kind, setting=engine, device=resolve_device(device), threads=threads,
                                      model_path=model_path)
        backend: OfflineBackend | LocalModelBackend
        if kind == "offline":
            backend = OfflineBackend(threads=threads, device=device, engine=decoder)
        else:
            backend = LocalModelBackend(model_path=model_path, threads=threads, device=device, engine=decoder)
        backend.engine_note = note
        return backend
    if kind == "openai":
        return OpenAICompatibleBackend(
            model=model, base_url=base_url, api_key=api_key, api_key_env=api_key_env,
            timeout=timeout, max_concurrency=concurrency,
        )
    raise ParameterError(f"Unknown LLM backend {kind!r}; choose one of {', '.join(BACKEND_KINDS)}.")
