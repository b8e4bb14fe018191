"""Page 1 with a file whose text column cannot be chosen from the column names (docs/DESIGN.md §2.0): the user picks it,
and the picker then shows the column the loaded corpus was actually read from."""

from __future__ import annotations

import csv
import io

from app_helpers import state_of, click, new_app, toy_records, upload_corpus


def _ambiguous_csv() -> bytes:
    """Two columns whose names both fit the text rule ("summary", "notes"): the loader must not pick by values."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["summary", "notes", "label"])
    w.writeheader()
    for r in toy_records(10):
        w.writerow({"summary": r["text"][:30], "notes": r["text"], "label": r["label"]})
    return buf.getvalue().encode("utf-8")


def test_text_column_chosen_by_the_user_when_names_are_ambiguous() -> None:
    at = new_app()
    upload_corpus(at, _ambiguous_csv(), "notes.csv", load=False)
    assert at.selectbox(key="upload_text_col").value is None  # nothing decided from the values
    assert at.selectbox(key="upload_label_col").value == "label"
    assert any("No column name says which column holds" in i.value for i in at.info)
    click(at, "Load this corpus", clean=False)
    assert any("Several columns could hold the document text (summary, notes)" in e.value for e in at.error)
    at.selectbox(key="upload_text_col").set_value("notes").run()
    click(at, "Load this corpus")
    corpus = state_of(at).loaded.corpus
    assert corpus.text_column == "notes" and len(corpus) == 30
    assert at.selectbox(key="upload_text_col").value == "notes"
    assert any("text column “notes”" in c for c in at.caption.values)
