"""Empirical privacy audit of the implementation on the user's own corpus and settings (docs/PRIVACY.md "Empirical audit").

What it does (docs/PRIVACY.md, "Empirical audit"):

* **Neighbour audit.** Around the user's corpus D it builds neighbouring corpora under the relation of the
  release (docs/DESIGN.md §2: add/remove one document, or all documents of one person with a person column) ON THE RAW
  ROWS of the file (:mod:`.raw`, docs/DESIGN.md §2.0): D⁻ = D's rows without the raw row of its most influential training
  document (the one with the most distinct rare terms of V), or without every row of its most influential training
  person; D⁺ = D's rows plus one canary row made of rare public terms of V that occur nowhere in D (under the person
  unit: a canary person with several rows). Each is loaded through the public loader
  (:func:`dpkps_core.corpus.load_corpus`) with the user's loading choices, so a loader that breaks neighbours
  shows; a few cheap *loader probes* (a row whose text occurs under another label removed, a copy of a text under
  another label inserted first) check the same without trials. It runs the exact release path,
  :func:`dpkps_core.method.pipeline.run_sampling` (split → Ṽ (ε_voc) → keyphrases → DP density (ε_kde) → sequences, the
  same functions and settings as a real run), many times with fresh noise on each neighbour, in three stages
  under one Bonferroni correction: the *vocabulary stage* (step 1's mechanism,
  ``build_private_vocabulary``, on each neighbour's counts: cheap, thousands of
  trials; against ε_voc), the *density stage* (``extract_keyphrases`` → ``build_density`` → ``sample_sequences``
  on one fixed Ṽ, no new embeddings; against ε_kde) and the *release stage* (the whole ``run_sampling``; against
  ε_voc + ε_kde). Per trial it computes a few
  statistics of the *released* outputs only (Ṽ with its noisy counts, the sequences), weighted by how the
  neighbours' training contributions differ — computed with the release path's own functions
  (``pipeline.term_counts`` and ``dp.contributions.class_keyphrase_histograms`` / ``prefix_weights``, per person
  under the person unit), never a copy of them; D's training part is read once and each neighbour's statistics
  are D's minus or plus its changed units' contributions (:mod:`.sums`: the statistics are sums over units, so
  this is exactly what recounting gives, and the trials never re-read the corpus): a censored, likelihood-ratio-like sum of
  noisy counts, the number of those terms in Ṽ, and their (per-class) sampled frequency. Each statistic's
  event {s ≥ τ} (or its complement, in either direction) is chosen on a separate
  *selection* set of trials; on the remaining *evaluation* trials the standard construction gives
  ε_lb = ln(CP_lower(p_num) / CP_upper(p_den)) with one-sided Clopper–Pearson bounds, Bonferroni-corrected over
  every bound computed, so max ε_lb is a valid lower bound on the true ε at the stated confidence. If the
  implementation were ε-DP, ε_lb ≤ ε with probability ≥ the confidence; ε_lb > ε is a **violation**. So is, with
  certainty, a pair of loaded neighbours whose contributions differ by more than the sensitivity the noise is
  calibrated for (the vocabulary event's S, a unit's keyphrase weight 1), or a loader probe that changes other
  documents.
* **Canary exposure** ("Canary's Echo", Meeus et al. 2024): k canary documents with rare public keyphrase
  combinations planted in a copy of the corpus; how often their terms and term pairs appear in Ṽ and in the
  sampled sequences, next to the same counts on runs of D without them.

It never touches the real release: every trial runs on an in-memory copy (rows handed to the loader as in-memory
JSON Lines, never written to disk) with its own throwaway
:class:`~dpkps_core.dp.ledger.PrivacyLedger` (the session's and the persistent ledgers are charged nothing),
writes no run folder, and embeds Ṽ through an in-memory memo (:class:`~dpkps_core.embeddings.MemoEmbedder`) —
never the persistent
:class:`~dpkps_core.embeddings.EmbeddingCache`, since noisy vocabularies of neighbouring corpora are functions of
private counts. The audit's results read the private corpus: they are PRIVATE (local only, never in a bundle).
An audit can show that an implementation leaks more than claimed; it can never prove that it does not.

Modules: statistics (Clopper–Pearson, ε lower bounds, event choice, verdict) · raw (the corpus as raw rows:
RawTable, read_raw_table, raw_table_for) · neighbours (targets, canaries, the neighbours' differences, loader
probes) · sums (the neighbours' statistics as D's ± the changed units' contributions) · settings (AuditSettings) · trials (one run of the release path, canary
exposure) · stages (round 1 and the three stages, one function each) · run (run_audit: the stages chained, the
events and the verdict) · report (AuditResult, estimate_audit_time,
render_markdown). Every public name is importable from ``dpkps_core.audit``.
"""

# ruff: noqa: F401 - the package's public names
from dpkps_core.audit.neighbours import (
    MAX_WEIGHTED_TERMS,
    canary_rows,
    canary_text,
    declared_classes,
    density_contributions,
    document_keys,
    influential_document,
    influential_person,
    loader_probes,
    loading_changes,
    rare_public_terms,
)
from dpkps_core.audit.raw import CANARY_PERSON, RawTable, raw_table_for, read_raw_table
from dpkps_core.audit.report import (
    AUDIT_COVERS,
    AUDIT_DOES_NOT_COVER,
    AUDIT_NOTE,
    LIMITATION_NOTE,
    coverage_sentence,
    AuditResult,
    estimate_audit_time,
    format_seconds,
    render_markdown,
)
from dpkps_core.audit.run import run_audit
from dpkps_core.audit.stages import (
    CANARY_PERSON_ROWS,
    DENSITY_STATISTICS,
    NEIGHBOURS,
    PAIRS,
    STAGES,
    STATISTIC_LABELS,
    STATISTIC_NAMES,
    STATISTICS,
    VOCABULARY_STATISTICS,
)
from dpkps_core.audit.settings import MIN_TRIALS, SAMPLER_CHOICES, AuditSettings, Cancel, sampler_note
from dpkps_core.audit.statistics import (
    CONSISTENT,
    INCONCLUSIVE,
    MAX_THRESHOLDS,
    VIOLATION,
    choose_event,
    clopper_pearson,
    epsilon_lower_bound,
    max_certifiable_epsilon,
    trials_to_certify,
    verdict_for,
    verdict_kind,
)
