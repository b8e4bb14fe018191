"""Neighbouring corpora of the audit: D⁻ (D without its most influential training document), D⁺ / D+k (D plus
canary documents of rare public terms), and how two neighbours' training parts differ (the statistics' weights).

Under the add/remove-one-document relation (DESIGN §2); every neighbour is an in-memory copy of the corpus.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Sequence

import numpy as np

from dpkps_core.config import LIMITS, SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.errors import ParameterError
from dpkps_core.vocabulary import PublicVocabulary

MAX_WEIGHTED_TERMS = 500        # statistics use at most this many terms with the largest |Δ|


def declared_classes(corpus: Corpus, config: SamplingConfig) -> list[str]:
    """The public class names the release uses: the config's declared list, else the corpus's."""
    declared = getattr(config, "classes", None)
    return list(declared) if declared else list(corpus.classes)


def _with_extra(corpus: Corpus, texts: Sequence[str], labels: Sequence[str]) -> Corpus:
    """A copy of ``corpus`` with documents appended (every other field, e.g. declared classes, kept); with a
    person column each appended document is a new person of its own."""
    fields: dict[str, Any] = {"texts": tuple(corpus.texts) + tuple(texts), "labels": tuple(corpus.labels) + tuple(labels)}
    if getattr(corpus, "persons", None) is not None:
        fields["persons"] = tuple(corpus.persons) + tuple(f"audit-canary-{j}" for j in range(len(texts)))
    return dataclasses.replace(corpus, **fields, report=None)


def _without(corpus: Corpus, index: int, *, by_person: bool = False) -> tuple[Corpus, list[int]]:
    """A copy of ``corpus`` without document ``index`` (with ``by_person``: without all of its person's
    documents — the neighbouring relation of the person unit). Returns the copy and, per kept document, its
    index in ``corpus``."""
    persons = getattr(corpus, "persons", None)
    if by_person and persons is not None:
        keep = [i for i in range(len(corpus)) if persons[i] != persons[index]]
    else:
        keep = [i for i in range(len(corpus)) if i != index]
    fields: dict[str, Any] = {"texts": tuple(corpus.texts[i] for i in keep),
                              "labels": tuple(corpus.labels[i] for i in keep)}
    if persons is not None:
        fields["persons"] = tuple(persons[i] for i in keep)
    return dataclasses.replace(corpus, **fields, report=None), keep


def _training_part(corpus: Corpus, split: Any, classes: Sequence[str]) -> list[int]:
    """Indices of the documents that fed the DP steps: training part, declared classes only."""
    declared = set(classes)
    return [int(i) for i in split.train if corpus.labels[int(i)] in declared]


def influential_document(corpus: Corpus, train: Sequence[int], vocabulary: PublicVocabulary, *,
                         terms_per_doc: int) -> tuple[int, int]:
    """The training document with the most distinct rare terms of V among its first S (ties: Σ 1/count).

    Returns (corpus index, number of its terms that no other training document has)."""
    if not train:
        raise ParameterError("The audit needs at least one training document of a declared class.")
    lists = vocabulary.matcher.first_distinct([corpus.texts[i] for i in train], terms_per_doc,
                                              max_chars=LIMITS["max_chars_per_doc"])
    counts = Counter(t for terms in lists for t in terms)
    best, best_key = 0, (-1, -1.0)
    for k, terms in enumerate(lists):
        key = (sum(counts[t] == 1 for t in terms), sum(1.0 / counts[t] for t in terms))
        if key > best_key:
            best, best_key = k, key
    return int(train[best]), int(best_key[0])


def rare_public_terms(corpus: Corpus, vocabulary: PublicVocabulary) -> list[str]:
    """Single-word alphabetic terms of V that occur nowhere in ``corpus`` — the rarer half of V first."""
    seen = set()
    for terms in vocabulary.matcher.occurrences(corpus.texts, None, max_chars=LIMITS["max_chars_per_doc"]):
        seen.update(terms)
    terms = vocabulary.terms
    ok = [i for i in range(len(terms)) if i not in seen and terms[i].isalpha() and len(terms[i]) >= 4]
    tail = [i for i in ok if i >= len(terms) // 2]
    pool = tail if len(tail) >= 200 else ok
    return [terms[i] for i in pool]


class _CanaryMaker:
    """Draws canary documents of rare public terms that the matcher reads back exactly (disjoint canaries)."""

    def __init__(self, pool: Sequence[str], vocabulary: PublicVocabulary, rng: np.random.Generator) -> None:
        self._pool = list(pool)
        self._used: set[str] = set()
        self._vocab = vocabulary
        self._rng = rng

    def draw(self, size: int) -> list[str]:
        for _ in range(50):
            free = [t for t in self._pool if t not in self._used]
            if len(free) < size:
                break
            chosen = [free[i] for i in self._rng.choice(len(free), size=size, replace=False)]
            matched = self._vocab.matcher.first_distinct([canary_text(chosen)], LIMITS["terms_per_doc"])[0]
            if sorted(self._vocab.terms[i] for i in matched) == sorted(chosen):
                self._used.update(chosen)
                return chosen
            self._used.update(chosen)  # these combine into a multi-word term: do not try them again
        raise ParameterError(
            f"The public vocabulary has too few rare terms absent from the corpus to build canary documents of "
            f"{size} terms; lower the number of canaries or terms per canary.")


def canary_text(terms: Sequence[str]) -> str:
    """A canary document: its rare public terms in a plain sentence."""
    return " ".join(terms) + "."


def _class_weights(b: Counter, a: Counter) -> dict[tuple[str, str], float]:
    """(class, term) → keyphrase occurrences in B's training part − in A's, where they differ (largest first)."""
    diff = {k: float(b.get(k, 0) - a.get(k, 0)) for k in set(a) | set(b)}
    items = sorted(((k, v) for k, v in diff.items() if v), key=lambda kv: (-abs(kv[1]), kv[0]))
    return dict(items[:MAX_WEIGHTED_TERMS])


def _weights(delta: np.ndarray, vocabulary: PublicVocabulary) -> dict[str, float]:
    """Term → Δ (count in B − count in A) for the terms whose training counts differ (largest |Δ| first)."""
    nz = np.flatnonzero(delta)
    if nz.size > MAX_WEIGHTED_TERMS:
        nz = nz[np.argsort(-np.abs(delta[nz]), kind="stable")[:MAX_WEIGHTED_TERMS]]
    return {vocabulary.terms[i]: float(delta[i]) for i in nz}


def _moved(train_a: Sequence[int], train_b: Sequence[int], *, ignore: set[int]) -> int:
    """Documents of D (other than those added or removed, ``ignore``) on the training side in one neighbour and
    not the other — 0 for a split that assigns each document on its own (DESIGN §2). Both lists index D."""
    return len((set(train_a) ^ set(train_b)) - ignore)
