"""The app's session state, typed: one :class:`SessionState` per browser session, the only thing the app keeps in
``st.session_state`` (under :data:`STATE_KEY`) besides the widgets' own values.

It is grouped by what each part is for (docs/ARCHITECTURE.md "studio/"):

* :class:`Settings` — the user's PUBLIC choices, one typed field each: the settings
  :class:`~dpkps_core.method.config.SamplingConfig` declares for the app (generated from its field metadata, so a new
  config setting is one edit there) and the app's own (``studio.defaults``). Widgets mirror them
  (``studio.widgets.bound``); the one path from them to a config is ``studio.session.current_config``.
* :class:`LoadedCorpus` — the corpus in memory (or its streamed view), what it was loaded from, and its held-out
  split: PRIVATE.
* :class:`OpenRun` — which run folder is open and which this session made; the run folder itself holds the results
  (``dpkps_core.records.runfolder``), the session only points at it. :class:`RunMemory` caches what was read back.
* :class:`Results` — results kept for this session only (forecasts, local checks, memos): mostly PRIVATE, never in a
  global cache; :func:`clear_results` drops those of a step and the steps after it.
* :class:`Jobs` — the session's background jobs (``studio.jobs``), one slot each.
* :class:`Uploads`, :class:`Spend` and the rest: the session's public uploads, the one-click-one-release bookkeeping of
  the spend buttons, the ledgers, notices, the noise source and the tenant the session is bound to.

Every field is declared here with its type; a name that is not a field is an ``AttributeError`` (the classes use
``__slots__``), so a typo cannot create a new, silent key. The actions take the state as their first argument
(``studio.steps.run_density(state)``): the route of a setting is read from the signatures.
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
from typing import TYPE_CHECKING, Any, Mapping, MutableMapping

from dpkps_core.method.config import APP_AUTO, APP_PLAIN, APP_ZERO_NONE, setting_options, setting_value_type
from studio import defaults

if TYPE_CHECKING:  # the core's types of the fields (the state module imports none of them at run time)
    import tempfile

    import numpy as np

    from dpkps_core.corpus import Corpus
    from dpkps_core.dp.ledger import PrivacyLedger
    from dpkps_core.dp.rng import NoiseSource
    from dpkps_core.evaluation.run import EvaluationResult
    from dpkps_core.method.split import CorpusSplit

#: The app's own types the state holds, by name (aliases of ``Any`` for the checker): the modules that define them
#: (studio.jobs.Job, studio.streamed.StreamedView, studio.run_view.RunView, studio.tenancy.Tenant) stand above this
#: one and take the state, so importing them here would close a loop.
Job = StreamedView = RunView = Tenant = Any

#: The one key of ``st.session_state`` that holds the app's own state (the widgets keep theirs under ``_w.<name>``).
STATE_KEY = "dpkps"
#: Prefix of the widget keys that mirror a setting (``studio.widgets.bound``).
WIDGET_PREFIX = "_w."


# ============================================================================================ settings

#: The types of the app's own settings (those SamplingConfig does not declare); their defaults are
#: ``studio.defaults.default_settings`` and ``studio.defaults.audit_defaults``.
APP_SETTING_TYPES: dict[str, Any] = {
    # 1 corpus
    "corpus_source": str, "demo_spec": str, "text_column": str | None, "label_column": str | None,
    # 2 vocabulary & budget
    "vocabulary": str, "vocab_size": int, "eps_total": float, "eps_voc_share": float, "cap_enabled": bool,
    "epsilon_cap": float, "paper_settings": bool, "seeded_demo": bool, "demo_seed": int, "eps_forecast": float,
    "exact_previews": bool, "cap_draft_enabled": bool | None, "cap_draft_value": float | None,
    "reserve_plan": bool | None,
    # 5 sequences
    "per_class": int,
    # 6 LLM
    "backend": str, "base_url": str, "llm_model": str, "api_key": str, "device": str, "llm_batch_size": int,
    "local_model_path": str, "doc_type": str, "include_label": bool, "llm_drafts": int, "llm_no_repeat_ngram": int,
    "llm_repetition_penalty": float, "max_tokens": int, "llm_temperature": float, "n_documents": int,
    "price_per_1k": float, "concurrency": int, "few_shot": tuple, "few_shot_name": str,
    # 7 evaluation
    "eval_seeds": int, "projection_points": int, "sweep_eps_voc": list, "sweep_eps_kde": list, "sweep_methods": list,
    "sweep_seeds": int, "sweep_per_class": int, "compare_eps": float, "compare_delta": float,
    "compare_per_class": int, "compare_max_tokens": int, "compare_methods": list,
    # 8 export
    "export_run": str | None,
    # 9 audit
    "audit_trials_auto": bool, "audit_trials": int, "audit_time_budget": float, "audit_vocabulary_trials": int,
    "audit_density_trials": int, "audit_confidence": float, "audit_canaries": int, "audit_canary_prefix_words": int,
}


def _config_setting_types() -> dict[str, Any]:
    """The types of the settings :class:`SamplingConfig` declares for the app (its field metadata)."""
    out: dict[str, Any] = {}
    for name, option in setting_options().items():
        if option.app in (APP_PLAIN, APP_ZERO_NONE):
            out[name] = setting_value_type(name)
        elif option.app == APP_AUTO:
            out[f"{name}_auto"] = bool
            out[name] = setting_value_type(name)
    return out


#: Settings never shown in a repr (a repr can reach a log): the LLM's API key (kept in memory only).
SECRET_SETTINGS = frozenset({"api_key"})


def default_values() -> dict[str, Any]:
    """Every setting's default now (fast mode changes some: ``studio.fast_mode``)."""
    return {**defaults.default_settings(), **defaults.audit_defaults(), **defaults.UI_SETTINGS}


