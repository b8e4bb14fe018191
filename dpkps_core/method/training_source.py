"""The training part of a run as the DP steps read it: chunks of admitted documents (issue 31; docs/DESIGN.md §2,
§2.0, §5; [DP-KPS] §2 Steps 1–3).

A release admits its input's units through the ledger (charge first), then computes its statistic from the
admitted documents only. Here that input comes from one of two sources, read by the SAME passes
(:mod:`dpkps_core.method.streaming_counts`):

* a :class:`~dpkps_core.corpus.Corpus` in memory (the app, the tests, demo corpora): its admitted documents are cut
  into chunks of ``$DPKPS_CHUNK_ROWS`` rows (:func:`~dpkps_core.method.streaming_counts.chunked`); a corpus of fewer rows is
  one chunk, matched inline;
* a :class:`StreamedCorpus`: a corpus file read chunk by chunk by :class:`~dpkps_core.corpus.stream.CorpusStream`
  and never held whole. One preparing pass decides, per row, what the in-memory path decides: the keyed split
  position (:func:`~dpkps_core.method.split.split_positions` of the row's text, or of its person's smallest text), its
  label and its person; each release's pass then re-reads the file and keeps the admitted training rows.

Both end in :class:`AdmittedPart`. The documents, their order, the split and the units are those of
:func:`~dpkps_core.corpus.load_corpus` on the same file (the loader is the same stream read to its end), so a run
on a streamed corpus writes the same files as a run on the loaded one (tested, for small and large chunk sizes).

The ledger admits a streamed corpus's units as KEYS, never as unit strings (issue 31): each row's document key
string and each person's key string (:func:`dpkps_core.ledger_store.units.unit_strings`'s parts) are keyed chunk by chunk
by the ledger's HMAC (:class:`~dpkps_core.ledger_store.unit_keys.UnitKeysBuilder`) and only the 32-byte keys are kept
— the keys the store would make of the strings, so the same rows are admitted and the same ledger rows written.
Given the ledger's keying (``keys_of``), :meth:`StreamedCorpus.open` keys during its preparing pass; without it the
units (:class:`StreamedUnits`) key themselves by one more pass over the file when a ledger first asks.

Memory of a streamed corpus, per document: its 32-byte document key, 8 bytes of split position, 4 of label code,
1 of length flag, 8 of person code (person column) and the stream's de-duplication state during the first pass
(:mod:`dpkps_core.corpus.stream`); per person (person column), a 32-byte person key and, during the preparing pass,
the person id and the smallest of their texts (the split's key). The keyphrases of the admitted documents are held
compactly (4 bytes per document and per keyphrase). No per-document Python object outlives a chunk.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Sequence

import numpy as np

from dpkps_core.method.budget import admit, admitted_indices

from dpkps_core.ledger_store.units import document_key_string, person_key_string
from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.corpus.model import LoadReport, check_class_names
from dpkps_core.corpus.stream import CorpusStream, default_chunk_rows
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.ledger import AdmissionTicket, PrivacyLedger
from dpkps_core.errors import CorpusError, ParameterError
from dpkps_core.ledger_store.rules import DOCUMENT_KIND, PERSON_KIND
from dpkps_core.ledger_store.unit_keys import KeysOf, UnitKeys, UnitKeysBuilder, key_check
from dpkps_core.method.split import CorpusSplit, split_from_positions, split_positions
from dpkps_core.method.streaming_counts import Chunk, chunked


def person_unit_text(column: str | None) -> str:
    """The person unit's neighbouring relation, worded as :attr:`Corpus.privacy_unit` words it."""
    return f"add/remove all documents of one person (identified by column '{column or 'person'}')"


