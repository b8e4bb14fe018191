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
  label, its person and its ledger unit string; each release's pass then re-reads the file and keeps the admitted
  training rows.

Both end in :class:`AdmittedPart`. The documents, their order, the split and the units are those of
:func:`~dpkps_core.corpus.load_corpus` on the same file (the loader is the same stream read to its end), so a run
on a streamed corpus writes the same files as a run on the loaded one (tested, for small and large chunk sizes).

Memory of a streamed corpus, per document: its ledger unit string (the ledger admits unit strings:
:func:`dpkps_core.method.budget.unit_strings`, about the size of the normalised text), 8 bytes of split position, 4 of label
code, 1 of length flag, 8 of person code (person column) and the stream's de-duplication state
(:mod:`dpkps_core.corpus.stream`); per person (person column), the smallest of their texts (the split's key). The
keyphrases of the admitted documents are held compactly (4 bytes per document and per keyphrase).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterator, Sequence

import numpy as np

from dpkps_core.method.budget import admit, admitted_indices, unit_strings
from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.corpus.model import LoadReport, check_class_names
from dpkps_core.corpus.stream import CorpusStream, default_chunk_rows
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.ledger import AdmissionTicket, PrivacyLedger
from dpkps_core.errors import ParameterError
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


@dataclasses.dataclass(frozen=True)
class _Rows:
    """A chunk's documents where :func:`dpkps_core.method.budget.unit_strings` reads a corpus (texts, labels, persons)."""

    texts: Sequence[str]
    labels: Sequence[str]
    persons: Sequence[str] | None


class StreamedCorpus:
    """The training part of a corpus file under one run's settings, read pass by pass (see the module docstring).

    :meth:`open` makes the preparing pass; :attr:`units` (every document's ledger unit string, for
    :func:`dpkps_core.cli.ledger.corpus_ledger`), :attr:`split`, :attr:`classes`, :attr:`report` and the local
    figures (:attr:`undeclared`, :attr:`truncated`) are then known, and :meth:`admit` gives each release its
    admitted documents. Nothing here logs or keeps document text beyond the chunk being read (and the person
    unit's smallest text per person during the preparing pass)."""

    def __init__(self, stream: CorpusStream, *, classes: tuple[str, ...], by_person: bool, units: list[str],
                 split: CorpusSplit, train_index: np.ndarray, label_codes: np.ndarray, label_names: list[str],
                 person_codes: np.ndarray | None, truncated: int, undeclared: int) -> None:
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
             progress: Callable[[float, str], None] | None = None) -> "StreamedCorpus":
        """One pass over ``stream`` under ``config``'s public settings: each document's unit string, label, person
        and split position; then the split (:func:`~dpkps_core.method.split.split_from_positions`, as
        :func:`~dpkps_core.method.split.split_documents` splits the loaded corpus) and the training documents of the
        declared classes. Refuses, before anything is charged, a run without declared classes (the labels found
        are listed as a local suggestion) or a person unit without the person column."""
        by_person = _by_person(config, stream.person_column is not None)
        declared = None if config.classes is None else check_class_names(config.classes)
        has_persons = stream.person_column is not None
        units: list[str] = []
        labels: dict[str, int] = {}
        codes: list[np.ndarray] = []
        long: list[np.ndarray] = []
        positions: list[np.ndarray] = []
        persons: dict[str, int] = {}
        person_codes: list[np.ndarray] = []
        smallest: list[str] = []  # per person code: the smallest of their texts (the split's key)
        limit = LIMITS["max_chars_per_doc"]
        for chunk in stream.chunks():
            units.extend(unit_strings(_Rows(chunk.texts, chunk.labels, chunk.persons),  # type: ignore[arg-type]
                                      by_person=has_persons))
            codes.append(np.fromiter((labels.setdefault(y, len(labels)) for y in chunk.labels), dtype=np.int32,
                                     count=len(chunk)))
            long.append(np.fromiter((len(t) > limit for t in chunk.texts), dtype=bool, count=len(chunk))
                        if limit is not None else np.zeros(len(chunk), dtype=bool))
            if has_persons:
                assert chunk.persons is not None
                pc = np.fromiter((persons.setdefault(p, len(persons)) for p in chunk.persons), dtype=np.int64,
                                 count=len(chunk))
                person_codes.append(pc)
                if by_person:
                    for code, text in zip(pc.tolist(), chunk.texts):
                        if code == len(smallest):
                            smallest.append(text)
                        elif text < smallest[code]:
                            smallest[code] = text
            if not by_person:
                positions.append(split_positions(chunk.texts, seed=config.split_seed))
            if progress:
                progress(stream.fraction_read, "reading the corpus: split and units")
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
        units = self.units
        idx, ticket = admitted_indices([units[i] for i in self.train_index.tolist()], ledger, epsilon, what=what)
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

