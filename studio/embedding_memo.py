"""Embed each document once per session: an in-memory memo around the embedding model.

Evaluate, the real-vs-synthetic map and every Compare embed the same held-out documents; with this wrapper the
second and later uses read the vectors from the session's memory. The memo lives in ``st.session_state`` only
(never on disk, never in a global cache: the held-out documents are private) and is dropped when the corpus
changes. Keys are SHA-256 digests of the text, so the memo holds no text.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any, MutableMapping, Sequence

import numpy as np

#: Most vectors kept per session (about 15 MB at 384 dimensions); the oldest go first.
MAX_ENTRIES = 10_000


class MemoEmbedder:
    """An :class:`~dpkps_core.embeddings.Embedder` that encodes only texts it has not seen in this session."""

    def __init__(self, inner: Any, store: MutableMapping[bytes, np.ndarray]) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.store = store
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __getattr__(self, item: str) -> Any:  # device and the like, from the wrapped model
        if item == "inner" or item.startswith("__"):
            raise AttributeError(item)
        return getattr(self.inner, item)

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        with self._lock:
            missing = [i for i, k in enumerate(keys) if k not in self.store]
        if missing:
            fresh = np.asarray(self.inner.encode([texts[i] for i in missing], batch_size=batch_size),
                               dtype=np.float32)
            with self._lock:
                for i, v in zip(missing, fresh):
                    self.store[keys[i]] = v
                while len(self.store) > MAX_ENTRIES:
                    self.store.pop(next(iter(self.store)))
        with self._lock:
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
            out = [self.store.get(k) for k in keys]
        if any(v is None for v in out):  # evicted meanwhile (more than MAX_ENTRIES in one call): encode directly
            return np.asarray(self.inner.encode(list(texts), batch_size=batch_size), dtype=np.float32)
        return np.stack(out).astype(np.float32) if out else np.zeros((0, self.dim), dtype=np.float32)


def session_memo(session: MutableMapping[str, Any], corpus_id: str | None, model: str) -> dict[bytes, np.ndarray]:
    """This session's memo for ``corpus_id`` and ``model``; memos of other corpora are dropped."""
    memo = session.get("_embedding_memo")
    if not isinstance(memo, dict) or memo.get("corpus_id") != corpus_id:
        memo = {"corpus_id": corpus_id, "models": {}}
        session["_embedding_memo"] = memo
    return memo["models"].setdefault(model, {})
