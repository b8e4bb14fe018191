"""The app's settings' defaults, and the switches that set several at once (the DP-KPS paper's configuration, a new
corpus's fresh start). Their types and the object that holds them are ``studio.state.Settings``.

Pure: no Streamlit import; the functions that change settings take the session's settings object, so that they are
tested without a running app. The settings are PUBLIC choices; the one path from them to a
:class:`~dpkps_core.method.config.SamplingConfig` is ``studio.session.current_config`` (docs/ARCHITECTURE.md "One path for
a setting").
"""

from __future__ import annotations

from typing import Any, Mapping

from dpkps_core import audit
from dpkps_core.method.config import (APP_AUTO, APP_PLAIN, APP_ZERO_NONE, PAPER_SETTINGS, SamplingConfig,
                               setting_options, setting_value_type)
from dpkps_core.dp.ledger import DEFAULT_EPSILON_CAP
from dpkps_core.device import default_device_setting
from dpkps_core.dp.forecast import DEFAULT_FORECAST_EPSILON
from dpkps_core.embeddings import DEFAULT_MODEL
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE
from dpkps_core.llm.factory import DEFAULT_BACKEND
from dpkps_core.llm.prompts import DEFAULT_INCLUDE_LABEL
from dpkps_core.llm.repetition import DEFAULT_NO_REPEAT_NGRAM, DEFAULT_REPETITION_PENALTY
from dpkps_core.llm.openai_client import DEFAULT_OPENAI_MODEL
from dpkps_core.llm.settings import DEFAULT_DRAFTS
from studio import fast_mode

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


#: The manual value an "automatic" setting starts from when its box is unticked (:data:`APP_AUTO` settings).
AUTO_MANUAL_DEFAULTS = {"bandwidth": 0.3, "features": 2000}


def config_setting_defaults() -> dict[str, Any]:
    """The session keys of the settings the app holds as :class:`SamplingConfig` declares them (:data:`APP_PLAIN`,
    :data:`APP_AUTO`, :data:`APP_ZERO_NONE` in the field metadata), with the config's defaults: a new setting there is
    a new session key here, with no edit (issue 32 §4)."""
    d = SamplingConfig()
    out: dict[str, Any] = {}
    for name, option in setting_options().items():
        value = getattr(d, name)
        if option.app == APP_PLAIN:
            out[name] = value
        elif option.app == APP_ZERO_NONE:
            out[name] = value or 0
        elif option.app == APP_AUTO:
            out[f"{name}_auto"] = value is None
            out[name] = AUTO_MANUAL_DEFAULTS.get(name, value)
    return out


