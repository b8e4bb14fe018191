"""The typed privacy report (dpkps_core.records.privacy_report; docs/DESIGN.md §2): one frozen PrivacyReport that writes the same
``privacy_report.json`` as the dictionary the pipeline built before, reads old files back byte for byte, and
renders Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpkps_core.method.config import SamplingConfig
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.method.pipeline import run_sampling, write_run_files
from dpkps_core.records.privacy_report import DPKPS_KEYS, PrivacyReport
from dpkps_core.records.runfolder import RunFolder
from canonical import canonical_digest
from test_seeded_run_files import _corpus, _vocabulary

# Canonical digest (tests/canonical.py: floats to 9 significant digits, keys sorted; docs/TESTING.md "Pinned digests")
# of privacy_report.json (event timestamps blanked) of the seeded runs of tests/test_seeded_run_files.py. First pinned
# as SHA-256s of the raw JSON with the code BEFORE the report was typed (the dictionary in pipeline.py); the canonical
# digests were taken from the same, unchanged JSON (the raw digests still held on the machine that took them).
EXPECTED = {
    "independent": "0c86fd05ba766c296ebb1fbc1be28da233733cd1cba9ea75d846523adbdbbdae",
    "iterative-linear": "ec855bc91c495712a833e44498bea68fa0062b560c83330ead705ff5f85b2102",
    "iterative-log": "ff47584d8017617e81fe0b89c58b5ad7a607346a71ce3b97453c4d0490f5132c",
}


def _seeded_report(method: str, tmp_path: Path) -> tuple[PrivacyReport, str]:
    cfg = SamplingConfig(corpus="fixed", eps_voc=2.0, eps_kde=3.0, method=method, vocab_size=12, terms_per_doc=5,
                         per_class=3, length=4, features=64, bandwidth=1.0, seed=11, noise_sampler="numpy",
                         test_fraction=0.25, split_seed=3)
    run = run_sampling(_corpus(), cfg, vocabulary=_vocabulary(), embedder=HashingEmbedder(16),
                       context=ReleaseContext(noise=NoiseSource(11, sampler="numpy"), ledger=PrivacyLedger(10.0)))
    report = run.privacy_report()
    out = write_run_files(tmp_path / "run", config=run.config, split=run.split,
                          private_vocabulary=run.private_vocabulary, outcome=run.outcome, report=report)
    return report, RunFolder(out).privacy_report.read_text(encoding="utf-8")


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_a_seeded_run_writes_the_same_report_json_as_before(method: str, tmp_path: Path) -> None:
    report, text = _seeded_report(method, tmp_path)
    data = json.loads(text)
    assert tuple(data) == tuple(k for k in DPKPS_KEYS if k in data)
    for event in data["events"]:
        event["timestamp"] = "T"
    # public settings added to the configuration since the digests were taken, at their defaults: the file's
    # encoding and the loader's limits (None = the deployment's default)
    assert data["parameters"].pop("encoding") == "utf-8"
    for later in ("max_corpus_bytes", "max_documents"):
        assert data["parameters"].pop(later, None) is None
    got = canonical_digest(data)
    assert got == EXPECTED[method], got
    # typed: the events are the ledger's frozen events, the totals its totals
    assert isinstance(report, PrivacyReport) and all(isinstance(e, PrivacyEvent) for e in report.events)
    assert report.epsilon_total == pytest.approx(5.0) and report["epsilon_kde"] == pytest.approx(3.0)
    assert report.method == method and report.epsilon_cap == 10.0


def test_an_old_report_reads_back_and_writes_the_same_json(tmp_path: Path) -> None:
    _, text = _seeded_report("independent", tmp_path)
    back = PrivacyReport.from_dict(json.loads(text))
    assert back.to_dict() == json.loads(text) and list(back) == list(json.loads(text))
    assert json.loads(back.to_json()) == json.loads(text)
    assert back == PrivacyReport.from_dict(back.to_dict()) and dict(back) == back.to_dict()
    md = back.to_markdown()
    assert "| vocabulary |" in md and "| kde |" in md and "Total ε = 5" in md


def test_a_report_from_a_release_context_and_its_checks() -> None:
    ledger = PrivacyLedger(8.0)
    ledger.charge(PrivacyEvent("laplace_count", "size", 0.5, 1.0, 2.0, "a count"))
    rep = PrivacyReport.from_context(ReleaseContext(noise=NoiseSource(), ledger=ledger), method="m", guarantee="g",
                                     details={"extra": 1})
    assert rep["extra"] == 1 and rep.epsilon_total == 0.5 and rep.epsilon_by_step == {"size": 0.5}
    assert rep["seed_policy"] == "os-entropy"
    with pytest.raises(ParameterError, match="needs the ledger"):  # a report is read off a ledger: none, no report
        PrivacyReport.from_context(ReleaseContext(noise=NoiseSource()), method="m", guarantee="g")
    other = PrivacyLedger()
    other.charge(PrivacyEvent("gauss", "votes", 1.5, 1.0, 3.0, "votes", delta=1e-6))
    moved = rep.with_context(ReleaseContext(noise=NoiseSource(1, sampler="numpy"), ledger=other)).with_details(
        note="n", method="m2")
    assert (moved.epsilon_total, moved.delta_total, moved.method, moved["note"]) == (1.5, 1e-6, "m2", "n")
    assert moved.seed_policy == "seeded-demo-not-for-release" and [e.step for e in moved.events] == ["votes"]
    with pytest.raises(ParameterError, match="repeat its typed fields"):
        PrivacyReport(method="m", guarantee="g", neighbouring="n", epsilon_total=1, delta_total=0,
                      details={"events": []})
    with pytest.raises(KeyError):
        rep["nope"]
