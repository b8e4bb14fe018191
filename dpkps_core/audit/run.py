"""The audit itself: :func:`run_audit` chains the stages of :mod:`.stages` (D and its neighbours built from the RAW
rows, the vocabulary, density and release stages, the deterministic sensitivity check) and bounds every event under
one Bonferroni correction (see the package docstring)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable, Mapping

import numpy as np

from dpkps_core.audit.raw import RawTable
from dpkps_core.audit.report import AuditResult
from dpkps_core.audit.settings import MIN_TRIALS, AuditSettings, Cancel, sampler_note
from dpkps_core.audit.stages import (
    PAIRS,
    SIDES,
    STAGES,
    STATISTIC_LABELS,
    AuditContext,
    DensityStage,
    Neighbours,
    ReleaseStage,
    VocabularyStage,
    build_neighbours,
    density_stage,
    loading_differences,
    release_stage,
    sensitivity_check,
    vocabulary_stage,
)
from dpkps_core.audit.sums import Contributions, training_contributions
from dpkps_core.audit.statistics import (
    VIOLATION,
    _event_hits,
    choose_event,
    clopper_pearson,
    epsilon_lower_bound,
    max_certifiable_epsilon,
    verdict_for,
    verdict_kind,
)
from dpkps_core.audit.trials import _exposure_summary, _Runner
from dpkps_core.embeddings import MemoEmbedder
from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.errors import ParameterError
from dpkps_core.progress import Progress
from dpkps_core.method.vocabulary import PublicVocabulary


def run_audit(
    corpus: Corpus | RawTable, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Any,
    settings: AuditSettings | None = None, progress: Progress | None = None, cancel: Cancel | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
) -> AuditResult:
    """Audit the release path on ``corpus`` with ``config`` (docs/PRIVACY.md "Empirical audit"; see the package docstring).

    ``corpus`` is best the :class:`~dpkps_core.audit.raw.RawTable` of the file as it is on disk
    (:func:`~dpkps_core.audit.raw.raw_table_for` / :func:`~dpkps_core.audit.raw.read_raw_table`): D, D⁻ (one raw
    row removed, or every row of one person under the person unit) and D⁺ (one canary row, or a canary person
    with several rows) are then built on the raw rows and each is loaded through the public loader (docs/DESIGN.md §2.0).
    A loaded :class:`~dpkps_core.corpus.Corpus` is turned into rows of its documents
    (:meth:`RawTable.from_corpus`), which still go through the loader.

    Three stages share one Bonferroni correction, so every bound holds at the stated confidence together:
    the *vocabulary stage* (step 1's mechanism, :func:`dpkps_core.method.pipeline.build_private_vocabulary`, on each
    neighbour's training counts, against ε_voc), the *density stage* (:func:`dpkps_core.method.pipeline.build_density` + sampling on a fixed Ṽ,
    against ε_kde) and the *release stage* (the whole :func:`dpkps_core.method.pipeline.run_sampling`, against ε). Their
    statistics are weighted by the neighbours' differences in the release path's own contributions
    (:func:`dpkps_core.method.pipeline.term_counts` and :mod:`dpkps_core.dp.contributions`, per person under the person
    unit): D's training part is read once, each neighbour's statistics are D's minus or plus its changed units'
    contributions (:mod:`dpkps_core.audit.sums`). Every trial uses a fresh in-memory
    :class:`~dpkps_core.dp.ledger.PrivacyLedger`.

    ``progress(fraction, message)`` is called after every trial; ``cancel.is_set()`` stops after the trial in
    flight (finished rounds are analysed when there are at least 4); ``on_plan`` receives the measured time per
    round and the number of trials before the long part starts."""
    settings = (settings or AuditSettings()).validate()
    config = dataclasses.replace(config)
    config.validate()
    raw = corpus if isinstance(corpus, RawTable) else RawTable.from_corpus(corpus, config)
    if config.person_column and not raw.person_column:
        raise ParameterError(f"The unit of privacy is a person (column '{config.person_column}'), but the audited "
                             "rows have no person column; load the corpus with its person column.")
    started = time.perf_counter()
    memory = MemoEmbedder(embedder)
    ctx = AuditContext(config, settings, raw, vocabulary, memory, _Runner(config, vocabulary, memory, settings),
                       np.random.default_rng(settings.seed), progress or (lambda f, m: None), cancel, started)
    nbs = build_neighbours(ctx)
    moved, changed, probes = loading_differences(ctx, nbs)
    contributions = training_contributions(ctx, nbs)
    t_round0 = time.perf_counter() - started
    voc = vocabulary_stage(ctx, nbs, contributions)
    t_vocab = time.perf_counter() - started - t_round0
    dens = density_stage(ctx, nbs, contributions)
    t_density = time.perf_counter() - started - t_round0 - t_vocab
    sensitivity, exceeded = sensitivity_check(ctx, contributions.counts, voc, dens)
    rel = release_stage(ctx, nbs, vocabulary_trials=voc.planned, on_plan=on_plan)
    timings = {"round_1": round(t_round0, 1), "vocabulary_stage": round(t_vocab, 1),
               "density_stage": round(t_density, 1),
               "release_stage": round(time.perf_counter() - started - t_round0 - t_vocab - t_density, 1)}
    analysis = _analyse(ctx, nbs, voc, dens, contributions.weights)
    violation, verdict = _verdict(analysis, probes, changed, exceeded, settings.confidence)
    exposure = None
    if nbs.exposure is not None:
        n_voc, n_dens = analysis.voc_rounds, analysis.dens_rounds
        exposure = _exposure_summary(nbs.exposure_canaries, nbs.exposure_planted,
                                     with_vocabulary=voc.releases["D+k"][:n_voc],
                                     without_vocabulary=voc.releases["D"][:n_voc],
                                     with_sequences=dens.exposure["D+k"][:n_dens],
                                     without_sequences=dens.exposure["D"][:n_dens])
        # [Canary]: how many canaries read like the corpus (an in-distribution prefix, never reported itself)
        exposure.update(prefix_words=settings.canary_prefix_words, canaries_with_prefix=nbs.exposure.prefixed)
    info = _info(ctx, nbs, dens, rel, analysis, timings=timings,
                 checks={"sensitivity_check": sensitivity, "loader_probes": probes,
                         "neighbour_statistics": _statistics_note(contributions)}, moved=moved, changed=changed)
    warnings = _warnings(ctx, nbs, moved, changed)
    if warnings:
        info["warnings"] = warnings
    kind = VIOLATION if violation else verdict_kind(analysis.lower, analysis.claimed, analysis.certifiable)
    return AuditResult(analysis.claimed, analysis.lower, settings.confidence, violation, verdict, analysis.events,
                       exposure, info, kind=kind)


def _statistics_note(contributions: Contributions) -> dict[str, Any]:
    """How the neighbours' statistics were computed (issue 31 §4): D's training part read once, each neighbour's
    statistics D's minus or plus the contributions of the documents of its changed units (their number here)."""
    return {"method": "D's training part counted and matched once; each neighbour's vocabulary histogram, "
                      "keyphrases and keyphrase weights are D's minus or plus its changed units' own (every "
                      "statistic is a sum over units), each by the release path's own function; the trials run the "
                      "release's noise steps on them",
            "documents_of_changed_units": {name: change.documents for name, change in contributions.changes.items()
                                           if name != "D"}}