def _make_settings() -> type:
    values = default_values()
    types = {**_config_setting_types(), **APP_SETTING_TYPES}
    missing = sorted(set(values) ^ set(types))
    if missing:  # a default without a type, or a type without a default (caught by tests/studio/test_state.py)
        raise TypeError(f"studio.state.Settings: settings without both a type and a default: {missing}")
    fields = [(name, types[name], dataclasses.field(repr=name not in SECRET_SETTINGS)) for name in types]
    cls = dataclasses.make_dataclass("Settings", fields, slots=True)
    cls.__module__ = __name__
    cls.__doc__ = ("The user's PUBLIC choices, one typed field each (see the module docstring): the settings "
                   "SamplingConfig declares for the app and the app's own (studio.state.APP_SETTING_TYPES). "
                   "New ones start from their defaults: studio.state.new_settings().")
    return cls


Settings = _make_settings()


def new_settings(**changes: Any) -> Settings:
    """A :class:`Settings` at the defaults of now, with ``changes`` (each name checked)."""
    settings = Settings(**default_values())
    update_settings(settings, changes)
    return settings


def setting_names() -> tuple[str, ...]:
    """Every setting's name (a field of :class:`Settings`)."""
    return tuple(f.name for f in dataclasses.fields(Settings))


def check_setting(name: str) -> str:
    """``name`` if it is a setting; a ``KeyError`` naming it otherwise (a widget bound to a typo fails at once)."""
    if name not in _SETTING_NAMES:
        raise KeyError(f"{name!r} is not a setting of studio.state.Settings.")
    return name


_SETTING_NAMES = frozenset(setting_names())


def settings_dict(settings: Settings) -> dict[str, Any]:
    """The settings as a plain mapping by name (for ``studio.defaults``' pure functions and the config builder)."""
    return {name: getattr(settings, name) for name in _SETTING_NAMES}


def update_settings(settings: Settings, values: Mapping[str, Any]) -> None:
    """Set several settings at once (each name checked)."""
    for name, value in values.items():
        setattr(settings, check_setting(name), value)


