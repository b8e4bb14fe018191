"""The one chunked reading path (issue 31; docs/DESIGN.md §2.0): every format read in chunks gives the same documents,
the same report and the same errors whatever the chunk size, and the text readers give what one whole-file
decode gives whatever the block size."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from dpkps_core.corpus import load_corpus, read_rows
from dpkps_core.corpus import textstream
from dpkps_core.corpus.formats import NotUTF8Error
from dpkps_core.corpus.stream import CorpusStream
from dpkps_core.corpus.textstream import ByteSource, check_text, iter_lines, open_text
from dpkps_core.errors import CorpusError

WORDS = ("striker", "goal", "bank", "shares", "chip", "network", "league", "profit", "browser", "cup")


def _records(n: int = 60) -> list[dict[str, object]]:
    """Rows with duplicates (within and across persons), short and empty texts, missing labels and persons."""
    out = []
    for i in range(n):
        text = f"Report {i % 20}: the {WORDS[i % 10]} and the {WORDS[(i * 3) % 10]} said today, once more."
        if i % 17 == 5:
            text = "short"
        if i % 19 == 7:
            text = "   "
        out.append({"id": i, "notes": text, "label": ["sport", "tech", "business", ""][i % 4] if i % 13 else "sport",
                    "patient": f"P{i % 5}" if i % 11 else ""})
    return out


def _same(a, b) -> None:
    assert a.texts == b.texts and a.labels == b.labels and a.persons == b.persons
    assert a.report == b.report


def _write_inputs(tmp_path: Path, records: list[dict[str, object]]) -> dict[str, Path]:
    df = pd.DataFrame.from_records(records)
    paths = {}
    paths["csv"] = tmp_path / "c.csv"
    df.to_csv(paths["csv"], index=False)
    paths["tsv"] = tmp_path / "c.tsv"
    df.to_csv(paths["tsv"], index=False, sep="\t")
    paths["jsonl"] = tmp_path / "c.jsonl"
    paths["jsonl"].write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    paths["json"] = tmp_path / "c.json"
    paths["json"].write_text(json.dumps(records), encoding="utf-8")
    paths["parquet"] = tmp_path / "c.parquet"
    df.to_parquet(paths["parquet"], index=False)
    parts = tmp_path / "parts"
    parts.mkdir()
    for k in range(0, len(df), 25):  # a data platform's export: part files and a _SUCCESS marker
        df.iloc[k:k + 25].to_parquet(parts / f"part-{k // 25:05d}.parquet", index=False)
    (parts / "_SUCCESS").write_text("")
    paths["parts"] = parts
    csv_parts = tmp_path / "csv_parts"
    csv_parts.mkdir()
    for k in range(0, len(df), 25):
        df.iloc[k:k + 25].to_csv(csv_parts / f"part-{k // 25:05d}.csv", index=False)
    paths["csv_parts"] = csv_parts
    return paths


@pytest.mark.parametrize("person", [None, "patient"])
def test_every_format_gives_the_same_documents_whatever_the_chunk_size(tmp_path, person):
    records = _records()
    paths = _write_inputs(tmp_path, records)
    reference = load_corpus(paths["csv"], person_column=person, chunk_rows=10_000)
    assert reference.report.n_read == len(records) and reference.report.n_duplicates > 0
    for fmt, path in paths.items():
        for chunk_rows in (1, 7, 1000):
            got = load_corpus(path, person_column=person, chunk_rows=chunk_rows)
            _same(got, reference)
            assert got.text_column == "notes" and got.label_column == "label", fmt


def test_chunks_are_bounded_and_numbered(tmp_path):
    path = _write_inputs(tmp_path, _records())["csv"]
    stream = CorpusStream(path, chunk_rows=7)
    chunks = list(stream.chunks())
    assert all(len(c) <= 7 for c in chunks) and stream.report is not None
    assert [c.first for c in chunks] == [sum(len(x) for x in chunks[:i]) for i in range(len(chunks))]
    assert stream.digests == stream.report.n_kept  # one de-duplication digest per kept row
    assert "Report" not in repr(chunks[0])


def test_duplicates_collapse_across_chunks(tmp_path):
    rows = [{"text": "The same long enough note about a goal.", "label": "sport"}] * 5
    rows += [{"text": "The same long enough note about a goal.", "label": "tech"}]
    p = tmp_path / "d.csv"
    pd.DataFrame.from_records(rows).to_csv(p, index=False)
    for chunk_rows in (1, 2, 100):
        c = load_corpus(p, chunk_rows=chunk_rows)
        assert c.labels == ("sport", "tech") and c.report.n_duplicates == 4


def test_jsonl_columns_are_every_records_keys(tmp_path):
    """A key seen only in the LAST record is a column for every chunk: columns come from the whole file's names."""
    lines = [json.dumps({"body": f"A body text number {i} long enough.", "label": "a"}) for i in range(5)]
    lines.append(json.dumps({"text": "A text column appears only here, long enough.", "label": "b"}))
    p = tmp_path / "late.jsonl"
    p.write_text("\n".join(lines) + "\n")
    for chunk_rows in (1, 100):
        c = load_corpus(p, chunk_rows=chunk_rows)
        assert c.text_column == "text" and c.texts == ("A text column appears only here, long enough.",)


