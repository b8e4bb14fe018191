"""Bounded per-document contributions shared by the density mechanisms (docs/DESIGN.md §2.2, §6).

Each document is reduced to its keyphrases — its matches of Ṽ in text order, repeats kept, truncated to M —
and gives weight 1/m to each of its m occurrences, so its total weight is exactly 1 (or 0 if it has none).
Summing those weights per class gives the class's keyphrase histogram over Ṽ; its L1 change when one document is
added or removed is at most 1. The RFF DP-KDE sum of per-document mean features equals that histogram times
the feature matrix, which is how it is computed (one GEMM, no loop over documents × features).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Sequence, overload

import numpy as np


class Keyphrases(Sequence[list[int]]):
    """Each document's keyphrases (indices into Ṽ, text order, repeats kept) held compactly: one flat int32
    array and one length per document (PRIVATE, in memory only; docs/DESIGN.md §2.2; issue 31).

    A list of per-document lists costs ~100 bytes per document plus 8 per index; this costs 4 bytes per document
    and 4 per index, so the keyphrases of millions of documents fit in memory. It reads as a sequence of lists
    (``kps[i]`` is a list of ints), so every consumer of ``list[list[int]]`` takes it unchanged, and
    :func:`class_keyphrase_histograms` reads its arrays directly (vectorised, the same sums in the same order)."""

    __slots__ = ("lengths", "flat", "_starts")

    def __init__(self, lengths: np.ndarray, flat: np.ndarray) -> None:
        self.lengths = np.ascontiguousarray(lengths, dtype=np.int32)
        self.flat = np.ascontiguousarray(flat, dtype=np.int32)
        if self.lengths.ndim != 1 or self.flat.ndim != 1 or int(self.lengths.sum(dtype=np.int64)) != len(self.flat) \
                or (self.lengths < 0).any():
            raise ValueError("Keyphrases needs one non-negative length per document summing to the flat ids.")
        self._starts = np.concatenate(([0], np.cumsum(self.lengths, dtype=np.int64)))

    @classmethod
    def from_lists(cls, lists: Iterable[Sequence[int]]) -> "Keyphrases":
        """From per-document lists of indices."""
        lists = list(lists)
        lengths = np.fromiter((len(k) for k in lists), dtype=np.int32, count=len(lists))
        flat = np.fromiter((t for k in lists for t in k), dtype=np.int32, count=int(lengths.sum(dtype=np.int64)))
        return cls(lengths, flat)

    @classmethod
    def concat(cls, parts: Sequence["Keyphrases"]) -> "Keyphrases":
        """The documents of ``parts``, one after the other (a pass's chunks, in chunk order)."""
        if not parts:
            return cls(np.zeros(0, np.int32), np.zeros(0, np.int32))
        return cls(np.concatenate([p.lengths for p in parts]), np.concatenate([p.flat for p in parts]))

    def take(self, index: np.ndarray) -> "Keyphrases":
        """The documents at the positions ``index`` (a boolean mask or positions), in that order."""
        index = np.asarray(index)
        if index.dtype == bool:
            index = np.flatnonzero(index)
        lengths = self.lengths[index]
        starts = np.repeat(self._starts[:-1][index], lengths)
        within = np.arange(int(lengths.sum(dtype=np.int64))) - np.repeat(
            np.cumsum(lengths, dtype=np.int64) - lengths, lengths)
        return Keyphrases(lengths, self.flat[starts + within])

    def truncated(self, max_per_doc: int | None) -> "Keyphrases":
        """Each document's first ``max_per_doc`` keyphrases (all for None)."""
        if not max_per_doc:
            return self
        cut = np.minimum(self.lengths, max_per_doc)
        return Keyphrases(cut, self.flat[_first_n_mask(self.lengths, cut)])

    def __len__(self) -> int:
        return len(self.lengths)

    @overload
    def __getitem__(self, i: int) -> list[int]: ...

    @overload
    def __getitem__(self, i: slice) -> "Keyphrases": ...

    def __getitem__(self, i: int | slice) -> "list[int] | Keyphrases":
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        n = len(self)
        if not -n <= i < n:
            raise IndexError("Keyphrases index out of range")
        i %= n
        return self.flat[self._starts[i]:self._starts[i + 1]].tolist()

    def __iter__(self) -> Iterator[list[int]]:
        flat, starts = self.flat, self._starts
        for i in range(len(self)):
            yield flat[starts[i]:starts[i + 1]].tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Keyphrases):
            return np.array_equal(self.lengths, other.lengths) and np.array_equal(self.flat, other.flat)
        if isinstance(other, (list, tuple)):
            return len(other) == len(self) and all(list(a) == b for a, b in zip(other, self))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:  # counts only
        return f"Keyphrases(documents={len(self)}, occurrences={len(self.flat)})"


