"""CTranslate2 as the inference engine of the local causal LMs (docs/ARCHITECTURE.md, llm/).

A local model (the bundled SmolLM2-135M-Instruct, or a ``--model-path`` folder whose architecture CTranslate2's
converter supports) is converted ONCE into the user cache (:func:`dpkps_core.llm.backends.cache_root`, the same
root as the offline model's float32 safetensors folder), quantised to int8 on the CPU and float16 / int8_float16
on a CUDA GPU (:mod:`dpkps_core.device`). :class:`CT2Engine` then decodes a batch of prompt token ids with
``Generator.generate_batch`` — the seam :meth:`decode_batch` has the same contract as the torch path: the
generated token ids of each row, up to and including its stop id, sampled at the temperature / top-p (and the
top-k of 50 that transformers' ``generate`` applies by default), greedy at temperature 0.

The engine only writes documents. Private prediction (DESIGN §3, paper 004) needs the per-step logits of a whole
batch of private prompts and keeps its torch decoder (:mod:`dpkps_core.llm.decoder`).

Privacy: what is converted and cached is the public model only; prompts never leave the process and nothing
derived from them is written by this module (DESIGN §2.5 — the runner keeps the audit log).
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
from typing import Any, Callable, Sequence

from dpkps_core.errors import LLMError, ParameterError

log = logging.getLogger(__name__)

ENGINE_CHOICES = ("ct2", "torch")
DEFAULT_ENGINE = "ct2"
ENGINE_ENV = "DPKPS_ENGINE"
CT2_REQUIREMENT = "ctranslate2==4.8.5"
MARKER = "dpkps_ct2.json"
MARKER_FORMAT = 1
# transformers' generate() samples with top_k=50 unless the model's generation config says otherwise (its global
# default); the torch path relies on it, so the engine samples the same way.
TORCH_DEFAULT_TOP_K = 50
# A calibration batch (public text only) measures the engine's speed before a run, for the estimate and ETA.
CALIBRATION_PROMPT = "Write one short paragraph about the weather in a small town."
_CALIBRATION_TOKENS = 24

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
    vocabulary serves as a placeholder: the end-of-text token, else the first token."""
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
        return target


# --------------------------------------------------------------------------------------------------------------
# The engine


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


