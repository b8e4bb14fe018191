"""The app's actions for pages 1–5: each reads the session (``studio.session``), calls the ``dpkps_core`` step and
writes what it returned to the run folder — the same core functions the CLI runs, so the same numbers.

Each DP step charges the session's :class:`PrivacyLedger` (inside the core function) and clears the session results
that depended on the previous output (``session.clear_after``); the ledger is never cleared. The LLM step (page 6)
is in ``studio.generation_steps``, the evaluation jobs (page 7) in ``studio.evaluation_steps``, reopening, exporting
and deleting runs (page 8) in ``studio.runs``.

The run folder is the state (docs/ARCHITECTURE.md, ``dpkps_core.records.runfolder``): Ṽ is written to a fresh run folder the
moment it is released, the densities and the sequences beside it (a later step that would overwrite what an earlier
chain holds starts a new folder with a copy of what it builds on, ``studio.run_writes``), and the pages read them
back through ``studio.run_view`` — the session keeps no second copy (docs/DESIGN.md §2.0: reading DP outputs back is
post-processing).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from dpkps_core.method import pipeline

from dpkps_core.records import runfolder
from dpkps_core.corpus import DEMO_SPECS, Corpus, check_encoding, list_columns, load_corpus, suggest_columns
from dpkps_core.corpus.data_folder import data_root, list_data_entries, resolve_data_entry, streams
from dpkps_core.corpus.stream import CorpusStream
from dpkps_core.method.config import LIMITS, build_sampling_config
from dpkps_core.method.training_source import StreamedCorpus
from dpkps_core.progress import format_duration
from dpkps_core.method.density_plan import density_plan
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import PrivateVocabulary, check_vocabulary_settings
from dpkps_core.errors import CorpusError, ParameterError, VocabularyError
from dpkps_core.ledger_store import PersistentLedger
from dpkps_core.records.runfolder import DENSITY_FILE, DOCUMENTS_FILE, RUN_STATE_FILE, SEQUENCES_FILE, VOCABULARY_FILE, RunFolder
from dpkps_core.method.sampling import SamplingOutcome
from studio import run_view, spend
from studio.defaults import (DOC_TYPE_FOR_DEMO, MAX_UPLOAD_BYTES, USER_CORPUS_SOURCES, is_user_corpus,
                             reset_corpus_settings)
from studio.jobs import ChunkMeter, Job, start_job
from studio.resources import cached_vocabulary, demo_corpus, embedder, embedding_cache
from studio.accounting import forecast_event_ids, record_step, recorded_event_ids, reserve_plan, run_account
from studio.run_writes import abandon_run_dir, new_run_dir, run_state_base, save_densities, write_run_state
from studio.session import (UNDECLARED_CLASSES, StreamedView, clear_after, content_digest, corpus, current_config,
                            is_streamed, ledger, noise, notice, open_streamed, privacy_unit, public_vocabulary,
                            remember_term_counts, run_dir, ss, term_counts, test_part, train_part,
                            update_content_digest)

# ============================================================================================ 1. corpus

def ensure_corpus() -> Corpus | None:
    """The current corpus; on a first visit the preselected demo corpus is loaded."""
    s = ss()
    if s.get("corpus") is None and s.get("corpus_source") == "demo":
        load_demo(s["demo_spec"])
    return s.get("corpus")


def load_demo(spec: str) -> Corpus:
    if spec not in DEMO_SPECS:
        raise CorpusError(f"Unknown demo corpus {spec!r}.")
    _refuse_while_stepping()
    c = demo_corpus(spec)
    _set_corpus(c, cid=spec, spec=spec, fingerprint=None, text_column=None, label_column=None, filename=None)
    ss()["loaded_encoding"] = "utf-8"
    if not ss().get("doc_type"):
        ss()["doc_type"] = DOC_TYPE_FOR_DEMO.get(spec, "a document")
    return c


def upload_columns(data: bytes, filename: str, *, encoding: str = "utf-8"
                   ) -> tuple[list[str], str | None, str | None]:
    """Columns of an uploaded table and the loader's guesses; ([], None, None) for a ZIP of .txt files.
    ``encoding``: the user's choice on page 1 (the whole file is decoded with it; docs/DESIGN.md §1)."""
    if filename.lower().endswith(".zip") or data[:4] == b"PK\x03\x04":
        return [], None, None
    cols = list_columns(data, filename=filename, max_bytes=MAX_UPLOAD_BYTES, encoding=encoding)
    text, label = suggest_columns(data, filename=filename, encoding=encoding)
    return cols, text, label


