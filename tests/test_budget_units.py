"""The unit strings of the individual privacy filter have one owner (dpkps_core.budget; DESIGN §2.0)."""

from __future__ import annotations

import pytest

from dpkps_core.budget import document_units, unit_strings
from dpkps_core.corpus import Corpus


def test_document_units_of_plain_lists_are_the_corpus_unit_strings() -> None:
    texts, labels = ("A  note\non the ward", "second note"), ("x", "y")
    corpus = Corpus(texts, labels, "t", "memory", public_classes=("x", "y"))
    assert document_units(texts, labels) == unit_strings(corpus, by_person=False)
    assert document_units(["A note on the ward"], ["x"])[0] == unit_strings(corpus, by_person=False)[0]  # spacing
    assert document_units(["A note on the ward"], ["y"])[0] != unit_strings(corpus, by_person=False)[0]  # label
    with pytest.raises(ValueError, match="one label per text"):
        document_units(texts, labels[:1])
