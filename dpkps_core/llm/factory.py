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
) -> LLMBackend:
    """Build a backend by kind: ``"offline"`` (SmolLM2, no key), ``"local"`` (a Hugging Face model folder at
    ``model_path``) or ``"openai"`` (any compatible server). ``device`` (auto/cpu/cuda) applies to the local two."""
    if kind == "offline":
        return OfflineBackend(threads=threads, device=device)
    if kind == "local":
        if model_path is None:
            raise ParameterError("The local backend needs the model folder (--model-path DIR).")
        return LocalModelBackend(model_path=model_path, threads=threads, device=device)
    if kind == "openai":
        return OpenAICompatibleBackend(
            model=model, base_url=base_url, api_key=api_key, api_key_env=api_key_env,
            timeout=timeout, max_concurrency=concurrency,
        )
    raise ParameterError(f"Unknown LLM backend {kind!r}; choose one of {', '.join(BACKEND_KINDS)}.")