def load_upload(data: bytes, filename: str, *, text_column: str | None, label_column: str | None,
                person_column: str | None = None, encoding: str = "utf-8") -> Corpus:
    """Load and validate an uploaded PRIVATE corpus (kept in this session's memory only). With
    ``person_column`` the unit of privacy is the person (docs/DESIGN.md §2); ``encoding`` is the user's choice on page 1."""
    _refuse_while_stepping()
    c = load_corpus(data, filename=filename, text_column=text_column, label_column=label_column,
                    max_bytes=MAX_UPLOAD_BYTES, person_column=person_column or None, encoding=encoding)
    _set_file_corpus(c, "upload", Path(filename).name, hashlib.sha256(data).hexdigest(), text_column=text_column,
                     label_column=label_column, person_column=person_column, encoding=encoding)
    return c


def server_data_dir() -> Path | None:
    """The deployment's data folder (``$DPKPS_DATA_DIR``), or None when this server has none."""
    return data_root()


def server_entries() -> list[Any]:
    """The corpora of the server's data folder (names, kinds, sizes; nothing is read)."""
    root = data_root()
    return list_data_entries(root) if root is not None else []


def server_entry(name: str) -> Path:
    """The entry ``name`` of the deployment's data folder (``$DPKPS_DATA_DIR``; names only, no traversal)."""
    root = data_root()
    if root is None:
        raise ParameterError("This server has no data folder (the deployment sets $DPKPS_DATA_DIR).")
    return resolve_data_entry(root, name)


def server_columns(name: str, *, encoding: str = "utf-8") -> tuple[list[str], str | None, str | None]:
    """Columns of a corpus in the server's data folder and the loader's guesses (names only); ([], None, None) for
    a ZIP of .txt files."""
    path = server_entry(name)
    if path.is_file() and path.suffix.lower() == ".zip":
        return [], None, None
    text, label = suggest_columns(path, encoding=encoding)
    return list_columns(path, encoding=encoding), text, label


def load_server(name: str, *, text_column: str | None, label_column: str | None, person_column: str | None = None,
                encoding: str = "utf-8", progress: Callable[[float, str], None] | None = None
                ) -> Corpus | StreamedView:
    """Load a PRIVATE corpus from the server's data folder through the one (streaming) loader, under the
    deployment's limits ($DPKPS_MAX_CORPUS_BYTES / $DPKPS_MAX_DOCUMENTS), not the browser's upload cap. A corpus
    above ``$DPKPS_STREAM_ABOVE_BYTES`` (``dpkps_core.corpus.data_folder.streams``) is not held whole: one
    preparing pass (``progress`` hears it) decides its split, units and summary, and each DP step reads it again
    in chunks (:func:`load_streamed`)."""
    _refuse_while_stepping()
    path = server_entry(name)
    if streams(path):
        return load_streamed(path, name, text_column=text_column, label_column=label_column,
                             person_column=person_column, encoding=encoding, progress=progress)
    c = load_corpus(path, text_column=text_column, label_column=label_column, person_column=person_column or None,
                    encoding=encoding)
    _set_file_corpus(c, "server", name, _content_sha256(path), text_column=text_column, label_column=label_column,
                     person_column=person_column, encoding=encoding)
    return c


def _content_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, or of a folder's parts in name order (read in 1 MiB blocks; PRIVATE)."""
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink())
    for f in files:
        h.update(str(f.relative_to(path) if f != path else f.name).encode("utf-8", "surrogatepass") + b"\x00")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


class _SummarisingStream(CorpusStream):
    """A :class:`CorpusStream` whose FIRST pass also gathers page 1's private summary of a streamed corpus — labels
    counted, words and over-long flags per document, the content digest (``session.update_content_digest``) — so
    that the preparing pass (:meth:`StreamedCorpus.open`) is the only read at load. Later passes are the plain
    stream's. Holds counts and flags only, never text (PRIVATE, session memory)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.summarised = False
        self.rows = 0
        self.labels: Counter[str] = Counter()
        self._words: list[np.ndarray] = []
        self._long: list[np.ndarray] = []
        self._sample_labels: list[str] = []
        self.digest = content_digest()

    def chunks(self) -> Iterator[Any]:
        if self.summarised:
            yield from super().chunks()
            return
        limit = LIMITS["max_chars_per_doc"]
        for chunk in super().chunks():
            n = len(chunk.texts)
            self._words.append(np.fromiter((len(t.split()) for t in chunk.texts), dtype=np.int32, count=n))
            self._long.append(np.fromiter((limit is not None and len(t) > limit for t in chunk.texts), dtype=bool,
                                          count=n))
            self.labels.update(chunk.labels)
            self._sample_labels.extend(chunk.labels[i] for i in range(-self.rows % SAMPLE_EVERY, n, SAMPLE_EVERY))
            update_content_digest(self.digest, chunk.texts, chunk.labels, chunk.persons)
            self.rows += n
            yield chunk
        self.summarised = True

    def summary(self) -> dict[str, Any]:
        """Page 1's figures (``dpkps_core.corpus.corpus_summary``'s keys); ``words``/``word_labels``: every
        :data:`SAMPLE_EVERY`-th document's length and label, for the length chart."""
        words = np.concatenate(self._words) if self._words else np.zeros(0, dtype=np.int32)
        return {"documents": int(words.size), "classes": len(self.labels),
                "class_counts": {c: self.labels[c] for c in sorted(self.labels)},
                "words_median": float(np.median(words)) if words.size else 0.0,
                "words_max": int(words.max()) if words.size else 0,
                "words": words[::SAMPLE_EVERY].copy(), "word_labels": list(self._sample_labels)}

    def long_flags(self) -> np.ndarray:
        return np.concatenate(self._long) if self._long else np.zeros(0, dtype=bool)


