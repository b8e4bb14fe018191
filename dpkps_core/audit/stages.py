"""The audit's stages (docs/PRIVACY.md "Empirical audit"), one function each, in the order
:func:`dpkps_core.audit.run.run_audit` chains them:

1. :func:`build_neighbours` — round 1: D loaded from its raw rows, D⁻ (its most influential training unit's rows
   removed), D⁺ (a canary unit's rows added) and optionally D+k, each loaded through the public loader (docs/DESIGN.md §2.0)
   and run once through the release path;
2. :func:`loading_differences` and :func:`~dpkps_core.audit.sums.training_contributions` — how the loaded
   neighbours differ, with the release path's own contribution functions: D's training part read once, each neighbour's statistics D's minus
   or plus its changed units' contributions (:mod:`.sums`; every audited statistic is a sum over units);
3. :func:`vocabulary_stage` — the release's step-1 mechanism (``pipeline.build_private_vocabulary``) on those
   counts, many trials (against ε_voc);
4. :func:`density_stage` — keyphrases (matched once) → DP density → sequences on one fixed Ṽ (against ε_kde);
5. :func:`sensitivity_check` — deterministic: how far the neighbours' statistics moved vs the sensitivity;
6. :func:`release_stage` — the whole ``pipeline.run_sampling`` on D, D⁻ and D⁺ (against ε).

Every trial uses a fresh in-memory :class:`~dpkps_core.dp.ledger.PrivacyLedger`; nothing is charged or written.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter, defaultdict
from typing import Any, Callable, Sequence

import numpy as np

from dpkps_core.method import pipeline
from dpkps_core.method.density_plan import default_bandwidth, density_plan
from dpkps_core.audit.neighbours import (
    _CanaryMaker,
    _class_weights_of,
    declared_classes,
    density_contributions,
    document_keys,
    influential_document,
    influential_person,
    loader_probes,
    loading_changes,
    member_weight_distance,
    rare_public_terms,
)
from dpkps_core.audit.canaries import canary_prefixes, plant_canaries
from dpkps_core.audit.sums import (
    Contributions,
    compact_keyphrases,
    neighbour_density_contributions,
    neighbour_keyphrases,
)
from dpkps_core.audit.raw import RawTable
from dpkps_core.audit.report import format_seconds
from dpkps_core.audit.settings import AuditSettings, Cancel
from dpkps_core.audit.trials import _Neighbour, _Release, _Runner
from dpkps_core.embeddings import MemoEmbedder
from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.dp.contributions import Keyphrases
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.embeddings import embed_terms
from dpkps_core.errors import ParameterError
from dpkps_core.method.vocabulary import PublicVocabulary

VOCABULARY_STATISTICS = ("vocabulary_score", "vocabulary_members")
DENSITY_STATISTICS = ("class_sampled_frequency",)
STATISTICS = ("sampled_frequency",)
STAGES = {  # stage -> (statistics, what it runs, which ε it is bounded against)
    "vocabulary": (VOCABULARY_STATISTICS, "pipeline.build_private_vocabulary (step 1's mechanism) on each "
                   "neighbour's counts", "ε_voc"),
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
#: Each statistic in a few plain words, for titles and tables (the labels above say how it is computed).
STATISTIC_NAMES = {
    "vocabulary_score": "Ṽ's noisy counts",
    "vocabulary_members": "terms in Ṽ",
    "sampled_frequency": "terms in the sequences",
    "class_sampled_frequency": "terms in each class's sequences",
}
PAIRS = {
    "remove": ("D⁻", "D", "D vs D without its most influential training unit (raw rows removed before loading)"),
    "add": ("D", "D⁺", "D vs D plus one canary unit of rare public terms (raw rows added before loading)"),
}
#: The two neighbours of each pair, in the order (a, b) the events compare them.
SIDES = {"remove": ("D⁻", "D"), "add": ("D", "D⁺")}
NEIGHBOURS = ("D", "D⁻", "D⁺", "D+k")
#: Rows of the canary person of D⁺ under the person unit (a person with several documents, across classes).
CANARY_PERSON_ROWS = 3


@dataclasses.dataclass
class AuditContext:
    """What every stage of one audit reads: the settings, the raw rows, the runner of the release path, the
    canaries' random generator, the clock, progress and cancellation, and (after round 1) the declared classes."""

    config: SamplingConfig
    settings: AuditSettings
    raw: RawTable
    vocabulary: PublicVocabulary
    memory: MemoEmbedder
    runner: _Runner
    rng: np.random.Generator
    report: Callable[[float, str], None]
    cancel: Cancel | None
    started: float
    classes: list[str] = dataclasses.field(default_factory=list)

    @property
    def by_person(self) -> bool:
        """Whether the unit of privacy is a person (docs/DESIGN.md §2)."""
        return bool(self.config.person_column)

    @property
    def unit_word(self) -> str:
        return "person" if self.by_person else "document"

    def stopped(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def release(self, nb: _Neighbour) -> None:
        """One run of the release path on ``nb``; the first also records its split and training part."""
        rel, split = self.runner.run(nb.corpus)
        nb.releases.append(rel)
        if nb.train_corpus is None:
            nb.split = split
            nb.train_corpus = pipeline.training_part(nb.corpus, self.config)


@dataclasses.dataclass
class Neighbours:
    """D and its neighbours after round 1, with what the audit removed (D⁻) and added (D⁺, D+k)."""

    d: _Neighbour
    minus: _Neighbour
    plus: _Neighbour
    exposure: _Neighbour | None
    first_vocabulary: Any
    target_rows: list[int]
    removed_keys: set[Any]
    unique_terms: int
    target_terms: list[str]
    add_canary: list[str]
    add_planted: bool
    plus_keys: set[Any]
    exposure_canaries: list[list[str]]
    exposure_planted: list[bool]
    rows_per_unit: int

    @property
    def release_stage(self) -> list[_Neighbour]:
        """The neighbours of the release stage: D, D⁻, D⁺."""
        return [self.d, self.minus, self.plus]

    @property
    def cheap(self) -> list[_Neighbour]:
        """The neighbours of the vocabulary and density stages: D, D⁻, D⁺ (+ D+k)."""
        return self.release_stage + ([self.exposure] if self.exposure is not None else [])


def _removal_target(ctx: AuditContext, d: _Neighbour) -> tuple[list[int], set[Any], int, list[str]]:
    """D⁻'s unit: the training person, or the training document of one raw row, with the most distinct rare terms
    of V. Returns its raw rows, the keys of its loaded documents, its number of unique terms and its texts."""
    raw, S, train_d = ctx.raw, ctx.config.terms_per_doc, d.train_corpus
    keys_d = document_keys(d.corpus)
    if ctx.by_person:
        person, unique_terms = influential_person(train_d, ctx.vocabulary, terms_per_doc=S)
        target_rows = raw.rows_of_person(person)
        removed_keys = {k for k in keys_d if k[2] == person}
        target_texts = [t for t, p in zip(train_d.texts, train_d.persons or ()) if p == person]
    else:
        rows_by_key: dict[Any, list[int]] = defaultdict(list)
        for i, key in enumerate(raw.row_keys()):
            rows_by_key[key].append(i)
        train_idx = [i for i in d.split.train if d.corpus.labels[i] in set(ctx.classes)]
        single = [i for i in train_idx if len(rows_by_key.get(keys_d[i], ())) == 1]  # one raw row = one document
        target, unique_terms = influential_document(d.corpus, single or train_idx, ctx.vocabulary, terms_per_doc=S)
        target_rows = rows_by_key.get(keys_d[target], [])[:1]
        removed_keys = {keys_d[target]}
        target_texts = [d.corpus.texts[target]]
    if not target_rows:
        raise ParameterError("The audit could not find the raw row(s) of the document it removes; the loader changes "
                             "the texts it reads (check the loader) or the rows are not the corpus's.")
    return target_rows, removed_keys, unique_terms, target_texts


def build_neighbours(ctx: AuditContext) -> Neighbours:
    """Round 1: D loaded from its raw rows and run once, then the neighbours it defines (raw rows, then the loader),
    each run once through the release path."""
    raw, S, vocabulary = ctx.raw, ctx.config.terms_per_doc, ctx.vocabulary
    ctx.report(0.0, f"round 1: loading D from its {len(raw):,} raw rows and running the release path on it (the "
                    "first run also embeds Ṽ in memory)")
    d = _Neighbour("D", raw.load_corpus(), raw=raw)
    ctx.classes = declared_classes(d.corpus, ctx.config)
    ctx.release(d)
    first_vocabulary = ctx.runner.last_vocabulary
    target_rows, removed_keys, unique_terms, target_texts = _removal_target(ctx, d)
    target_terms = list(dict.fromkeys(vocabulary.terms[i] for found in vocabulary.matcher.first_distinct(
        target_texts, S, max_chars=LIMITS["max_chars_per_doc"]) for i in found))[:max(S, 1) * len(target_texts)]
    minus = _Neighbour("D⁻", raw.without(target_rows).load_corpus(), raw=raw.without(target_rows))
    maker = _CanaryMaker(rare_public_terms(d.corpus, vocabulary), vocabulary, ctx.rng,
                         min_chars=int(raw.load.get("min_chars", 20) or 0))
    rows_per_unit = CANARY_PERSON_ROWS if ctx.by_person else 1
    ctx.report(0.01, f"round 1: D⁺ (one canary {ctx.unit_word})")
    plus, (add_canary,), (add_planted,), plus_keys = plant_canaries(ctx, maker, "D⁺", 1, rows_per_unit)
    exposure_nb: _Neighbour | None = None
    exposure_canaries: list[list[str]] = []
    exposure_planted: list[bool] = []
    if ctx.settings.canary_documents:
        ctx.report(0.02, f"round 1: D+k ({ctx.settings.canary_documents} exposure canaries)")
        prefixes = (canary_prefixes(ctx, d.train_corpus, ctx.settings.canary_documents)
                    if ctx.settings.canary_prefix_words else None)
        exposure_nb, exposure_canaries, exposure_planted, _ = plant_canaries(ctx, maker, "D+k", ctx.settings.canary_documents,
                                                                     rows_per_unit, prefixes)
    ctx.report(0.03, f"round 1: D⁻ (without the most influential training {ctx.unit_word})")
    ctx.release(minus)
    return Neighbours(d, minus, plus, exposure_nb, first_vocabulary, target_rows, removed_keys, unique_terms,
                      target_terms, add_canary, add_planted, plus_keys, exposure_canaries, exposure_planted,
                      rows_per_unit)


def loading_differences(ctx: AuditContext, nbs: Neighbours
                        ) -> tuple[dict[str, int], dict[str, int], list[dict[str, Any]]]:
    """How the loaded neighbours differ (docs/DESIGN.md §2.0: by the removed / added unit's documents only): training
    documents moved across the split, documents the loader changed, and the loader probes."""
    train_keys = {nb.name: set(document_keys(nb.train_corpus)) for nb in nbs.release_stage}
    moved = {"remove": len((train_keys["D"] ^ train_keys["D⁻"]) - nbs.removed_keys),
             "add": len((train_keys["D"] ^ train_keys["D⁺"]) - nbs.plus_keys)}
    changed = {"remove": loading_changes(nbs.d.corpus, nbs.minus.corpus, expected=nbs.removed_keys),
               "add": loading_changes(nbs.d.corpus, nbs.plus.corpus, expected=nbs.plus_keys)}
    ctx.report(0.03, "round 1: loader probes (neighbouring files a cross-row de-duplication would break)")
    probes = loader_probes(ctx.raw, nbs.d.corpus, ctx.classes, by_person=ctx.by_person)
    return moved, changed, probes


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


@dataclasses.dataclass
class VocabularyStage:
    """The vocabulary stage's releases per neighbour, the first trial's vocabulary event and the planned trials."""

    releases: dict[str, list[_Release]]
    events: list[Any]
    planned: int


def vocabulary_stage(ctx: AuditContext, nbs: Neighbours, contributions: Contributions) -> VocabularyStage:
    """The release path's vocabulary mechanism alone, many trials on each neighbour's vocabulary histogram
    (against ε_voc).

    Each trial runs :func:`dpkps_core.method.pipeline.build_private_vocabulary` — the release's own step 1: its
    event, its Laplace(S/ε_voc) on every term of V with the release's sampler, its cut — on the neighbour's counts
    (:func:`~dpkps_core.audit.sums.training_contributions`, computed once), with a fresh noise source and a
    throwaway ledger; the training part is not read again per trial (its admission and counting ran in round 1's
    release-path runs, and run again in the release stage)."""
    releases: dict[str, list[_Release]] = {nb.name: [] for nb in nbs.cheap}
    config, counts, units = ctx.config, contributions.counts, contributions.units
    events: list[Any] = []

    def trial(name: str) -> None:
        ledger = PrivacyLedger()
        pv = pipeline.build_private_vocabulary(
            (), ctx.vocabulary, eps_voc=config.eps_voc, terms_per_doc=config.terms_per_doc,
            vocab_size=config.vocab_size, context=ReleaseContext(noise=ctx.runner.noise(), ledger=ledger),
            selection_rule=config.selection_rule, counts=counts[name], neighbouring=units[name][1])
        if not events:
            events.extend(e for e in ledger.events if e.step == "vocabulary")
        releases[name].append(_Release.of_vocabulary(pv))

    s = ctx.settings
    planned = _stage_trials(trial, list(releases), trials=s.vocabulary_trials, time_budget=s.vocabulary_time_budget,
                            minimum=s.min_trials * 5, maximum=s.max_vocabulary_trials, stopped=ctx.stopped, every=50,
                            progress=lambda i, n: ctx.report(0.03 + 0.17 * i / n,
                                                             f"vocabulary stage: trial {i}/{n} on each neighbour"))
    return VocabularyStage(releases, events, planned)


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


@dataclasses.dataclass
class DensityStage:
    """The density stage on one fixed Ṽ: its vocabulary, embeddings, config and plan, each neighbour's keyphrase
    input, contributions and their difference from D's, the statistics' weights per pair, and the trials'
    statistics and exposure."""

    vocabulary: Any
    embeddings: np.ndarray
    config: SamplingConfig
    plan: Any
    inputs: dict[str, tuple[Keyphrases, tuple[str, ...], Any, list[Any]]]
    contributions: dict[str, np.ndarray]
    weights: dict[str, dict[Any, float]]
    values: dict[str, list[dict[str, float]]]
    exposure: dict[str, list[dict[str, Any]]]
    deltas: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)


