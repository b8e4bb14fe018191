"""CTranslate2 as the inference engine of the local causal LMs (docs/ARCHITECTURE.md, llm/).

:class:`CT2Engine` decodes a batch of prompt token ids with ``Generator.generate_batch`` on a model converted
once into the user cache (:mod:`dpkps_core.llm.ct2_convert`: int8 on the CPU, float16 on a CUDA GPU). Its seam
:meth:`~CT2Engine.decode_batch` has the torch engine's contract (:mod:`dpkps_core.llm.torch_engine`): the
generated token ids of each row, up to and including its first stop id, sampled at the temperature / top-p (and
the top-k of 50 that transformers' ``generate`` applies by default), greedy at temperature 0. Measured on 2 CPU
cores (benchmarks/generation.py) it writes several times more tokens per second than batched torch float32.

The engine only writes documents. Private prediction (docs/DESIGN.md §3, [PrivPred]) needs the per-step logits of a whole
batch of private prompts and keeps its torch decoder (:mod:`dpkps_core.llm.decoder`).

Privacy: prompts never leave the process and nothing derived from them is written or logged here, only sizes
and speeds (docs/DESIGN.md §2.5 — the runner keeps the audit log).
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
from dpkps_core.llm.ct2_convert import (
    MARKER,
    architecture_name,
    check_engine_setting,
    ct2_device,
    default_engine_setting,
    default_quantization,
    ensure_converted,
    require_ctranslate2,
    supported_architecture,
)
from dpkps_core.llm import offline_weights
from dpkps_core.llm.ct2_polling import CancelledInFlight, decode_polled, finish_then_release
from dpkps_core.llm.repetition import check_repetition

log = logging.getLogger(__name__)

# transformers' generate() samples with top_k=50 unless the model's generation config says otherwise (its global
# default); the torch path relies on it, so the engine samples the same way.
TORCH_DEFAULT_TOP_K = 50
# A calibration batch (public text only) measures the engine's speed before a run, for the estimate and ETA.
CALIBRATION_PROMPT = "Write one short paragraph about the weather in a small town."
_CALIBRATION_TOKENS = 32

# No per-token Python callback by default (issue 35 §8): see llm/ct2_polling.py.
# The per-token callback stays for a batch whose timeout could be reached (only there can rows end early, as
# torch's max_time ends them): when its expected time — the measured seconds per step, else UNMEASURED_STEP_S per
# step — times DEADLINE_MARGIN exceeds the batch's time budget (timeout × rows).
UNMEASURED_STEP_S = 0.25
DEADLINE_MARGIN = 2.0


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
        self._step_s: dict[int, float] = {}  # batch size → measured seconds per decoding step

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
        source = offline_weights.ensure_offline_model()
        return cls.for_folder(source, device=device, threads=threads, quantization=quantization,
                              name=offline_weights.OFFLINE_MODEL_NAME)

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "compute_type": self.compute_type, "device": self.device,
                "threads": self.threads}

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
                     timeout: float | None = None, no_repeat_ngram: int = 0,
                     repetition_penalty: float = 1.0) -> list[list[int]]:
        """The generated token ids of each row (up to and including its first stop id, at most ``max_tokens``;
        with no stop ids every row runs the whole budget).

        Sampling at ``temperature`` with ``top_p`` and the engine's ``top_k`` (as transformers' generate does);
        greedy when ``temperature`` is 0. ``seed`` makes sampling reproducible (CTranslate2's global seed).
        ``cancel`` raises GenerationCancelled within a poll (:mod:`~dpkps_core.llm.ct2_polling`);
        ``on_step(step, max_tokens)`` reports the batch's progress in steps. Neither costs a Python call per token:
        the batch decodes with no callback, the progress is the step its measured speed says it reached, and after
        a cancel the engine finishes the batch in flight in the background (its rows discarded) before it takes
        another. ``timeout`` (seconds per row) ends rows early, as torch's ``max_time`` does: a batch whose budget
        could be reached (:meth:`_may_time_out`) keeps the per-token callback for that, and its ``on_step``
        reports the longest row's length. A batch that runs out of memory is decoded in two halves.

        Repetition control (:mod:`dpkps_core.llm.repetition`): ``no_repeat_ngram`` > 0 forbids any
        n-gram of that many tokens twice in a reply, ``repetition_penalty`` > 1 divides the logit of every token
        the reply already holds (CTRL's penalty, Keskar et al. 2019); CTranslate2 counts the generated tokens only,
        never the prompt, so the prompt's keyphrases stay free to appear.
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
        check_repetition(no_repeat_ngram, repetition_penalty)
        self.load()
        n_vocab = len(self._vocab)
        try:
            tokens = [[self._vocab[i] for i in r] for r in rows]
        except (IndexError, TypeError) as exc:
            raise ParameterError(f"A prompt token id is outside the model's vocabulary of {n_vocab}.") from exc
        # Ids outside the vocabulary can never be written: dropped. No stop ids: every row runs the whole budget.
        stop_ids = sorted({int(s) for s in stops if 0 <= int(s) < n_vocab})
        self._lock.acquire()
        handed_off = False  # True: a background thread releases the lock once the cancelled batch is done
        try:
            self._reseed(seed)
            t0 = time.monotonic()
            try:
                out = self._decode(tokens, stop_ids=stop_ids, max_tokens=max_tokens, temperature=float(temperature),
                                   top_p=float(top_p), cancel=cancel, on_step=on_step, timeout=timeout,
                                   no_repeat_ngram=int(no_repeat_ngram),
                                   repetition_penalty=float(repetition_penalty))
            except CancelledInFlight as stopped:  # the engine is freed once the batch in flight is done
                threading.Thread(target=finish_then_release, args=(stopped.pending, self._lock),
                                 name="dpkps-ct2-cancelled", daemon=True).start()
                handed_off = True
                from dpkps_core.llm.backends import GenerationCancelled

                raise GenerationCancelled("Generation was cancelled.") from None
            seconds = time.monotonic() - t0
            self.tokens_generated += sum(len(r) for r in out)
            self.generate_seconds += seconds
            steps = max((len(r) for r in out), default=0)
            if seconds > 0 and steps > 0:  # a batch lasts as long as its longest row
                b, step = len(rows), seconds / steps
                prev = self._step_s.get(b)
                self._step_s[b] = step if prev is None else 0.5 * prev + 0.5 * step
        finally:
            if not handed_off:
                self._lock.release()
        return out

    def _expected_step(self, rows: int) -> float:
        """Seconds per decoding step of a batch of ``rows`` rows: measured at that size, else scaled up from the
        largest size measured (a step over more rows never costs less), else :data:`UNMEASURED_STEP_S`."""
        step = self._step_s.get(rows)
        if step is not None:
            return step
        if self._step_s:
            size = max(self._step_s)
            return self._step_s[size] * max(1.0, rows / size)
        return UNMEASURED_STEP_S

    def _may_time_out(self, rows: int, max_tokens: int, timeout: float | None) -> bool:
        """Whether a batch could reach its time budget (``timeout`` × ``rows``), with :data:`DEADLINE_MARGIN`."""
        if not timeout or timeout <= 0:
            return False
        return self._expected_step(rows) * max_tokens * DEADLINE_MARGIN > float(timeout) * rows

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
                on_step: Callable[[int, int], None] | None, timeout: float | None, no_repeat_ngram: int = 0,
                repetition_penalty: float = 1.0) -> list[list[int]]:
        # include_prompt_in_result=False: the prompt is the decoder's prefix, so CTranslate2's repetition penalty
        # and no-repeat n-grams look at the generated tokens only (as the torch engine's processors do).
        kwargs: dict[str, Any] = {"max_length": int(max_tokens), "include_prompt_in_result": False,
                                  "return_end_token": True, "end_token": stop_ids,
                                  "no_repeat_ngram_size": no_repeat_ngram, "repetition_penalty": repetition_penalty}
        if temperature > 0:
            kwargs.update(sampling_topk=self.top_k, sampling_topp=top_p, sampling_temperature=temperature)
        else:
            kwargs.update(sampling_topk=1)
        if not self._may_time_out(len(tokens), max_tokens, timeout):
            return self._decode_polled(tokens, kwargs, max_tokens=max_tokens, cancel=cancel, on_step=on_step,
                                       retry=lambda part: self._decode(
                                           part, stop_ids=stop_ids, max_tokens=max_tokens, temperature=temperature,
                                           top_p=top_p, cancel=cancel, on_step=on_step, timeout=timeout,
                                           no_repeat_ngram=no_repeat_ngram, repetition_penalty=repetition_penalty))
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
                          cancel=cancel, on_step=on_step, timeout=timeout, no_repeat_ngram=no_repeat_ngram,
                          repetition_penalty=repetition_penalty)
                return self._decode(tokens[:half], **kw) + self._decode(tokens[half:], **kw)
            hint = "; lower the batch size" if _out_of_memory(exc) else ""
            raise LLMError(f"The CTranslate2 engine failed ({type(exc).__name__}){hint}.") from exc
        if state["cancel"] or (cancel is not None and cancel.is_set()):
            from dpkps_core.llm.backends import GenerationCancelled

            raise GenerationCancelled("Generation was cancelled.")
        return [[int(t) for t in r.sequences_ids[0]] for r in results]

    def _decode_polled(self, tokens: list[list[str]], kwargs: dict[str, Any], *, max_tokens: int,
                       cancel: threading.Event | None, on_step: Callable[[int, int], None] | None,
                       retry: Callable[[list[list[str]]], list[list[int]]]) -> list[list[int]]:
        """:func:`~dpkps_core.llm.ct2_polling.decode_polled` on this engine's generator, its progress from the
        measured seconds per step; a batch that ran out of memory is decoded again in two halves (``retry``)."""
        step = self._step_s.get(len(tokens)) or (self._expected_step(len(tokens)) if self._step_s else None)
        try:
            return decode_polled(self._generator, tokens, kwargs, max_tokens=max_tokens, cancel=cancel,
                                 on_step=on_step, step_seconds=step)
        except CancelledInFlight:
            raise
        except Exception as exc:  # noqa: BLE001 - turned into one user-facing sentence below
            if _out_of_memory(exc) and len(tokens) > 1:
                half = len(tokens) // 2
                log.warning("Out of memory for a batch of %d on %s: decoding it in two halves", len(tokens),
                            self.device)
                return retry(tokens[:half]) + retry(tokens[half:])
            hint = "; lower the batch size" if _out_of_memory(exc) else ""
            raise LLMError(f"The CTranslate2 engine failed ({type(exc).__name__}){hint}.") from exc

    # -- speed ---------------------------------------------------------------------------------------------------
    def step_seconds(self, batch_size: int) -> float | None:
        """Measured seconds of one decoding step over ``batch_size`` rows (None before a batch of that size ran).

        A batch lasts as long as its longest row, so a step is the batch's time over its longest row's tokens;
        the figure is a running mean over the batches of that size (calibration included)."""
        return self._step_s.get(max(1, int(batch_size)))

    def batch_tokens_per_second(self, batch_size: int) -> float:
        """Tokens/s of a batch of ``batch_size`` rows that all run the whole budget (``batch_size`` / a step's
        seconds): measured on this engine's batches of that size, else on one calibration batch of public input
        (0 when unmeasured while the engine is busy writing). The before-the-run estimate comes from it
        (llm/estimate.py, when no batch of that size was measured); the runner's ETA comes from its own batches
        (llm/speed.py)."""
        step = self.step_seconds(batch_size)
        if step is None:
            if self._lock.locked():  # busy writing: do not wait for it; 0 = not measured (the caller falls back)
                return 0.0
            self.calibrate(batch_size=batch_size)
            step = self.step_seconds(batch_size)
        return max(1, int(batch_size)) / step if step else 0.0

    def measured_tokens_per_second(self, batch_size: int) -> float:
        """:meth:`batch_tokens_per_second` from what was measured only: never a calibration (0 when unmeasured)."""
        step = self.step_seconds(batch_size)
        return max(1, int(batch_size)) / step if step else 0.0

    def throughput(self) -> float | None:
        """Generated tokens per second over everything this engine wrote (None before anything)."""
        return self.tokens_generated / self.generate_seconds if self.generate_seconds > 0 else None

    def calibrate(self, rows: list[list[int]] | None = None, *, batch_size: int = 16,
                  max_tokens: int = _CALIBRATION_TOKENS) -> float:
        """Decode one calibration batch of ``batch_size`` rows and return its seconds per decoding step.

        The prompt pass is timed apart (a batch of one new token) and taken off, so that a short calibration
        does not count it as decoding steps. ``rows``: prompt ids of public text (e.g. :data:`CALIBRATION_PROMPT`
        with the chat template); by default a fixed run of vocabulary ids as long as a run's prompts. Nothing
        private is read, so the figure may be shown and logged."""
        self.load()
        if rows is None:  # about as long as the chat-template prompts of a run (~60 tokens)
            rows = [[min(len(self._vocab) - 1, 200 + i) for i in range(60)]]
        batch = [rows[j % len(rows)] for j in range(max(1, int(batch_size)))]
        t0 = time.monotonic()
        self.decode_batch(batch, stops=[], max_tokens=1, temperature=1.0, top_p=1.0)
        t1 = time.monotonic()
        out = self.decode_batch(batch, stops=[], max_tokens=max(2, max_tokens), temperature=1.0, top_p=1.0)
        t2 = time.monotonic()
        steps = max(len(r) for r in out)
        step = ((t2 - t1) - (t1 - t0)) / max(1, steps - 1)
        if not step > 0:  # timing noise on a busy machine: the plain mean
            step = (t2 - t1) / steps
        self._step_s[len(batch)] = step
        return step