#: Every how many documents page 1's length chart of a streamed corpus takes one (a chart of a million points
#: would be a page of tens of megabytes; a regular sample of about 50,000 shows the same shape).
SAMPLE_EVERY = 20


def load_streamed(path: Path, name: str, *, text_column: str | None, label_column: str | None,
                  person_column: str | None = None, encoding: str = "utf-8",
                  progress: Callable[[float, str], None] | None = None) -> StreamedView:
    """A data-folder corpus as a :class:`~studio.session.StreamedView`: one pass — the core's preparing pass
    (:meth:`StreamedCorpus.open`: split, units, labels) with page 1's summary gathered on the way — and no document
    text kept. Its public classes are declared afterwards (:func:`declare_classes`, no new read)."""
    fp = _content_sha256(path)
    cid = _corpus_id("server", fp, text_column, label_column, person_column, encoding)
    s = ss()
    if s.get("corpus_id") == cid and isinstance(s.get("corpus"), StreamedView):
        return s["corpus"]
    person = person_column or None
    stream = _SummarisingStream(path, text_column=text_column, label_column=label_column, person_column=person,
                                encoding=encoding)
    tf = float(s["test_fraction"])
    cfg = build_sampling_config(classes=UNDECLARED_CLASSES, test_fraction=tf, person_column=person)
    start = time.monotonic()

    def report(fraction: float, message: str) -> None:  # documents, rows/s and the time left at that rate
        if progress is None:
            return
        seconds = time.monotonic() - start
        rate = stream.rows / seconds if seconds > 0 else 0.0
        left = seconds * (1 - fraction) / fraction if fraction > 0 else float("nan")
        progress(fraction, f"Reading the corpus (split, units, summary): {stream.rows:,} documents · "
                           f"{rate:,.0f} rows/s · " + (format_duration(left, approximate=True) + " left"
                                                        if fraction > 0 else "time left: measuring"))

    prepared = open_streamed(stream, cfg, report)
    view = StreamedView(prepared=prepared, name=Path(stream.display).stem or "corpus", source=stream.display,
                        summary=stream.summary(), long=stream.long_flags(), content_sha256=stream.digest.hexdigest(),
                        test_fraction=tf, person_column=person,
                        text_column=stream.text_column if stream.tabular else None,
                        label_column=stream.label_column if stream.tabular else None)
    _set_file_corpus(view, "server", name, fp, text_column=text_column, label_column=label_column,
                     person_column=person_column, encoding=encoding)
    return view


def _corpus_id(source: str, fp: str, text_column: str | None, label_column: str | None,
               person_column: str | None, encoding: str) -> str:
    """A file corpus's id: its content (SHA-256), the columns and the decoding."""
    cid = f"{source}:{fp[:16]}:{text_column}:{label_column}:{person_column or ''}"
    if check_encoding(encoding) != "utf-8":  # another decoding is another corpus (UTF-8 ids stay as they were)
        cid += f":{check_encoding(encoding)}"
    return cid


def _set_file_corpus(c: Corpus | StreamedView, source: str, name: str, fp: str, *, text_column: str | None,
                     label_column: str | None, person_column: str | None, encoding: str) -> None:
    """The session's corpus from a file: its id names the content (SHA-256), the columns and the decoding."""
    cid = _corpus_id(source, fp, text_column, label_column, person_column, encoding)
    _set_corpus(c, cid=cid, spec=f"{source}:{name}", fingerprint=fp, text_column=text_column,
                label_column=label_column, filename=name)
    ss()["loaded_encoding"] = check_encoding(encoding)
    if not ss().get("doc_type"):
        ss()["doc_type"] = "a document"


