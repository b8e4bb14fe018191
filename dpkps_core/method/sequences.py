"""The keyphrase sequence: what the DP sampler releases and the LLM step reads (one line of ``sequences.jsonl``)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from dpkps_core.errors import ParameterError


@dataclasses.dataclass(frozen=True)
class KeyphraseSequence:
    """One DP keyphrase sequence (a line of ``sequences.jsonl``)."""

    id: str
    label: str
    keyphrases: tuple[str, ...]
    method: str = ""

    @classmethod
    def from_mapping(cls, obj: Mapping[str, Any], *, where: str = "sequence") -> "KeyphraseSequence":
        """Validate one ``sequences.jsonl`` object."""
        if not isinstance(obj, Mapping):
            raise ParameterError(f"{where} is not a JSON object.")
        sid, label, kps = obj.get("id"), obj.get("label", ""), obj.get("keyphrases")
        if not isinstance(sid, str) or not sid:
            raise ParameterError(f"{where} has no string 'id'.")
        if not isinstance(kps, (list, tuple)) or not all(isinstance(k, str) for k in kps):
            raise ParameterError(f"{where} needs 'keyphrases' as a list of strings.")
        if label is None:
            label = ""
        return cls(id=sid, label=str(label), keyphrases=tuple(kps), method=str(obj.get("method", "") or ""))

    def to_dict(self) -> dict[str, Any]:
        """The ``sequences.jsonl`` form."""
        return {"id": self.id, "label": self.label, "keyphrases": list(self.keyphrases), "method": self.method}