# ============================================================================================ the groups

@dataclasses.dataclass(slots=True)
class LoadedCorpus:
    """The loaded corpus and where it came from — PRIVATE (its documents, their content fingerprint, the split)."""

    corpus: Corpus | StreamedView | None = None     #: a corpus in memory, or a streamed view (studio.streamed)
    corpus_id: str | None = None                    #: "demo:bbc", "upload:<sha>", "server:<name>"
    corpus_spec: str | None = None                  #: what the config names as the corpus
    corpus_fingerprint: str | None = None           #: SHA-256 of the uploaded file's bytes (PRIVATE)
    corpus_filename: str | None = None
    text_column: str | None = None                  #: the columns and encoding the file was read with
    label_column: str | None = None
    encoding: str | None = None
    content_fingerprint: tuple[str | None, str] | None = None   #: (corpus id, SHA-256 of its content) — PRIVATE
    summary: tuple[Any, Any] | None = None          #: (key, page 1's summary of the file) — PRIVATE
    upload_error: str | None = None                 #: the last upload's error, and its file's name
    upload_error_file: str | None = None
    split: CorpusSplit | None = None                #: the held-out split (PRIVATE positions)
    split_key: tuple[str | None, float] | None = None   #: (corpus id, test fraction) the split was made for


@dataclasses.dataclass(slots=True)
class RunMemory:
    """What was read back from run folders (keyed by the folders' files' stamps) and what a step made in this script
    run (``studio.run_view``) — never a second copy of the folder's truth."""

    cache: tuple[Any, RunView | None] | None = None
    evaluation: tuple[Any, EvaluationResult | None] | None = None
    notes: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)   #: PRIVATE local figures per step
    live: dict[str, Any] = dataclasses.field(default_factory=dict)
    embeddings: tuple[str, bool, tuple[str, ...], np.ndarray] | None = None


@dataclasses.dataclass(slots=True)
class OpenRun:
    """Which run folder is open (mirrored in the URL's ``?run=``, ``studio.runs``) and which ones this session made."""

    run_dir: str | None = None
    run_dirs: list[str] = dataclasses.field(default_factory=list)
    reopened_run: str | None = None                 #: the name of a run reopened from disk
    pending_reopen: str | None = None               #: a run named in the URL, to reopen once its corpus is loaded
    pending_reopen_tried: tuple[str, str | None] | None = None
    url_checked: bool = False
    export_current: str | None = None               #: the run page 8 opened first (the current one at the time)
    memory: RunMemory = dataclasses.field(default_factory=RunMemory)


@dataclasses.dataclass(slots=True)
class Results:
    """Results kept for this session only, cleared by :func:`clear_results` when the step they depend on runs again.
    The steps' DP outputs are in the run folder, not here. PRIVATE unless marked."""

    # the corpus step (and everything after it)
    term_counts: tuple[Any, Any] | None = None
    forecast: Any = None
    forecast_stamp: tuple[int, dict[str, Any]] | None = None    #: public settings the exact forecast was made for
    no_llm_history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    real_keyphrase_baseline: tuple[Any, Any] | None = None
    method_outlook: tuple[Any, Any] | None = None
    compare_rows: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    embedding_memo: Any = None
    # the vocabulary step
    vocab_check: dict[str, Any] | None = None
    # the density step
    umap_map: np.ndarray | None = None              #: a map of Ṽ's embeddings (DP output + public model)
    # the sequences step
    no_llm: dict[str, Any] | None = None
    # kept across steps (keyed by what they were made for)
    dp_forecast_release: tuple[Any, Any] | None = None   #: the DP forecast (a DP release) and its key
    dp_forecast_events: tuple[Any, ...] | None = None    #: (corpus id, ledger id, event ids) of that release
    audit_estimate: dict[str, Any] | None = None
    train_ledger: tuple[Any, ...] | None = None     #: a ledger over the training part's units (PRIVATE)
    downloads: dict[str, bytes] = dataclasses.field(default_factory=dict)    #: documents made on demand (PDFs)


