"""The app's session: every key of ``st.session_state``, its defaults and the accessors that read or derive it.

Rules (docs/ARCHITECTURE.md, issue "The Streamlit app"):

* Everything lives in plain ``st.session_state`` keys (widgets only mirror them, see ``studio.widgets``), so a
  page that is not on screen loses nothing.
* Nothing derived from the private corpus or from DP noise is ever put in a global cache: term counts, Ṽ,
  densities, sequences, evaluations stay in the session (public models and data: ``studio.resources``).
* A re-run step clears the results that depended on the previous output (:func:`clear_after`); the ledger is
  never cleared.
* The run folder is the state (``dpkps_core.runfolder``): every step writes its DP output there as soon as it is
  made, the session holds a pointer to it (``run_dir``, mirrored in the URL's ``?run=`` so that a reload finds it
  again) and a write-through view of what it holds (``pv``, ``dp_density``, ``outcome``), which a reopened run
  rebuilds from the folder alone (``studio.steps.reopen_run``) — at no new ε: reading DP outputs back is
  post-processing.
* Paid-for results are never discarded as a side effect: while they exist, the settings they were built on (the
  held-out fraction, the declared classes, the corpus) are locked or ask first (:func:`has_results`).

The actions that call the core (load a corpus, the DP steps, the background jobs) are in ``studio.steps`` and
``studio.evaluation_steps``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any, Mapping, MutableMapping, Sequence

import numpy as np
import streamlit as st

from dpkps_core import pipeline
from dpkps_core.config import DEFAULT_EPSILON_CAP, PAPER_SETTINGS, SamplingConfig, effective_max_terms
from dpkps_core.corpus import Corpus
from dpkps_core.device import default_device_setting
from dpkps_core.dp.forecast import DEFAULT_FORECAST_EPSILON  # noqa: F401 - the pages' default ε_forecast
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import DEFAULT_MODEL
from dpkps_core.errors import CorpusError, ParameterError, VocabularyError
from dpkps_core.ledger_store import PersistentLedger, open_corpus_ledger
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE
from dpkps_core.llm.prompts import DEFAULT_INCLUDE_LABEL
from dpkps_core.llm.settings import DEFAULT_DRAFTS
from dpkps_core.runfolder import create_run_dir, runs_root
from dpkps_core.split import CorpusSplit, split_documents
from dpkps_core.vocabulary import PublicVocabulary
from studio import fast_mode
from studio.jobs import Job
from studio.resources import cached_vocabulary, embedder

#: Largest upload (bytes); matches server.maxUploadSize = 200 (MB) and the corpus loader's default max_bytes.
MAX_UPLOAD_BYTES = 200 * 1024 * 1024

DEMO_CHOICES: dict[str, str] = {
    "demo:bbc": "BBC News articles — 5 categories (public demo data)",
    "demo:drugs": "Drugs.com patient reviews — label: medical condition (public demo data)",
    "demo:drugs-rating": "Drugs.com patient reviews — label: rating band (public demo data)",
}
DOC_TYPE_FOR_DEMO = {
    "demo:bbc": "a short news article",
    "demo:drugs": "a short patient review of a medication",
    "demo:drugs-rating": "a short patient review of a medication",
}
BUILTIN_VOCABULARIES = ("glove", "wordfreq", "medical")
STEPS = ("corpus", "vocabulary", "density", "sequences", "documents", "evaluation")

# Result keys cleared when the step they belong to (or an earlier one) is re-run. Private ones are marked.
_RESULT_KEYS: dict[str, tuple[str, ...]] = {
    "corpus": ("split", "split_key", "term_counts", "forecast", "no_llm_history", "real_keyphrase_baseline",
               "method_outlook", "job_method_preview", "compare_rows", "_embedding_memo"),  # all PRIVATE
    "vocabulary": ("pv", "pv_meta", "vocab_check"),            # vocab_check: PRIVATE
    "density": ("keyphrases", "embeddings", "dp_density", "density_info", "density_meta", "umap_map"),  # keyphrases: PRIVATE
    "sequences": ("outcome", "seq_meta", "no_llm"),            # no_llm: PRIVATE
    "documents": ("job_generation",),
    "evaluation": ("evaluation", "projections", "job_projection", "job_evaluation", "job_memorisation"),
}


# ============================================================================================ settings

def default_settings() -> dict[str, Any]:
    """Every user choice, as plain session keys (the first visit needs none of them changed)."""
    d = SamplingConfig()
    fast = fast_mode()
    return {
        # 1 corpus
        "corpus_source": "demo", "demo_spec": "demo:bbc", "text_column": None, "label_column": None,
        "test_fraction": d.test_fraction,
        # 2 vocabulary & budget
        "vocabulary": "glove", "remove_stopwords": d.remove_stopwords, "junk_filter": d.junk_filter,
        "vocab_max_terms": d.vocab_max_terms or 0, "terms_per_doc": d.terms_per_doc, "vocab_size": 200 if fast else d.vocab_size,
        "selection_rule": d.selection_rule, "embedding_model": DEFAULT_MODEL,
        "eps_total": float(d.eps_voc + d.eps_kde), "eps_voc_share": d.eps_voc / (d.eps_voc + d.eps_kde),
        "cap_enabled": True, "epsilon_cap": DEFAULT_EPSILON_CAP, "paper_settings": False,
        "seeded_demo": False, "demo_seed": 2024, "noise_sampler": d.noise_sampler,
        # 4 densities
        "method": d.method, "density": d.density, "length": d.length,
        "bandwidth_auto": True, "bandwidth": 0.3, "features_auto": True, "features": 2000,
        # 5 sequences
        "per_class": 2 if fast else 20, "temperature": d.temperature,
        # 6 LLM
        "backend": "offline", "base_url": "", "llm_model": "gpt-4o-mini", "api_key": "",
        "device": default_device_setting(), "llm_batch_size": DEFAULT_BATCH_SIZE, "local_model_path": "",
        "doc_type": "", "include_label": DEFAULT_INCLUDE_LABEL, "llm_drafts": DEFAULT_DRAFTS, "max_tokens": 16 if fast else 200, "llm_temperature": 0.7,
        "n_documents": 2 if fast else 10, "price_per_1k": 0.0, "concurrency": 4, "few_shot": (),
        "few_shot_name": "",
        # 7 evaluation
        "eval_seeds": 1 if fast else 3, "projection_points": 60 if fast else 300,
        "sweep_eps_voc": [1.0, 5.0], "sweep_eps_kde": [2.0, 5.0, 10.0], "sweep_methods": ["independent"],
        "sweep_seeds": 1, "sweep_per_class": 20 if fast else 100,
        "compare_eps": 10.0, "compare_delta": 1e-6, "compare_per_class": 1 if fast else 2,
        "compare_max_tokens": 16 if fast else 48, "compare_methods": ["dpkps", "private-prediction", "augpe"],
    }


#: The per-corpus choices a new corpus starts from their defaults (``studio.session.default_settings``): the
#: method and ε split chosen for one corpus (say the demo) are no choice for the next one. The cap, the noise
#: source and the LLM's connection settings are the user's, not the corpus's, and carry over.
CORPUS_SETTINGS = ("eps_total", "eps_voc_share", "paper_settings", "vocabulary", "vocab_max_terms", "terms_per_doc",
                   "vocab_size", "selection_rule", "remove_stopwords", "junk_filter", "method", "density", "length",
                   "bandwidth_auto", "bandwidth", "features_auto", "features", "per_class", "temperature",
                   "doc_type", "include_label", "few_shot", "few_shot_name")


def reset_corpus_settings() -> list[str]:
    """Put the per-corpus choices (:data:`CORPUS_SETTINGS`) back to their defaults when another corpus is loaded;
    returns the names of those that had been changed (for a notice)."""
    s = ss()
    defaults = default_settings()
    changed = [k for k in CORPUS_SETTINGS if k in defaults and s.get(k) != defaults[k]]
    for k in CORPUS_SETTINGS:
        if k in defaults:
            s[k] = defaults[k]
    return changed


def ss() -> MutableMapping[str, Any]:
    return st.session_state


def init_session() -> None:
    """Fill missing keys (first visit, or keys a newer version added). Never overwrites a choice."""
    s = ss()
    for k, v in default_settings().items():
        if k not in s:
            s[k] = v
    if "session_token" not in s:
        s["session_token"] = secrets.token_hex(4)
    for k, v in (("ledgers", {}), ("run_dirs", []), ("notices", [])):
        if k not in s:
            s[k] = v
    sync_run_url()
    reopen_from_url()
    recover_run()


def recover_run() -> None:
    """Put back a release that reached the run folder but not the session: Streamlit stops a script run at any
    session access when another click arrives, so a run can be stopped between writing its release to the folder
    and keeping it in the session (``studio.steps`` writes the folder first). Post-processing: no ledger event."""
    from dpkps_core.errors import DPKPSError
    from dpkps_core.runfolder import DENSITY_FILE, VOCABULARY_FILE

    s = ss()
    rd = s.get("run_dir")
    if not rd or not Path(rd).is_dir():
        return
    folder = Path(rd)
    missing = ((folder / VOCABULARY_FILE).is_file() and s.get("pv") is None) or \
        ((folder / DENSITY_FILE).is_file() and s.get("dp_density") is None)
    mark = (rd, s.get("pv") is None, s.get("dp_density") is None)
    if not missing or s.get("_recover_tried") == mark:
        return
    s["_recover_tried"] = mark
    from studio import steps  # imported here: studio.steps imports this module

    try:
        steps.reopen_run(folder, quiet=True)
    except DPKPSError:
        pass  # the folder is not this session's run any more (another corpus): nothing to put back


def reopen_from_url() -> None:
    """After a reload, reopen the run the URL names (at no new ε: post-processing). A run built on an uploaded
    corpus waits until that corpus is loaded again (tried once per loaded corpus); a folder that is gone is said."""
    from dpkps_core.errors import DPKPSError
    from dpkps_core.runfolder import resolve_run_name

    s = ss()
    name = s.get("pending_reopen")
    if not name or s.get("_pending_reopen_tried") == (name, s.get("corpus_id")):
        return
    s["_pending_reopen_tried"] = (name, s.get("corpus_id"))
    from studio import steps  # imported here: studio.steps imports this module

    try:
        steps.reopen_run(resolve_run_name(name))
    except CorpusError as exc:  # its corpus is not loaded yet: say how, and try again once it is
        notice(f"This tab names the run {name}, which can be reopened once its corpus is loaded. {exc}")
    except DPKPSError as exc:
        s.pop("pending_reopen", None)
        notice(f"The run {name} named in this tab's address could not be reopened: {exc}")


#: The URL query parameter that names the session's run folder (a bare folder name, never a path).
RUN_QUERY_PARAM = "run"


def sync_run_url() -> None:
    """Keep the run folder's name in the URL (``?run=<name>``) so a reloaded tab finds the run again; on the first
    run of a session (a reload) with such a parameter and no run yet, remember it for :func:`pending_reopen`."""
    s = ss()
    try:
        params = st.query_params
        wanted = params.get(RUN_QUERY_PARAM)
    except Exception:  # noqa: BLE001 - no browser context (bare mode): nothing to sync
        return
    rd = s.get("run_dir")
    if not s.get("_run_url_checked"):
        s["_run_url_checked"] = True
        if wanted and not rd:
            s["pending_reopen"] = str(wanted)
            return
    name = Path(rd).name if rd else None
    if name and wanted != name:
        params[RUN_QUERY_PARAM] = name
    elif not name and wanted and not s.get("pending_reopen"):
        del params[RUN_QUERY_PARAM]


def pending_reopen() -> str | None:
    """The run folder named in the URL of a reloaded tab, not reopened yet (or ``None``)."""
    return ss().get("pending_reopen")


def has_results() -> bool:
    """True while paid-for results are on screen (Ṽ, densities or sequences): the settings they were built on are
    then locked or ask first (DESIGN §2.0: a discarded release stays spent)."""
    s = ss()
    return any(s.get(k) is not None for k in ("pv", "dp_density", "outcome"))


def apply_paper_settings(on: bool) -> None:
    """Switch the DP-KPS paper's configuration (pipeline.PAPER_SETTINGS) on, or back to the defaults."""
    s = ss()
    d = SamplingConfig()
    defaults = default_settings()
    mapping = {
        "remove_stopwords": PAPER_SETTINGS["remove_stopwords"], "junk_filter": PAPER_SETTINGS["junk_filter"],
        "vocab_max_terms": PAPER_SETTINGS["vocab_max_terms"] or 0, "density": PAPER_SETTINGS["density"],
        "selection_rule": PAPER_SETTINGS["selection_rule"], "vocab_size": PAPER_SETTINGS["vocab_size"],
        "terms_per_doc": PAPER_SETTINGS["terms_per_doc"],
    }
    if on:
        s.update(mapping)
        s["bandwidth_auto"], s["bandwidth"] = False, float(PAPER_SETTINGS["bandwidth"])
        s["features_auto"], s["features"] = False, int(PAPER_SETTINGS["features"])
    else:
        for k in mapping:
            s[k] = defaults[k]
        s["bandwidth_auto"], s["features_auto"] = True, True
        s["bandwidth"], s["features"] = defaults["bandwidth"], defaults["features"]
        s["density"] = d.density
    s["paper_settings"] = on