@dataclasses.dataclass
class _Analysis:
    """The trials analysed: complete rounds per stage, every event, the Bonferroni correction and the bounds."""

    claimed: float
    rounds: int
    voc_rounds: int
    dens_rounds: int
    events: list[dict[str, Any]]
    bonferroni_events: int
    alpha: float
    stage_bound: dict[str, float]
    stage_claim: dict[str, float]
    stage_violation: dict[str, bool]
    lower: float
    certifiable: float


def _stage_values(nbs: Neighbours, voc: VocabularyStage, dens: DensityStage, weights: Mapping[str, Any],
                  rounds: tuple[int, int, int]
                  ) -> dict[tuple[str, str], tuple[dict[str, np.ndarray], dict[str, np.ndarray], Mapping[Any, float]]]:
    """Per stage and pair: the statistics of both neighbours' trials, and the weights they were computed with."""
    n_rel, n_voc, n_dens = rounds
    values: dict[tuple[str, str], tuple[dict[str, np.ndarray], dict[str, np.ndarray], Mapping[Any, float]]] = {}
    for stage, rels in (("vocabulary", {k: v[:n_voc] for k, v in voc.releases.items() if k != "D+k"}),
                        ("release", {nb.name: nb.releases[:n_rel] for nb in nbs.release_stage})):
        for pair in PAIRS:
            a_name, b_name = SIDES[pair]
            sa = [r.statistics(weights[pair]) for r in rels[a_name]]
            sb = [r.statistics(weights[pair]) for r in rels[b_name]]
            values[(stage, pair)] = ({st: np.array([x[st] for x in sa]) for st in STAGES[stage][0]},
                                     {st: np.array([x[st] for x in sb]) for st in STAGES[stage][0]}, weights[pair])
    for pair in PAIRS:
        a_name, b_name = SIDES[pair]
        values[("density", pair)] = (
            {"class_sampled_frequency": np.array([x[pair] for x in dens.values[a_name][:n_dens]])},
            {"class_sampled_frequency": np.array([x[pair] for x in dens.values[b_name][:n_dens]])},
            dens.weights[pair])
    return values


