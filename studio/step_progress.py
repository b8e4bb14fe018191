"""The progress of a DP release on a streamed corpus (the DP forecast, pages 3 and 4; issue 31 §4): per chunk, the
training documents read, rows per second and the time left (``studio.jobs.ChunkMeter``), and a Cancel that takes
effect between chunks (docs/DESIGN.md §2.0: what the step admitted before its first chunk stays charged)."""

from __future__ import annotations

import streamlit as st

from studio import jobs
from studio.steps import STEP_JOBS
from studio.state import SessionState
from studio.widgets import job_monitor


def step_running(state: SessionState) -> bool:
    """Whether a DP step of this session is still reading a streamed corpus (its spend buttons wait for it)."""
    return any(isinstance(j := state.jobs.get(name), jobs.Job) and j.running for name in STEP_JOBS)


def step_monitor(state: SessionState, step: str) -> None:
    """The progress of a DP release on a streamed corpus (``step``: "forecast", "vocabulary" or "density"): per
    chunk, the training documents read, rows per second and the time left (``studio.jobs.ChunkMeter``), with a
    Cancel that takes effect between chunks; once it ended, how (a cancelled or failed step released nothing and
    stays charged)."""
    if step not in STEP_JOBS:
        raise KeyError(f"{step!r} is not a streamed DP step ({', '.join(STEP_JOBS)}).")

    def ended(j: jobs.Job) -> None:
        if j.running:
            st.caption("Cancel stops the step between two chunks: nothing is released, and the ε it admitted "
                       "before its first chunk stays charged (docs/PRIVACY.md). Once the last chunk is read, the "
                       "release completes.")
        elif isinstance(j.error, str) and j.error.startswith("Cancelled"):
            st.warning(j.error, icon=":material/stop_circle:")
        elif j.error:
            st.error(f"{j.error} What this step admitted before it failed stays charged.", icon=":material/error:")

    job_monitor(state, step, body=ended, cancel_label="Cancel (between chunks; the ε stays charged)")