def _set_corpus(c: Corpus | StreamedView, *, cid: str, spec: str, fingerprint: str | None, text_column: str | None,
                label_column: str | None, filename: str | None) -> None:
    s = ss()
    if s.get("corpus_id") == cid and s.get("corpus") is not None:
        return
    had = s.get("corpus_id")
    clear_after("corpus", include=True)
    s.update(corpus=c, corpus_id=cid, corpus_spec=spec, corpus_fingerprint=fingerprint,
             loaded_text_column=text_column, loaded_label_column=label_column, corpus_filename=filename,
             run_dir=None)
    if had:
        reset = reset_corpus_settings(s)  # the previous corpus's method, ε, N, S… do not carry over
        notice("A new corpus starts a new run with its own privacy ledger and run folder; the previous run's "
               "folder and ledger are kept."
               + (" Its settings (method, ε split, vocabulary, N, S…) are back to their defaults: choose them for "
                  "this corpus on page 2." if reset else ""))


def corpus_summary_of(c: Corpus | StreamedView) -> dict[str, Any]:
    """Page 1's PRIVATE summary of ``c`` (``dpkps_core.corpus.corpus_summary``; a streamed corpus's from its
    preparing pass), computed once per corpus and kept in the session — a page-1 rerun of a large corpus would
    otherwise count every document's words again."""
    from dpkps_core.corpus import corpus_summary

    s = ss()
    memo = s.get("_corpus_summary")
    key = (s.get("corpus_id"), len(c))  # the declared classes do not change it
    if not memo or memo[0] != key:
        info = dict(c.summary) if isinstance(c, StreamedView) else corpus_summary(c)
        s["_corpus_summary"] = memo = (key, info)
    return memo[1]


def require_selected_corpus() -> Corpus:
    """The loaded corpus, if it is the kind page 1 has selected. A failed upload keeps the corpus loaded before
    (and its results: they cost ε), but no DP step runs on it while "Upload my corpus" is selected and the loaded
    corpus is a demo — the user's file is not what is loaded (a public decision: the user's own setting)."""
    s = ss()
    c = corpus()
    if c is None:
        raise CorpusError("Load a corpus first (page 1).")
    if s.get("corpus_source") in USER_CORPUS_SOURCES and not is_user_corpus(s.get("corpus_id")):
        raise CorpusError(f"Your file is not loaded: the loaded corpus is the demo “{c.name}”. Load your file on "
                          "page 1 (“Load this corpus”), or select the demo corpus there. Nothing was spent.")
    return c


def declare_classes(names: Sequence[str]) -> Corpus:
    """The user confirms ``names`` as the PUBLIC class names of the current corpus (docs/DESIGN.md §2).

    Suggestions read off the data are only shown locally; this declaration is what the DP steps release per
    class. Changing it discards Ṽ and what followed (the ε they spent stays on the ledger)."""
    s = ss()
    c = corpus()
    if c is None:
        raise CorpusError("Load a corpus first (page 1).")
    _refuse_while_stepping()
    declared = c.with_classes(list(names))  # validates: ≥ 2 distinct non-empty names
    if declared.public_classes != c.public_classes:
        if run_view.private_vocabulary() is not None:
            notice("The public class list changed: the private vocabulary and what followed were put aside (their "
                   "run folder stays on disk; the ε they spent stays on the ledger).")
        clear_after("corpus")
        s["run_dir"] = None
        s["corpus"] = declared
    return declared



# ============================================================================================ 2. vocabulary & budget

def run_forecast() -> Any:
    """"Will this work?" (dpkps_core.evaluation.forecast) on the training part's TRUE counts — private."""
    from dpkps_core import evaluation

    cfg = current_config()
    vocab = public_vocabulary()
    counts = term_counts(vocab, cfg.terms_per_doc)
    train = train_part()
    f = evaluation.forecast(train.texts, train.labels, vocab, cfg, counts=counts)
    ss()["forecast"] = f
    return f



# ============================================================================================ 3. private vocabulary

#: The session keys of the DP steps' background jobs on a streamed corpus (pages 3 and 4).
STEP_JOBS = {"vocabulary": "job_vocabulary", "density": "job_density"}


