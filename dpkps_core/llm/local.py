"""Local causal language models run on this machine: the bundled offline SmolLM2-135M-Instruct and any Hugging
Face model folder on disk, generating a whole batch of prompts in one call on the configured device
(:mod:`dpkps_core.device`; docs/ARCHITECTURE.md, llm/).

The public API other modules use (private prediction needs logits, AugPE batches its prompts):
:meth:`LocalTransformersBackend.model_and_tokenizer` (the loaded model and tokenizer), :attr:`~LocalTransformersBackend.stop_ids`,
:func:`chat_token_ids` (prompt ids with the chat template) and :meth:`~LocalTransformersBackend.generate_batch`.

The decoding seam (where an inference engine plugs in). ``generate_batch`` tokenises the prompts (chat template),
then calls ONE method, :meth:`LocalTransformersBackend.decode_batch`::

    decode_batch(rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                 top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                 on_step: Callable[[int, int], None] | None = None, timeout: float | None = None,
                 no_repeat_ngram: int = 0, repetition_penalty: float = 1.0)
        -> list[list[int]]   # the generated ids of each row, up to and including its first stop id

Repetition control (:mod:`dpkps_core.llm.repetition`) is passed to the engine only when it is on, so an engine
without those two keywords still decodes with it off.

and turns the ids back into text (token counts, the empty-reply rule). By default ``decode_batch`` runs
transformers' ``generate`` (:class:`dpkps_core.llm.torch_engine.TorchEngine`). To decode elsewhere, give the
backend an ``engine`` (any object with that ``decode_batch`` and a ``describe()``; :class:`DecodeEngine`, e.g.
:class:`dpkps_core.llm.ct2.CT2Engine`) or override ``decode_batch`` in a subclass; nothing else changes. With an
engine the torch weights are not loaded for writing (only the tokenizer and the folder's generation config, for
the stop ids); :meth:`~LocalTransformersBackend.model_and_tokenizer` still loads them for private prediction.
"""

from __future__ import annotations

import abc
import logging
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping, Protocol, Sequence

from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm.backends import ChatMessages, LLMBackend, TransientLLMError
from dpkps_core.llm.model_queue import ModelQueue
from dpkps_core.llm.offline_weights import (CONVERTED_MARKER, OFFLINE_MODEL_NAME, convert_offline_model,
                                            ensure_offline_model, offline_model_dir, set_offline_env)
from dpkps_core.llm.repetition import (DEFAULT_NO_REPEAT_NGRAM, DEFAULT_REPETITION_PENALTY, check_repetition,
                                       repetition_kwargs)
from dpkps_core.llm.torch_engine import TorchEngine

log = logging.getLogger(__name__)

# Prompts per batched call: measured on 2 shared CPU cores with SmolLM2-135M (benchmarks/generation.py --sweep):
# 12 tokens/s one at a time, ~37 at 8, ~49 at 16; larger batches gain little more and make each checkpoint
# (and what a kill can lose) coarser.
DEFAULT_BATCH_SIZE = 16
MAX_BATCH_SIZE = 256
#: Environment variable that sets the offline/local model's CPU threads for the app and the CLI's default.
THREADS_ENV = "DPKPS_LLM_THREADS"
MAX_THREADS = 256


#: Threads used without ``$DPKPS_LLM_THREADS``, at most: the app's default path (``benchmarks/app_path.py``, 100 BBC
#: documents, CTranslate2) took 98.9 s with 1 thread and 71.8 s with 2 on an idle 2-core machine (2026-11-24); more
#: than 2 was not measured.
DEFAULT_MAX_THREADS = 2


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one, else the CPU count)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def default_threads(environ: Mapping[str, str] | None = None, *, cpus: int | None = None) -> int:
    """CPU threads of the offline/local model when none is given: ``$DPKPS_LLM_THREADS``, else the usable CPUs up
    to :data:`DEFAULT_MAX_THREADS` (one owner for the app, the CLI and the benchmarks). A value that is not a whole
    number from 1 to 256 is a clear error."""
    raw = (os.environ if environ is None else environ).get(THREADS_ENV, "")
    if not str(raw).strip():
        return max(1, min(DEFAULT_MAX_THREADS, usable_cpus() if cpus is None else int(cpus)))
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_THREADS:
        raise ParameterError(f"{THREADS_ENV}={raw!r}: give a whole number of threads from 1 to {MAX_THREADS}.")
    return value


