"""Embed each document once per session: an in-memory memo around the embedding model.

Evaluate, the real-vs-synthetic map and every Compare embed the same held-out documents; with this wrapper the
second and later uses read the vectors from the session's memory. The memo lives in the session's state only (``studio.state.Results``)
(never on disk, never in a global cache: the held-out documents are private) and is dropped when the corpus
changes. Keys are SHA-256 digests of the text, so the memo holds no text.
"""

from __future__ import annotations

from typing import Any, MutableMapping

import numpy as np

from dpkps_core.embeddings import MemoEmbedder

#: Most vectors kept per session (about 15 MB at 384 dimensions); the oldest go first.
MAX_ENTRIES = 10_000


def session_embedder(inner: Any, store: MutableMapping[bytes, np.ndarray]) -> MemoEmbedder:
    """The core's :class:`~dpkps_core.embeddings.MemoEmbedder` over this session's ``store``
    (:func:`session_memo`), bounded to :data:`MAX_ENTRIES`."""
    return MemoEmbedder(inner, store, max_entries=MAX_ENTRIES)


def session_memo(results: Any, corpus_id: str | None, model: str) -> dict[bytes, np.ndarray]:
    """This session's memo for ``corpus_id`` and ``model`` (kept in ``results.embedding_memo``,
    ``studio.state.Results``); memos of other corpora are dropped."""
    memo = results.embedding_memo
    if not isinstance(memo, dict) or memo.get("corpus_id") != corpus_id:
        memo = {"corpus_id": corpus_id, "models": {}}
        results.embedding_memo = memo
    return memo["models"].setdefault(model, {})