def test_hive_partition_folders_are_columns(tmp_path):
    root = tmp_path / "export"
    for label in ("sport", "tech"):
        (root / f"label={label}").mkdir(parents=True)
        pd.DataFrame({"text": [f"A {label} note number {i}, long enough." for i in range(3)]}).to_parquet(
            root / f"label={label}" / "part-0.parquet", index=False)
    c = load_corpus(root, chunk_rows=2)
    assert c.labels == ("sport",) * 3 + ("tech",) * 3 and c.texts[0] == "A sport note number 0, long enough."


def test_parts_must_agree(tmp_path):
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    pd.DataFrame({"text": ["a long enough text here"], "label": ["x"]}).to_csv(mixed / "a.csv", index=False)
    pd.DataFrame({"text": ["a long enough text here"], "label": ["x"]}).to_parquet(mixed / "b.parquet")
    with pytest.raises(CorpusError, match="mixes csv and parquet parts"):
        load_corpus(mixed)
    other = tmp_path / "other"
    other.mkdir()
    pd.DataFrame({"text": ["a long enough text here"], "label": ["x"]}).to_csv(other / "a.csv", index=False)
    pd.DataFrame({"body": ["a long enough text here"], "label": ["x"]}).to_csv(other / "b.csv", index=False)
    with pytest.raises(CorpusError, match="part 'b.csv' has other columns than 'a.csv'"):
        load_corpus(other)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CorpusError, match="no .txt files and no data parts"):
        load_corpus(empty)


def test_document_limit_counts_the_whole_input(tmp_path):
    path = _write_inputs(tmp_path, _records(60))["jsonl"]
    with pytest.raises(CorpusError, match="has 60 documents, over the limit of 10 set by max_documents"):
        load_corpus(path, max_documents=10, chunk_rows=3)


def test_raw_rows_read_every_column_in_file_order(tmp_path):
    records = _records(20)
    raw = read_rows(_write_inputs(tmp_path, records)["parquet"], person_column="patient")
    assert raw.columns == ("id", "notes", "label", "patient") and raw.text_column == "notes"
    assert raw.column("id") == [r["id"] for r in records] and len(raw.rows()) == 20


