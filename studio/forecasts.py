"""The forecasts that steer choices before ε is spent (docs/PRIVACY.md "Previews that steer choices"), on every page
that shows one: the DP forecast — a charged release of ε_forecast, kept in the session with the corpus, split,
vocabulary and S it was made for — and what is computed from it for free (the plan on page 2, the noise share of Ṽ
on page 3, the method outlook on page 4, the ε sweep on page 7); the EXACT forecast and the exact method outlook
on the true counts (private, local — not covered by ε: only behind the exact-preview switch); and whether a forecast
on screen is still current.

What is shown is current and true (issue "A privacy officer's walk" §3): a forecast answers "will this work?" for
one public vocabulary V, one N, S, ε split and sampling method. Shown after any of them changed, its verdict would
be about settings the user no longer has; so every forecast shown is either recomputed (the DP forecast is free
post-processing of its kept release, :func:`dp_forecast`) or marked STALE with what changed
(:func:`forecast_changes`: the exact forecast, which reads the true counts again only on request).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pandas as pd

from dpkps_core.errors import DPKPSError, ParameterError
from studio import accounting, jobs, ledger_view, page_ref, resources, run_view, session
from studio.review import sig3
from studio.state import SessionState

#: Display order and names of the settings a forecast depends on (public choices only).
FORECAST_SETTINGS = ("V", "N", "S", "ε_voc", "ε_kde", "method")


def forecast_settings(state: SessionState) -> dict[str, Any]:
    """The current public settings a forecast depends on: V (which vocabulary and how it is cleaned), N, S, the
    ε split and the sampling method (docs/DESIGN.md §2.1, §2.2)."""
    cfg = session.current_config(state)
    vocabulary = (str(state.settings.vocabulary),
                  str(state.uploads.vocab_upload_path or "") if state.settings.vocabulary == "upload"
                  else "", int(state.settings.vocab_max_terms or 0), bool(state.settings.remove_stopwords),
                  bool(state.settings.junk_filter))
    return {"V": vocabulary, "N": int(cfg.vocab_size), "S": int(cfg.terms_per_doc), "ε_voc": float(cfg.eps_voc),
            "ε_kde": float(cfg.eps_kde), "method": str(cfg.method)}


def stamp_forecast(state: SessionState, forecast: Any) -> None:
    """Remember the settings ``forecast`` was just computed for (call right after computing it)."""
    # with the forecast's ``id``, so that a forecast computed by any other path is never matched to another's stamp
    state.results.forecast_stamp = (id(forecast), forecast_settings(state))


def run_exact_forecast(state: SessionState) -> Any:
    """The exact forecast on the true counts (:func:`run_forecast`: private, local — not covered by ε), stamped with
    the settings it is for."""
    f = run_forecast(state)
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


def run_forecast(state: SessionState) -> Any:
    """"Will this work?" (dpkps_core.evaluation.forecast) on the training part's TRUE counts — private."""
    from dpkps_core import evaluation

    cfg = session.current_config(state)
    vocab = session.public_vocabulary(state)
    counts = session.term_counts(state, vocab, cfg.terms_per_doc)
    train = session.train_part(state)
    f = evaluation.forecast(train.texts, train.labels, vocab, cfg, counts=counts)
    state.results.forecast = f
    return f


def method_outlook(state: SessionState) -> list[dict[str, Any]]:
    """Per sampling method, the EXACT forecast's word on the densities at this corpus size and ε_kde (private,
    local — not covered by ε; shown only behind the exact-preview switch): whether each class's density stands
    above its noise, or the method is expected near chance.
    Memoised in the session for the current settings."""
    from dpkps_core.evaluation.forecast_exact import forecast
    from dpkps_core.method.sampling import SAMPLING_METHODS

    cfg = session.current_config(state)
    key = (state.loaded.corpus_id, state.loaded.split_key, cfg.eps_voc, cfg.eps_kde, cfg.terms_per_doc, cfg.vocab_size,
           cfg.length, cfg.density, cfg.features, cfg.bandwidth, state.settings.vocabulary,
           state.settings.vocab_max_terms)
    memo = state.results.method_outlook
    if memo and memo[0] == key:
        return memo[1]
    vocab = session.public_vocabulary(state)
    counts = session.term_counts(state, vocab, cfg.terms_per_doc)
    train = session.train_part(state)
    out = []
    for method in SAMPLING_METHODS:
        # an iterative method never keeps the histogram density (SamplingConfig.replace falls back to auto: RFF)
        f = forecast(train.texts, train.labels, vocab, cfg.replace(method=method), counts=counts, reps=2)
        weak = sum(1 for v in f.kde.values() if v["snr"] < 1)
        worst = min((v["snr"] for v in f.kde.values()), default=0.0)
        out.append({"method": method, "density": f.density, "near_chance": not f.kde_usable,
                    "weak_classes": weak, "classes": len(f.kde), "worst_snr": worst,
                    "suggested_eps_kde": f.suggested_eps_kde})
    state.results.method_outlook = (key, out)
    return out