def eps_split() -> tuple[float, float]:
    s = ss()
    total = float(s["eps_total"])
    voc = round(total * float(s["eps_voc_share"]), 4)
    return voc, round(total - voc, 4)


def current_config(**overrides: Any) -> SamplingConfig:
    """The :class:`SamplingConfig` the settings describe (public parameters only)."""
    s = ss()
    eps_voc, eps_kde = eps_split()
    cfg = SamplingConfig(
        corpus=s.get("corpus_spec") or s["demo_spec"], text_column=s.get("loaded_text_column"),
        label_column=s.get("loaded_label_column"),
        vocabulary=vocabulary_spec(), remove_stopwords=bool(s["remove_stopwords"]), junk_filter=bool(s["junk_filter"]),
        vocab_max_terms=int(s["vocab_max_terms"]) or None, eps_voc=eps_voc, eps_kde=eps_kde, method=s["method"],
        density=s["density"], length=int(s["length"]), per_class=int(s["per_class"]),
        vocab_size=int(s["vocab_size"]), terms_per_doc=int(s["terms_per_doc"]), selection_rule=s["selection_rule"],
        features=None if s["features_auto"] else int(s["features"]),
        bandwidth=None if s["bandwidth_auto"] else float(s["bandwidth"]),
        temperature=float(s["temperature"]), embedding_model=s["embedding_model"],
        seed=int(s["demo_seed"]) if s["seeded_demo"] else None, test_fraction=float(s["test_fraction"]),
        noise_sampler=str(s.get("noise_sampler") or "opendp"),
        epsilon_cap=float(s["epsilon_cap"]) if s["cap_enabled"] else None,
        person_column=person_column(), encoding=str(s.get("loaded_encoding") or "utf-8"),
    )
    return dataclasses.replace(cfg, **overrides) if overrides else cfg



