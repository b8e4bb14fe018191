"""``python -m dpkps_core evaluate | sweep | forecast``: local utility evaluation (docs/DESIGN.md §5, §6).

Every output of these commands is computed on the REAL corpus and is PRIVATE (local to the data owner, never
part of a release bundle); the files say so (``"private": true``). Nothing prints document text.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dpkps_core.device import DEVICE_CHOICES



def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _stderr_progress(prefix: str):
    last = [0.0]

    def progress(frac: float, message: str) -> None:
        now = time.perf_counter()
        if now - last[0] >= 2.0 or frac >= 1.0:
            last[0] = now
            print(f"[{prefix} {100 * frac:5.1f}%] {message}", file=sys.stderr, flush=True)

    return progress


# ------------------------------------------------------------------------------------------ evaluate

def _cmd_evaluate(args: argparse.Namespace) -> int:
    from dpkps_core.cli.common import check_input_path, check_output_dir
    from dpkps_core.evaluation import PRIVATE_NOTE, evaluate_run, write_evaluation

    check_input_path(args.run, "--run", kind="folder")
    check_output_dir(args.run, "--run")  # evaluation.json is written into the run folder
    if args.disclosure or args.disclosure_only or args.identifiers:
        _disclosure(args)
        if args.disclosure_only:
            return 0
    result = evaluate_run(args.run, seeds=args.seeds, classifier=args.classifier, coral=args.coral,
                          coral_weight=args.coral_weight, progress=_stderr_progress("evaluate"), device=args.device,
                          max_test_documents=args.max_test_documents or None)
    path = write_evaluation(result, args.run)
    for line in result.summary_lines():
        print(line)
    print(f"wrote {path} (PRIVATE: {PRIVATE_NOTE}; never exported)")
    return 0


def _disclosure(args: argparse.Namespace) -> None:
    """The disclosure test of the run (issue 34 §2; dpkps_core.evaluation.disclosure): its synthetic documents
    against its training part and as many held-out documents → DIR/disclosure.json (PRIVATE, owner-only)."""
    from dpkps_core.cli.common import check_input_path
    from dpkps_core.evaluation import PRIVATE_NOTE
    from dpkps_core.evaluation.disclosure import DisclosureSettings, disclosure_for_run, write_disclosure
    from dpkps_core.evaluation.run import load_run

    identifiers: tuple[str, ...] = ()
    if args.identifiers:
        path = check_input_path(args.identifiers, "--identifiers", kind="file")
        identifiers = tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    settings = DisclosureSettings(identifiers=identifiers, confidence=args.disclosure_confidence)
    result = disclosure_for_run(load_run(args.run), settings=settings)
    path = write_disclosure(result, args.run)
    print(f"disclosure test: {result.verdict.upper()} — {result.sentence()}")
    print(f"wrote {path} (PRIVATE: {PRIVATE_NOTE}; never exported)")


# --------------------------------------------------------------------------------------------- sweep

def _cmd_sweep(args: argparse.Namespace) -> int:
    from dpkps_core.cli.common import check_output_dir, config_from_args
    from dpkps_core.method.config import load_config_corpus, load_vocabulary_for
    from dpkps_core.embeddings import EmbeddingCache, get_embedder
    from dpkps_core.evaluation import PRIVATE_NOTE, run_sweep, sweep_summary, write_sweep_outputs

    check_output_dir(args.out, "--out")
    config = config_from_args(args)
    methods = args.methods
    corpus = load_config_corpus(config)
    vocabulary = load_vocabulary_for(config)
    t = time.perf_counter()
    df = run_sweep(corpus, config=config, vocabulary=vocabulary, embedder=get_embedder(config.embedding_model),
                   cache=EmbeddingCache(), eps_voc_grid=args.eps_voc_grid, eps_kde_grid=args.eps_kde_grid,
                   methods=methods, seeds=args.seeds, per_class=args.per_class, progress=_stderr_progress("sweep"))
    df.attrs["seconds"] = round(time.perf_counter() - t, 1)
    paths = write_sweep_outputs(df, args.out)
    s = sweep_summary(df)
    print(f"ε sweep ({PRIVATE_NOTE}); chance {df['chance_accuracy'].iloc[0]:.3f}, "
          f"real keyphrase baseline {df['real_keyphrase_baseline_accuracy'].mean():.3f}")
    print(f"{'method':<16} {'ε_voc':>6} {'ε_kde':>6}  {'no-LLM accuracy':>16}  {'vocab recall':>12}")
    for _, r in s.iterrows():
        print(f"{r['method']:<16} {r['eps_voc']:>6g} {r['eps_kde']:>6g}  "
              f"{r['no_llm_accuracy_mean']:>8.3f} ± {r['no_llm_accuracy_sd']:.3f}  {r['vocabulary_recall_mean']:>12.3f}")
    print("wrote " + ", ".join(str(p) for p in paths.values()) + " (PRIVATE)")
    if "png" not in paths:
        print("no PNG: neither kaleido nor matplotlib is installed (the HTML holds the figures)")
    return 0


# ------------------------------------------------------------------------------------------ forecast

def _cmd_forecast(args: argparse.Namespace) -> int:
    from dpkps_core.cli.common import check_output_dir, config_from_args
    from dpkps_core.method.config import load_config_corpus, load_vocabulary_for
    from dpkps_core.embeddings import get_embedder
    from dpkps_core.evaluation.forecast_exact import forecast
    from dpkps_core.evaluation.forecast_outlook import forecast_figure
    from dpkps_core.evaluation.metrics import PRIVATE_NOTE
    from dpkps_core.method.split import split_documents

    check_output_dir(args.out, "--out")
    config = config_from_args(args)
    corpus = load_config_corpus(config)
    vocabulary = load_vocabulary_for(config)
    split = split_documents(corpus, test_fraction=config.test_fraction, client_fraction=config.client_fraction,
                            seed=config.split_seed, by_person=bool(config.person_column))
    train = corpus.subset(split.train)
    if args.exact:  # private, local — not covered by ε (docs/PRIVACY.md "Previews that steer choices")
        needs_embedder = config.density_kind == "rff" and not args.no_embedder
        f = forecast(train.texts, train.labels, vocabulary, config,
                     embedder=get_embedder(config.embedding_model) if needs_embedder else None)
        print(f"EXACT forecast for ε_voc = {f.eps_voc:g}, ε_kde = {f.eps_kde:g} ({f.method}, {f.density}) — "
              f"private, local — not covered by ε ({PRIVATE_NOTE}); no ε was spent, but a setting chosen from it "
              "is a use of the data ε does not cover.")
    else:  # the default: a small charged DP release, then post-processing
        from dpkps_core.cli.ledger import corpus_ledger, ledger_summary
        from dpkps_core.dp.release import ReleaseContext
        from dpkps_core.dp.rng import NoiseSource
        from dpkps_core.evaluation.forecast_dp import dp_forecast

        ledger = corpus_ledger(corpus, tool="cli forecast", out=args.out, cap=config.epsilon_cap)
        noise = NoiseSource(config.seed, sampler=config.noise_sampler)
        _, f = dp_forecast(train, vocabulary, config, context=ReleaseContext(noise=noise, ledger=ledger),
                           epsilon=args.eps_forecast, by_person=bool(config.person_column))
        print(f"DP forecast for ε_voc = {f.eps_voc:g}, ε_kde = {f.eps_kde:g} ({f.method}, {f.density}) — from a DP "
              f"release of ε_forecast = {f.epsilon_forecast:g} charged to this corpus's ledger; choosing settings "
              "from it is covered by ε.")
        print(ledger_summary(ledger))
    print(f"  training documents: {f.n_documents:,}; per class: "
          + ", ".join(f"{c} {n:,}" for c, n in f.class_sizes.items()))
    print(f"  public vocabulary |V| = {f.public_vocabulary_size:,}; terms occurring in the corpus: {f.terms_in_corpus:,}")
    print(f"  noise scale S/ε_voc = {f.noise_scale:g}; noise floor ≈ {f.noise_floor:,.1f}; terms with a true count "
          f"above it: {f.terms_above_floor:,}; {f.vocab_size:,}-th largest true count: {f.nth_true_count:g}")
    print(f"  expected share of Ṽ that is pure noise: {f.expected_noise_share:.1%} "
          f"(≈ {f.expected_real_terms:,.0f} real terms)")
    for c, v in f.kde.items():
        print(f"  density {c}: documents {v['documents']:,}, error {v['error']:.4g} vs spread {v['spread']:.4g} "
              f"→ signal/noise {v['snr']:.2f}")
    print(f"  ({f.kde_error_kind})")
    print("Verdict: " + f.verdict)
    print("Note: " + f.disclosure_note)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "forecast.json").write_text(json.dumps(f.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8")
        forecast_figure(f).write_html(out / "forecast.html", include_plotlyjs=True)
        for name in ("forecast.json", "forecast.html"):
            try:
                os.chmod(out / name, 0o600)
            except OSError:
                pass
        print(f"wrote {out / 'forecast.json'} and {out / 'forecast.html'} (PRIVATE)")
    return 0


# -------------------------------------------------------------------------------------------- register

def register(subparsers: argparse._SubParsersAction) -> None:
    from dpkps_core.cli.common import add_sampling_arguments
    from dpkps_core.dp.forecast import DEFAULT_FORECAST_EPSILON
    from dpkps_core.evaluation import (CLASSIFIERS, DEFAULT_EPS_KDE_GRID, DEFAULT_EPS_VOC_GRID, DEFAULT_SWEEP_METHODS,
                                       DEFAULT_SWEEP_PER_CLASS)
    from dpkps_core.evaluation.held_out import DEFAULT_MAX_TEST_DOCUMENTS

    p = subparsers.add_parser(
        "evaluate", help="local utility evaluation of a run (PRIVATE results)",
        description="Evaluate a run folder against its held-out real test documents: the no-LLM check (TF-IDF + "
                    "logistic regression on keyphrase sequences) with its real keyphrase baseline, and — when the run "
                    "has documents.jsonl — downstream accuracy of the synthetic documents against the same classifier "
                    "trained on as many real documents, precision and recall of the synthetic against the real test documents "
                    "on embeddings (k-NN manifolds, Kynkäänniemi et al. 2019: are they realistic, do they cover the "
                    "real variety?), plus Deep CORAL when client documents were set aside. Writes "
                    "DIR/evaluation.json, which is PRIVATE (local evaluation on real data — not for release).",
    )
    p.add_argument("--run", required=True, help="run folder written by `sample` (and `generate`)")
    p.add_argument("--seeds", type=int, default=3, help="classifier / baseline-sample seeds (default %(default)s)")
    p.add_argument("--classifier", choices=CLASSIFIERS, default="logreg",
                   help="logreg: logistic regression on sentence embeddings (default); mlp: a small torch MLP head")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--coral", dest="coral", action="store_true", default=None,
                   help="require the Deep CORAL variants (needs client documents: sample with --client-fraction)")
    g.add_argument("--no-coral", dest="coral", action="store_false",
                   help="skip Deep CORAL (default: run it when the split has client documents)")
    p.add_argument("--coral-weight", type=float, default=1.0, help="λ of the CORAL term (default %(default)s)")
    p.add_argument("--max-test-documents", type=int, default=DEFAULT_MAX_TEST_DOCUMENTS,
                   help="score on at most this many held-out documents (and Deep CORAL's client documents): a "
                        "uniform sample with a public seed when the part is larger, stated in the output; the split "
                        "and the DP steps are untouched; 0 = all (default %(default)s)")
    p.add_argument("--device", choices=DEVICE_CHOICES, default=None,
                   help="where the embedding model runs: auto = CUDA when torch sees a GPU, else the CPU "
                        "(default: $DPKPS_DEVICE, else auto)")
    p.add_argument("--disclosure", action="store_true",
                   help="also run the disclosure test: the synthetic documents' matches against the training part "
                        "vs as many held-out documents, a one-sided p-value and an empirical ε lower bound "
                        "(writes DIR/disclosure.json, PRIVATE)")
    p.add_argument("--disclosure-only", action="store_true", help="run only the disclosure test (no embeddings)")
    p.add_argument("--identifiers", help="a text file of identifiers (names, MRNs), one per line, that the "
                                         "disclosure test also looks for (implies --disclosure; never written)")
    p.add_argument("--disclosure-confidence", type=float, default=0.95,
                   help="confidence of the disclosure test and its ε bound (default %(default)s)")
    p.set_defaults(func=_cmd_evaluate)

    p = subparsers.add_parser(
        "sweep", help="ε trade-off sweep without the LLM (PRIVATE results)",
        description="Run the no-LLM check over a grid of ε_voc × ε_kde, methods and seeds (seeded demo noise; term "
                    "counts computed once). Writes sweep.csv, sweep.json and sweep.html (plus sweep.png when kaleido "
                    "or matplotlib is installed) to --out. PRIVATE: local evaluation on real data — not for release.",
    )
    add_sampling_arguments(p)
    p.add_argument("--out", required=True, help="folder for sweep.csv / sweep.json / sweep.html")
    p.add_argument("--eps-voc-grid", type=_floats, default=list(DEFAULT_EPS_VOC_GRID),
                   help="comma-separated ε_voc values (default %s)" % ",".join(f"{e:g}" for e in DEFAULT_EPS_VOC_GRID))
    p.add_argument("--eps-kde-grid", type=_floats, default=list(DEFAULT_EPS_KDE_GRID),
                   help="comma-separated ε_kde values (default %s)" % ",".join(f"{e:g}" for e in DEFAULT_EPS_KDE_GRID))
    p.add_argument("--methods", type=_names, default=list(DEFAULT_SWEEP_METHODS),
                   help="comma-separated methods (default %s)" % ",".join(DEFAULT_SWEEP_METHODS))
    p.add_argument("--seeds", type=int, default=3, help="noise seeds 0..N−1 per cell (default %(default)s)")
    p.set_defaults(func=_cmd_sweep, per_class=DEFAULT_SWEEP_PER_CLASS)

    p = subparsers.add_parser(
        "forecast", help="'Will this work?' from a small charged DP release (--exact: true counts, not covered by ε)",
        description="Forecast the vocabulary noise floor, the expected share of the private vocabulary that is pure "
                    "noise and the expected density error, with a verdict and the smallest ε_voc that would give a "
                    "usable vocabulary. Default: from a DP release of the term-count curve and class sizes "
                    "(--eps-forecast, charged to the corpus's ledger), so choosing ε from it is covered by ε. "
                    "--exact: from the training part's true counts — spends nothing, but private, local — not "
                    "covered by ε.",
    )
    add_sampling_arguments(p)
    p.add_argument("--out", help="optional folder for forecast.json and forecast.html (PRIVATE)")
    p.add_argument("--no-embedder", action="store_true",
                   help="with --exact and RFF densities, skip the embedding model (cruder density forecast)")
    p.add_argument("--exact", action="store_true",
                   help="the EXACT preview on the true counts: spends nothing but is private, local — not covered by "
                        "ε (default: the DP forecast, which charges --eps-forecast to the corpus's ledger)")
    p.add_argument("--eps-forecast", type=float, default=DEFAULT_FORECAST_EPSILON,
                   help="ε of the DP forecast release (default %(default)s; charged, counted in the total)")
    p.set_defaults(func=_cmd_forecast)

