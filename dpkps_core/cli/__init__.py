"""The command-line interface (``python -m dpkps_core``): :mod:`.main` builds the parser from one module per
command (:mod:`.sample`, :mod:`.generate`, :mod:`.evaluate`, :mod:`.compare`, :mod:`.ledger`, :mod:`.audit`).
The commands call the same core functions as the app and get the same numbers."""

from dpkps_core.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
