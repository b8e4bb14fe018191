"""``python -m dpkps_core report``: the run's dossier (docs/DOSSIER.md) as HTML + JSON, optionally PDF.

The release edition (default) is DP outputs and public inputs only, with ``reproduce.md`` and
``reproduce_config.json`` beside it — the same files the export puts into the bundle. ``--internal`` writes the
PRIVATE edition (private findings, the share decision from ``--policy``): local only, refused by the export. Files
go to ``--out`` (default: the run folder itself) and are created owner-only. ``--internal --corpus FILE`` also opens
the corpus's persistent ledger (read only: no ε) for the left-out counts of the run's releases and the corpus's ε to
date per unit (docs/DESIGN.md §2.0); the columns are the run's own (``run_config.json``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from dpkps_core.cli.common import check_input_path, check_output_dir
from dpkps_core.dossier import INTERNAL_PDF, RELEASE_PDF, build_dossier, find_chromium, to_pdf
from dpkps_core.errors import ParameterError
from dpkps_core.records.runfolder import ensure_private_dir


def _ledger_view(run: Path, corpus_path: str | Path) -> object:
    """The corpus's ledger view for the internal edition: the corpus loaded with the run's own columns, classes,
    person column and encoding (run_config.json), its persistent ledger opened to READ (no admission, no ε)."""
    from dpkps_core.records import runfolder
    from dpkps_core.cli.ledger import corpus_ledger
    from dpkps_core.method.config import SamplingConfig, load_config_corpus

    folder = runfolder.RunFolder(run)
    if not folder.config.is_file():
        raise ParameterError("--corpus needs the run's run_config.json (its columns and classes); this run folder "
                             "has none.")
    config = SamplingConfig.from_dict(runfolder.read_json(folder.config)).replace(corpus=str(corpus_path))
    corpus = load_config_corpus(config)
    return corpus_ledger(corpus, tool="cli report", cap=None, by_person=bool(config.person_column)).view()


def _write(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600)


def _cmd_report(args: argparse.Namespace) -> int:
    run = check_input_path(args.run, "--run", kind="folder")
    if run is None:
        raise ParameterError("Give the run folder with --run DIR.")
    out = check_output_dir(args.out, "--out") or run
    policy = check_input_path(args.policy, "--policy", kind="file")
    if policy is not None and not args.internal:
        raise ParameterError("--policy decides the internal edition's share line; add --internal.")
    if args.pdf:
        find_chromium()  # no browser: one line before anything is written
    corpus = (args.corpus if isinstance(args.corpus, str) and args.corpus.startswith("demo:")
              else check_input_path(args.corpus, "--corpus", kind="any"))
    if corpus is not None and not args.internal:
        raise ParameterError("--corpus adds the ledger's private figures to the internal edition; add --internal.")
    view = _ledger_view(run, corpus) if corpus is not None else None
    dossier = build_dossier(run, edition="internal" if args.internal else "release", policy=policy,
                            ledger_view=view, run_name=run.resolve().name)
    if not out.exists():  # a new folder is owner-only; an existing one keeps its permissions
        ensure_private_dir(out)
    written = []
    for name, data in dossier.files().items():
        _write(out / name, data)
        written.append(out / name)
    if args.pdf:
        pdf = out / (INTERNAL_PDF if args.internal else RELEASE_PDF)
        to_pdf(dossier.to_html(), pdf)
        os.chmod(pdf, 0o600)
        written.append(pdf)
    for path in written:
        print(f"wrote {path}")
    if args.internal:
        decision = dossier.content["decision"]
        print(f"decision: {decision['verdict'].upper()}")
        for reason in decision["reasons"]:
            print(f"  - {reason['level']} ({reason['rule']}): {reason['text']}")
        print("The internal edition is PRIVATE (local only): the export refuses it.")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "report", help="the run's release dossier (HTML + JSON, optionally PDF)",
        description="Writes the dossier of a run folder: the release edition (DP outputs and public inputs only, "
                    "with reproduce.md and reproduce_config.json; the bundle carries the same files) or, with "
                    "--internal, the PRIVATE internal edition (accuracy, audit, corpus fingerprint and a share "
                    "decision from --policy; never exported).",
    )
    p.add_argument("--run", required=True, help="the run folder")
    p.add_argument("--internal", action="store_true", help="the PRIVATE internal edition (local only)")
    p.add_argument("--pdf", action="store_true", help="also print it to PDF with headless Chromium")
    p.add_argument("--policy", help="release policy file (JSON or .toml; docs/DOSSIER.md) for --internal's decision")
    p.add_argument("--corpus", help="with --internal: the run's private corpus (file or folder), to read the left-out "
                                    "counts and the corpus's ε to date per unit from the persistent ledger (no ε)")
    p.add_argument("--out", help="folder to write to (default: the run folder)")
    p.set_defaults(func=_cmd_report)
