"""What is shown is current and true: which settings a result on screen was computed for, and whether they still
hold (issue "A privacy officer's walk" §3; docs/PRIVACY.md "Previews that steer choices").

A forecast answers "will this work?" for one public vocabulary V, one N, S, ε split and sampling method. Shown
after any of them changed, its verdict would be about settings the user no longer has; so every forecast shown
is either recomputed (the DP forecast is free post-processing of its kept release, ``studio.review.dp_forecast``)
or marked STALE with what changed (the exact forecast, which reads the true counts again only on request).
"""

from __future__ import annotations

from typing import Any

from dpkps_core.errors import DPKPSError
from studio import session
from studio.state import SessionState

#: Display order and names of the settings a forecast depends on (public choices only).
FORECAST_SETTINGS = ("V", "N", "S", "ε_voc", "ε_kde", "method")


def forecast_settings(state: SessionState) -> dict[str, Any]:
    """The current public settings a forecast depends on: V (which vocabulary and how it is cleaned), N, S, the
    ε split and the sampling method (docs/DESIGN.md §2.1, §2.2)."""
    cfg = session.current_config(state)
    vocabulary = (str(state.settings.vocabulary), str(state.uploads.vocab_upload_path or "") if state.settings.vocabulary == "upload"
                  else "", int(state.settings.vocab_max_terms or 0), bool(state.settings.remove_stopwords),
                  bool(state.settings.junk_filter))
    return {"V": vocabulary, "N": int(cfg.vocab_size), "S": int(cfg.terms_per_doc), "ε_voc": float(cfg.eps_voc),
            "ε_kde": float(cfg.eps_kde), "method": str(cfg.method)}


def stamp_forecast(state: SessionState, forecast: Any) -> None:
    """Remember the settings ``forecast`` was just computed for (call right after computing it)."""
    # with the forecast's ``id``, so that a forecast computed by any other path is never matched to another's stamp
    state.results.forecast_stamp = (id(forecast), forecast_settings(state))


def run_exact_forecast(state: SessionState) -> Any:
    """The exact forecast on the true counts (``studio.steps.run_forecast``: private, local — not covered by ε),
    stamped with the settings it is for."""
    from studio import steps

    f = steps.run_forecast(state)
    stamp_forecast(state, f)
    return f


def forecast_changes(state: SessionState, forecast: Any) -> list[str]:
    """Names of the settings (of :data:`FORECAST_SETTINGS`) that changed since ``forecast`` was computed; [] when
    it is current. N, S, ε and the method are read off the forecast itself; V from its stamp, or — for a forecast
    made without one — from the size of V it was computed on."""
    now = forecast_settings(state)
    made: dict[str, Any] = {"N": int(forecast.vocab_size), "S": int(forecast.terms_per_doc),
                            "ε_voc": float(forecast.eps_voc), "ε_kde": float(forecast.eps_kde),
                            "method": str(forecast.method)}
    stamp = state.results.forecast_stamp
    if stamp and stamp[0] == id(forecast):
        made["V"] = stamp[1]["V"]
    changed = [k for k in FORECAST_SETTINGS if k in made and made[k] != now[k]]
    if "V" not in made:
        try:
            size = len(session.public_vocabulary(state))
        except DPKPSError:  # no usable vocabulary now (e.g. an upload not given yet): V changed
            size = -1
        if size != int(forecast.public_vocabulary_size):
            changed.insert(0, "V")
    return changed

