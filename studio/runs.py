"""Page 8 and the run pointer: the run folders on this machine — reopen one, export it, delete this session's —
and the URL's ``?run=<name>`` that lets a reloaded tab find its run again (docs/ARCHITECTURE.md "Run folder").

Reopening points the session at a folder; the pages then read its Ṽ, densities, sequences and documents from it
(``studio.run_view``) — at no new ε: reading DP outputs back is post-processing (docs/DESIGN.md §2.0), no ledger event,
nothing admitted. The run's corpus must be the loaded one (a demo loads itself; an upload is loaded on page 1 first),
so that the class list, the held-out split and the few-shot check are the run's own: the loaded corpus's CONTENT
fingerprint must equal the one recorded in the run folder (``session.CORPUS_FINGERPRINT_FILE``), whatever the file's
name or columns.

Tenancy (``studio.tenancy``): every run is looked up by name in the session's own runs root — with login, the
signed-in tenant's — so another tenant's run answers exactly like a run that does not exist.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any, Mapping

import streamlit as st

from dpkps_core.corpus import DEMO_SPECS
from dpkps_core.errors import CorpusError, DPKPSError, ParameterError
from dpkps_core.records.runfolder import RunFolder, iter_jsonl, list_runs, open_run, resolve_run_name
from studio import jobs, page_ref, session, tenancy
from studio.defaults import is_user_corpus
from studio.jobs import Job
from studio.session import (CORPUS_FINGERPRINT_FILE, corpus, corpus_content_fingerprint, drop_results, notice,
                            person_column, split)
from studio.steps import load_demo
from studio.state import SessionState


def follow_url(state: SessionState) -> None:
    """Each script run, after ``session.init_session``: keep the run's name in the URL, and after a reload reopen
    the run the URL names."""
    sync_run_url(state)
    reopen_from_url(state)


#: The URL query parameter that names the session's run folder (a bare folder name, never a path).
RUN_QUERY_PARAM = "run"


def sync_run_url(state: SessionState) -> None:
    """Keep the run folder's name in the URL (``?run=<name>``) so a reloaded tab finds the run again; on the first
    run of a session (a reload) with such a parameter and no run yet, remember it for :func:`pending_reopen`."""
    try:
        params = st.query_params
        wanted = params.get(RUN_QUERY_PARAM)
    except Exception:  # noqa: BLE001 - no browser context (bare mode): nothing to sync
        return
    rd = state.run.run_dir
    if not state.run.url_checked:
        state.run.url_checked = True
        if wanted and not rd:
            state.run.pending_reopen = str(wanted)
            return
    name = Path(rd).name if rd else None
    if name and wanted != name:
        params[RUN_QUERY_PARAM] = name
    elif not name and wanted and not state.run.pending_reopen:
        del params[RUN_QUERY_PARAM]


def pending_reopen(state: SessionState) -> str | None:
    """The run folder named in the URL of a reloaded tab, not reopened yet (or ``None``)."""
    return state.run.pending_reopen


def reopen_from_url(state: SessionState) -> None:
    """After a reload, reopen the run the URL names (at no new ε: post-processing). A run built on an uploaded
    corpus waits until that corpus is loaded again (tried once per loaded corpus); a folder that is gone is said."""
    name = state.run.pending_reopen
    if not name or state.run.pending_reopen_tried == (name, state.loaded.corpus_id):
        return
    state.run.pending_reopen_tried = (name, state.loaded.corpus_id)
    try:
        reopen_run(state, resolve_run_name(name, tenancy.runs_root()))
    except CorpusError as exc:  # its corpus is not loaded yet: say how, and try again once it is
        notice(state, f"This tab names the run {name}, which can be reopened once its corpus is loaded. {exc}")
    except DPKPSError as exc:
        state.run.pending_reopen = None
        notice(state, f"The run {name} named in this tab's address could not be reopened: {exc}")


# ============================================================================================ reopening a run

def recorded_fingerprint(folder: str | Path) -> str | None:
    """The content fingerprint of the corpus a run was built on, from the run folder's private file (``None``: a
    run made before fingerprints were recorded, or an unreadable file)."""
    try:
        data = json.loads((Path(folder) / CORPUS_FINGERPRINT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    fp = data.get("content_sha256") if isinstance(data, dict) else None
    return fp if isinstance(fp, str) and fp else None


def run_corpus_matches(state: SessionState, run_state: Mapping[str, Any], folder: str | Path | None = None) -> bool:
    """Whether the loaded corpus is the one a run was built on: the same (public) demo, or — for an upload — the
    same CONTENT: the loaded corpus's fingerprint (texts, labels, persons) equals the one recorded in the run
    folder, whatever the file's name or columns. A run recorded before fingerprints existed falls back to the
    file name and the text, label and person columns."""
    c = corpus(state)
    if c is None or not run_state.get("corpus_spec"):
        return False
    if str(run_state["corpus_spec"]).startswith("demo:"):
        return (state.loaded.corpus_spec or state.loaded.corpus_id) == run_state["corpus_spec"]
    if not is_user_corpus(state.loaded.corpus_id):
        return False
    recorded = recorded_fingerprint(folder) if folder is not None else None
    if recorded is not None:
        return recorded == corpus_content_fingerprint(state)
    return (state.loaded.corpus_spec or state.loaded.corpus_id) == run_state["corpus_spec"] and (
        state.loaded.text_column, state.loaded.label_column, person_column(state)) == (
        run_state.get("text_column"), run_state.get("label_column"), run_state.get("person_column"))


def own_run(path: str | Path) -> Path:
    """The session's own run folder of that name: looked up by name in the tenant's runs root only, so a folder
    elsewhere (another tenant's) answers like one that does not exist."""
    root = tenancy.runs_root()
    p = Path(str(path))
    if p.parent == root and p.is_dir() and not p.is_symlink():  # a folder page 8 listed from this root
        return p
    return resolve_run_name(p.name, root)


def reopen_run(state: SessionState, path: str | Path, *, quiet: bool = False) -> Path:
    """Reopen a run from its folder: the session points at it, and its Ṽ, densities, sequences and documents are
    what the pages show again; "continue writing", evaluation and export work from them — at no new ε (reading DP
    outputs back is post-processing; no ledger event, nothing admitted)."""
    job = state.jobs.generation
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing into the current run folder; cancel it first "
                             f"({page_ref('generate')}).")
    run = open_run(own_run(path))
    run_state = run.state
    spec = run_state.get("corpus_spec") or run.config.get("corpus")
    if not run_state:
        raise ParameterError(f"The run folder {run.name} was written by the command line, not by the app: export it "
                             "below, or continue it with `python -m dpkps_core generate`.")
    if not run_corpus_matches(state, run_state, run.path):
        if str(spec).startswith("demo:") and spec in DEMO_SPECS:
            state.settings.corpus_source, state.settings.demo_spec = "demo", spec
            load_demo(state, spec)
        else:
            name = str(spec).split(":", 1)[-1]
            differs = is_user_corpus(state.loaded.corpus_id) and recorded_fingerprint(run.path)
            raise CorpusError(f"The run {run.name} was built on the corpus “{name}”"
                              + (" — the loaded corpus's content is not that corpus's, whatever its name" if differs
                                 else "")
                              + f": load that file on {page_ref('corpus')} (with the text column "
                              f"“{run_state.get('text_column')}” "
                              f"and the label column “{run_state.get('label_column')}”), then reopen the run.")
    c = corpus(state)
    source = str(spec).split(":", 1)[0]
    state.settings.corpus_source = source if source in ("demo", "server") else "upload"  # page 1 shows the run's corpus
    classes = tuple(run_state.get("classes") or run.report.get("classes") or ())
    if classes and c.public_classes != classes:
        state.loaded.corpus = c.with_classes(list(classes))
    drop_results(state)
    if run_state.get("test_fraction") is not None:
        state.settings.test_fraction = float(run_state["test_fraction"])
    split(state)  # settle the split the run was built on before the session points at its results
    if run_state.get("vocab_upload_name"):
        state.uploads.vocab_upload_name = run_state["vocab_upload_name"]
    if run_state.get("vocab_upload_sha256"):
        state.uploads.vocab_upload_sha256 = run_state["vocab_upload_sha256"]
    state.run.run_dir = str(run.path)
    if str(run.path) not in state.run.run_dirs:
        state.run.run_dirs.append(str(run.path))
    state.run.reopened_run = run.name
    state.run.pending_reopen = None
    if not quiet:
        notice(state,
               f"Reopened the run {run.name}: its Ṽ, densities, sequences and {len(run.documents):,} document(s) "
               "are back. Nothing was spent: reading released outputs back is post-processing.")
    return run.path


