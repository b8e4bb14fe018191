"""The audit's result, its time estimate and the PRIVATE Markdown report (never part of a release bundle)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping

from dpkps_core.method import pipeline
from dpkps_core.method.density_plan import default_bandwidth
from dpkps_core.audit.neighbours import declared_classes, release_unit
from dpkps_core.audit.raw import RawTable
from dpkps_core.audit.settings import AuditSettings
from dpkps_core.audit.trials import _Runner
from dpkps_core.embeddings import MemoEmbedder
from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.dp.contributions import Keyphrases
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.embeddings import embed_terms
from dpkps_core.progress import format_duration
from dpkps_core.method.vocabulary import PublicVocabulary

AUDIT_NOTE = ("private audit on the real corpus — local only, never part of a release bundle; it charges nothing "
              "to the privacy ledger (every trial runs on a copy with its own throwaway ledger)")
LIMITATION_NOTE = ("An empirical audit gives a LOWER bound on the ε the implementation actually has: it can show a "
                   "leak larger than claimed, never prove that there is none.")
#: What the audit exercises (issue 35 §7): the release path of one run, on neighbouring copies of the corpus.
AUDIT_COVERS: tuple[str, ...] = (
    "the loader, on neighbouring copies of the file's raw rows (one row — or every row of one person — removed, a "
    "canary added), read with the release's own encoding and loading choices",
    "the split into training and held-out parts",
    "the private vocabulary Ṽ (ε_voc, docs/DESIGN.md §2.1)",
    "the keyphrase densities and the sequence sampling on them (ε_kde, docs/DESIGN.md §2.2, §2.4)",
)
#: What it does not exercise, said in every output so that a consistent audit is not read as covering them.
AUDIT_DOES_NOT_COVER: tuple[str, ...] = (
    "the per-unit privacy filter across releases (the persistent ledger's caps and the units it leaves out, "
    "docs/DESIGN.md §2.0: every trial runs with a throwaway ledger and no cap)",
    "the DP forecast (a release of its own, before Ṽ)",
    "the baselines and the method comparison (private prediction, AugPE)",
    "the LLM step (post-processing of the sequences; the disclosure test of the Evaluate page looks at its documents)",
)


def coverage_sentence() -> str:
    """What the audit covers and what it does not, in one paragraph (the CLI, page 9 and the reports say it)."""
    return ("This audit covers " + "; ".join(AUDIT_COVERS) + ". It does NOT cover " + "; ".join(AUDIT_DOES_NOT_COVER)
            + ".")


@dataclasses.dataclass
class AuditResult:
    """The audit's findings (PRIVATE: they read the real corpus). ``to_dict`` is JSON-ready."""

    claimed_epsilon: float
    lower_bound: float
    confidence: float
    violation: bool
    verdict: str
    events: list[dict[str, Any]]
    exposure: dict[str, Any] | None
    info: dict[str, Any]
    #: "violation", "consistent", or "inconclusive" (the trials could not have shown a leak of the claimed ε:
    #: never shown as a pass)
    kind: str = "consistent"

    def line(self) -> str:
        """The one summary line the CLI prints (its format is fixed: scripts and docs/PRIVACY.md read it)."""
        return f"empirical_epsilon_lower_bound: {self.lower_bound:.3f} (claimed: {self.claimed_epsilon:g})"

    def best_event(self) -> dict[str, Any]:
        return max(self.events, key=lambda e: (e["epsilon_lower_bound"], e["point_estimate"]))

    def to_dict(self) -> dict[str, Any]:
        return {"private": True, "note": AUDIT_NOTE, "limitation": LIMITATION_NOTE,
                "covers": list(AUDIT_COVERS), "does_not_cover": list(AUDIT_DOES_NOT_COVER),
                "empirical_epsilon_lower_bound": round(self.lower_bound, 6), "claimed_epsilon": self.claimed_epsilon,
                "confidence": self.confidence, "violation": self.violation, "verdict": self.verdict,
                "verdict_kind": self.kind,
                "summary_line": self.line(), "events": self.events, "exposure": self.exposure, **self.info}


