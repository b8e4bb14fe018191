"""The default decoding engine of the local backends: transformers' ``generate`` over a loaded causal LM, one
left-padded call per batch (docs/ARCHITECTURE.md, llm/).

:class:`TorchEngine` implements the engine contract of :mod:`dpkps_core.llm.local` (``decode_batch`` and
``describe``), the same one :class:`dpkps_core.llm.ct2.CT2Engine` implements: prompt token ids in, the generated
ids of each row out, up to and including its first stop id. A batch that runs out of memory is written in two
halves (recursively). Prompts never leave the process and nothing is logged but sizes (DESIGN §2.5).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

from dpkps_core.errors import LLMError
from dpkps_core.llm.backends import GenerationCancelled

log = logging.getLogger(__name__)


class TorchEngine:
    """transformers' ``generate`` over ``model`` (already on ``device``): the same sampling parameters for every
    row, each row stopping at its end-of-text token; ``threads`` torch CPU threads; ``model_name`` names the
    model in error messages."""

    name = "torch"

    def __init__(self, model: Any, *, pad_id: int, device: str, threads: int, model_name: str) -> None:
        self.model = model
        self.pad_id = int(pad_id)
        self.device = device
        self.threads = threads
        self.model_name = model_name

    def describe(self) -> dict[str, Any]:
        """Public description (engine, device, threads)."""
        return {"engine": self.name, "device": self.device, "threads": self.threads}

    def decode_batch(self, rows: list[list[int]], *, stops: Sequence[int], max_tokens: int, temperature: float,
                     top_p: float, seed: int | None = None, cancel: threading.Event | None = None,
                     on_step: Callable[[int, int], None] | None = None,
                     timeout: float | None = None) -> list[list[int]]:
        """The generated token ids of each row, up to and including its first stop id (at most ``max_tokens``).

        Sampling at ``temperature`` with ``top_p`` (greedy at 0); ``seed`` seeds torch's generator first;
        ``timeout`` seconds per row bound the whole call (``max_time``); ``on_step(step, max_tokens)`` after each
        decoding step; ``cancel`` stops every row and raises GenerationCancelled; any other failure is an
        LLMError naming the model."""
        import torch

        if not rows:
            return []
        torch.set_num_threads(self.threads)
        if seed is not None:
            torch.manual_seed(int(seed))
        stop_set = {int(s) for s in stops}
        out = self._decode(rows, stops=sorted(stop_set), max_tokens=max_tokens, temperature=temperature,
                           top_p=top_p, timeout=timeout, cancel=cancel, on_step=on_step)
        return [_through_first_stop(row, stop_set) for row in out]

    def _decode(self, rows: list[list[int]], *, stops: list[int], max_tokens: int, temperature: float, top_p: float,
                timeout: float | None, cancel: threading.Event | None,
                on_step: Callable[[int, int], None] | None) -> list[list[int]]:
        """New token ids per row (padding included); when memory runs out, the batch in two halves (recursively)."""
        try:
            return self._generate_once(rows, stops=stops, max_tokens=max_tokens, temperature=temperature,
                                       top_p=top_p, timeout=timeout, cancel=cancel, on_step=on_step)
        except GenerationCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - turned into one user-facing sentence below
            if out_of_memory(exc) and len(rows) > 1:
                free_memory(self.device)
                half = len(rows) // 2
                log.warning("Out of memory for a batch of %d on %s: writing it in two halves", len(rows), self.device)
                kw: dict[str, Any] = dict(stops=stops, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                          timeout=timeout, cancel=cancel, on_step=on_step)
                return self._decode(rows[:half], **kw) + self._decode(rows[half:], **kw)
            hint = "; lower the batch size" if out_of_memory(exc) else ""
            raise LLMError(f"The local model {self.model_name} failed ({type(exc).__name__}){hint}.") from exc

    def _generate_once(self, rows: list[list[int]], *, stops: list[int], max_tokens: int, temperature: float,
                       top_p: float, timeout: float | None, cancel: threading.Event | None,
                       on_step: Callable[[int, int], None] | None) -> list[list[int]]:
        """ONE left-padded ``generate`` call over ``rows``; the new token ids of each row (padding included)."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList

        model, pad = self.model, self.pad_id
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):  # left padding: every prompt ends at the same column
            ids[j, width - len(r):] = torch.tensor(r, dtype=torch.long)
            mask[j, width - len(r):] = 1
        kwargs: dict[str, Any] = {"max_new_tokens": int(max_tokens), "pad_token_id": pad,
                                  "eos_token_id": stops or None}
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=float(temperature), top_p=float(top_p))
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        if timeout and timeout > 0:
            kwargs["max_time"] = float(timeout) * len(rows)
        stopped = {"cancel": False}
        if cancel is not None or on_step is not None:
            class _Watch(StoppingCriteria):
                """Reports each decoding step and stops every row when the run is cancelled."""

                def __call__(self, input_ids: Any, scores: Any, **kw: Any) -> Any:
                    if on_step is not None:
                        try:
                            on_step(int(input_ids.shape[1]) - width, int(max_tokens))
                        except Exception:  # noqa: BLE001 - a progress callback must not break generation
                            log.debug("on_step callback failed", exc_info=True)
                    hit = cancel is not None and cancel.is_set()
                    stopped["cancel"] = stopped["cancel"] or hit
                    return torch.full((input_ids.shape[0],), hit, dtype=torch.bool, device=input_ids.device)

            kwargs["stopping_criteria"] = StoppingCriteriaList([_Watch()])
        with torch.inference_mode():
            out = model.generate(input_ids=ids.to(model.device), attention_mask=mask.to(model.device), **kwargs)
        if stopped["cancel"]:
            raise GenerationCancelled("Generation was cancelled.")
        return out[:, width:].tolist()


def _through_first_stop(row: list[int], stops: set[int]) -> list[int]:
    """``row`` up to and including its first stop id (the padding after it dropped)."""
    cut = next((i for i, t in enumerate(row) if t in stops), None)
    return row if cut is None else row[: cut + 1]


def out_of_memory(exc: BaseException) -> bool:
    """Whether an exception means the device (GPU or CPU) ran out of memory."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, getattr(torch, "OutOfMemoryError", ())):
            return True
    except ImportError:  # pragma: no cover
        pass
    return "out of memory" in str(exc).lower()


def free_memory(device: str) -> None:
    """Collect garbage and empty the CUDA cache (before a batch is retried in halves)."""
    import gc

    gc.collect()
    if device == "cuda":
        try:
            import torch

            torch.cuda.empty_cache()
        except Exception:  # noqa: BLE001
            pass
