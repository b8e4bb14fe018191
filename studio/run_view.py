"""What the session's open run folder holds, read back for the pages: Ṽ, the densities, the sequences and each
step's public settings (docs/ARCHITECTURE.md "Run folder"; ``dpkps_core.records.runfolder`` reads the files).

The run folder is the one source of a run's results: the session holds only a pointer to it (``run_dir``, mirrored
in the URL's ``?run=``), so a reloaded tab that reopens the folder shows the same pages. Reading DP outputs back is
post-processing (docs/DESIGN.md §2.0): no ledger event. What the session adds, in memory only:

* a cache of the parsed files, keyed by the folder's path and its files' modification times and sizes (so a
  rewritten file is read again; never ``st.cache_data``: the cache dies with the session);
* the density object the density step released in this session (the folder keeps per-term scores, which sample
  independent sequences only; an iterative method samples from the object itself) — keyed the same way;
* the PRIVATE, local figures of a step (documents left out for lack of budget, documents without keyphrases, local
  warnings): for the data owner's eyes, never written to the folder (docs/DESIGN.md §2.0, docs/PRIVACY.md).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpkps_core.method import pipeline
from dpkps_core.method.config import SamplingConfig
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.embeddings import embed_terms
from dpkps_core.evaluation import EvaluationResult, read_evaluation
from dpkps_core.records.runfolder import (DENSITY_FILE, EVALUATION_FILE, PRIVACY_REPORT_FILE, RUN_STATE_FILE, SEQUENCES_FILE,
                                  VOCABULARY_FILE, open_run)
from dpkps_core.errors import DPKPSError, ParameterError, VocabularyError
from dpkps_core.method.sampling import SamplingOutcome
from dpkps_core.method.sequences import KeyphraseSequence
from studio import ledger_view, page_ref, session
from studio.defaults import BUILTIN_VOCABULARIES
from studio.resources import embedder, embedding_cache
from studio.state import SessionState

# The session's memory of run folders (``studio.state.RunMemory``): ``cache`` (stamp, RunView) of the open run folder;
# ``evaluation`` (stamp, EvaluationResult | None) of it (PRIVATE); ``live`` {"path", "pv", "density",
# "density_stamp"}: the releases made in this session; ``embeddings`` (model, seeded, Ṽ's terms, embeddings of Ṽ);
# ``notes`` run path -> step -> PRIVATE, local figures of that step.
_RESULT_FILES = (VOCABULARY_FILE, DENSITY_FILE, SEQUENCES_FILE, PRIVACY_REPORT_FILE, RUN_STATE_FILE)
#: The private, local figures of a step's meta and their values for a run this session did not build.
PRIVATE_NOTES: dict[str, dict[str, Any]] = {
    "vocabulary": {"local_warnings": [], "left_out": 0, "units": 0},
    "density": {"documents_without_keyphrases": 0, "local_warnings": [], "left_out": 0, "units": 0},
}


@dataclasses.dataclass(frozen=True)
class RunView:
    """One run folder's results as the pages show them (DP outputs and public settings only)."""

    path: Path
    state: Mapping[str, Any]
    private_vocabulary: PrivateVocabulary
    vocabulary_meta: Mapping[str, Any]
    density: Any | None
    density_meta: Mapping[str, Any] | None
    density_info: Mapping[str, Any] | None
    outcome: SamplingOutcome | None
    sequences_meta: Mapping[str, Any] | None


def _stamp(folder: Path, names: tuple[str, ...]) -> tuple[Any, ...]:
    """(path, (name, mtime ns, size) per file): moves whenever one of ``names`` is written."""
    out: list[tuple[Any, ...]] = []
    for name in names:
        try:
            st = (folder / name).stat()
        except OSError:
            out.append((name,))
            continue
        out.append((name, st.st_mtime_ns, st.st_size))
    return (str(folder), tuple(out))


def _read(folder: Path) -> RunView | None:
    """Parse the run folder (``dpkps_core.records.runfolder.open_run``); ``None`` when it holds no readable Ṽ."""
    try:
        run = open_run(folder)
    except DPKPSError:
        return None
    run_state = run.state
    pv = PrivateVocabulary.from_dict(run.vocabulary or {})
    pv_meta = dict(run_state.get("pv_meta") or {})
    pv_meta.setdefault("eps_voc", pv.epsilon)
    pv_meta.setdefault("vocabulary_spec", pv.public_vocabulary)
    d_meta = run_state.get("density_meta")
    has_density = run.densities is not None and bool(d_meta)
    outcome = None
    if has_density and run.sequences and run_state.get("seq_meta"):
        seqs = tuple(KeyphraseSequence.from_mapping(q, where=f"sequence {i + 1}") for i, q in enumerate(run.sequences))
        outcome = SamplingOutcome(sequences=seqs, uniform_fallbacks=int(run.report.get("uniform_fallback_draws") or 0),
                                  draws=sum(len(q.keyphrases) for q in seqs))
    return RunView(path=run.path, state=run_state, private_vocabulary=pv, vocabulary_meta=pv_meta,
                   density=run.density() if has_density else None,
                   density_meta=dict(d_meta) if has_density else None,
                   density_info=dict(run_state.get("density_info") or {}) if has_density else None,
                   outcome=outcome, sequences_meta=dict(run_state["seq_meta"]) if outcome is not None else None)


