"""The unit strings of the individual privacy filter have one owner (dpkps_core.method.budget; docs/DESIGN.md §2.0 "Every key a
release could touch is charged, and checked"; issue 35 parts 3 and 6).

Exact behaviour pinned (mutation testing) for dpkps_core.method.budget (docs/TESTING.md "Mutation testing").

The document-unit strings are what the persistent ledger HMACs to recognise a unit across runs (docs/DESIGN.md §2.0):
their exact form is pinned here, since a change would silently give every stored unit a fresh budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.method import budget
from dpkps_core.ledger_store.units import document_units, release_unit, unit_strings
from dpkps_core.ledger_store import units as ledger_units
from dpkps_core.corpus import Corpus
from dpkps_core.corpus.cleaning import normalise_document_text
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.errors import PrivacyBudgetError


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


def test_document_unit_strings_are_the_normalised_text_only() -> None:
    units = ledger_units.document_units(["  a\u0301  b\n", "x", "\ufb01 x"], ["pos", "neg", "neg"])
    assert units == ["document\x1f\u00e1 b", "document\x1fx", "document\x1ffi x"]  # NFKC, no label (issue 35)


def test_document_units_need_one_label_per_text() -> None:
    with pytest.raises(ValueError, match=r"^document_units needs one label per text\.$"):
        ledger_units.document_units(["a", "b"], ["pos"])


def test_admitted_indices_follow_the_ledger_and_name_the_release() -> None:
    assert budget.admitted_indices(("u", "v", "u"), PrivacyLedger(), 0.5)[0].tolist() == [0, 1, 2]
    assert budget.admitted_indices([], PrivacyLedger(), 0.5)[0].dtype == np.intp
    with pytest.raises(PrivacyBudgetError, match=r"^Running the vocabulary would spend ε = 2"):
        budget.admitted_indices(["u"], SubLedger(cap=1.0), 2, what="the vocabulary")
    with pytest.raises(PrivacyBudgetError, match=r"^Running this release would spend ε = 2"):
        budget.admitted_indices(["u"], PrivacyLedger(cap=1.0), 2)


def _corpus(persons: tuple[str, ...] | None = None) -> Corpus:
    return Corpus(texts=("a note", "b note", "c note"), labels=("x", "y", "x"), name="toy", source="test",
                  persons=persons)


def test_person_units_need_a_person_column() -> None:
    units = ledger_units.unit_strings(_corpus(("p1", "p2", "p1")), by_person=True)
    assert [ledger_units.release_unit(u) for u in units] == ["person\x1fp1", "person\x1fp2", "person\x1fp1"]
    with pytest.raises(ValueError, match=r"^The privacy unit is a person, but the corpus has no person column\.$"):
        ledger_units.unit_strings(_corpus(), by_person=True)


def test_admit_names_this_release_by_default() -> None:
    with pytest.raises(PrivacyBudgetError, match=r"^Running this release would spend ε = 2"):
        budget.admit(_corpus(), PrivacyLedger(cap=1.0), 2.0, by_person=False)


class _ShortMaskLedger(PrivacyLedger):
    """A ledger whose filter answers for the wrong number of documents (a programming error to refuse)."""

    def admit(self, units, epsilon, *, what="this release"):  # type: ignore[override]
        return np.ones(len(units) - 1, dtype=bool)


def test_admit_refuses_a_mask_that_does_not_match_the_input() -> None:
    with pytest.raises(ValueError, match=r"^The ledger's admission mask does not match the release's input\.$"):
        budget.admit(_corpus(), _ShortMaskLedger(), 0.5, by_person=False)
