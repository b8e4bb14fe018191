"""AppTest: a data-folder corpus on the streamed path (issue 31 §4; docs/OPERATIONS.md "Server-side data folder").

A small corpus is forced onto the streamed path (``$DPKPS_STREAM_ABOVE_BYTES=0``) and read in chunks of 7 rows, so
each DP release of pages 2–4 (the DP forecast, Ṽ, the densities) runs as a background job over several chunks — the same core steps as ``dpkps sample``
(``dpkps_core.method.pipeline.vocabulary_step`` / ``density_step`` over a ``StreamedCorpus``). The tests check that
it gives the same Ṽ, densities and sequences as the same file loaded whole (seeded), that progress is reported
chunk by chunk with rows/s and the time left, and that Cancel stops a step between chunks with its ε still charged
(docs/DESIGN.md §2.0: a cancelled release is not refunded)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from app_helpers import (state_of, assert_clean, click, declare_classes, goto, new_app, private_vocabulary, sequences,
                         toy_records, wait_job)
from dpkps_core.records.runfolder import DENSITY_FILE, VOCABULARY_FILE
from studio import jobs
from studio.session import CORPUS_FINGERPRINT_FILE

pytestmark = [pytest.mark.assets]

CHUNK = 7
SEED = 11


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(tmp_path / "ledger"))
    monkeypatch.setenv("DPKPS_CHUNK_ROWS", str(CHUNK))
    monkeypatch.setenv("DPKPS_WORKERS", "1")  # the passes inline: one chunk at a time, no pool on a shared machine
    root = tmp_path / "data"
    root.mkdir()
    rows = pd.DataFrame(toy_records(20, seed=3))
    rows.to_csv(root / "toy.csv", index=False)
    rows.assign(patient=[f"P{i // 2:03d}" for i in range(len(rows))]).to_csv(root / "people.csv", index=False)
    monkeypatch.setenv("DPKPS_DATA_DIR", str(root))
    return root


def _load(monkeypatch: pytest.MonkeyPatch, *, streamed: bool, file: str = "toy.csv") -> Any:
    """A seeded session (no cap: every document admitted) with the data folder's corpus loaded and declared (with
    ``people.csv``, its ``patient`` column as the person: the unit of privacy is a person)."""
    monkeypatch.setenv("DPKPS_STREAM_ABOVE_BYTES", "0" if streamed else str(10**12))
    at = new_app(seeded_demo=True, demo_seed=SEED, cap_enabled=False)
    at.radio(key="_w.corpus_source").set_value("server").run()
    at.selectbox(key="server_entry").set_value(file).run()
    at.selectbox(key="upload_person_col").set_value("patient" if file == "people.csv" else None).run()
    click(at, "Load this corpus", clean=False)
    declare_classes(at)
    assert_clean(at)
    return at


def _build(at: Any, step: str, button: str, page: str) -> Any:
    """Press a DP step's button on its page; a streamed corpus's step is a job: wait for it, as the page's poll does."""
    goto(at, page)
    click(at, button)
    try:
        job = state_of(at).jobs.get(step)
    except KeyError:  # loaded whole: the step ran in the script run
        job = None
    if job is not None and not job.finished_seen:
        wait_job(at, step)
        assert_clean(at)
    return job


def _walk(at: Any) -> dict[str, Any]:
    """Pages 2–5 (the DP forecast, Ṽ, densities, sequences); the forecast's release and what the run folder holds."""
    _build(at, "forecast", "DP forecast", "budget")
    forecast = state_of(at).results.dp_forecast_release[1].to_dict()
    _build(at, "vocabulary", "Build Ṽ", "private-vocabulary")
    _build(at, "density", "Build densities", "densities")
    goto(at, "sequences")
    click(at, "Sample")
    pv = private_vocabulary(at)
    run = Path(state_of(at).run.run_dir)
    return {"forecast": forecast, "terms": list(pv.terms), "noisy": [round(float(c), 9) for c in pv.noisy_counts],
            "densities": json.loads((run / DENSITY_FILE).read_text()),
            "sequences": [(q["label"], q["keyphrases"]) for q in sequences(at)],
            # the content fingerprint a reopened run is checked against: the same documents, the same digest
            "fingerprint": json.loads((run / CORPUS_FINGERPRINT_FILE).read_text())["content_sha256"]}


