"""What the app shows must be right, readable and honest: table formatting, method outlook before
spending ε, run history, the non-document share, compare bookkeeping and the memorisation check.

Streamlit-side glue only: every number comes from ``dpkps_core`` (forecast, no-LLM sweep, risk, memorisation);
this module formats it, keeps it in the session (never in a global cache) and starts the background jobs.
"""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from dpkps_core.errors import ParameterError
from dpkps_core.progress import format_duration
from dpkps_core.records.runfolder import RunFolder, iter_jsonl
from studio import accounting, jobs, ledger_view, page_ref, resources, run_view, session
from studio.state import SessionState

#: Human names of the evaluation metrics (docs/ARCHITECTURE.md).
METRIC_NAMES = {
    "no_llm_accuracy": "No-LLM check: DP keyphrase sequences",
    "real_keyphrase_baseline_accuracy": "Real keyphrase baseline (upper bound)",
    "synthetic_accuracy": "Synthetic documents",
    "real_baseline_accuracy": "Real documents, same number",
    "synthetic_accuracy_no_coral": "Synthetic documents, torch head",
    "synthetic_accuracy_coral": "Synthetic documents + Deep CORAL",
}
#: Fewer training documents per class than this: the accuracy is too small a sample to judge a method by.
MIN_PER_CLASS_TO_JUDGE = 10


# ------------------------------------------------------------------------------------------- tables (§6)

def sig3(x: Any) -> float | None:
    """``x`` rounded to 3 significant digits (None for a missing or non-finite value)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    return float(f"{v:.3g}")


def judge_note(n_train: int, n_classes: int) -> str:
    """'' when ``n_train`` documents are enough to read an accuracy, else a short warning — in the words every
    such warning of page 7 uses (:func:`too_few_sentence`): fewer than MIN_PER_CLASS_TO_JUDGE per class."""
    need = MIN_PER_CLASS_TO_JUDGE * max(int(n_classes), 1)
    if int(n_train) < need:
        return f"⚠ too few to judge: fewer than {MIN_PER_CLASS_TO_JUDGE} per class ({int(n_train):,} < {need:,})"
    return ""


def too_few_sentence(what: str) -> str:
    """The page's one wording for rows resting on too few documents (the table's note says the same)."""
    return (f"Too few to judge: {what} — fewer than {MIN_PER_CLASS_TO_JUDGE} training documents per class, so the "
            "accuracy says little.")


def sd_or_none(sd: Any, seeds: int) -> float | None:
    """The sample sd over seeds, or None (shown blank) with one seed: one run has no spread, and "± 0.00" would
    claim a precision it does not have."""
    return sig3(sd) if int(seeds) > 1 else None


def interval_text(interval: Any) -> str:
    """``0.871–0.944`` for an accuracy's bootstrap interval over the test documents ('' when there is none, e.g.
    an evaluation stored before intervals were kept)."""
    if interval is None:
        return ""
    return f"{interval.low:.3f}–{interval.high:.3f}"


def ratio_sentence(ratio: Any) -> str:
    """The page's one sentence on synthetic / real accuracy and its paired interval ('' without one)."""
    if ratio is None:
        return ""
    return (f"**Synthetic / real accuracy: {ratio.estimate:.2f}** ({ratio.level_text} interval "
            f"{ratio.low:.2f}–{ratio.high:.2f}; paired bootstrap over the {ratio.n_test:,} test documents). The "
            "interval is what the size of the test set allows one to say; a new generation of documents varies "
            "on top of it.")


def evaluation_table(metrics: Mapping[str, Any], n_classes: int) -> pd.DataFrame:
    """The evaluation's metrics with human names, 3 significant digits, the bootstrap interval over the test
    documents and the training documents of each (the ± sd column is blank with one seed)."""
    rows = []
    for key, m in metrics.items():
        rows.append({"Classifier trained on": METRIC_NAMES.get(key, key.replace("_", " ")),
                     "Accuracy": sig3(m.accuracy_mean), "± sd": sd_or_none(m.accuracy_sd, len(m.scores)),
                     "95 % interval (test documents)": interval_text(getattr(m, "interval", None)),
                     "Seeds": len(m.scores),
                     "Macro-F1": sig3(m.macro_f1_mean), "Training documents": int(m.n_train),
                     "Enough to judge?": judge_note(m.n_train, n_classes) or "yes"})
    return pd.DataFrame(rows)