def server_threads(environ: Mapping[str, str] | None = None, *, cpus: int | None = None) -> int:
    """CPU threads of a local model that a server shares between sessions (the app): ``$DPKPS_LLM_THREADS``, else
    one usable CPU fewer than :func:`default_threads` would take (at least 1), so that the server's event loop,
    which sends every session's pages, keeps a core: a decoding step waits for all its threads, and on 2 cores four
    sessions wrote within 4.6× of one with 1 thread against 6.6× with 2 (docs/BENCHMARKS.md "Several users")."""
    raw = (os.environ if environ is None else environ).get(THREADS_ENV, "")
    if str(raw).strip():
        return default_threads(environ, cpus=cpus)
    n = usable_cpus() if cpus is None else int(cpus)
    return max(1, min(DEFAULT_MAX_THREADS, n - 1))


def stop_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """End-of-text tokens: the tokenizer's EOS, the model's generation EOS ids and ``<|im_end|>`` when known."""
    ids: set[int] = set()
    for v in (getattr(tokenizer, "eos_token_id", None),
              getattr(getattr(model, "generation_config", None), "eos_token_id", None)):
        if isinstance(v, int):
            ids.add(v)
        elif isinstance(v, (list, tuple)):
            ids.update(int(x) for x in v)
    conv = getattr(tokenizer, "convert_tokens_to_ids", None)
    unk = getattr(tokenizer, "unk_token_id", None)
    if conv is not None:
        try:
            t = conv("<|im_end|>")
            if isinstance(t, int) and t != unk:
                ids.add(t)
        except Exception:  # noqa: BLE001 - optional token
            pass
    return ids


