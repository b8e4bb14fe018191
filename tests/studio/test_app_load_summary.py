"""AppTest: page 1's private load summary counts the documents the matcher truncates (README "Limits";
docs/DESIGN.md §2.1: every document is read up to ``LIMITS["max_chars_per_doc"]`` characters for term extraction)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from app_helpers import state_of, new_app, toy_records, upload_corpus
from dpkps_core.method.config import LIMITS

pytestmark = [pytest.mark.assets]


@pytest.fixture(autouse=True)
def _fast_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))


def _csv_with_long(n_long: int) -> bytes:
    rows = toy_records(8)
    limit = LIMITS["max_chars_per_doc"]
    for i in range(n_long):  # a few documents just over the limit, built by the test (no private data)
        rows[i]["text"] = ("football match goal league " * (limit // 27 + 2))[:limit] + "x" * (1 + i)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["text", "label"])
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode("utf-8")


def _long_caption(at) -> str:
    found = [c.value for c in at.caption if "Long documents" in c.value]
    assert len(found) == 1, [c.value for c in at.caption]
    return found[0]


@pytest.mark.parametrize("n_long,expected", [(2, "2 documents are longer than 100,000 characters"),
                                             (1, "1 document is longer than 100,000 characters"),
                                             (0, "0 documents are longer than 100,000 characters")])
def test_page1_shows_the_private_count_of_truncated_documents(n_long: int, expected: str) -> None:
    at = new_app()
    upload_corpus(at, _csv_with_long(n_long), "long.csv")
    assert not at.exception, [e.value for e in at.exception]
    assert len(state_of(at).loaded.corpus) == 24
    text = _long_caption(at)
    assert expected in text and "private" in text.lower()
    assert ("only the first 100,000 characters" in text) == bool(n_long)
