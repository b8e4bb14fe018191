"""The two counting passes of DP-KPS as map (a chunk of documents → partial sums) and reduce (their sum), for
corpora that do not fit in memory (issue 31; docs/DESIGN.md §2.1–§2.2; [DP-KPS] §2 Steps 1 and 3).

- Vocabulary pass (before ε_voc's noise): each document's first S distinct terms of the public V counted once
  each (:meth:`~dpkps_core.method.matching.TermMatcher.counts_first_distinct`, the statistic of
  :func:`dpkps_core.method.pipeline.term_counts`); L1 sensitivity S.
- Keyphrase pass over the released Ṽ (before ε_kde's noise): per declared class, Σ over its documents of 1/m per
  keyphrase occurrence, the first M occurrences in text order
  (:func:`dpkps_core.dp.contributions.class_keyphrase_histograms`); L1 sensitivity 1.

Both statistics are sums over documents, so a chunk's partial sum is computed by the SAME function the in-memory
path calls (:func:`vocabulary_map`, :func:`keyphrase_map`) and the partials are added in chunk order (the
result does not depend on the number of workers; counts are exact, weighted sums equal up to float rounding).

Person unit (docs/DESIGN.md §2, person unit): a person's contribution needs all their documents (their first S distinct
terms over all their documents in corpus order; each of their keyphrase occurrences weighs 1/their total), so the
map emits each document's matches (term ids, never text) and the driver groups them by person with an EXTERNAL
HASH PARTITION (:class:`PersonSpill`): each person id becomes a 128-bit keyed BLAKE2b digest under a key drawn for
this pass and forgotten after it, the (digest, term id) rows go to one of ``partitions`` temporary files by
digest, and each file is grouped alone in memory with NumPy. Why this, not a sort or a group-by engine: neither
DuckDB nor Polars is installed (a new dependency for one group-by), a hash partition needs one write and one read
of compact integer rows (no merge passes), and its memory is one partition's rows. The files hold no text and no
person id (digests under a forgotten key), live in a private temporary folder (mode 0700) and are deleted when the
pass ends, also on error.

Workers: the maps run in a local process pool (``workers``; default ``$DPKPS_WORKERS``, else the usable CPUs; 1
runs them inline), at most ``2·workers`` chunks in flight. Noise, admission and the ledger stay with the caller
(the driver). ``progress`` is called after each chunk with the documents done; one that raises (the user's
Cancel) stops the pass between chunks — the pool is shut down, the person spill removed, nothing released. Nothing
here logs, prints or writes document text.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import multiprocessing
import os
import secrets
import sys
import tempfile
import threading
import types
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from dpkps_core.method.config import LIMITS
from dpkps_core.dp.contributions import Keyphrases, class_keyphrase_histograms
from dpkps_core.dp.validation import check_positive_int
from dpkps_core.errors import ParameterError
from dpkps_core.method.matching import TermMatcher

#: Temporary files the person unit's grouping spreads its rows over (each is grouped alone in memory).
DEFAULT_PARTITIONS = 16
_KEY_DTYPE = np.dtype([("hi", "<u8"), ("lo", "<u8")])


#: The deployment's worker count (the one setting of the passes' parallelism; unset = the usable CPUs).
ENV_WORKERS = "DPKPS_WORKERS"


def default_workers() -> int:
    """``$DPKPS_WORKERS`` where set (a whole number ≥ 1), else the usable CPUs of this process (its affinity
    mask where the OS has one)."""
    value = os.environ.get(ENV_WORKERS, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ParameterError(f"${ENV_WORKERS} must be a whole number ≥ 1, got {value!r}.")
        return int(value)
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - macOS, Windows
        return max(os.cpu_count() or 1, 1)


def check_workers(workers: int | None) -> int:
    """``workers`` checked (a whole number ≥ 1), or :func:`default_workers` for None."""
    return default_workers() if workers is None else check_positive_int(workers, "workers")


@dataclass(frozen=True)
class Chunk:
    """One chunk of PRIVATE documents for a counting pass (texts; labels; persons or None)."""

    texts: Sequence[str]
    labels: Sequence[str] | None = None
    persons: Sequence[str] | None = None

    def __repr__(self) -> str:  # never show document text
        return f"Chunk(documents={len(self.texts)})"


def chunked(texts: Sequence[str], labels: Sequence[str] | None = None, persons: Sequence[str] | None = None, *,
            size: int) -> Iterator[Chunk]:
    """In-memory documents as chunks of ``size`` (the same passes serve a corpus that fits in memory)."""
    size = check_positive_int(size, "chunk size")
    for start in range(0, len(texts), size):
        stop = start + size
        yield Chunk(texts[start:stop], None if labels is None else labels[start:stop],
                    None if persons is None else persons[start:stop])


# ------------------------------------------------------------------------------------------------ the maps


def vocabulary_map(matcher: TermMatcher, texts: Sequence[str], *, terms_per_doc: int,
                   max_chars: int | None) -> tuple[np.ndarray, int]:
    """A chunk's vocabulary partial: (per-term document counts of the first S distinct terms, documents
    truncated to ``max_chars``) — :func:`dpkps_core.method.pipeline.term_counts`' statistic on these documents."""
    counts = matcher.counts_first_distinct(texts, terms_per_doc, max_chars=max_chars)
    return counts, getattr(matcher, "last_truncated_count", 0)


