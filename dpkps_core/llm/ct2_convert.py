"""Settings, availability and the one-time conversion of the CTranslate2 engine (docs/ARCHITECTURE.md, llm/).

A local model folder (the bundled SmolLM2-135M-Instruct's float32 safetensors folder, or a ``--model-path``
folder whose architecture CTranslate2's converter supports) is converted ONCE into the user cache
(:func:`dpkps_core.llm.backends.cache_root`, beside the offline model's float32 folder): int8 on the CPU, float16
on a CUDA GPU (:mod:`dpkps_core.device`; ASSETS.md "Fast CPU/GPU engine"). A marker file records the source's
identity, the quantization and the CTranslate2 version; the conversion is written into a temporary folder beside
the target and moved into place with ``os.replace``, so a half-written one is never used. Only the public model
is converted and cached; nothing derived from prompts is written here (docs/DESIGN.md §2.5).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

from dpkps_core.errors import LLMError, ParameterError

log = logging.getLogger(__name__)

ENGINE_CHOICES = ("ct2", "torch")
DEFAULT_ENGINE = "ct2"
ENGINE_ENV = "DPKPS_ENGINE"
CT2_REQUIREMENT = "ctranslate2==4.8.5"
MARKER = "dpkps_ct2.json"
MARKER_FORMAT = 1

_CONVERT_LOCK = threading.Lock()


# --------------------------------------------------------------------------------------------------------------
# Settings


def default_engine_setting() -> str:
    """``$DPKPS_ENGINE`` when it holds a valid choice, else ``"ct2"``."""
    value = (os.environ.get(ENGINE_ENV) or DEFAULT_ENGINE).strip().lower()
    return value if value in ENGINE_CHOICES else DEFAULT_ENGINE


def check_engine_setting(setting: Any) -> str:
    """The engine setting, lower-cased, or a ParameterError naming the choices."""
    if not isinstance(setting, str) or setting.strip().lower() not in ENGINE_CHOICES:
        raise ParameterError(f"The engine must be one of {', '.join(ENGINE_CHOICES)}; got {setting!r}.")
    return setting.strip().lower()


def ctranslate2_available() -> bool:
    """Whether the ``ctranslate2`` package can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("ctranslate2") is not None


def require_ctranslate2() -> ModuleType:
    """The imported ``ctranslate2`` module, or an LLMError saying how to install it or choose torch."""
    try:
        import ctranslate2
    except ImportError as exc:
        raise LLMError(
            f"The CTranslate2 engine is not installed; run `pip install {CT2_REQUIREMENT}` or choose the torch "
            "engine (--engine torch)."
        ) from exc
    return ctranslate2


def ct2_device(device: str) -> str:
    """CTranslate2's device for a resolved device setting (``"cpu"``/``"cuda"``); an error when CTranslate2
    cannot see the GPU that torch sees (e.g. a wheel without CUDA)."""
    if device != "cuda":
        return "cpu"
    ct2 = require_ctranslate2()
    if ct2.get_cuda_device_count() < 1:
        raise ParameterError(
            "The device resolves to cuda but CTranslate2 sees no CUDA GPU; choose --device cpu or --engine torch."
        )
    return "cuda"


def default_quantization(device: str) -> str:
    """int8 on the CPU (float32 where the CPU lacks int8 kernels); float16 on a CUDA GPU (int8_float16 where
    float16 is not supported) — ASSETS.md "Fast CPU/GPU engine"."""
    ct2 = require_ctranslate2()
    dev = ct2_device(device)
    supported = set(ct2.get_supported_compute_types(dev))
    prefs = ("int8", "int8_float32", "float32") if dev == "cpu" else ("float16", "int8_float16", "float32")
    for choice in prefs:
        if choice in supported:
            return choice
    return "float32"


# --------------------------------------------------------------------------------------------------------------
# Conversion into the user cache


def _cache_root() -> Path:
    from dpkps_core.llm.backends import cache_root

    return cache_root()


def source_identity(source: Path) -> str:
    """A fingerprint of a model folder: name, size and modification time of each top-level file (cheap; a new or
    re-converted source gets a new identity, so its CTranslate2 copy is converted again)."""
    h = hashlib.sha256()
    for p in sorted(source.iterdir(), key=lambda q: q.name):
        if p.name.startswith(".") or not p.is_file():
            continue
        st = p.stat()
        h.update(f"{p.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def converted_dir(source: Path, quantization: str, *, name: str | None = None) -> Path:
    """Where the CTranslate2 copy of ``source`` lives: ``<cache>/models/<name>-ct2-<quantization>``; a
    ``--model-path`` folder (no ``name``) gets a short hash of its resolved path in the folder name."""
    if name is None:
        digest = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:10]
        name = f"local-{source.name}-{digest}"
    return _cache_root() / "models" / f"{name}-ct2-{quantization}"


def _marker_payload(source: Path, quantization: str) -> dict[str, Any]:
    ct2 = require_ctranslate2()
    return {"format": MARKER_FORMAT, "source": str(source.resolve()), "source_identity": source_identity(source),
            "quantization": quantization, "ctranslate2": str(ct2.__version__)}