def chat_token_ids(tokenizer: Any, messages: ChatMessages) -> list[int]:
    """Prompt token ids with the tokenizer's chat template (plain "role: content" lines when it has none)."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=True)
        ids = out["input_ids"] if hasattr(out, "keys") else out
        if hasattr(ids, "tolist"):  # a tensor or array
            ids = ids.tolist()
        if ids and isinstance(ids[0], list):  # a batch of one
            ids = ids[0]
        return [int(i) for i in ids]
    text = "".join(f"{m['role']}: {m['content']}\n\n" for m in msgs) + "assistant: "
    return list(tokenizer(text, add_special_tokens=True)["input_ids"])


class DecodeEngine(Protocol):
    """What decodes a batch for a local backend (the seam in this module's docstring): the default
    :class:`~dpkps_core.llm.torch_engine.TorchEngine`, or e.g. :class:`dpkps_core.llm.ct2.CT2Engine`."""

    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                     top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                     on_step: Callable[[int, int], None] | None = None, timeout: float | None = None,
                     no_repeat_ngram: int = 0, repetition_penalty: float = 1.0) -> list[list[int]]:
        """The generated ids of each row, up to and including its first stop id."""
        ...

    def describe(self) -> dict[str, Any]:
        """Public description for the audit log."""
        ...


class LocalTransformersBackend(LLMBackend):
    """A causal language model on this machine: batched generation (one decoding call per batch) and real logits.

    ``generate_batch`` writes a batch of prompts in ONE :meth:`decode_batch` call (the same sampling parameters for
    every row, each row stopping at its end-of-text token); the runner feeds it batches. The model runs on the
    resolved ``device`` (:mod:`dpkps_core.device`): float32 on the CPU, bf16/fp16 on CUDA. Subclasses say where the
    weights come from (:meth:`_load_weights`, :meth:`_weights_folder`); ``engine`` replaces the torch decoding.
    """

    max_concurrency = 1
    max_batch_size = MAX_BATCH_SIZE
    latency_s = 0.2
    engine_note: str | None = None  # one line when the engine asked for could not be used (llm/factory.py)
    #: generate_batch takes no_repeat_ngram / repetition_penalty (the runner passes GenerationSettings' values)
    repetition_control = True

    def __init__(self, *, threads: int = 1, top_p: float = 0.95, device: str | None = None,
                 engine: DecodeEngine | None = None) -> None:
        from dpkps_core.device import resolve_device

        if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1 or threads > MAX_THREADS:
            raise ParameterError("The thread count must be an integer from 1 to 256.")
        if not (isinstance(top_p, (int, float)) and 0 < top_p <= 1):
            raise ParameterError("top_p must be in (0, 1].")
        if engine is not None and not callable(getattr(engine, "decode_batch", None)):
            raise ParameterError("The engine must have a decode_batch method (see dpkps_core.llm.local).")
        self.threads = threads
        self.top_p = float(top_p)
        self.device = resolve_device(device)
        self.engine = engine
        self._model: Any = None
        self._tokenizer: Any = None
        self._torch: TorchEngine | None = None
        self._stops: set[int] = set()
        #: the one model is shared by every run on this backend (the app: every session): batches take turns in
        #: order of arrival, and a waiting run can say its place in line (llm/model_queue.py)
        self.model_queue = ModelQueue()
        self.load_seconds: float | None = None
        self.last_tokens = 0
        self.last_seconds = 0.0
        self.tokens_generated = 0
        self.generate_seconds = 0.0

    def describe(self) -> dict[str, Any]:
        out = {"backend": self.name, "model": self.model, "threads": self.threads, "top_p": self.top_p,
               "device": self.device}
        if self.engine is not None:
            out["engine"] = self.engine.describe()
        return out

    @abc.abstractmethod
    def _load_weights(self, dtype: Any) -> tuple[Any, Any]:
        """Return ``(model, tokenizer)`` loaded offline with ``dtype`` (on the CPU)."""

    @abc.abstractmethod
    def _weights_folder(self) -> Path:
        """The Hugging Face folder the weights come from (its generation config gives an engine the stop ids)."""

    def _tokenizer_only(self) -> Any:
        """The tokenizer without the model (for token counts); default: load everything."""
        self.load()
        return self._tokenizer

    def _load_tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = self._tokenizer_only()
        return self._tokenizer

    def load(self) -> None:
        """Load tokenizer and model onto the device (once)."""
        if self._model is not None:
            return
        t0 = time.monotonic()
        set_offline_env()
        import torch

        from dpkps_core.device import model_dtype

        torch.set_num_threads(self.threads)
        model, tok = self._load_weights(model_dtype(self.device))
        if self.device != "cpu":
            try:
                model = model.to(self.device)
            except Exception as exc:  # noqa: BLE001 - e.g. out of GPU memory
                raise LLMError(f"Could not move the model to {self.device} ({type(exc).__name__}); try --device cpu.") from exc
        model.eval()
        if tok.pad_token_id is None:
            if tok.eos_token_id is None:
                raise LLMError(f"The tokenizer of {self.model} has neither a padding nor an end-of-text token.")
            tok.pad_token = tok.eos_token
        self._tokenizer = tok
        self._stops = stop_token_ids(model, tok)
        self._model = model
        self.load_seconds = time.monotonic() - t0

    def prepare(self) -> None:
        """Load what writing needs, once, before the first batch: with an engine, its model (converted once) plus
        the tokenizer and stop ids, never the torch weights; without one, the torch weights (:meth:`load`).
        Private prediction reads logits through :meth:`model_and_tokenizer`, which loads the weights itself."""
        if self.engine is None:
            self.load()
            return
        self._tokenizer_and_stops()
        load = getattr(self.engine, "load", None)
        if callable(load):
            load()

    def model_and_tokenizer(self) -> tuple[Any, Any]:
        """The loaded ``(model, tokenizer)`` on this backend's device (loaded once; the tokenizer has a padding
        token). Private prediction's batched decoder reads the model's logits through this."""
        self.load()
        if self._model is None or self._tokenizer is None:  # pragma: no cover - load() raises instead
            raise LLMError(f"The local model {self.model} did not load.")
        return self._model, self._tokenizer

    def _tokenizer_and_stops(self) -> tuple[Any, list[int]]:
        """The tokenizer and the sorted stop ids decoding needs: with the torch path the loaded model's
        (:func:`stop_token_ids`); with an engine the tokenizer's and the folder's generation config (no weights)."""
        if self.engine is None:
            self.load()
        elif not self._stops:
            set_offline_env()
            tok = self._load_tokenizer()
            try:
                from transformers import GenerationConfig

                config = GenerationConfig.from_pretrained(str(self._weights_folder()), local_files_only=True)
            except (OSError, ValueError):  # no generation_config.json: the tokenizer's ids alone
                config = None
            self._stops = stop_token_ids(SimpleNamespace(generation_config=config), tok)
        return self._load_tokenizer(), sorted(self._stops)

    @property
    def stop_ids(self) -> frozenset[int]:
        """The end-of-text token ids generation stops at (:func:`stop_token_ids`; loads the model for torch)."""
        return frozenset(self._tokenizer_and_stops()[1])

    def count_prompt_tokens(self, messages: ChatMessages) -> int:
        """Exact prompt tokens with the model's chat template."""
        return len(chat_token_ids(self._load_tokenizer(), messages))

    def batch_cost(self, batch_size: int) -> float:
        """Time of one batched decoding step relative to one row alone (for time estimates).

        Measured on 2 CPU cores with SmolLM2-135M (benchmarks/generation.py --sweep): a step over 8 rows costs
        about 2.5 single-row steps, over 16 rows about 4; on a GPU a batch is nearly free."""
        b = max(1, int(batch_size))
        return 1.0 + (0.03 if self.device == "cuda" else 0.2) * (b - 1)

    def generate(self, messages: ChatMessages, *, max_tokens: int, temperature: float, timeout: float) -> str:
        result = self.generate_batch([messages], max_tokens=max_tokens, temperature=temperature, timeout=timeout)[0]
        if isinstance(result, Exception):
            raise result
        return result

    def generate_batch(
        self, batch: Sequence[ChatMessages], *, max_tokens: int, temperature: float, timeout: float,
        cancel: threading.Event | None = None, on_step: Callable[[int, int], None] | None = None,
        no_repeat_ngram: int = DEFAULT_NO_REPEAT_NGRAM, repetition_penalty: float = DEFAULT_REPETITION_PENALTY,
        on_place: Callable[[int], None] | None = None, queue_label: str = "generation",
    ) -> list[str | LLMError]:
        """One reply per prompt from ONE :meth:`decode_batch` call: the text, or a TransientLLMError for an empty
        reply. ``no_repeat_ngram`` / ``repetition_penalty``: repetition control (:mod:`dpkps_core.llm.repetition`;
        the measured defaults unless told).

        ``timeout`` is per prompt, so the batch may take ``timeout × len(batch)`` seconds (as many requests in a
        row would). ``on_step(step, max_tokens)`` is called after every decoding step. Raises
        :class:`~dpkps_core.llm.backends.GenerationCancelled` when ``cancel`` stopped the call (rows incomplete)
        and :class:`LLMError` when the model itself failed.

        The model is shared: the batch waits its turn in :attr:`model_queue` (first come, first served; a set
        ``cancel`` ends the wait), and ``on_place(place)`` hears its place in line while it waits (2 = next, 1 =
        writing now; ``queue_label`` is the public word the line shows for it).
        """
        if not batch:
            return []
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ParameterError("max_tokens must be a positive integer.")
        check_repetition(no_repeat_ngram, repetition_penalty)
        tok, stops = self._tokenizer_and_stops()
        rows = [chat_token_ids(tok, m) for m in batch]
        repetition = repetition_kwargs(no_repeat_ngram, repetition_penalty)  # {} when off
        with self.model_queue.turn(queue_label, cancel=cancel, on_place=on_place):
            t0 = time.monotonic()
            new = self.decode_batch(rows, stops=stops, max_tokens=max_tokens, temperature=temperature,
                                    top_p=self.top_p, cancel=cancel, on_step=on_step, timeout=timeout, **repetition)
            seconds = time.monotonic() - t0
        results: list[str | LLMError] = []
        n_tokens = 0
        stop_set = set(stops)
        for row in new:
            cut = next((i for i, t in enumerate(row) if t in stop_set), len(row))
            n_tokens += cut + (1 if cut < len(row) else 0)  # the end-of-text token was generated too
            text = tok.decode(row[:cut], skip_special_tokens=True).strip()
            results.append(text if text else TransientLLMError(f"The local model {self.model} returned an empty reply."))
        self.last_tokens, self.last_seconds = n_tokens, seconds
        self.tokens_generated += n_tokens
        self.generate_seconds += seconds
        return results

    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                     top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                     on_step: Callable[[int, int], None] | None = None,
                     timeout: float | None = None, no_repeat_ngram: int = 0,
                     repetition_penalty: float = 1.0) -> list[list[int]]:
        """THE decoding seam (module docstring): the generated ids of each row of prompt ids, up to and including
        its first stop id. The injected ``engine`` when there is one, else transformers' ``generate``; repetition
        control reaches the engine only when it is on."""
        engine = self.engine if self.engine is not None else self.torch_engine()
        return engine.decode_batch(rows, stops=stops, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                   seed=seed, cancel=cancel, on_step=on_step, timeout=timeout,
                                   **repetition_kwargs(no_repeat_ngram, repetition_penalty))

    def torch_engine(self) -> TorchEngine:
        """The torch decoding over the loaded model (loads it once), whatever engine is injected."""
        if self._torch is None:
            model, tok = self.model_and_tokenizer()
            self._torch = TorchEngine(model, pad_id=int(tok.pad_token_id), device=self.device, threads=self.threads,
                                      model_name=self.model)
        return self._torch


