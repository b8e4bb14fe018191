"""AppTest: a run's report is derived from the events recorded for that run, never from a session's memory, and no
action lowers a run's ε (docs/DESIGN.md §2.0; issue 35 part 4).

The journey of the issue: a DP forecast, then Ṽ, densities and sequences (ε_forecast + ε_voc + ε_kde); the run is
reopened in a new session (a reload) and sampled again for free — its report keeps every ε; the densities are
rebuilt (a new charge): the new run's report carries the Ṽ's ε_voc and the forecast's ε besides the new ε_kde; the
core export's bundle states the same totals. A comparison's releases are filed under the comparison, not the run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streamlit.testing.v1 import AppTest

from app_helpers import state_of, APP, TIMEOUT, click, fast_env, goto, new_app, walk  # noqa: F401
from dpkps_core.dossier.export import build_bundle
from dpkps_core.ledger_store import LedgerStore
from dpkps_core.records.run_record import read_ledger_record
from dpkps_core.records.runfolder import LEDGER_RECORD_FILE

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def report(run: Path) -> dict:
    return json.loads((run / "privacy_report.json").read_text())


def by_step(rep: dict) -> dict[str, float]:
    out: dict[str, float] = {}
    for e in rep["events"]:
        out[e["step"]] = round(out.get(e["step"], 0.0) + e["epsilon"], 9)
    return out


def test_reopen_resample_rebuild_and_export_never_lower_a_runs_epsilon(tmp_path: Path) -> None:
    a = new_app()
    goto(a, "budget")
    click(a, "DP forecast")                        # ε_forecast 0.2, before the run exists
    walk(a, "sequences")                           # Ṽ (ε_voc 5), densities (ε_kde 5), sequences
    run = Path(state_of(a).run.run_dir)
    first = report(run)
    assert by_step(first) == {"forecast": 0.2, "vocabulary": 5.0, "kde": 5.0}
    assert first["epsilon_total"] == pytest.approx(10.2)
    record = read_ledger_record(run)
    assert record["ledger_id"] == LedgerStore().ledger_id and set(record["steps"]) == {"forecast", "vocabulary",
                                                                                        "density"}

    b = AppTest.from_file(APP, default_timeout=TIMEOUT)   # a reload: a new session whose ledger knows none of it
    b.query_params["run"] = run.name
    b.run()
    assert state_of(b).run.run_dir == str(run)
    goto(b, "sequences")
    click(b, "Sample again (free)")
    assert Path(state_of(b).run.run_dir) == run
    again = report(run)
    assert by_step(again) == by_step(first) and again["epsilon_total"] == pytest.approx(10.2)  # was 0 before

    goto(b, "densities")
    click(b, "Rebuild the densities")
    click(b, "Yes, spend ε_kde")
    rebuilt = Path(state_of(b).run.run_dir)
    assert rebuilt != run                          # the earlier chain's folder stays as it is
    goto(b, "sequences")
    click(b, "Sample")
    new = report(rebuilt)
    # the new run carries the Ṽ (ε_voc 5) and the forecast that steered it (0.2) besides its own ε_kde 5
    assert by_step(new) == {"forecast": 0.2, "vocabulary": 5.0, "kde": 5.0}
    assert new["epsilon_total"] == pytest.approx(10.2)
    assert [e["epsilon"] for e in new["events"] if e["step"] == "kde"] == [5.0]
    assert read_ledger_record(rebuilt)["steps"]["density"] != record["steps"]["density"]  # its own, new charge
    assert report(run)["epsilon_total"] == pytest.approx(10.2)                           # the old run unchanged

    for folder in (run, rebuilt):                  # the core export states the same totals, without the record
        out = tmp_path / f"bundle-{folder.name}"
        build_bundle(folder, out_dir=out)
        assert json.loads((out / "privacy_report.json").read_text())["epsilon_total"] == pytest.approx(10.2)
        assert not (out / LEDGER_RECORD_FILE).exists()


def test_a_comparisons_releases_are_filed_under_the_comparison_not_the_open_run() -> None:
    from app_helpers import toy_csv, upload_corpus, wait_job

    at = new_app()
    upload_corpus(at, toy_csv(20), "toy.csv")
    walk(at, "sequences")                          # a run is open: Ṽ and densities filed under its folder's name
    run = Path(state_of(at).run.run_dir).name
    goto(at, "evaluate")
    at.number_input(key="_w.compare_eps").set_value(6.0).run()
    at.multiselect(key="_w.compare_methods").set_value(["dpkps"]).run()
    click(at, "Compare at this privacy level")
    job = wait_job(at, "compare", timeout=300)
    assert job.error is None, job.error
    led = state_of(at).ledgers[state_of(at).loaded.corpus_id]
    assert sorted(e.event.step for e in led.run_events(run)) == ["kde", "vocabulary"]   # the run's own only
    compared = [r for r in led.view().releases if r.tool == "app compare"]
    assert compared and {r.run for r in compared} == {r.run for r in compared if r.run.startswith("compare-")}
    assert led.total_epsilon == pytest.approx(10.0 + 6.0)    # the session's spend counts the comparison too


def test_a_forecast_made_in_another_session_is_in_the_runs_total() -> None:
    other = new_app()
    goto(other, "budget")
    click(other, "DP forecast")                    # another session (or the CLI) steered the settings
    at = new_app()
    walk(at, "sequences")
    rep = report(Path(state_of(at).run.run_dir))
    assert by_step(rep) == {"forecast": 0.2, "vocabulary": 5.0, "kde": 5.0}
    assert rep["epsilon_total"] == pytest.approx(10.2)
