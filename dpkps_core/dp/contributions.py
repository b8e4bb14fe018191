"""Bounded per-document contributions shared by the density mechanisms (docs/DESIGN.md §2.2, §6).

Each document is reduced to its keyphrases — its matches of Ṽ in text order, repeats kept, truncated to M —
and gives weight 1/m to each of its m occurrences, so its total weight is exactly 1 (or 0 if it has none).
Summing those weights per class gives the class's keyphrase histogram over Ṽ; its L1 change when one document is
added or removed is at most 1. The RFF DP-KDE sum of per-document mean features equals that histogram times
the feature matrix, which is how it is computed (one GEMM, no loop over documents × features).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def group_weights(counts: np.ndarray, groups: Sequence[str] | None) -> np.ndarray:
    """Per document, the weight that makes each unit's total 1 (docs/DESIGN.md §2, person unit).

    ``counts`` are the documents' numbers of contributions (e.g. keyphrase occurrences, or 1 per qualifying
    document). Without ``groups`` each document is its own unit: weight 1/count (0 for no contribution). With
    ``groups`` (a person per document), every contribution of a person weighs 1/(the person's total), so a
    person's documents together — across classes too — weigh exactly 1, like one document."""
    counts = np.asarray(counts, dtype=np.float64)
    if groups is None:
        return np.divide(1.0, counts, out=np.zeros_like(counts), where=counts > 0)
    _, idx = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
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
    declared = np.fromiter((lab in class_index for lab in labels), dtype=bool, count=len(labels))
    lengths = np.fromiter(
        (min(len(k), max_per_doc) if max_per_doc else len(k) for k in keyphrases), dtype=np.int64, count=len(keyphrases)
    )
    lengths = np.where(declared, lengths, 0)
    if lengths.sum() == 0:
        return np.zeros((len(classes), vocab_size))
    flat = np.concatenate([np.asarray(k[:n], dtype=np.int64) for k, n in zip(keyphrases, lengths) if n > 0])
    doc_class = np.array([class_index.get(lab, -1) for lab in labels], dtype=np.int64)
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
