"""Command-line interface: ``python -m dpkps_core <command> …`` runs every step headless.

Each command lives in its own module of this package exposing ``register(subparsers)``, which adds a
sub-parser whose ``func`` default takes the parsed ``argparse.Namespace`` and returns an exit status. User
errors (:class:`~dpkps_core.errors.DPKPSError`) and operating-system errors on paths (``OSError``) are printed
as one line, ``error: …``, with exit status 2; each command checks its paths first (``cli/common.py``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from dpkps_core.cli import audit, compare, evaluate, generate, ledger, report, sample
from dpkps_core.cli.common import os_error_line
from dpkps_core.corpus.formats import NotUTF8Error
from dpkps_core.errors import DPKPSError

#: The command modules, in the order ``--help`` lists their commands (static imports: no plugin loading).
COMMAND_MODULES = (sample, generate, evaluate, compare, ledger, audit, report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dpkps_core",
        description=(
            "DP-KPS Studio core: turn a private text corpus into a differentially private synthetic corpus "
            "by seeding LLM prompts with DP-sampled keyphrase sequences."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DPKPSError as exc:
        if isinstance(exc, NotUTF8Error):  # the encoding choice in the CLI's words (docs/DESIGN.md §1)
            exc = exc.with_hint("run it again with `--encoding latin-1`")
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path the command's own checks (cli/common.py) did not foresee: one line, no traceback
        print(f"error: {os_error_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; finished work is kept in the run folder.", file=sys.stderr)
        return 130