def _density_setup(ctx: AuditContext, nbs: Neighbours, contributions: Contributions) -> DensityStage:
    """One fixed Ṽ (D's first Ṽ plus the audit terms, so that the removed unit's and the canaries' terms can
    show), embedded once, and each neighbour's keyphrases and contributions on it.

    D's training part is matched once (the release's own extraction, held compactly); a neighbour's keyphrases are
    D's rows for the texts D has and the canaries' own, and its keyphrase weights D's minus or plus its changed
    units' (:mod:`.sums`) — no neighbour's training part is read again."""
    config, classes, units = ctx.config, ctx.classes, contributions.units
    pv_audit = _audit_vocabulary(nbs.first_vocabulary, list(nbs.add_canary) + nbs.target_terms
                                 + [t for c in nbs.exposure_canaries for t in c])
    emb_audit = embed_terms(pv_audit.terms, ctx.memory)
    config_d = config
    if config_d.bandwidth is None:  # what build_density would compute from these embeddings, once
        config_d = dataclasses.replace(config, bandwidth=default_bandwidth(emb_audit))
    plan = density_plan(config_d, n_classes=len(classes), private_vocabulary=pv_audit, embeddings=emb_audit)
    M, size, base = plan.max_keyphrases_per_doc, len(pv_audit), nbs.d.train_corpus
    kps_d = compact_keyphrases(base, pv_audit, max_per_doc=M)
    hist_d = density_contributions(kps_d, base.labels, classes, size, kind=plan.kind, max_per_doc=M,
                                   groups=units["D"][0])
    inputs: dict[str, tuple[Keyphrases, tuple[str, ...], Any, list[Any]]] = {}
    hists: dict[str, np.ndarray] = {"D": hist_d}
    deltas: dict[str, np.ndarray] = {"D": np.zeros_like(hist_d)}
    for nb in nbs.cheap:
        train = nb.train_corpus
        if nb.name == "D":
            kps = kps_d
        else:
            kps = neighbour_keyphrases(kps_d, base, train, pv_audit, max_per_doc=M)
            hists[nb.name], deltas[nb.name] = neighbour_density_contributions(
                hist_d, kps_d, base, kps, train, contributions.changes[nb.name], classes, size, kind=plan.kind,
                max_per_doc=M, by_person=ctx.by_person)
        inputs[nb.name] = (kps, train.labels, units[nb.name][0], document_keys(train))
    weights = {"remove": _class_weights_of(-deltas["D⁻"], classes, pv_audit.terms),
               "add": _class_weights_of(deltas["D⁺"], classes, pv_audit.terms)}
    return DensityStage(pv_audit, emb_audit, config_d, plan, inputs, hists, weights,
                        {nb.name: [] for nb in nbs.cheap}, {"D": [], "D+k": []}, deltas)