def settings_from_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`SamplingConfig` fields of the settings the app holds as the config declares them, read from the
    session's settings ``state`` (by name: ``studio.state.settings_dict``) and cast to the field's type (the settings the app derives itself — the corpus, the ε split,
    the cap, the seed — are ``studio.session``'s)."""
    out: dict[str, Any] = {}
    for name, option in setting_options().items():
        cast = setting_value_type(name)
        if option.app == APP_PLAIN:
            out[name] = cast(state[name])
        elif option.app == APP_ZERO_NONE:
            out[name] = cast(state[name]) or None
        elif option.app == APP_AUTO:
            out[name] = None if state[f"{name}_auto"] else cast(state[name])
    return out


def default_settings() -> dict[str, Any]:
    """Every user choice, as plain session keys (the first visit needs none of them changed): the config's own
    settings (:func:`config_setting_defaults`) and the app's."""
    d = SamplingConfig()
    fast = fast_mode()
    return {
        **config_setting_defaults(),
        # 1 corpus
        "corpus_source": "demo", "demo_spec": "demo:bbc", "text_column": None, "label_column": None,
        # 2 vocabulary & budget
        "vocabulary": "glove", "vocab_size": 200 if fast else d.vocab_size,
        "eps_total": float(d.eps_voc + d.eps_kde), "eps_voc_share": d.eps_voc / (d.eps_voc + d.eps_kde),
        "cap_enabled": True, "epsilon_cap": DEFAULT_EPSILON_CAP, "paper_settings": False,
        "seeded_demo": False, "demo_seed": 2024,
        "eps_forecast": DEFAULT_FORECAST_EPSILON,  # the DP forecast's ε (studio.forecasts.eps_forecast)
        # 5 sequences
        "per_class": 2 if fast else 20,
        # 6 LLM
        "backend": DEFAULT_BACKEND, "base_url": "", "llm_model": DEFAULT_OPENAI_MODEL, "api_key": "",
        "device": default_device_setting(), "llm_batch_size": DEFAULT_BATCH_SIZE, "local_model_path": "",
        "doc_type": "", "include_label": DEFAULT_INCLUDE_LABEL, "llm_drafts": DEFAULT_DRAFTS,
        "llm_no_repeat_ngram": DEFAULT_NO_REPEAT_NGRAM, "llm_repetition_penalty": DEFAULT_REPETITION_PENALTY, "max_tokens": 16 if fast else 200, "llm_temperature": 0.7,
        "n_documents": 2 if fast else 10, "price_per_1k": 0.0, "concurrency": 4, "few_shot": (),
        "few_shot_name": "",
        # 7 evaluation
        "eval_seeds": 1 if fast else 3, "projection_points": 60 if fast else 300,
        "sweep_eps_voc": [1.0, 5.0], "sweep_eps_kde": [2.0, 5.0, 10.0], "sweep_methods": ["independent"],
        "sweep_seeds": 1, "sweep_per_class": 20 if fast else 100,
        # 6 per method: the three methods' joint cost (6 + 6 + 6 − 3 for the shared Ṽ = 15) fits the default cap
        "compare_eps": 6.0, "compare_delta": 1e-6, "compare_per_class": 1 if fast else 2,
        "compare_max_tokens": 16 if fast else 48, "compare_methods": ["dpkps", "private-prediction", "augpe"],
    }


def audit_defaults() -> dict[str, Any]:
    """Page 9's settings (fast mode: a handful of trials so an AppTest takes seconds)."""
    d = audit.AuditSettings()
    fast = fast_mode()
    return {"audit_trials_auto": not fast, "audit_trials": 4 if fast else 60, "audit_time_budget": d.time_budget,
            "audit_vocabulary_trials": 40 if fast else 1000, "audit_density_trials": 8 if fast else 100,
            "audit_confidence": d.confidence,
            "audit_canaries": 1 if fast else d.canary_documents, "audit_canary_prefix_words": d.canary_prefix_words}


#: The app's choices that have no default of their own: the exact previews' switch (off), the cap's draft on page 2
#: (None: the cap itself), whether a run reserves its planned ε (None: decided at first use from the tenant,
#: ``studio.accounting.reserve_plan``) and the run page 8 shows (None: the current one).
UI_SETTINGS: dict[str, Any] = {"exact_previews": False, "cap_draft_enabled": None, "cap_draft_value": None,
                               "reserve_plan": None, "export_run": None}


#: The per-corpus choices a new corpus starts from their defaults (:func:`default_settings`): the method and ε split
#: chosen for one corpus (say the demo) are no choice for the next one. The cap, the noise source and the LLM's
#: connection settings are the user's, not the corpus's, and carry over.
CORPUS_SETTINGS = ("eps_total", "eps_voc_share", "paper_settings", "vocabulary", "vocab_max_terms", "terms_per_doc",
                   "vocab_size", "selection_rule", "remove_stopwords", "junk_filter", "method", "density", "length",
                   "bandwidth_auto", "bandwidth", "features_auto", "features", "per_class", "temperature",
                   "doc_type", "include_label", "few_shot", "few_shot_name")


def reset_corpus_settings(settings: Any) -> list[str]:
    """Put the per-corpus choices (:data:`CORPUS_SETTINGS`) of ``settings`` (``studio.state.Settings``) back to their
    defaults when another corpus is loaded; returns the names of those that had been changed (for a notice)."""
    defaults = default_settings()
    changed = [k for k in CORPUS_SETTINGS if k in defaults and getattr(settings, k) != defaults[k]]
    for k in CORPUS_SETTINGS:
        if k in defaults:
            setattr(settings, k, defaults[k])
    return changed


def apply_paper_settings(settings: Any, on: bool) -> None:
    """Switch the DP-KPS paper's configuration (:data:`dpkps_core.method.config.PAPER_SETTINGS`) of ``settings``
    (``studio.state.Settings``) on, or back to the defaults."""
    d = SamplingConfig()
    defaults = default_settings()
    mapping = {
        "remove_stopwords": PAPER_SETTINGS["remove_stopwords"], "junk_filter": PAPER_SETTINGS["junk_filter"],
        "vocab_max_terms": PAPER_SETTINGS["vocab_max_terms"] or 0, "density": PAPER_SETTINGS["density"],
        "selection_rule": PAPER_SETTINGS["selection_rule"], "vocab_size": PAPER_SETTINGS["vocab_size"],
        "terms_per_doc": PAPER_SETTINGS["terms_per_doc"],
    }
    if on:
        for k, v in mapping.items():
            setattr(settings, k, v)
        settings.bandwidth_auto, settings.bandwidth = False, float(PAPER_SETTINGS["bandwidth"])
        settings.features_auto, settings.features = False, int(PAPER_SETTINGS["features"])
    else:
        for k in mapping:
            setattr(settings, k, defaults[k])
        settings.bandwidth_auto, settings.features_auto = True, True
        settings.bandwidth, settings.features = defaults["bandwidth"], defaults["features"]
        settings.density = d.density
    settings.paper_settings = on


#: Corpus ids of the user's own corpora: an upload, or a file of the server's data folder (``studio.steps``).
USER_CORPUS_SOURCES = ("upload", "server")


def is_user_corpus(corpus_id: object) -> bool:
    """Whether ``corpus_id`` names the user's own corpus (an upload or a server file), not a demo."""
    return str(corpus_id or "").split(":", 1)[0] in USER_CORPUS_SOURCES
