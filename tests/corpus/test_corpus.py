"""Tests of dpkps_core.corpus: formats, column guessing, validation messages, demo corpora."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from dpkps_core.corpus import (
    DEMO_CORPORA,
    Corpus,
    LoadReport,
    list_columns,
    load_corpus,
    load_demo_corpus,
    suggest_columns,
)
from dpkps_core.errors import CorpusError, ParameterError

SECRET = "Top-secret patient note that must never appear in an error message."


def _df(records: list[dict[str, str]]) -> pd.DataFrame:
    return pd.DataFrame.from_records(records)


def _csv_bytes(records: list[dict[str, str]], sep: str = ",") -> bytes:
    return _df(records).to_csv(index=False, sep=sep).encode("utf-8")


def _same(corpus: Corpus, toy: Corpus) -> None:
    assert corpus.texts == toy.texts
    assert corpus.labels == toy.labels
    assert corpus.observed_classes == ["business", "sport", "tech"]
    assert not corpus.declared  # a loaded file has no public class list until the user declares one


# ---- Corpus dataclass ---------------------------------------------------------------------------------


def test_corpus_properties_and_subset(toy_corpus):
    assert len(toy_corpus) == 11
    assert toy_corpus.classes == ["business", "sport", "tech"]
    assert toy_corpus.class_counts == {"business": 3, "sport": 4, "tech": 4}
    sub = toy_corpus.subset([0, 5, 9])
    assert isinstance(sub, Corpus)
    assert sub.labels == ("sport", "tech", "business")
    assert sub.texts[1] == toy_corpus.texts[5]
    with pytest.raises(ParameterError):
        toy_corpus.subset([11])
    # repr never shows document text
    assert "striker" not in repr(toy_corpus)


def test_corpus_report_not_part_of_equality(toy_corpus):
    report = LoadReport(n_read=11, n_empty=0, n_too_short=0, n_duplicates=0, n_kept=11)
    other = Corpus(toy_corpus.texts, toy_corpus.labels, toy_corpus.name, toy_corpus.source, report=report,
                   public_classes=toy_corpus.public_classes)
    assert other == toy_corpus
    assert "11 documents kept" in report.summary()


def test_corpus_rejects_mismatched_lengths():
    with pytest.raises(CorpusError):
        Corpus(texts=("a",), labels=(), name="x", source="y")


# ---- formats ------------------------------------------------------------------------------------------


def test_csv_roundtrip_from_path(tmp_path, toy_corpus, toy_records):
    p = tmp_path / "docs.csv"
    p.write_bytes(_csv_bytes(toy_records))
    c = load_corpus(p)
    _same(c, toy_corpus)
    assert c.name == "docs"
    assert c.report == LoadReport(n_read=11, n_empty=0, n_too_short=0, n_duplicates=0, n_kept=11)


def test_csv_from_bytes_and_file_like(toy_corpus, toy_records):
    data = _csv_bytes(toy_records)
    _same(load_corpus(data, filename="upload.csv"), toy_corpus)
    _same(load_corpus(io.BytesIO(data), filename="upload.csv"), toy_corpus)


def test_csv_semicolon_delimiter_and_bom(toy_corpus, toy_records):
    data = b"\xef\xbb\xbf" + _csv_bytes(toy_records, sep=";")
    _same(load_corpus(data, filename="x.csv"), toy_corpus)


def test_delimiter_comes_from_the_header_line_alone(toy_corpus, toy_records):
    """docs/DESIGN.md §2.0: the delimiter is read off the header (column names, public), so rows full of another
    delimiter — one added row or many — never switch it."""
    rows = toy_records + [{"text": "a;b;c;d;e;f;g;h;i;j;k;l;m;n;o;p;q;r;s;t;u;v;w;x;y;z", "label": "tech"}] * 3
    c = load_corpus(_csv_bytes(rows), filename="x.csv")
    assert len(c) == 12 and c.report.n_duplicates == 2


def test_format_comes_from_the_extension(toy_records):
    """The file name (public) decides the format; the content's first bytes only when there is no extension."""
    jl = "\n".join(json.dumps(r) for r in toy_records).encode()
    assert len(load_corpus(jl, filename="docs.jsonl")) == 11
    assert len(load_corpus(jl, filename="docs")) == 11  # no extension: '{' starts JSON Lines
    with pytest.raises(CorpusError):
        load_corpus(jl, filename="docs.csv")  # read as CSV because the name says so