def density_stage(ctx: AuditContext, nbs: Neighbours, contributions: Contributions) -> DensityStage:
    """Keyphrases → DP density → sequences on ONE fixed Ṽ, many trials (against ε_kde); no new embeddings per
    trial, and no text matched per trial (the keyphrases are computed once, :func:`_density_setup`)."""
    st = _density_setup(ctx, nbs, contributions)
    units = contributions.units
    first_position = st.plan.kind != "independent"  # iterative: the first member scores the first position

    def trial(name: str) -> None:
        noise = ctx.runner.noise()
        kps, labels, groups, _ = st.inputs[name]
        density, _ = pipeline.build_density(kps, labels, classes=ctx.classes, embeddings=st.embeddings,
                                            config=st.config, private_vocabulary=st.vocabulary,
                                            context=ReleaseContext(noise=noise, ledger=PrivacyLedger()), groups=groups,
                                            neighbouring=units[name][1])
        outcome = pipeline.sample_sequences(density, terms=st.vocabulary.terms, embeddings=st.embeddings,
                                            config=st.config, rng=noise.child())
        freq = Counter((q.label, k) for q in outcome.sequences
                       for k in (q.keyphrases[:1] if first_position else q.keyphrases))
        st.values[name].append({pair: sum(w * freq.get(key, 0) for key, w in st.weights[pair].items())
                                for pair in PAIRS})
        if nbs.exposure_canaries and name in st.exposure:
            seqs = [q.keyphrases for q in outcome.sequences]
            rel = _Release({}, 0.0, Counter(k for q in seqs for k in q), tuple(frozenset(q) for q in seqs),
                           sum(len(q) for q in seqs))
            st.exposure[name].append(rel.exposure(nbs.exposure_canaries))

    s = ctx.settings
    _stage_trials(trial, list(st.values), trials=s.density_trials, time_budget=s.density_time_budget,
                  minimum=s.min_trials, maximum=s.max_density_trials, stopped=ctx.stopped, every=10,
                  progress=lambda i, n: ctx.report(0.2 + 0.1 * i / n, f"density stage: trial {i}/{n} on each neighbour"))
    return st