def machine_runs(state: SessionState) -> list[dict[str, Any]]:
    """Every run folder of the session's runs root (``dpkps_core.records.runfolder.list_runs``: on this machine without
    login, the signed-in tenant's with login), newest first, marked ``current`` (the session's pointer) and
    ``mine`` (made or reopened in this session) — what page 8 lists to reopen or export."""
    current = str(state.run.run_dir or "")
    mine = {str(p) for p in state.run.run_dirs or []}
    return [{**r.to_dict(), "current": str(r.path) == current, "mine": str(r.path) in mine}
            for r in list_runs(tenancy.runs_root())]


# ============================================================================================ delete

def delete_runs(state: SessionState) -> list[str]:
    """Delete every run folder of this session (the ledger stays: the ε was spent)."""
    job = state.jobs.generation
    if isinstance(job, Job) and job.running:
        raise ParameterError(f"The LLM is still writing into the run folder; cancel it first ({page_ref('generate')}).")
    deleted = []
    root = tenancy.runs_root()
    for path in list(state.run.run_dirs):
        p = Path(path)
        if p.parent != root:  # never another runs root's folder (a session is bound to one tenant)
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        deleted.append(p.name)
    state.run.run_dirs = []
    drop_results(state)
    return deleted


def session_runs(state: SessionState) -> list[dict[str, Any]]:
    """This session's run folders that still exist, newest first, with what each holds."""
    from dpkps_core.llm import read_documents

    current = state.run.run_dir
    out = []
    for path in reversed(list(state.run.run_dirs or [])):
        p = Path(path)
        if not p.is_dir():
            continue
        folder = RunFolder(p)
        eps = None
        try:
            eps = folder.read_report().get("epsilon_total")
        except (OSError, ValueError):
            pass
        seqs = sum(1 for _ in iter_jsonl(folder.sequences))
        out.append({"path": str(p), "name": p.name, "current": str(p) == str(current),
                    "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(p.stat().st_mtime)),
                    "sequences": seqs, "documents": len(read_documents(p)), "epsilon_total": eps})
    return out


def delete_run(state: SessionState, path: str) -> str:
    """Delete one of this session's run folders (the ledger keeps its entries: the ε was spent)."""
    runs = [str(x) for x in state.run.run_dirs or []]
    if str(path) not in runs:
        raise ParameterError("That run folder is not one of this session's runs.")
    job = state.jobs.generation
    if str(path) == str(state.run.run_dir) and isinstance(job, jobs.Job) and job.running:
        raise ParameterError("The LLM is still writing into this run folder; cancel it first "
                             f"({page_ref('generate')}).")
    p = Path(path)
    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    state.run.run_dirs = [x for x in runs if x != str(path)]
    if str(path) == str(state.run.run_dir):
        state.run.run_dir = None
        session.clear_after(state, "sequences", include=True)
    return p.name


def bundle_parts_for(state: SessionState, path: str) -> dict[str, bytes]:
    from dpkps_core.dossier.export import collect_bundle

    return collect_bundle(path, secrets=session.generation_secrets(state))


def bundle_for(state: SessionState, path: str) -> bytes:
    from dpkps_core.dossier.export import bundle_bytes

    return bundle_bytes(path, secrets=session.generation_secrets(state))