def keyphrase_map(matcher: TermMatcher, texts: Sequence[str], labels: Sequence[str], *, classes: Sequence[str],
                  max_per_doc: int, max_chars: int | None) -> np.ndarray:
    """A chunk's keyphrase partial (document unit): the (C, |Ṽ|) class histograms of its documents."""
    keyphrases = matcher.occurrences(texts, max_per_doc, max_chars=max_chars)
    return class_keyphrase_histograms(keyphrases, labels, classes, len(matcher), max_per_doc=max_per_doc)


def _flat(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Per-document id lists as (lengths, flat ids) — compact int32 arrays for the person unit's grouping."""
    lengths = np.fromiter((len(x) for x in lists), dtype=np.int32, count=len(lists))
    flat = np.fromiter((t for x in lists for t in x), dtype=np.int32, count=int(lengths.sum()))
    return lengths, flat


_WORKER: dict[str, Any] = {}


def _init_worker(terms: Sequence[str]) -> None:
    """A pool worker's matcher, built once per worker (not once per chunk)."""
    _WORKER["matcher"] = TermMatcher(terms)


def _run(task: tuple[str, tuple[Any, ...], dict[str, Any]]) -> Any:
    """One map task in a pool worker, with the worker's matcher."""
    return _apply(_WORKER["matcher"], task)


def _apply(matcher: TermMatcher, task: tuple[str, tuple[Any, ...], dict[str, Any]]) -> Any:
    """One map task: its name, positional data and public settings."""
    name, args, kwargs = task
    if name == "vocabulary":
        return vocabulary_map(matcher, *args, **kwargs)
    if name == "keyphrases":
        return keyphrase_map(matcher, *args, **kwargs)
    if name == "first_distinct":
        texts, = args
        return _flat(matcher.first_distinct(texts, kwargs["terms_per_doc"], max_chars=kwargs["max_chars"])), \
            matcher.last_truncated_count
    if name == "occurrences":
        texts, = args
        return _flat(matcher.occurrences(texts, kwargs["max_per_doc"], max_chars=kwargs["max_chars"]))
    raise ParameterError(f"Unknown map task {name!r}.")


def run_maps(tasks: Iterable[tuple[str, tuple[Any, ...], dict[str, Any]]], *, terms: Sequence[str],
             workers: int | None = None, matcher: TermMatcher | None = None,
             engine: Any = None) -> Iterator[Any]:
    """Each task's result, in task order: inline for one worker (with ``matcher`` when given: a matcher of ``terms``
    already built, e.g. a vocabulary's own), else in a local process pool (at most ``2·workers`` tasks in flight, so
    memory holds a few chunks, not the corpus). The pool's workers start from a fresh interpreter (forkserver /
    spawn), safe in a threaded app. ``engine``: a ``dask.distributed`` client (or :func:`default_engine`'s) runs the
    same tasks on its cluster instead (:mod:`dpkps_core.method.distributed`); the reduce stays here, on the driver."""
    engine = default_engine() if engine is None else engine
    if engine is not None and engine is not LOCAL:
        from dpkps_core.method.distributed import run_maps_dask

        yield from run_maps_dask(tasks, terms=terms, client=engine, apply=_apply)
        return
    n = check_workers(workers)
    if n == 1:
        matcher = matcher if matcher is not None else TermMatcher(terms)
        for task in tasks:
            yield _apply(matcher, task)
        return
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_worker,
                                initargs=(tuple(terms),)) as pool:
        pending: deque[cf.Future[Any]] = deque()
        try:
            for task in tasks:
                with _without_host_main():
                    pending.append(pool.submit(_run, task))
                if len(pending) >= 2 * n:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for f in pending:
                f.cancel()


