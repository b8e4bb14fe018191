"""A reload while a run's documents are being written finds the writer again (issue 33 §3): the new session's
page 6 shows the job's progress and its Cancel (which stops the thread the old session started), no second writer
can start on the same run, and no message names an absolute path."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import state_of, APP, TIMEOUT, click, fast_env, goto, new_app, walk  # noqa: F401
from dpkps_core.llm.checkpoint import run_lock
from dpkps_core.errors import LLMError

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


class _SlowWriter:
    """Stands in for the core's run_generation: reports progress, then waits until cancelled (at most 60 s)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.stopped_by_cancel = False

    def __call__(self, seqs: Any, *, progress: Any, cancel: threading.Event, **_: Any) -> Any:
        from dpkps_core.llm.settings import Progress

        progress(Progress(done=3, total=len(seqs), failed=0, rate_per_s=0.5, eta_s=42.0))
        self.started.set()
        self.stopped_by_cancel = cancel.wait(60)
        return None


def test_a_reloaded_tab_reattaches_to_the_running_writer_and_can_cancel_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpkps_core.llm as llm

    writer = _SlowWriter()
    monkeypatch.setattr(llm, "run_generation", writer)
    a = new_app()
    walk(a, "sequences")
    goto(a, "generate")
    click(a, "Write documents")
    assert writer.started.wait(30)
    run = Path(state_of(a).run.run_dir)
    job = state_of(a).jobs.generation
    assert job.running

    b = AppTest.from_file(APP, default_timeout=TIMEOUT)  # the reloaded tab: a new session, the URL names the run
    b.query_params["run"] = run.name
    b.run()
    assert state_of(b).run.run_dir == str(run)
    goto(b, "generate")
    assert state_of(b).jobs.generation is job  # the same writer, not a new one
    assert any("still being written" in i.value for i in b.info)
    assert any("3/" in p.proto.text and "documents written" in p.proto.text and "42 s left" in p.proto.text
               for p in b.get("progress"))
    cancel = [x for x in b.button if x.label.startswith("Cancel")]
    assert cancel, [x.label for x in b.button]
    cancel[0].click().run()
    deadline = time.monotonic() + 30
    while job.running and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not job.running and writer.stopped_by_cancel


def test_the_lock_message_names_the_run_not_its_path(tmp_path: Path) -> None:
    run = tmp_path / "deep" / "run-2026"
    run.mkdir(parents=True)
    with run_lock(run):
        with pytest.raises(LLMError) as caught:
            with run_lock(run):
                pass
    assert "'run-2026'" in str(caught.value) and str(tmp_path) not in str(caught.value)