#: The session results each step owns, in the order of the steps (``studio.session.clear_after``).
STEPS = ("corpus", "vocabulary", "density", "sequences", "documents", "evaluation")
RESULTS_OF_STEP: dict[str, tuple[str, ...]] = {
    "corpus": ("split", "split_key", "term_counts", "forecast", "no_llm_history", "real_keyphrase_baseline",
               "method_outlook", "method_preview", "compare_rows", "embedding_memo"),
    "vocabulary": ("vocab_check",),
    "density": ("umap_map",),
    "sequences": ("no_llm",),
    "documents": ("generation",),
    "evaluation": ("projection", "evaluation", "memorisation"),
}


@dataclasses.dataclass(slots=True)
class Jobs:
    """The session's background jobs (``studio.jobs.Job``), one slot each; ``None`` before the first."""

    forecast: Job | None = None         #: page 2's DP forecast on a streamed corpus
    vocabulary: Job | None = None       #: page 3's Ṽ on a streamed corpus
    density: Job | None = None          #: page 4's densities on a streamed corpus
    generation: Job | None = None       #: page 6's LLM writer (reads only DP sequences: its messages are public)
    method_preview: Job | None = None
    projection: Job | None = None
    evaluation: Job | None = None
    memorisation: Job | None = None
    compare: Job | None = None
    disclosure: Job | None = None
    sweep: Job | None = None
    audit: Job | None = None
    reattached_generation: Job | None = None   #: a writer of the open run taken up after a reload (studio.generation_steps)
    polling: set[str] = dataclasses.field(default_factory=set)   #: jobs whose progress panel is polling

    def get(self, name: str) -> Job | None:
        """The job in slot ``name`` (a ``KeyError`` for a name that is not a slot)."""
        return getattr(self, check_job(name))

    def set(self, name: str, job: Job | None) -> None:
        setattr(self, check_job(name), job)


_JOB_NAMES = tuple(f.name for f in dataclasses.fields(Jobs) if f.name not in ("reattached_generation", "polling"))


def check_job(name: str) -> str:
    if name not in _JOB_NAMES:
        raise KeyError(f"{name!r} is not a job slot of studio.state.Jobs ({', '.join(_JOB_NAMES)}).")
    return name


@dataclasses.dataclass(slots=True)
class Uploads:
    """The session's PUBLIC uploads (a vocabulary file) and its temp folder (``studio.uploads``)."""

    vocab_upload_path: str | None = None
    vocab_upload_name: str | None = None
    vocab_upload_sha256: str | None = None
    tmp: tempfile.TemporaryDirectory[str] | None = None   #: deleted with the session (its finalizer)


@dataclasses.dataclass(slots=True)
class Spend:
    """One click, one release (``studio.spend``): how many releases each step's button began, the click asked for
    and not taken yet, the clicks each script run took, the steps whose re-run question is open."""

    versions: dict[str, int] = dataclasses.field(default_factory=dict)
    request: tuple[str, int] | None = None
    taken: dict[int, tuple[str, int]] = dataclasses.field(default_factory=dict)
    confirm: set[str] = dataclasses.field(default_factory=set)
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)