# ============================================================================================ session accessors

def memo_embedder(name: str = DEFAULT_MODEL, device: str | None = None) -> Any:
    """The embedding model behind this session's in-memory memo: each (private) document is embedded once per
    session and corpus, whether by Evaluate, the map or Compare; never written anywhere."""
    from studio.embedding_memo import MemoEmbedder, session_memo

    return MemoEmbedder(embedder(name, device), session_memo(ss(), ss().get("corpus_id"), name))


def notice(message: str) -> None:
    """Queue a one-off message for the next page render (e.g. after a switch of corpus)."""
    ss()["notices"].append(message)


def corpus() -> Corpus | None:
    return ss().get("corpus")


def corpus_id() -> str | None:
    return ss().get("corpus_id")


def ledger() -> PrivacyLedger:
    """The privacy ledger of the current corpus: the persistent unit ledger (``dpkps_core.ledger_store``; DESIGN
    §2.0), opened with the corpus's unit strings — its documents, or its persons when a person column is chosen —
    and shared with every session and CLI run on the same documents, whatever the file. ``events`` are this
    session's releases; :func:`ledger_status` reads the corpus's units (PRIVATE, local).

    The session's cap field is this run's cap setting (public): the cap of documents new to the ledger and the bound
    on this session's own ε. Changing it while a corpus is loaded sets the cap of that corpus's documents (persons)
    in the ledger, recorded with who and when."""
    s = ss()
    cid = s.get("corpus_id") or "(no corpus)"
    ledgers: dict[str, PrivacyLedger] = s["ledgers"]
    cap = float(s["epsilon_cap"]) if s.get("cap_enabled") else None
    if cid not in ledgers:
        c = s.get("corpus")
        ledgers[cid] = (open_corpus_ledger(c, tool="app", cap=cap, by_person=person_column() is not None)
                        if c is not None and s.get("corpus_id") else PrivacyLedger(cap))
    led = ledgers[cid]
    if led.cap != cap:
        led.cap = cap
    if not isinstance(led, PersistentLedger):
        return led
    rd = s.get("run_dir")
    led.run = Path(rd).name if rd else f"session {s.get('session_token', '?')}"
    seen: dict[str, float | None] = s.setdefault("ledger_caps", {})
    if cid not in seen:
        seen[cid] = cap                     # opened under this setting: it applies to documents new to the ledger
    elif seen[cid] != cap:
        led.set_unit_cap(cap)               # changed while this corpus is loaded: its documents' cap (recorded)
        seen[cid] = cap
    return led


