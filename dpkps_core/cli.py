"""Command-line interface: ``python -m dpkps_core <command> …`` runs every step headless.

Each command lives in its own module exposing ``register(subparsers)``, which adds a sub-parser whose
``func`` default takes the parsed ``argparse.Namespace`` and returns an exit status. User errors
(:class:`~dpkps_core.errors.DPKPSError`) are printed as one line, ``error: …``, with exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from dpkps_core.errors import DPKPSError

# Modules that each contribute sub-commands (module must define ``register(subparsers)``).
COMMAND_MODULES = (
    "dpkps_core.cli_sample",
    "dpkps_core.cli_generate",
    "dpkps_core.cli_evaluate",
    "dpkps_core.cli_compare",
    "dpkps_core.cli_ledger",
    "dpkps_core.cli_audit",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dpkps_core",
        description=(
            "DP-KPS Studio core: turn a private text corpus into a differentially private synthetic corpus "
            "by seeding LLM prompts with DP-sampled keyphrase sequences."
        ),
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a command module not present in this build
            if exc.name == name:
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DPKPSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted; finished work is kept in the run folder.", file=sys.stderr)
        return 130