def test_tsv_roundtrip(tmp_path, toy_corpus, toy_records):
    p = tmp_path / "docs.tsv"
    p.write_bytes(_csv_bytes(toy_records, sep="\t"))
    _same(load_corpus(p), toy_corpus)


def test_jsonl_roundtrip(tmp_path, toy_corpus, toy_records):
    p = tmp_path / "docs.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in toy_records) + "\n\n", encoding="utf-8")
    _same(load_corpus(p), toy_corpus)


def test_json_array_roundtrip(toy_corpus, toy_records):
    _same(load_corpus(json.dumps(toy_records).encode(), filename="docs.json"), toy_corpus)


def test_parquet_roundtrip(tmp_path, toy_corpus, toy_records):
    p = tmp_path / "docs.parquet"
    df = _df(toy_records)
    df["year"] = 2024  # non-string column is ignored by the guess
    df.to_parquet(p)
    _same(load_corpus(p), toy_corpus)
    assert list_columns(p) == ["text", "label", "year"]


def test_explicit_format_overrides_extension(toy_corpus, toy_records):
    _same(load_corpus(_csv_bytes(toy_records, sep="\t"), filename="data.txt", file_format="tsv"), toy_corpus)


def _write_txt_tree(root: Path, toy: Corpus) -> None:
    for i, (t, y) in enumerate(zip(toy.texts, toy.labels)):
        d = root / y
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{i:03d}.txt").write_text(t, encoding="utf-8")


def test_folder_of_txt(tmp_path, toy_corpus):
    _write_txt_tree(tmp_path / "corpus", toy_corpus)
    (tmp_path / "corpus" / ".DS_Store").write_bytes(b"\x00\x01")  # ignored hidden file
    c = load_corpus(tmp_path / "corpus")
    assert sorted(zip(c.texts, c.labels)) == sorted(zip(toy_corpus.texts, toy_corpus.labels))
    assert c.class_counts == toy_corpus.class_counts


def test_zip_of_txt(toy_corpus):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i, (t, y) in enumerate(zip(toy_corpus.texts, toy_corpus.labels)):
            zf.writestr(f"export/{y}/{i:03d}.txt", t)
        zf.writestr("__MACOSX/export/._junk.txt", b"\x00\x05")
    c = load_corpus(buf.getvalue(), filename="export.zip")
    assert sorted(zip(c.texts, c.labels)) == sorted(zip(toy_corpus.texts, toy_corpus.labels))


def test_zip_without_class_folders_is_an_error(toy_corpus):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i, t in enumerate(toy_corpus.texts):
            zf.writestr(f"{i}.txt", t)
    with pytest.raises(CorpusError, match=r"11 without a label.*name of the folder holding it"):
        load_corpus(buf.getvalue(), filename="flat.zip")


def test_txt_file_outside_a_class_folder_is_dropped_alone(tmp_path, toy_corpus):
    """docs/DESIGN.md §2.0: a file without a label drops alone (counted), it does not refuse the corpus."""
    _write_txt_tree(tmp_path / "c", toy_corpus)
    (tmp_path / "c" / "stray.txt").write_text(SECRET, encoding="utf-8")
    c = load_corpus(tmp_path / "c")
    assert len(c) == 11 and c.report.n_no_label == 1 and SECRET not in c.texts
    assert "1 without a label" in c.report.summary()


# ---- column guessing ----------------------------------------------------------------------------------


def test_column_guessing_by_name(toy_records):
    recs = [{"ID": str(i), "Review": r["text"], "Category": r["label"]} for i, r in enumerate(toy_records)]
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    assert c.observed_classes == ["business", "sport", "tech"]
    assert suggest_columns(_csv_bytes(recs), filename="x.csv") == ("Review", "Category")


