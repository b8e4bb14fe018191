"""The session's in-memory embedding memo (issue 14 §9): each text is embedded once."""

from __future__ import annotations

import numpy as np

from dpkps_core.embeddings import HashingEmbedder
from studio.embedding_memo import MAX_ENTRIES, session_embedder, session_memo
from studio.state import Results


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(16)
        self.seen: list[str] = []

    def encode(self, texts, batch_size=0):  # noqa: ANN001
        self.seen += list(texts)
        return super().encode(texts, batch_size)


def test_each_text_is_embedded_once_per_corpus() -> None:
    results = Results()
    inner = Counting()
    emb = session_embedder(inner, session_memo(results, "c1", inner.name))
    a = emb.encode(["x", "y"])
    b = emb.encode(["y", "z", "x"])
    assert inner.seen == ["x", "y", "z"]
    assert np.allclose(a[0], b[2]) and np.allclose(a[1], b[0]) and b.dtype == np.float32
    assert (emb.hits, emb.misses) == (2, 3) and emb.name == inner.name and emb.dim == 16
    assert all(isinstance(k, bytes) for k in results.embedding_memo["models"][inner.name])  # digests, no text
    other = session_embedder(inner, session_memo(results, "c2", inner.name))  # another corpus: a fresh memo
    other.encode(["x"])
    assert inner.seen[-1] == "x" and results.embedding_memo["corpus_id"] == "c2"
    assert emb.max_entries == MAX_ENTRIES


def test_the_core_memo_embeds_each_distinct_text_once_and_evicts_the_oldest() -> None:
    from dpkps_core.embeddings import MemoEmbedder

    inner = Counting()
    emb = MemoEmbedder(inner)                                  # unbounded, a store of its own
    out = emb.encode(["a", "b", "a"])
    assert inner.seen == ["a", "b"] and len(emb) == 2 and np.allclose(out[0], out[2])
    assert emb.encode([]).shape == (0, 16)
    small = MemoEmbedder(Counting(), max_entries=2)
    first = small.encode(["a", "b", "c"])     # more than fit in one call: answered directly (encoded again)
    assert len(small) == 2 and small.inner.seen == ["a", "b", "c", "a", "b", "c"]
    assert np.allclose(first, Counting().encode(["a", "b", "c"]))
    again = small.encode(["a"])               # "a" was the oldest, evicted: embedded again; "b" goes now
    assert small.inner.seen[-1] == "a" and len(small.inner.seen) == 7 and len(small) == 2
    assert np.allclose(again[0], Counting().encode(["a"])[0])