def _analyse(ctx: AuditContext, nbs: Neighbours, voc: VocabularyStage, dens: DensityStage,
             weights: Mapping[str, Any]) -> _Analysis:
    """Events per stage, pair and statistic, under one Bonferroni correction over all of them."""
    config, settings = ctx.config, ctx.settings
    rounds = min(len(nb.releases) for nb in nbs.release_stage)
    voc_rounds = min(len(v) for v in voc.releases.values())
    dens_rounds = min(len(v) for v in dens.values.values())
    if min(rounds, voc_rounds, dens_rounds) < MIN_TRIALS:
        raise ParameterError(f"The audit was stopped after {min(rounds, voc_rounds, dens_rounds)} complete round(s); "
                             f"it needs at least {MIN_TRIALS} trials per neighbour to say anything.")
    ctx.report(1.0, "analysing the trials")
    values = _stage_values(nbs, voc, dens, weights, (rounds, voc_rounds, dens_rounds))
    m = max(1, sum(len(STAGES[stage][0]) for (stage, pair), v in values.items() if v[2]))
    alpha = (1.0 - settings.confidence) / (2 * m)   # two one-sided CP bounds per event
    events: list[dict[str, Any]] = []
    for stage in STAGES:
        for pair in PAIRS:
            va, vb, w = values[(stage, pair)]
            for stat in STAGES[stage][0]:
                events.append(_event(stage, pair, stat, va[stat], vb[stat], w, settings, alpha))
    stage_bound = {stage: max(e["epsilon_lower_bound"] for e in events if e["stage"] == stage) for stage in STAGES}
    claimed = float(config.eps_voc + config.eps_kde)
    stage_claim = {"vocabulary": float(config.eps_voc), "density": float(config.eps_kde), "release": claimed}
    # events on Ṽ and on the whole release are events of the release: they bound its ε (the density stage
    # conditions on a fixed Ṽ and bounds the density step's ε_kde instead)
    lower = max(stage_bound["vocabulary"], stage_bound["release"])
    n_eval = _selection_sizes(rounds, settings)[1]
    n_eval_v = _selection_sizes(voc_rounds, settings)[1]
    return _Analysis(claimed, rounds, voc_rounds, dens_rounds, events, m, alpha, stage_bound, stage_claim,
                     {stage: stage_bound[stage] > stage_claim[stage] + 1e-9 for stage in STAGES}, lower,
                     max_certifiable_epsilon(max(n_eval, n_eval_v), alpha))


def _verdict(an: _Analysis, probes: list[dict[str, Any]], changed: Mapping[str, int],
             exceeded: list[tuple[str, str, dict[str, Any]]], confidence: float) -> tuple[bool, str]:
    """Whether the audit found a violation, and its one-sentence verdict: the statistical bounds first, then the
    certain findings (loading that breaks neighbours, statistics that moved more than the sensitivity)."""
    violation, verdict = verdict_for(an.lower, an.claimed, confidence, an.certifiable, alpha=an.alpha)
    if not violation:
        for stage, what in (("vocabulary", "private vocabulary step"), ("density", "density step")):
            if an.stage_violation[stage]:
                violation = True
                verdict = (f"VIOLATION: the {what} leaks more than claimed (ε ≥ {an.stage_bound[stage]:.2f} > "
                           f"{STAGES[stage][2]} = {an.stage_claim[stage]:g} at {confidence:.0%} confidence).")
                break
    broken_loading = [p for p in probes if p["documents_changed"]] + [
        {"probe": PAIRS[pair][2], "documents_changed": n} for pair, n in changed.items() if n]
    if broken_loading:  # certain, not statistical: neighbouring files do not load as neighbouring corpora
        worst = max(broken_loading, key=lambda p: p["documents_changed"])
        sentence = (f"VIOLATION: loading breaks neighbours — with {worst['probe']}, {worst['documents_changed']} "
                    "other document(s) changed, so one unit's rows move the releases by more than one unit's "
                    "contribution (docs/DESIGN.md §2.0).")
        verdict = sentence if not violation else f"{verdict} Also: {sentence[len('VIOLATION: '):]}"
        violation = True
    if exceeded:  # certain, not statistical: the noise is calibrated for less than these neighbours move
        pair, part, v = max(exceeded, key=lambda x: x[2]["l1_change"] / x[2]["sensitivity"])
        what = "term counts" if part == "vocabulary" else "keyphrase weights"
        sentence = (f"VIOLATION: the neighbours' training {what} moved by {v['l1_change']:g} in L1 ({PAIRS[pair][2]}) "
                    f"while the noise is calibrated for a sensitivity of {v['sensitivity']:g}: the loader or the "
                    "contribution bound lets one unit move the statistic by more than one unit may (docs/DESIGN.md §2, §2.0).")
        verdict = sentence if not violation else f"{verdict} Also: {sentence[len('VIOLATION: '):]}"
        violation = True
    return violation, verdict