class LazyCT2Engine:
    """A :class:`CT2Engine` built on first use: the model folder is converted (once, cached) only when a batch is
    decoded or the speed is measured, so building a backend stays instant. ``source`` returns the Hugging Face
    folder to convert (e.g. the offline model's float32 folder, itself converted once on demand)."""

    name = "ct2"

    def __init__(self, source: Callable[[], Path], *, device: str = "cpu", threads: int = 1,
                 quantization: str | None = None, name: str | None = None) -> None:
        self._source = source
        self.device = device
        self.threads = threads
        self.quantization = quantization or default_quantization(device)
        self._name = name
        self._engine: CT2Engine | None = None
        self._lock = threading.Lock()

    def engine(self) -> CT2Engine:
        """The converted, loaded engine (converts and loads once)."""
        with self._lock:
            if self._engine is None:
                engine = CT2Engine.for_folder(self._source(), device=self.device, threads=self.threads,
                                              quantization=self.quantization, name=self._name)
                engine.load()
                self._engine = engine
            return self._engine

    def load(self) -> None:
        """Convert (once) and load the engine now rather than on the first batch."""
        self.engine()

    def describe(self) -> dict[str, Any]:
        """Public description (engine, compute type, device, threads) without converting anything."""
        return {"engine": self.name, "compute_type": self.quantization, "device": self.device,
                "threads": self.threads}

    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                     top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                     on_step: Callable[[int, int], None] | None = None,
                     timeout: float | None = None, no_repeat_ngram: int = 0,
                     repetition_penalty: float = 1.0) -> list[list[int]]:
        """:meth:`CT2Engine.decode_batch` (converting the model first if needed)."""
        return self.engine().decode_batch(rows, stops=stops, max_tokens=max_tokens, temperature=temperature,
                                          top_p=top_p, seed=seed, cancel=cancel, on_step=on_step, timeout=timeout,
                                          no_repeat_ngram=no_repeat_ngram, repetition_penalty=repetition_penalty)

    def batch_tokens_per_second(self, batch_size: int) -> float:
        """:meth:`CT2Engine.batch_tokens_per_second` (converting the model first if needed)."""
        return self.engine().batch_tokens_per_second(batch_size)

    @property
    def building(self) -> bool:
        """Whether another thread converts or loads the engine now (e.g. the app's warm-up): a caller that must
        not wait (the estimate) asks this first."""
        return self._engine is None and self._lock.locked()

    def measured_tokens_per_second(self, batch_size: int) -> float:
        """:meth:`CT2Engine.measured_tokens_per_second` (0 before the engine was built: nothing converted here)."""
        return self._engine.measured_tokens_per_second(batch_size) if self._engine is not None else 0.0

    @property
    def tokens_generated(self) -> int:
        return self._engine.tokens_generated if self._engine is not None else 0