def _first_n_mask(lengths: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Over the flat ids of documents of ``lengths``: True for each document's first ``keep`` ids."""
    lengths = np.asarray(lengths, dtype=np.int64)
    within = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return within < np.repeat(np.asarray(keep, dtype=np.int64), lengths)


def group_weights(counts: np.ndarray, groups: Sequence[str] | None) -> np.ndarray:
    """Per document, the weight that makes each unit's total 1 (docs/DESIGN.md §2, person unit).

    ``counts`` are the documents' numbers of contributions (e.g. keyphrase occurrences, or 1 per qualifying
    document). ``groups``: person ids, or integer person codes (equal codes = one person). Without ``groups`` each
    document is its own unit: weight 1/count (0 for no contribution). With ``groups`` (a person per document), every
    contribution of a person weighs 1/(the person's total), so a person's documents together — across classes too —
    weigh exactly 1, like one document."""
    counts = np.asarray(counts, dtype=np.float64)
    if groups is None:
        return np.divide(1.0, counts, out=np.zeros_like(counts), where=counts > 0)
    if isinstance(groups, np.ndarray) and groups.dtype.kind in "iu":  # persons as integer codes (streamed corpus)
        _, idx = np.unique(groups, return_inverse=True)
    else:
        _, idx = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    idx = idx.reshape(-1)
    totals = np.bincount(idx, weights=counts)
    per_doc = totals[idx]
    return np.divide(1.0, per_doc, out=np.zeros_like(per_doc), where=(per_doc > 0) & (counts > 0))


def class_keyphrase_histograms(
    keyphrases: Sequence[Sequence[int]], labels: Sequence[str], classes: Sequence[str], vocab_size: int,
    *, max_per_doc: int | None = None, groups: Sequence[str] | None = None,
) -> np.ndarray:
    """(C, |Ṽ|) array: for each class, Σ over its documents of 1/m per keyphrase occurrence.

    With ``groups`` (one person per document) each occurrence weighs 1/(the person's total number of
    occurrences over all their documents), so a person's total weight over ALL classes is 1: the L1 change of
    the stacked histograms when one person is added or removed is at most 1 (docs/DESIGN.md §2, person unit).

    ``classes`` is the declared public class list: documents whose label is not in it contribute nothing, and a
    declared class without documents gets a zero row (its release is then noise only), so the output shape
    never depends on the private labels (docs/DESIGN.md §2). Documents without keyphrases contribute nothing.
    Vectorised with one ``bincount``.
    """
    class_index = {c: i for i, c in enumerate(classes)}
    doc_class = np.fromiter((class_index.get(lab, -1) for lab in labels), dtype=np.int64, count=len(labels))
    declared = doc_class >= 0
    if isinstance(keyphrases, Keyphrases):  # the compact form: the same ids in the same order, vectorised
        full = keyphrases.lengths.astype(np.int64)
        lengths = np.minimum(full, max_per_doc) if max_per_doc else full
        lengths = np.where(declared, lengths, 0)
        if lengths.sum() == 0:
            return np.zeros((len(classes), vocab_size))
        flat = keyphrases.flat[_first_n_mask(full, lengths)].astype(np.int64)
    else:
        lengths = np.fromiter((min(len(k), max_per_doc) if max_per_doc else len(k) for k in keyphrases),
                              dtype=np.int64, count=len(keyphrases))
        lengths = np.where(declared, lengths, 0)
        if lengths.sum() == 0:
            return np.zeros((len(classes), vocab_size))
        flat = np.concatenate([np.asarray(k[:n], dtype=np.int64) for k, n in zip(keyphrases, lengths) if n > 0])
    keep = lengths > 0
    occ_class = np.repeat(doc_class[keep], lengths[keep])
    doc_weight = group_weights(lengths, groups)  # 1/m per document, or 1/(person's total m)
    occ_weight = np.repeat(doc_weight[keep], lengths[keep])
    hist = np.bincount(occ_class * vocab_size + flat, weights=occ_weight, minlength=len(classes) * vocab_size)
    return hist.reshape(len(classes), vocab_size)


def prefix_weights(
    keyphrases: Sequence[Sequence[int]], labels: Sequence[str], classes: Sequence[str], blocks: int,
    groups: Sequence[str] | None = None,
) -> np.ndarray:
    """Per document, its weight in the ensemble member of ``blocks`` blocks: 1 for each document of a declared
    class with at least ``blocks`` keyphrases (0 otherwise); with ``groups``, 1/(the person's number of such
    documents), so a person's documents together contribute one bounded vector (docs/DESIGN.md §2, person unit)."""
    declared = set(classes)
    qualifies = np.fromiter((lab in declared and len(k) >= blocks for k, lab in zip(keyphrases, labels)),
                            dtype=np.float64, count=len(labels))
    if groups is None:
        return qualifies
    return group_weights(qualifies, groups)


def prefix_matrix(
    keyphrases: Sequence[Sequence[int]], labels: Sequence[str], class_name: str, blocks: int
) -> np.ndarray:
    """(n_c', blocks) int array: the first ``blocks`` keyphrases of each document of ``class_name`` that has at
    least that many (shorter documents are left out of that ensemble member, docs/DESIGN.md §2.4)."""
    rows = [k[:blocks] for k, lab in zip(keyphrases, labels) if lab == class_name and len(k) >= blocks]
    if not rows:
        return np.zeros((0, blocks), dtype=np.int64)
    return np.asarray(rows, dtype=np.int64)