@dataclasses.dataclass(frozen=True)
class LedgerStatus:
    """What the sidebar shows about the ledger (the corpus's figures are PRIVATE, local: never exported).

    ``largest``: the largest ε spent by one document (person) of the corpus over every release, app and CLI;
    ``cap_low``/``cap_high``: the caps of its documents already in the ledger (``None``: no cap); ``cap_setting``:
    this session's cap field; ``session``: ε spent by this session's releases."""

    unit: str
    largest: float
    cap_low: float | None
    cap_high: float | None
    cap_setting: float | None
    session: float
    releases: int
    persistent: bool

    @property
    def cap_text(self) -> str:
        fmt = lambda c: "no cap" if c is None else f"{c:g}"  # noqa: E731
        if self.cap_low == self.cap_high:
            return fmt(self.cap_low)
        return f"{fmt(self.cap_low)}–{fmt(self.cap_high)}"


def ledger_status() -> LedgerStatus:
    """The ledger figures of the sidebar (raises :class:`~dpkps_core.errors.PrivacyBudgetError` when the ledger
    cannot be used: shown as an error, nothing spent)."""
    led = ledger()
    unit = "person" if person_column() else "document"
    if not isinstance(led, PersistentLedger):
        return LedgerStatus(unit, led.total_epsilon, led.cap, led.cap, led.cap, led.total_epsilon, len(led.events), False)
    view = led.view()
    low, high = view.cap_range
    return LedgerStatus(unit, view.largest_spend, low, high, led.cap, led.total_epsilon, len(view.releases), True)


