"""Tests of dpkps_core.method.vocabulary: normalisation, cleaning, loading and greedy longest matching (§2.1)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from dpkps_core.errors import ParameterError, VocabularyError
from dpkps_core.method.matching import TermMatcher, canonical_term, normalize_text, tokenize, truncated_count
from dpkps_core.method.vocabulary import VOCABULARIES, PublicVocabulary, load_vocabulary

# ---- normalisation ------------------------------------------------------------------------------------


def test_normalize_nfkc_and_lower():
    assert normalize_text("ＡＢＣ") == "abc"  # full-width -> ASCII (NFKC)
    assert normalize_text("ﬁnance") == "finance"  # ligature
    assert normalize_text("Café") == "café"
    assert normalize_text("e\u0301") == "é"  # combining accent composed
    assert normalize_text("HeLLo") == "hello"


def test_tokenize():
    assert tokenize("Hello, World! It's the U.S. e-mail 3.5 times") == [
        "hello",
        "world",
        "it's",
        "the",
        "u.s",
        "e-mail",
        "3.5",
        "times",
    ]
    assert tokenize("ＮＥＷ York--Times") == ["new", "york", "times"]
    assert tokenize("") == []


def test_canonical_term():
    assert canonical_term("  New   York, Times ") == "new york times"
    assert canonical_term("...") == ""


# ---- matching -----------------------------------------------------------------------------------------


def test_greedy_longest_match_multiword():
    m = TermMatcher(["new york", "new york times", "times", "york", "new"])
    assert m.extract("The New York Times reported") == [1]
    assert m.extract("new york, times") == [1]  # n-grams run over tokens: punctuation is not a boundary
    assert m.extract("new yorker times") == [4, 2]
    assert m.extract("new") == [4]


def test_longest_match_falls_back_to_shorter():
    m = TermMatcher(["a b c d", "a b", "c"])
    assert m.extract("a b c x") == [1, 2]
    assert m.extract("a b c d") == [0]


def test_match_is_left_to_right_and_non_overlapping():
    m = TermMatcher(["york times", "new york"])
    assert m.extract("new york times") == [1]  # leftmost match wins, then skips its tokens


def test_max_distinct_and_max_matches():
    m = TermMatcher(["alpha", "beta", "gamma", "delta"])
    text = "alpha beta alpha gamma beta delta alpha"
    assert m.extract(text) == [0, 1, 0, 2, 1, 3, 0]
    assert m.extract(text, max_distinct=3) == [0, 1, 2]
    assert m.extract(text, max_distinct=10) == [0, 1, 2, 3]
    assert m.extract(text, max_matches=3) == [0, 1, 0]
    assert m.extract(text, max_matches=100) == [0, 1, 0, 2, 1, 3, 0]
    with pytest.raises(ParameterError):
        m.extract(text, max_distinct=2, max_matches=2)
    with pytest.raises(ParameterError):
        m.extract(text, max_distinct=0)


def test_batch_helpers_and_max_chars():
    m = TermMatcher(["alpha", "beta"])
    texts = ["alpha beta alpha", "nothing here", "beta"]
    assert m.first_distinct(texts, 1) == [[0], [], [1]]
    assert m.occurrences(texts) == [[0, 1, 0], [], [1]]
    assert m.occurrences(texts, 2) == [[0, 1], [], [1]]
    assert m.occurrences(texts, max_chars=5) == [[0], [], [1]]
    assert m.last_truncated_count == 2
    assert truncated_count(texts, 5) == 2
    assert truncated_count(texts, None) == 0
    with pytest.raises(ParameterError):
        m.first_distinct("alpha beta", 2)


def test_duplicate_terms_map_to_first_index():
    m = TermMatcher(["x", "y", "x"])
    assert m.extract("x y x") == [0, 1, 0]
    assert len(m.counts_first_distinct(["x"], 1)) == 3


def _naive_first_distinct(terms: list[str], text: str, S: int) -> list[int]:
    """Reference implementation: greedy longest match by brute force over every term."""
    toks = tokenize(text)
    index = {t: i for i, t in reversed(list(enumerate(terms)))}
    lens = sorted({len(t.split()) for t in terms}, reverse=True)
    out: list[int] = []
    i = 0
    while i < len(toks) and len(out) < S:
        for n in lens:
            key = " ".join(toks[i : i + n])
            if i + n <= len(toks) and key in index:
                if index[key] not in out:
                    out.append(index[key])
                i += n
                break
        else:
            i += 1
    return out


def test_counts_first_distinct_equals_naive():
    rng = random.Random(7)
    words = [f"w{k}" for k in range(30)]
    terms = words[:20] + ["w1 w2", "w3 w4 w5", "w20 w21", "w6 w7 w8 w9"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 60))) for _ in range(200)]
    S = 5
    m = TermMatcher(terms)
    counts = m.counts_first_distinct(texts, S)
    naive = np.zeros(len(terms), dtype=np.int64)
    for t in texts:
        assert m.extract(t, max_distinct=S) == _naive_first_distinct(terms, t, S)
        for j in _naive_first_distinct(terms, t, S):
            naive[j] += 1
    assert counts.dtype == np.int64
    assert counts.shape == (len(terms),)
    np.testing.assert_array_equal(counts, naive)
    assert counts.max() <= len(texts)


def test_lazy_tokenisation_of_long_texts_matches_naive():
    """Long texts are tokenised in batches when an early stop is possible: same result as the naive scan."""
    rng = random.Random(11)
    words = [f"w{k}" for k in range(400)] + ["x", "y", "z"] * 50
    terms = [f"w{k}" for k in range(0, 400, 3)] + ["x y z", "x y", "w1 w2 w4 w5"]
    m = TermMatcher(terms)
    for _ in range(50):
        text = ", ".join(rng.choice(words) for _ in range(rng.randint(200, 1500)))
        assert len(text) > 600
        for S in (1, 10, 40, 10_000):
            assert m.extract(text, max_distinct=S) == _naive_first_distinct(terms, text, S)
        everything = m.extract(text)
        assert m.extract(text, max_matches=70) == everything[:70]
        assert m.extract(text, max_matches=100_000) == everything


def test_repeated_term_counts_once_per_document():
    m = TermMatcher(["spam", "eggs"])
    counts = m.counts_first_distinct([" ".join(["spam"] * 1000), "eggs spam"], 10)
    np.testing.assert_array_equal(counts, [2, 1])


def test_counts_include_every_term():
    m = TermMatcher(["a1", "b1", "c1"])
    np.testing.assert_array_equal(m.counts_first_distinct([], 10), [0, 0, 0])


def test_matcher_rejects_empty_term():
    with pytest.raises(VocabularyError):
        TermMatcher(["ok", ""])


# ---- PublicVocabulary and cleaning --------------------------------------------------------------------


def test_public_vocabulary_index_and_matcher():
    v = PublicVocabulary(name="t", terms=("a b", "c"), licence="CC0", source="test")
    assert len(v) == 2
    assert v.index == {"a b": 0, "c": 1}
    assert v.matcher.extract("A  B c") == [0, 1]
    assert v.multiword_count == 1
    with pytest.raises(VocabularyError):
        PublicVocabulary(name="t", terms=("a",), licence="", source="", frequencies=(1.0, 2.0))


def test_user_vocabulary_cleaning(tmp_path):
    p = tmp_path / "terms.txt"
    p.write_text(
        "# comment\nThe\nNew York\nnew  york\n,\n___\nof the\nMachine Learning\n66-day\nx86\n3.5\nq\n1990\nfootball\n",
        encoding="utf-8",
    )
    v = load_vocabulary(p)
    assert v.name == "terms"
    assert v.terms == ("new york", "machine learning", "66-day", "x86", "3.5", "q", "1990", "football")
    raw = load_vocabulary(p, remove_stopwords=False)
    assert raw.terms[:2] == ("the", "new york") and "of the" in raw.terms
    assert load_vocabulary(p, junk_filter=True).terms == ("new york", "machine learning", "football")
    custom = load_vocabulary(p, stopwords=["football", "New York"])
    assert "the" in custom.terms and "football" not in custom.terms and "new york" not in custom.terms
    assert load_vocabulary(p, max_terms=2).terms == ("new york", "machine learning")


def test_user_vocabulary_errors(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(VocabularyError, match="vocabulary file is empty"):
        load_vocabulary(empty)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\x00\x01\x02abc\x00")
    with pytest.raises(VocabularyError, match="looks binary"):
        load_vocabulary(binary)
    latin = tmp_path / "latin.txt"
    latin.write_bytes("alpha\nbeta\ncaf\xe9\n".encode("latin-1"))
    with pytest.raises(VocabularyError, match=r"not valid UTF-8 \(line 3\)"):
        load_vocabulary(latin)
    punct = tmp_path / "punct.txt"
    punct.write_text(",\n.\n--\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="no usable terms"):
        load_vocabulary(punct)
    stops = tmp_path / "stops.txt"
    stops.write_text("the\nof\nand\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="no usable terms after cleaning"):
        load_vocabulary(stops)
    with pytest.raises(VocabularyError, match="was not found"):
        load_vocabulary(tmp_path / "missing.txt")
    with pytest.raises(VocabularyError, match="Unknown vocabulary 'glvoe'"):
        load_vocabulary("glvoe")


def test_load_parameters_validated(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("alpha\n", encoding="utf-8")
    with pytest.raises(ParameterError):
        load_vocabulary(p, max_terms=0)
    with pytest.raises(ParameterError, match="min_frequency"):
        load_vocabulary(p, min_frequency=0.1)
    with pytest.raises(ParameterError):
        load_vocabulary(p, stopwords="the")


def test_vocabularies_have_licences():
    assert set(VOCABULARIES) == {"glove", "wordfreq", "medical"}
    for meta in VOCABULARIES.values():
        assert meta["description"] and meta["licence"]


# ---- built-in vocabularies (bundled data packages) ----------------------------------------------------


@pytest.mark.assets
def test_glove_vocabulary():
    v = load_vocabulary("glove")
    assert 390_000 < len(v) < 400_000
    assert v.terms[:3] == ("s", "said", "new")  # GloVe frequency order, stop words removed
    assert "the" not in v.index and "," not in v.index and "of" not in v.index
    assert len(set(v.terms)) == len(v.terms)
    assert "PDDL" in v.licence
    assert load_vocabulary("glove") is v  # cached (public data)
    small = load_vocabulary("glove", max_terms=1000, junk_filter=True)
    assert len(small) == 1000 and small.terms[0] == "said"
    assert not any(any(c.isdigit() for c in t) for t in small.terms)


@pytest.mark.assets
def test_wordfreq_vocabulary():
    v = load_vocabulary("wordfreq")
    assert len(v) > 300_000
    assert v.frequencies is not None and len(v.frequencies) == len(v)
    assert list(v.frequencies[:1000]) == sorted(v.frequencies[:1000], reverse=True)
    frequent = load_vocabulary("wordfreq", min_frequency=1e-5)
    assert 1_000 < len(frequent) < len(v)
    assert min(frequent.frequencies) >= 1e-5


@pytest.mark.assets
def test_medical_vocabulary():
    v = load_vocabulary("medical")
    assert len(v) > 50_000
    assert v.multiword_count > 10_000
    for term in ("squamous cell carcinoma", "cholera", "ibuprofen", "type 2 diabetes mellitus"):
        assert term in v.index, term
    m = v.matcher
    found = [m.terms[i] for i in m.extract("Patient with squamous cell carcinoma was given ibuprofen.")]
    assert found == ["squamous cell carcinoma", "ibuprofen"]