class _Metered(StreamedCorpus):
    """A streamed training part whose every admitted pass goes through a :class:`~studio.jobs.ChunkMeter`: progress
    (documents, rows/s, ETA) after each chunk and the user's Cancel before each next one (docs/DESIGN.md §2.0: the
    admission charged before the first chunk; a cancelled pass releases nothing and stays charged). The core's
    steps take it as the :class:`StreamedCorpus` it is — the same functions as ``dpkps sample``."""

    _LABELS = {"the private vocabulary step": "Counting the terms of V",
               "the keyphrase density step": "Matching Ṽ (keyphrases)"}

    def __init__(self, base: StreamedCorpus, meter: ChunkMeter) -> None:  # noqa: D107 - a view of ``base``
        self.__dict__.update(vars(base))
        self._meter = meter

    def admit(self, config: Any, ledger: Any, epsilon: float, what: str) -> Any:
        part = super().admit(config, ledger, epsilon, what)
        label = self._LABELS.get(what, what)
        return dataclasses.replace(part, read=lambda: self._meter.wrap(part.read(), part.documents, label))


def _refuse_while_stepping() -> None:
    """One DP step at a time per session: a streamed step still reading the corpus blocks the next."""
    for key in STEP_JOBS.values():
        job = ss().get(key)
        if isinstance(job, Job) and job.running:
            raise ParameterError("A DP step is still reading the corpus (its progress is on its page); wait for it "
                                 "or cancel it first. Nothing changed.")


def finish_step_jobs() -> None:
    """In a script run: let the session learn what a finished streamed step released (``studio.jobs.finish``)."""
    from studio import jobs

    for key in STEP_JOBS.values():
        jobs.finish(key)


def run_private_vocabulary() -> PrivateVocabulary | Job:
    """ε_voc: the Laplace noisy histogram over all of V, top N → Ṽ (charges the ledger every time).

    A streamed corpus runs the same core step in a background job (its pass over the file takes minutes): returns
    the :class:`Job`, whose page shows its per-chunk progress and Cancel; the release is written to the run folder
    by the job, and the session learns it once the job ended (:func:`finish_step_jobs`)."""
    s = ss()
    require_selected_corpus()
    cfg = current_config()
    # no refusal here on the corpus's history (it would depend on the data): the step refuses on public input
    # only (the settings, N > |V|: before anything is spent) and admits the units that still have budget (docs/DESIGN.md §2.0)
    vocab = public_vocabulary()
    check_vocabulary_settings(epsilon=cfg.eps_voc, terms_per_doc=cfg.terms_per_doc, size=cfg.vocab_size,
                              vocabulary_size=len(vocab), selection_rule=cfg.selection_rule)
    streamed = is_streamed()
    # a streamed corpus counts its terms in the release's own pass, after its admission (no pass of its own here)
    counts = None if streamed else term_counts(vocab, cfg.terms_per_doc)
    _refuse_while_writing()
    _refuse_while_stepping()
    new, old = new_run_dir()  # a new Ṽ is a new run: its folder is named in the ledger's record of the release
    led = None
    try:
        base = {**run_state_base(), "pv_meta": None, "density_meta": None, "density_info": None, "seq_meta": None}
        led = ledger()
        before = recorded_event_ids(led)
        steering = forecast_event_ids(led, terms_per_doc=cfg.terms_per_doc, public_vocabulary_size=len(vocab),
                                      classes=len(require_selected_corpus().classes))
        if isinstance(led, PersistentLedger) and reserve_plan():
            # the run's planned ε for its units at its first release (issue 35 part 8): concurrent runs cannot take
            # the room its densities need (docs/DESIGN.md §2.0)
            led.reserve_next(cfg.eps_voc + cfg.eps_kde)
        t0 = time.perf_counter()
        nz = noise()
        train = train_part()
        units = len(train)
        cid = s.get("corpus_id")

        def write(step: pipeline.VocabularyStep) -> None:  # the run folder only: no session access
            pv_meta = {
                "eps_voc": cfg.eps_voc, "terms_per_doc": cfg.terms_per_doc, "vocab_size": cfg.vocab_size,
                "selection_rule": cfg.selection_rule, "vocabulary": vocab.name, "vocabulary_spec": cfg.vocabulary,
                "public_size": len(vocab), "remove_stopwords": cfg.remove_stopwords, "junk_filter": cfg.junk_filter,
                "vocab_max_terms": cfg.effective_vocab_max_terms, "seeded": nz.seed is not None,
                "seconds": round(time.perf_counter() - t0, 2), "ledger_events": len(led),
            }
            # the run folder holds Ṽ before the session is touched (a stopped script run loses no release)
            runfolder.write_json(RunFolder(new).vocabulary, step.private_vocabulary.to_dict())
            record_step(new, led, before, "vocabulary", steering)
            write_run_state(new, {**base, "pv_meta": pv_meta})

        def learn(step: pipeline.VocabularyStep) -> None:  # the session, in a script run
            clear_after("vocabulary", include=True)
            run_view.remember_vocabulary(new, step.private_vocabulary)
            # PRIVATE checks on the training part, shown locally (the release above went ahead regardless), and the
            # documents without budget left (docs/DESIGN.md §2.0): session only
            run_view.set_notes(new, "vocabulary", {"local_warnings": list(step.local_warnings),
                                                   "left_out": step.left_out, "units": units})
            if streamed and not step.left_out:  # the pass counted the whole training part: the exact previews' counts
                remember_term_counts(vocab, cfg.terms_per_doc, step.counts)
            s.pop("reopened_run", None)

        spend.started()  # one intent, one release: from here the click is spent (studio.spend)
        if streamed:
            def work(job: Job) -> pipeline.VocabularyStep:
                assert job.meter is not None
                step = pipeline.vocabulary_step(_Metered(train, job.meter), vocab, cfg, noise=nz, ledger=led,
                                                progress=job.meter.phase)
                write(step)
                return step

            def finished(job: Job) -> None:
                if s.get("corpus_id") != cid:  # (a corpus cannot change while the job runs; kept for safety)
                    return
                if job.result is not None:
                    learn(job.result)
                    return
                if isinstance(led, PersistentLedger):  # failed or cancelled: what it admitted stays charged
                    led.drop_planned()
                abandon_run_dir(new, old)

            return start_job(STEP_JOBS["vocabulary"], "private vocabulary", work, on_finish=finished, meter=True)
        step = pipeline.vocabulary_step(train, vocab, cfg, noise=nz, ledger=led, counts=counts)
    except BaseException:
        if isinstance(led, PersistentLedger):
            led.drop_planned()
        abandon_run_dir(new, old)
        raise
    write(step)
    learn(step)
    return step.private_vocabulary