def test_column_guessing_by_second_tier_names(toy_records):
    recs = [{"short": "abc", "Clinical Notes": r["text"], "target": r["label"]} for r in toy_records]
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    assert c.texts[0] == toy_records[0]["text"]
    assert (c.text_column, c.label_column) == ("Clinical Notes", "target")
    # a first-tier name wins over a second-tier one; "*_text" is first tier
    recs = [{"summary": "abc " * 20, "review_text": r["text"], "label": r["label"]} for r in toy_records]
    assert suggest_columns(_csv_bytes(recs), filename="x.csv") == ("review_text", "label")


def test_text_column_is_never_chosen_from_values(toy_records):
    """docs/DESIGN.md §2.0: one added row with a very long value must not switch the text column (the old guess took the
    longest column over the first 2,000 rows); without a matching name the loader asks."""
    recs = [{"a": r["text"], "b": "x", "label": r["label"]} for r in toy_records]
    with pytest.raises(CorpusError, match=r"No text column was found.*--text-column NAME from: a, b, label") as e:
        load_corpus(_csv_bytes(recs), filename="x.csv")
    # the app words the same request for its page (never a command-line flag there; walk 3)
    in_app = str(e.value.in_app())
    assert "“Text column” choice above from: a, b, label" in in_app and "--" not in in_app
    assert suggest_columns(_csv_bytes(recs), filename="x.csv") == (None, "label")
    recs = [{"summary": r["text"][:25], "notes": r["text"], "label": r["label"]} for r in toy_records]
    longer = recs + [{"summary": "word " * 2000, "notes": "short but long enough", "label": "sport"}]
    for rows in (recs, longer):
        with pytest.raises(CorpusError, match=r"Several columns could hold the document text \(summary, notes\)"):
            load_corpus(_csv_bytes(rows), filename="x.csv")
        assert suggest_columns(_csv_bytes(rows), filename="x.csv") == (None, "label")
    c = load_corpus(_csv_bytes(longer), filename="x.csv", text_column="notes")
    assert c.text_column == "notes" and c.texts[0] == toy_records[0]["text"]


def test_label_column_ambiguity_asks(toy_records):
    recs = [{"text": r["text"], "class": r["label"], "category": r["label"]} for r in toy_records]
    with pytest.raises(CorpusError, match=r"Several columns could hold the class label \(class, category\)"):
        load_corpus(_csv_bytes(recs), filename="x.csv")
    assert len(load_corpus(_csv_bytes(recs), filename="x.csv", label_column="class")) == 11


def test_person_column_is_never_a_guessed_text_or_label(toy_records):
    recs = [{"notes": r["text"], "topic": r["label"], "label": f"P{i}"} for i, r in enumerate(toy_records)]
    c = load_corpus(_csv_bytes(recs), filename="x.csv", person_column="label")
    assert (c.text_column, c.label_column) == ("notes", "topic") and c.persons[0] == "P0"


def test_explicit_columns(toy_records):
    recs = [{"a": r["text"], "b": r["label"]} for r in toy_records]
    c = load_corpus(_csv_bytes(recs), filename="x.csv", text_column="a", label_column="b")
    assert len(c) == 11


def test_no_label_column_asks_to_choose(toy_records):
    recs = [{"text": r["text"], "tag": r["label"]} for r in toy_records]
    with pytest.raises(CorpusError, match="No label column was found.*choose the label column.*from: text, tag"):
        load_corpus(_csv_bytes(recs), filename="x.csv")


def test_list_columns_formats(tmp_path, toy_records):
    assert list_columns(_csv_bytes(toy_records), filename="x.csv") == ["text", "label"]
    jl = "\n".join(json.dumps(r) for r in toy_records).encode()
    assert list_columns(jl, filename="x.jsonl") == ["text", "label"]
    with pytest.raises(CorpusError, match="no columns"):
        list_columns(b"PK\x03\x04rest", filename="x.zip")


# ---- bad inputs: one specific message each ------------------------------------------------------------


def test_error_empty_file():
    with pytest.raises(CorpusError, match="The file is empty"):
        load_corpus(b"", filename="x.csv")
    with pytest.raises(CorpusError, match="The file is empty"):
        load_corpus(b"  \n\n ", filename="x.csv")


def test_error_not_utf8(toy_records):
    data = _csv_bytes(toy_records[:3]) + "é,sport\n".encode("latin-1")
    with pytest.raises(CorpusError, match=r"not valid UTF-8 \(first bad byte at line 5.*re-save it as UTF-8"):
        load_corpus(data, filename="x.csv")


