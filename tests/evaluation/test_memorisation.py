"""The local memorisation check (issue 14 §11): nearest real document by embedding and by long n-gram overlap."""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.memorisation import longest_shared_run, memorisation_check, tokens

REAL = [
    "The central bank raised interest rates by a quarter point on Thursday, citing stubborn inflation in services "
    "and a labour market that remains tight despite slower growth.",
    "The striker scored twice in the second half as the home side came from behind to win the cup tie in front of "
    "a sold out stadium.",
    "A new smartphone with a folding screen went on sale this week, and early reviews praised its battery life.",
]


def test_longest_shared_run_is_exact() -> None:
    a = tokens("one two three four five six seven eight nine ten eleven")
    b = tokens("zero two three four five six seven eight nine ten x")
    assert longest_shared_run(a, b, n=4) == (9, 1)
    assert longest_shared_run(a, tokens("nothing in common here at all"), n=4) == (0, 0)


def test_copied_text_is_flagged_and_fresh_text_is_not() -> None:
    copied = "Breaking: the striker scored twice in the second half as the home side came from behind to win."
    fresh = "Markets were calm as traders waited for the budget statement and the latest jobs figures next week."
    rows = memorisation_check([copied, fresh], REAL)
    assert rows[0].flagged and rows[0].nearest_by_overlap == 1 and rows[0].longest_shared_words >= 12
    assert rows[0].shared_text.startswith("the striker scored twice")
    assert not rows[1].flagged and rows[1].longest_shared_words == 0 and rows[1].nearest_by_overlap is None


def test_nearest_by_embedding() -> None:
    real = np.eye(3, dtype=np.float32)
    syn = np.array([[0.1, 0.9, 0.0], [0.0, 0.2, 0.8]], dtype=np.float32)
    rows = memorisation_check(["a b", "c d"], REAL, synthetic_embeddings=syn, real_embeddings=real)
    assert [r.nearest_by_embedding for r in rows] == [1, 2]
    assert rows[0].similarity == pytest.approx(0.9 / np.linalg.norm([0.1, 0.9]), rel=1e-5)


def test_bad_parameters() -> None:
    with pytest.raises(ParameterError):
        memorisation_check(["x"], REAL, n=1)
    with pytest.raises(ParameterError):
        memorisation_check(["x"], REAL, n=8, flag_words=4)


def test_memorisation_advice_says_dropping_flagged_documents_is_outside_epsilon() -> None:
    from dpkps_core.evaluation.memorisation import memorisation_advice

    text = memorisation_advice(2, 50)
    assert text.startswith("2 of 50 synthetic document(s) reproduce a run of 12 or more words")
    assert "outside ε" in text
    for stays_inside in ("a lower ε", "fewer keyphrases per sequence", "another prompt template"):
        assert stays_inside in text
    assert "regenerate or drop them" not in text
    assert memorisation_advice(0, 50) == "0 of 50 synthetic document(s) reproduce a run of 12 or more words of a real training document."


def _quadratic_reference(synthetic, real, syn_emb, real_emb, n):
    """The check as it was: an index of every real n-gram, and the whole |synthetic| × |real| similarity matrix."""
    from collections import Counter, defaultdict

    s = syn_emb / np.maximum(np.linalg.norm(syn_emb, axis=1, keepdims=True), 1e-12)
    r = real_emb / np.maximum(np.linalg.norm(real_emb, axis=1, keepdims=True), 1e-12)
    sims = s @ r.T
    real_tokens = [tokens(t) for t in real]
    index = defaultdict(set)
    for k, toks in enumerate(real_tokens):
        for j in range(len(toks) - n + 1):
            index[tuple(toks[j:j + n])].add(k)
    out = []
    for i, text in enumerate(synthetic):
        toks = tokens(text)
        grams = [tuple(toks[j:j + n]) for j in range(len(toks) - n + 1)]
        hits, shared = Counter(), 0
        for g in grams:
            if index.get(g):
                shared += 1
                hits.update(index[g])
        best, run = None, 0
        for k, _ in hits.most_common(5):
            length, _ = longest_shared_run(toks, real_tokens[k], n=n)
            if length > run:
                best, run = k, length
        near = int(np.argmax(sims[i]))
        out.append((near, float(sims[i, near]), best, run, shared / len(grams) if grams else 0.0))
    return out


def test_the_streamed_check_equals_the_quadratic_one() -> None:
    """Indexing only the synthetic n-grams and comparing embeddings block by block gives exactly what an index of
    every real n-gram and the whole similarity matrix gave (issue 31 §4: linear in the real corpus)."""
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(30)]
    real = [" ".join(rng.choice(words, size=int(rng.integers(5, 40)))) for _ in range(120)]
    synthetic = [" ".join(real[int(rng.integers(120))].split()[3:20]) + " " + " ".join(rng.choice(words, size=10))
                 for _ in range(15)] + ["nothing shared at all here"]
    syn_emb = rng.normal(size=(len(synthetic), 8)).astype(np.float32)
    real_emb = rng.normal(size=(len(real), 8)).astype(np.float32)
    want = _quadratic_reference(synthetic, real, syn_emb, real_emb, 4)
    for block in (7, 10_000):
        rows = memorisation_check(synthetic, real, synthetic_embeddings=syn_emb, real_embeddings=real_emb, n=4,
                                  flag_words=6, embedding_block=block)
        got = [(r.nearest_by_embedding, r.similarity, r.nearest_by_overlap, r.longest_shared_words,
                r.shared_ngram_share) for r in rows]
        assert [g[0] for g in got] == [w[0] for w in want]
        assert [g[1] for g in got] == pytest.approx([w[1] for w in want], rel=1e-6)
        assert [g[2:] for g in got] == [w[2:] for w in want]
        assert all(r.reference_documents == len(real) for r in rows)
    assert sum(r.flagged for r in rows) >= 10
    with pytest.raises(ParameterError):
        memorisation_check(["x"], REAL, embedding_block=0)
