"""``python -m dpkps_core report``: the run's dossier (docs/DOSSIER.md) as HTML + JSON, optionally PDF.

The release edition (default) is DP outputs and public inputs only, with ``reproduce.md`` and
``reproduce_config.json`` beside it — the same files the export puts into the bundle. ``--internal`` writes the
PRIVATE edition (private findings, the share decision from ``--policy``): local only, refused by the export. Files
go to ``--out`` (default: the run folder itself) and are created owner-only.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from dpkps_core.cli.common import check_input_path, check_output_dir
from dpkps_core.dossier import INTERNAL_PDF, RELEASE_PDF, build_dossier, find_chromium, to_pdf
from dpkps_core.errors import ParameterError
from dpkps_core.runfolder import ensure_private_dir


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
    dossier = build_dossier(run, edition="internal" if args.internal else "release", policy=policy)
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
    p.add_argument("--out", help="folder to write to (default: the run folder)")
    p.set_defaults(func=_cmd_report)