def folder(state: SessionState) -> Path | None:
    """The session's open run folder, if it exists."""
    return session.run_dir(state, create=False)


def view(state: SessionState) -> RunView | None:
    """The open run folder's results (cached while its files are unchanged); ``None`` without a run or Ṽ."""
    out = folder(state)
    if out is None:
        return None
    memory = state.run.memory
    stamp = _stamp(out, _RESULT_FILES)
    hit = memory.cache
    if hit is None or hit[0] != stamp:
        hit = (stamp, _read(out))
        memory.cache = hit
    return hit[1]


def evaluation(state: SessionState) -> EvaluationResult | None:
    """The open run's last local evaluation (``evaluation.json``, PRIVATE: real-data accuracies for the data owner's
    eyes, never exported), re-read when the file changes; ``None`` before the first evaluation."""
    out = folder(state)
    if out is None:
        return None
    memory = state.run.memory
    stamp = _stamp(out, (EVALUATION_FILE,))
    hit = memory.evaluation
    if hit is None or hit[0] != stamp:
        hit = (stamp, read_evaluation(out))
        memory.evaluation = hit
    return hit[1]


# ------------------------------------------------------------------------------------------ the session's additions

def set_notes(state: SessionState, path: Path, step: str, notes: Mapping[str, Any]) -> None:
    """Keep a step's PRIVATE, local figures for the run at ``path`` (session memory only)."""
    allowed = PRIVATE_NOTES[step]
    state.run.memory.notes.setdefault(str(path), {})[step] = {k: notes[k] for k in allowed if k in notes}


def _notes(state: SessionState, path: Path, step: str) -> dict[str, Any]:
    mine = state.run.memory.notes.get(str(path), {}).get(step)
    return {**PRIVATE_NOTES[step], **(mine or {})}


def remember_vocabulary(state: SessionState, path: Path, pv: PrivateVocabulary) -> None:
    """Keep Ṽ as released in this session for the run at ``path`` (its file holds the counts rounded: the steps
    that follow in this session use the release itself, as the CLI does)."""
    state.run.memory.live = {"path": str(path), "pv": pv}


def remember_density(state: SessionState, path: Path, density: Any, embeddings: np.ndarray, *, model: str,
                     seeded: bool) -> None:
    """Keep the density released in this session for the run at ``path`` (after its densities file is written),
    and Ṽ's embeddings it was built with."""
    memory = state.run.memory
    live = memory.live if memory.live.get("path") == str(path) else {"path": str(path)}
    memory.live = {**live, "density": density, "density_stamp": _stamp(path, (DENSITY_FILE,))}
    pv = live.get("pv") or (view(state).private_vocabulary if view(state) is not None else None)
    if pv is not None:
        memory.embeddings = (model, bool(seeded), tuple(pv.terms), np.asarray(embeddings))


def carry_over(state: SessionState, source: str | Path | None, target: Path) -> None:
    """A new run folder that copies what an earlier one built on keeps what the session knows of it: the releases
    themselves and the steps' local figures."""
    memory = state.run.memory
    notes = memory.notes.get(str(source))
    if source and notes:
        memory.notes[str(target)] = {k: dict(v) for k, v in notes.items()}
    live = memory.live
    if source and live and live.get("path") == str(source):
        moved = {"path": str(target), "pv": live.get("pv")}
        if live.get("density") is not None and live.get("density_stamp") == _stamp(Path(source), (DENSITY_FILE,)) \
                and (target / DENSITY_FILE).is_file():
            moved.update(density=live["density"], density_stamp=_stamp(target, (DENSITY_FILE,)))
        memory.live = moved


def _live(state: SessionState, path: Path, what: str) -> Any | None:
    live = state.run.memory.live
    if live.get("path") != str(path) or live.get(what) is None:
        return None
    if what == "density" and live.get("density_stamp") != _stamp(path, (DENSITY_FILE,)):
        return None
    return live[what]


# ------------------------------------------------------------------------------------------------- the accessors

def private_vocabulary(state: SessionState) -> PrivateVocabulary | None:
    """Ṽ of the open run (DP output), or ``None``."""
    v = view(state)
    if v is None:
        return None
    live = _live(state, v.path, "pv")
    same = live is not None and live.terms == v.private_vocabulary.terms and live.epsilon == v.private_vocabulary.epsilon
    return live if same else v.private_vocabulary


def vocabulary_meta(state: SessionState) -> dict[str, Any] | None:
    """Ṽ's settings (public, from ``run_state.json``) with this session's local figures of the step."""
    v = view(state)
    return None if v is None else {**v.vocabulary_meta, **_notes(state, v.path, "vocabulary")}