class CT2Engine:
    """A converted model run by CTranslate2: batched decoding of prompt token ids (the local backend's seam).

    ``threads`` is CTranslate2's ``intra_threads`` (the existing threads setting); ``device`` is a resolved
    device (``"cpu"``/``"cuda"``); ``compute_type`` defaults to the folder's quantization.
    """

    name = "ct2"

    def __init__(self, model_dir: str | os.PathLike[str], *, device: str = "cpu", threads: int = 1,
                 compute_type: str | None = None, top_k: int = TORCH_DEFAULT_TOP_K) -> None:
        if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 256:
            raise ParameterError("The thread count must be an integer from 1 to 256.")
        if not isinstance(top_k, int) or top_k < 0:
            raise ParameterError("top_k must be a non-negative integer (0: no top-k cut).")
        self.model_dir = Path(model_dir)
        self.device = ct2_device(device)
        self.threads = threads
        self.top_k = top_k
        if compute_type is None:
            try:
                compute_type = json.loads((self.model_dir / MARKER).read_text(encoding="utf-8"))["quantization"]
            except (OSError, ValueError, KeyError, TypeError):
                compute_type = "default"
        self.compute_type = str(compute_type)
        self._generator: Any = None
        self._vocab: list[str] = []
        self._lock = threading.Lock()
        self.load_seconds: float | None = None
        self.tokens_generated = 0
        self.generate_seconds = 0.0
        self._seeded = False
        self._speed: dict[int, float] = {}  # batch size → measured tokens/s of the whole batch

    # -- construction -------------------------------------------------------------------------------------------
    @classmethod
    def for_folder(cls, source: str | os.PathLike[str], *, device: str = "cpu", threads: int = 1,
                   quantization: str | None = None, name: str | None = None) -> "CT2Engine":
        """Convert a Hugging Face model folder once (cached) and return its engine; ParameterError when the
        converter does not know its architecture or the disk is full."""
        quant = quantization or default_quantization(device)
        folder = ensure_converted(Path(source), quant, name=name)
        return cls(folder, device=device, threads=threads, compute_type=quant)

    @classmethod
    def for_offline(cls, *, device: str = "cpu", threads: int = 1, quantization: str | None = None) -> "CT2Engine":
        """The bundled SmolLM2-135M-Instruct: its float32 safetensors folder (converted once from the packaged
        GGUF) converted once more for CTranslate2, beside it in the user cache."""
        from dpkps_core.llm import local

        source = local.ensure_offline_model()
        return cls.for_folder(source, device=device, threads=threads, quantization=quantization,
                              name=local.OFFLINE_MODEL_NAME)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "compute_type": self.compute_type, "device": self.device,
                "threads": self.threads, "model_dir": str(self.model_dir)}

    def load(self) -> None:
        """Load the converted model (once)."""
        if self._generator is not None:
            return
        ct2 = require_ctranslate2()
        t0 = time.monotonic()
        try:
            vocab = json.loads((self.model_dir / "vocabulary.json").read_text(encoding="utf-8"))
            gen = ct2.Generator(str(self.model_dir), device=self.device, compute_type=self.compute_type,
                                intra_threads=self.threads, inter_threads=1)
        except Exception as exc:  # noqa: BLE001 - one user-facing sentence
            raise LLMError(
                f"Could not load the CTranslate2 model in {self.model_dir} ({type(exc).__name__}); delete the "
                "folder to convert it again, or use --engine torch."
            ) from exc
        if not isinstance(vocab, list) or not all(isinstance(t, str) for t in vocab):
            raise LLMError(f"The vocabulary of {self.model_dir} is malformed; delete the folder to convert it again.")
        self._vocab = vocab
        self._generator = gen
        self.load_seconds = time.monotonic() - t0

    # -- decoding ------------------------------------------------------------------------------------------------
    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                     top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                     on_step: Callable[[int, int], None] | None = None,
                     timeout: float | None = None) -> list[list[int]]:
        """The generated token ids of each row (up to and including its stop id, at most ``max_tokens``).

        Sampling at ``temperature`` with ``top_p`` and the engine's ``top_k`` (as transformers' generate does);
        greedy when ``temperature`` is 0. ``seed`` makes sampling reproducible (CTranslate2's global seed).
        ``on_step(step, max_tokens)`` reports the longest row's length; ``cancel`` stops every row at its next
        token and raises GenerationCancelled; ``timeout`` (seconds per row) ends rows early, as torch's
        ``max_time`` does. A batch that runs out of memory is decoded in two halves.
        """
        if not rows:
            return []
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ParameterError("max_tokens must be a positive integer.")
        if not isinstance(temperature, (int, float)) or temperature < 0:
            raise ParameterError("The temperature must be ≥ 0.")
        if not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
            raise ParameterError("top_p must be in (0, 1].")
        if any(not r for r in rows):
            raise ParameterError("Every prompt needs at least one token.")
        self.load()
        n_vocab = len(self._vocab)
        try:
            tokens = [[self._vocab[i] for i in r] for r in rows]
        except (IndexError, TypeError) as exc:
            raise ParameterError(f"A prompt token id is outside the model's vocabulary of {n_vocab}.") from exc
        stop_ids = sorted({int(s) for s in stops})
        with self._lock:
            self._reseed(seed)
            t0 = time.monotonic()
            out = self._decode(tokens, stop_ids=stop_ids, max_tokens=max_tokens, temperature=float(temperature),
                               top_p=float(top_p), cancel=cancel, on_step=on_step, timeout=timeout)
            seconds = time.monotonic() - t0
        n = sum(len(r) for r in out)
        self.tokens_generated += n
        self.generate_seconds += seconds
        if seconds > 0 and n > 0:
            b = len(rows)
            prev = self._speed.get(b)
            self._speed[b] = n / seconds if prev is None else 0.5 * prev + 0.5 * n / seconds
        return out

    def _reseed(self, seed: int | None) -> None:
        """Seed CTranslate2's sampling. Its random generators are per worker thread and seeded from the global
        seed when the generator starts, so a seed takes a fresh generator (a reload of ~1 s); after a seeded
        batch, an unseeded one reseeds from the OS entropy source so that later runs do not repeat it."""
        if seed is None and not self._seeded:
            return
        ct2 = require_ctranslate2()
        value = int(seed) if seed is not None else int.from_bytes(os.urandom(4), "little")
        ct2.set_random_seed(value & 0xFFFFFFFF)
        self._generator = None
        self.load()
        self._seeded = seed is not None

    def _decode(self, tokens: list[list[str]], *, stop_ids: list[int], max_tokens: int, temperature: float,
                top_p: float, cancel: threading.Event | None,
                on_step: Callable[[int, int], None] | None, timeout: float | None) -> list[list[int]]:
        kwargs: dict[str, Any] = {"max_length": int(max_tokens), "include_prompt_in_result": False,
                                  "return_end_token": True, "end_token": stop_ids or None}
        if temperature > 0:
            kwargs.update(sampling_topk=self.top_k, sampling_topp=top_p, sampling_temperature=temperature)
        else:
            kwargs.update(sampling_topk=1)
        state = {"cancel": False, "longest": 0}
        deadline = time.monotonic() + float(timeout) * len(tokens) if timeout and timeout > 0 else None
        counts = [0] * len(tokens)
        if cancel is not None or on_step is not None or deadline is not None:
            def _callback(step: Any) -> bool:
                i = int(step.batch_id)
                counts[i] += 1
                if on_step is not None and counts[i] > state["longest"]:
                    state["longest"] = counts[i]
                    try:
                        on_step(counts[i], int(max_tokens))
                    except Exception:  # noqa: BLE001 - a progress callback must not break generation
                        log.debug("on_step callback failed", exc_info=True)
                if cancel is not None and cancel.is_set():
                    state["cancel"] = True
                    return True
                return deadline is not None and time.monotonic() > deadline

            kwargs["callback"] = _callback
        try:
            results = self._generator.generate_batch(tokens, **kwargs)
        except Exception as exc:  # noqa: BLE001 - turned into one user-facing sentence below
            if _out_of_memory(exc) and len(tokens) > 1:
                half = len(tokens) // 2
                log.warning("Out of memory for a batch of %d on %s: decoding it in two halves", len(tokens),
                            self.device)
                kw = dict(stop_ids=stop_ids, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                          cancel=cancel, on_step=on_step, timeout=timeout)
                return self._decode(tokens[:half], **kw) + self._decode(tokens[half:], **kw)
            hint = "; lower the batch size" if _out_of_memory(exc) else ""
            raise LLMError(f"The CTranslate2 engine failed ({type(exc).__name__}){hint}.") from exc
        if state["cancel"] or (cancel is not None and cancel.is_set()):
            from dpkps_core.llm.backends import GenerationCancelled

            raise GenerationCancelled("Generation was cancelled.")
        return [[int(t) for t in r.sequences_ids[0]] for r in results]

    # -- speed ---------------------------------------------------------------------------------------------------
    def tokens_per_second(self, batch_size: int = 1) -> float | None:
        """Measured tokens/s of a whole batch of ``batch_size`` rows (None before any batch of that size ran;
        the nearest measured size is scaled linearly, capped at the measured rate × the size ratio)."""
        b = max(1, int(batch_size))
        if b in self._speed:
            return self._speed[b]
        if not self._speed:
            return None
        near = min(self._speed, key=lambda k: abs(k - b))
        return self._speed[near] * min(b / near, 1.0) if b < near else self._speed[near]

    def calibrate(self, rows: list[list[int]] | None = None, *, batch_size: int = 16, stops: Sequence[int] = (),
                  max_tokens: int = _CALIBRATION_TOKENS) -> float:
        """Measure tokens/s on a public calibration batch at ``batch_size`` rows; returns the batch's tokens/s.

        ``rows``: prompt ids of public text (e.g. :data:`CALIBRATION_PROMPT` with the chat template); by default
        a few fixed vocabulary ids. Nothing private is read, so the figure may be shown and logged."""
        self.load()
        if rows is None:
            rows = [[min(len(self._vocab) - 1, i) for i in range(1, 9)]]
        batch = [rows[j % len(rows)] for j in range(max(1, int(batch_size)))]
        # No stop ids: every row runs the whole budget, as long documents do.
        t0 = time.monotonic()
        out = self.decode_batch(batch, stops=list(stops), max_tokens=max_tokens, temperature=1.0, top_p=1.0)
        seconds = time.monotonic() - t0
        rate = sum(len(r) for r in out) / seconds if seconds > 0 else 0.0
        self._speed[len(batch)] = rate
        return rate
