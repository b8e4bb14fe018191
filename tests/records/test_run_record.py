"""A run folder's local ledger record (issue 35 part 7; ``dpkps_core.records.run_record``): the CLI's ``sample`` records which
ledger admitted the run's units — its random id, never its path — and the ids of the events it charged, per step; the
record reads back the run's account from the ledger; a damaged record is refused (never read as empty: that would
lower the run's ε), and the export never carries it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_toys import corpus_files, fake_models  # noqa: F401 (fixtures)
from eval_toys import POOLS

from dpkps_core.cli import main
from dpkps_core.errors import ExportError, ParameterError
from dpkps_core.dossier.export import collect_bundle
from dpkps_core.ledger_store import LedgerStore, PersistentLedger
from dpkps_core.records.run_record import read_ledger_record, write_ledger_record
from dpkps_core.records.runfolder import LEDGER_RECORD_FILE


def test_cli_sample_records_the_admitting_ledger_and_its_events(tmp_path: Path, corpus_files,
                                                               fake_models) -> None:
    corpus, vocab = corpus_files
    out = tmp_path / "run"
    assert main(["sample", "--corpus", str(corpus), "--vocabulary", str(vocab), "--classes", ",".join(POOLS),
                 "--eps-voc", "2", "--eps-kde", "3", "--vocab-size", "20", "--terms-per-doc", "5", "--length", "4",
                 "--per-class", "5", "--seed", "1", "--out", str(out)]) == 0
    record = read_ledger_record(out)
    store = LedgerStore()
    assert record["ledger_id"] == store.ledger_id and str(store.root) not in (out / LEDGER_RECORD_FILE).read_text()
    assert set(record["steps"]) == {"vocabulary", "density"}
    account = PersistentLedger(store, (), tool="test").events_ledger(
        [i for ids in record["steps"].values() for i in ids])
    report = json.loads((out / "privacy_report.json").read_text())
    assert account.total_epsilon == pytest.approx(report["epsilon_total"]) == pytest.approx(5.0)
    assert LEDGER_RECORD_FILE not in collect_bundle(out)
    with pytest.raises(ExportError):
        collect_bundle(out, files=[LEDGER_RECORD_FILE])       # asked for by name, it is refused


def test_a_damaged_record_is_refused_and_ids_are_kept_once(tmp_path: Path) -> None:
    write_ledger_record(tmp_path, "abc", {"vocabulary": [3, 3, 4]})
    assert read_ledger_record(tmp_path) == {"ledger_id": "abc", "steps": {"vocabulary": [3, 4]}}
    (tmp_path / LEDGER_RECORD_FILE).write_text('{"format": "dpkps-run-ledger", "ledger_id": "abc", "steps": {"x": ["1"]}}')
    with pytest.raises(ParameterError, match="damaged"):
        read_ledger_record(tmp_path)
    assert read_ledger_record(tmp_path / "missing") is None


def test_a_cli_forecast_that_steered_a_cli_run_is_in_its_total(tmp_path: Path, corpus_files, fake_models,
                                                               capsys) -> None:
    corpus, vocab = corpus_files
    common = ["--corpus", str(corpus), "--vocabulary", str(vocab), "--classes", ",".join(POOLS), "--eps-voc", "2",
              "--eps-kde", "3", "--vocab-size", "20", "--terms-per-doc", "5", "--length", "4", "--per-class", "5",
              "--seed", "1"]
    assert main(["forecast", *common]) == 0                  # ε_forecast 0.2, charged to the ledger
    out = tmp_path / "run"
    assert main(["sample", *common, "--out", str(out)]) == 0
    assert "ε spent: 5.2 (the DP forecast that steered it 0.2 + vocabulary 2 + densities 3)" in capsys.readouterr().out
    report = json.loads((out / "privacy_report.json").read_text())
    assert report["epsilon_total"] == pytest.approx(5.2)
    assert [e["step"] for e in report["events"]][0] == "forecast"
    assert len(read_ledger_record(out)["steps"]["forecast"]) == 1
    other = tmp_path / "other"                               # another S: not steered by that forecast
    assert main(["sample", *[a if a != "5" else "4" for a in common], "--out", str(other)]) == 0
    assert json.loads((other / "privacy_report.json").read_text())["epsilon_total"] == pytest.approx(5.0)