def density(state: SessionState) -> Any | None:
    """The open run's per-class DP densities: the object released in this session, else the folder's per-term
    scores (``ReopenedRun.density``); ``None`` before the density step."""
    v = view(state)
    if v is None or v.density is None:
        return None
    live = _live(state, v.path, "density")
    return live if live is not None else v.density


def density_meta(state: SessionState) -> dict[str, Any] | None:
    """The density step's settings (public) with its local figures; ``reopened`` when the densities are the
    folder's per-term scores (no object released in this session: they sample independent sequences only)."""
    v = view(state)
    if v is None or v.density_meta is None:
        return None
    reopened = _live(state, v.path, "density") is None
    return {**v.density_meta, **_notes(state, v.path, "density"), **({"reopened": True} if reopened else {})}


def density_info(state: SessionState) -> dict[str, Any] | None:
    """The density's public choices (σ, I, expected error) as the step reported them."""
    v = view(state)
    return dict(v.density_info) if v is not None and v.density_info is not None else None


def outcome(state: SessionState) -> SamplingOutcome | None:
    """The open run's keyphrase sequences (DP outputs), or ``None``."""
    v = view(state)
    return v.outcome if v is not None else None


def sequences_meta(state: SessionState) -> dict[str, Any] | None:
    v = view(state)
    return dict(v.sequences_meta) if v is not None and v.sequences_meta is not None else None


def run_state(state: SessionState) -> dict[str, Any]:
    """The open run's ``run_state.json`` (public settings of each step); {} without a run."""
    v = view(state)
    return dict(v.state) if v is not None else {}


def embeddings(state: SessionState) -> np.ndarray:
    """Ṽ's embeddings under the density step's public model (DP terms + public model; cached on disk only for an
    OS-entropy run — a seeded demo's Ṽ is no DP release and stays in memory, docs/PRIVACY.md)."""
    v = view(state)
    if v is None:
        raise VocabularyError(f"Build the private vocabulary first ({page_ref('private-vocabulary')}).")
    meta = v.density_meta or {}
    model = str(meta.get("embedding_model") or state.settings.embedding_model)
    seeded = bool(meta.get("seeded"))
    key = (model, seeded, tuple(v.private_vocabulary.terms))
    hit = state.run.memory.embeddings
    if hit is None or hit[:3] != key:
        cache = pipeline.seeded_embedding_cache() if seeded else embedding_cache()
        hit = (*key, embed_terms(key[2], embedder(model), cache=cache))
        state.run.memory.embeddings = hit
    return hit[3]


def density_scores(state: SessionState) -> np.ndarray:
    """(C, |Ṽ|) per-class DP density scores over Ṽ (post-processing of the DP release)."""
    d = density(state)
    if d is None:
        raise ParameterError(f"Build the keyphrase densities first ({page_ref('densities')}).")
    if hasattr(d, "scores"):
        return np.asarray(d.scores())
    return np.asarray(d.single_term_scores(embeddings(state)))


def sampling_config_used(state: SessionState, sequences: Mapping[str, Any] | None = None) -> SamplingConfig:
    """The config of the outputs on screen: each step's public settings as they were when it ran (from the run
    folder; ``sequences``: the sampling step's, before they are written), the rest as set now — built through
    ``session.current_config`` (one builder, one check)."""
    v = view(state)
    pv_meta, d_meta = vocabulary_meta(state), density_meta(state)
    q_meta = dict(sequences) if sequences is not None else sequences_meta(state)
    if v is None or pv_meta is None or d_meta is None or q_meta is None:
        raise ParameterError(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    builtin = pv_meta["vocabulary_spec"] in BUILTIN_VOCABULARIES
    upload_name = v.state.get("vocab_upload_name") or state.uploads.vocab_upload_name or "vocabulary"
    seeded = bool(pv_meta.get("seeded") or d_meta.get("seeded") or q_meta.get("seeded"))
    split = session.split(state)
    return session.current_config(state, 
        eps_voc=pv_meta["eps_voc"], terms_per_doc=pv_meta["terms_per_doc"], vocab_size=pv_meta["vocab_size"],
        selection_rule=pv_meta["selection_rule"],
        vocabulary=pv_meta["vocabulary_spec"] if builtin else "upload:" + str(upload_name),
        # the upload's SHA-256 beside its file name (config.to_run_dict), so the bundle identifies the exact file
        vocabulary_sha256=None if builtin else (v.state.get("vocab_upload_sha256") or state.uploads.vocab_upload_sha256),
        remove_stopwords=pv_meta["remove_stopwords"], junk_filter=pv_meta["junk_filter"],
        vocab_max_terms=pv_meta["vocab_max_terms"], method=d_meta["method"], density=d_meta["density"],
        length=d_meta["length"], eps_kde=d_meta["eps_kde"], bandwidth=d_meta["bandwidth_setting"],
        features=d_meta["features_setting"], embedding_model=d_meta["embedding_model"],
        per_class=q_meta["per_class"], temperature=q_meta["temperature"],
        seed=int(state.settings.demo_seed) if seeded else None,
        test_fraction=float(split.test_fraction if split is not None else state.settings.test_fraction),
        epsilon_cap=ledger_view.ledger(state).cap,
    )
