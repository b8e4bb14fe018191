"""CTranslate2 as the inference engine of the local causal LMs (docs/ARCHITECTURE.md, llm/).

:class:`CT2Engine` decodes a batch of prompt token ids with ``Generator.generate_batch`` on a model converted
once into the user cache (:mod:`dpkps_core.llm.ct2_convert`: int8 on the CPU, float16 on a CUDA GPU). Its seam
:meth:`~CT2Engine.decode_batch` has the torch engine's contract (:mod:`dpkps_core.llm.torch_engine`): the
generated token ids of each row, up to and including its first stop id, sampled at the temperature / top-p (and
the top-k of 50 that transformers' ``generate`` applies by default), greedy at temperature 0. Measured on 2 CPU
cores (benchmarks/generation.py) it writes several times more tokens per second than batched torch float32.

The engine only writes documents. Private prediction (DESIGN §3, paper 004) needs the per-step logits of a whole
batch of private prompts and keeps its torch decoder (:mod:`dpkps_core.llm.decoder`).

Privacy: prompts never leave the process and nothing derived from them is written or logged here, only sizes
and speeds (DESIGN §2.5 — the runner keeps the audit log).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm.ct2_convert import MARKER, ct2_device, default_quantization, ensure_converted, require_ctranslate2

log = logging.getLogger(__name__)

# transformers' generate() samples with top_k=50 unless the model's generation config says otherwise (its global
# default); the torch path relies on it, so the engine samples the same way.
TORCH_DEFAULT_TOP_K = 50
# A calibration batch (public text only) measures the engine's speed before a run, for the estimate and ETA.
CALIBRATION_PROMPT = "Write one short paragraph about the weather in a small town."
_CALIBRATION_TOKENS = 24


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