def test_error_binary_file(toy_records):
    with pytest.raises(CorpusError, match="looks binary"):
        load_corpus(b"\x00\x01\x02\x03binary\x00junk" * 10, filename="x.csv")
    # the whole file is checked, not its first 8 KB: the refusal does not depend on which rows come first
    late = _csv_bytes(toy_records * 100) + b"a NUL \x00 in the last row,sport\n"
    assert len(late) > 8192
    with pytest.raises(CorpusError, match="looks binary"):
        load_corpus(late, filename="x.csv")


def test_error_utf16_file(toy_records):
    data = _df(toy_records).to_csv(index=False).encode("utf-16")
    with pytest.raises(CorpusError, match="UTF-16"):
        load_corpus(data, filename="x.csv")


def test_error_unreadable_csv():
    data = ('text,label\n"' + SECRET + ' is here",sport\n' + SECRET + ',a,b,c,d\n').encode()
    with pytest.raises(CorpusError, match="CSV file could not be parsed near line 3") as exc:
        load_corpus(data, filename="x.csv")
    assert SECRET[:20] not in str(exc.value)


def test_error_invalid_jsonl_line(toy_records):
    data = (json.dumps(toy_records[0]) + "\n{not json " + SECRET + "\n").encode()
    with pytest.raises(CorpusError, match="Line 2 of the JSONL file is not valid JSON") as exc:
        load_corpus(data, filename="x.jsonl")
    assert SECRET not in str(exc.value)


def test_error_damaged_parquet():
    with pytest.raises(CorpusError, match="Parquet file could not be read"):
        load_corpus(b"PAR1" + b"\x00garbage" * 20, filename="x.parquet")


def test_error_unsupported_extension():
    with pytest.raises(CorpusError, match="not supported"):
        load_corpus(b"hello", filename="x.docx")


def test_error_missing_column(toy_records):
    with pytest.raises(CorpusError, match="Column 'body' was not found; available columns: text, label"):
        load_corpus(_csv_bytes(toy_records), filename="x.csv", text_column="body")
    with pytest.raises(CorpusError, match="Column 'y' was not found; available columns: text, label"):
        load_corpus(_csv_bytes(toy_records), filename="x.csv", label_column="y")


def test_error_no_documents_after_cleaning():
    recs = [{"text": "short", "label": "a"}, {"text": "", "label": "b"}, {"text": "tiny", "label": "b"}]
    with pytest.raises(CorpusError, match=r"No documents are left after cleaning \(3 read: 1 empty, 2 shorter"):
        load_corpus(_csv_bytes(recs), filename="x.csv")


def test_header_only_file_has_no_documents():
    with pytest.raises(CorpusError, match="only a header"):
        load_corpus(b"text,label\n", filename="x.csv")


def test_too_short_documents_are_dropped_and_counted(toy_records):
    recs = toy_records + [{"text": "too short", "label": "sport"}, {"text": "   ", "label": "tech"}]
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    assert len(c) == 11
    assert c.report.n_too_short == 1
    assert c.report.n_empty == 1
    assert c.report.n_read == 13
    assert load_corpus(_csv_bytes(recs), filename="x.csv", min_chars=5).report.n_too_short == 0


def test_duplicates_are_dropped_and_counted(toy_records):
    recs = toy_records + toy_records[:3] + [dict(toy_records[0], text="  " + toy_records[0]["text"] + " ")]
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    assert len(c) == 11
    assert c.report.n_duplicates == 4
    assert "4 identical copies" in c.report.summary()
    kept = load_corpus(_csv_bytes(recs), filename="x.csv", drop_duplicates=False)
    assert len(kept) == 15 and kept.report.n_duplicates == 0


@pytest.mark.parametrize("before", [True, False])
def test_same_text_under_another_label_is_another_document(toy_records, before):
    """docs/DESIGN.md §2.0: only IDENTICAL rows collapse. The old loader kept the first copy of a text across labels,
    so one added row placed before the original turned into a label swap."""
    extra = dict(toy_records[0], label="business")
    recs = [extra] + toy_records if before else toy_records + [extra]
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    base = load_corpus(_csv_bytes(toy_records), filename="x.csv")
    assert len(c) == 12 and c.report.n_duplicates == 0
    assert sorted(zip(c.texts, c.labels)) == sorted(list(zip(base.texts, base.labels)) + [(extra["text"], "business")])


