"""Memorisation check (local, PRIVATE): does a synthetic document reproduce a real training document?

DP bounds how much any one document can shape the outputs, which makes verbatim copies unlikely; this check
makes it visible. For each synthetic document it finds (1) the nearest real training document by embedding
(cosine similarity of unit vectors) and (2) the real document sharing the most long word n-grams, with the
longest run of words the two have in common (exact: consecutive shared n-grams at consecutive positions in
both). A synthetic document is *flagged* when that run reaches ``flag_words`` words.

At scale (issue 31 §4) it is exact over every real training document and linear in their number: only the
synthetic documents' n-grams are indexed and the real texts are read once against them; nearest embeddings are
found ``EMBEDDING_BLOCK`` real vectors at a time — never a |synthetic| × |real| matrix or an index of the real corpus.

Pure Python + NumPy; the real texts and everything derived from them stay in memory and are for the data owner
only (never part of a release).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from typing import Sequence

import numpy as np

from dpkps_core.errors import ParameterError

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)

#: Length of the word n-grams indexed (shorter runs are ordinary shared phrasing).
DEFAULT_NGRAM = 8
#: A shared run of at least this many words flags a synthetic document as reproducing real text.
DEFAULT_FLAG_WORDS = 12


@dataclasses.dataclass(frozen=True)
class MemorisationRow:
    """One synthetic document's nearest real training documents (indices into the real texts: PRIVATE)."""

    synthetic_index: int
    nearest_by_embedding: int | None
    similarity: float | None
    nearest_by_overlap: int | None
    longest_shared_words: int
    shared_ngram_share: float
    flagged: bool
    shared_text: str = ""
    #: how many real training documents it was compared with (all of them: the check is exact)
    reference_documents: int = 0


def tokens(text: str) -> list[str]:
    """Lower-cased word tokens (letters and digits)."""
    return [t.lower() for t in _TOKEN.findall(text)]


def _ngrams(toks: Sequence[str], n: int) -> list[tuple[str, ...]]:
    return [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]


def longest_shared_run(a: Sequence[str], b: Sequence[str], *, n: int = DEFAULT_NGRAM) -> tuple[int, int]:
    """(length in words, start in ``a``) of the longest token run ``a`` and ``b`` share, counted only when it is
    at least ``n`` words long (else (0, 0))."""
    positions: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for j, g in enumerate(_ngrams(b, n)):
        positions[g].append(j)
    best, start = 0, 0
    prev: dict[int, int] = {}
    for i, g in enumerate(_ngrams(a, n)):
        cur = {j: prev.get(j - 1, 0) + 1 for j in positions.get(g, ())}
        for run in cur.values():
            if run > best:
                best, start = run, i - run + 1
        prev = cur
    return (best + n - 1, start) if best else (0, 0)


#: Real embeddings compared per block (the similarity matrix held at once is |synthetic| × this, float32).
EMBEDDING_BLOCK = 8192


def _nearest_by_embedding(synthetic: np.ndarray, real: np.ndarray, *, block: int) -> tuple[np.ndarray, np.ndarray]:
    """(index, cosine) of each synthetic vector's nearest real vector, over blocks of ``block`` real rows (the first
    of equal maxima, as one argmax over the whole matrix gives)."""
    s = np.asarray(synthetic, dtype=np.float32)
    s = s / np.maximum(np.linalg.norm(s, axis=1, keepdims=True), 1e-12)
    best = np.full(s.shape[0], -1, dtype=np.int64)
    sim = np.full(s.shape[0], -np.inf, dtype=np.float32)
    for start in range(0, real.shape[0], block):
        r = np.asarray(real[start:start + block], dtype=np.float32)
        r = r / np.maximum(np.linalg.norm(r, axis=1, keepdims=True), 1e-12)
        sims = s @ r.T
        arg = np.argmax(sims, axis=1)
        top = sims[np.arange(s.shape[0]), arg]
        better = top > sim
        best[better], sim[better] = arg[better] + start, top[better]
    return best, sim


def _postings(real_texts: Sequence[str], wanted: set[tuple[str, ...]], n: int) -> dict[tuple[str, ...], set[int]]:
    """For each n-gram of ``wanted`` (the synthetic documents'), the real documents that contain it — one pass over
    the real texts, each tokenised once and dropped (only n-grams starting with a word that starts a wanted one are
    built)."""
    index: dict[tuple[str, ...], set[int]] = defaultdict(set)
    if not wanted:  # no synthetic document has n words: nothing to look for
        return index
    firsts = {g[0] for g in wanted}
    for k, text in enumerate(real_texts):
        toks = tokens(text)
        for j in range(len(toks) - n + 1):
            if toks[j] in firsts:
                g = tuple(toks[j:j + n])
                if g in wanted:
                    index[g].add(k)
    return index