@pytest.mark.parametrize("file", ["toy.csv", "people.csv"])
def test_streamed_pages_2_to_5_give_the_in_memory_numbers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          file: str) -> None:
    at = _load(monkeypatch, streamed=True, file=file)
    c = state_of(at).loaded.corpus
    assert getattr(c, "streamed", False) and len(c) == 60
    assert (c.person_column, c.privacy_unit.startswith("add/remove all documents of one person")) == (
        ("patient", True) if file == "people.csv" else (None, False))
    assert any("Streamed from the server" in i.value or "streamed from the server" in i.value for i in at.info)
    streamed = _walk(at)  # page 2's DP forecast too: a job over the chunks, the same release as loaded whole
    assert isinstance(state_of(at).jobs.forecast, jobs.Job) and state_of(at).jobs.forecast.meter.chunks > 1
    assert len({q[0] for q in streamed["sequences"]}) == 3
    assert any("Not available for this corpus" in cap.value for cap in at.caption)  # page 5's no-LLM check
    assert not [b for b in at.button if b.label.startswith("Run the no-LLM check")]

    # the same file loaded whole, on a ledger of its own (the person unit charges a row up to 2ε per release, so the
    # streamed run's spend would leave rows out under the default cap)
    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(tmp_path / "ledger-loaded"))
    loaded = _walk(_load(monkeypatch, streamed=False, file=file))
    assert streamed == loaded


def test_progress_is_reported_per_chunk_with_rate_and_eta(monkeypatch: pytest.MonkeyPatch) -> None:
    reports: list[tuple[float, str]] = []
    original = jobs.Job.report

    def record(self: jobs.Job, fraction: float, message: str) -> None:
        reports.append((fraction, message))
        original(self, fraction, message)

    monkeypatch.setattr(jobs.Job, "report", record)
    at = _load(monkeypatch, streamed=True)
    prepared = state_of(at).loaded.corpus.prepared
    train = len(prepared)
    job = _build(at, "vocabulary", "Build Ṽ", "private-vocabulary")
    assert job is not None and job.error is None and (Path(state_of(at).run.run_dir) / VOCABULARY_FILE).is_file()
    per_chunk = [m for _, m in reports if "rows/s" in m]
    chunks = len(np.unique(prepared.train_index // CHUNK))  # the file's chunks of 7 rows that hold training rows
    assert job.meter.chunks == chunks and len(per_chunk) == chunks
    assert per_chunk[-1].startswith(f"Counting the terms of V: {train:,} of {train:,} training documents")
    assert all(" left" in m for m in per_chunk)  # the ETA at the measured rate
    fractions = [f for f, m in reports if "rows/s" in m]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_cancel_stops_between_chunks_and_the_release_stays_charged(monkeypatch: pytest.MonkeyPatch) -> None:
    original = jobs.Job.report

    def cancel_after_first_chunk(self: jobs.Job, fraction: float, message: str) -> None:
        original(self, fraction, message)
        if "rows/s" in message:  # the user presses Cancel while the first chunk is counted
            self.cancel.set()

    at = _load(monkeypatch, streamed=True)
    led = state_of(at).ledgers[state_of(at).loaded.corpus_id]
    assert led.view().largest_spend == 0.0
    monkeypatch.setattr(jobs.Job, "report", cancel_after_first_chunk)
    before = state_of(at).run.run_dir
    job = _build(at, "vocabulary", "Build Ṽ", "private-vocabulary")
    train = len(state_of(at).loaded.corpus.prepared)
    assert job.meter.chunks == 1 and job.error.startswith("Cancelled between chunks after ")
    done = int(job.error.split(" after ")[1].split(" of ")[0])
    assert 0 < done <= CHUNK and job.error.split(" of ")[1].startswith(f"{train} training documents")
    assert any(w.value.startswith("Cancelled between chunks") for w in at.warning)  # said on the page
    assert private_vocabulary(at) is None and state_of(at).run.run_dir == before  # nothing was released
    eps_voc = state_of(at).ledgers[state_of(at).loaded.corpus_id].view().largest_spend
    assert eps_voc > 0  # the admission before the first chunk stays charged
    assert any(b.label.startswith("Build Ṽ") and not b.disabled for b in at.button)  # the step may run again


def test_the_streaming_threshold_is_a_deployment_setting(_env: Path) -> None:
    """``$DPKPS_STREAM_ABOVE_BYTES``: unset, only corpora above the upload cap stream; 0 streams every corpus; a bad
    value is a clear error naming the setting."""
    from dpkps_core.corpus.data_folder import DEFAULT_STREAM_ABOVE_BYTES, stream_above_bytes, streams
    from dpkps_core.errors import ParameterError

    toy = _env / "toy.csv"
    assert stream_above_bytes({}) == DEFAULT_STREAM_ABOVE_BYTES == 200 * 1024 * 1024
    assert not streams(toy, {}) and streams(toy, {"DPKPS_STREAM_ABOVE_BYTES": "0"})
    assert streams(toy, {"DPKPS_STREAM_ABOVE_BYTES": str(toy.stat().st_size - 1)})
    assert not streams(toy, {"DPKPS_STREAM_ABOVE_BYTES": str(toy.stat().st_size)})
    with pytest.raises(ParameterError, match=r"\$DPKPS_STREAM_ABOVE_BYTES must be a whole number"):
        stream_above_bytes({"DPKPS_STREAM_ABOVE_BYTES": "200MB"})