@dataclasses.dataclass(frozen=True)
class AdmittedPart:
    """One release's admitted training documents (PRIVATE: never shown, logged or written): how many, their labels
    and — under the person unit — their persons (ids or integer codes), the declared classes, how many documents
    (persons) were left out for lack of budget (local figures), the release's ticket (charge its event through it),
    the neighbouring relation, and :meth:`chunks`, a fresh pass over the documents (an in-memory part also keeps
    its ``texts``, which :func:`dpkps_core.method.pipeline.term_counts` reads in the same chunks)."""

    documents: int
    labels: Sequence[str]
    groups: Sequence[str] | np.ndarray | None
    classes: tuple[str, ...]
    left_out: int
    persons_left_out: int | None
    ticket: AdmissionTicket
    neighbouring: str
    read: Callable[[], Iterator[Chunk]] = dataclasses.field(repr=False)
    chunk_rows: int = dataclasses.field(default_factory=default_chunk_rows)
    texts: Sequence[str] | None = dataclasses.field(default=None, repr=False)  # an in-memory part's texts

    def __len__(self) -> int:
        return self.documents

    def chunks(self) -> Iterator[Chunk]:
        """A fresh pass over the admitted documents, chunk by chunk (texts, labels, persons under the person unit)."""
        return self.read()

    @property
    def several_chunks(self) -> bool:
        """Whether the documents take more than one chunk (then the passes report progress between chunks)."""
        return self.documents > self.chunk_rows

    @property
    def workers(self) -> int | None:
        """The passes' workers: one (inline, no pool to start) when the documents fit in one chunk, else the
        deployment's setting (``$DPKPS_WORKERS``)."""
        return 1 if self.documents <= self.chunk_rows else None

    def left_out_note(self, release: str) -> str | None:
        """The PRIVATE, local note on the documents left out of ``release`` (docs/DESIGN.md §2.0): for the data owner,
        never written to a report or a bundle."""
        if not self.left_out:
            return None
        persons = f" ({self.persons_left_out:,} person(s))" if self.persons_left_out is not None else ""
        return (f"{self.left_out:,} document(s){persons} had no budget left and were left out of {release} "
                "(private, local: this count is never released).")


def _by_person(config: SamplingConfig, has_persons: bool) -> bool:
    by_person = bool(config.person_column)
    if by_person and not has_persons:
        raise ParameterError(f"The unit of privacy is a person (column '{config.person_column}'), but the corpus was "
                             "loaded without that column; load it with the person column.")
    return by_person


def admit_corpus(train: Corpus, config: SamplingConfig, ledger: PrivacyLedger, epsilon: float,
                 what: str) -> AdmittedPart:
    """The in-memory training part's units admitted to a release of ``epsilon`` (:func:`dpkps_core.method.budget.admit`:
    charged now, before any statistic or noise); its admitted documents as chunks."""
    by_person = _by_person(config, train.persons is not None)
    admission = admit(train, ledger, epsilon, by_person=by_person, what=what)
    part = admission.corpus
    gone = None
    if admission.left_out and train.persons is not None and part.persons is not None:
        gone = len(set(train.persons) - set(part.persons))
    groups = part.persons if by_person else None
    rows = default_chunk_rows()
    unit = train.privacy_unit if by_person else ADD_REMOVE_ONE_DOCUMENT
    return AdmittedPart(len(part), part.labels, groups, tuple(train.classes), admission.left_out, gone,
                        admission.ticket, unit, lambda: chunked(part.texts, part.labels, groups, size=rows), rows,
                        part.texts)


def admit_part(train: "Corpus | StreamedCorpus", config: SamplingConfig, ledger: PrivacyLedger, epsilon: float,
               what: str) -> AdmittedPart:
    """The training part's admitted documents for one release, from memory or from the streamed file."""
    if isinstance(train, StreamedCorpus):
        return train.admit(config, ledger, epsilon, what)
    return admit_corpus(train, config, ledger, epsilon, what)


def _person_codes(persons: Sequence[str], table: dict[str, int]) -> tuple[np.ndarray, list[str]]:
    """Each person's code (first-seen order across chunks, kept in ``table``) and the persons first seen here, in
    code order."""
    before = len(table)
    codes = np.fromiter((table.setdefault(p, len(table)) for p in persons), dtype=np.int64, count=len(persons))
    fresh = np.flatnonzero(codes >= before)
    _, first = np.unique(codes[fresh], return_index=True)  # the new codes are before, before + 1, …
    return codes, [persons[i] for i in fresh[first].tolist()]


