"""Text normalisation, tokenisation and term matching (docs/DESIGN.md §2.1).

Documents are normalised (Unicode NFKC + lower-case), tokenised with one compiled regex, and matched against a
vocabulary's canonical terms with a greedy longest match over token n-grams (hash lookups, never one regex per
term). Nothing in this module logs or stores document text.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Iterable, Iterator, Sequence

import numpy as np

from dpkps_core.errors import ParameterError, VocabularyError

#: Word tokens of normalised text (docs/DESIGN.md §2.1): letters/digits/underscore, joined by single - ' or .
TOKEN_PATTERN = r"\w+(?:[-'.]\w+)*"
_TOKEN_RE = re.compile(TOKEN_PATTERN)

_MATCH_GROUP = re.Match.group
#: Texts longer than this are tokenised lazily when an early stop (max_distinct / max_matches) is requested.
_EAGER_CHARS = 600
_TOKEN_BATCH = 64

# --------------------------------------------------------------------------------------------------------
# Normalisation and tokenisation
# --------------------------------------------------------------------------------------------------------


def normalize_text(text: str) -> str:
    """Unicode NFKC + lower-case (docs/DESIGN.md §2.1). ASCII text skips the (no-op) NFKC step."""
    if not isinstance(text, str):
        raise ParameterError("Text to normalise must be a string.")
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", text).lower()


def tokenize(text: str) -> list[str]:
    """Word tokens of ``normalize_text(text)`` using the regex ``\\w+(?:[-'.]\\w+)*`` (docs/DESIGN.md §2.1)."""
    return _TOKEN_RE.findall(normalize_text(text))


def canonical_term(term: str) -> str:
    """Canonical form of a vocabulary term: its tokens joined by single spaces ("" if it has none)."""
    return " ".join(tokenize(term))


def truncated_count(texts: Iterable[str], max_chars: int | None) -> int:
    """Number of ``texts`` longer than ``max_chars`` characters (those the matcher would truncate)."""
    if max_chars is None:
        return 0
    limit = _check_positive_int(max_chars, "max_chars")
    return sum(1 for t in texts if len(t) > limit)


# --------------------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------------------


class TermMatcher:
    """Greedy longest left-to-right match of canonical terms over token n-grams (docs/DESIGN.md §2.1).

    Build: ``term -> index`` and ``first token -> longest n-gram length`` dicts. Scan: at token ``i`` whose
    token starts some term, try n-grams from the longest down to 1 (hash lookups); on a hit emit the term and
    jump past it, else move one token on. Duplicate terms map to their first index.
    """

    def __init__(self, terms: Sequence[str]) -> None:
        if isinstance(terms, str):
            raise ParameterError("TermMatcher needs a list of terms, not a single string.")
        self._terms: tuple[str, ...] = tuple(terms)
        n = len(self._terms)
        # Reversed so that the FIRST occurrence of a duplicated term wins.
        self._index: dict[str, int] = dict(zip(reversed(self._terms), range(n - 1, -1, -1)))
        if "" in self._index:
            raise VocabularyError("A vocabulary term is empty; clean the vocabulary before matching.")
        max_len: dict[str, int] = dict.fromkeys((t for t in self._index if " " not in t), 1)
        for term in self._index:
            if " " in term:
                toks = term.split(" ")
                first, k = toks[0], len(toks)
                if max_len.get(first, 0) < k:
                    max_len[first] = k
        self._max_len = max_len
        self._longest = max(max_len.values(), default=0)
        #: Number of texts truncated by the last batch call (``max_chars``).
        self.last_truncated_count = 0

    @property
    def terms(self) -> tuple[str, ...]:
        """The matcher's terms (index positions refer to this tuple)."""
        return self._terms

    def __len__(self) -> int:
        return len(self._terms)

    # ---- single document -------------------------------------------------------------------------------

    def extract(
        self,
        text: str,
        *,
        max_distinct: int | None = None,
        max_matches: int | None = None,
        max_chars: int | None = None,
    ) -> list[int]:
        """Term indices matched in ``text``, in text order.

        ``max_distinct=S``: the first S distinct terms, each once (docs/DESIGN.md §2.1 step 2).
        ``max_matches=M``: the first M occurrences, repeats kept (docs/DESIGN.md §2.2). Neither: every occurrence.
        ``max_chars``: only the first ``max_chars`` characters are matched (documented limit).
        """
        s, m, c = self._check_limits(max_distinct, max_matches, max_chars)
        return self._extract(text, s, m, c)

    def _check_limits(
        self, max_distinct: int | None, max_matches: int | None, max_chars: int | None
    ) -> tuple[int | None, int | None, int | None]:
        if max_distinct is not None and max_matches is not None:
            raise ParameterError("Give either max_distinct or max_matches, not both.")
        s = _check_positive_int(max_distinct, "max_distinct") if max_distinct is not None else None
        m = _check_positive_int(max_matches, "max_matches") if max_matches is not None else None
        c = _check_positive_int(max_chars, "max_chars") if max_chars is not None else None
        return s, m, c

    def _extract(self, text: str, max_distinct: int | None, max_matches: int | None, max_chars: int | None) -> list[int]:
        if not isinstance(text, str):
            raise ParameterError("Documents to match must be strings.")
        if max_chars is not None and len(text) > max_chars:
            text = text[:max_chars]
        norm = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).lower()
        limit = max_distinct if max_distinct is not None else max_matches
        more: Iterator[str] | None = None
        if limit is None or len(norm) <= _EAGER_CHARS:
            tokens = _TOKEN_RE.findall(norm)  # whole text at C speed
        else:
            # Early stop is likely: tokenise lazily, a batch at a time (same tokens as findall).
            more = map(_MATCH_GROUP, _TOKEN_RE.finditer(norm))
            tokens = list(itertools.islice(more, _TOKEN_BATCH))
        index = self._index
        max_len = self._max_len
        lookahead = self._longest
        seen: set[int] | None = set() if max_distinct is not None else None
        out: list[int] = []
        n_tok = len(tokens)
        i = 0
        while True:
            if more is not None and i + lookahead >= n_tok:
                tokens.extend(itertools.islice(more, _TOKEN_BATCH))
                if len(tokens) == n_tok:
                    more = None
                n_tok = len(tokens)
            if i >= n_tok:
                break
            k = max_len.get(tokens[i])
            if k is None:
                i += 1
                continue
            hit = None
            if k > 1:
                for n in range(min(k, n_tok - i), 1, -1):
                    hit = index.get(" ".join(tokens[i : i + n]))
                    if hit is not None:
                        i += n
                        break
            if hit is None:
                hit = index.get(tokens[i])
                i += 1
                if hit is None:
                    continue
            if seen is not None:
                if hit in seen:
                    continue
                seen.add(hit)
            out.append(hit)
            if limit is not None and len(out) >= limit:
                break
        return out

    # ---- batches ---------------------------------------------------------------------------------------

    def _batch(
        self, texts: Iterable[str], max_distinct: int | None, max_matches: int | None, max_chars: int | None
    ) -> list[list[int]]:
        if isinstance(texts, str):
            raise ParameterError("Give a list of documents, not a single string.")
        texts = list(texts)
        s, m, c = self._check_limits(max_distinct, max_matches, max_chars)
        self.last_truncated_count = truncated_count(texts, c)
        extract = self._extract
        return [extract(t, s, m, c) for t in texts]

    def first_distinct(self, texts: Iterable[str], S: int, *, max_chars: int | None = None) -> list[list[int]]:
        """Per document, its first ``S`` distinct matched terms (docs/DESIGN.md §2.1 step 2)."""
        return self._batch(texts, S, None, max_chars)

    def occurrences(
        self, texts: Iterable[str], M: int | None = None, *, max_chars: int | None = None
    ) -> list[list[int]]:
        """Per document, its first ``M`` term occurrences in text order, repeats kept (all if ``M`` is None)."""
        return self._batch(texts, None, M, max_chars)

    def counts_first_distinct(self, texts: Iterable[str], S: int, *, max_chars: int | None = None) -> np.ndarray:
        """Histogram over ALL terms: how many documents have each term among their first ``S`` distinct terms.

        Every entry of V is present (zeros included), as docs/DESIGN.md §2.1 step 3 requires; the L1 sensitivity
        under add/remove of one document is at most S.
        """
        lists = self.first_distinct(texts, S, max_chars=max_chars)
        flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64)
        return np.bincount(flat, minlength=len(self._terms)).astype(np.int64, copy=False)


def _check_positive_int(value: object, name: str) -> int:
    """Validate a positive integer parameter."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise ParameterError(f"{name} must be a whole number of at least 1.")
    return int(value)
