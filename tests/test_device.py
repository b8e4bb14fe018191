"""The one ``device`` setting (auto | cpu | cuda), resolved on the CPU with torch.cuda monkeypatched."""

from __future__ import annotations

import pytest
import torch

from dpkps_core import device as dv
from dpkps_core.errors import ParameterError


@pytest.mark.parametrize("setting, has_cuda, expected", [
    ("auto", True, "cuda"), ("auto", False, "cpu"), ("cpu", True, "cpu"), ("cpu", False, "cpu"),
    ("cuda", True, "cuda"), (" AUTO ", False, "cpu"),
])
def test_resolve_device(monkeypatch: pytest.MonkeyPatch, setting: str, has_cuda: bool, expected: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: has_cuda)
    assert dv.resolve_device(setting) == expected


def test_cuda_without_a_gpu_and_bad_settings_are_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ParameterError, match="sees no CUDA GPU"):
        dv.resolve_device("cuda")
    for bad in ("gpu", "", 3, "mps"):
        with pytest.raises(ParameterError, match="auto, cpu, cuda"):
            dv.resolve_device(bad)  # type: ignore[arg-type]

    def broken() -> bool:
        raise RuntimeError("driver")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    assert dv.resolve_device("auto") == "cpu"  # a broken driver counts as no GPU


def test_default_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv(dv.DEVICE_ENV, raising=False)
    assert dv.default_device_setting() == "auto" and dv.resolve_device() == "cuda"
    monkeypatch.setenv(dv.DEVICE_ENV, "cpu")
    assert dv.resolve_device() == "cpu" and dv.resolve_device(None) == "cpu"
    monkeypatch.setenv(dv.DEVICE_ENV, "nonsense")
    assert dv.default_device_setting() == "auto"


def test_dtype_per_device(monkeypatch: pytest.MonkeyPatch) -> None:
    assert dv.model_dtype("cpu") is torch.float32
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert dv.model_dtype("cuda") is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert dv.model_dtype("cuda") is torch.float16
    assert dv.describe_device("cpu") == "cpu"


def test_models_follow_the_setting_without_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backends and the embedder resolve the setting at construction (CPU default without a GPU)."""
    from dpkps_core.llm.factory import make_backend
    from dpkps_core.llm.local import OfflineBackend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert OfflineBackend().device == "cpu" and make_backend("offline", device="auto").describe()["device"] == "cpu"
    with pytest.raises(ParameterError):
        OfflineBackend(device="cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert OfflineBackend(device="auto").device == "cuda" and OfflineBackend(device="cpu").device == "cpu"