def _row_interval(row: Mapping[str, Any]) -> str:
    """A comparison row's accuracy interval over the test documents ('' for rows kept from before intervals)."""
    low, high = sig3(row.get("accuracy_low")), sig3(row.get("accuracy_high"))
    return "" if low is None or high is None else f"{row['accuracy_low']:.3f}–{row['accuracy_high']:.3f}"


def compare_table(rows: Sequence[Mapping[str, Any]], n_classes: int) -> tuple[pd.DataFrame, list[str]]:
    """The comparison with human names, 3 significant digits and few, narrow columns; the long notes come back
    separately (one line per method) so the table fits the page."""
    out, notes = [], []
    for r in rows:
        docs = int(r.get("documents") or 0)
        out.append({"Method": r.get("label") or r.get("method"), "ε": sig3(r.get("epsilon")),
                    "δ": r.get("delta") or 0.0, "Training documents": docs, "Accuracy": sig3(r.get("accuracy")),
                    "± sd": sd_or_none(r.get("accuracy_sd"), int(r.get("seeds") or 1)),
                    "95 % interval": _row_interval(r),
                    "Macro-F1": sig3(r.get("macro_f1")),
                    "LLM calls": int(r.get("llm_calls") or 0),
                    "Minutes": sig3((r.get("wall_seconds") or 0.0) / 60.0),
                    "Enough to judge?": judge_note(docs, n_classes) or "yes"})
        if r.get("notes"):
            notes.append(f"**{r.get('label') or r.get('method')}** (ε = {sig3(r.get('epsilon'))}): {r['notes']}")
    return pd.DataFrame(out), notes


# ------------------------------------------------------------------------------------------- compare (§9)

def keep_compare_rows(state: SessionState, job: Any) -> list[dict[str, Any]]:
    """Merge a finished comparison's rows into the session's list (earlier rows are kept; a method re-run at the
    same ε, δ and size replaces its own row) and return the list, newest last."""
    rows: list[dict[str, Any]] = state.results.compare_rows
    if job is not None and getattr(job, "result", None) is not None and not getattr(job, "rows_kept", False):
        info = getattr(job.result, "info", {}) or {}
        for r in job.result.table():
            r = {**r, "per_class": info.get("per_class"), "seeds": len(info.get("seeds") or ()),
                 "finished": time.strftime("%H:%M:%S")}
            key = (r.get("method"), r.get("epsilon"), r.get("delta"), r.get("per_class"))
            rows[:] = [x for x in rows if (x.get("method"), x.get("epsilon"), x.get("delta"), x.get("per_class"))
                       != key]
            rows.append(r)
        job.rows_kept = True  # merged once (an id() could be reused by a later job)
    return rows


def compare_plan(methods: Sequence[str], *, n_classes: int, per_class: int, max_tokens: int,
                 epochs: int, gpu: bool) -> pd.DataFrame:
    """Per SELECTED method: LLM prompts and a rough time, before starting (offline/local model assumptions)."""
    from dpkps_core.baselines.compare_settings import COMPARE_PP_DEFAULTS, METHOD_LABELS

    docs = n_classes * per_class
    tps = 60.0 if gpu else 17.0  # tokens per second of the small local model (llm.backends' own assumption)
    per_call = 0.2 + max_tokens / tps
    rows = []
    for m in methods:
        if m == "dpkps":
            prompts, secs = docs, docs * per_call
        elif m == "augpe":
            prompts = docs * epochs
            secs = prompts * per_call
        else:  # private prediction: every token is one forward pass over a batch of private prompts
            prompts = docs * COMPARE_PP_DEFAULTS["batch_size"]
            secs = docs * max_tokens * (1 + COMPARE_PP_DEFAULTS["batch_size"] / 4) / tps
        rows.append({"Method": METHOD_LABELS.get(m, m), "Synthetic documents": docs, "LLM prompts": prompts,
                     "Rough time": _duration(secs)})
    return pd.DataFrame(rows)


def _duration(seconds: float) -> str:
    return format_duration(max(seconds, 1.0), approximate=True)


# ------------------------------------------------------------------------------------------- method outlook (§2)

