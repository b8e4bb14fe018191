"""The default decoding engine of the local backends: transformers' ``generate`` over a loaded causal LM, one
left-padded call per batch (docs/ARCHITECTURE.md, llm/).

:class:`TorchEngine` implements the engine contract of :mod:`dpkps_core.llm.local` (``decode_batch`` and
``describe``), the same one :class:`dpkps_core.llm.ct2.CT2Engine` implements: prompt token ids in, the generated
ids of each row out, up to and including its first stop id. A batch that runs out of memory is written in two
halves (recursively). Prompts never leave the process and nothing is logged but sizes (docs/DESIGN.md §2.5).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Sequence

from dpkps_core.errors import LLMError
from dpkps_core.llm.backends import GenerationCancelled
from dpkps_core.llm.repetition import check_repetition

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
                     timeout: float | None = None, no_repeat_ngram: int = 0,
                     repetition_penalty: float = 1.0) -> list[list[int]]:
        """The generated token ids of each row, up to and including its first stop id (at most ``max_tokens``).

        Sampling at ``temperature`` with ``top_p`` (greedy at 0); ``seed`` seeds torch's generator first;
        ``timeout`` seconds per row bound the whole call (``max_time``); ``on_step(step, max_tokens)`` after each
        decoding step; ``cancel`` stops every row and raises GenerationCancelled; any other failure is an
        LLMError naming the model. ``no_repeat_ngram`` / ``repetition_penalty``: repetition control with
        CTranslate2's meaning (:mod:`dpkps_core.llm.repetition`: the generated tokens only, never the prompt —
        transformers' own options of those names would count the prompt's keyphrases too)."""
        import torch

        check_repetition(no_repeat_ngram, repetition_penalty)
        if not rows:
            return []
        torch.set_num_threads(self.threads)
        if seed is not None:
            torch.manual_seed(int(seed))
        stop_set = {int(s) for s in stops}
        out = self._decode(rows, stops=sorted(stop_set), max_tokens=max_tokens, temperature=temperature,
                           top_p=top_p, timeout=timeout, cancel=cancel, on_step=on_step,
                           repetition=(int(no_repeat_ngram), float(repetition_penalty)))
        return [_through_first_stop(row, stop_set) for row in out]

    def _decode(self, rows: list[list[int]], *, stops: list[int], max_tokens: int, temperature: float, top_p: float,
                timeout: float | None, cancel: threading.Event | None,
                on_step: Callable[[int, int], None] | None,
                repetition: tuple[int, float] = (0, 1.0)) -> list[list[int]]:
        """New token ids per row (padding included); when memory runs out, the batch in two halves (recursively)."""
        try:
            return self._generate_once(rows, stops=stops, max_tokens=max_tokens, temperature=temperature,
                                       top_p=top_p, timeout=timeout, cancel=cancel, on_step=on_step,
                                       repetition=repetition)
        except GenerationCancelled:
            raise
        except Exception as exc:  # noqa: BLE001 - turned into one user-facing sentence below
            if out_of_memory(exc) and len(rows) > 1:
                free_memory(self.device)
                half = len(rows) // 2
                log.warning("Out of memory for a batch of %d on %s: writing it in two halves", len(rows), self.device)
                kw: dict[str, Any] = dict(stops=stops, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                          timeout=timeout, cancel=cancel, on_step=on_step, repetition=repetition)
                return self._decode(rows[:half], **kw) + self._decode(rows[half:], **kw)
            hint = "; lower the batch size" if out_of_memory(exc) else ""
            raise LLMError(f"The local model {self.model_name} failed ({type(exc).__name__}){hint}.") from exc

    def _generate_once(self, rows: list[list[int]], *, stops: list[int], max_tokens: int, temperature: float,
                       top_p: float, timeout: float | None, cancel: threading.Event | None,
                       on_step: Callable[[int, int], None] | None,
                       repetition: tuple[int, float] = (0, 1.0)) -> list[list[int]]:
        """ONE left-padded ``generate`` call over ``rows``; the new token ids of each row (padding included)."""
        import torch
        from transformers import LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

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
        processors = repetition_processors(width, *repetition)
        if processors:  # merged before the temperature / top-k / top-p warpers, as CTranslate2 orders them
            kwargs["logits_processor"] = LogitsProcessorList(processors)
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


class GeneratedNoRepeatNGram:
    """A logits processor: no n-gram of ``n`` tokens twice among the tokens generated after column ``start``
    (the prompt, left-padded to end at ``start``, is not looked at; CTranslate2's ``no_repeat_ngram_size``)."""

    def __init__(self, n: int, start: int) -> None:
        self.n, self.start = int(n), int(start)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        gen = input_ids[:, self.start:]
        n = self.n
        if gen.shape[1] < n:  # fewer generated tokens than one n-gram: nothing can repeat yet
            return scores
        windows = gen.unfold(1, n, 1)  # (rows, generated - n + 1, n): every n-gram so far
        last = gen[:, gen.shape[1] - n + 1:]  # the n - 1 tokens an n-gram written now would start with
        hit = (windows[:, :, : n - 1] == last[:, None, :]).all(dim=-1)
        rows, at = hit.nonzero(as_tuple=True)
        scores[rows, windows[rows, at, n - 1]] = float("-inf")
        return scores


class GeneratedRepetitionPenalty:
    """A logits processor: CTRL's repetition penalty (Keskar et al. 2019, §4.1) on every token generated after
    column ``start`` — positive logits divided by ``penalty``, negative ones multiplied — once per distinct token,
    the prompt not counted (CTranslate2's ``repetition_penalty``)."""

    def __init__(self, penalty: float, start: int) -> None:
        self.penalty, self.start = float(penalty), int(start)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        gen = input_ids[:, self.start:]
        if gen.shape[1] == 0:
            return scores
        seen = scores.gather(1, gen)
        return scores.scatter(1, gen, torch.where(seen < 0, seen * self.penalty, seen / self.penalty))


def repetition_processors(start: int, no_repeat_ngram: int, repetition_penalty: float) -> list[Any]:
    """The logits processors of a repetition setting for prompts that end at column ``start`` (none when off)."""
    out: list[Any] = []
    if repetition_penalty != 1.0:
        out.append(GeneratedRepetitionPenalty(repetition_penalty, start))
    if no_repeat_ngram > 0:
        out.append(GeneratedNoRepeatNGram(no_repeat_ngram, start))
    return out


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
