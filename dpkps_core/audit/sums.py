"""The neighbours' statistics as D's statistic minus or plus the changed units' contributions (issue 31 §4).

Every statistic the audited mechanisms release is a SUM over the units of the training part (docs/DESIGN.md §2,
§2.2): the vocabulary histogram Σ_units (each unit's first S distinct terms of V), the per-class keyphrase histograms
Σ_units (each occurrence's weight 1/m, or 1/(the person's total) under the person unit), and each document's
keyphrases depend on its own text only. So a neighbour D' of D (a unit removed, a canary unit added) has

    statistic(D') = statistic(D) − contribution(D's documents of the changed units)
                                 + contribution(D''s documents of the changed units),

each contribution computed by the release path's own function (:func:`dpkps_core.method.pipeline.term_counts`,
:func:`dpkps_core.audit.neighbours.density_contributions` over
:func:`~dpkps_core.dp.contributions.class_keyphrase_histograms`, :func:`dpkps_core.method.pipeline.extract_keyphrases`) on
those few documents, never a copy of it. The audit then reads the corpus once for D instead of once per neighbour,
and its trials run the release's own noise step on these statistics instead of recounting the training part per
trial (docs/PRIVACY.md "Empirical audit").

Which units changed is found by comparing the two training parts document by document (text, label, person): the
documents that differ, and under the person unit every document of a person who has one of them (a person's
contribution depends on all their documents, in corpus order). That holds whatever moved — a unit the audit removed
or added, or documents a faulty split or loader moved — so the result is exactly what recounting gives: counts
exactly, float sums up to rounding (tests/audit/test_sums.py compares both). Everything here is PRIVATE and in
memory only.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from typing import Any, Sequence

import numpy as np

from dpkps_core.audit.neighbours import _weights, density_contributions, document_keys, release_unit
from dpkps_core.corpus import Corpus
from dpkps_core.dp.contributions import Keyphrases
from dpkps_core.method import pipeline
from dpkps_core.method.vocabulary import PublicVocabulary


@dataclasses.dataclass(frozen=True)
class UnitChange:
    """The documents of the units that differ between D's training part (``base``) and a neighbour's (``other``):
    positions into each, in corpus order. Empty on both sides when the two training parts are equal."""

    base: np.ndarray
    other: np.ndarray

    @property
    def documents(self) -> int:
        """How many documents the contributions are computed over (both sides)."""
        return int(self.base.size + self.other.size)


def changed_units(base: Corpus, other: Corpus, *, by_person: bool) -> UnitChange:
    """The documents of the units that differ between two training parts (see the module docstring).

    A document is identified by (text, label, person) (:func:`~dpkps_core.audit.neighbours.document_keys`). The
    document unit: a key whose number of copies differs marks every copy of it on both sides (a document's
    contribution depends on itself only). The person unit: a person whose documents, in corpus order, differ marks
    every document of theirs on both sides (a person's first S distinct terms run over all their documents in
    order, so even a reordering changes their contribution)."""
    keys_b, keys_o = document_keys(base), document_keys(other)
    if by_person:
        notes_b: dict[Any, list[Any]] = defaultdict(list)
        notes_o: dict[Any, list[Any]] = defaultdict(list)
        for k in keys_b:
            notes_b[k[2]].append(k)
        for k in keys_o:
            notes_o[k[2]].append(k)
        persons = {p for p in notes_b.keys() | notes_o.keys() if notes_b.get(p) != notes_o.get(p)}
        pick_b = [i for i, k in enumerate(keys_b) if k[2] in persons]
        pick_o = [i for i, k in enumerate(keys_o) if k[2] in persons]
    else:
        count_b, count_o = Counter(keys_b), Counter(keys_o)
        changed = {k for k in count_b.keys() | count_o.keys() if count_b[k] != count_o[k]}
        pick_b = [i for i, k in enumerate(keys_b) if k in changed]
        pick_o = [i for i, k in enumerate(keys_o) if k in changed]
    return UnitChange(np.asarray(pick_b, dtype=np.int64), np.asarray(pick_o, dtype=np.int64))


def _groups(train: Corpus, by_person: bool) -> tuple[str, ...] | None:
    return train.persons if by_person else None


def _term_counts(train: Corpus, index: np.ndarray, vocabulary: PublicVocabulary, *, terms_per_doc: int,
                 by_person: bool) -> np.ndarray:
    """The release path's term counts over the documents of ``train`` at ``index`` (their units' contribution)."""
    if index.size == 0:
        return np.zeros(len(vocabulary), dtype=np.int64)
    part = train.subset(index.tolist())
    return np.asarray(pipeline.term_counts(part.texts, vocabulary, terms_per_doc=terms_per_doc,
                                           groups=_groups(part, by_person)))


def neighbour_term_counts(base_counts: np.ndarray, base: Corpus, other: Corpus, change: UnitChange,
                          vocabulary: PublicVocabulary, *, terms_per_doc: int, by_person: bool) -> np.ndarray:
    """The neighbour's vocabulary histogram: D's counts − the changed units' counts in D + theirs in D'
    (each by :func:`dpkps_core.method.pipeline.term_counts`, per person under the person unit). Exact (integers)."""
    removed = _term_counts(base, change.base, vocabulary, terms_per_doc=terms_per_doc, by_person=by_person)
    added = _term_counts(other, change.other, vocabulary, terms_per_doc=terms_per_doc, by_person=by_person)
    return np.asarray(base_counts) - removed + added


def compact_keyphrases(train: Corpus, private_vocabulary: Any, *, max_per_doc: int) -> Keyphrases:
    """D's keyphrases over ``private_vocabulary``, held compactly (the release path's own extraction)."""
    return Keyphrases.from_lists(pipeline.extract_keyphrases(train.texts, private_vocabulary,
                                                             max_per_doc=max_per_doc))


def neighbour_keyphrases(base_keyphrases: Keyphrases, base: Corpus, other: Corpus, private_vocabulary: Any, *,
                         max_per_doc: int) -> Keyphrases:
    """The neighbour's keyphrases, document by document in its own order: a document's keyphrases depend on its
    text only, so each text D has takes D's row, and only the texts D lacks (the canaries) are matched."""
    first: dict[str, int] = {}
    for i, text in enumerate(base.texts):
        first.setdefault(text, i)
    new_texts = list(dict.fromkeys(t for t in other.texts if t not in first))
    new = compact_keyphrases(Corpus(texts=tuple(new_texts), labels=("",) * len(new_texts), name="audit",
                                    source="audit"), private_vocabulary, max_per_doc=max_per_doc) if new_texts else None
    offset = len(base_keyphrases)
    new_at = {t: offset + j for j, t in enumerate(new_texts)}
    index = np.fromiter((first[t] if t in first else new_at[t] for t in other.texts), dtype=np.int64,
                        count=len(other))
    pool = base_keyphrases if new is None else Keyphrases.concat([base_keyphrases, new])
    return pool.take(index)