def _info(ctx: AuditContext, nbs: Neighbours, dens: DensityStage, rel: ReleaseStage, an: _Analysis, *,
          timings: dict[str, float], checks: dict[str, Any], moved: Mapping[str, int],
          changed: Mapping[str, int]) -> dict[str, Any]:
    """Everything the audit's report shows besides the events (PRIVATE, local: it reads the real corpus)."""
    config, settings, raw, by_person = ctx.config, ctx.settings, ctx.raw, ctx.by_person
    n_sel, n_eval = _selection_sizes(an.rounds, settings)
    n_sel_v, n_eval_v = _selection_sizes(an.voc_rounds, settings)
    n_eval_d = _selection_sizes(an.dens_rounds, settings)[1]
    d, minus, plus = nbs.release_stage
    return {
        "epsilon_vocabulary": config.eps_voc, "epsilon_kde": config.eps_kde,
        "vocabulary_stage_lower_bound": an.stage_bound["vocabulary"],
        "vocabulary_stage_violation": an.stage_violation["vocabulary"],
        "stages": {stage: {"runs": STAGES[stage][1], "claim": f"{STAGES[stage][2]} = {an.stage_claim[stage]:g}",
                           "lower_bound": an.stage_bound[stage], "violation": an.stage_violation[stage]}
                   for stage in STAGES},
        "density_stage_lower_bound": an.stage_bound["density"],
        "density_trials_per_neighbour": an.dens_rounds, "density_evaluation_trials": n_eval_d,
        "density_vocabulary_size": len(dens.vocabulary),
        "trials_per_neighbour": an.rounds, "trials_planned": rel.planned, "selection_trials": n_sel,
        "evaluation_trials": n_eval,
        "vocabulary_trials_per_neighbour": an.voc_rounds, "vocabulary_selection_trials": n_sel_v,
        "vocabulary_evaluation_trials": n_eval_v,
        "bonferroni_events": an.bonferroni_events, "alpha_per_bound": an.alpha,
        "max_certifiable_epsilon": an.certifiable,
        "max_certifiable_epsilon_release_stage": max_certifiable_epsilon(n_eval, an.alpha),
        "cancelled": rel.cancelled, "stopped_at_time_budget": rel.out_of_time, "runs_of_release_path": ctx.runner.runs,
        "timings_seconds": timings,
        "seconds": round(time.perf_counter() - ctx.started, 1),
        "plan": rel.plan, "noise_sampler": ctx.runner.sampler,
        "noise_sampler_note": sampler_note(ctx.runner.sampler, getattr(config, "noise_sampler", "opendp")),
        "noise": "OS entropy" if settings.seed is None else "seeded (reproducible audit)",
        "ledger": "charged nothing: every trial used its own throwaway ledger on an in-memory copy",
        "embeddings": f"in memory only ({len(ctx.memory):,} terms embedded; the persistent cache was not used)",
        "privacy_unit": "one person" if by_person else "one document",
        "rows": {"origin": raw.origin, "raw_rows": len(raw), "loaded_through": "dpkps_core.corpus.load_corpus"},
        **checks,
        "neighbours": {
            "D": {"documents": len(d.corpus), "training_documents": len(d.train_corpus)},
            "D⁻": {"documents": len(minus.corpus), "training_documents": len(minus.train_corpus),
                   "removed": ("every raw row of the training person with the most distinct rare terms of V"
                               if by_person else "the raw row of the training document with the most distinct rare "
                                                 "terms of V"),
                   "removed_rows": len(nbs.target_rows), "removed_documents": len(nbs.removed_keys),
                   "removed_unique_terms": nbs.unique_terms, "training_documents_moved": moved["remove"],
                   "documents_changed_by_loading": changed["remove"]},
            "D⁺": {"documents": len(plus.corpus), "training_documents": len(plus.train_corpus),
                   "added_rows": nbs.rows_per_unit, "canary_terms": list(nbs.add_canary),
                   "canary_in_training_part": bool(nbs.add_planted), "training_documents_moved": moved["add"],
                   "documents_changed_by_loading": changed["add"]},
        },
        "settings": dataclasses.asdict(settings),
        "config": {k: v for k, v in config.to_dict().items() if k not in ("corpus", "text_column", "label_column")},
        "method": "ε_lb = ln(CP_lower(p_num)/CP_upper(p_den)) per event (one-sided Clopper–Pearson), thresholds "
                  "chosen on separate selection trials, Bonferroni over every bound (two per event)",
    }