#: What the pool's workers see as ``__main__`` while they start: an empty module (no file, no spec).
_BARE_MAIN = types.ModuleType("__main__")
_MAIN_SWAP = threading.Lock()


@contextlib.contextmanager
def _without_host_main() -> Iterator[None]:
    """Start pool workers (they start inside ``submit``) without the host's ``__main__``: a forkserver/spawn worker
    re-runs the parent's main script by path, and under Streamlit that is the page being run (AppTest's even a
    temporary file since deleted) — a worker would run the page or break the pool. The workers need only this
    module's functions, so ``__main__`` is an empty module for the instant of the start, then the host's again."""
    with _MAIN_SWAP:
        host = sys.modules.get("__main__")
        sys.modules["__main__"] = _BARE_MAIN
        try:
            yield
        finally:
            if host is not None:
                sys.modules["__main__"] = host


#: ``engine=LOCAL`` runs the maps on this machine even where ``$DPKPS_DASK_SCHEDULER`` names a cluster.
LOCAL = "local"


def default_engine() -> Any:
    """The deployment's engine for the maps: a ``dask.distributed`` client of the cluster ``$DPKPS_DASK_SCHEDULER``
    names (:func:`dpkps_core.method.distributed.cluster_client`), else None (this machine's process pool)."""
    from dpkps_core.method.distributed import ENV_SCHEDULER, cluster_client

    return cluster_client() if os.environ.get(ENV_SCHEDULER, "").strip() else None


# ------------------------------------------------------------------------------------------------ person grouping