def format_seconds(s: float) -> str:
    """Seconds as the core writes every duration (:func:`dpkps_core.progress.format_duration`)."""
    return format_duration(s)


def estimate_audit_time(
    corpus: Corpus | RawTable, config: SamplingConfig, *, vocabulary: PublicVocabulary, embedder: Any,
    settings: AuditSettings | None = None,
) -> dict[str, Any]:
    """Measure two runs of the release path on D (the first warms the in-memory embeddings) and a few
    vocabulary-stage trials and one density-stage trial, and extrapolate to the audit's plan. Nothing is kept;
    nothing is charged. ``corpus``: the raw rows (:class:`~dpkps_core.audit.raw.RawTable`) or a loaded corpus,
    as for :func:`~dpkps_core.audit.run_audit`.

    Returns ``seconds_per_trial``, ``first_trial_seconds``, ``neighbours``, ``trials``, ``vocabulary_trials``,
    ``density_trials`` and ``estimated_seconds``."""
    settings = (settings or AuditSettings()).validate()
    config = dataclasses.replace(config)
    config.validate()
    raw = corpus if isinstance(corpus, RawTable) else RawTable.from_corpus(corpus, config)
    runner = _Runner(config, vocabulary, MemoEmbedder(embedder), settings)
    t0 = time.perf_counter()
    loaded = raw.load_corpus()
    runner.run(loaded)
    first = time.perf_counter() - t0
    t1 = time.perf_counter()
    runner.run(loaded)
    per_trial = time.perf_counter() - t1
    classes = declared_classes(loaded, config)
    train = pipeline.training_part(loaded, config)
    groups, unit = release_unit(train, config)  # the release path's unit: per person with a person column
    counts = pipeline.term_counts(train.texts, vocabulary, terms_per_doc=config.terms_per_doc, groups=groups)
    t2 = time.perf_counter()
    for _ in range(3):  # a vocabulary-stage trial: step 1's mechanism on counts computed once
        pipeline.build_private_vocabulary((), vocabulary, eps_voc=config.eps_voc, terms_per_doc=config.terms_per_doc,
                                          vocab_size=config.vocab_size,
                                          context=ReleaseContext(noise=runner.noise(), ledger=PrivacyLedger()),
                                          selection_rule=config.selection_rule, counts=counts, neighbouring=unit)
    t_voc = (time.perf_counter() - t2) / 3
    pv = runner.last_vocabulary
    emb = embed_terms(pv.terms, runner.embedder)
    config_d = config
    if config_d.bandwidth is None:
        config_d = dataclasses.replace(config, bandwidth=default_bandwidth(emb))
    kps = Keyphrases.from_lists(pipeline.extract_keyphrases(train.texts, pv, max_per_doc=config.max_keyphrases_per_doc
                                                            or config.length))  # held compactly, as the audit does
    t3 = time.perf_counter()
    noise = runner.noise()
    density, _ = pipeline.build_density(kps, train.labels, classes=classes, embeddings=emb, config=config_d,
                                        private_vocabulary=pv,
                                        context=ReleaseContext(noise=noise, ledger=PrivacyLedger()), groups=groups,
                                        neighbouring=unit)
    pipeline.sample_sequences(density, terms=pv.terms, embeddings=emb, config=config_d, rng=noise.child())
    t_dens = time.perf_counter() - t3
    cheap = 3 + (1 if settings.canary_documents else 0)  # D, D⁻, D⁺ (+ D+k) in the vocabulary and density stages
    n_dens = settings.density_trials or int(min(max(settings.density_time_budget / (cheap * max(t_dens, 1e-6)),
                                                    settings.min_trials), settings.max_density_trials))
    n_voc = settings.vocabulary_trials or int(min(max(settings.vocabulary_time_budget / (cheap * max(t_voc, 1e-6)),
                                                      settings.min_trials * 5), settings.max_vocabulary_trials))
    stages = cheap * (n_voc * t_voc + n_dens * t_dens)
    if settings.trials is not None:
        trials = settings.trials
    else:
        left = settings.time_budget - first * cheap - stages
        trials = int(min(max(2 + left / max(per_trial * 3, 1e-6), settings.min_trials), settings.max_trials))
    estimated = first * cheap + per_trial * 3 * max(trials - 1, 0) + stages
    return {"seconds_per_trial": per_trial, "first_trial_seconds": first, "neighbours": 3, "trials": trials,
            "vocabulary_trials": n_voc, "density_trials": n_dens, "estimated_seconds": estimated}