def memorisation_check(
    synthetic_texts: Sequence[str], real_texts: Sequence[str], *,
    synthetic_embeddings: np.ndarray | None = None, real_embeddings: np.ndarray | None = None,
    n: int = DEFAULT_NGRAM, flag_words: int = DEFAULT_FLAG_WORDS, embedding_block: int = EMBEDDING_BLOCK,
) -> list[MemorisationRow]:
    """For each synthetic document: its nearest real document by embedding (when both embedding arrays are given)
    and by shared ``n``-word n-grams, the longest run of words they share, and whether it reaches ``flag_words``.

    Exact over every real document, and linear in the real corpus (issue 31 §4): the n-gram search indexes only the
    synthetic documents' n-grams and reads the real texts once, keeping for each such n-gram the real documents
    that contain it (never the real corpus's own n-grams); the longest runs are then computed on the few real
    documents sharing the most n-grams, tokenised again. The embedding search compares ``embedding_block`` real
    vectors at a time, so it holds a |synthetic| × ``embedding_block`` similarity matrix, never |synthetic| × |real|.
    Each row says how many real documents it was compared with (``reference_documents``)."""
    if n < 2:
        raise ParameterError("The memorisation check needs n-grams of at least 2 words.")
    if flag_words < n:
        raise ParameterError(f"The flag threshold ({flag_words} words) must be at least the n-gram length ({n}).")
    if embedding_block < 1:
        raise ParameterError("The memorisation check compares at least one real embedding per block.")
    nearest = None
    if synthetic_embeddings is not None and real_embeddings is not None and len(real_texts):
        if np.shape(synthetic_embeddings)[0] != len(synthetic_texts) or np.shape(real_embeddings)[0] != len(real_texts):
            raise ParameterError("Give one embedding per synthetic and per real document.")
        nearest = _nearest_by_embedding(synthetic_embeddings, real_embeddings, block=embedding_block)
    syn_tokens = [tokens(t) for t in synthetic_texts]
    syn_grams = [_ngrams(toks, n) for toks in syn_tokens]
    index = _postings(real_texts, {g for grams in syn_grams for g in grams}, n)
    rows = []
    for i, (toks, grams) in enumerate(zip(syn_tokens, syn_grams)):
        hits: Counter[int] = Counter()
        shared = 0
        for g in grams:
            docs = index.get(g)
            if docs:
                shared += 1
                hits.update(docs)
        best_doc, run, start = None, 0, 0
        for k, _ in hits.most_common(5):  # the run is exact for the few documents sharing the most n-grams
            length, at = longest_shared_run(toks, tokens(real_texts[k]), n=n)
            if length > run:
                best_doc, run, start = k, length, at
        near = int(nearest[0][i]) if nearest is not None else None
        rows.append(MemorisationRow(
            synthetic_index=i, nearest_by_embedding=near,
            similarity=float(nearest[1][i]) if nearest is not None else None,
            nearest_by_overlap=best_doc, longest_shared_words=run,
            shared_ngram_share=shared / len(grams) if grams else 0.0, flagged=run >= flag_words,
            shared_text=" ".join(toks[start:start + run]) if run else "", reference_documents=len(real_texts)))
    return rows


def memorisation_advice(flagged: int, total: int, *, flag_words: int = DEFAULT_FLAG_WORDS) -> str:
    """What to tell the data owner about a memorisation check's result (docs/PRIVACY.md "Checks on private data
    never decide a release").

    Dropping or regenerating the flagged documents would choose the release by a check on the private corpus:
    that choice depends on the private documents and is NOT covered by ε. What stays inside ε is a change of
    public settings for the whole run (lower ε, fewer keyphrases per sequence, another template), applied to
    every document alike and recorded in the ledger."""
    head = (f"{flagged} of {total} synthetic document(s) reproduce a run of {flag_words} or more words of a real "
            "training document.")
    if not flagged:
        return head
    return (head + " Dropping or regenerating just those documents would pick the release by a check on private "
            "data — a choice outside ε (it depends on the private documents, and no ledger entry covers it). To stay "
            "inside ε, change public settings for the whole run instead: a lower ε, fewer keyphrases per sequence "
            "(L), or another prompt template — then write the documents again, all of them.")
