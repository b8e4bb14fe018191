"""What the app writes into a run folder beside the core's files (docs/ARCHITECTURE.md "Run folder"): the run's
public context and each step's public settings (``run_state.json``), the density scores over Ṽ (``densities.json``,
post-processing of the ε_kde release), and a fresh folder when a step would overwrite what an earlier chain holds.

Never the PRIVATE, local figures some steps report to the data owner (documents left out, documents without
keyphrases, local warnings): they stay in the session (``studio.run_view``).

The run's ledger record (``ledger_record.json``, local: ``dpkps_core.records.run_record``) names the ledger
that admitted the run's units (its random id, never its path) and the ids of the events its outputs carry — the DP
forecast that steered it, Ṽ's release, the densities' — so that its privacy report is derived from the events recorded
for it, never from a session's memory (docs/DESIGN.md §2.0; issue 35 part 4). A new folder that keeps an earlier
folder's outputs keeps their events.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.records import runfolder
from dpkps_core.records.run_record import read_ledger_record, write_ledger_record
from dpkps_core.records.runfolder import DENSITY_FILE, VOCABULARY_FILE, RunFolder
from studio import ledger_view, run_view
from studio.session import corpus, person_column, run_dir
from studio.state import SessionState

#: which steps' events a kept file carries into a new folder (the forecast steered the Ṽ it keeps)
_STEPS_OF_FILE: dict[str, tuple[str, ...]] = {VOCABULARY_FILE: ("forecast", "vocabulary"), DENSITY_FILE: ("density",)}
#: the order of a run's steps in its record (and so in its report)
RECORD_STEPS: tuple[str, ...] = ("forecast", "vocabulary", "density")

_PRIVATE_META_KEYS = frozenset({"local_warnings", "left_out", "documents_without_keyphrases", "reopened", "units"})


def public_meta(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A step's meta without its PRIVATE, local figures (they stay in the session only)."""
    return None if meta is None else {k: v for k, v in meta.items() if k not in _PRIVATE_META_KEYS}


def run_state_base(state: SessionState) -> dict[str, Any]:
    """The run's public context for ``run_state.json`` (corpus name, public classes, split fraction) from the
    session, and the steps' public settings so far from the open run folder — read BEFORE a release: once the
    release is made, its output goes to the run folder before the session is touched (Streamlit may stop a script
    run at any session access when another click arrives; what was released must then still be in the folder)."""
    c = corpus(state)
    run_state = run_view.run_state(state)
    built = bool(run_state.get("pv_meta"))  # Ṽ's vocabulary file is the one it was built from, not today's upload
    return {
        "corpus_spec": state.loaded.corpus_spec or state.loaded.corpus_id,
        "corpus_name": c.name if c is not None else None,
        "text_column": state.loaded.text_column, "label_column": state.loaded.label_column,
        "person_column": person_column(state), "classes": list(c.public_classes or ()) if c is not None else [],
        "test_fraction": (state.loaded.split_key or (None, state.settings.test_fraction))[1],
        "pv_meta": public_meta(run_state.get("pv_meta")), "density_meta": public_meta(run_state.get("density_meta")),
        "density_info": run_state.get("density_info") if run_state.get("density_meta") else None,
        "seq_meta": run_state.get("seq_meta"),
        "vocab_upload_name": run_state.get("vocab_upload_name") if built else state.uploads.vocab_upload_name,
        "vocab_upload_sha256": run_state.get("vocab_upload_sha256") if built else state.uploads.vocab_upload_sha256,
    }


def write_run_state(out: Path, run_state: Mapping[str, Any]) -> None:
    """Write ``run_state.json`` (public only: the private figures of the step metas are dropped here)."""
    run_state = {**run_state, "pv_meta": public_meta(run_state.get("pv_meta")),
             "density_meta": public_meta(run_state.get("density_meta"))}
    eps = (run_state["pv_meta"] or {}).get("eps_voc", 0.0) + (run_state["density_meta"] or {}).get("eps_kde", 0.0)
    runfolder.write_json(RunFolder(out).state, {**run_state, "epsilon_total": round(float(eps), 6)})