def method_outlook(state: SessionState) -> list[dict[str, Any]]:
    """Per sampling method, the EXACT forecast's word on the densities at this corpus size and ε_kde (private,
    local — not covered by ε; shown only behind the exact-preview switch): whether each class's density stands
    above its noise, or the method is expected near chance.
    Memoised in the session for the current settings."""
    from dpkps_core.evaluation.forecast_exact import forecast
    from dpkps_core.method.sampling import SAMPLING_METHODS

    cfg = session.current_config(state)
    key = (state.loaded.corpus_id, state.loaded.split_key, cfg.eps_voc, cfg.eps_kde, cfg.terms_per_doc, cfg.vocab_size,
           cfg.length, cfg.density, cfg.features, cfg.bandwidth, state.settings.vocabulary, state.settings.vocab_max_terms)
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


# ------------------------------------------------------------------------------------------- DP forecast (default)

def eps_forecast(state: SessionState) -> float:
    """The ε the DP forecast will spend (a public setting shown in the plan and in the total)."""
    return float(state.settings.eps_forecast)


def _forecast_key(state: SessionState) -> tuple:
    cfg = session.current_config(state)
    return (state.loaded.corpus_id, state.loaded.split_key, state.settings.vocabulary, state.settings.vocab_max_terms,
            state.settings.remove_stopwords, state.settings.junk_filter, cfg.terms_per_doc, tuple(state.loaded.corpus.classes)
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


# ------------------------------------------------------------------------------------------- runs (§4)

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


# ------------------------------------------------------------------------------------------- non-documents (§5)

def non_document_share(documents: Sequence[Any], failures: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(items that finally failed as non-documents, items attempted: written + failed)."""
    from dpkps_core.llm.quality import is_non_document_failure

    bad = sum(1 for f in failures if is_non_document_failure(f.get("error", "")))
    return bad, len(documents) + len(failures)


# ------------------------------------------------------------------------------------------- memorisation (§11)

def start_memorisation(state: SessionState, *, by_embedding: bool) -> Any:
    """The local memorisation check on this run's documents against the REAL training documents (PRIVATE)."""
    from dpkps_core.embeddings import embed_texts
    from dpkps_core.evaluation.memorisation import memorisation_check

    docs = session.documents(state)
    if not docs:
        raise ParameterError(f"Write some synthetic documents first ({page_ref('generate')}).")
    train = session.train_part(state)
    if len(train) == 0:
        raise ParameterError("There are no training documents to compare with.")
    emb = session.memo_embedder(state, (run_view.density_meta(state) or {}).get("embedding_model") or state.settings.embedding_model,
                                state.settings.device) if by_embedding else None
    syn_texts = [d["text"] for d in docs]
    real_texts = list(train.texts)

    def work(job: Any) -> Any:
        syn_emb = real_emb = None
        if emb is not None:
            job.report(0.05, f"embedding {len(real_texts):,} real training documents (in memory only)")
            real_emb = embed_texts(real_texts, emb, progress=lambda f, m: job.report(0.05 + 0.8 * f, m))
            syn_emb = embed_texts(syn_texts, emb)
        job.report(0.9, "comparing long word sequences")
        rows = memorisation_check(syn_texts, real_texts, synthetic_embeddings=syn_emb, real_embeddings=real_emb)
        job.report(1.0, "memorisation check done")
        return {"rows": rows, "documents": docs, "real_texts": real_texts}

    return jobs.start_job(state, "memorisation", "memorisation check", work)


def memorisation_frame(result: Mapping[str, Any], excerpt: int = 160) -> pd.DataFrame:
    """One row per synthetic document: flagged or not, the longest shared run, the nearest real documents
    (excerpts: PRIVATE, for the data owner only)."""
    docs, real = result["documents"], result["real_texts"]
    rows = []
    for r in result["rows"]:
        d = docs[r.synthetic_index]
        near = r.nearest_by_overlap if r.nearest_by_overlap is not None else r.nearest_by_embedding
        rows.append({"Reproduces real text?": "⚠ yes" if r.flagged else "no", "Synthetic id": d["id"],
                     "Longest shared run (words)": r.longest_shared_words,
                     "Shared 8-word sequences": f"{r.shared_ngram_share:.0%}",
                     "Cosine to nearest real": sig3(r.similarity) if r.similarity is not None else None,
                     "Shared text": r.shared_text[:excerpt],
                     "Nearest real document (private)": real[near][:excerpt] if near is not None else ""})
    df = pd.DataFrame(rows)
    return df.sort_values("Longest shared run (words)", ascending=False, kind="stable") if len(df) else df