class PersonSpill:
    """An external hash partition of (person digest, value) rows (see the module docstring): :meth:`add` appends
    a chunk's rows, :meth:`partitions` yields each partition's rows (in the order they were added), the folder is
    removed by :meth:`close`. Person ids are digested under a key drawn here and never stored."""

    def __init__(self, *, partitions: int = DEFAULT_PARTITIONS, folder: str | os.PathLike[str] | None = None) -> None:
        self.n = check_positive_int(partitions, "partitions")
        self._key = secrets.token_bytes(32)
        self._dir = tempfile.TemporaryDirectory(prefix="dpkps-person-", dir=folder)
        self._paths = [Path(self._dir.name) / f"{i:04d}.bin" for i in range(self.n)]
        self._dtype = np.dtype([("hi", "<u8"), ("lo", "<u8"), ("value", "<i8")])
        self.rows = 0

    def digests(self, persons: Sequence[str]) -> np.ndarray:
        """The persons' keyed 128-bit digests (a structured (hi, lo) array)."""
        key = self._key
        raw = b"".join(hashlib.blake2b(str(p).encode("utf-8", "surrogatepass"), digest_size=16, key=key).digest()
                       for p in persons)
        return np.frombuffer(raw, dtype=_KEY_DTYPE)

    def add(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Append rows (one digest and one int64 value each) to their partitions."""
        if len(keys) != len(values):
            raise ParameterError("PersonSpill.add needs one value per digest.")
        if not len(keys):
            return
        rows = np.empty(len(keys), dtype=self._dtype)
        rows["hi"], rows["lo"], rows["value"] = keys["hi"], keys["lo"], values
        part = (keys["lo"] % np.uint64(self.n)).astype(np.int64)
        order = np.argsort(part, kind="stable")
        bounds = np.searchsorted(part[order], np.arange(self.n + 1))
        for i in range(self.n):
            if bounds[i] < bounds[i + 1]:
                with self._paths[i].open("ab") as fh:
                    rows[order[bounds[i]:bounds[i + 1]]].tofile(fh)
        self.rows += len(keys)

    def partitions(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Each non-empty partition as (dense person index per row, value per row), rows in the order added."""
        for path in self._paths:
            if not path.exists():
                continue
            rows = np.fromfile(path, dtype=self._dtype)
            keys = np.empty(len(rows), dtype=_KEY_DTYPE)
            keys["hi"], keys["lo"] = rows["hi"], rows["lo"]
            _, person = np.unique(keys, return_inverse=True)
            yield person.reshape(-1).astype(np.int64), rows["value"]

    def close(self) -> None:
        """Remove the temporary folder and its files."""
        self._dir.cleanup()

    def __enter__(self) -> "PersonSpill":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_distinct_per_person(person: np.ndarray, term: np.ndarray, terms_per_doc: int, n_terms: int) -> np.ndarray:
    """Per-term counts of each person's first S distinct terms over the rows in order (rows already in corpus
    order within each person): term_counts' person statistic, vectorised."""
    order = np.argsort(person, kind="stable")
    p, t = person[order], term[order]
    _, first = np.unique(p * n_terms + t, return_index=True)
    first.sort()  # the first occurrence of each (person, term), back in (person, corpus) order
    p, t = p[first], t[first]
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    rank = np.arange(len(p)) - np.repeat(starts, np.diff(np.r_[starts, len(p)]))
    return np.bincount(t[rank < terms_per_doc], minlength=n_terms).astype(np.int64)


def _weighted_per_person(person: np.ndarray, cell: np.ndarray, n_cells: int) -> np.ndarray:
    """Σ over occurrences of 1/(the person's total occurrences), per cell (class × term)."""
    totals = np.bincount(person).astype(np.float64)
    return np.bincount(cell, weights=1.0 / totals[person], minlength=n_cells)


# ------------------------------------------------------------------------------------------------ the passes


@dataclass(frozen=True)
class VocabularyCounts:
    """The vocabulary pass's result (PRIVATE until noised): per-term counts over V, documents read, documents
    truncated to ``LIMITS["max_chars_per_doc"]`` for matching."""

    counts: np.ndarray
    documents: int
    truncated: int


def _max_chars(max_chars: int | None | str) -> int | None:
    return LIMITS["max_chars_per_doc"] if max_chars == "default" else max_chars


def vocabulary_pass(chunks: Iterable[Any], terms: Sequence[str], *, terms_per_doc: int, by_person: bool = False,
                    workers: int | None = None, partitions: int = DEFAULT_PARTITIONS,
                    max_chars: int | None | str = "default",
                    progress: Callable[[int], None] | None = None, matcher: TermMatcher | None = None,
                    engine: Any = None) -> VocabularyCounts:
    """Step 1's statistic over a stream of chunks (each with ``texts`` and, for ``by_person``, ``persons``):
    map = a chunk's first-S-distinct counts, reduce = their sum; with ``by_person`` each person's first S distinct
    terms over all their documents in corpus order, grouped by :class:`PersonSpill`. Equal to
    :func:`dpkps_core.method.pipeline.term_counts` on the concatenated documents. ``progress`` gets the documents done;
    ``matcher`` (a matcher of ``terms``) and ``engine`` as in :func:`run_maps`."""
    s = check_positive_int(terms_per_doc, "S (terms per document)")
    limit = _max_chars(max_chars)
    in_flight: deque[tuple[int, Sequence[str] | None]] = deque()  # (documents, persons) of chunks being mapped

    def tasks() -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        for chunk in chunks:
            if not len(chunk.texts):
                continue
            if by_person and chunk.persons is None:
                raise ParameterError("The person unit needs each chunk's persons.")
            in_flight.append((len(chunk.texts), chunk.persons if by_person else None))
            yield ("first_distinct" if by_person else "vocabulary", (list(chunk.texts),),
                   {"terms_per_doc": s, "max_chars": limit})

    total = np.zeros(len(terms), dtype=np.int64)
    documents = truncated = 0
    spill = PersonSpill(partitions=partitions) if by_person else None
    try:
        for result in run_maps(tasks(), terms=terms, workers=workers, matcher=matcher, engine=engine):
            n, persons = in_flight.popleft()
            if spill is None:
                counts, cut = result
                total += counts
            else:
                (lengths, flat), cut = result
                spill.add(np.repeat(spill.digests(persons or ()), lengths), flat.astype(np.int64))
            documents += n
            truncated += cut
            if progress:
                progress(documents)
        if spill is not None:
            for person, term in spill.partitions():
                total += _first_distinct_per_person(person, term, s, len(terms))
    finally:
        if spill is not None:
            spill.close()
    return VocabularyCounts(total, documents, truncated)


def keyphrase_pass(chunks: Iterable[Any], terms: Sequence[str], *, classes: Sequence[str], max_per_doc: int,
                   by_person: bool = False, workers: int | None = None, partitions: int = DEFAULT_PARTITIONS,
                   max_chars: int | None | str = "default",
                   progress: Callable[[int], None] | None = None, engine: Any = None) -> np.ndarray:
    """Step 3's statistic over a stream of chunks (``texts``, ``labels``, and for ``by_person`` ``persons``) and
    the released Ṽ (``terms``): the (C, |Ṽ|) class keyphrase histograms of
    :func:`dpkps_core.dp.contributions.class_keyphrase_histograms` with each document's first ``max_per_doc``
    occurrences — document unit: per-chunk partials summed; person unit: every occurrence weighs 1/(the person's
    total over all their documents of declared classes), grouped by :class:`PersonSpill`."""
    m = check_positive_int(max_per_doc, "M (keyphrases per document)")
    limit = _max_chars(max_chars)
    class_index = {c: i for i, c in enumerate(classes)}
    n_cells = len(classes) * len(terms)
    in_flight: deque[Any] = deque()

    def tasks() -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        for chunk in chunks:
            if not len(chunk.texts):
                continue
            if chunk.labels is None or (by_person and chunk.persons is None):
                raise ParameterError("The keyphrase pass needs each chunk's labels (and persons for the person unit).")
            in_flight.append(chunk)
            if by_person:
                yield "occurrences", (list(chunk.texts),), {"max_per_doc": m, "max_chars": limit}
            else:
                yield "keyphrases", (list(chunk.texts), list(chunk.labels)), {
                    "classes": tuple(classes), "max_per_doc": m, "max_chars": limit}

    total = np.zeros(n_cells, dtype=np.float64)
    documents = 0
    spill = PersonSpill(partitions=partitions) if by_person else None
    try:
        for result in run_maps(tasks(), terms=terms, workers=workers, engine=engine):
            chunk = in_flight.popleft()
            if spill is None:
                total += result.reshape(-1)
            else:
                found, flat = result
                doc_class = np.fromiter((class_index.get(y, -1) for y in chunk.labels), dtype=np.int64,
                                        count=len(chunk.labels))
                lengths = np.where(doc_class >= 0, found, 0)  # documents of undeclared labels count nothing
                keep = np.repeat(doc_class >= 0, found)
                cells = np.repeat(doc_class, lengths) * len(terms) + flat[keep]
                spill.add(np.repeat(spill.digests(chunk.persons), lengths), cells)
            documents += len(chunk.texts)
            if progress:
                progress(documents)
        if spill is not None:
            for person, cell in spill.partitions():
                total += _weighted_per_person(person, cell, n_cells)
    finally:
        if spill is not None:
            spill.close()
    return total.reshape(len(classes), len(terms))


def occurrences_pass(chunks: Iterable[Any], terms: Sequence[str], *, max_per_doc: int, workers: int | None = None,
                     max_chars: int | None | str = "default", progress: Callable[[int], None] | None = None,
                     matcher: TermMatcher | None = None, engine: Any = None) -> Keyphrases:
    """Step 2 over a stream of chunks (``texts``) and the released Ṽ (``terms``): each document's first
    ``max_per_doc`` matches of Ṽ in text order, repeats kept ([DP-KPS] §2 Step 2; docs/DESIGN.md §2.2) — map = a
    chunk's matches as compact (lengths, ids) arrays, reduce = their concatenation in chunk order, so the result is
    the same for any chunk size and worker count, and equal to
    :meth:`~dpkps_core.method.matching.TermMatcher.occurrences` on the concatenated documents. The densities' sums are
    then taken over these (4 bytes per document and per keyphrase) in one vectorised pass
    (:func:`~dpkps_core.dp.contributions.class_keyphrase_histograms`), whatever the unit of privacy."""
    m = check_positive_int(max_per_doc, "M (keyphrases per document)")
    limit = _max_chars(max_chars)

    def tasks() -> Iterator[tuple[str, tuple[Any, ...], dict[str, Any]]]:
        for chunk in chunks:
            if len(chunk.texts):
                yield "occurrences", (list(chunk.texts),), {"max_per_doc": m, "max_chars": limit}

    parts: list[Keyphrases] = []
    documents = 0
    for lengths, flat in run_maps(tasks(), terms=terms, workers=workers, matcher=matcher, engine=engine):
        parts.append(Keyphrases(lengths, flat))
        documents += len(lengths)
        if progress:
            progress(documents)
    return Keyphrases.concat(parts)