def noise() -> NoiseSource:
    """OS entropy by default; seeded only when "reproducible demo (NOT FOR RELEASE)" is ticked."""
    s = ss()
    seed = int(s["demo_seed"]) if s.get("seeded_demo") else None
    sampler = str(s.get("noise_sampler") or "opendp")  # OpenDP (vetted, default) or NumPy; a seed means NumPy
    cur: NoiseSource | None = s.get("noise")
    if cur is None or cur.seed != seed or cur.requested_sampler != sampler:
        cur = NoiseSource(seed, sampler=sampler)
        s["noise"] = cur
    return cur


def clear_after(step: str, *, include: bool = False) -> None:
    """Drop the results of the steps after ``step`` (and of ``step`` itself when ``include``)."""
    s = ss()
    start = STEPS.index(step) + (0 if include else 1)
    for name in STEPS[start:]:
        for key in _RESULT_KEYS[name]:
            if key == "job_generation" or key.startswith("job_"):
                job = s.get(key)
                if isinstance(job, Job) and job.running:
                    job.cancel.set()
            s.pop(key, None)



# ============================================================================================ 1. corpus

def person_column() -> str | None:
    """The person column when the unit of privacy is a person (DESIGN §2, person unit), else ``None`` (one document)."""
    c = corpus()
    return c.person_column if c is not None and c.persons is not None else None


def privacy_unit() -> str:
    c = corpus()
    return c.privacy_unit if c is not None and c.persons is not None else "add/remove one document"


def person_groups(part: Corpus) -> Sequence[str] | None:
    """PRIVATE person ids of ``part`` when the unit is a person (weights only; never shown or released)."""
    return part.persons if person_column() else None


def split() -> CorpusSplit | None:
    """The held-out split of the current corpus; only ``split.train`` feeds DP steps."""
    s = ss()
    c = corpus()
    if c is None:
        return None
    key = (s.get("corpus_id"), float(s["test_fraction"]))
    if s.get("split_key") != key:
        if s.get("split_key") is not None and s["split_key"][0] == key[0] and has_results():
            # the slider is locked while results exist (page 1); a change from elsewhere never discards them:
            # the fraction the results were built on stays (DESIGN §2.0, a discarded release stays spent)
            s["test_fraction"] = s["split_key"][1]
            return s["split"]
        new = split_documents(c, test_fraction=float(s["test_fraction"]), seed=0, by_person=person_column() is not None)
        clear_after("corpus", include=True)
        s["split"], s["split_key"] = new, key
    return s["split"]


