"""The counting passes' maps on a ``dask.distributed`` cluster (issue 31 §6; docs/DESIGN.md §2.1–§2.2; [DP-KPS] §2
Steps 1–3).

The two statistics of DP-KPS are sums over documents, so :mod:`dpkps_core.method.streaming_counts` writes them as a map
(a chunk of documents → its partial counts, or its compact keyphrase ids) and a reduce (their sum, or
concatenation, in chunk order). By default the maps run in a process pool on this machine; with a Dask cluster
they run on its workers instead, through :func:`run_maps_dask`, which :func:`~dpkps_core.method.streaming_counts.run_maps`
calls when it is given a client (``engine=``) or when ``$DPKPS_DASK_SCHEDULER`` names a scheduler
(:func:`cluster_client`). Everything else stays on the driver (this process): reading the corpus, the split, the
admission of units and the charge in the ledger, the reduce, and the noise — a worker only ever sees a chunk of
documents and the public terms, and returns counts or term ids, never text.

Privacy of the transport: the chunks sent to the workers are private documents. A cluster used for them must be
inside the data owner's trust boundary, like this machine (its own network, or TLS between the scheduler and the
workers: ``tls://`` addresses and Dask's security settings). Nothing here logs or stores a chunk.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import deque
from typing import Any, Callable, Iterable, Iterator, Sequence

from dpkps_core.errors import ParameterError
from dpkps_core.method.matching import TermMatcher

#: The deployment's Dask scheduler (e.g. ``tcp://10.0.0.5:8786``); unset = the maps run on this machine.
ENV_SCHEDULER = "DPKPS_DASK_SCHEDULER"

_CLIENTS: dict[str, Any] = {}
_LOCAL = threading.local()  # a worker thread's matchers, by the digest of their terms


def dask_available() -> bool:
    """Whether ``dask.distributed`` is installed here (it is optional: the local pool needs nothing)."""
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        return False
    return True


def cluster_client(address: str | None = None) -> Any:
    """A ``dask.distributed.Client`` of the scheduler at ``address`` (default ``$DPKPS_DASK_SCHEDULER``), made once
    per address in this process. Its workers need this package installed (``pip install`` of the same version) —
    they import :mod:`dpkps_core.method.streaming_counts` to run the maps."""
    address = (address or os.environ.get(ENV_SCHEDULER, "")).strip()
    if not address:
        raise ParameterError(f"No Dask scheduler given: set ${ENV_SCHEDULER} to its address (tcp://host:8786).")
    if not dask_available():
        raise ParameterError(f"${ENV_SCHEDULER} is set, but dask.distributed is not installed here; install "
                             "'dask' and 'distributed' (see requirements.txt) or unset it to count on this machine.")
    if address not in _CLIENTS:
        from dask.distributed import Client

        _CLIENTS[address] = Client(address, set_as_default=False)
    return _CLIENTS[address]


def terms_digest(terms: Sequence[str]) -> str:
    """A digest of the public terms (the worker's cache key for its matcher)."""
    h = hashlib.sha256()
    for t in terms:
        h.update(t.encode("utf-8", "surrogatepass"))
        h.update(b"\x00")
    return h.hexdigest()


def _worker_apply(key: str, terms: tuple[str, ...], task: tuple[str, tuple[Any, ...], dict[str, Any]],
                  apply: Callable[[TermMatcher, Any], Any]) -> Any:
    """One map task on a Dask worker, with this worker thread's matcher of ``terms`` (built once per thread: a
    matcher's truncation count belongs to its last call, so threads do not share one)."""
    cache: dict[str, TermMatcher] = getattr(_LOCAL, "matchers", None) or {}
    _LOCAL.matchers = cache
    if key not in cache:
        cache.clear()
        cache[key] = TermMatcher(terms)
    return apply(cache[key], task)


def run_maps_dask(tasks: Iterable[tuple[str, tuple[Any, ...], dict[str, Any]]], *, terms: Sequence[str],
                  client: Any, apply: Callable[[TermMatcher, Any], Any]) -> Iterator[Any]:
    """Each task's result in task order, computed on ``client``'s cluster: the terms are broadcast to the workers
    once, at most two tasks per worker thread are in flight (so the driver holds a few chunks, not the corpus),
    and the results come back to the driver for the reduce. Pending tasks are cancelled when the caller stops
    (an error, or the user's Cancel between chunks)."""
    terms = tuple(terms)
    key = terms_digest(terms)
    [terms_future] = client.scatter([terms], broadcast=True, hash=False)
    slots = 2 * max(sum(client.nthreads().values()), 1)
    pending: deque[Any] = deque()
    try:
        for task in tasks:
            pending.append(client.submit(_worker_apply, key, terms_future, task, apply, pure=False))
            if len(pending) >= slots:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        if pending:
            client.cancel(list(pending))
        del terms_future