def _refuse_while_writing() -> None:
    job = ss().get("job_generation")
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing documents for the current sequences; cancel it first (page 6).")


def vocabulary_noise_floor(pv: PrivateVocabulary) -> float:
    """Largest pure-noise count expected among |V| zero counts (a public function of ε_voc, S and |V|)."""
    from dpkps_core.dp.vocabulary import noise_floor

    return noise_floor(epsilon=pv.epsilon, terms_per_doc=pv.terms_per_doc, vocabulary_size=pv.public_vocabulary_size)


def vocabulary_check() -> dict[str, Any]:
    """PRIVATE, local: how much of the non-private top-N Ṽ recovered, and how much of Ṽ is pure noise."""
    from dpkps_core import evaluation

    s = ss()
    pv, meta = run_view.private_vocabulary(), run_view.vocabulary_meta()
    if pv is None or meta is None:
        raise VocabularyError("Build the private vocabulary first (page 3).")
    vocab = cached_vocabulary(meta["vocabulary_spec"], meta["remove_stopwords"], meta["junk_filter"],
                              meta["vocab_max_terms"])
    counts = term_counts(vocab, meta["terms_per_doc"])
    out = {
        "recall": evaluation.vocabulary_recall(counts, vocab.terms, pv.terms, top=meta["vocab_size"]),
        "noise_share": evaluation.noise_term_share(counts, vocab, pv.terms),
        "terms_in_corpus": int((counts > 0).sum()),
        "top": min(meta["vocab_size"], int((counts > 0).sum())),
    }
    s["vocab_check"] = out
    return out



# ============================================================================================ 4. densities

def density_preview() -> dict[str, Any]:
    """Public choices the density step would make now (bandwidth, I, expected error), before any ε is spent —
    the core's :func:`~dpkps_core.method.density_plan.density_plan`, the same decision the step itself makes."""
    pv = run_view.private_vocabulary()
    if pv is None:
        raise VocabularyError("Build the private vocabulary first (page 3).")
    cfg = current_config()
    plan = density_plan(cfg, n_classes=len(corpus().classes) if corpus() else 1, private_vocabulary=pv)
    out: dict[str, Any] = {"density": plan.density, "method": cfg.method, "eps_kde": cfg.eps_kde}
    if plan.density == "histogram":
        out["noise_sd_per_term"] = plan.expected_noise_per_term
        return out
    out.update({"class_size_estimate": plan.class_size_estimate, "class_size_source": plan.class_size_source,
                "members": plan.members, "features": plan.features, "rff_error": plan.rff_error,
                "noise_error": plan.noise_error, "total_error": plan.total_error})
    return out