def eps_forecast(state: SessionState) -> float:
    """The ε the DP forecast will spend (a public setting shown in the plan and in the total)."""
    return float(state.settings.eps_forecast)


def _forecast_key(state: SessionState) -> tuple:
    cfg = session.current_config(state)
    return (state.loaded.corpus_id, state.loaded.split_key, state.settings.vocabulary, state.settings.vocab_max_terms,
            state.settings.remove_stopwords, state.settings.junk_filter, cfg.terms_per_doc,
            tuple(state.loaded.corpus.classes)
            if state.loaded.corpus is not None else ())


def run_dp_forecast(state: SessionState) -> Any:
    """The default "Will this work?": releases the forecast statistics with ε_forecast, charged to the corpus's
    ledger before any noise (``dpkps_core.evaluation.forecast_dp.release_forecast``), and keeps the release.

    A streamed corpus releases through the same core function in a background job (its pass over the file takes
    minutes): returns the :class:`~studio.jobs.Job` — per-chunk progress and a Cancel on page 2, the release kept
    once the job ended (``studio.steps.finish_step_jobs``)."""
    from dpkps_core.dp.release import ReleaseContext
    from dpkps_core.evaluation.forecast_dp import release_forecast
    from studio.steps import refuse_while_stepping
    from studio.streamed import Metered, is_streamed

    refuse_while_stepping(state)  # one DP step at a time: a streamed step still reading the corpus blocks this one
    cfg = session.current_config(state)  # built and checked once (build_sampling_config)
    led = ledger_view.ledger(state)
    before = accounting.recorded_event_ids(led)
    train, vocab, nz, eps = session.train_part(state), session.public_vocabulary(state), session.noise(state), eps_forecast(state)
    by_person, key = bool(session.person_column(state)), _forecast_key(state)

    def keep(stats: Any) -> Any:
        accounting.remember_forecast_events(state, led, before)  # its ε goes into the total of the run it steers (§4)
        # the DP forecast release, kept with the corpus, split, vocabulary and S it was made for
        state.results.dp_forecast_release = (key, stats)
        return stats

    if is_streamed(state):
        def work(job: jobs.Job) -> Any:
            assert job.meter is not None
            return release_forecast(Metered(train, job.meter), vocab, context=ReleaseContext(noise=nz, ledger=led),
                                    epsilon=eps, terms_per_doc=cfg.terms_per_doc, by_person=by_person,
                                    progress=job.meter.phase)

        def finished(job: jobs.Job) -> None:  # in a script run: a cancelled or failed release stays charged
            if job.result is not None and state.loaded.corpus_id == key[0]:
                keep(job.result)

        return jobs.start_job(state, "forecast", "DP forecast", work, on_finish=finished, meter=True)
    return keep(release_forecast(train, vocab, context=ReleaseContext(noise=nz, ledger=led), epsilon=eps,
                                 terms_per_doc=cfg.terms_per_doc, by_person=by_person))


def dp_forecast_release(state: SessionState) -> Any:
    """The DP forecast release for the current corpus, split, vocabulary and S, or None."""
    kept = state.results.dp_forecast_release
    if not kept or state.loaded.corpus is None or kept[0] != _forecast_key(state):
        return None
    return kept[1]


def dp_forecast(state: SessionState, method: str | None = None, reps: int = 5) -> Any:
    """The DP forecast for the current settings: free post-processing of the kept release (None without one)."""
    from dpkps_core.evaluation.forecast_dp import forecast_from_release

    stats = dp_forecast_release(state)
    if stats is None:
        return None
    cfg = session.current_config(state)
    # an iterative method never keeps the histogram density (SamplingConfig.replace falls back to auto: RFF)
    return forecast_from_release(stats, cfg.replace(method=method or cfg.method), reps=reps)