def test_duplicates_collapse_only_within_one_person(toy_records):
    shared = "Boilerplate discharge instructions shared by many patients of the ward."
    rows = [{"text": shared, "label": "sport", "pid": f"P{k}"} for k in range(5)]
    rows += [{"text": shared, "label": "sport", "pid": "P0"}, {"text": shared, "label": "tech", "pid": "P0"}]
    c = load_corpus(_csv_bytes(rows), filename="x.csv", person_column="pid")
    assert c.report.n_duplicates == 1  # only P0's identical second row
    assert sorted(zip(c.persons, c.labels)) == sorted([(f"P{k}", "sport") for k in range(5)] + [("P0", "tech")])
    without = load_corpus(_csv_bytes(rows), filename="x.csv")  # no person column: same text and label collapse
    assert sorted(without.labels) == ["sport", "tech"] and without.report.n_duplicates == 5


def test_empty_label_drops_that_row_alone(toy_records):
    """docs/DESIGN.md §2.0: one row with an empty label must not refuse the whole corpus; it is dropped and counted."""
    recs = list(toy_records)
    recs.insert(4, {"text": SECRET, "label": ""})
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    assert len(c) == 11 and SECRET not in c.texts
    assert c.report.n_no_label == 1 and "1 without a label" in c.report.summary()


def test_missing_label_in_jsonl_drops_that_record(toy_records):
    lines = [json.dumps(r) for r in toy_records]
    lines.insert(2, json.dumps({"text": SECRET}))
    c = load_corpus("\n".join(lines).encode(), filename="x.jsonl")
    assert len(c) == 11 and c.report.n_no_label == 1


def test_empty_person_id_drops_that_row_alone(toy_records):
    recs = [dict(r, pid=f"P{i % 4}") for i, r in enumerate(toy_records)]
    recs.insert(3, {"text": SECRET, "label": "sport", "pid": "  "})
    c = load_corpus(_csv_bytes(recs), filename="x.csv", person_column="pid")
    assert len(c) == 11 and SECRET not in c.texts and c.report.n_no_person == 1
    assert "1 without a person id" in c.report.summary()


def test_one_label_is_a_local_note_not_a_refusal(toy_records):
    """Whether anything is released must not hinge on one document's label (issue 11 §2): a file whose
    documents all carry one label loads with a local note; the public class list decides."""
    recs = [dict(r, label="same") for r in toy_records]
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    assert any("same label" in n for n in c.report.notes)
    with pytest.raises(ParameterError, match="at least two public class names"):
        c.with_classes(["same"])


def test_small_class_is_a_local_note_not_a_refusal(toy_records):
    recs = toy_records + [{"text": "A single lonely document about weather today.", "label": "weather"}]
    c = load_corpus(_csv_bytes(recs), filename="x.csv")
    assert any("fewer than 2 documents" in n and "weather" in n for n in c.report.notes)
    c5 = load_corpus(_csv_bytes(toy_records), filename="x.csv", min_class_size=5)
    assert any("3 label(s) have fewer than 5" in n for n in c5.report.notes)


def test_declared_classes(toy_records):
    c = load_corpus(_csv_bytes(toy_records), filename="x.csv", classes="sport, tech, weather")
    assert c.classes == ["sport", "tech", "weather"]  # declaration order, an empty class allowed
    assert c.undeclared_count == 3  # the business documents (private count, local only)
    assert set(c.declared_only().labels) == {"sport", "tech"}
    with pytest.raises(ParameterError, match="Declare the public class names"):
        load_corpus(_csv_bytes(toy_records), filename="x.csv").classes
    with pytest.raises(ParameterError, match="twice"):
        c.with_classes(["a", "a"])
    with pytest.raises(ParameterError, match="must not be empty"):
        c.with_classes(["a", ""])