def sensitivity_check(ctx: AuditContext, counts: dict[str, np.ndarray], voc: VocabularyStage, dens: DensityStage
                      ) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, dict[str, Any]]]]:
    """Deterministic: how far each pair's statistics moved (L1) vs the sensitivity the noise assumes (the
    vocabulary event's S, a unit's keyphrase weight 1). Returns the check per pair and the exceeded parts."""
    voc_bound = float(voc.events[0].sensitivity) if voc.events else float(ctx.config.terms_per_doc)
    plan = dens.plan
    sensitivity: dict[str, dict[str, Any]] = {}
    for pair, (a_name, b_name) in SIDES.items():
        voc_l1 = float(np.abs(counts[b_name] - counts[a_name]).sum())
        if plan.density == "rff" and plan.kind != "independent":
            dens_l1 = member_weight_distance(dens.inputs[a_name][:4], dens.inputs[b_name][:4], ctx.classes,
                                             kind=plan.kind, length=ctx.config.length,
                                             max_per_doc=plan.max_keyphrases_per_doc)
        else:
            dens_l1 = float(np.abs(dens.deltas[b_name] - dens.deltas[a_name]).sum())
        sensitivity[pair] = {
            "vocabulary": {"l1_change": voc_l1, "sensitivity": voc_bound, "exceeded": voc_l1 > voc_bound + 1e-9},
            "density": {"l1_change": dens_l1, "sensitivity": 1.0, "exceeded": dens_l1 > 1.0 + 1e-9},
        }
    exceeded = [(pair, part, v) for pair, parts in sensitivity.items() for part, v in parts.items() if v["exceeded"]]
    return sensitivity, exceeded


