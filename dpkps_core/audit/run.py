"""The audit itself: :func:`run_audit` builds D and its neighbours from the RAW rows (:mod:`.raw`), runs the
vocabulary, density and release stages on them and bounds every event under one Bonferroni correction (see the
package docstring); a deterministic check compares how far the neighbours' statistics moved with the sensitivity
the noise is calibrated for."""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter, defaultdict
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dpkps_core import pipeline
from dpkps_core.audit.neighbours import (
    _CanaryMaker,
    _class_weights,
    _weights,
    canary_rows,
    declared_classes,
    density_contributions,
    document_keys,
    influential_document,
    influential_person,
    loader_probes,
    loading_changes,
    member_weight_distance,
    rare_public_terms,
    training_corpus,
)
from dpkps_core.audit.raw import CANARY_PERSON, RawTable
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
    "vocabulary": (VOCABULARY_STATISTICS, "pipeline.vocabulary_step alone", "ε_voc"),
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
    "remove": ("D⁻", "D", "D vs D without its most influential training unit (raw rows removed before loading)"),
    "add": ("D", "D⁺", "D vs D plus one canary unit of rare public terms (raw rows added before loading)"),
}
NEIGHBOURS = ("D", "D⁻", "D⁺", "D+k")
_CANARY_ATTEMPTS = 6
#: Rows of the canary person of D⁺ under the person unit (a person with several documents, across classes).
CANARY_PERSON_ROWS = 3