def _marker_matches(target: Path, expected: dict[str, Any]) -> bool:
    try:
        found = json.loads((target / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    keys = ("format", "source_identity", "quantization", "ctranslate2")
    return isinstance(found, dict) and all(found.get(k) == expected[k] for k in keys)


def _is_disk_full(exc: BaseException) -> bool:
    """Whether an exception (or one in its chain) means the disk is full."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return True
        if "no space left on device" in str(cur).lower():
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file()) / 1e6


def architecture_name(source: Path) -> str:
    """The transformers configuration class of a model folder (e.g. ``LlamaConfig``), from its config.json."""
    try:
        config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ParameterError(f"{source} has no readable config.json.") from exc
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if not isinstance(model_type, str):
        raise ParameterError(f"The config.json in {source} names no model_type.")
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return str(CONFIG_MAPPING_NAMES.get(model_type, model_type))


def supported_architecture(source: Path) -> bool:
    """Whether CTranslate2's converter knows the architecture of a model folder."""
    require_ctranslate2()
    from ctranslate2.converters import transformers as ct2_transformers

    loaders = getattr(ct2_transformers, "_MODEL_LOADERS", None)
    if not isinstance(loaders, dict):  # pragma: no cover - a future converter layout: try converting instead
        return True
    return architecture_name(source) in loaders


def _convert(source: Path, out: Path, quantization: str) -> None:
    """Run CTranslate2's converter (separate so tests can replace it)."""
    from ctranslate2.converters import TransformersConverter

    TransformersConverter(str(source)).convert(str(out), quantization=quantization, force=True)


def _fill_missing_special_tokens(folder: Path) -> None:
    """Give a converted model's config a string for every special token it names as null.

    CTranslate2 cannot load a model whose ``bos_token`` (or ``unk_token``) is null — the converter writes that for
    tokenizers without one (e.g. Qwen2's). The engine always passes the whole prompt, so any token of the
    vocabulary will do as that named token: the end-of-text token, else the first token."""
    path = folder / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if not isinstance(config, dict):
        return
    keys = [k for k in ("bos_token", "eos_token", "unk_token") if k in config and config[k] is None]
    if not keys:
        return
    vocab = json.loads((folder / "vocabulary.json").read_text(encoding="utf-8"))
    fill = config.get("eos_token") or config.get("unk_token") or config.get("bos_token") or vocab[0]
    for k in keys:
        config[k] = fill
    path.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")


def _remove_orphans(models: Path, keep: Path) -> None:
    """Delete cached conversions of ``--model-path`` folders that no longer exist (their marker names the source):
    a model folder that was moved or deleted leaves nothing behind for long. Only ``local-*`` folders with this
    module's marker are touched; the offline model's conversion is never an orphan."""
    for folder in models.glob("local-*-ct2-*"):
        if folder == keep or not folder.is_dir():
            continue
        try:
            source = json.loads((folder / MARKER).read_text(encoding="utf-8")).get("source")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(source, str) and source and not Path(source).exists():
            shutil.rmtree(folder, ignore_errors=True)


def ensure_converted(source: Path, quantization: str, *, name: str | None = None) -> Path:
    """Convert ``source`` (a Hugging Face model folder) once into the user cache; return the converted folder.

    A folder counts as converted only with its marker file (source identity, quantization, CTranslate2 version):
    the conversion is written into a temporary folder beside the target and moved into place with
    ``os.replace``, so a half-written conversion (no marker) is converted again and never used. A full disk is a
    ParameterError that says where space is needed (the temporary folder is removed); an architecture the
    converter does not know is a ParameterError naming it.
    """
    source = Path(source)
    if not (source / "config.json").is_file():
        raise ParameterError(f"{source} is not a Hugging Face model folder (no config.json).")
    target = converted_dir(source, quantization, name=name)
    expected = _marker_payload(source, quantization)
    if _marker_matches(target, expected):
        return target
    with _CONVERT_LOCK:
        if _marker_matches(target, expected):
            return target
        if not supported_architecture(source):
            raise ParameterError(
                f"CTranslate2 cannot convert the architecture {architecture_name(source)} of {source.name}; "
                "use --engine torch."
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
        t0 = time.monotonic()
        log.info("Converting %s once for CTranslate2 (%s) into %s", source.name, quantization, target)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            _convert(source, tmp, quantization)
            _fill_missing_special_tokens(tmp)
            (tmp / MARKER).write_text(json.dumps(expected, indent=1) + "\n", encoding="utf-8")
            if target.exists():  # a stale or half-written folder: move it aside, then remove it
                old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
                os.replace(target, old)
                shutil.rmtree(old, ignore_errors=True)
            try:
                os.replace(tmp, target)
            except OSError:
                if not _marker_matches(target, expected):  # another process did not win the race either
                    raise
        except (ParameterError, LLMError):
            raise
        except BaseException as exc:
            if _is_disk_full(exc):
                raise ParameterError(
                    f"The disk is full: converting {source.name} for CTranslate2 needs about "
                    f"{_folder_mb(source) / (4 if quantization.startswith('int8') else 2):.0f} MB free in "
                    f"{target.parent}; free some space, set DPKPS_CACHE_DIR to another disk, or use --engine torch."
                ) from exc
            if isinstance(exc, ValueError) and "no conversion is registered" in str(exc).lower():
                raise ParameterError(
                    f"CTranslate2 cannot convert the architecture of {source.name}; use --engine torch."
                ) from exc
            if isinstance(exc, Exception):
                raise LLMError(
                    f"Could not convert {source.name} for CTranslate2 ({type(exc).__name__}); use --engine torch."
                ) from exc
            raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
        log.info("Converted for CTranslate2 in %.1f s", time.monotonic() - t0)
        _remove_orphans(target.parent, target)
        return target