@dataclasses.dataclass
class ReleaseStage:
    """The release stage's plan (sent to ``on_plan``), its planned trials, and how it ended."""

    planned: int
    plan: dict[str, Any]
    cancelled: bool
    out_of_time: bool


def release_stage(ctx: AuditContext, nbs: Neighbours, *, vocabulary_trials: int,
                  on_plan: Callable[[dict[str, Any]], None] | None) -> ReleaseStage:
    """The whole release path on D, D⁻ and D⁺ (against ε): a timed round, the plan, then as many rounds as the
    settings ask for (or fit the time budget), unless cancelled."""
    neighbours, s, started = nbs.release_stage, ctx.settings, ctx.started
    t_round = time.perf_counter()
    for nb in neighbours:
        if ctx.stopped():
            break
        nb.releases.append(ctx.runner.run(nb.corpus)[0])
    t_round = time.perf_counter() - t_round
    if s.trials is not None:
        n = s.trials
    else:
        left = s.time_budget - (time.perf_counter() - started)
        n = int(min(max(2 + left / max(t_round, 1e-6), s.min_trials), s.max_trials))
    plan = {"trials_per_neighbour": n, "neighbours": len(neighbours), "seconds_per_round": round(t_round, 3),
            "vocabulary_trials_per_neighbour": vocabulary_trials,
            "estimated_seconds": round((time.perf_counter() - started) + max(n - 2, 0) * t_round, 1)}
    if on_plan is not None:
        on_plan(dict(plan))
    total_runs = n * len(neighbours)
    deadline = None if s.trials is not None else started + s.time_budget
    cancelled = out_of_time = False
    for r in range(2, n):
        if deadline is not None and r >= s.min_trials and time.perf_counter() > deadline:
            out_of_time = True  # the machine got slower than measured: keep the time budget
            break
        for nb in neighbours:
            if ctx.stopped():
                cancelled = True
                break
            nb.releases.append(ctx.runner.run(nb.corpus)[0])
            done = sum(len(x.releases) for x in neighbours)
            eta = (total_runs - done) * t_round / len(neighbours)
            ctx.report(0.3 + 0.7 * min(done / total_runs, 1.0),
                       f"release stage: trial {r + 1}/{n} on {nb.name} — about {format_seconds(eta)} left")
        if cancelled:
            break
    return ReleaseStage(n, plan, cancelled or ctx.stopped(), out_of_time)