def test_txt_zip_and_folder_in_chunks(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(9):
            zf.writestr(f"{'ab'[i % 2]}/{i}.txt", f"Document {i} of the zip, long enough to keep.")
    data = buf.getvalue()
    whole = load_corpus(data, filename="d.zip")
    assert len(whole) == 9 and whole.text_column is None
    _same(load_corpus(data, filename="d.zip", chunk_rows=2), whole)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        zf.extractall(tmp_path / "tree")
    _same(load_corpus(tmp_path / "tree", chunk_rows=4), whole)


# ---- text streams: what one whole-file decode gives, whatever the block size --------------------------------

@pytest.fixture
def tiny_blocks(monkeypatch):
    monkeypatch.setattr(textstream, "BLOCK_BYTES", 3)


def test_lines_split_as_splitlines_across_blocks(tiny_blocks):
    text = "a\r\nb\rc\nd\u2028e\x85f\r\n\r\ng\r"
    src = ByteSource.of(text.encode("utf-8"), filename="x.jsonl")
    with open_text(src, encoding="utf-8") as fh:
        assert list(iter_lines(fh)) == text.splitlines()


def test_quoted_crlf_and_short_rows_read_as_one_parse(tiny_blocks):
    data = 'text,label,extra\r\n"first line\r\nsecond line of text",sport\r\n"ünïcödé text long enough",tech,x\r\n'
    c = load_corpus(data.encode("utf-8"), filename="q.csv", chunk_rows=1)
    assert c.texts == ("first line\r\nsecond line of text", "ünïcödé text long enough")
    assert c.labels == ("sport", "tech")


def test_a_bad_byte_is_found_at_its_place_whatever_the_blocks(tiny_blocks):
    good = "text,label\n" + "".join(f"ünïcödé row {i} text,é\n" for i in range(5))
    check_text(ByteSource.of(good.encode("utf-8")), encoding="utf-8")  # characters cut by blocks are fine
    bad = good.encode("utf-8") + b"caf\xe9 row,x\n"
    with pytest.raises(NotUTF8Error) as exc:
        load_corpus(bad, filename="b.csv")
    offset = bad.index(b"\xe9")
    assert exc.value.line == 7 and exc.value.offset == offset
    with pytest.raises(CorpusError, match="looks binary"):
        load_corpus(good.encode("utf-8") + b"\x00", filename="b.csv")


@pytest.mark.slow
@pytest.mark.parametrize("chunk_rows", ["3"])  # a chunk boundary every 3 rows (1 row a time: 150 s for nothing more)
def test_the_neighbour_tests_hold_with_small_chunks(chunk_rows):
    """tests/test_neighbours_from_files.py, unchanged, with every file read a few rows at a time."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DPKPS_CHUNK_ROWS": chunk_rows}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_neighbours_from_files.py"], cwd=root, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:]


def test_chunk_rows_setting(monkeypatch, tmp_path):
    from dpkps_core.corpus.stream import default_chunk_rows
    from dpkps_core.errors import ParameterError

    monkeypatch.setenv("DPKPS_CHUNK_ROWS", "5")
    assert default_chunk_rows() == 5
    assert CorpusStream(_write_inputs(tmp_path, _records(12))["csv"]).chunk_rows == 5
    monkeypatch.setenv("DPKPS_CHUNK_ROWS", "0")
    with pytest.raises(ParameterError, match="DPKPS_CHUNK_ROWS must be a whole number"):
        default_chunk_rows()


def test_a_file_that_changes_between_passes_is_refused(tmp_path):
    import os

    path = _write_inputs(tmp_path, _records(12))["csv"]
    stream = CorpusStream(path)
    first = [c.texts for c in stream.chunks()]
    assert [c.texts for c in stream.chunks()] == first  # a second pass reads the same rows
    with path.open("a", encoding="utf-8") as fh:
        fh.write('99,"A row appended while the passes run, long enough.",sport,P1\n')
    os.utime(path, ns=(1, 1))
    with pytest.raises(CorpusError, match="changed on disk while it was being read"):
        list(stream.chunks())


def test_decoded_text_uploads_are_read_in_their_encoding():
    text = "text,label\nUne note très détaillée sur le café,a\nUne autre note assez longue ici,b\n"
    c = load_corpus(io.StringIO(text), filename="t.csv", encoding="latin-1")
    assert c.texts[0] == "Une note très détaillée sur le café"
    with pytest.raises(CorpusError, match="cannot hold"):
        load_corpus(io.StringIO(text.replace("café", "caf€")), filename="t.csv", encoding="latin-1")


@pytest.mark.parametrize("chunk_rows", [1, 7, 1000])
def test_a_later_pass_replays_the_first_pass_decisions(tmp_path, monkeypatch, chunk_rows):
    from dpkps_core.corpus import cleaning

    path = _write_inputs(tmp_path, _records())["csv"]
    stream = CorpusStream(path, person_column="patient", chunk_rows=chunk_rows)
    first = [(c.texts, c.labels, c.persons, c.first) for c in stream.chunks()]
    report = stream.report

    def no_digests(*args, **kwargs):
        raise AssertionError("a replayed pass digests no row")

    monkeypatch.setattr(cleaning.RowFilter, "feed", no_digests)
    assert [(c.texts, c.labels, c.persons, c.first) for c in stream.chunks()] == first
    assert stream.report == report


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "json", "parquet", "parts", "csv_parts"])
def test_the_fraction_read_grows_to_one(tmp_path, monkeypatch, fmt):
    monkeypatch.setattr(textstream, "BLOCK_BYTES", 1024)  # the text readers' read-ahead, smaller than the file
    path = _write_inputs(tmp_path, _records(20_000 if fmt == "csv" else 300))[fmt]  # pandas reads ahead 256 KB
    stream = CorpusStream(path, chunk_rows=20 if fmt != "csv" else 2000)
    seen = [stream.fraction_read for _ in stream.chunks()]
    assert seen == sorted(seen) and 0 < seen[0] < 1 and stream.fraction_read == 1.0
    again = [stream.fraction_read for _ in stream.chunks()]  # a replayed pass starts again from 0
    assert again[0] < 1 and stream.fraction_read == 1.0


def test_the_fraction_read_of_txt_files(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(10):
            zf.writestr(f"{'ab'[i % 2]}/{i}.txt", f"Document {i} of the zip, long enough to keep.")
    stream = CorpusStream(buf.getvalue(), filename="d.zip", chunk_rows=4)
    assert [round(stream.fraction_read, 1) for _ in stream.chunks()] == [0.4, 0.8, 1.0]
