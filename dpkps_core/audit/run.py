"""The audit itself: :func:`run_audit` runs the vocabulary, density and release stages on D and its neighbours and
bounds every event under one Bonferroni correction (see the package docstring)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dpkps_core import pipeline
from dpkps_core.audit.neighbours import (
    _CanaryMaker,
    _class_weights,
    _moved,
    _training_part,
    _weights,
    _with_extra,
    _without,
    canary_text,
    declared_classes,
    influential_document,
    rare_public_terms,
)
from dpkps_core.audit.report import AuditResult, format_seconds
from dpkps_core.audit.settings import MIN_TRIALS, AuditSettings, Cancel
from dpkps_core.audit.statistics import (
    _event_hits,
    choose_event,
    clopper_pearson,
    epsilon_lower_bound,
    max_certifiable_epsilon,
    verdict_for,
)
from dpkps_core.audit.trials import MemoryEmbedder, _exposure_summary, _Neighbour, _Release, _Runner
from dpkps_core.config import LIMITS, SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.embeddings import embed_terms
from dpkps_core.errors import ParameterError
from dpkps_core.progress import Progress
from dpkps_core.vocabulary import PublicVocabulary

VOCABULARY_STATISTICS = ("vocabulary_score", "vocabulary_members")
DENSITY_STATISTICS = ("class_sampled_frequency",)
STATISTICS = ("sampled_frequency",)
STAGES = {  # stage -> (statistics, what it runs, which ε it is bounded against)
    "vocabulary": (VOCABULARY_STATISTICS, "pipeline.build_private_vocabulary alone", "ε_voc"),
    "density": (DENSITY_STATISTICS, "pipeline.extract_keyphrases + build_density + sample_sequences on a fixed Ṽ",
                "ε_kde"),
    "release": (STATISTICS, "pipeline.run_sampling, the whole release path", "ε"),
}
STATISTIC_LABELS = {
    "vocabulary_score": "Σ Δ·(noisy count in Ṽ, censored at Ṽ's cut)",
    "vocabulary_members": "Σ Δ·[term ∈ Ṽ]",
    "sampled_frequency": "Σ Δ·(occurrences in the sampled sequences)",
    "class_sampled_frequency": "Σ Δ_class·(occurrences in that class's sampled sequences)",
}
PAIRS = {
    "remove": ("D⁻", "D", "D vs D without its most influential training document"),
    "add": ("D", "D⁺", "D vs D plus one canary document of rare public terms"),
}
NEIGHBOURS = ("D", "D⁻", "D⁺", "D+k")
_CANARY_ATTEMPTS = 6


def run_audit(
    corpus: Corpus, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Any,
    settings: AuditSettings | None = None, progress: Progress | None = None, cancel: Cancel | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
) -> AuditResult:
    """Audit the release path on ``corpus`` with ``config`` (issue 11 §5; see the package docstring).

    Two stages share one Bonferroni correction, so every bound holds at the stated confidence together:

    * *vocabulary stage*: :func:`dpkps_core.pipeline.build_private_vocabulary` alone (with each neighbour's own
      training counts), many cheap trials, bounded against ε_voc — events on Ṽ are also events of the whole
      release, so they bound its ε too;
    * *release stage*: the whole of :func:`dpkps_core.pipeline.run_sampling`, bounded against ε_voc + ε_kde.

    ``progress(fraction, message)`` is called after every trial; ``cancel.is_set()`` stops after the trial in
    flight (finished rounds are analysed when there are at least 4); ``on_plan`` receives the measured time per
    round and the number of trials before the long part starts."""
    settings = (settings or AuditSettings()).validate()
    config = dataclasses.replace(config)
    config.validate()
    report = progress or (lambda f, m: None)
    started = time.perf_counter()
    claimed = float(config.eps_voc + config.eps_kde)
    classes = declared_classes(corpus, config)
    memory = MemoryEmbedder(embedder)
    runner = _Runner(config, vocabulary, memory, settings)
    rng = np.random.default_rng(settings.seed)
    S = config.terms_per_doc
    canary_size = settings.canary_terms or S
    cancelled = False

    def stopped() -> bool:
        return cancel is not None and cancel.is_set()

    # ---- round 0: D, then the neighbours it defines
    report(0.0, "round 1: running the release path on D (the first run also embeds Ṽ in memory)")
    d = _Neighbour("D", corpus)
    rel, split = runner.run(corpus)
    d.releases.append(rel)
    d.train = _training_part(corpus, split, classes)
    first_vocabulary = runner.last_vocabulary
    target, unique_terms = influential_document(corpus, d.train, vocabulary, terms_per_doc=S)
    target_terms = [vocabulary.terms[i] for i in vocabulary.matcher.first_distinct(
        [corpus.texts[target]], S, max_chars=LIMITS["max_chars_per_doc"])[0]]
    minus_corpus, kept = _without(corpus, target, by_person=bool(getattr(config, "person_column", None)))
    minus = _Neighbour("D⁻", minus_corpus)
    maker = _CanaryMaker(rare_public_terms(corpus, vocabulary), vocabulary, rng)
    label_cycle = [classes[i % len(classes)] for i in range(max(settings.canary_documents, 1))]

    def plant(name: str, k: int) -> tuple[_Neighbour, list[list[str]], list[bool]]:
        """Append k canaries, redrawing those the split holds out (a few attempts; each is a valid trial)."""
        canaries = [maker.draw(canary_size) for _ in range(k)]
        for attempt in range(_CANARY_ATTEMPTS):
            nb = _Neighbour(name, _with_extra(corpus, [canary_text(c) for c in canaries], label_cycle[:k]))
            rel_, split_ = runner.run(nb.corpus)
            nb.train = _training_part(nb.corpus, split_, classes)
            train_set = set(nb.train)
            planted = [len(corpus) + j in train_set for j in range(k)]
            if all(planted) or attempt == _CANARY_ATTEMPTS - 1 or stopped():
                nb.releases.append(rel_)
                return nb, canaries, planted
            canaries = [c if ok else maker.draw(canary_size) for c, ok in zip(canaries, planted)]
        raise AssertionError("unreachable")

    report(0.01, "round 1: D⁺ (one canary document)")
    plus, (add_canary,), (add_planted,) = plant("D⁺", 1)
    neighbours = [d, minus, plus]
    exposure_nb: _Neighbour | None = None
    exposure_canaries: list[list[str]] = []
    exposure_planted: list[bool] = []
    if settings.canary_documents:
        report(0.02, f"round 1: D+k ({settings.canary_documents} exposure canaries)")
        exposure_nb, exposure_canaries, exposure_planted = plant("D+k", settings.canary_documents)
    cheap = [d, minus, plus] + ([exposure_nb] if exposure_nb is not None else [])  # vocabulary + density stages
    report(0.03, "round 1: D⁻ (without the most influential training document)")
    rel, split = runner.run(minus.corpus)
    minus.releases.append(rel)
    minus.train = _training_part(minus.corpus, split, classes)

    # ---- each neighbour's TRAINING term counts (from the split the release path used: a broken split shows)
    def train_texts(nb: _Neighbour) -> list[str]:
        return [nb.corpus.texts[i] for i in nb.train]

    counts = {nb.name: pipeline.term_counts(train_texts(nb), vocabulary, terms_per_doc=S) for nb in (d, minus, plus)}
    weights = {"remove": _weights(counts["D"] - counts["D⁻"], vocabulary),
               "add": _weights(counts["D⁺"] - counts["D"], vocabulary)}
    removed = set(range(len(corpus))) - set(kept)
    moved = {"remove": _moved(d.train, [kept[i] for i in minus.train], ignore=removed),
             "add": _moved(d.train, [i for i in plus.train if i < len(corpus)], ignore=set())}

    t_round0 = time.perf_counter() - started

    # ---- vocabulary stage: build_private_vocabulary alone, many trials
    vocab_rel: dict[str, list[_Release]] = {nb.name: [] for nb in cheap}
    texts = {nb.name: train_texts(nb) for nb in cheap}
    counts.update({nb.name: pipeline.term_counts(texts[nb.name], vocabulary, terms_per_doc=S)
                   for nb in cheap if nb.name not in counts})

    def vocab_trial(name: str) -> None:
        pv = pipeline.build_private_vocabulary(
            texts[name], vocabulary, eps_voc=config.eps_voc, terms_per_doc=S, vocab_size=config.vocab_size,
            noise=runner.noise(), ledger=PrivacyLedger(), selection_rule=config.selection_rule, counts=counts[name])
        vocab_rel[name].append(_Release.of_vocabulary(pv))

    n_voc = _stage_trials(vocab_trial, list(vocab_rel), trials=settings.vocabulary_trials,
                          time_budget=settings.vocabulary_time_budget, minimum=settings.min_trials * 5,
                          maximum=settings.max_vocabulary_trials, stopped=stopped, every=50,
                          progress=lambda i, n: report(0.03 + 0.17 * i / n,
                                                       f"vocabulary stage: trial {i}/{n} on each neighbour"))

    t_vocab = time.perf_counter() - started - t_round0

    # ---- density stage: keyphrases → DP density → sequences on ONE fixed Ṽ (D's first Ṽ plus the audit terms,
    # so that the removed document's and the canary's terms can show); no new embeddings per trial
    pv_audit = _audit_vocabulary(first_vocabulary, list(add_canary) + target_terms
                                 + [t for c in exposure_canaries for t in c])
    emb_audit = embed_terms(pv_audit.terms, memory)
    config_d = config
    if config_d.bandwidth is None:  # what build_density would compute from these embeddings, once
        config_d = dataclasses.replace(config, bandwidth=pipeline.default_bandwidth(emb_audit))
    max_per_doc = config.max_keyphrases_per_doc or config.length
    dens_input = {}
    for nb in cheap:
        labels = [nb.corpus.labels[i] for i in nb.train]
        dens_input[nb.name] = (pipeline.extract_keyphrases(texts[nb.name], pv_audit, max_per_doc=max_per_doc), labels)

    def class_counts(name: str) -> Counter:
        kps, labels = dens_input[name]
        return Counter((y, pv_audit.terms[i]) for doc, y in zip(kps, labels) for i in doc)

    cc = {name: class_counts(name) for name in ("D", "D⁻", "D⁺")}
    dens_weights = {"remove": _class_weights(cc["D"], cc["D⁻"]), "add": _class_weights(cc["D⁺"], cc["D"])}
    dens_values: dict[str, list[dict[str, float]]] = {nb.name: [] for nb in cheap}
    dens_exposure: dict[str, list[dict[str, Any]]] = {"D": [], "D+k": []}

    def density_trial(name: str) -> None:
        noise = runner.noise()
        kps, labels = dens_input[name]
        density, _ = pipeline.build_density(kps, labels, classes=classes, embeddings=emb_audit, config=config_d,
                                            private_vocabulary=pv_audit, noise=noise, ledger=PrivacyLedger())
        outcome = pipeline.sample_sequences(density, terms=pv_audit.terms, embeddings=emb_audit, config=config_d,
                                            rng=noise.child())
        freq = Counter((q.label, k) for q in outcome.sequences for k in q.keyphrases)
        dens_values[name].append({pair: sum(w * freq.get(key, 0) for key, w in dens_weights[pair].items())
                                  for pair in PAIRS})
        if exposure_canaries and name in dens_exposure:
            seqs = [q.keyphrases for q in outcome.sequences]
            rel = _Release({}, 0.0, Counter(k for q in seqs for k in q), tuple(frozenset(q) for q in seqs),
                           sum(len(q) for q in seqs))
            dens_exposure[name].append(rel.exposure(exposure_canaries))

    _stage_trials(density_trial, list(dens_values), trials=settings.density_trials,
                  time_budget=settings.density_time_budget, minimum=settings.min_trials,
                  maximum=settings.max_density_trials, stopped=stopped, every=10,
                  progress=lambda i, n: report(0.2 + 0.1 * i / n, f"density stage: trial {i}/{n} on each neighbour"))
    t_density = time.perf_counter() - started - t_round0 - t_vocab

    # ---- release stage, round 1 (timed) and the plan
    t_round = time.perf_counter()
    for nb in neighbours:
        if stopped():
            break
        nb.releases.append(runner.run(nb.corpus)[0])
    t_round = time.perf_counter() - t_round
    if settings.trials is not None:
        n = settings.trials
    else:
        left = settings.time_budget - (time.perf_counter() - started)
        n = int(min(max(2 + left / max(t_round, 1e-6), settings.min_trials), settings.max_trials))
    plan = {"trials_per_neighbour": n, "neighbours": len(neighbours), "seconds_per_round": round(t_round, 3),
            "vocabulary_trials_per_neighbour": n_voc,
            "estimated_seconds": round((time.perf_counter() - started) + max(n - 2, 0) * t_round, 1)}
    if on_plan is not None:
        on_plan(dict(plan))
    total_runs = n * len(neighbours)
    timings = {"round_1": round(t_round0, 1), "vocabulary_stage": round(t_vocab, 1),
               "density_stage": round(t_density, 1)}
    deadline = None if settings.trials is not None else started + settings.time_budget
    out_of_time = False
    for r in range(2, n):
        if deadline is not None and r >= settings.min_trials and time.perf_counter() > deadline:
            out_of_time = True  # the machine got slower than measured: keep the time budget
            break
        for nb in neighbours:
            if stopped():
                cancelled = True
                break
            nb.releases.append(runner.run(nb.corpus)[0])
            done = sum(len(x.releases) for x in neighbours)
            eta = (total_runs - done) * t_round / len(neighbours)
            report(0.3 + 0.7 * min(done / total_runs, 1.0),
                   f"release stage: trial {r + 1}/{n} on {nb.name} — about {format_seconds(eta)} left")
        if cancelled:
            break
    cancelled = cancelled or stopped()
    rounds = min(len(nb.releases) for nb in neighbours)
    voc_rounds = min(len(v) for v in vocab_rel.values())
    dens_rounds = min(len(v) for v in dens_values.values())
    if min(rounds, voc_rounds, dens_rounds) < MIN_TRIALS:
        raise ParameterError(f"The audit was stopped after {min(rounds, voc_rounds, dens_rounds)} complete round(s); "
                             f"it needs at least {MIN_TRIALS} trials per neighbour to say anything.")
    report(1.0, "analysing the trials")

    # ---- events: per stage, pair and statistic; one Bonferroni correction over all of them
    sides = {"remove": ("D⁻", "D"), "add": ("D", "D⁺")}
    values: dict[tuple[str, str], tuple[dict[str, np.ndarray], dict[str, np.ndarray], Mapping[Any, float]]] = {}
    for stage, rels in (("vocabulary", {k: v[:voc_rounds] for k, v in vocab_rel.items() if k != "D+k"}),
                        ("release", {nb.name: nb.releases[:rounds] for nb in (d, minus, plus)})):
        for pair in PAIRS:
            a_name, b_name = sides[pair]
            sa = [r.statistics(weights[pair]) for r in rels[a_name]]
            sb = [r.statistics(weights[pair]) for r in rels[b_name]]
            values[(stage, pair)] = ({st: np.array([x[st] for x in sa]) for st in STAGES[stage][0]},
                                     {st: np.array([x[st] for x in sb]) for st in STAGES[stage][0]}, weights[pair])
    for pair in PAIRS:
        a_name, b_name = sides[pair]
        values[("density", pair)] = (
            {"class_sampled_frequency": np.array([x[pair] for x in dens_values[a_name][:dens_rounds]])},
            {"class_sampled_frequency": np.array([x[pair] for x in dens_values[b_name][:dens_rounds]])},
            dens_weights[pair])
    m = max(1, sum(len(STAGES[stage][0]) for (stage, pair), v in values.items() if v[2]))
    alpha = (1.0 - settings.confidence) / (2 * m)   # two one-sided CP bounds per event
    events: list[dict[str, Any]] = []
    for stage in STAGES:
        for pair in PAIRS:
            va, vb, w = values[(stage, pair)]
            for stat in STAGES[stage][0]:
                events.append(_event(stage, pair, stat, va[stat], vb[stat], w, settings, alpha))
    stage_bound = {stage: max(e["epsilon_lower_bound"] for e in events if e["stage"] == stage) for stage in STAGES}
    stage_claim = {"vocabulary": float(config.eps_voc), "density": float(config.eps_kde), "release": claimed}
    # events on Ṽ and on the whole release are events of the release: they bound its ε (the density stage
    # conditions on a fixed Ṽ and bounds the density step's ε_kde instead)
    lower = max(stage_bound["vocabulary"], stage_bound["release"])
    vocab_lower = stage_bound["vocabulary"]
    n_sel, n_eval = _selection_sizes(rounds, settings)
    n_sel_v, n_eval_v = _selection_sizes(voc_rounds, settings)
    n_sel_d, n_eval_d = _selection_sizes(dens_rounds, settings)
    certifiable = max_certifiable_epsilon(max(n_eval, n_eval_v), alpha)
    violation, verdict = verdict_for(lower, claimed, settings.confidence, certifiable)
    stage_violation = {stage: stage_bound[stage] > stage_claim[stage] + 1e-9 for stage in STAGES}
    vocab_violation = stage_violation["vocabulary"]
    if not violation:
        for stage, what in (("vocabulary", "private vocabulary step"), ("density", "density step")):
            if stage_violation[stage]:
                violation = True
                verdict = (f"VIOLATION: the {what} leaks more than claimed (ε ≥ {stage_bound[stage]:.2f} > "
                           f"{STAGES[stage][2]} = {stage_claim[stage]:g} at {settings.confidence:.0%} confidence).")
                break

    exposure = None
    if exposure_nb is not None:
        exposure = _exposure_summary(exposure_canaries, exposure_planted,
                                     with_vocabulary=vocab_rel["D+k"][:voc_rounds],
                                     without_vocabulary=vocab_rel["D"][:voc_rounds],
                                     with_sequences=dens_exposure["D+k"][:dens_rounds],
                                     without_sequences=dens_exposure["D"][:dens_rounds])
    info = {
        "epsilon_vocabulary": config.eps_voc, "epsilon_kde": config.eps_kde,
        "vocabulary_stage_lower_bound": vocab_lower, "vocabulary_stage_violation": vocab_violation,
        "stages": {stage: {"runs": STAGES[stage][1], "claim": f"{STAGES[stage][2]} = {stage_claim[stage]:g}",
                           "lower_bound": stage_bound[stage], "violation": stage_violation[stage]}
                   for stage in STAGES},
        "density_stage_lower_bound": stage_bound["density"],
        "density_trials_per_neighbour": dens_rounds, "density_evaluation_trials": n_eval_d,
        "density_vocabulary_size": len(pv_audit),
        "trials_per_neighbour": rounds, "trials_planned": n, "selection_trials": n_sel, "evaluation_trials": n_eval,
        "vocabulary_trials_per_neighbour": voc_rounds, "vocabulary_selection_trials": n_sel_v,
        "vocabulary_evaluation_trials": n_eval_v,
        "bonferroni_events": m, "alpha_per_bound": alpha, "max_certifiable_epsilon": certifiable,
        "max_certifiable_epsilon_release_stage": max_certifiable_epsilon(n_eval, alpha),
        "cancelled": cancelled, "stopped_at_time_budget": out_of_time, "runs_of_release_path": runner.runs,
        "timings_seconds": {**timings, "release_stage": round(time.perf_counter() - started - t_round0 - t_vocab
                                                              - t_density, 1)},
        "seconds": round(time.perf_counter() - started, 1),
        "plan": plan, "noise_sampler": runner.sampler,
        "noise": "OS entropy" if settings.seed is None else "seeded (reproducible audit)",
        "ledger": "charged nothing: every trial used its own throwaway ledger on an in-memory copy",
        "embeddings": f"in memory only ({len(memory):,} terms embedded; the persistent cache was not used)",
        "neighbours": {
            "D": {"documents": len(corpus), "training_documents": len(d.train)},
            "D⁻": {"documents": len(minus.corpus), "training_documents": len(minus.train),
                   "removed": "the training document with the most distinct rare terms of V"
                              + (" (all of its person's documents)" if len(removed) > 1 else ""),
                   "removed_documents": len(removed),
                   "removed_unique_terms": unique_terms, "training_documents_moved": moved["remove"]},
            "D⁺": {"documents": len(plus.corpus), "training_documents": len(plus.train),
                   "canary_terms": list(add_canary), "canary_in_training_part": bool(add_planted),
                   "training_documents_moved": moved["add"]},
        },
        "settings": dataclasses.asdict(settings),
        "config": {k: v for k, v in config.to_dict().items() if k not in ("corpus", "text_column", "label_column")},
        "method": "ε_lb = ln(CP_lower(p_num)/CP_upper(p_den)) per event (one-sided Clopper–Pearson), thresholds "
                  "chosen on separate selection trials, Bonferroni over every bound (two per event)",
    }
    warnings = []
    if not add_planted:
        warnings.append("The split held the canary document out of the training part in every attempt, so the add "
                        "pair only checks that adding a document moves no other one.")
    if moved["remove"] or moved["add"]:
        warnings.append(f"Adding or removing one document moved {max(moved.values())} other training document(s) "
                        "across the split: the split is not a per-document assignment (DESIGN §2).")
    if warnings:
        info["warnings"] = warnings
    return AuditResult(claimed, lower, settings.confidence, violation, verdict, events, exposure, info)


def _stage_trials(trial: Callable[[str], None], names: Sequence[str], *, trials: int | None, time_budget: float,
                  minimum: int, maximum: int, stopped: Callable[[], bool], every: int,
                  progress: Callable[[int, int], None]) -> int:
    """One stage's trials: a first, timed trial on every neighbour, then up to ``trials`` (``None``: as many as
    fit ``time_budget``, within [``minimum``, ``maximum``]) unless ``stopped()``; ``progress(trial, planned)``
    every ``every`` trials. Returns the planned number of trials."""
    t = time.perf_counter()
    for name in names:
        trial(name)
    t = (time.perf_counter() - t) / len(names)
    n = trials or int(min(max(time_budget / (len(names) * max(t, 1e-6)), minimum), maximum))
    for r in range(1, n):
        if stopped():
            break
        for name in names:
            trial(name)
        if r % every == 0 or r == n - 1:
            progress(r + 1, n)
    return n


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


def _audit_vocabulary(pv: Any, extra_terms: Sequence[str]) -> Any:
    """A fixed Ṽ for the density stage: a released Ṽ plus the audit terms it lacks (any fixed Ṽ will do: the
    density step must be ε_kde-DP for every Ṽ)."""
    have = set(pv.terms)
    extra = [t for t in dict.fromkeys(extra_terms) if t not in have]
    if not extra:
        return pv
    counts = np.asarray(pv.noisy_counts, dtype=np.float64)
    low = float(counts.min()) if counts.size else 0.0
    return dataclasses.replace(pv, terms=tuple(pv.terms) + tuple(extra),
                               noisy_counts=np.concatenate([counts, np.full(len(extra), low)]))
