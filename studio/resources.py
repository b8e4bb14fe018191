"""Cached PUBLIC resources of the app (``st.cache_resource``, one per server): the embedding models, the public
vocabularies, the demo corpora and the LLM backends that run here (any registered kind with ``runs_here``), with a
background warm-up. Nothing private is cached."""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

import streamlit as st

from dpkps_core.corpus import load_corpus_spec
from dpkps_core.corpus import Corpus
from dpkps_core.embeddings import DEFAULT_MODEL, EmbeddingCache, get_embedder
from dpkps_core.errors import ParameterError
from dpkps_core.llm.factory import DEFAULT_BACKEND, backend_spec, make_backend
from dpkps_core.llm.local import server_threads
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.vocabulary import PublicVocabulary, load_vocabulary

log = logging.getLogger("dpkps.studio")

_WARM_LOCK = threading.Lock()
_WARM: dict[str, Any] = {"thread": None, "ready": {n: threading.Event() for n in ("vocabulary", "embedder", "llm")}}


def start_warm_up() -> bool:
    """Load the default PUBLIC models in the background once per server (the first visitor reads page 1 meanwhile).

    Order: GloVe (page 2), the embedding model (page 4), the offline LLM (page 6). ``DPKPS_WARMUP=0`` turns it off.
    Returns whether a warm-up thread was started by this call."""
    if os.environ.get("DPKPS_WARMUP", "1") == "0":
        return False
    with _WARM_LOCK:
        if _WARM["thread"] is not None:
            return False
        _WARM["thread"] = threading.Thread(target=_warm_up, name="dpkps-warmup", daemon=True)
        _WARM["thread"].start()
        return True


def _warm_up() -> None:
    d = SamplingConfig()
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("vocabulary", lambda: load_vocabulary(d.vocabulary, remove_stopwords=d.remove_stopwords,
                                               junk_filter=d.junk_filter, max_terms=d.effective_vocab_max_terms)),
        ("embedder", lambda: get_embedder(DEFAULT_MODEL)),
        ("llm", lambda: offline_backend().prepare()),
    ]
    for name, load in steps:
        t0 = time.perf_counter()
        try:
            load()
            log.info("warm-up: %s ready in %.1f s", name, time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - the step loads it again (and reports) when needed
            log.warning("warm-up: %s failed (%s)", name, type(exc).__name__)
        finally:
            _WARM["ready"][name].set()


def wait_for_warm_up(name: str, timeout: float = 600.0) -> None:
    """If the warm-up is loading ``name``, wait for it instead of loading it a second time in parallel."""
    if _WARM["thread"] is not None and threading.current_thread() is not _WARM["thread"]:
        _WARM["ready"][name].wait(timeout)


@st.cache_resource(show_spinner="Loading the embedding model (public, once per server)…")
def embedder(name: str = DEFAULT_MODEL, device: str | None = None) -> Any:
    """The embedding model on ``device`` (auto/cpu/cuda; None = $DPKPS_DEVICE or auto)."""
    wait_for_warm_up("embedder")
    return get_embedder(name, device=device)


@st.cache_resource(show_spinner=False)
def embedding_cache() -> EmbeddingCache:
    """Persistent cache of PUBLIC / DP-released term embeddings (Ṽ only; never documents)."""
    return EmbeddingCache()


@st.cache_resource(show_spinner="Loading the public vocabulary (once per server)…")
def cached_vocabulary(spec: str, remove_stopwords: bool, junk_filter: bool, max_terms: int | None) -> PublicVocabulary:
    wait_for_warm_up("vocabulary")
    return load_vocabulary(spec, remove_stopwords=remove_stopwords, junk_filter=junk_filter, max_terms=max_terms)


@st.cache_resource(show_spinner="Loading the demo corpus (public data)…")
def demo_corpus(spec: str) -> Corpus:
    return load_corpus_spec(spec)


def offline_backend(device: str | None = None) -> Any:
    """The default backend (the offline SmolLM2) on ``device`` (auto/cpu/cuda; public weights; one per server and
    device): the warm-up loads it, the comparison writes with it."""
    return shared_backend(DEFAULT_BACKEND, device=device)


def shared_backend(kind: str, *, model_path: str = "", device: str | None = None) -> Any:
    """The backend of a registered ``kind`` that runs here (:class:`~dpkps_core.llm.factory.BackendSpec`
    ``runs_here``), one per server, kind, model folder and device: its PUBLIC model is shared by every session."""
    from dpkps_core.device import resolve_device

    spec = backend_spec(kind)
    if not spec.runs_here:
        raise ParameterError(f"The {spec.label} backend does not run on this server; it is built per session.")
    folder = ""
    if "model_path" in spec.settings:
        if not (model_path or "").strip():
            raise ParameterError("Give the folder of your local model (a Hugging Face model folder on this server).")
        folder = str(Path(model_path.strip()).expanduser().resolve())
    return _shared_backend(spec.name, folder, resolve_device(device))


@st.cache_resource(show_spinner=False)
def _shared_backend(kind: str, model_path: str, device: str) -> Any:
    return make_backend(kind, model_path=model_path or None, threads=server_threads(),  # a core left to the server
                        device=device)
