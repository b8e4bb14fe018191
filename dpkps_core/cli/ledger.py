"""``python -m dpkps_core ledger``: every past release on a private corpus, from its persistent ledger.

The ledger is found from the corpus's content (``dpkps_core.ledger_store``), so any copy of the same documents —
another file name, format, label column or document order — shows the same releases. ``--epsilon-cap`` sets (or
raises) the corpus's cap without running anything. Also the helpers the releasing commands (``sample``,
``compare``) use to open and summarise the ledger.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from dpkps_core.ledger_store import CorpusLedgerRecord, PersistentLedger, open_corpus_ledger


def run_name(out: str | os.PathLike[str] | None) -> str | None:
    """The run folder's *name* (never its path) as recorded with each release."""
    if out is None:
        return None
    return Path(out).expanduser().resolve().name or None


def corpus_ledger(corpus: Any, *, tool: str, out: str | os.PathLike[str] | None = None,
                  cap: float | None = None) -> PersistentLedger:
    """The corpus's persistent ledger for one CLI command; ``cap`` (``--epsilon-cap``) sets the corpus's cap."""
    return open_corpus_ledger(corpus, tool=tool, run=run_name(out), cap=cap)


def ledger_summary(ledger: PersistentLedger) -> str:
    """One line: the corpus's total to date, its cap and how to list the releases."""
    rec = ledger.record()
    cap = "no cap" if rec.cap is None else f"cap {rec.cap:g}, {max(rec.cap - rec.epsilon_total, 0.0):g} left"
    delta = f", δ = {rec.delta_total:g}" if rec.delta_total else ""
    return (f"this corpus to date (persistent ledger, app and CLI): ε = {rec.epsilon_total:g}{delta} over "
            f"{len(rec.releases)} release(s); {cap}. List them: python -m dpkps_core ledger --corpus …")


def format_record(rec: CorpusLedgerRecord) -> str:
    """The releases as a plain-text table, the totals and the cap history."""
    header = ("#", "recorded (UTC)", "ε", "δ", "step", "mechanism", "spent by")
    rows = [(str(i), r.recorded, f"{r.event.epsilon:g}", f"{r.event.delta:g}", r.event.step, r.event.mechanism,
             r.tool + (f" · {r.run}" if r.run else "")) for i, r in enumerate(rec.releases, 1)]
    lines = [f"Persistent privacy ledger of this corpus: {len(rec.releases)} release(s)"]
    if rows:
        widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(header)]
        fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
        lines += [fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in rows]
    else:
        lines.append("nothing spent on this corpus yet")
    cap = "no cap" if rec.cap is None else f"cap {rec.cap:g} ({max(rec.cap - rec.epsilon_total, 0.0):g} left)"
    lines.append(f"total: ε = {rec.epsilon_total:g}, δ = {rec.delta_total:g} (basic composition); {cap}")
    for c in rec.cap_history:
        prev = "none" if c.get("previous") is None else f"{c['previous']:g}"
        new = "none" if c.get("epsilon_cap") is None else f"{c['epsilon_cap']:g}"
        by = str(c.get("tool", "?")) + (f" · {c['run']}" if c.get("run") else "")
        lines.append(f"cap changed {c.get('timestamp', '?')}: {prev} → {new} ({by})")
    return "\n".join(lines)


def record_json(rec: CorpusLedgerRecord) -> dict[str, Any]:
    """The ledger as JSON (no fingerprint: the file name is not part of it)."""
    out = rec.to_dict()
    out["epsilon_total"], out["delta_total"] = rec.epsilon_total, rec.delta_total
    return out


def _cmd_ledger(args: argparse.Namespace) -> int:
    from dpkps_core.corpus import load_corpus_spec

    corpus = load_corpus_spec(args.corpus, text_column=args.text_column, label_column=args.label_column)
    led = corpus_ledger(corpus, tool="cli ledger", cap=args.epsilon_cap)
    rec = led.record()
    if args.json:
        print(json.dumps(record_json(rec), indent=2, ensure_ascii=False))
    else:
        print(format_record(rec))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ledger", help="list every past DP release on a private corpus (its persistent ledger)",
        description=(
            "Show the persistent privacy ledger of a private corpus: every release from the app or the CLI, in any "
            "session, with ε, δ, the time it was recorded and what spent it, the total and the cap. The ledger is "
            "found from the documents' texts (not the file name, format, label column or order). Ledgers live in "
            "an owner-only folder: $DPKPS_LEDGER_DIR, else ~/.local/share/dpkps/ledgers."
        ),
    )
    p.add_argument("--corpus", required=True, help="demo:bbc, demo:drugs, demo:drugs-rating or a path (as for sample)")
    p.add_argument("--text-column", help="column holding the document text (guessed when omitted)")
    p.add_argument("--label-column", help="column holding the class label (does not change which ledger is shown)")
    p.add_argument("--epsilon-cap", type=float, default=None,
                   help="set (or raise) the corpus's cap on the total ε of all its releases")
    p.add_argument("--json", action="store_true", help="print the ledger as JSON")
    p.set_defaults(func=_cmd_ledger)

