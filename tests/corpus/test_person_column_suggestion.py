"""The person column is suggested from column NAMES only (issue 33 §5; docs/DESIGN.md §2.0): a suggestion, never a guess
from the values, and none when several names fit equally."""

from __future__ import annotations

import pytest

from dpkps_core.corpus.columns import suggest_person_column


@pytest.mark.parametrize("columns, expected", [
    (["text", "label", "patient_id"], "patient_id"),
    (["note", "specialty", "Patient ID"], "Patient ID"),
    (["text", "label", "MRN"], "MRN"),
    (["review", "condition", "user"], "user"),
    (["text", "label", "patient", "patient_id"], "patient_id"),   # the more specific tier wins
    (["text", "label"], None),
    (["text", "user", "customer"], None),                       # two equally good names: the user picks
    (["text", "label", "date"], None),
])
def test_suggested_from_the_names(columns: list[str], expected: str | None) -> None:
    assert suggest_person_column(columns) == expected


def test_the_text_and_label_columns_are_never_suggested() -> None:
    assert suggest_person_column(["user", "label"], exclude=("user", "label")) is None


def test_one_identical_copy_is_said_in_the_singular() -> None:
    from dpkps_core.corpus.model import LoadReport

    one = LoadReport(n_read=3, n_empty=0, n_too_short=0, n_duplicates=1, n_kept=2).summary()
    two = LoadReport(n_read=4, n_empty=0, n_too_short=0, n_duplicates=2, n_kept=2).summary()
    assert "1 identical copy" in one and "copies" not in one and "2 identical copies" in two
