"""``python -m dpkps_core sample``: corpus → Ṽ (ε_voc) → DP densities (ε_kde) → keyphrase sequences."""

from __future__ import annotations

import argparse
from typing import Any

from dpkps_core.cli.common import (add_sampling_arguments, check_output_dir, config_from_args,
                                open_streamed_corpus)
from dpkps_core.cli.ledger import corpus_ledger, ledger_summary
from dpkps_core.method.config import LIMITS, SamplingConfig, load_config_corpus, load_vocabulary_for
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import EmbeddingCache, get_embedder
from dpkps_core.errors import ParameterError
from dpkps_core.method.pipeline import run_sampling, seeded_embedding_cache, write_run_folder
from dpkps_core.records.run_record import record_ledger, with_steering_forecast


def _cmd_sample(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    check_output_dir(args.out, "--out")  # a bad --out is one line before anything is loaded or charged
    config = config_from_file(args) if args.config else config_from_args(args)
    # the run's own ε against its cap setting: the ledger's public check, before the corpus is read (docs/DESIGN.md §2.0)
    PrivacyLedger(config.epsilon_cap).require(config.eps_voc + config.eps_kde, "this sampling run")
    if config.corpus.startswith("demo:"):
        corpus: Any = load_config_corpus(config)
        ledger = corpus_ledger(corpus, tool="cli sample", out=args.out, cap=config.epsilon_cap)
    else:  # a corpus file is read in chunks, never held whole (issue 31): the same run, in bounded memory
        corpus = open_streamed_corpus(config)
        ledger = corpus_ledger(corpus.units, tool="cli sample", out=args.out, cap=config.epsilon_cap,
                               by_person=corpus.stream.person_column is not None)
    # no whole-run refusal on the corpus's history here: each step admits only the units with budget left
    vocabulary = load_vocabulary_for(config)
    embedder = get_embedder(config.embedding_model)
    # a seeded demo's Ṽ is not a DP release: embed it in memory only, never into the persistent cache
    cache = EmbeddingCache() if config.seed is None else seeded_embedding_cache()
    with tqdm(total=100, unit="%", desc="sample", leave=False) as bar:
        def progress(frac: float, message: str) -> None:
            bar.n = int(100 * frac)
            bar.set_postfix_str(message[:60])
            bar.refresh()

        run = run_sampling(corpus, config, vocabulary=vocabulary, embedder=embedder, cache=cache,
                           context=ReleaseContext(noise=NoiseSource(config.seed, sampler=config.noise_sampler),
                                                  ledger=ledger), progress=progress)
    run, steered = with_steering_forecast(run, ledger)  # the DP forecast that steered it is in its total (§7)
    out = write_run_folder(run, args.out)
    record_ledger(out, ledger, forecast=steered)  # its local ledger record: which ledger, which events (issue 35 §7)
    rep = run.privacy_report()
    print(f"wrote {len(run.outcome.sequences):,} sequences ({config.method}) to {out / 'sequences.jsonl'}")
    steering = sum(e["epsilon"] for e in rep["events"] if e["step"] == "forecast")
    print(f"ε spent: {rep['epsilon_total']:g} (" + (f"the DP forecast that steered it {steering:g} + " if steering else "")
          + f"vocabulary {rep['epsilon_vocabulary']:g} + densities {rep['epsilon_kde']:g}); "
          f"|Ṽ| = {len(run.private_vocabulary)}; noise: {run.noise.policy}, {run.noise.sampler} sampler")
    print(ledger_summary(ledger))
    for warning in run.local_warnings:
        print(f"warning (private check, shown only to you; the release went ahead as it would for any "
              f"neighbouring corpus): {warning}")
    if run.undeclared_documents:
        print(f"note (private): {run.undeclared_documents:,} training document(s) carry a label outside the declared "
              "classes and entered no DP step.")
    if run.truncated_documents:
        print(f"note (private, local): {run.truncated_documents:,} document(s) longer than "
              f"{LIMITS['max_chars_per_doc']:,} characters were truncated for term extraction.")
    if run.noise.seed is not None:
        print("WARNING: seeded noise — reproducible demo, NOT FOR RELEASE.")
    return 0


def config_from_file(args: argparse.Namespace) -> SamplingConfig:
    """``--config FILE`` (a bundle's reproduce_config.json, docs/DOSSIER.md): the file's settings, with the private
    corpus's options of the command line (--corpus, its columns, --classes) over them."""
    from dpkps_core.cli.common import parse_classes
    from dpkps_core.dossier.reproduce import read_config_file

    defaults = argparse.ArgumentParser()
    add_sampling_arguments(defaults)
    corpus_options = {"corpus", "text_column", "label_column", "person_column", "classes", "classes_file"}
    changed = [f"--{k.replace('_', '-')}" for k, v in vars(defaults.parse_args([])).items()
               if k not in corpus_options and getattr(args, k, v) != v]
    if changed:
        raise ParameterError(f"--config FILE holds the sampling settings; change {', '.join(changed)} in the file, "
                             "not beside it (only the corpus options go on the command line).")
    corpus = args.corpus if args.corpus != SamplingConfig().corpus else None
    return read_config_file(args.config, corpus=corpus, text_column=args.text_column, label_column=args.label_column,
                            person_column=args.person_column, classes=parse_classes(args.classes, args.classes_file))


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sample", help="DP keyphrase sequences from a private corpus",
        description="Run DP-KPS steps 1–4: private vocabulary (ε_voc), per-class DP densities (ε_kde), and "
                    "keyphrase sequence sampling. Writes sequences.jsonl, privacy_report.json, "
                    "private_vocabulary.json, run_config.json and split.json (private) to --out.",
    )
    add_sampling_arguments(p)
    p.add_argument("--out", required=True, help="run folder to write (created owner-only)")
    p.add_argument("--config", help="a JSON file of sampling settings (a bundle's reproduce_config.json): its "
                   "settings are used, and --corpus, --text-column, --label-column, --person-column and --classes "
                   "given here fill in the private corpus")
    p.set_defaults(func=_cmd_sample)
