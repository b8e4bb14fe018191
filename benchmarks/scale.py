"""Scale benchmark (issue 31): ``python -m benchmarks.scale [--sizes N …] [--2m] [--workers W] [--by-person]
[--sample | --sample-only]``.

Builds N-row CSV corpora from the public BBC demo's sentences (5 sentences of one class per row, 5 classes, a
synthetic person column: 3 rows per person) — 100,000 and 1,000,000 rows by default, 2,000,000 with ``--2m`` —
and times, each in a fresh child process (so its peak RSS is its own), the streaming DP statistics:

1. reading + the vocabulary pass (:class:`dpkps_core.corpus.stream.CorpusStream` chunks → each document's first
   S = 10 distinct terms of V = GloVe's 50,000 most frequent terms, :func:`dpkps_core.method.streaming_counts.vocabulary_pass`);
2. reading again + the keyphrase pass over Ṽ (the 1,000 most counted terms; no noise — a timing, not a release),
   :func:`dpkps_core.method.streaming_counts.keyphrase_pass` with M = 10.

With ``--sample`` (or ``--sample-only``), ``dpkps sample`` itself on each corpus (:func:`child_sample`: the streamed
file, the persistent ledger's admissions, both passes, the noise, the sequences, the run folder). With ``--ledger``
(or ``--ledger-only``), the ledger's side alone (:func:`child_ledger`): the preparing pass, the keying of every
document's units (32-byte keyed digests, chunk by chunk), the admission of every document and of the training part,
with the process's RSS after each.

Beside them, at the smallest size, today's in-memory path: :func:`dpkps_core.corpus.load_corpus` then
:func:`dpkps_core.method.pipeline.term_counts` and the in-memory keyphrase histograms. Each row prints seconds,
documents/s and peak RSS (the driver's, and the driver's plus its pool workers' together, sampled). Prints no document text (the corpora are
public demo data anyway). The corpora are written to ``--folder`` (default: a folder in the system's temporary
folder, reused across runs).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

SENTENCES_PER_ROW = 5
ROWS_PER_PERSON = 3
S, N_TILDE, M = 10, 1000, 10


def build_corpus(path: Path, rows: int, *, seed: int = 0) -> Path:
    """An N-row CSV (text, label, patient) of BBC demo sentences, written a block of rows at a time."""
    from dpkps_core.corpus import load_demo_corpus

    demo = load_demo_corpus("bbc")
    pools: dict[str, list[str]] = {}
    for text, label in zip(demo.texts, demo.labels):
        pools.setdefault(label, []).extend(s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s) > 20)
    classes = sorted(pools)
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".partial")
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label", "patient"])
        for start in range(0, rows, 50_000):
            n = min(50_000, rows - start)
            for i in range(start, start + n):
                label = classes[i % len(classes)]
                pool = pools[label]
                picks = rng.integers(0, len(pool), size=SENTENCES_PER_ROW)
                w.writerow([" ".join(pool[k] for k in picks), label, f"P{i // ROWS_PER_PERSON:08d}"])
    tmp.replace(path)
    return path


class TreeRSS:
    """The peak of this process's RSS plus its descendants' (the pool's workers and its forkserver), sampled every
    0.2 s in a thread with psutil; without psutil only this process's own peak (getrusage) is known."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        try:
            import psutil
        except ImportError:  # pragma: no cover - psutil is pinned
            return
        me = psutil.Process()
        while not self._stop.wait(0.2):
            total = 0
            for proc in [me, *me.children(recursive=True)]:
                try:
                    total += proc.memory_info().rss
                except psutil.Error:
                    continue
            self.peak = max(self.peak, total / 2**20)

    def __enter__(self) -> "TreeRSS":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _peak_mb(tree: TreeRSS) -> tuple[float, float]:
    """(this process's peak RSS, the peak of it and its descendants together) in MB (Linux reports KB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return own, max(own, tree.peak)


def _classes() -> tuple[str, ...]:
    """The BBC demo's public class names (the corpora's labels)."""
    from dpkps_core.corpus import load_demo_corpus

    return tuple(load_demo_corpus("bbc").classes)


def _vocabulary() -> Any:
    from dpkps_core.method.config import SamplingConfig, load_vocabulary_for

    return load_vocabulary_for(SamplingConfig(vocabulary="glove"))


def child_stream(path: Path, *, workers: int | None, chunk_rows: int, by_person: bool) -> dict[str, Any]:
    """The streaming statistics in this process (see the module docstring)."""
    from dpkps_core.corpus.stream import CorpusStream
    from dpkps_core.method.streaming_counts import check_workers, keyphrase_pass, vocabulary_pass

    vocab, classes = _vocabulary(), _classes()
    person = "patient" if by_person else None
    with TreeRSS() as tree:
        t0 = time.perf_counter()
        stream = CorpusStream(path, person_column=person, max_bytes=0, max_documents=0, chunk_rows=chunk_rows)
        voc = vocabulary_pass(stream.chunks(), vocab.terms, terms_per_doc=S, by_person=by_person, workers=workers)
        t1 = time.perf_counter()
        assert stream.report is not None
        tilde = tuple(vocab.terms[i] for i in np.argsort(-voc.counts, kind="stable")[:N_TILDE])
        hist = keyphrase_pass(stream.chunks(), tilde, classes=classes, max_per_doc=M, by_person=by_person,
                              workers=workers)
        t2 = time.perf_counter()
    own, kids = _peak_mb(tree)
    return {"mode": "stream" + (" (person unit)" if by_person else ""), "documents": voc.documents,
            "read_vocabulary_s": t1 - t0, "read_keyphrases_s": t2 - t1, "total_s": t2 - t0,
            "peak_rss_mb": own, "tree_peak_rss_mb": kids, "workers": check_workers(workers),
            "digests": stream.digests, "hist_total": float(hist.sum())}


def child_in_memory(path: Path, *, by_person: bool) -> dict[str, Any]:
    """Today's in-memory path in this process: load_corpus, then the pipeline's in-memory statistics."""
    from dpkps_core.corpus import load_corpus
    from dpkps_core.dp.contributions import class_keyphrase_histograms
    from dpkps_core.method.matching import TermMatcher
    from dpkps_core.method.pipeline import term_counts

    vocab, classes = _vocabulary(), _classes()
    with TreeRSS() as tree:
        t0 = time.perf_counter()
        # limits far above the corpus (not 0 = none, which the loader before issue 31 did not take: --child
        # in-memory also times that loader when run from a checkout of it)
        corpus = load_corpus(path, person_column="patient" if by_person else None, max_bytes=2**50,
                             max_documents=2**40)
        groups = corpus.persons if by_person else None
        counts = term_counts(corpus.texts, vocab, terms_per_doc=S, groups=groups)
        t1 = time.perf_counter()
        tilde = tuple(vocab.terms[i] for i in np.argsort(-counts, kind="stable")[:N_TILDE])
        keyphrases = TermMatcher(tilde).occurrences(corpus.texts, M)
        hist = class_keyphrase_histograms(keyphrases, corpus.labels, classes, len(tilde),
                                          max_per_doc=M, groups=groups)
        t2 = time.perf_counter()
    own, kids = _peak_mb(tree)
    return {"mode": "in-memory" + (" (person unit)" if by_person else ""), "documents": len(corpus),
            "read_vocabulary_s": t1 - t0, "read_keyphrases_s": t2 - t1, "total_s": t2 - t0, "peak_rss_mb": own,
            "tree_peak_rss_mb": kids, "workers": 1, "digests": len(corpus), "hist_total": float(hist.sum())}


def child_sample(path: Path, *, workers: int | None, chunk_rows: int, by_person: bool) -> dict[str, Any]:
    """``dpkps sample`` itself in this process (the CLI's main, default settings: GloVe's 50,000 terms, N = 1,000,
    the smoothed DP histogram, OpenDP noise, MiniLM for Ṽ), on the streamed file: the preparing pass (split, units),
    the persistent ledger's admissions (in a throwaway ledger folder), both streaming passes, the noise, the
    sequences and the run folder. ``--max-documents 0 --max-corpus-bytes 0``: no limit."""
    import contextlib
    import io
    import os

    from dpkps_core.cli.main import main as cli_main
    from dpkps_core.method.streaming_counts import check_workers

    with tempfile.TemporaryDirectory(prefix="dpkps-scale-") as tmp:
        os.environ["DPKPS_LEDGER_DIR"] = str(Path(tmp) / "ledger")
        os.environ["DPKPS_CHUNK_ROWS"] = str(chunk_rows)
        if workers:
            os.environ["DPKPS_WORKERS"] = str(workers)
        argv = ["sample", "--corpus", str(path), "--classes", ",".join(_classes()), "--max-documents", "0",
                "--max-corpus-bytes", "0", "--out", str(Path(tmp) / "run")] + (
            ["--person-column", "patient"] if by_person else [])
        out = io.StringIO()
        with TreeRSS() as tree, contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            t0 = time.perf_counter()
            code = cli_main(argv)
            t1 = time.perf_counter()
        if code != 0:
            raise SystemExit(f"dpkps sample failed with exit code {code}")
        split = json.loads((Path(tmp) / "run" / "split.json").read_text())
    own, kids = _peak_mb(tree)
    documents = len(split["train"]) + len(split["test"]) + len(split["client"])
    return {"mode": "dpkps sample" + (" (person unit)" if by_person else ""), "documents": documents,
            "read_vocabulary_s": float("nan"), "read_keyphrases_s": float("nan"), "total_s": t1 - t0,
            "peak_rss_mb": own, "tree_peak_rss_mb": kids, "workers": check_workers(workers),
            "digests": documents, "hist_total": float("nan")}


def _rss_mb() -> float:
    """This process's resident memory now (MB; Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm", encoding="ascii") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def child_ledger(path: Path, *, chunk_rows: int, by_person: bool) -> dict[str, Any]:
    """The ledger's side of ``dpkps sample`` in this process (issue 31), no model loaded: the preparing pass
    (:class:`~dpkps_core.method.training_source.StreamedCorpus`), the keying of its units by one pass (what the first
    admission of a run does), an admission of EVERY document's units into a throwaway persistent ledger, then two
    admissions of the training part (the run's ε_voc and ε_kde releases); seconds and RSS (MB) after each."""
    import os

    from dpkps_core.corpus.stream import CorpusStream
    from dpkps_core.ledger_store import LedgerStore, open_corpus_ledger
    from dpkps_core.method.budget import admitted_indices
    from dpkps_core.method.config import SamplingConfig
    from dpkps_core.method.training_source import StreamedCorpus

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="dpkps-scale-") as tmp:
        os.environ["DPKPS_LEDGER_DIR"] = str(Path(tmp) / "ledger")
        config = SamplingConfig(corpus=str(path), classes=_classes(),
                                person_column="patient" if by_person else None).validate()
        with TreeRSS() as tree:
            t0 = time.perf_counter()
            stream = CorpusStream(path, person_column="patient" if by_person else None, max_bytes=0,
                                  max_documents=0, chunk_rows=chunk_rows)
            corpus = StreamedCorpus.open(stream, config)
            t1 = time.perf_counter()
            out["prepare"] = (t1 - t0, _rss_mb())
            store = LedgerStore()
            keys = corpus.units.keys_under(store.keys)
            t2 = time.perf_counter()
            out["keying"] = (t2 - t1, _rss_mb())
            ledger = open_corpus_ledger(corpus.units, tool="benchmark", cap=20.0, store=store)
            idx, _ = admitted_indices(corpus.units, ledger, 1.0, what="every document")
            t3 = time.perf_counter()
            out["admit every document"] = (t3 - t2, _rss_mb())
            for name, eps in (("admit the training part (1)", 1.0), ("admit the training part (2)", 1.0)):
                t = time.perf_counter()
                admitted_indices(corpus.units.take(corpus.train_index), ledger, eps, what=name)
                out[name] = (time.perf_counter() - t, _rss_mb())
            t4 = time.perf_counter()
        key_bytes = keys.documents.nbytes + (0 if keys.persons is None else keys.persons.nbytes)
        documents, admitted, training = corpus.documents, len(idx), len(corpus.train_index)
    own, kids = _peak_mb(tree)
    return {"mode": "ledger" + (" (person unit)" if by_person else ""), "documents": documents,
            "read_vocabulary_s": float("nan"), "read_keyphrases_s": float("nan"), "total_s": t4 - t0,
            "peak_rss_mb": own, "tree_peak_rss_mb": kids, "workers": 1, "digests": documents,
            "hist_total": float("nan"), "stages": out, "admitted": admitted, "training": training,
            "key_bytes_per_document": key_bytes / max(documents, 1)}