class OfflineBackend(LocalTransformersBackend):
    """The bundled SmolLM2-135M-Instruct (converted once into the user cache), batched, on the CPU or a GPU."""

    name = "offline"

    def __init__(self, *, threads: int = 1, top_p: float = 0.95, device: str | None = None,
                 engine: DecodeEngine | None = None) -> None:
        super().__init__(threads=threads, top_p=top_p, device=device, engine=engine)
        self.model = OFFLINE_MODEL_NAME
        self.tokens_per_s = 12.0 * min(threads, 2) ** 0.5 if self.device == "cpu" else 60.0

    def _weights_folder(self) -> Path:
        return ensure_offline_model()

    def _tokenizer_only(self) -> Any:
        if not (offline_model_dir() / CONVERTED_MARKER).is_file():
            if self.engine is not None:  # an engine decodes: convert, but do not keep the torch weights
                ensure_offline_model()
            else:
                self.load()  # converts once and keeps model and tokenizer
                return self._tokenizer
        set_offline_env()
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(offline_model_dir()), local_files_only=True)

    def _load_weights(self, dtype: Any) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM

        fresh = convert_offline_model(keep=True)
        if fresh is not None:  # converted just now: use it, no second load
            model, tok = fresh
            return model.to(dtype=dtype), tok
        folder = offline_model_dir()
        try:
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise LLMError(
                f"Could not load the cached offline model ({type(exc).__name__}); delete {folder} to convert it again."
            ) from exc
        return model, self._tokenizer or self._tokenizer_only()