class _Keyer:
    """Keys a pass's chunks as the ledger keys their unit strings (module docstring): one document key per row,
    one person key per person first seen."""

    def __init__(self, keys_of: KeysOf, *, by_person: bool, with_persons: bool) -> None:
        self.builder = UnitKeysBuilder(keys_of, kind=PERSON_KIND if by_person else DOCUMENT_KIND,
                                       with_persons=with_persons)

    def add(self, texts: Sequence[str], new_persons: Sequence[str]) -> None:
        self.builder.add_documents([document_key_string(t) for t in texts])
        if self.builder.with_persons:
            self.builder.add_persons([person_key_string(p) for p in new_persons])


class StreamedUnits:
    """A streamed corpus's units before they are keyed (PRIVATE): as many rows as the corpus has documents; a
    ledger's :meth:`keys_under` keys them by one pass over the file (kept for that keying; a fresh pass for another)
    — the keys a :class:`~dpkps_core.ledger_store.unit_keys.UnitKeysBuilder` made during the preparing pass would
    have been. An in-memory ledger reads only their number."""

    def __init__(self, stream: CorpusStream, *, by_person: bool, documents: int,
                 person_codes: np.ndarray | None) -> None:
        self.stream = stream
        self.by_person = by_person
        self.documents = documents
        self.person_codes = person_codes
        self._keys: UnitKeys | None = None

    def __len__(self) -> int:
        return self.documents

    def __repr__(self) -> str:  # counts only
        return f"StreamedUnits(rows={self.documents}, keyed={self._keys is not None})"

    def take(self, index: np.ndarray | Sequence[int]) -> "_TakenUnits":
        """The rows at ``index``, keyed when a ledger asks."""
        return _TakenUnits(self, np.asarray(index, dtype=np.int64))

    def keys_under(self, keys_of: KeysOf) -> UnitKeys:
        """Every row's keys under ``keys_of`` (one pass over the file the first time)."""
        if self._keys is not None and self._keys.check == key_check(keys_of):
            return self._keys
        codes = self.person_codes
        keyer = _Keyer(keys_of, by_person=self.by_person, with_persons=codes is not None)
        table: dict[str, int] = {}
        n = 0
        for chunk in self.stream.chunks():
            new: list[str] = []
            if codes is not None:
                assert chunk.persons is not None
                pc, new = _person_codes(chunk.persons, table)
                if not np.array_equal(pc, codes[n:n + len(chunk)]):
                    raise CorpusError("The corpus changed on disk while it was being read; load it again once it "
                                      "is no longer being written.")
            keyer.add(chunk.texts, new)
            n += len(chunk)
        if n != self.documents:
            raise CorpusError("The corpus changed on disk while it was being read; load it again once it is no "
                              "longer being written.")
        self._keys = keyer.builder.build(codes)
        return self._keys


class _TakenUnits:
    """Some rows of :class:`StreamedUnits` (a release's input), keyed when a ledger asks."""

    def __init__(self, parent: StreamedUnits, index: np.ndarray) -> None:
        self.parent, self.index = parent, index

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:  # counts only
        return f"StreamedUnits(rows={len(self.index)} of {len(self.parent)})"

    def take(self, index: np.ndarray | Sequence[int]) -> "_TakenUnits":
        return _TakenUnits(self.parent, self.index[np.asarray(index, dtype=np.int64)])

    def keys_under(self, keys_of: KeysOf) -> UnitKeys:
        return self.parent.keys_under(keys_of).take(self.index)


