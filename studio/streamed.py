"""A data-folder corpus the app streams instead of holding it whole (issue 31 §4; docs/OPERATIONS.md "Server-side data
folder"): its session view (:class:`StreamedView`), the one pass that prepares it (:func:`open_streamed`, with page
1's summary gathered on the way by :class:`SummarisingStream`), and the metered training part the DP steps of pages 3–4
read (:class:`Metered`: per-chunk progress and Cancel). The DP steps themselves are the core's
(``dpkps_core.method.pipeline.vocabulary_step`` / ``density_step`` over a
:class:`~dpkps_core.method.training_source.StreamedCorpus`) — the same functions ``dpkps sample`` runs on a file.

Nothing here keeps document text beyond the chunk being read; the summary, label codes, flags and digest are
PRIVATE, session memory only (never ``st.cache_data``).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import streamlit as st

from dpkps_core.corpus import Corpus
from dpkps_core.corpus.stream import CorpusStream
from dpkps_core.errors import CorpusError
from dpkps_core.ledger_store import LedgerStore
from dpkps_core.method.config import LIMITS, SamplingConfig, build_sampling_config
from dpkps_core.method.training_source import StreamedCorpus
from dpkps_core.method.vocabulary import PublicVocabulary
from studio import page, page_ref, pages_ref, tenancy
from studio.jobs import ChunkMeter
from studio.state import SessionState

_CONTENT_DOMAIN = b"dpkps corpus content v1\x00"


#: What a streamed corpus cannot do, and why (shown where such a feature would be).
STREAMED_NOTE = ("This corpus is streamed from the server's data folder: it is read chunk by chunk for each DP release "
                 f"(the DP forecast, {pages_ref('private-vocabulary', 'sequences')}: the same passes as `dpkps "
                 "sample`) and never held whole in memory. What reads every document in memory is therefore not "
                 f"available for it: the exact previews of pages {page('budget').number} and "
                 f"{page('densities').number} "
                 f"({page_ref('private-vocabulary')}'s comes from Ṽ's own pass), the no-LLM check "
                 f"({page_ref('sequences')}), the evaluation ({page_ref('evaluate')}) and the few-shot check against "
                 f"the corpus ({page_ref('generate')}).")

#: Placeholder classes of a streamed corpus prepared before its public classes are declared (it admits no
#: document: no label matches; :meth:`StreamedView.with_classes` re-declares without reading the file again).
UNDECLARED_CLASSES = ("\x00undeclared-1", "\x00undeclared-2")


@dataclasses.dataclass(frozen=True, eq=False)
class StreamedView:
    """A data-folder corpus the session streams (``dpkps_core.corpus.data_folder.streams``): what the pages read of
    a :class:`~dpkps_core.corpus.Corpus` — its name, columns, declared classes, labels, persons, load report — over
    the core's :class:`~dpkps_core.method.training_source.StreamedCorpus` (``prepared``: split, units and training
    part, decided by one preparing pass), plus page 1's private summary from that same pass. It holds no document
    text: :attr:`texts` refuses with :data:`STREAMED_NOTE` (a clear error in the UI, not a traceback).

    ``long``: per document, whether it is longer than the matcher reads (the truncated count of a training part);
    ``summary``: counts and word lengths (PRIVATE, local); ``content_sha256``: the content fingerprint
    (``studio.session.corpus_content_fingerprint``'s digest of the same documents)."""

    prepared: StreamedCorpus
    name: str
    source: str
    summary: Mapping[str, Any]
    long: np.ndarray
    content_sha256: str
    test_fraction: float
    public_classes: tuple[str, ...] | None = None
    person_column: str | None = None
    text_column: str | None = None
    label_column: str | None = None

    streamed = True

    def __len__(self) -> int:
        return self.prepared.documents

    def __repr__(self) -> str:  # counts only
        return f"StreamedView(name={self.name!r}, documents={len(self)})"

    @property
    def texts(self) -> Sequence[str]:
        raise CorpusError(STREAMED_NOTE)

    @property
    def report(self) -> Any:
        return self.prepared.report

    @property
    def declared(self) -> bool:
        return self.public_classes is not None

    @property
    def classes(self) -> list[str]:
        """The declared public classes (the same refusal as :attr:`Corpus.classes` before a declaration)."""
        return Corpus((), (), name=self.name, source=self.source, public_classes=self.public_classes).classes

    @property
    def labels(self) -> list[str]:
        """Each document's label (PRIVATE), from the preparing pass's label codes."""
        names = self.prepared.label_names
        return [names[i] for i in self.prepared.label_codes.tolist()]

    @property
    def persons(self) -> np.ndarray | None:
        """Each document's person as an integer code (PRIVATE), or None without a person column."""
        return self.prepared.person_codes

    @property
    def class_counts(self) -> dict[str, int]:
        return dict(self.summary["class_counts"])

    @property
    def observed_classes(self) -> list[str]:
        return sorted(self.summary["class_counts"])

    @property
    def undeclared_count(self) -> int:
        if self.public_classes is None:
            return 0
        declared = set(self.public_classes)
        return sum(n for y, n in self.summary["class_counts"].items() if y not in declared)

    @property
    def privacy_unit(self) -> str:
        return self.prepared.privacy_unit

    def with_classes(self, classes: Sequence[str] | None) -> "StreamedView":
        """The same corpus with ``classes`` declared public; its training part is re-decided from the preparing
        pass's split and label codes (as :meth:`StreamedCorpus.open` decides it), without reading the file."""
        from dpkps_core.corpus.model import check_class_names

        declared = None if classes is None else check_class_names(classes)
        return dataclasses.replace(self, public_classes=declared,
                                   prepared=_declare(self.prepared, declared or UNDECLARED_CLASSES, self.long))

    def resplit(self, test_fraction: float) -> "StreamedView":
        """The same corpus under the held-out fraction ``test_fraction``: itself when it is the one it was prepared
        under, else one more pass over the file (the split positions are keyed hashes of each document's text,
        which the session does not keep)."""
        if float(test_fraction) == self.test_fraction:
            return self
        cfg = build_sampling_config(classes=self.public_classes or UNDECLARED_CLASSES, test_fraction=test_fraction,
                                    person_column=self.person_column if self.prepared.by_person else None)
        with st.spinner("Reading the corpus again for the new held-out fraction (it is streamed)…"):
            prepared = open_streamed(self.prepared.stream, cfg)
        return dataclasses.replace(self, prepared=prepared, test_fraction=float(test_fraction))

    def subset(self, indices: Any) -> Corpus:
        """Refused: a streamed corpus's documents are not held in memory (say so in the UI)."""
        raise CorpusError(f"Reading these documents in memory is not available for this corpus. {STREAMED_NOTE}")


def open_streamed(stream: Any, config: SamplingConfig, progress: Any = None) -> StreamedCorpus:
    """The core's preparing pass (:meth:`StreamedCorpus.open`), keying the units for the ledger on the way
    (``keys_of``: the tenant's ledger store's keying, else the default store's), so the ledger needs no pass of its
    own."""
    return StreamedCorpus.open(stream, config, progress, keys_of=(tenancy.ledger_store() or LedgerStore()).keys)


def _declare(prepared: StreamedCorpus, classes: Sequence[str], long: np.ndarray) -> StreamedCorpus:
    """``prepared`` with its training part re-decided for ``classes``: the training documents of the split whose
    label is declared — the tail of :meth:`StreamedCorpus.open` on the pass's split and label codes."""
    train = np.asarray(prepared.split.train, dtype=np.int64)
    names = prepared.label_names
    wanted = set(classes)
    is_declared = np.array([n in wanted for n in names] + [False], dtype=bool)
    keep = is_declared[prepared.label_codes[train]] if len(train) else np.zeros(0, dtype=bool)
    train_index = train[keep]
    return StreamedCorpus(prepared.stream, classes=tuple(classes), by_person=prepared.by_person,
                          units=prepared.units, split=prepared.split, train_index=train_index,
                          label_codes=prepared.label_codes, label_names=names, person_codes=prepared.person_codes,
                          truncated=int(long[train_index].sum()) if len(long) else 0,
                          undeclared=int(len(train) - len(train_index)))


def content_digest() -> Any:
    """A fresh SHA-256 of ``studio.session.corpus_content_fingerprint`` (its domain prefix given)."""
    return hashlib.sha256(_CONTENT_DOMAIN)


def content_fingerprint(c: Corpus | StreamedView) -> str:
    """The content fingerprint of a corpus (``studio.session.corpus_content_fingerprint``): a streamed corpus's was
    digested by its preparing pass, document by document, the same way as a loaded corpus's here."""
    if isinstance(c, StreamedView):
        return c.content_sha256
    h = content_digest()
    update_content_digest(h, c.texts, c.labels, c.persons)
    return h.hexdigest()


def update_content_digest(h: Any, texts: Sequence[str], labels: Sequence[str],
                          persons: Sequence[str] | None) -> None:
    """Feed documents, in order, to the content digest ``h`` (each field length-prefixed; a missing person is one
    0xFF byte) — the loaded corpus at once, or a streamed one chunk by chunk: the same digest."""
    for fields in zip(texts, labels, persons if persons is not None else (None,) * len(texts)):
        for value in fields:
            data = b"\xff" if value is None else value.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little") + data)



class SummarisingStream(CorpusStream):
    """A :class:`CorpusStream` whose FIRST pass also gathers page 1's private summary of a streamed corpus — labels
    counted, words and over-long flags per document, the content digest (:func:`update_content_digest`) — so
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
        """Per document, whether it is longer than the matcher reads (``LIMITS["max_chars_per_doc"]``)."""
        return np.concatenate(self._long) if self._long else np.zeros(0, dtype=bool)


#: Every how many documents page 1's length chart of a streamed corpus takes one (a chart of a million points
#: would be a page of tens of megabytes; a regular sample of about 50,000 shows the same shape).
SAMPLE_EVERY = 20


class Metered(StreamedCorpus):
    """A streamed training part whose every admitted pass goes through a :class:`~studio.jobs.ChunkMeter`: progress
    (documents, rows/s, ETA) after each chunk and the user's Cancel before each next one (docs/DESIGN.md §2.0: the
    admission charged before the first chunk; a cancelled pass releases nothing and stays charged). The core's
    steps take it as the :class:`StreamedCorpus` it is — the same functions as ``dpkps sample``."""

    _LABELS = {"the private vocabulary step": "Counting the terms of V",
               "the keyphrase density step": "Matching Ṽ (keyphrases)",
               "the DP forecast": "Counting the terms of V (DP forecast)"}

    def __init__(self, base: StreamedCorpus, meter: ChunkMeter) -> None:  # noqa: D107 - a view of ``base``
        self.__dict__.update(vars(base))
        self._meter = meter

    def admit_training_rows(self, ledger: Any, epsilon: float, what: str) -> Any:
        """The core's admission (charged now, before any chunk is read; every release's, through ``admit`` or not),
        its pass wrapped by the meter."""
        part = super().admit_training_rows(ledger, epsilon, what)
        label = self._LABELS.get(what, what)
        return dataclasses.replace(part, read=lambda: self._meter.wrap(part.read(), part.documents, label))


def is_streamed(state: SessionState) -> bool:
    """Whether the session's corpus is streamed from the data folder (a :class:`StreamedView`)."""
    return isinstance(state.loaded.corpus, StreamedView)


def term_counts_key(state: SessionState, vocab: PublicVocabulary, terms_per_doc: int) -> tuple[Any, ...]:
    """What the session's PRIVATE term counts (``studio.session.term_counts``) depend on: the corpus, split and
    classes, V and S."""
    c = state.loaded.corpus
    return (state.loaded.corpus_id, state.loaded.split_key, c.public_classes if c is not None else None, vocab.name,
            vocab.source, len(vocab), vocab.terms[:5], vocab.terms[-5:], int(terms_per_doc))


def remember_term_counts(state: SessionState, vocab: PublicVocabulary, terms_per_doc: int, counts: np.ndarray) -> None:
    """Keep the PRIVATE term counts a release's own pass made over the whole training part of a streamed corpus
    (session memory only): page 3's exact preview reads them instead of a pass of its own."""
    state.results.term_counts = (term_counts_key(state, vocab, terms_per_doc), counts)
