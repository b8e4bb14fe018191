"""Neighbouring corpora of the audit: D⁻ (D without its most influential training unit: one document, or every
document of one person), D⁺ / D+k (D plus canary documents — or a canary person — of rare public terms), and how two
neighbours' training parts differ (the statistics' weights and the deterministic sensitivity check).

Under the relation of the release (docs/DESIGN.md §2: add/remove one document, or one person with a person column). The
neighbours themselves are built on the RAW rows and loaded through the public loader (:mod:`.raw`, docs/DESIGN.md §2.0);
every difference here is computed with the release path's own contribution functions
(:func:`dpkps_core.method.pipeline.term_counts`, :mod:`dpkps_core.dp.contributions`), never a copy of them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np

from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.dp.contributions import class_keyphrase_histograms, prefix_weights
from dpkps_core.dp.kde import ensemble_blocks
from dpkps_core.errors import ParameterError
from dpkps_core.method.vocabulary import PublicVocabulary

MAX_WEIGHTED_TERMS = 500        # statistics use at most this many terms with the largest |Δ|


def declared_classes(corpus: Corpus, config: SamplingConfig) -> list[str]:
    """The public class names the release uses: the config's declared list, else the corpus's."""
    declared = getattr(config, "classes", None)
    return list(declared) if declared else list(corpus.classes)


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


def influential_person(train: Corpus, vocabulary: PublicVocabulary, *, terms_per_doc: int,
                       candidates: Sequence[str] | None = None) -> tuple[str, int]:
    """The training person whose removal should move the releases most (the person unit's D⁻, docs/DESIGN.md §2).

    A choice of target only (any target gives a valid audit; the statistics' weights come from
    :func:`dpkps_core.method.pipeline.term_counts` on the neighbours): the person with the most distinct terms of V, among
    their documents' first S, that no other person has; ties go to the person with more documents (a bug that
    counts per document instead of per person shows most there), then to Σ 1/count. Returns (person id, number
    of those unique terms)."""
    if train.persons is None:
        raise ParameterError("The person unit needs a corpus loaded with its person column.")
    if not len(train):
        raise ParameterError("The audit needs at least one training document of a declared class.")
    lists = vocabulary.matcher.first_distinct(list(train.texts), terms_per_doc, max_chars=LIMITS["max_chars_per_doc"])
    terms_of: dict[str, set[int]] = {}
    docs_of: Counter = Counter()
    for person, terms in zip(train.persons, lists):
        terms_of.setdefault(person, set()).update(terms)
        docs_of[person] += 1
    counts = Counter(t for terms in terms_of.values() for t in terms)
    allowed = set(candidates) if candidates is not None else None
    best, best_key = None, (-1, -1, -1.0)
    for person, terms in terms_of.items():
        if allowed is not None and person not in allowed:
            continue
        key = (sum(counts[t] == 1 for t in terms), docs_of[person], sum(1.0 / counts[t] for t in terms))
        if key > best_key:
            best, best_key = person, key
    if best is None:
        raise ParameterError("The audit found no training person to remove.")
    return best, int(best_key[0])


def document_keys(corpus: Corpus) -> list[tuple[str, str, str | None]]:
    """(text, label, person) of every loaded document: what identifies a document across two loaded neighbours
    (only identical rows of one person collapse at load time, docs/DESIGN.md §2.0)."""
    persons = corpus.persons if corpus.persons is not None else (None,) * len(corpus)
    return list(zip(corpus.texts, corpus.labels, persons))


def loading_changes(a: Corpus, b: Corpus, *, expected: set[tuple[str, str, str | None]]) -> int:
    """Documents that differ between two loaded neighbours beyond the ``expected`` ones (the removed unit's or
    the canaries' documents): 0 when the loader keeps neighbours neighbours (docs/DESIGN.md §2.0)."""
    ka, kb = Counter(document_keys(a)), Counter(document_keys(b))
    diff = (ka - kb) + (kb - ka)
    return int(sum(n for key, n in diff.items() if key not in expected) + sum(max(n - 1, 0) for key, n in diff.items()
                                                                             if key in expected))


def release_unit(train: Corpus, config: SamplingConfig) -> tuple[Sequence[str] | None, str]:
    """(person ids or None, neighbouring relation) of a training part as the release path counts it
    (docs/DESIGN.md §2.0): per person with a person column, else per document — the audit's own copy, so that the
    audit does not lean on a private helper of the pipeline."""
    from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT

    if config.person_column:
        return train.persons, train.privacy_unit
    return None, ADD_REMOVE_ONE_DOCUMENT


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

    def __init__(self, pool: Sequence[str], vocabulary: PublicVocabulary, rng: np.random.Generator, *,
                 min_chars: int = 0) -> None:
        self._pool = list(pool)
        self._used: set[str] = set()
        self._vocab = vocabulary
        self._rng = rng
        self.min_chars = int(min_chars)

    def draw(self, size: int) -> list[str]:
        for _ in range(50):
            free = [t for t in self._pool if t not in self._used]
            if len(free) < size:
                break
            chosen = [free[i] for i in self._rng.choice(len(free), size=size, replace=False)]
            text = canary_text(chosen, min_chars=self.min_chars)
            matched = self._vocab.matcher.first_distinct([text], LIMITS["terms_per_doc"])[0]
            if sorted(self._vocab.terms[i] for i in matched) == sorted(chosen):
                self._used.update(chosen)
                return chosen
            self._used.update(chosen)  # these combine into a multi-word term: do not try them again
        raise ParameterError(
            f"The public vocabulary has too few rare terms absent from the corpus to build canary documents of "
            f"{size} terms; lower the number of canaries or terms per canary.")


def canary_text(terms: Sequence[str], *, min_chars: int = 0, repeat: int = 1) -> str:
    """A canary document: its rare public terms in a plain sentence, said ``repeat`` times and as often again as
    the loader's minimum length needs (repeats add no new term: S counts distinct terms)."""
    sentence = " ".join(terms) + "."
    text = " ".join([sentence] * max(int(repeat), 1))
    while len(text) < min_chars:
        text += " " + sentence
    return text


def canary_rows(terms: Sequence[str], classes: Sequence[str], *, rows: int, min_chars: int) -> list[tuple[str, str]]:
    """(text, label) of the rows of one canary unit: one row (document unit), or ``rows`` distinct rows of one
    canary person across the classes (person unit: D⁺ adds a person with several documents). The person's terms
    are spread over their rows, so only all of them together carry every term."""
    if rows <= 1:
        return [(canary_text(terms, min_chars=min_chars), classes[0])]
    parts = [list(terms[j::rows]) or list(terms) for j in range(rows)]
    return [(canary_text(part, min_chars=min_chars, repeat=j + 1), classes[j % len(classes)])
            for j, part in enumerate(parts)]


def _class_weights(b: np.ndarray, a: np.ndarray, classes: Sequence[str], terms: Sequence[str]
                   ) -> dict[tuple[str, str], float]:
    """(class, term) → B's keyphrase weight − A's (stacked class histograms, :func:`density_contributions`),
    where they differ (largest |Δ| first, at most :data:`MAX_WEIGHTED_TERMS`)."""
    return _class_weights_of(np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64), classes, terms)