def start_over() -> None:
    """The explicit "start over" action: the results on screen are put aside (their run folders stay on disk and
    can be reopened; the ε they spent stays on the ledger), which unlocks the settings they were built on."""
    s = ss()
    job = s.get("job_generation")
    if isinstance(job, Job) and job.running:
        raise ParameterError("The LLM is still writing into the run folder; cancel it first (page 6).")
    clear_after("vocabulary", include=True)
    s["run_dir"] = None
    s.pop("reopened_run", None)


def train_part() -> Corpus:
    c = corpus()
    sp = split()
    if c is None or sp is None:
        raise CorpusError("Load a corpus first (page 1).")
    return c.subset(sp.train).declared_only()  # undeclared labels enter no DP step


def test_part() -> Corpus:
    c = corpus()
    sp = split()
    if c is None or sp is None:
        raise CorpusError("Load a corpus first (page 1).")
    part = c.subset(sp.test)
    return part.declared_only() if part.declared else part



# ============================================================================================ 2. vocabulary & budget

def vocabulary_spec() -> str:
    s = ss()
    if s["vocabulary"] == "upload":
        path = s.get("vocab_upload_path")
        if not path:
            raise VocabularyError("Upload a vocabulary file (one term per line) or choose a built-in vocabulary.")
        return str(path)
    return str(s["vocabulary"])


def session_tmp() -> Path:
    """A private temp folder of this session (owner-only) for PUBLIC uploads such as a vocabulary file.

    It is a ``tempfile.TemporaryDirectory`` held only by this session's state: when the session ends, Streamlit
    drops the state, the object is garbage-collected and its finalizer deletes the folder (also at exit)."""
    s = ss()
    holder = s.get("session_tmp")
    if not isinstance(holder, tempfile.TemporaryDirectory) or not Path(holder.name).is_dir():
        holder = tempfile.TemporaryDirectory(prefix="dpkps-session-")
        os.chmod(holder.name, 0o700)
        s["session_tmp"] = holder
    return Path(holder.name)


def vocabulary_file_name(filename: str) -> str:
    """A PUBLIC vocabulary upload's own file name, made safe to save: letters, digits, ``-``, ``_`` and ``.`` only
    (no folders), the extension kept (``.txt`` when it has none), at most 80 characters."""
    base = Path(str(filename).replace("\\", "/")).name
    keep = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in base).strip("._") or "vocabulary"
    stem, dot, ext = keep.rpartition(".")
    if not dot or not stem or not ext.isalnum() or len(ext) > 8:
        stem, ext = keep, "txt"
    return f"{stem[:70]}.{ext.lower()}"


def save_vocabulary_upload(data: bytes, filename: str) -> Path:
    """Save a PUBLIC vocabulary upload in this session's temp folder under its own (sanitised) file name, so that
    the run folder and the bundle name it as the user knows it — ``to_run_dict`` writes the file name and its
    SHA-256, never the path (docs/PRIVACY.md). Another file of the same name gets a short ``-2``, ``-3``… suffix;
    the same bytes again reuse their file."""
    name = vocabulary_file_name(filename)
    folder = session_tmp()
    stem, ext = name.rsplit(".", 1)
    path, n = folder / name, 1
    while path.exists() and path.read_bytes() != data:
        n += 1
        path = folder / f"{stem}-{n}.{ext}"
    path.write_bytes(data)
    s = ss()
    s["vocab_upload_path"] = str(path)
    s["vocab_upload_name"] = path.name
    s["vocab_upload_sha256"] = hashlib.sha256(data).hexdigest()
    return path


def public_vocabulary() -> PublicVocabulary:
    s = ss()
    spec = vocabulary_spec()
    return cached_vocabulary(spec, bool(s["remove_stopwords"]), bool(s["junk_filter"]),
                             effective_max_terms(spec, int(s["vocab_max_terms"]) or None))