def dp_sweep(state: SessionState) -> Any:
    """The DP sweep table (post-processing of the kept DP forecast release; None without one)."""
    from dpkps_core.evaluation.sweep import dp_forecast_grid

    stats = dp_forecast_release(state)
    if stats is None:
        return None
    cfg = session.current_config(state)
    # the table forecasts the method's default density (auto), whatever density is set
    df = dp_forecast_grid(stats, cfg.replace(density="auto"), eps_voc_grid=(0.5, 1.0, 2.0, 5.0),
                          eps_kde_grid=(1.0, 2.0, 5.0, 10.0), methods=(cfg.method,), reps=2)
    return pd.DataFrame({"Method": df["method"], "ε_voc": df["eps_voc"], "ε_kde": df["eps_kde"],
                         "Real terms expected in Ṽ": df["expected_real_terms"],
                         "Noise share of Ṽ": [sig3(v) for v in df["expected_noise_share"]],
                         "Weakest class signal/noise": [sig3(v) for v in df["worst_class_snr"]],
                         "Usable?": ["yes" if u else "no" for u in df["usable"]]})


def dp_method_outlook(state: SessionState) -> list[dict[str, Any]]:
    """:func:`method_outlook` from the DP forecast release (post-processing: covered by ε); [] without one."""
    from dpkps_core.method.sampling import SAMPLING_METHODS

    if dp_forecast_release(state) is None:
        return []
    out = []
    for method in SAMPLING_METHODS:
        f = dp_forecast(state, method, reps=2)
        weak = sum(1 for v in f.kde.values() if v["snr"] < 1)
        worst = min((v["snr"] for v in f.kde.values()), default=0.0)
        out.append({"method": method, "density": f.density, "near_chance": not f.kde_usable,
                    "weak_classes": weak, "classes": len(f.kde), "worst_snr": worst,
                    "suggested_eps_kde": f.suggested_eps_kde})
    return out


def dp_vocabulary_noise_share(state: SessionState) -> dict[str, float]:
    """How much of the built Ṽ is expected to be pure noise, from DP quantities only (Ṽ's noisy counts, ε_voc, S,
    |V|; with a DP forecast release, its count of terms in use narrows |V| to the terms no document uses)."""
    from dpkps_core.evaluation.forecast_outlook import vocabulary_noise_share

    pv = run_view.private_vocabulary(state)
    if pv is None:
        raise ParameterError(f"Build the private vocabulary first ({page_ref('private-vocabulary')}).")
    stats = dp_forecast_release(state)
    zero = None
    if stats is not None and stats.terms_per_doc == pv.terms_per_doc \
            and stats.public_vocabulary_size == pv.public_vocabulary_size:
        zero = pv.public_vocabulary_size - float(stats.smoothed_curve()[0])
    return vocabulary_noise_share(pv, zero_terms=zero)


def outlook_sentence(row: Mapping[str, Any]) -> str:
    """One plain sentence for a method's outlook."""
    if row["near_chance"]:
        tip = (f" An ε_kde of about {row['suggested_eps_kde']:.3g} would be needed."
               if row.get("suggested_eps_kde") else "")
        return (f"**{row['method']}** is expected to score **near chance** at this corpus size: its density noise "
                f"outweighs the signal in {row['weak_classes']} of {row['classes']} classes (weakest signal/noise "
                f"{row['worst_snr']:.2f}).{tip}")
    return (f"**{row['method']}**: every class's density stands above its noise (weakest signal/noise "
            f"{row['worst_snr']:.1f}).")


def start_method_preview(state: SessionState, methods: Sequence[str], per_class: int) -> Any:
    """The free comparison before spending ε_kde: the local no-LLM check of each method at the current ε on the
    training part, scored on the held-out part (seeded local experiment: PRIVATE, nothing released or charged)."""
    from dpkps_core import evaluation

    if not methods:
        raise ParameterError("Pick at least one method to compare.")
    c = session.corpus(state)
    if c is None:
        raise ParameterError(f"Load a corpus first ({page_ref('corpus')}).")
    base = session.current_config(state, epsilon_cap=None, seed=None)
    vocab = session.public_vocabulary(state)
    emb = resources.embedder(base.embedding_model)
    cache = resources.embedding_cache()
    sp = session.split(state)

    def work(job: Any) -> Any:
        ev = evaluation.NoLLMEvaluator(c, config=base, vocabulary=vocab, embedder=emb, cache=cache, split=sp)
        return evaluation.run_sweep(c, config=base, vocabulary=vocab, embedder=emb, eps_voc_grid=[base.eps_voc],
                                    eps_kde_grid=[base.eps_kde], methods=list(methods), seeds=1,
                                    per_class=int(per_class), progress=job.report, evaluator=ev)

    return jobs.start_job(state, "method_preview", "method preview", work)