def _class_weights_of(delta: np.ndarray, classes: Sequence[str], terms: Sequence[str]
                      ) -> dict[tuple[str, str], float]:
    """(class, term) → Δ of the stacked (C, |Ṽ|) keyphrase weights where it is not 0 (largest |Δ| first, at most
    :data:`MAX_WEIGHTED_TERMS`)."""
    delta = np.asarray(delta, dtype=np.float64)
    flat = delta.ravel()
    nz = np.flatnonzero(np.abs(flat) > 1e-12)
    if nz.size > MAX_WEIGHTED_TERMS:
        nz = nz[np.argsort(-np.abs(flat[nz]), kind="stable")[:MAX_WEIGHTED_TERMS]]
    width = delta.shape[1]
    return {(classes[i // width], terms[i % width]): float(flat[i]) for i in nz}


def density_contributions(keyphrases: Sequence[Sequence[int]], labels: Sequence[str], classes: Sequence[str],
                          size: int, *, kind: str, max_per_doc: int, groups: Sequence[str] | None) -> np.ndarray:
    """(C, |Ṽ|) keyphrase weights the density step sums, from the release path's own
    :func:`~dpkps_core.dp.contributions.class_keyphrase_histograms`: every keyphrase (first M) for the histogram
    and the independent RFF density; each document's FIRST keyphrase for an iterative ensemble (its first member,
    which scores the first position; the same weights as ``prefix_weights`` for one block)."""
    first_only = kind not in ("independent",)
    return class_keyphrase_histograms(keyphrases, labels, classes, size, max_per_doc=1 if first_only else max_per_doc,
                                      groups=groups)


def member_weight_distance(a: tuple[Sequence[Sequence[int]], Sequence[str], Sequence[str] | None,
                                    Sequence[tuple[str, str, str | None]]],
                           b: tuple[Sequence[Sequence[int]], Sequence[str], Sequence[str] | None,
                                    Sequence[tuple[str, str, str | None]]],
                           classes: Sequence[str], *, kind: str, length: int, max_per_doc: int) -> float:
    """Largest L1 change, over the ensemble members of an iterative RFF density, of the documents' weights
    (:func:`~dpkps_core.dp.contributions.prefix_weights` with the unit's groups) between two neighbours — each
    (keyphrases, labels, groups, document keys). Every document adds weight × one vector in [−√2, √2]^I, so the
    member's statistic moves by at most √2·I times this; the mechanism's noise assumes ≤ 1 (docs/DESIGN.md §2.4)."""
    worst = 0.0
    for blocks, _ in ensemble_blocks(kind, length):
        sums = []
        for kps, labels, groups, keys in (a, b):
            truncated = [list(k[:max_per_doc]) for k in kps]
            w = prefix_weights(truncated, labels, classes, blocks, groups)
            per_key: dict[Any, float] = {}
            for key, k, weight in zip(keys, truncated, w):
                if weight:
                    idx = (key, tuple(k[:blocks]))
                    per_key[idx] = per_key.get(idx, 0.0) + float(weight)
            sums.append(per_key)
        worst = max(worst, sum(abs(sums[0].get(k, 0.0) - sums[1].get(k, 0.0)) for k in set(sums[0]) | set(sums[1])))
    return worst


def _weights(delta: np.ndarray, vocabulary: PublicVocabulary) -> dict[str, float]:
    """Term → Δ (count in B − count in A) for the terms whose training counts differ (largest |Δ| first)."""
    nz = np.flatnonzero(delta)
    if nz.size > MAX_WEIGHTED_TERMS:
        nz = nz[np.argsort(-np.abs(delta[nz]), kind="stable")[:MAX_WEIGHTED_TERMS]]
    return {vocabulary.terms[i]: float(delta[i]) for i in nz}


def loader_probes(raw: Any, loaded: Corpus, classes: Sequence[str], *, by_person: bool) -> list[dict[str, Any]]:
    """Neighbouring raw tables that a loader which looks across rows would break (docs/DESIGN.md §2.0), each loaded and
    compared with D: the number of documents that changed beyond the added / removed unit's must be 0.

    * one row (person) removed whose text also occurs in another row under another label (person) — the first such
      row in the file, the copy a keep-the-first de-duplication keeps;
    * one row (a new person's row) inserted BEFORE all others, copying an existing text under another label.
    Cheap (loading only, no release); ``raw`` is the :class:`~dpkps_core.audit.raw.RawTable` of ``loaded``."""
    from dpkps_core.audit.raw import CANARY_PERSON  # noqa: PLC0415 - raw imports nothing from here

    keys = raw.row_keys()
    out: list[dict[str, Any]] = []
    by_text: dict[str, list[int]] = {}
    for i, (text, _, _) in enumerate(keys):
        if text:
            by_text.setdefault(text, []).append(i)
    shared = next((rows for rows in by_text.values()
                   if len({(keys[i][1], keys[i][2]) if by_person else keys[i][1] for i in rows}) > 1), None)
    loaded_keys = set(document_keys(loaded))
    if shared is not None:
        first = shared[0]
        if by_person:
            person = keys[first][2]
            rows = [i for i, k in enumerate(keys) if k[2] == person]
            expected = {k for k in loaded_keys if k[2] == person}
            what = "every row of a person who shares a text with another person removed"
        else:
            rows, expected = [first], {keys[first]}
            what = "a row whose text also occurs under another label removed"
        probe = raw.without(rows).load_corpus()
        out.append({"probe": what, "rows_changed": len(rows),
                    "documents_changed": loading_changes(loaded, probe, expected=expected)})
    declared = [c for c in classes if c]
    source = next((i for i, k in enumerate(keys) if k[0] and k[1] in declared), None)
    if source is not None and len(declared) > 1:
        text, label, _ = keys[source]
        other = next(c for c in declared if c != label)
        who = f"{CANARY_PERSON}-probe" if raw.person_column else None
        probe = raw.before([raw.row(text, other, who)]).load_corpus()
        out.append({"probe": "a copy of an existing text under another label inserted before every row"
                             + (" (a new person)" if by_person else ""),
                    "rows_changed": 1,
                    "documents_changed": loading_changes(loaded, probe, expected={(text, other, who)})})
    return out
