"""Mutation-testing kills for dpkps_core.budget (docs/TESTING.md "Mutation testing").

The document-unit strings are what the persistent ledger HMACs to recognise a unit across runs (docs/DESIGN.md §2.0):
their exact form is pinned here, since a change would silently give every stored unit a fresh budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core import budget
from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.errors import PrivacyBudgetError


def test_document_unit_strings_are_the_normalised_text_only() -> None:
    units = budget.document_units(["  a\u0301  b\n", "x", "\ufb01 x"], ["pos", "neg", "neg"])
    assert units == ["document\x1f\u00e1 b", "document\x1fx", "document\x1ffi x"]  # NFKC, no label (issue 35)


def test_document_units_need_one_label_per_text() -> None:
    with pytest.raises(ValueError, match=r"^document_units needs one label per text\.$"):
        budget.document_units(["a", "b"], ["pos"])


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
    units = budget.unit_strings(_corpus(("p1", "p2", "p1")), by_person=True)
    assert [budget.release_unit(u) for u in units] == ["person\x1fp1", "person\x1fp2", "person\x1fp1"]
    with pytest.raises(ValueError, match=r"^The privacy unit is a person, but the corpus has no person column\.$"):
        budget.unit_strings(_corpus(), by_person=True)


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
