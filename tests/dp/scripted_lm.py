"""A scripted causal LM for testing private prediction's token step ([PrivPred] Algorithm 1) in milliseconds.

Every prompt is one "kind" (the number after ``ROW`` in its last message; the public prompt, which holds no
``ROW`` marker, is kind 1). The model returns, for a row of kind k at decoding step t (tokens appended since the
prompt), the logits ``script[k][min(t, last)]`` — so a test decides exactly what each private prompt and the
public prompt predict at every step, and therefore the exact SVT distances and clipped means of Algorithm 1.
It follows the forward/KV-cache protocol of :class:`dpkps_core.llm.decoder.BatchedDecoder`.
"""

from __future__ import annotations

import re
import types
from typing import Any, Mapping, Sequence

import torch

PUBLIC_KIND = 1
_ROW = re.compile(r"ROW(\d+)")


class _Cache:
    """Remembers each row's kind and the decoding step; ``crop`` (a new example) goes back to step 0."""

    def __init__(self, kinds: list[int]) -> None:
        self.kinds = kinds
        self.step = 0

    def crop(self, n: int) -> None:
        self.step = 0


class ScriptedLM:
    """``script``: kind → (steps, V) float tensor of next-token logits."""

    device = torch.device("cpu")

    def __init__(self, script: Mapping[int, torch.Tensor]) -> None:
        self.script = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in script.items()}

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, past_key_values: Any = None,
                use_cache: bool = True) -> Any:
        if past_key_values is None:  # prefill: the last (left-padded) position holds the prompt's kind
            cache = _Cache([int(k) for k in input_ids[:, -1].tolist()])
        else:
            cache = past_key_values
            cache.step += 1
        rows = []
        for kind in cache.kinds:
            table = self.script[kind]
            rows.append(table[min(cache.step, table.shape[0] - 1)])
        logits = torch.stack(rows)[:, None, :].repeat(1, input_ids.shape[1], 1)
        return types.SimpleNamespace(logits=logits, past_key_values=cache)

    __call__ = forward


class ScriptedTokenizer:
    """Each prompt is one token: its kind. Generated tokens decode to their ids separated by spaces."""

    pad_token_id = 0
    eos_token_id = None
    chat_template = "scripted"

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]], **_: Any) -> dict[str, list[int]]:
        m = _ROW.search(messages[-1]["content"])
        return {"input_ids": [int(m.group(1)) if m else PUBLIC_KIND]}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [int(m) for m in _ROW.findall(text)] or [PUBLIC_KIND]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return " ".join(str(int(i)) for i in ids)


def prompt(kind: int) -> list[dict[str, str]]:
    """The chat messages of a private prompt of ``kind`` (≥ 2)."""
    return [{"role": "user", "content": f"ROW{kind}"}]


PUBLIC_PROMPT = [{"role": "user", "content": "public"}]


def tokens(text: str) -> list[int]:
    """The token ids of a generated text (inverse of :meth:`ScriptedTokenizer.decode`)."""
    return [int(t) for t in text.split()]
