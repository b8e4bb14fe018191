"""Lock-step batched decoding with a KV cache over any local causal LM (transformers-style forward): the
decoder private prediction's Algorithm 1 drives ([PrivPred] §3), where every row of a batch receives the SAME next
token and the caller needs the (rows, V) next-token logits at every step.

The model comes from :meth:`dpkps_core.llm.local.LocalTransformersBackend.model_and_tokenizer` (or a test fake);
tensors follow the model's device (CPU, or CUDA under the ``device`` setting).
"""

from __future__ import annotations

import inspect
from typing import Any, Sequence

from dpkps_core.errors import ParameterError


def _model_device(model: Any) -> Any:
    """The device of a model's weights (CPU for models without parameters, e.g. test fakes)."""
    import torch

    dev = getattr(model, "device", None)
    if isinstance(dev, torch.device):
        return dev
    try:
        return next(model.parameters()).device
    except (AttributeError, StopIteration, TypeError):
        return torch.device("cpu")


class BatchedDecoder:
    """Left-padded prompts decoded in lock-step with a KV cache: every row receives the same next token.

    ``logits()`` gives the (rows, V) next-token logits; ``append(token)`` feeds one token to every row (one
    forward pass per chunk of ``rows_per_forward`` rows); ``reset()`` crops the cache back to the prompts (or
    recomputes them when the cache cannot be cropped)."""

    def __init__(self, model: Any, prompts: Sequence[Sequence[int]], *, pad_id: int, rows_per_forward: int = 64) -> None:
        import torch

        if not prompts:
            raise ParameterError("The decoder needs at least one prompt.")
        self.model = model
        self.pad_id = int(pad_id)
        self.prompts = [list(p) for p in prompts]
        self.rows_per_forward = int(rows_per_forward)
        self.prompt_tokens = sum(len(p) for p in self.prompts)
        self.forward_passes = 0
        self.rows_decoded = 0
        try:
            params = inspect.signature(model.forward).parameters
        except (TypeError, ValueError, AttributeError):
            params = {}
        self._keep = "logits_to_keep" in params
        self._chunks = [list(range(i, min(i + self.rows_per_forward, len(prompts))))
                        for i in range(0, len(prompts), self.rows_per_forward)]
        self._torch = torch
        self.device = _model_device(model)  # tensors follow the model (cpu or cuda, from the device setting)
        self._prefill()

    def _prefill(self) -> None:
        torch = self._torch
        self._state = []
        last = []
        for rows in self._chunks:
            width = max(len(self.prompts[r]) for r in rows)
            ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for j, r in enumerate(rows):
                p = self.prompts[r]
                if p:
                    ids[j, width - len(p):] = torch.tensor(p, dtype=torch.long)
                    mask[j, width - len(p):] = 1
            ids, mask = ids.to(self.device), mask.to(self.device)
            pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
            out = self._forward(ids, mask, pos, None)
            self._state.append({"mask": mask, "pos": pos[:, -1:].clone(), "prompt_pos": pos[:, -1:].clone(),
                                "cache": out.past_key_values, "width": width})
            last.append(out.logits[:, -1, :].float())
        self._logits = self._prompt_logits = torch.cat(last, dim=0)

    def _forward(self, ids: Any, mask: Any, pos: Any, cache: Any) -> Any:
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "position_ids": pos,
                                  "past_key_values": cache, "use_cache": True}
        if self._keep:
            kwargs["logits_to_keep"] = 1
        with self._torch.inference_mode():
            out = self.model(**kwargs)
        self.forward_passes += 1
        return out

    def logits(self) -> Any:
        return self._logits

    def append(self, token: int) -> None:
        torch = self._torch
        last = []
        for st in self._state:
            n = st["mask"].shape[0]
            st["mask"] = torch.cat([st["mask"], torch.ones((n, 1), dtype=torch.long, device=self.device)], dim=1)
            st["pos"] = st["pos"] + 1
            ids = torch.full((n, 1), int(token), dtype=torch.long, device=self.device)
            out = self._forward(ids, st["mask"], st["pos"], st["cache"])
            st["cache"] = out.past_key_values
            last.append(out.logits[:, -1, :].float())
            self.rows_decoded += n
        self._logits = torch.cat(last, dim=0)

    def reset(self) -> None:
        """Back to the end of the prompts (start of a new example): crop every cache to the prompt width and
        restore the prompt logits; recompute the prompts when a cache cannot be cropped."""
        if not all(hasattr(st["cache"], "crop") for st in self._state):
            self._prefill()
            return
        for st in self._state:
            st["cache"].crop(st["width"])
            st["mask"] = st["mask"][:, : st["width"]]
            st["pos"] = st["prompt_pos"].clone()
        self._logits = self._prompt_logits