def _histograms(keyphrases: Keyphrases, train: Corpus, index: np.ndarray, classes: Sequence[str], size: int, *,
                kind: str, max_per_doc: int, by_person: bool) -> np.ndarray:
    """The density contributions (:func:`~dpkps_core.audit.neighbours.density_contributions`) of the documents of
    ``train`` at ``index``."""
    if index.size == 0:
        return np.zeros((len(classes), size))
    groups = _groups(train, by_person)
    return density_contributions(keyphrases.take(index), [train.labels[i] for i in index], classes, size,
                                 kind=kind, max_per_doc=max_per_doc,
                                 groups=None if groups is None else [groups[i] for i in index])


def neighbour_density_contributions(base_histograms: np.ndarray, base_keyphrases: Keyphrases, base: Corpus,
                                    other_keyphrases: Keyphrases, other: Corpus, change: UnitChange,
                                    classes: Sequence[str], size: int, *, kind: str, max_per_doc: int,
                                    by_person: bool) -> tuple[np.ndarray, np.ndarray]:
    """(the neighbour's (C, |Ṽ|) keyphrase weights, their difference from D's): D's − the changed units' in D +
    theirs in D'. The difference is the changed units' own contributions (no cancellation), the weights are equal
    to recounting up to float rounding."""
    removed = _histograms(base_keyphrases, base, change.base, classes, size, kind=kind, max_per_doc=max_per_doc,
                          by_person=by_person)
    added = _histograms(other_keyphrases, other, change.other, classes, size, kind=kind, max_per_doc=max_per_doc,
                        by_person=by_person)
    delta = added - removed
    return np.asarray(base_histograms, dtype=np.float64) + delta, delta


@dataclasses.dataclass
class Contributions:
    """Each neighbour's training unit grouping and vocabulary histogram, the statistics' weights per pair, and
    the changed units each neighbour's statistics were derived with (:func:`changed_units`)."""

    units: dict[str, Any]
    counts: dict[str, np.ndarray]
    weights: dict[str, dict[str, float]]
    changes: dict[str, UnitChange]


def training_contributions(ctx: Any, nbs: Any) -> Contributions:
    """Each neighbour's training unit grouping and term counts, with the release path's own functions and unit,
    and the vocabulary statistics' weights per pair (``ctx``, ``nbs``: the audit's
    :class:`~dpkps_core.audit.stages.AuditContext` and round 1's :class:`~dpkps_core.audit.stages.Neighbours`,
    typed loosely here since the stages import this module).

    D's training part is counted once (:func:`dpkps_core.method.pipeline.term_counts`, the release's own pass); each
    neighbour's counts are D's minus or plus the changed units' own counts (:mod:`.sums`: the histogram is a sum
    over units), which is exactly what recounting the neighbour gives, at the cost of its few changed units."""
    units = {nb.name: release_unit(nb.train_corpus, ctx.config) for nb in nbs.cheap}
    base = nbs.d.train_corpus
    S = ctx.config.terms_per_doc
    changes = {nb.name: changed_units(base, nb.train_corpus, by_person=ctx.by_person) for nb in nbs.cheap}
    counts = {"D": np.asarray(pipeline.term_counts(base.texts, ctx.vocabulary, terms_per_doc=S,
                                                   groups=units["D"][0]))}
    for nb in nbs.cheap:
        if nb.name != "D":
            counts[nb.name] = neighbour_term_counts(counts["D"], base, nb.train_corpus, changes[nb.name],
                                                    ctx.vocabulary, terms_per_doc=S, by_person=ctx.by_person)
    weights = {"remove": _weights(counts["D"] - counts["D⁻"], ctx.vocabulary),
               "add": _weights(counts["D⁺"] - counts["D"], ctx.vocabulary)}
    return Contributions(units, counts, weights, changes)