def run_density() -> Any:
    """ε_kde: per-class DP densities over Ṽ for the chosen method (charges the ledger every time). A streamed corpus
    runs the same core step in a background job (see :func:`run_private_vocabulary`) and returns the :class:`Job`."""
    pv = run_view.private_vocabulary()
    if pv is None:
        raise VocabularyError("Build the private vocabulary first (page 3).")
    c = require_selected_corpus()
    cfg = current_config()
    _refuse_while_writing()
    _refuse_while_stepping()
    out = run_dir()
    if (out / DENSITY_FILE).exists() or (out / SEQUENCES_FILE).exists():
        out, _ = new_run_dir(keep=(VOCABULARY_FILE, RUN_STATE_FILE))  # the earlier chain's folder stays as it is
    led = ledger()
    before = recorded_event_ids(led)
    steering = forecast_event_ids(led, terms_per_doc=pv.terms_per_doc,
                                  public_vocabulary_size=pv.public_vocabulary_size, classes=len(c.classes))
    t0 = time.perf_counter()
    nz = noise()
    # a seeded demo's Ṽ is not a DP release: its embeddings stay in memory, never in the persistent cache
    cache = embedding_cache() if nz.seed is None else pipeline.seeded_embedding_cache()
    emb = embedder(cfg.embedding_model)
    base = {**run_state_base(), "density_meta": None, "density_info": None, "seq_meta": None}
    train = train_part()
    units = len(train)
    cid = ss().get("corpus_id")

    def write(step: pipeline.DensityStep) -> dict[str, Any]:  # the run folder only: no session access
        density_meta = {
            "method": cfg.method, "density": cfg.density, "density_kind": cfg.density_kind, "length": cfg.length,
            "eps_kde": cfg.eps_kde, "bandwidth_setting": cfg.bandwidth, "features_setting": cfg.features,
            "embedding_model": cfg.embedding_model, "seeded": nz.seed is not None, "pv_terms": len(pv),
            "seconds": round(time.perf_counter() - t0, 2),
        }
        # the run folder holds the densities before the session is touched
        save_densities(out, step.density, step.embeddings)
        record_step(out, led, before, "density", steering)
        write_run_state(out, {**base, "density_meta": density_meta, "density_info": step.info})
        # PRIVATE, local: documents without keyphrases or budget left, and the notes shown for them (§2.0)
        return {"documents_without_keyphrases": int(sum(1 for k in step.keyphrases if not k)),
                "left_out": step.left_out, "local_warnings": list(step.local_warnings), "units": units}

    def learn(step: pipeline.DensityStep, notes: dict[str, Any]) -> None:  # the session, in a script run
        clear_after("density", include=True)
        run_view.remember_density(out, step.density, step.embeddings, model=cfg.embedding_model,
                                  seeded=nz.seed is not None)
        run_view.set_notes(out, "density", notes)

    spend.started()  # one intent, one release: from here the click is spent (studio.spend)
    if is_streamed():
        def work(job: Job) -> tuple[pipeline.DensityStep, dict[str, Any]]:
            assert job.meter is not None
            step = pipeline.density_step(_Metered(train, job.meter), pv, cfg, classes=tuple(c.classes),
                                         embedder=emb, cache=cache, noise=nz, ledger=led, progress=job.meter.phase)
            return step, write(step)

        def finished(job: Job) -> None:  # failed or cancelled: what it admitted stays charged, nothing to learn
            if job.result is not None and ss().get("corpus_id") == cid:
                learn(*job.result)

        return start_job(STEP_JOBS["density"], "keyphrase densities", work, on_finish=finished, meter=True)
    step = pipeline.density_step(train, pv, cfg, classes=tuple(c.classes), embedder=emb,
                                 cache=cache, noise=nz, ledger=led)
    learn(step, write(step))
    return step.density


def umap_map(seed: int = 0) -> np.ndarray:
    """2-D UMAP of Ṽ's embeddings (DP terms + public model); session only."""
    from dpkps_core.evaluation import term_map

    s = ss()
    s["umap_map"] = term_map(run_view.embeddings(), seed=seed)
    return s["umap_map"]



# ============================================================================================ 5. sequences

def run_sequences() -> SamplingOutcome:
    """Sample keyphrase sequences (post-processing: no ε), then write the run folder."""
    dens, meta, pv = run_view.density(), run_view.density_meta(), run_view.private_vocabulary()
    if dens is None or meta is None or pv is None:
        raise ParameterError("Build the keyphrase densities first (page 4).")
    if meta.get("reopened") and meta["method"] != "independent":
        raise ParameterError(f"This reopened run's densities ({meta['method']}) were read back as per-term scores, "
                             "which sample independent sequences only; its sequences are kept. Rebuild the "
                             "densities on page 4 (spends ε_kde) to sample iterative sequences again.")
    _refuse_while_writing()
    cfg = current_config(method=meta["method"], density=meta["density"], length=meta["length"])
    nz = noise()
    t0 = time.perf_counter()
    outcome = pipeline.sample_sequences(dens, terms=pv.terms, embeddings=run_view.embeddings(), config=cfg,
                                        rng=nz.child())
    seq_meta = {"per_class": cfg.per_class, "temperature": cfg.temperature, "seeded": nz.seed is not None,
                "seconds": round(time.perf_counter() - t0, 3)}
    clear_after("sequences", include=True)
    write_run(outcome, seq_meta)
    return outcome


