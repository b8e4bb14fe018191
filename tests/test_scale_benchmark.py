"""``python -m benchmarks.scale`` runs end to end on a tiny corpus (issue 31): it builds the CSV from the demo
sentences, times the streaming passes and the in-memory path in child processes, and both count the same."""

from __future__ import annotations

import csv

import pytest

from benchmarks import scale


@pytest.mark.assets
def test_scale_benchmark_runs_tiny(tmp_path, capsys):
    rows = scale.main(["--sizes", "2000", "--folder", str(tmp_path), "--workers", "2", "--chunk-rows", "300"])
    out = capsys.readouterr().out
    stream, memory = rows
    assert stream["mode"] == "stream" and memory["mode"] == "in-memory"
    assert stream["documents"] == memory["documents"] > 1900  # the same documents kept by both paths
    assert stream["hist_total"] == pytest.approx(memory["hist_total"], rel=1e-9)
    assert stream["total_s"] > 0 and stream["tree_peak_rss_mb"] >= stream["peak_rss_mb"] > 0
    assert "| 2,000 | stream | 2 |" in out and "bytes per kept document" in out
    with (tmp_path / "bbc-2000.csv").open(encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 2000 and {r["label"] for r in table} == {"business", "entertainment", "politics", "sports",
                                                                   "tech"}
    assert table[0]["patient"] == table[2]["patient"] != table[3]["patient"]


@pytest.mark.assets
@pytest.mark.model
@pytest.mark.slow
def test_scale_benchmark_times_dpkps_sample_itself(tmp_path, capsys):
    rows = scale.main(["--sizes", "600", "--sample-only", "--folder", str(tmp_path), "--workers", "1",
                       "--chunk-rows", "250"])
    out = capsys.readouterr().out
    (sample,) = rows
    assert sample["mode"] == "dpkps sample" and 550 < sample["documents"] <= 600  # every kept row, all parts
    assert sample["total_s"] > 0 and sample["peak_rss_mb"] > 0
    assert "| 600 | dpkps sample | 1 | – | – |" in out


@pytest.mark.assets
def test_scale_benchmark_times_the_ledger_side_and_states_its_bytes_per_document(tmp_path, capsys):
    rows = scale.main(["--sizes", "1500", "--ledger-only", "--folder", str(tmp_path), "--chunk-rows", "400"])
    out = capsys.readouterr().out
    (ledger,) = rows
    assert ledger["mode"] == "ledger" and 1400 < ledger["documents"] <= 1500
    assert ledger["admitted"] == ledger["documents"] > ledger["training"] > 0  # a fresh ledger admits every unit
    assert list(ledger["stages"]) == ["prepare", "keying", "admit every document", "admit the training part (1)",
                                      "admit the training part (2)"]
    assert all(seconds >= 0 and mb > 0 for seconds, mb in ledger["stages"].values())
    assert ledger["key_bytes_per_document"] == 32.0  # one keyed digest per document, no string kept
    assert "| 1,500 | ledger | 1 |" in out and "keys 32 bytes per document" in out
    assert "ledger keys: 32 bytes per document" in out and "50.7 with a person column" in out
