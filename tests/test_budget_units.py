"""The unit strings of the individual privacy filter have one owner (dpkps_core.budget; docs/DESIGN.md §2.0 "Every key a
release could touch is charged, and checked"; issue 35 parts 3 and 6)."""

from __future__ import annotations

import pytest

from dpkps_core.budget import document_units, release_unit, unit_strings
from dpkps_core.corpus import Corpus
from dpkps_core.corpus.cleaning import normalise_document_text


def test_document_units_of_plain_lists_are_the_corpus_unit_strings() -> None:
    texts, labels = ("A  note\non the ward", "second note"), ("x", "y")
    corpus = Corpus(texts, labels, "t", "memory", public_classes=("x", "y"))
    assert document_units(texts, labels) == unit_strings(corpus, by_person=False)
    assert document_units(["A note on the ward"], ["x"])[0] == unit_strings(corpus, by_person=False)[0]  # spacing
    # the label is no part of a document's key: a relabelled text keeps its budget (issue 35 part 3)
    assert document_units(["A note on the ward"], ["y"])[0] == unit_strings(corpus, by_person=False)[0]
    assert document_units(["A note on the ward!"], ["x"])[0] != unit_strings(corpus, by_person=False)[0]
    with pytest.raises(ValueError, match="one label per text"):
        document_units(texts, labels[:1])


def test_the_document_key_reads_the_text_as_the_loader_does() -> None:
    """One normalisation (issue 35 part 6): NFKC, whitespace collapsed, case kept — the loader's de-duplication and
    the document key both call normalise_document_text."""
    forms = ["Caf\u00e9 on  the ward", "Cafe\u0301 on the ward", " Caf\u00e9\ton the\nward ", "Caf\u00e9 on the\u00a0ward"]
    assert {normalise_document_text(f) for f in forms} == {"Café on the ward"}
    assert len(set(document_units(forms, ["x"] * 4))) == 1
    assert normalise_document_text("Café") != normalise_document_text("café")


def test_person_rows_link_their_document_keys_and_count_as_their_person() -> None:
    corpus = Corpus(("a note", "b  note", "a note"), ("x", "y", "x"), "t", "memory", persons=("p1", "p2", "p1"))
    by_person = unit_strings(corpus, by_person=True)
    by_document = unit_strings(corpus, by_person=False)
    assert [release_unit(u) for u in by_person] == ["person\x1fp1", "person\x1fp2", "person\x1fp1"]
    assert [release_unit(u) for u in by_document] == ["document\x1fa note", "document\x1fb note", "document\x1fa note"]
    assert by_person[1] == "person\x1fp2\x1edocument\x1fb note" and by_document[1] == "document\x1fb note\x1eperson\x1fp2"
    with pytest.raises(ValueError, match="no person column"):
        unit_strings(Corpus(("a",), ("x",), "t", "memory"), by_person=True)
