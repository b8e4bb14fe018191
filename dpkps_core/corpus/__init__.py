"""The private labelled corpus: the model (:mod:`.model`), the loader (:mod:`.readers` over the one chunked reading
path :mod:`.stream`: formats in :mod:`.tables`, :mod:`.formats` and :mod:`.textstream`, the choice of
:mod:`.columns` by name, per-row :mod:`.cleaning`, the size :mod:`.limits`) and the bundled public demo corpora
with their ``demo:…`` specs (:mod:`.demo`). Everything public is importable from here."""

from dpkps_core.corpus.columns import guess_columns
from dpkps_core.corpus.demo import (
    DEMO_CORPORA,
    DEMO_PERSON_COLUMNS,
    DEMO_SPECS,
    demo_rows,
    load_corpus_spec,
    load_demo_corpus,
)
from dpkps_core.corpus.formats import ENCODINGS, FORMATS, NotUTF8Error, check_encoding
from dpkps_core.corpus.limits import LimitExceededError, LoadLimits
from dpkps_core.corpus.model import Corpus, LoadReport, check_class_names, corpus_summary, require_declared
from dpkps_core.corpus.readers import RawRows, list_columns, load_corpus, read_rows, suggest_columns
from dpkps_core.corpus.stream import CorpusStream, DocumentChunk

__all__ = [
    "DEMO_CORPORA",
    "DEMO_PERSON_COLUMNS",
    "DEMO_SPECS",
    "ENCODINGS",
    "FORMATS",
    "NotUTF8Error",
    "Corpus",
    "CorpusStream",
    "DocumentChunk",
    "LimitExceededError",
    "LoadLimits",
    "LoadReport",
    "RawRows",
    "check_class_names",
    "check_encoding",
    "corpus_summary",
    "demo_rows",
    "guess_columns",
    "list_columns",
    "load_corpus",
    "load_corpus_spec",
    "load_demo_corpus",
    "read_rows",
    "require_declared",
    "suggest_columns",
]
