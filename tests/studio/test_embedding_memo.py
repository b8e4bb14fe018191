"""The session's in-memory embedding memo (issue 14 §9): each text is embedded once."""

from __future__ import annotations

import numpy as np

from dpkps_core.embeddings import HashingEmbedder
from studio.embedding_memo import MemoEmbedder, session_memo


class Counting(HashingEmbedder):
    def __init__(self) -> None:
        super().__init__(16)
        self.seen: list[str] = []

    def encode(self, texts, batch_size=0):  # noqa: ANN001
        self.seen += list(texts)
        return super().encode(texts, batch_size)


def test_each_text_is_embedded_once_per_corpus() -> None:
    session: dict = {}
    inner = Counting()
    emb = MemoEmbedder(inner, session_memo(session, "c1", inner.name))
    a = emb.encode(["x", "y"])
    b = emb.encode(["y", "z", "x"])
    assert inner.seen == ["x", "y", "z"]
    assert np.allclose(a[0], b[2]) and np.allclose(a[1], b[0]) and b.dtype == np.float32
    assert (emb.hits, emb.misses) == (2, 3) and emb.name == inner.name and emb.dim == 16
    assert all(isinstance(k, bytes) for k in session["_embedding_memo"]["models"][inner.name])  # digests, no text
    other = MemoEmbedder(inner, session_memo(session, "c2", inner.name))  # another corpus: a fresh memo
    other.encode(["x"])
    assert inner.seen[-1] == "x" and session["_embedding_memo"]["corpus_id"] == "c2"