@dataclasses.dataclass(slots=True)
class RangeChecks:
    """Number boxes without browser-side bounds (page 2): each setting's last valid value and its error, if any."""

    last_valid: dict[str, float] = dataclasses.field(default_factory=dict)
    errors: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class SessionState:
    """Everything one browser session holds (see the module docstring)."""

    settings: Settings = dataclasses.field(default_factory=new_settings)
    loaded: LoadedCorpus = dataclasses.field(default_factory=LoadedCorpus)
    run: OpenRun = dataclasses.field(default_factory=OpenRun)
    results: Results = dataclasses.field(default_factory=Results)
    jobs: Jobs = dataclasses.field(default_factory=Jobs)
    uploads: Uploads = dataclasses.field(default_factory=Uploads)
    spend: Spend = dataclasses.field(default_factory=Spend)
    range_checks: RangeChecks = dataclasses.field(default_factory=RangeChecks)
    ledgers: dict[str, PrivacyLedger] = dataclasses.field(default_factory=dict)   #: corpus id → its ledger
    ledger_caps: dict[str,
                      float | None] = dataclasses.field(default_factory=dict)  #: cap each ledger was opened or last set under
    ledger_created_said: bool = False
    notices: list[str] = dataclasses.field(default_factory=list)       #: one-off messages for the next render
    noise: NoiseSource | None = None
    token: str = dataclasses.field(default_factory=lambda: secrets.token_hex(4))   #: names this session's run folders
    tenant: Tenant | None = None                                        #: the tenant the session is bound to

    @classmethod
    def new(cls, **settings: Any) -> "SessionState":
        """A fresh session with ``settings`` changed from their defaults (each name checked)."""
        return cls(settings=new_settings(**settings))


def clear_results(state: SessionState, step: str, *, include: bool = False) -> list[Job]:
    """Reset the session results of the steps after ``step`` (and of ``step`` itself when ``include``) to their
    defaults; returns the jobs among them that were set (the caller cancels a running one)."""
    start = STEPS.index(step) + (0 if include else 1)
    dropped_jobs: list[Job] = []
    for name in STEPS[start:]:
        for field in RESULTS_OF_STEP[name]:
            if field in _JOB_NAMES:
                if state.jobs.get(field) is not None:
                    dropped_jobs.append(state.jobs.get(field))
                state.jobs.set(field, None)
            elif field in ("split", "split_key"):
                setattr(state.loaded, field, None)
            else:
                setattr(state.results, field, _RESULT_DEFAULTS[field]())
    return dropped_jobs


_RESULT_DEFAULTS = {f.name: (f.default_factory if f.default_factory is not dataclasses.MISSING  # type: ignore[misc]
                             else (lambda v=f.default: v)) for f in dataclasses.fields(Results)}


# ============================================================================================ the session's object

def of(session: MutableMapping[str, Any]) -> SessionState:
    """The :class:`SessionState` kept in ``session`` (``st.session_state``; a fresh one on the first visit)."""
    state = session.get(STATE_KEY)
    if not isinstance(state, SessionState):
        state = session[STATE_KEY] = SessionState()
    return state


def session_state() -> SessionState:
    """This browser session's state (pages call it once, at their top, and pass it on)."""
    import streamlit as st

    return of(st.session_state)


def existing_session_state() -> SessionState | None:
    """This browser session's state if it has one — None outside a script run (a job's thread) or before the first."""
    import streamlit as st

    try:
        state = st.session_state.get(STATE_KEY)
    except Exception:  # noqa: BLE001 - no script context
        return None
    return state if isinstance(state, SessionState) else None


def reset_session() -> SessionState:
    """Forget everything the session held (its state and its widgets' values): a new tenant starts afresh."""
    import streamlit as st

    for key in list(st.session_state.keys()):
        del st.session_state[key]
    return session_state()


def widget_value(key: str) -> Any:
    """The value of the widget whose ``key=`` is ``key`` (Streamlit keeps a widget's own value under its key), or
    None before it is drawn — for a widget that is not bound to a setting (a file uploader)."""
    import streamlit as st

    return st.session_state.get(key)


def set_widget_value(key: str, value: Any) -> None:
    """Set the value the widget with ``key=key`` shows on this run (before it is drawn)."""
    import streamlit as st

    st.session_state[key] = value


def widget_key(name: str) -> str:
    """The widget key that mirrors setting ``name`` (or a widget's own name, e.g. ``exact_previews.vocabulary``)."""
    return f"{WIDGET_PREFIX}{name}"
