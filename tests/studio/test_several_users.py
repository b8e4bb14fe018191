"""Several users on one server (issue 35 §8): no forced full garbage collection after each script run, a progress
poll that slows down with the jobs running on the server, and page 6's line for the shared model in words."""

from __future__ import annotations

import threading
import time
import tomllib
from pathlib import Path

import streamlit.config as st_config

from studio import jobs
from studio.generation_steps import model_line_note

ROOT = Path(__file__).resolve().parents[2]


def test_the_server_config_turns_the_post_run_collection_off() -> None:
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["runner"]["postScriptGC"] is False
    assert config["runner"]["fastReruns"] is False  # unchanged (one intent, one release)
    # The option exists in the installed Streamlit (a hidden one: an unknown key would be ignored silently).
    assert "runner.postScriptGC" in st_config._config_options_template


def _running_job(started: float | None = None) -> jobs.Job:
    job = jobs.Job(kind="test")
    if started is not None:
        job.started = started
    jobs.track(job)
    return job


def test_the_progress_poll_slows_down_with_the_jobs_on_the_server() -> None:
    with jobs._LIVE_LOCK:
        before = [j for j in jobs._LIVE.values() if j.running]
        for j in before:  # other tests' leftovers do not count here
            del jobs._LIVE[id(j)]
    try:
        now = time.time()
        a = _running_job(now)
        assert jobs.running_jobs() == 1 and jobs.poll_interval(a, now=now) == jobs.POLL_MIN_S
        assert jobs.poll_interval(a, now=now + 60) == jobs.POLL_LATER_S  # an older job is polled less often
        others = [_running_job(now) for _ in range(2)]
        assert jobs.poll_interval(a, now=now) == jobs.POLL_MIN_S + 2 * jobs.POLL_PER_JOB_S
        many = [_running_job(now) for _ in range(10)]
        assert jobs.poll_interval(a, now=now) == jobs.POLL_MAX_S
        for j in others + many:
            j.finished = now
        assert jobs.poll_interval(a, now=now) == jobs.POLL_MIN_S
        a.finished = now
        assert jobs.poll_interval(a) is None and jobs.running_jobs() == 0  # finished: no polling
    finally:
        for j in before:
            jobs.track(j)


def test_a_started_job_is_counted_while_it_runs(monkeypatch) -> None:
    from app_helpers import use_state

    state = use_state(monkeypatch)
    gate = threading.Event()
    base = jobs.running_jobs()
    job = jobs.start_job(state, "sweep", "x", lambda j: gate.wait(10))
    assert jobs.running_jobs() == base + 1
    gate.set()
    job.thread.join(5)
    assert jobs.running_jobs() == base


def test_page_6_says_the_place_in_line() -> None:
    assert model_line_note(0) == ""
    note = model_line_note(3)
    assert "3 batch(es)" in note and "4th in line" in note and "did not wait" in note


def test_the_app_leaves_a_core_to_the_server() -> None:
    from dpkps_core.llm.local import default_threads, server_threads

    assert [server_threads({}, cpus=c) for c in (1, 2, 3, 16)] == [1, 1, 2, 2]
    assert [default_threads({}, cpus=c) for c in (1, 2, 3, 16)] == [1, 2, 2, 2]  # the CLI's, unchanged
    assert server_threads({"DPKPS_LLM_THREADS": "2"}, cpus=2) == 2  # the deployment's choice wins
    src = (ROOT / "studio" / "resources.py").read_text(encoding="utf-8")
    # every model the app builds (one registry call for every backend that runs here) decodes with server_threads
    builds = src.count("make_backend(")
    assert builds >= 1 and src.count("threads=server_threads()") == builds and "default_threads" not in src