def choose_engine(kind: str, *, setting: str | None, device: str, threads: int,
                  model_path: str | os.PathLike[str] | None = None) -> tuple[LazyCT2Engine | None, str | None]:
    """The decoding engine of a local backend and a one-line note when it is not the one asked for.

    ``setting`` is ``"ct2"``, ``"torch"`` or None (``$DPKPS_ENGINE``, default ct2). Returns ``(None, note)`` for
    torch: asked for, or the default when CTranslate2 is missing, cannot see the GPU that the device resolves
    to, or cannot convert the ``--model-path`` folder's architecture (the note says which). When ct2 is asked
    for explicitly, those cases are errors instead.
    """
    explicit = setting is not None
    choice = check_engine_setting(setting) if explicit else default_engine_setting()
    if choice == "torch" or kind not in ("offline", "local"):
        return None, None
    try:
        require_ctranslate2()
        quantization = default_quantization(device)
        if kind == "local":
            folder = Path(model_path or "").expanduser()
            if not (folder / "config.json").is_file():  # the backend says what is wrong with the folder
                return None, None
            if not supported_architecture(folder):
                raise ParameterError(
                    f"CTranslate2 cannot convert the architecture {architecture_name(folder)} of {folder.name}; "
                    "use --engine torch."
                )
            return LazyCT2Engine(lambda: folder, device=device, threads=threads, quantization=quantization), None
    except (ParameterError, LLMError) as exc:
        if explicit:
            raise
        return None, f"note: writing with torch, not CTranslate2 ({str(exc).split(';')[0]})."
    return LazyCT2Engine(offline_weights.ensure_offline_model, device=device, threads=threads,
                         quantization=quantization, name=offline_weights.OFFLINE_MODEL_NAME), None
