"""``python -m dpkps_core audit``: empirical privacy audit of the release path on your corpus (docs/PRIVACY.md, "Empirical audit").

Runs :func:`dpkps_core.audit.run_audit` with the same corpus, vocabulary and sampling options as ``sample``,
prints ``empirical_epsilon_lower_bound: X (claimed: Y)`` and the verdict, and writes a PRIVATE JSON report and
Markdown section (``--out``; never part of a release bundle). It charges nothing to any privacy ledger.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from dpkps_core import audit
from dpkps_core.cli import common as cli_common
from dpkps_core.method.config import load_config_corpus, load_vocabulary_for
from dpkps_core.embeddings import get_embedder


def settings_from_args(args: argparse.Namespace) -> audit.AuditSettings:
    return audit.AuditSettings(
        trials=args.trials, time_budget=args.time_budget, vocabulary_trials=args.vocabulary_trials,
        density_trials=args.density_trials, confidence=args.confidence,
        selection_fraction=args.selection_fraction, canary_documents=args.canaries, canary_terms=args.canary_terms,
        canary_prefix_words=args.canary_prefix_words,
        noise_sampler=args.audit_sampler, seed=args.audit_seed,
    ).validate()


def _write_private(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    try:
        os.chmod(path, 0o600)
    except OSError:
        pass


def _cmd_audit(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    cli_common.check_output_dir(args.out, "--out")  # before the audit's trials, not after them
    config = cli_common.config_from_args(args)
    settings = settings_from_args(args)
    load_config_corpus(config)  # the same local checks as `sample` (declared classes, columns) before anything runs
    rows = audit.raw_table_for(config)  # the file's raw rows: the audit builds its neighbours on them (docs/DESIGN.md §2.0)
    vocabulary = load_vocabulary_for(config)
    embedder = get_embedder(config.embedding_model)
    print("Empirical privacy audit — runs on in-memory copies with throwaway ledgers: it charges nothing to the "
          "privacy ledger and writes nothing to a run folder or bundle.")
    print(audit.coverage_sentence())
    with tqdm(total=1000, desc="audit", unit="‰", leave=False, disable=args.quiet) as bar:
        def progress(frac: float, message: str) -> None:
            bar.n = int(1000 * frac)
            bar.set_postfix_str(message[:70])
            bar.refresh()

        def on_plan(plan: dict) -> None:
            bar.write(f"plan: {plan['trials_per_neighbour']} trials on each of {plan['neighbours']} neighbouring "
                      f"corpora; measured {plan['seconds_per_round']:.2f} s per round → about "
                      f"{audit.format_seconds(plan['estimated_seconds'])} in all")

        result = audit.run_audit(rows, config, vocabulary=vocabulary, embedder=embedder, settings=settings,
                                 progress=progress, on_plan=on_plan)
    r = result.to_dict()
    best = result.best_event()
    print(result.line())
    print(result.verdict)
    print(f"vocabulary stage (Ṽ alone): lower bound {r['vocabulary_stage_lower_bound']:.3f} vs ε_voc = "
          f"{r['epsilon_vocabulary']:g}, {r['vocabulary_trials_per_neighbour']} trials per neighbour")
    print(f"density stage (density + sequences on a fixed Ṽ): lower bound {r['density_stage_lower_bound']:.3f} vs "
          f"ε_kde = {r['epsilon_kde']:g}, {r['density_trials_per_neighbour']} trials per neighbour")
    print(f"release stage: {r['trials_per_neighbour']} trials per neighbour ({r['evaluation_trials']} for the bound), "
          f"{r['runs_of_release_path']} runs of the release path; largest certifiable ε: "
          f"{r['max_certifiable_epsilon_release_stage']:.2f} (vocabulary stage: {r['max_certifiable_epsilon']:.2f})")
    print(f"wall time: {r['seconds']:g} s" + (" (stopped at the time budget)" if r.get("stopped_at_time_budget") else ""))
    print(f"noise: {r['noise_sampler_note']}")
    if best.get("threshold") is not None:
        print(f"strongest event: {best['neighbour_a']} vs {best['neighbour_b']}, {best['event']}: "
              f"p = {best['p_a']:.3f} vs {best['p_b']:.3f}, ε ≥ {best['epsilon_lower_bound']:.3f}")
    ex = r.get("exposure")
    if ex:
        w, o = ex["with_canaries"], ex["without_canaries"]
        print(f"canary exposure: {w['canary_occurrences_per_1000_keyphrases']:.3f} canary terms per 1,000 sampled "
              f"keyphrases with {ex['canaries']} canaries planted vs {o['canary_occurrences_per_1000_keyphrases']:.3f} "
              f"without; canary terms in Ṽ per trial {w['canary_terms_in_vocabulary_per_trial']:.2f} vs "
              f"{o['canary_terms_in_vocabulary_per_trial']:.2f}"
              + (f"; {ex['canaries_with_prefix']} of {ex['canaries']} canaries with an in-distribution prefix of up "
                 f"to {ex['prefix_words']} words" if ex.get("prefix_words") else ""))
    for warning in r.get("warnings", []):
        print(f"warning: {warning}")
    print("The ledger was charged nothing (each trial used its own throwaway ledger).")
    print("Not covered by this audit: " + "; ".join(audit.AUDIT_DOES_NOT_COVER) + ".")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        os.chmod(out, 0o700)
        _write_private(out / "audit_report.json", json.dumps(r, indent=2, ensure_ascii=False))
        _write_private(out / "audit_report.md", audit.render_markdown(result))
        print(f"wrote the PRIVATE audit report (local only, never part of a bundle) to {out / 'audit_report.json'} "
              f"and {out / 'audit_report.md'}")
    return 1 if (result.violation and args.fail_on_violation) else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "audit", help="empirical privacy audit of the release path on your corpus (private, costs no ε)",
        description="Runs the exact release path many times on neighbouring copies of your corpus, built on the "
                    "file's raw rows and loaded as `sample` loads them (one row — or, with --person-column, every row "
                    "of one person — removed; a canary row or canary person added), and reports an empirical lower bound on ε with Clopper–Pearson "
                    "confidence, next to the claimed ε, plus canary exposure. A lower bound, not a proof. Nothing "
                    "is released and no ledger is charged. It covers the loader, the split, Ṽ (ε_voc), the densities and "
                    "the sequence sampling (ε_kde); NOT the per-unit privacy filter across releases, the DP "
                    "forecast, the baselines or the LLM step. The corpus file is read with --encoding, as sample "
                    "reads it.",
    )
    cli_common.add_sampling_arguments(p)
    d = audit.AuditSettings()
    g = p.add_argument_group("audit")
    g.add_argument("--trials", type=int, default=None,
                   help="runs of the release path per neighbouring corpus (default: as many as fit --time-budget, at "
                        f"least {d.min_trials})")
    g.add_argument("--time-budget", type=float, default=d.time_budget,
                   help="seconds the trials may take when --trials is not given (default %(default)s)")
    g.add_argument("--vocabulary-trials", type=int, default=None,
                   help="trials of the cheap vocabulary stage (private vocabulary alone, bounded against ε_voc) per "
                        f"neighbour (default: as many as fit {d.vocabulary_time_budget:g} s, at most "
                        f"{d.max_vocabulary_trials})")
    g.add_argument("--density-trials", type=int, default=None,
                   help="trials of the density stage (density + sequences on a fixed Ṽ, bounded against ε_kde) per "
                        f"neighbour (default: as many as fit {d.density_time_budget:g} s, at most {d.max_density_trials})")
    g.add_argument("--confidence", type=float, default=d.confidence, help="confidence of the bound (default %(default)s)")
    g.add_argument("--selection-fraction", type=float, default=d.selection_fraction,
                   help="share of trials used only to choose the events (default 1/3)")
    g.add_argument("--canaries", type=int, default=d.canary_documents,
                   help="canary documents of the exposure test; 0 skips it (default %(default)s)")
    g.add_argument("--canary-terms", type=int, default=None, help="rare public terms per canary (default S)")
    g.add_argument("--canary-prefix-words", type=int, default=d.canary_prefix_words,
                   help="give each exposure canary an in-distribution prefix of this many words (the start of a "
                        "training document of its class, kept in memory only) before its rare public terms, as in "
                        "The Canary's Echo; 0 = rare terms only (default %(default)s)")
    g.add_argument("--audit-sampler", choices=audit.SAMPLER_CHOICES, default=d.noise_sampler,
                   help="noise sampler of the trials: numpy (default, fast; same distributions), opendp, or release "
                        "(the --noise-sampler of the release; OpenDP takes seconds per trial on 50k terms)")
    g.add_argument("--audit-seed", type=int, default=None, help="seed the audit (reproducible tests); default OS entropy")
    g.add_argument("--out", help="folder for the PRIVATE audit_report.json and audit_report.md (never exported)")
    g.add_argument("--fail-on-violation", action="store_true", help="exit with status 1 when a violation is found")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_audit)
