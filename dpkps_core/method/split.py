"""Held-out split of the private corpus (docs/DESIGN.md §5): the training part is the ONLY part any DP step touches.

Every document is assigned by a keyed hash of its own text and the public split seed, independently of all
other documents, so adding or removing one document changes the training part by that document only
(docs/DESIGN.md §2; the split is not DP noise, and a fixed seed makes evaluations comparable). An optional *client*
part is carved out of the held-out range for unlabelled domain adaptation (Deep CORAL) and is never used for
evaluation. The split's indices are private and never exported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from dpkps_core.errors import ParameterError

if TYPE_CHECKING:  # pragma: no cover
    from dpkps_core.corpus import Corpus


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
    texts: Sequence[str], *, test_fraction: float = 0.2, client_fraction: float = 0.0, seed: int = 0,
    groups: Sequence[str] | None = None,
) -> CorpusSplit:
    """Assign every document to train / test / client on its own (docs/DESIGN.md §2).

    Each document's part depends only on a keyed hash of its own text (with ``groups``, e.g. a person
    identifier per document, of the smallest text of its group, so that all documents of one group land
    together and a group of one document lands where the document would alone) and the public ``seed``: it is
    uniform in [0, 1) and compared with the fractions — below ``test_fraction`` the document is held out,
    and the first ``client_fraction`` of that range is the client part. Adding or removing one document (or
    one group) therefore changes the training part by exactly that document (group) and moves no other,
    which the DP steps downstream rely on. Stratification by class is only approximate: each class's test
    share is ``test_fraction`` in expectation (binomial), and a class with very few documents may end up with
    none in one part.
    """
    check_fractions(test_fraction, client_fraction)
    if isinstance(texts, str):
        raise ParameterError("split_corpus needs the documents' texts, not one string.")
    keys = [str(t) for t in texts]
    if groups is not None:
        groups = [str(g) for g in groups]
        if len(groups) != len(keys):
            raise ParameterError("split_corpus needs one group per document.")
        # a group (a person) is placed by its own documents only: the smallest of its texts is its key, so a
        # group of one document lands exactly where it would without groups
        smallest: dict[str, str] = {}
        for g, t in zip(groups, keys):
            if g not in smallest or t < smallest[g]:
                smallest[g] = t
        keys = [smallest[g] for g in groups]
    return split_from_positions(split_positions(keys, seed=seed), test_fraction=test_fraction,
                                client_fraction=client_fraction, seed=seed)


def check_fractions(test_fraction: float, client_fraction: float) -> None:
    """Refuse fractions outside [0, 1) (public input: nothing has been read)."""
    if not 0.0 <= test_fraction < 1.0:
        raise ParameterError(f"The test fraction must be in [0, 1), got {test_fraction!r}.")
    if not 0.0 <= client_fraction < 1.0:
        raise ParameterError(f"The client fraction must be in [0, 1), got {client_fraction!r}.")


def split_from_positions(u: np.ndarray, *, test_fraction: float, client_fraction: float, seed: int) -> CorpusSplit:
    """The split of documents whose keyed positions (:func:`split_positions`, one per document) are ``u``: below
    ``test_fraction`` held out, the first ``client_fraction`` of that range the client part (docs/DESIGN.md §5).
    :func:`split_corpus` and the streamed corpus (:mod:`dpkps_core.method.training_source`) both end here, so a file read
    in chunks is split exactly as the same file loaded whole."""
    check_fractions(test_fraction, client_fraction)
    u = np.asarray(u, dtype=np.float64)
    held = u < test_fraction
    client = held & (u < test_fraction * client_fraction)
    test = held & ~client
    return CorpusSplit(tuple(np.flatnonzero(~held).tolist()), tuple(np.flatnonzero(test).tolist()),
                       tuple(np.flatnonzero(client).tolist()), test_fraction, client_fraction, seed)


def split_positions(keys: Sequence[str], *, seed: int = 0) -> np.ndarray:
    """Per key, a position in [0, 1) from HMAC-SHA256(key = split seed, message = the key's UTF-8 bytes).

    Deterministic, independent across keys and uniform for distinct keys; never stored or exported."""
    secret = f"dpkps-split/{int(seed)}".encode()
    out = np.empty(len(keys), dtype=np.float64)
    for i, key in enumerate(keys):
        digest = hmac.new(secret, str(key).encode("utf-8"), hashlib.sha256).digest()
        out[i] = int.from_bytes(digest[:8], "big") / 2.0**64
    return out


def split_documents(corpus: "Corpus", *, test_fraction: float = 0.2, client_fraction: float = 0.0, seed: int = 0,
                    by_person: bool = False) -> CorpusSplit:
    """The split of a corpus, as every consumer takes it (pipeline, evaluation, sweep, compare, audit, the app):
    per document, or — ``by_person`` with a person column loaded — whole persons together (docs/DESIGN.md §2, person unit)."""
    groups = None
    if by_person:
        if corpus.persons is None:
            raise ParameterError("The unit of privacy is a person, but the corpus has no person column loaded.")
        groups = corpus.persons
    return split_corpus(corpus.texts, test_fraction=test_fraction, client_fraction=client_fraction, seed=seed,
                        groups=groups)