def _warnings(ctx: AuditContext, nbs: Neighbours, moved: Mapping[str, int], changed: Mapping[str, int]) -> list[str]:
    """What the reader of the audit must know about how its neighbours came out (local, private)."""
    warnings = []
    unit_word = ctx.unit_word
    if not nbs.add_planted:
        warnings.append(f"The split held the canary {unit_word} out of the training part in every attempt, so the add "
                        f"pair only checks that adding a {unit_word} moves no other one.")
    if changed["remove"] or changed["add"]:
        warnings.append(f"Loading D ± one {unit_word}'s raw rows changed {max(changed.values())} other document(s): the "
                        "loader's decisions depend on other rows (e.g. de-duplication across labels or persons), so "
                        "neighbouring files do not load as neighbouring corpora (docs/DESIGN.md §2.0).")
    if moved["remove"] or moved["add"]:
        warnings.append(f"Adding or removing one {unit_word} moved {max(moved.values())} other training document(s) "
                        f"across the split: the split is not a per-{unit_word} assignment (docs/DESIGN.md §2).")
    return warnings


def _selection_sizes(rounds: int, settings: AuditSettings) -> tuple[int, int]:
    n_sel = min(max(1, int(round(rounds * settings.selection_fraction))), rounds - 1)
    return n_sel, rounds - n_sel


def _event(stage: str, pair: str, stat: str, a: np.ndarray, b: np.ndarray, weights: Mapping[str, float],
           settings: AuditSettings, alpha: float) -> dict[str, Any]:
    """Choose the event on the selection trials, bound it on the evaluation trials."""
    a_name, b_name, description = PAIRS[pair]
    ev: dict[str, Any] = {"stage": stage, "pair": pair, "pair_description": description, "statistic": stat,
                          "statistic_label": STATISTIC_LABELS[stat], "neighbour_a": a_name, "neighbour_b": b_name,
                          "weighted_terms": len(weights), "values_a": [round(float(v), 4) for v in a],
                          "values_b": [round(float(v), 4) for v in b]}
    if not weights:
        ev.update(threshold=None, side=None, numerator=None, epsilon_lower_bound=0.0, point_estimate=0.0,
                  note="the neighbours' training parts have identical term counts: nothing to test")
        return ev
    n_sel, n_eval = _selection_sizes(a.size, settings)
    choice = choose_event(a[:n_sel], b[:n_sel], alpha)
    ha = _event_hits(a[n_sel:], choice["threshold"], choice["side"])
    hb = _event_hits(b[n_sel:], choice["threshold"], choice["side"])
    num, den = (hb, ha) if choice["numerator"] == "B" else (ha, hb)
    lb = epsilon_lower_bound(num, n_eval, den, n_eval, alpha)
    point = math.log((num + 0.5) / (n_eval + 1.0)) - math.log((den + 0.5) / (n_eval + 1.0))
    ev.update(threshold=choice["threshold"], side=choice["side"],
              numerator=a_name if choice["numerator"] == "A" else b_name,
              event=f"{stat} {choice['side']} {choice['threshold']:.4g}", selection_trials=n_sel,
              hits_a=ha, hits_b=hb, evaluation_trials=n_eval, p_a=ha / n_eval, p_b=hb / n_eval,
              ci_a=list(clopper_pearson(ha, n_eval, alpha)), ci_b=list(clopper_pearson(hb, n_eval, alpha)),
              epsilon_lower_bound=lb, point_estimate=point)
    return ev