def ledger_key_bytes_per_document(n: int = 30_000, *, rows_per_person: int = ROWS_PER_PERSON) -> tuple[float, float]:
    """Memory of the ledger's keys per document, measured on ``n`` synthetic rows keyed by a throwaway key: (the
    document unit without a person column, with one: the person keys and each row's person code too)."""
    import os

    from dpkps_core.ledger_store import UnitKeysBuilder
    from dpkps_core.ledger_store.folder import _UnitHasher

    keys_of = _UnitHasher(os.urandom(32)).keys
    out = []
    for with_persons in (False, True):
        builder = UnitKeysBuilder(keys_of, kind="document", with_persons=with_persons)
        builder.add_documents([f"document\x1fnote {i}" for i in range(n)])
        persons = -(-n // rows_per_person)
        builder.add_persons([f"person\x1fP{i:08d}" for i in range(persons)])
        keys = builder.build(np.arange(n, dtype=np.int64) // rows_per_person if with_persons else None)
        size = keys.documents.nbytes + (0 if keys.persons is None else keys.persons.nbytes + keys.person_of.nbytes)
        out.append(size / n)
    return out[0], out[1]


def _run_child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "benchmarks.scale", "--child", *args], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"benchmark child failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def digest_bytes_per_document(n: int = 200_000) -> float:
    """Memory of the loader's de-duplication state per kept row: a set of 16-byte digests (measured)."""
    import os

    digests = {os.urandom(16) for _ in range(n)}
    return (sys.getsizeof(digests) + sum(sys.getsizeof(d) for d in digests)) / n


def _seconds(value: float) -> str:
    return "–" if value != value else f"{value:.1f}"  # NaN: not measured apart


def _row(size: int, r: dict[str, Any]) -> str:
    rate = r["documents"] / r["total_s"] if r["total_s"] else float("inf")
    return (f"| {size:,} | {r['mode']} | {r['workers']} | {_seconds(r['read_vocabulary_s'])} | "
            f"{_seconds(r['read_keyphrases_s'])} "
            f"| {r['total_s']:.1f} | {rate:,.0f} | {r['peak_rss_mb']:,.0f} | {r['tree_peak_rss_mb']:,.0f} |")


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Build the corpora, time each measurement in a child process, print the table; return the rows."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="rows per corpus")
    p.add_argument("--2m", dest="two_m", action="store_true", help="add the 2,000,000-row corpus")
    p.add_argument("--workers", type=int, default=None, help="process-pool workers (default: the usable CPUs)")
    p.add_argument("--chunk-rows", type=int, default=20_000, help="rows per chunk (default %(default)s)")
    p.add_argument("--by-person", action="store_true", help="the person unit (column 'patient', 3 rows each)")
    p.add_argument("--skip-in-memory", action="store_true", help="do not time the in-memory path")
    p.add_argument("--sample", action="store_true", help="also time `dpkps sample` itself on each corpus")
    p.add_argument("--sample-only", action="store_true", help="time only `dpkps sample` (implies --skip-in-memory)")
    p.add_argument("--ledger", action="store_true", help="also time the ledger's side alone: preparing pass, keying, "
                   "admissions of every document and of the training part (no model loaded)")
    p.add_argument("--ledger-only", action="store_true", help="time only the ledger's side (implies --skip-in-memory)")
    p.add_argument("--folder", type=Path, default=Path(tempfile.gettempdir()) / "dpkps-scale",
                   help="where the corpora are written (reused when present)")
    p.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        mode, path = args.child[0], Path(args.child[1])
        child = {"in-memory": lambda: child_in_memory(path, by_person=args.by_person),
                 "ledger": lambda: child_ledger(path, chunk_rows=args.chunk_rows, by_person=args.by_person),
                 "sample": lambda: child_sample(path, workers=args.workers, chunk_rows=args.chunk_rows,
                                                by_person=args.by_person),
                 "stream": lambda: child_stream(path, workers=args.workers, chunk_rows=args.chunk_rows,
                                                by_person=args.by_person)}[mode]
        result = child()
        print(json.dumps(result))
        return [result]
    sizes = sorted(set(args.sizes + ([2_000_000] if args.two_m else [])))
    args.folder.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    print("| rows | path | workers | read + vocabulary pass (s) | read + keyphrase pass (s) | total (s) | "
          "documents/s | peak RSS (MB) | with workers (MB) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    extra = ["--chunk-rows", str(args.chunk_rows)] + (["--by-person"] if args.by_person else []) + (
        ["--workers", str(args.workers)] if args.workers else [])
    for size in sizes:
        path = args.folder / f"bbc-{size}.csv"
        if not path.exists():
            t = time.perf_counter()
            build_corpus(path, size)
            print(f"(built {path.name}: {path.stat().st_size / 2**20:,.0f} MB in {time.perf_counter() - t:.0f} s)")
        only = args.sample_only or args.ledger_only
        modes = (["stream"] if not only else []) + (["sample"] if args.sample or args.sample_only else []) + (
            ["ledger"] if args.ledger or args.ledger_only else [])
        for mode in modes:
            result = _run_child([mode, str(path), *extra])
            result["rows"] = size
            rows.append(result)
            print(_row(size, result), flush=True)
            if mode == "ledger":
                stages = "; ".join(f"{name} {sec:.1f} s, RSS {mb:,.0f} MB"
                                   for name, (sec, mb) in result["stages"].items())
                print(f"  ledger stages ({result['documents']:,} documents, {result['training']:,} training): "
                      f"{stages}; keys {result['key_bytes_per_document']:.0f} bytes per document", flush=True)
        if size == sizes[0] and not (args.skip_in_memory or only):
            mem = _run_child(["in-memory", str(path), *extra])
            mem["rows"] = size
            rows.append(mem)
            print(_row(size, mem), flush=True)
    print(f"de-duplication state: {digest_bytes_per_document():.0f} bytes per kept document (a set of 16-byte "
          "digests)")
    plain, with_persons = ledger_key_bytes_per_document()
    print(f"ledger keys: {plain:.0f} bytes per document (keyed digests), {with_persons:.1f} with a person column "
          f"({ROWS_PER_PERSON} rows per person: its key and each row's person code)")
    return rows


if __name__ == "__main__":
    main()
