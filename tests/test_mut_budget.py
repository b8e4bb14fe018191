"""Mutation-testing kills for dpkps_core.budget (docs/TESTING.md "Mutation testing").

The document-unit strings are what the persistent ledger HMACs to recognise a unit across runs (DESIGN §2.0):
their exact form is pinned here, since a change would silently give every stored unit a fresh budget.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core import budget
from dpkps_core.dp.ledger import PrivacyLedger, SubLedger
from dpkps_core.errors import PrivacyBudgetError


def test_document_unit_strings_are_the_normalised_text_and_the_label() -> None:
    units = budget.document_units(["  a\u0301  b\n", "x"], ["pos", "neg"])
    assert units == ["document\x1f\u00e1 b\x1fpos", "document\x1fx\x1fneg"]


def test_document_units_need_one_label_per_text() -> None:
    with pytest.raises(ValueError, match=r"^document_units needs one label per text\.$"):
        budget.document_units(["a", "b"], ["pos"])


def test_admitted_indices_follow_the_ledger_and_name_the_release() -> None:
    assert budget.admitted_indices(("u", "v", "u"), PrivacyLedger(), 0.5).tolist() == [0, 1, 2]
    assert budget.admitted_indices([], PrivacyLedger(), 0.5).dtype == np.intp
    with pytest.raises(PrivacyBudgetError, match=r"^Running the vocabulary would spend ε = 2"):
        budget.admitted_indices(["u"], SubLedger(cap=1.0), 2, what="the vocabulary")
    with pytest.raises(PrivacyBudgetError, match=r"^Running this release would spend ε = 2"):
        budget.admitted_indices(["u"], PrivacyLedger(cap=1.0), 2)