def write_run(outcome: SamplingOutcome | None = None, seq_meta: dict[str, Any] | None = None) -> Path:
    """Write sequences, privacy report, Ṽ, config and (private) split into the run folder (``outcome`` and
    ``seq_meta``: freshly sampled sequences and their settings; default: the open run's own, written again).

    A run folder that already holds LLM documents for older sequences is left as it is and a new one is used."""
    if outcome is None:
        outcome, seq_meta = run_view.outcome(), run_view.sequences_meta()
    pv, info, dens = run_view.private_vocabulary(), run_view.density_info(), run_view.density()
    if outcome is None or seq_meta is None or pv is None or info is None:
        raise ParameterError("Sample keyphrase sequences first (page 5).")
    out = run_dir()
    if (out / DOCUMENTS_FILE).exists():
        old = out
        out, _ = new_run_dir(keep=(VOCABULARY_FILE, DENSITY_FILE, RUN_STATE_FILE))
        notice(f"New sequences start a new run folder; the documents written before stay in {old.name}.")
    cfg = run_view.sampling_config_used(seq_meta)
    report_noise = NoiseSource(cfg.seed, sampler=cfg.noise_sampler)  # describes the seed policy of the outputs (demo seed or OS entropy)
    report = pipeline.privacy_report(  # the run's own events, whoever recorded them (issue 35 part 4)
        config=cfg, ledger=run_account(out, ledger()), noise=report_noise, private_vocabulary=pv,
        vocabulary_name=pv.public_vocabulary, density_info=info, outcome=outcome,
        classes=tuple(corpus().classes), privacy_unit=privacy_unit())
    base = run_state_base()
    pipeline.write_run_files(out, config=cfg, split=ss()["split"], private_vocabulary=pv, outcome=outcome,
                             report=report)
    if not (out / DENSITY_FILE).exists() and dens is not None:
        save_densities(out, dens, run_view.embeddings())
    write_run_state(out, {**base, "seq_meta": seq_meta})
    return out


def no_llm_check() -> dict[str, Any]:
    """The cheap no-LLM utility check (paper Table 5) on the current sequences — PRIVATE, local."""
    from dpkps_core import evaluation

    s = ss()
    outcome, pv, meta = run_view.outcome(), run_view.private_vocabulary(), run_view.density_meta()
    if outcome is None or pv is None or meta is None:
        raise ParameterError("Sample keyphrase sequences first (page 5).")
    length = int(meta["length"])
    test = test_part()
    if len(test) == 0:
        raise ParameterError("The no-LLM check needs held-out test documents; set a test fraction above 0 on page 1.")
    syn = evaluation.no_llm_check(outcome.sequences, test.texts, test.labels, private_vocabulary=pv, length=length)
    real = real_keyphrase_baseline(length)
    out = {"method": meta["method"], "no_llm_accuracy": syn.accuracy, "no_llm_macro_f1": syn.macro_f1,
           "real_keyphrase_baseline": real.accuracy, "chance": evaluation.chance_accuracy(test.labels),
           "n_test": len(test), "n_sequences": len(outcome.sequences), "per_class_recall": syn.per_class_recall}
    history = s.setdefault("no_llm_history", [])
    history.append({k: v for k, v in out.items() if k != "per_class_recall"})
    s["no_llm"] = out
    return out


def real_keyphrase_baseline(length: int) -> Any:
    """The one real keyphrase baseline (:func:`dpkps_core.evaluation.real_keyphrase_baseline`), computed once per
    session for the corpus, split, vocabulary, S, N and L (it does not depend on ε) — PRIVATE, session only."""
    from dpkps_core import evaluation

    s = ss()
    cfg = current_config()
    vocab = public_vocabulary()
    counts = term_counts(vocab, cfg.terms_per_doc)
    key = (s.get("corpus_id"), s.get("split_key"), vocab.name, len(vocab), cfg.terms_per_doc, cfg.vocab_size,
           int(length))
    memo = s.get("real_keyphrase_baseline")
    if not memo or memo[0] != key:
        train, test = train_part(), test_part()
        scores = evaluation.real_keyphrase_baseline(train.texts, train.labels, test.texts, test.labels,
                                                    vocabulary=vocab, counts=counts, vocab_size=cfg.vocab_size,
                                                    length=int(length))
        s["real_keyphrase_baseline"] = memo = (key, scores)
    return memo[1]