def test_error_file_too_big(tmp_path, toy_records):
    p = tmp_path / "big.csv"
    p.write_bytes(_csv_bytes(toy_records))
    with pytest.raises(CorpusError, match=r"The file is .* over the 100 bytes limit"):
        load_corpus(p, max_bytes=100)
    with pytest.raises(CorpusError, match="over the 100 bytes limit"):
        load_corpus(_csv_bytes(toy_records), filename="x.csv", max_bytes=100)


def test_error_too_many_documents_and_truncation(toy_records):
    with pytest.raises(CorpusError, match="has 11 documents, over the limit of 5"):
        load_corpus(_csv_bytes(toy_records), filename="x.csv", max_documents=5)
    # keeping the first rows would let one added row push another out (docs/DESIGN.md §2.0): refused, a public setting
    with pytest.raises(ParameterError, match="truncate=True is not supported"):
        load_corpus(_csv_bytes(toy_records), filename="x.csv", max_documents=8, truncate=True)


def test_error_file_not_found(tmp_path):
    with pytest.raises(CorpusError, match="was not found"):
        load_corpus(tmp_path / "nope.csv")


def test_bad_parameters(toy_records):
    with pytest.raises(ParameterError):
        load_corpus(_csv_bytes(toy_records), filename="x.csv", min_chars=-1)
    with pytest.raises(ParameterError):
        load_corpus(_csv_bytes(toy_records), filename="x.csv", file_format="xlsx")
    with pytest.raises(ParameterError):
        load_corpus(12345)


def test_folder_file_not_utf8(tmp_path, toy_corpus):
    _write_txt_tree(tmp_path / "c", toy_corpus)
    (tmp_path / "c" / "sport" / "bad.txt").write_bytes("caf\xe9 au lait and more words".encode("latin-1"))
    with pytest.raises(CorpusError, match="file 'sport/bad.txt' is not valid UTF-8"):
        load_corpus(tmp_path / "c")


# ---- demo corpora -------------------------------------------------------------------------------------


@pytest.mark.assets
def test_demo_bbc():
    c = load_demo_corpus("bbc")
    assert c.report.n_read == 2225
    assert c.report.n_duplicates == 100  # 2 of them differ only in whitespace (normalise_document_text)
    assert len(c) == 2125
    assert c.classes == ["business", "entertainment", "politics", "sports", "tech"]
    assert c.class_counts == {"business": 503, "entertainment": 369, "politics": 403, "sports": 503, "tech": 347}
    assert "bbc" in DEMO_CORPORA


@pytest.mark.assets
def test_demo_drugs_condition():
    c = load_demo_corpus("drugs")
    assert all(n >= 30 for n in c.class_counts.values())
    assert c.class_counts == {"Acne": 41, "Birth Control": 192, "Depression": 53, "Pain": 44}
    assert not any("&#039;" in t or t.startswith('"') for t in c.texts)
    small = load_demo_corpus("drugs", min_class_size=10)
    assert len(small.classes) > len(c.classes)
    assert all(n >= 10 for n in small.class_counts.values())
    assert "Bipolar Disorder" in small.classes


@pytest.mark.assets
def test_demo_drugs_rating():
    c = load_demo_corpus("drugs", label="rating")
    assert c.classes == ["negative", "neutral", "positive"]
    assert len(c) == 971


@pytest.mark.assets
def test_demo_min_class_size_too_large():
    with pytest.raises(ParameterError, match="lower min_class_size"):
        load_demo_corpus("drugs", min_class_size=500)


def test_demo_unknown_name():
    with pytest.raises(ParameterError, match="Unknown demo corpus"):
        load_demo_corpus("imdb")


def test_zip_with_unsupported_compression_method(tmp_path):
    import io
    import zipfile

    import pytest

    from dpkps_core.corpus import load_corpus
    from dpkps_core.errors import CorpusError

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i, label in enumerate(["a", "b"] * 3):
            zf.writestr(f"{label}/{i}.txt", f"document number {i} about the topic {label} in some detail")
    data = bytearray(buf.getvalue())
    # rewrite the compression method of every entry to 99 (AES/unknown), in local and central headers
    for sig, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        start = 0
        while (pos := data.find(sig, start)) != -1:
            data[pos + offset:pos + offset + 2] = (99).to_bytes(2, "little")
            start = pos + 4
    with pytest.raises(CorpusError, match="compression method"):
        load_corpus(bytes(data), filename="docs.zip")