class LocalModelBackend(LocalTransformersBackend):
    """Any Hugging Face causal-LM folder on disk (config.json, weights, tokenizer), loaded offline.

    For organisations with their own approved model files; nothing is downloaded (``local_files_only``)."""

    name = "local"

    def __init__(self, *, model_path: str | os.PathLike[str], threads: int = 1, top_p: float = 0.95,
                 device: str | None = None, engine: DecodeEngine | None = None) -> None:
        if model_path is None or not str(model_path).strip():
            raise ParameterError("Give the folder of the local model (--model-path DIR).")
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise ParameterError(f"The local model folder {path} does not exist.")
        if not (path / "config.json").is_file():
            raise ParameterError(f"{path} is not a Hugging Face model folder (no config.json).")
        super().__init__(threads=threads, top_p=top_p, device=device, engine=engine)
        self.model_path = path.resolve()
        self.model = self.model_path.name
        self.tokens_per_s = 8.0 * min(threads, 2) ** 0.5 if self.device == "cpu" else 40.0

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "model_path": str(self.model_path)}

    def _weights_folder(self) -> Path:
        return self.model_path

    def _tokenizer_only(self) -> Any:
        set_offline_env()
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(str(self.model_path), local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise LLMError(f"Could not load the tokenizer from {self.model_path} ({type(exc).__name__}).") from exc

    def _load_weights(self, dtype: Any) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM

        tok = self._tokenizer or self._tokenizer_only()
        try:
            model = AutoModelForCausalLM.from_pretrained(str(self.model_path), dtype=dtype, local_files_only=True)
        except Exception as exc:  # noqa: BLE001
            raise LLMError(
                f"Could not load a causal language model from {self.model_path} ({type(exc).__name__}); the folder "
                "needs config.json, the weights (safetensors) and the tokenizer files."
            ) from exc
        return model, tok
