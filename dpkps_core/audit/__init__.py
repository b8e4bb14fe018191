"""Empirical privacy audit of the implementation on the user's own corpus and settings (issue 11 §5).

What it does (docs/PRIVACY.md, "Empirical audit"):

* **Neighbour audit.** Around the user's corpus D it builds two neighbouring corpora under the add/remove-one-
  document relation (DESIGN §2): D⁻ = D without its most influential training document (the one with the most
  distinct rare terms of V) and D⁺ = D + one synthetic canary document made of rare public terms of V that occur
  nowhere in D. It runs the exact release path, :func:`dpkps_core.pipeline.run_sampling` (split → Ṽ (ε_voc) →
  keyphrases → DP density (ε_kde) → sequences, the same functions and settings as a real run), many times with
  fresh noise on each neighbour, in three stages under one Bonferroni correction: the *vocabulary stage*
  (``build_private_vocabulary`` alone: cheap, thousands of trials; against ε_voc), the *density stage*
  (``extract_keyphrases`` → ``build_density`` → ``sample_sequences`` on one fixed Ṽ, no new embeddings; against
  ε_kde) and the *release stage* (the whole ``run_sampling``; against ε_voc + ε_kde). Per trial it computes a few
  statistics of the *released* outputs only (Ṽ with its noisy counts, the sequences), weighted by how the
  neighbours' training term (or per-class keyphrase) counts differ: a censored, likelihood-ratio-like sum of
  noisy counts, the number of those terms in Ṽ, and their (per-class) sampled frequency. Each statistic's
  event {s ≥ τ} (or its complement, in either direction) is chosen on a separate
  *selection* set of trials; on the remaining *evaluation* trials the standard construction gives
  ε_lb = ln(CP_lower(p_num) / CP_upper(p_den)) with one-sided Clopper–Pearson bounds, Bonferroni-corrected over
  every bound computed, so max ε_lb is a valid lower bound on the true ε at the stated confidence. If the
  implementation were ε-DP, ε_lb ≤ ε with probability ≥ the confidence; ε_lb > ε is a **violation**.
* **Canary exposure** ("Canary's Echo", Meeus et al. 2024): k canary documents with rare public keyphrase
  combinations planted in a copy of the corpus; how often their terms and term pairs appear in Ṽ and in the
  sampled sequences, next to the same counts on runs of D without them.

It never touches the real release: every trial runs on an in-memory copy with its own throwaway
:class:`~dpkps_core.dp.ledger.PrivacyLedger` (the session's and the persistent ledgers are charged nothing),
writes no run folder, and embeds Ṽ through an in-memory dict (:class:`MemoryEmbedder`) — never the persistent
:class:`~dpkps_core.embeddings.EmbeddingCache`, since noisy vocabularies of neighbouring corpora are functions of
private counts. The audit's results read the private corpus: they are PRIVATE (local only, never in a bundle).
An audit can show that an implementation leaks more than claimed; it can never prove that it does not.

Modules: statistics (Clopper–Pearson, ε lower bounds, event choice, verdict) · neighbours (D⁻, D⁺, canaries, the
neighbours' differences) · settings (AuditSettings) · trials (one run of the release path, MemoryEmbedder, canary
exposure) · run (run_audit: the three stages and the events) · report (AuditResult, estimate_audit_time,
render_markdown). Every public name is importable from ``dpkps_core.audit``.
"""

# ruff: noqa: F401 - the package's public names
from dpkps_core.audit.neighbours import (
    MAX_WEIGHTED_TERMS,
    canary_text,
    declared_classes,
    influential_document,
    rare_public_terms,
)
from dpkps_core.audit.report import (
    AUDIT_NOTE,
    LIMITATION_NOTE,
    AuditResult,
    estimate_audit_time,
    format_seconds,
    render_markdown,
)
from dpkps_core.audit.run import (
    DENSITY_STATISTICS,
    NEIGHBOURS,
    PAIRS,
    STAGES,
    STATISTIC_LABELS,
    STATISTICS,
    VOCABULARY_STATISTICS,
    run_audit,
)
from dpkps_core.audit.settings import MIN_TRIALS, SAMPLER_CHOICES, AuditSettings, Cancel
from dpkps_core.audit.statistics import (
    MAX_THRESHOLDS,
    choose_event,
    clopper_pearson,
    epsilon_lower_bound,
    max_certifiable_epsilon,
    verdict_for,
)
from dpkps_core.audit.trials import MemoryEmbedder