def term_counts(vocab: PublicVocabulary, terms_per_doc: int) -> np.ndarray:
    """PRIVATE first-S-distinct term counts of the training part (session only; they do not depend on ε)."""
    s = ss()
    c = corpus()
    key = (s.get("corpus_id"), s.get("split_key"), c.public_classes if c is not None else None, vocab.name,
           vocab.source, len(vocab), vocab.terms[:5], vocab.terms[-5:], int(terms_per_doc))
    cache = s.get("term_counts")
    if not cache or cache[0] != key:
        train = train_part()
        counts = pipeline.term_counts(train.texts, vocab, terms_per_doc=terms_per_doc, groups=person_groups(train))
        s["term_counts"] = (key, counts)
        cache = s["term_counts"]
    return cache[1]


def settings_changed_since(meta: Mapping[str, Any] | None, keys: Mapping[str, Any]) -> list[str]:
    """Names of settings whose current value differs from what a result was built with."""
    if not meta:
        return []
    return [name for name, value in keys.items() if meta.get(name) != value]


def vocabulary_settings_now() -> dict[str, Any]:
    cfg = current_config()
    return {"eps_voc": cfg.eps_voc, "terms_per_doc": cfg.terms_per_doc, "vocab_size": cfg.vocab_size,
            "selection_rule": cfg.selection_rule, "vocabulary_spec": cfg.vocabulary,
            "remove_stopwords": cfg.remove_stopwords, "junk_filter": cfg.junk_filter,
            "vocab_max_terms": cfg.effective_vocab_max_terms}



# ============================================================================================ 4. densities

def density_scores() -> np.ndarray:
    """(C, |Ṽ|) per-class DP density scores over Ṽ (post-processing of the DP release)."""
    s = ss()
    d = s["dp_density"]
    if hasattr(d, "scores"):
        return np.asarray(d.scores())
    return np.asarray(d.single_term_scores(s["embeddings"]))



# ============================================================================================ 5. sequences

def sampling_config_used() -> SamplingConfig:
    """The config of the outputs on screen: each step's parameters as they were when it ran."""
    s = ss()
    pv_meta, d_meta, q_meta = s["pv_meta"], s["density_meta"], s["seq_meta"]
    seeded = bool(pv_meta["seeded"] or d_meta["seeded"] or q_meta["seeded"])
    return current_config(
        eps_voc=pv_meta["eps_voc"], terms_per_doc=pv_meta["terms_per_doc"], vocab_size=pv_meta["vocab_size"],
        selection_rule=pv_meta["selection_rule"],
        vocabulary=pv_meta["vocabulary_spec"] if pv_meta["vocabulary_spec"] in BUILTIN_VOCABULARIES
        else "upload:" + str(s.get("vocab_upload_name") or "vocabulary"),
        # the upload's SHA-256 beside its file name (config.to_run_dict), so the bundle identifies the exact file
        vocabulary_sha256=None if pv_meta["vocabulary_spec"] in BUILTIN_VOCABULARIES
        else s.get("vocab_upload_sha256"),
        remove_stopwords=pv_meta["remove_stopwords"], junk_filter=pv_meta["junk_filter"],
        vocab_max_terms=pv_meta["vocab_max_terms"], method=d_meta["method"], density=d_meta["density"],
        length=d_meta["length"], eps_kde=d_meta["eps_kde"], bandwidth=d_meta["bandwidth_setting"],
        features=d_meta["features_setting"], embedding_model=d_meta["embedding_model"],
        per_class=q_meta["per_class"], temperature=q_meta["temperature"],
        seed=int(s["demo_seed"]) if seeded else None, test_fraction=float(s["split"].test_fraction),
        epsilon_cap=ledger().cap,
    )


def run_dir(*, create: bool = True) -> Path | None:
    """This session's current run folder (owner-only), created on first use."""
    s = ss()
    path = s.get("run_dir")
    if path and Path(path).is_dir():
        return Path(path)
    if not create:
        return None
    new = create_run_dir(runs_root(), s["session_token"])
    s["run_dir"] = str(new)
    s["run_dirs"].append(str(new))
    return new



# ============================================================================================ 6. LLM

def generation_secrets() -> list[str]:
    key = ss().get("api_key") or ""
    return [key] if key else []


def documents() -> list[dict[str, Any]]:
    from dpkps_core.llm import read_documents

    out = run_dir(create=False)
    return read_documents(out) if out else []


def failures() -> list[dict[str, Any]]:
    from dpkps_core.llm import read_failures

    out = run_dir(create=False)
    return read_failures(out) if out else []