def density_scores_of(density: Any, embeddings: np.ndarray | None) -> np.ndarray:
    """(C, |Ṽ|) per-class scores over Ṽ of a density release (post-processing; no session access)."""
    if hasattr(density, "scores"):
        return np.asarray(density.scores())
    return np.asarray(density.single_term_scores(embeddings))


def save_densities(out: Path, density: Any, embeddings: np.ndarray | None) -> None:
    """Write the per-class density scores over Ṽ (post-processing of the ε_kde release) for a reopened run."""
    scores = np.round(np.asarray(density_scores_of(density, embeddings), dtype=np.float64), 6)
    runfolder.write_json(RunFolder(out).densities, {"classes": list(density.classes), "scores": scores.tolist()})


def record_events(out: Path, ledger_id: str, step: str, event_ids: Sequence[int], *, replace: bool = False) -> None:
    """Add ``event_ids`` (the store's ids) to the run folder's ledger record under ``step`` (``replace``: instead of
    what it held); the record names the ledger that admitted them (a record of another ledger is refused)."""
    record = read_ledger_record(out) or {"ledger_id": ledger_id, "steps": {}}
    if record["ledger_id"] != ledger_id:
        from dpkps_core.errors import PrivacyBudgetError

        raise PrivacyBudgetError(f"The run folder {out.name} was recorded by another privacy ledger (id "
                                 f"{record['ledger_id']}); this session's ledger (id {ledger_id}) cannot add to "
                                 "it. Start a new run, or point $DPKPS_LEDGER_DIR at that ledger.")
    steps = dict(record["steps"])
    steps[step] = list(event_ids) if replace else [*steps.get(step, []), *event_ids]
    write_ledger_record(out, ledger_id, {k: steps[k] for k in (*RECORD_STEPS, *sorted(set(steps) - set(RECORD_STEPS)))
                                        if k in steps})


#: a record's step → the ledger's step name of its events
EVENT_STEP: dict[str, str] = {"forecast": "forecast", "vocabulary": "vocabulary", "density": "kde"}


def carry_record(old: Path, new: Path, keep: Sequence[str], ledger: Any = None) -> None:
    """The ledger record of a new folder that keeps ``keep`` of ``old``: the events of the kept outputs' steps. A
    folder made before the record existed gives the events the ledger recorded under its name (``ledger``)."""
    steps = {step for name in keep for step in _STEPS_OF_FILE.get(name, ())}
    record = read_ledger_record(old)
    if record is None:
        from dpkps_core.ledger_store import PersistentLedger

        if not isinstance(ledger, PersistentLedger):
            return
        events = ledger.run_events(old.name)
        record = {"ledger_id": ledger.ledger_id,
                  "steps": {k: [e.id for e in events if e.event.step == EVENT_STEP[k] and e.id is not None]
                            for k in RECORD_STEPS}}
    write_ledger_record(new, record["ledger_id"], {k: v for k, v in record["steps"].items() if k in steps and v})


def new_run_dir(state: SessionState, keep: Sequence[str] = ()) -> tuple[Path, str | None]:
    """Point the session at a fresh run folder (copying ``keep`` from the current one, with what the session knows
    of them: ``studio.run_view.carry_over``); returns (new, old)."""
    old = state.run.run_dir
    state.run.run_dir = None
    new = run_dir(state)
    if old and Path(old).is_dir():
        for name in keep:
            src = Path(old) / name
            if src.is_file() and not src.is_symlink():
                shutil.copyfile(src, new / name)
        if keep:
            carry_record(Path(old), new, keep, ledger_view.ledger(state))
            run_view.carry_over(state, old, new)
    return new, old


def abandon_run_dir(state: SessionState, new: Path, old: str | None) -> None:
    """Undo :func:`new_run_dir` when the step failed before writing anything (an empty folder is no run)."""
    if not (new / VOCABULARY_FILE).exists():
        shutil.rmtree(new, ignore_errors=True)
        state.run.run_dirs = [p for p in state.run.run_dirs if p != str(new)]
        state.run.run_dir = old