def _statistics_lines(note: Any) -> list[str]:
    """How the neighbours' statistics were computed (issue 31 §4), for the Markdown section; none for an older
    result that does not say."""
    if not isinstance(note, Mapping):
        return []
    docs = ", ".join(f"{name} {n:,}" for name, n in note.get("documents_of_changed_units", {}).items())
    return ["", f"Neighbour statistics: {note.get('method', '')} (documents of the changed units: {docs})."]


def render_markdown(result: AuditResult | Mapping[str, Any]) -> str:
    """The audit section of a PRIVATE report (Markdown; never part of the release bundle)."""
    r = result.to_dict() if isinstance(result, AuditResult) else dict(result)
    lines = [
        "## Empirical privacy audit (PRIVATE — local only, not for release)", "",
        f"`{r['summary_line']}`", "",
        f"**Verdict:** {r['verdict']}", "",
        f"- Claimed: ε = {r['claimed_epsilon']:g} (ε_voc {r['epsilon_vocabulary']:g} + ε_kde {r['epsilon_kde']:g}), "
        f"pure ε-DP under add/remove {r.get('privacy_unit', 'one document')}.",
        f"- Trials: {r['trials_per_neighbour']} per neighbour ({r['selection_trials']} to choose the events, "
        f"{r['evaluation_trials']} to bound them); {r['runs_of_release_path']} runs of the release path in "
        f"{r['seconds']:g} s; noise: {r['noise']} ({r['noise_sampler']} sampler). {r.get('noise_sampler_note', '')}"
        + (" Cancelled: the finished rounds were analysed." if r.get("cancelled") else ""),
        f"- Vocabulary stage (Ṽ alone, {r['vocabulary_trials_per_neighbour']} trials per neighbour): lower bound "
        f"{r['vocabulary_stage_lower_bound']:.3f} vs ε_voc = {r['epsilon_vocabulary']:g}.",
        f"- Density stage (density + sequences on a fixed Ṽ of {r['density_vocabulary_size']} terms, "
        f"{r['density_trials_per_neighbour']} trials per neighbour): lower bound "
        f"{r['density_stage_lower_bound']:.3f} vs ε_kde = {r['epsilon_kde']:g}.",
        f"- Largest ε these trials can certify: {r['max_certifiable_epsilon_release_stage']:.2f} (release stage), "
        f"{r['max_certifiable_epsilon']:.2f} (vocabulary stage); Bonferroni over {r['bonferroni_events']} events.",
        f"- {r['ledger'][0].upper() + r['ledger'][1:]}. Embeddings: {r['embeddings']}.", "",
        "| stage | pair | statistic | event | p(A) [CP bounds] | p(B) [CP bounds] | ε lower bound | point estimate |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in r["events"]:
        if e.get("threshold") is None:
            lines.append(f"| {e['stage']} | {e['pair']} | {e['statistic']} | — | — | — | 0 | — |")
            continue
        lines.append(f"| {e['stage']} | {e['neighbour_a']} vs {e['neighbour_b']} | {e['statistic']} | {e['event']} "
                     f"(numerator {e['numerator']}) | {e['p_a']:.3f} [{e['ci_a'][0]:.3f}, {e['ci_a'][1]:.3f}] | "
                     f"{e['p_b']:.3f} [{e['ci_b'][0]:.3f}, {e['ci_b'][1]:.3f}] | "
                     f"{e['epsilon_lower_bound']:.3f} | {e['point_estimate']:.2f} |")
    nb = r["neighbours"]
    lines += ["", f"CP bounds: one-sided Clopper–Pearson at α = {r['alpha_per_bound']:.2g} each (Bonferroni over "
                  f"{r['bonferroni_events']} events, two bounds each), on the evaluation trials only.", "",
              f"Neighbours, built on the raw rows of {r['rows']['origin']} ({r['rows']['raw_rows']:,} rows) and each "
                  f"loaded through the public loader: D⁻ removes {nb['D⁻']['removed']} ({nb['D⁻']['removed_rows']} "
                  f"row(s), {nb['D⁻']['removed_unique_terms']} terms no other training unit has); D⁺ adds "
                  f"{nb['D⁺']['added_rows']} canary row(s) of {len(nb['D⁺']['canary_terms'])} rare public terms "
                  f"({', '.join(nb['D⁺']['canary_terms'])}). Other documents changed by loading: "
                  f"{nb['D⁻']['documents_changed_by_loading']} (remove), {nb['D⁺']['documents_changed_by_loading']} "
                  f"(add); training documents that changed side of the split besides them: "
                  f"{nb['D⁻']['training_documents_moved']} (remove), {nb['D⁺']['training_documents_moved']} (add).",
              *_statistics_lines(r.get("neighbour_statistics")),
              "", "| pair | statistic | L1 change between the neighbours | sensitivity the noise assumes |",
              "|---|---|---|---|"]
    for pair, parts in r.get("sensitivity_check", {}).items():
        for part, v in parts.items():
            flag = " **exceeded**" if v["exceeded"] else ""
            lines.append(f"| {pair} | {part} | {v['l1_change']:.4g}{flag} | {v['sensitivity']:g} |")
    ex = r.get("exposure")
    if ex:
        w, o = ex["with_canaries"], ex["without_canaries"]
        plural = "" if ex["canaries"] == 1 else "s"
        lines += ["", "### Canary exposure", "",
                  f"{ex['canaries']} canary document{plural} of {ex['terms_per_canary']} rare public terms "
                  f"({ex['planted_in_training_part']} in the training part), {ex['vocabulary_trials']} vocabulary-stage "
                  f"and {ex['sequence_trials']} density-stage trials each way."
                  + (f" {ex['canaries_with_prefix']} of them begin with an in-distribution prefix of up to "
                     f"{ex['prefix_words']} words (the start of a training document of their class; not shown)."
                     if ex.get("prefix_words") else ""), "",
                  "| | with canaries | without |", "|---|---|---|",
                  f"| canary terms in Ṽ per trial | {w['canary_terms_in_vocabulary_per_trial']:.3f} | "
                  f"{o['canary_terms_in_vocabulary_per_trial']:.3f} |",
                  f"| canary terms per 1,000 sampled keyphrases | {w['canary_occurrences_per_1000_keyphrases']:.3f} | "
                  f"{o['canary_occurrences_per_1000_keyphrases']:.3f} |",
                  f"| sequences with a canary pair per trial | {w['canary_pair_sequences_per_trial']:.3f} | "
                  f"{o['canary_pair_sequences_per_trial']:.3f} |", "", ex["reading"]]
    for warning in r.get("warnings", []):
        lines += ["", f"> {warning}"]
    lines += ["", "### What this audit covers", "", *(f"- {c}" for c in AUDIT_COVERS), "",
              "Not covered:", "", *(f"- {c}" for c in AUDIT_DOES_NOT_COVER)]
    lines += ["", LIMITATION_NOTE, "", f"*{AUDIT_NOTE}.*", ""]
    return "\n".join(lines)