class StreamedCorpus:
    """The training part of a corpus file under one run's settings, read pass by pass (see the module docstring).

    :meth:`open` makes the preparing pass; :attr:`units` (every document's ledger units as keys — a
    :class:`~dpkps_core.ledger_store.unit_keys.UnitKeys`, or :class:`StreamedUnits` keyed when a ledger asks — for
    :func:`dpkps_core.cli.ledger.corpus_ledger`), :attr:`split`, :attr:`classes`, :attr:`report` and the local
    figures (:attr:`undeclared`, :attr:`truncated`) are then known, and :meth:`admit` gives each release its
    admitted documents. Nothing here logs or keeps document text beyond the chunk being read (and the person
    unit's smallest text per person during the preparing pass)."""

    def __init__(self, stream: CorpusStream, *, classes: tuple[str, ...], by_person: bool,
                 units: UnitKeys | StreamedUnits, split: CorpusSplit, train_index: np.ndarray,
                 label_codes: np.ndarray, label_names: list[str], person_codes: np.ndarray | None, truncated: int,
                 undeclared: int) -> None:
        self.stream = stream
        self.classes = classes
        self.by_person = by_person
        self.units = units
        self.split = split
        self.train_index = train_index
        self.label_codes = label_codes
        self.label_names = label_names
        self.person_codes = person_codes
        self.truncated = truncated
        self.undeclared = undeclared

    # ---- the preparing pass
    @classmethod
    def open(cls, stream: CorpusStream, config: SamplingConfig,
             progress: Callable[[float, str], None] | None = None, *,
             keys_of: KeysOf | None = None) -> "StreamedCorpus":
        """One pass over ``stream`` under ``config``'s public settings: each document's label, person and split
        position — and, given the ledger's keying ``keys_of`` (a :class:`~dpkps_core.ledger_store.LedgerStore`'s
        ``keys``), its unit keys —; then the split (:func:`~dpkps_core.method.split.split_from_positions`, as
        :func:`~dpkps_core.method.split.split_documents` splits the loaded corpus) and the training documents of the
        declared classes. Refuses, before anything is charged, a run without declared classes (the labels found
        are listed as a local suggestion) or a person unit without the person column."""
        by_person = _by_person(config, stream.person_column is not None)
        declared = None if config.classes is None else check_class_names(config.classes)
        has_persons = stream.person_column is not None
        keyer = None if keys_of is None else _Keyer(keys_of, by_person=by_person, with_persons=has_persons)
        labels: dict[str, int] = {}
        codes: list[np.ndarray] = []
        long: list[np.ndarray] = []
        positions: list[np.ndarray] = []
        persons: dict[str, int] = {}
        person_codes: list[np.ndarray] = []
        smallest: list[str] = []  # per person code: the smallest of their texts (the split's key)
        limit = LIMITS["max_chars_per_doc"]
        for chunk in stream.chunks():
            codes.append(np.fromiter((labels.setdefault(y, len(labels)) for y in chunk.labels), dtype=np.int32,
                                     count=len(chunk)))
            long.append(np.fromiter((len(t) > limit for t in chunk.texts), dtype=bool, count=len(chunk))
                        if limit is not None else np.zeros(len(chunk), dtype=bool))
            new: list[str] = []
            if has_persons:
                assert chunk.persons is not None
                pc, new = _person_codes(chunk.persons, persons)
                person_codes.append(pc)
                if by_person:
                    for code, text in zip(pc.tolist(), chunk.texts):
                        if code == len(smallest):
                            smallest.append(text)
                        elif text < smallest[code]:
                            smallest[code] = text
            if keyer is not None:
                keyer.add(chunk.texts, new)
            if not by_person:
                positions.append(split_positions(chunk.texts, seed=config.split_seed))
            if progress:
                progress(stream.fraction_read, "reading the corpus: split and units")
        persons.clear()
        label_codes = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)
        pcodes = (np.concatenate(person_codes) if person_codes else np.zeros(0, dtype=np.int64)) if has_persons \
            else None
        if by_person:
            assert pcodes is not None
            u = split_positions(smallest, seed=config.split_seed)[pcodes]
            del smallest
        else:
            u = np.concatenate(positions) if positions else np.zeros(0)
        names = list(labels)
        if declared is None:
            found = sorted(names)  # as Corpus.observed_classes lists them
            shown = ", ".join(found[:20]) + (f" … ({len(found)} in all)" if len(found) > 20 else "")
            raise ParameterError(
                "Declare the public class names with --classes a,b,c or --classes-file FILE: they are released with "
                f"the synthetic data, so they must be public. Labels found in your file (private, shown only to "
                f"you): {shown}.")
        split = split_from_positions(u, test_fraction=config.test_fraction, client_fraction=config.client_fraction,
                                     seed=config.split_seed)
        train = np.asarray(split.train, dtype=np.int64)
        is_declared = np.array([n in set(declared) for n in names] + [False], dtype=bool)
        keep = is_declared[label_codes[train]] if len(train) else np.zeros(0, dtype=bool)
        train_index = train[keep]
        truncated = int(np.concatenate(long)[train_index].sum()) if long else 0
        units: UnitKeys | StreamedUnits = (
            keyer.builder.build(pcodes) if keyer is not None
            else StreamedUnits(stream, by_person=by_person, documents=len(label_codes), person_codes=pcodes))
        return cls(stream, classes=declared, by_person=by_person, units=units, split=split,
                   train_index=train_index, label_codes=label_codes, label_names=names, person_codes=pcodes,
                   truncated=truncated, undeclared=int(len(train) - len(train_index)))

    # ---- what the run reads
    def __len__(self) -> int:
        """The training documents of the declared classes (PRIVATE, local)."""
        return len(self.train_index)

    @property
    def documents(self) -> int:
        """Every document of the file (after the loader's per-row cleaning)."""
        return len(self.label_codes)

    @property
    def report(self) -> LoadReport | None:
        """The preparing pass's load report (private, local figures)."""
        return self.stream.report

    @property
    def privacy_unit(self) -> str:
        """The neighbouring relation of this run's releases."""
        return person_unit_text(self.stream.person_column) if self.by_person else ADD_REMOVE_ONE_DOCUMENT

    def read(self, selected: np.ndarray) -> Iterator[Chunk]:
        """A fresh pass over the file keeping the documents at the sorted positions ``selected``."""
        persons = self.by_person
        for chunk in self.stream.chunks():
            lo = chunk.first
            a, b = np.searchsorted(selected, [lo, lo + len(chunk)])
            if a == b:
                continue
            rel = (selected[a:b] - lo).tolist()
            yield Chunk([chunk.texts[i] for i in rel], [chunk.labels[i] for i in rel],
                        [chunk.persons[i] for i in rel] if persons and chunk.persons is not None else None)

    def admit(self, config: SamplingConfig, ledger: PrivacyLedger, epsilon: float, what: str) -> AdmittedPart:
        """The training documents' units admitted to a release of ``epsilon`` (charge first: the admitted units are
        charged now, through the ledger's one admission, before any statistic or noise); the admitted documents as
        a pass over the file."""
        if _by_person(config, self.stream.person_column is not None) != self.by_person:
            raise ParameterError("This streamed corpus was prepared for another unit of privacy; open it again.")
        return self.admit_training_rows(ledger, epsilon, what)

    def admit_training_rows(self, ledger: PrivacyLedger, epsilon: float, what: str) -> AdmittedPart:
        """:meth:`admit` in the unit this corpus was prepared for (a release that takes no config, e.g. the DP
        forecast): the training rows' units admitted to a release of ``epsilon``, charged now."""
        # the training rows' keys (32 bytes each), never their unit strings: the same rows admitted, the same keys
        # charged as the strings would be (issue 31)
        idx, ticket = admitted_indices(self.units.take(self.train_index), ledger, epsilon, what=what)
        selected = self.train_index[idx]
        left_out = len(self.train_index) - len(selected)
        gone = None
        if left_out and self.person_codes is not None:
            gone = int(np.setdiff1d(self.person_codes[self.train_index], self.person_codes[selected]).size)
        names = self.label_names
        labels = [names[c] for c in self.label_codes[selected].tolist()]
        groups = self.person_codes[selected] if self.by_person and self.person_codes is not None else None
        return AdmittedPart(len(selected), labels, groups, self.classes, left_out, gone, ticket,
                            self.privacy_unit, lambda: self.read(selected), self.stream.chunk_rows)

    def __repr__(self) -> str:  # counts only
        return f"StreamedCorpus(documents={self.documents}, training={len(self)})"

