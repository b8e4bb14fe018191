"""After a reload mid-generation the new session takes up the running writer (walk 3 §3): its progress, its Cancel —
and its own setting of "write documents for the first … sequences", not the new session's default."""

from __future__ import annotations

import pytest

from app_helpers import use_state
from studio import generation_steps
from studio.jobs import Job
from studio.state import SessionState


def _session(monkeypatch: pytest.MonkeyPatch, running: Job | None) -> SessionState:
    session = use_state(monkeypatch, n_documents=100)
    session.run.run_dir = "/runs/run-1"
    monkeypatch.setattr(generation_steps, "running_job_of_run",
                        lambda kind, run: running if (kind, run) == ("generation", "/runs/run-1") else None)
    return session


def test_a_reattached_writer_shows_the_number_of_documents_it_was_started_for(monkeypatch: pytest.MonkeyPatch) -> None:
    writer = Job("generation", target=6)
    session = _session(monkeypatch, writer)
    assert generation_steps.reattach_generation(session) is writer
    assert session.jobs.generation is writer and session.jobs.reattached_generation is writer
    assert session.settings.n_documents == 6                       # the box says what the running job writes


def test_without_a_running_writer_the_sessions_setting_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(monkeypatch, None)
    assert generation_steps.reattach_generation(session) is None
    assert session.settings.n_documents == 100 and session.jobs.generation is None
