"""One ``device`` setting for every model DP-KPS Studio runs: ``auto`` | ``cpu`` | ``cuda``.

``auto`` (the default) means CUDA when torch sees a GPU, else the CPU, so a machine without a GPU (and CI)
keeps the CPU path. The setting is used by the embedding models, the local LLM backends (bf16 — or fp16 where
the GPU lacks bf16 — on CUDA, float32 on the CPU), private prediction's batched decoder (which follows the
model's device) and the evaluation's embedding of real documents. ``$DPKPS_DEVICE`` sets the default.
"""

from __future__ import annotations

import os
from typing import Any

from dpkps_core.errors import ParameterError

DEVICE_CHOICES = ("auto", "cpu", "cuda")
DEVICE_ENV = "DPKPS_DEVICE"


def default_device_setting() -> str:
    """``$DPKPS_DEVICE`` when it holds a valid choice, else ``"auto"``."""
    value = (os.environ.get(DEVICE_ENV) or "auto").strip().lower()
    return value if value in DEVICE_CHOICES else "auto"


def check_device_setting(setting: Any) -> str:
    """The setting, lower-cased, or a ParameterError naming the choices."""
    if not isinstance(setting, str) or setting.strip().lower() not in DEVICE_CHOICES:
        raise ParameterError(f"The device must be one of {', '.join(DEVICE_CHOICES)}; got {setting!r}.")
    return setting.strip().lower()


def cuda_available() -> bool:
    """Whether torch sees a usable CUDA device (False when torch is missing or CPU-only)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver counts as no GPU
        return False


def resolve_device(setting: str | None = None) -> str:
    """``"cuda"`` or ``"cpu"`` for a setting (None = :func:`default_device_setting`).

    ``auto`` picks CUDA when torch sees it; ``cuda`` without a visible GPU is an error (never a silent fallback).
    """
    choice = check_device_setting(default_device_setting() if setting is None else setting)
    if choice == "cpu":
        return "cpu"
    has_cuda = cuda_available()
    if choice == "cuda" and not has_cuda:
        raise ParameterError(
            "The device is set to cuda but torch sees no CUDA GPU (CPU-only torch build, no driver, or "
            "CUDA_VISIBLE_DEVICES empty); choose auto or cpu."
        )
    return "cuda" if has_cuda else "cpu"


def model_dtype(device: str) -> Any:
    """The torch dtype for a model on ``device``: float32 on the CPU; bfloat16 on CUDA (float16 without bf16)."""
    import torch

    if device != "cuda":
        return torch.float32
    try:
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    except Exception:  # noqa: BLE001
        return torch.float16


def describe_device(device: str) -> str:
    """A short human description (``"cpu"`` or ``"cuda (NVIDIA H100 …)"``) for logs and reports."""
    if device != "cuda":
        return "cpu"
    try:
        import torch

        return f"cuda ({torch.cuda.get_device_name(0)})"
    except Exception:  # noqa: BLE001
        return "cuda"