def run_audit(
    corpus: Corpus | RawTable, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Any,
    settings: AuditSettings | None = None, progress: Progress | None = None, cancel: Cancel | None = None,
    on_plan: Callable[[dict[str, Any]], None] | None = None,
) -> AuditResult:
    """Audit the release path on ``corpus`` with ``config`` (issue 11 §5; see the package docstring).

    ``corpus`` is best the :class:`~dpkps_core.audit.raw.RawTable` of the file as it is on disk
    (:func:`~dpkps_core.audit.raw.raw_table_for` / :func:`~dpkps_core.audit.raw.read_raw_table`): D, D⁻ (one raw
    row removed, or every row of one person under the person unit) and D⁺ (one canary row, or a canary person
    with several rows) are then built on the raw rows and each is loaded through the public loader (DESIGN §2.0).
    A loaded :class:`~dpkps_core.corpus.Corpus` is turned into rows of its documents
    (:meth:`RawTable.from_corpus`), which still go through the loader.

    Three stages share one Bonferroni correction, so every bound holds at the stated confidence together:
    the *vocabulary stage* (:func:`dpkps_core.pipeline.vocabulary_step` on each neighbour's training part,
    against ε_voc), the *density stage* (:func:`dpkps_core.pipeline.build_density` + sampling on a fixed Ṽ,
    against ε_kde) and the *release stage* (the whole :func:`dpkps_core.pipeline.run_sampling`, against ε). Their
    statistics are weighted by the neighbours' differences in the release path's own contributions
    (:func:`dpkps_core.pipeline.term_counts` and :mod:`dpkps_core.dp.contributions`, per person under the person
    unit). Every trial uses a fresh in-memory :class:`~dpkps_core.dp.ledger.PrivacyLedger`.

    ``progress(fraction, message)`` is called after every trial; ``cancel.is_set()`` stops after the trial in
    flight (finished rounds are analysed when there are at least 4); ``on_plan`` receives the measured time per
    round and the number of trials before the long part starts."""
    settings = (settings or AuditSettings()).validate()
    config = dataclasses.replace(config)
    config.validate()
    raw = corpus if isinstance(corpus, RawTable) else RawTable.from_corpus(corpus, config)
    by_person = bool(config.person_column)
    if by_person and not raw.person_column:
        raise ParameterError(f"The unit of privacy is a person (column '{config.person_column}'), but the audited "
                             "rows have no person column; load the corpus with its person column.")
    report = progress or (lambda f, m: None)
    started = time.perf_counter()
    claimed = float(config.eps_voc + config.eps_kde)
    memory = MemoryEmbedder(embedder)
    runner = _Runner(config, vocabulary, memory, settings)
    rng = np.random.default_rng(settings.seed)
    S = config.terms_per_doc
    canary_size = settings.canary_terms or S
    cancelled = False

    def stopped() -> bool:
        return cancel is not None and cancel.is_set()

    def release(nb: _Neighbour) -> None:
        rel_, split_ = runner.run(nb.corpus)
        nb.releases.append(rel_)
        if nb.train_corpus is None:
            nb.split = split_
            nb.train_corpus = training_corpus(nb.corpus, split_, classes)

    # ---- round 0: D loaded from its raw rows, then the neighbours it defines (raw rows, then the loader)
    report(0.0, f"round 1: loading D from its {len(raw):,} raw rows and running the release path on it (the first "
                "run also embeds Ṽ in memory)")
    d = _Neighbour("D", raw.load_corpus(), raw=raw)
    classes = declared_classes(d.corpus, config)
    release(d)
    first_vocabulary = runner.last_vocabulary
    train_d = d.train_corpus
    keys_d = document_keys(d.corpus)
    if by_person:
        person, unique_terms = influential_person(train_d, vocabulary, terms_per_doc=S)
        target_rows = raw.rows_of_person(person)
        removed_keys = {k for k in keys_d if k[2] == person}
        target_texts = [t for t, p in zip(train_d.texts, train_d.persons or ()) if p == person]
    else:
        rows_by_key: dict[Any, list[int]] = defaultdict(list)
        for i, key in enumerate(raw.row_keys()):
            rows_by_key[key].append(i)
        train_idx = [i for i in d.split.train if d.corpus.labels[i] in set(classes)]
        single = [i for i in train_idx if len(rows_by_key.get(keys_d[i], ())) == 1]  # one raw row = one document
        target, unique_terms = influential_document(d.corpus, single or train_idx, vocabulary, terms_per_doc=S)
        target_rows = rows_by_key.get(keys_d[target], [])[:1]
        removed_keys = {keys_d[target]}
        target_texts = [d.corpus.texts[target]]
    if not target_rows:
        raise ParameterError("The audit could not find the raw row(s) of the document it removes; the loader changes "
                             "the texts it reads (check the loader) or the rows are not the corpus's.")
    target_terms = list(dict.fromkeys(vocabulary.terms[i] for found in vocabulary.matcher.first_distinct(
        target_texts, S, max_chars=LIMITS["max_chars_per_doc"]) for i in found))[:max(S, 1) * len(target_texts)]
    minus = _Neighbour("D⁻", raw.without(target_rows).load_corpus(), raw=raw.without(target_rows))
    maker = _CanaryMaker(rare_public_terms(d.corpus, vocabulary), vocabulary, rng,
                         min_chars=int(raw.load.get("min_chars", 20) or 0))
    rows_per_unit = CANARY_PERSON_ROWS if by_person else 1

    def plant(name: str, k: int) -> tuple[_Neighbour, list[list[str]], list[bool], set[Any]]:
        """Append k canary units as raw rows and load them, redrawing those the split holds out (a few attempts;
        each is a valid trial). Returns the neighbour, the canaries' terms, whether each is in the training part,
        and the keys of the canaries' loaded documents."""
        canaries = [maker.draw(canary_size) for _ in range(k)]
        for attempt in range(_CANARY_ATTEMPTS):
            rows, unit_keys = [], []
            for j, terms in enumerate(canaries):
                who = f"{CANARY_PERSON}-{name}-{j}-{attempt}" if raw.person_column else None
                rotated = list(classes[j % len(classes):]) + list(classes[:j % len(classes)])
                docs = canary_rows(terms, rotated, rows=rows_per_unit, min_chars=maker.min_chars)
                rows += [raw.row(text, label, who) for text, label in docs]
                unit_keys.append({(text, label, who) for text, label in docs})
            nb_raw = raw.plus(rows)
            nb = _Neighbour(name, nb_raw.load_corpus(), raw=nb_raw)
            release(nb)
            train_keys = set(document_keys(nb.train_corpus))
            planted = [bool(u) and u <= train_keys for u in unit_keys]
            if all(planted) or attempt == _CANARY_ATTEMPTS - 1 or stopped():
                return nb, canaries, planted, set().union(*unit_keys)
            canaries = [c if ok else maker.draw(canary_size) for c, ok in zip(canaries, planted)]
        raise AssertionError("unreachable")

    report(0.01, "round 1: D⁺ (one canary " + ("person" if by_person else "document") + ")")
    plus, (add_canary,), (add_planted,), plus_keys = plant("D⁺", 1)
    neighbours = [d, minus, plus]
    exposure_nb: _Neighbour | None = None
    exposure_canaries: list[list[str]] = []
    exposure_planted: list[bool] = []
    if settings.canary_documents:
        report(0.02, f"round 1: D+k ({settings.canary_documents} exposure canaries)")
        exposure_nb, exposure_canaries, exposure_planted, _ = plant("D+k", settings.canary_documents)
    cheap = [d, minus, plus] + ([exposure_nb] if exposure_nb is not None else [])  # vocabulary + density stages
    report(0.03, "round 1: D⁻ (without the most influential training " + ("person" if by_person else "document") + ")")
    release(minus)

    # ---- how the loaded neighbours differ (DESIGN §2.0: by the removed / added unit's documents only)
    train_keys = {nb.name: set(document_keys(nb.train_corpus)) for nb in (d, minus, plus)}
    moved = {"remove": len((train_keys["D"] ^ train_keys["D⁻"]) - removed_keys),
             "add": len((train_keys["D"] ^ train_keys["D⁺"]) - plus_keys)}
    changed = {"remove": loading_changes(d.corpus, minus.corpus, expected=removed_keys),
               "add": loading_changes(d.corpus, plus.corpus, expected=plus_keys)}

    report(0.03, "round 1: loader probes (neighbouring files a cross-row de-duplication would break)")
    probes = loader_probes(raw, d.corpus, classes, by_person=by_person)

    # ---- each neighbour's training contributions, with the release path's own functions and unit
    units = {nb.name: pipeline._unit(nb.train_corpus, config) for nb in cheap}
    counts = {nb.name: pipeline.term_counts(nb.train_corpus.texts, vocabulary, terms_per_doc=S,
                                            groups=units[nb.name][0]) for nb in cheap}
    weights = {"remove": _weights(counts["D"] - counts["D⁻"], vocabulary),
               "add": _weights(counts["D⁺"] - counts["D"], vocabulary)}

    t_round0 = time.perf_counter() - started

    # ---- vocabulary stage: the release path's vocabulary step alone, many trials
    vocab_rel: dict[str, list[_Release]] = {nb.name: [] for nb in cheap}
    train_of = {nb.name: nb.train_corpus for nb in cheap}
    vocab_events: list[Any] = []

    def vocab_trial(name: str) -> None:
        ledger = PrivacyLedger()
        step = pipeline.vocabulary_step(train_of[name], vocabulary, config, noise=runner.noise(), ledger=ledger,
                                        counts=counts[name])
        if not vocab_events:
            vocab_events.extend(e for e in ledger.events if e.step == "vocabulary")
        vocab_rel[name].append(_Release.of_vocabulary(step.private_vocabulary))

    n_voc = _stage_trials(vocab_trial, list(vocab_rel), trials=settings.vocabulary_trials,
                          time_budget=settings.vocabulary_time_budget, minimum=settings.min_trials * 5,
                          maximum=settings.max_vocabulary_trials, stopped=stopped, every=50,
                          progress=lambda i, n: report(0.03 + 0.17 * i / n,
                                                       f"vocabulary stage: trial {i}/{n} on each neighbour"))

    t_vocab = time.perf_counter() - started - t_round0

    # ---- density stage: keyphrases → DP density → sequences on ONE fixed Ṽ (D's first Ṽ plus the audit terms,
    # so that the removed unit's and the canary's terms can show); no new embeddings per trial
    pv_audit = _audit_vocabulary(first_vocabulary, list(add_canary) + target_terms
                                 + [t for c in exposure_canaries for t in c])
    emb_audit = embed_terms(pv_audit.terms, memory)
    config_d = config
    if config_d.bandwidth is None:  # what build_density would compute from these embeddings, once
        config_d = dataclasses.replace(config, bandwidth=pipeline.default_bandwidth(emb_audit))
    plan = pipeline.density_plan(config_d, n_classes=len(classes), private_vocabulary=pv_audit, embeddings=emb_audit)
    max_per_doc = plan.max_keyphrases_per_doc
    first_position = plan.kind != "independent"  # iterative: the first member scores the first position
    dens_input: dict[str, tuple[list[list[int]], tuple[str, ...], Any, list[Any]]] = {}
    contributions: dict[str, np.ndarray] = {}
    for nb in cheap:
        train = nb.train_corpus
        kps = pipeline.extract_keyphrases(train.texts, pv_audit, max_per_doc=max_per_doc)
        groups = units[nb.name][0]
        dens_input[nb.name] = (kps, train.labels, groups, document_keys(train))
        contributions[nb.name] = density_contributions(kps, train.labels, classes, len(pv_audit), kind=plan.kind,
                                                       max_per_doc=max_per_doc, groups=groups)
    dens_weights = {"remove": _class_weights(contributions["D"], contributions["D⁻"], classes, pv_audit.terms),
                    "add": _class_weights(contributions["D⁺"], contributions["D"], classes, pv_audit.terms)}
    dens_values: dict[str, list[dict[str, float]]] = {nb.name: [] for nb in cheap}
    dens_exposure: dict[str, list[dict[str, Any]]] = {"D": [], "D+k": []}

    def density_trial(name: str) -> None:
        noise = runner.noise()
        kps, labels, groups, _ = dens_input[name]
        density, _ = pipeline.build_density(kps, labels, classes=classes, embeddings=emb_audit, config=config_d,
                                            private_vocabulary=pv_audit, noise=noise, ledger=PrivacyLedger(),
                                            groups=groups, neighbouring=units[name][1])
        outcome = pipeline.sample_sequences(density, terms=pv_audit.terms, embeddings=emb_audit, config=config_d,
                                            rng=noise.child())
        freq = Counter((q.label, k) for q in outcome.sequences
                          for k in (q.keyphrases[:1] if first_position else q.keyphrases))
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

    # ---- deterministic check: how far each pair's statistics moved vs the sensitivity the noise assumes
    voc_bound = float(vocab_events[0].sensitivity) if vocab_events else float(S)
    sensitivity: dict[str, dict[str, Any]] = {}
    for pair, (a_name, b_name) in (("remove", ("D⁻", "D")), ("add", ("D", "D⁺"))):
        voc_l1 = float(np.abs(counts[b_name] - counts[a_name]).sum())
        if plan.density == "rff" and plan.kind != "independent":
            dens_l1 = member_weight_distance(dens_input[a_name][:4], dens_input[b_name][:4], classes, kind=plan.kind,
                                             length=config.length, max_per_doc=max_per_doc)
        else:
            dens_l1 = float(np.abs(contributions[b_name] - contributions[a_name]).sum())
        sensitivity[pair] = {
            "vocabulary": {"l1_change": voc_l1, "sensitivity": voc_bound, "exceeded": voc_l1 > voc_bound + 1e-9},
            "density": {"l1_change": dens_l1, "sensitivity": 1.0, "exceeded": dens_l1 > 1.0 + 1e-9},
        }
    exceeded = [(pair, part, v) for pair, parts in sensitivity.items() for part, v in parts.items() if v["exceeded"]]

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
    broken_loading = [p for p in probes if p["documents_changed"]] + [
        {"probe": PAIRS[pair][2], "documents_changed": n} for pair, n in changed.items() if n]
    if broken_loading:  # certain, not statistical: neighbouring files do not load as neighbouring corpora
        worst = max(broken_loading, key=lambda p: p["documents_changed"])
        sentence = (f"VIOLATION: loading breaks neighbours — with {worst['probe']}, {worst['documents_changed']} "
                    "other document(s) changed, so one unit's rows move the releases by more than one unit's "
                    "contribution (DESIGN §2.0).")
        verdict = sentence if not violation else f"{verdict} Also: {sentence[len('VIOLATION: '):]}"
        violation = True
    if exceeded:  # certain, not statistical: the noise is calibrated for less than these neighbours move
        pair, part, v = max(exceeded, key=lambda x: x[2]["l1_change"] / x[2]["sensitivity"])
        what = "term counts" if part == "vocabulary" else "keyphrase weights"
        sentence = (f"VIOLATION: the neighbours' training {what} moved by {v['l1_change']:g} in L1 ({PAIRS[pair][2]}) "
                    f"while the noise is calibrated for a sensitivity of {v['sensitivity']:g}: the loader or the "
                    "contribution bound lets one unit move the statistic by more than one unit may (DESIGN §2, §2.0).")
        verdict = sentence if not violation else f"{verdict} Also: {sentence[len('VIOLATION: '):]}"
        violation = True

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
        "privacy_unit": "one person" if by_person else "one document",
        "rows": {"origin": raw.origin, "raw_rows": len(raw), "loaded_through": "dpkps_core.corpus.load_corpus"},
        "sensitivity_check": sensitivity, "loader_probes": probes,
        "neighbours": {
            "D": {"documents": len(d.corpus), "training_documents": len(d.train_corpus)},
            "D⁻": {"documents": len(minus.corpus), "training_documents": len(minus.train_corpus),
                   "removed": ("every raw row of the training person with the most distinct rare terms of V"
                               if by_person else "the raw row of the training document with the most distinct rare "
                                                 "terms of V"),
                   "removed_rows": len(target_rows), "removed_documents": len(removed_keys),
                   "removed_unique_terms": unique_terms, "training_documents_moved": moved["remove"],
                   "documents_changed_by_loading": changed["remove"]},
            "D⁺": {"documents": len(plus.corpus), "training_documents": len(plus.train_corpus),
                   "added_rows": rows_per_unit, "canary_terms": list(add_canary),
                   "canary_in_training_part": bool(add_planted), "training_documents_moved": moved["add"],
                   "documents_changed_by_loading": changed["add"]},
        },
        "settings": dataclasses.asdict(settings),
        "config": {k: v for k, v in config.to_dict().items() if k not in ("corpus", "text_column", "label_column")},
        "method": "ε_lb = ln(CP_lower(p_num)/CP_upper(p_den)) per event (one-sided Clopper–Pearson), thresholds "
                  "chosen on separate selection trials, Bonferroni over every bound (two per event)",
    }
    warnings = []
    unit_word = "person" if by_person else "document"
    if not add_planted:
        warnings.append(f"The split held the canary {unit_word} out of the training part in every attempt, so the add "
                        f"pair only checks that adding a {unit_word} moves no other one.")
    if changed["remove"] or changed["add"]:
        warnings.append(f"Loading D ± one {unit_word}'s raw rows changed {max(changed.values())} other document(s): the "
                        "loader's decisions depend on other rows (e.g. de-duplication across labels or persons), so "
                        "neighbouring files do not load as neighbouring corpora (DESIGN §2.0).")
    if moved["remove"] or moved["add"]:
        warnings.append(f"Adding or removing one {unit_word} moved {max(moved.values())} other training document(s) "
                        f"across the split: the split is not a per-{unit_word} assignment (DESIGN §2).")
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
