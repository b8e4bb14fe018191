"""The private labelled corpus: the model (:mod:`.model`), the file readers (:mod:`.readers`) and the bundled
public demo corpora with their ``demo:…`` specs (:mod:`.demo`). Everything is importable from here."""

from dpkps_core.corpus.demo import (
    DEMO_CORPORA,
    DEMO_PERSON_COLUMNS,
    DEMO_SPECS,
    load_corpus_spec,
    load_demo_corpus,
)
from dpkps_core.corpus.model import Corpus, LoadReport, check_class_names, corpus_summary, require_declared
from dpkps_core.corpus.readers import FORMATS, guess_columns, list_columns, load_corpus, suggest_columns

__all__ = [
    "DEMO_CORPORA",
    "DEMO_PERSON_COLUMNS",
    "DEMO_SPECS",
    "FORMATS",
    "Corpus",
    "LoadReport",
    "check_class_names",
    "corpus_summary",
    "guess_columns",
    "list_columns",
    "load_corpus",
    "load_corpus_spec",
    "load_demo_corpus",
    "require_declared",
    "suggest_columns",
]
