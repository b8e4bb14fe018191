"""Held-out split of the private corpus (DESIGN §5): the training part is the ONLY part any DP step touches.

The split is stratified by class and seeded (the split is not DP noise; a fixed seed makes evaluations
comparable). An optional *client* part is carved out of the test part for unlabelled domain adaptation
(Deep CORAL) and is never used for evaluation. The split's indices are private and never exported.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Sequence

import numpy as np

from dpkps_core.errors import ParameterError


@dataclasses.dataclass(frozen=True)
class CorpusSplit:
    """Indices into the corpus: ``train`` (feeds the DP mechanisms), ``test`` (evaluation only),
    ``client`` (unlabelled adaptation data, disjoint from ``test``)."""

    train: tuple[int, ...]
    test: tuple[int, ...]
    client: tuple[int, ...] = ()
    test_fraction: float = 0.0
    client_fraction: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        parts = [set(self.train), set(self.test), set(self.client)]
        if parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2]:
            raise ParameterError("The train, test and client parts of a split must be disjoint.")

    def to_dict(self) -> dict[str, object]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict) -> "CorpusSplit":
        return cls(tuple(data["train"]), tuple(data["test"]), tuple(data.get("client", ())),
                   float(data.get("test_fraction", 0)), float(data.get("client_fraction", 0)), int(data.get("seed", 0)))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict()))

    @classmethod
    def load(cls, path: str | Path) -> "CorpusSplit":
        return cls.from_dict(json.loads(Path(path).read_text()))


def split_corpus(
    labels: Sequence[str], *, test_fraction: float = 0.2, client_fraction: float = 0.0, seed: int = 0
) -> CorpusSplit:
    """Stratified split: per class, ``test_fraction`` of documents go to test (at least one when the class has
    two or more), then ``client_fraction`` of the test part becomes the client part."""
    if not 0.0 <= test_fraction < 1.0:
        raise ParameterError(f"The test fraction must be in [0, 1), got {test_fraction!r}.")
    if not 0.0 <= client_fraction < 1.0:
        raise ParameterError(f"The client fraction must be in [0, 1), got {client_fraction!r}.")
    rng = np.random.default_rng(seed)
    labels = np.asarray(labels)
    train, test, client = [], [], []
    for c in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        n_test = int(round(test_fraction * idx.size))
        if test_fraction > 0 and idx.size >= 2:
            n_test = min(max(n_test, 1), idx.size - 1)
        held, kept = idx[:n_test], idx[n_test:]
        n_client = int(round(client_fraction * held.size))
        client.extend(held[:n_client].tolist())
        test.extend(held[n_client:].tolist())
        train.extend(kept.tolist())
    return CorpusSplit(tuple(sorted(train)), tuple(sorted(test)), tuple(sorted(client)),
                       test_fraction, client_fraction, seed)
