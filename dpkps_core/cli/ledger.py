"""``python -m dpkps_core ledger``: what the persistent ledger knows about a private corpus's documents (persons).

The ledger is an individual privacy filter over units (docs/DESIGN.md §2.0; ``dpkps_core.ledger_store``): it keeps the ε
each document (person) has spent, whatever file it came in. This command lists every release that touched the
corpus's units — from the app or the CLI, from this file or any other holding the same documents — with the cap
of its units and the largest spend among them. ``--epsilon-cap`` sets the cap of this corpus's units (recorded);
``--import-legacy`` charges a previous-format ledger file to them. Everything it prints about the corpus is
PRIVATE, local information (it depends on which documents the corpus holds): never publish it.

Also the helpers the releasing commands (``sample``, ``compare``) use to open and summarise the ledger.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from dpkps_core.cli.common import add_encoding_argument, add_limit_arguments, limits_from_args
from dpkps_core.dp.ledger import DEFAULT_EPSILON_CAP
from dpkps_core.ledger_store import CorpusView, LedgerStore, PersistentLedger, open_corpus_ledger


def run_name(out: str | os.PathLike[str] | None) -> str | None:
    """The run folder's *name* (never its path) as recorded with each release."""
    if out is None:
        return None
    return Path(out).expanduser().resolve().name or None


def corpus_ledger(corpus: Any, *, tool: str, out: str | os.PathLike[str] | None = None,
                  cap: float | None = DEFAULT_EPSILON_CAP, by_person: bool | None = None) -> PersistentLedger:
    """The persistent ledger for one CLI command on ``corpus`` (units by person when it has a person column, unless
    ``by_person`` says otherwise). ``cap`` (``--epsilon-cap``) is the run's cap setting: the cap of documents new
    to the ledger and the bound on this run's own ε. Says so on stderr when this opening created a new ledger."""
    led = open_corpus_ledger(corpus, tool=tool, run=run_name(out), cap=cap, by_person=by_person)
    notice = new_ledger_notice(led)
    if notice:
        print(notice, file=sys.stderr)
    return led


def new_ledger_notice(ledger: PersistentLedger) -> str | None:
    """The first-use notice (issue 35 part 7): a folder with no ledger (a new ``$DPKPS_LEDGER_DIR``) starts an
    empty one, which knows no earlier release — said once, with the ledger's id; None for an existing ledger."""
    if not ledger.created:
        return None
    return (f"note: a new, empty privacy ledger was created in {ledger.store.root} (ledger id {ledger.ledger_id}); "
            "it knows no release made before. If your documents were released under another ledger, point "
            "$DPKPS_LEDGER_DIR to that folder instead.")


def _cap_text(view: CorpusView) -> str:
    lo, hi = view.cap_range
    fmt = lambda c: "no cap" if c is None else f"{c:g}"  # noqa: E731
    return f"cap {fmt(lo)}" if lo == hi else f"caps {fmt(lo)} to {fmt(hi)}"


def _unit_word(person: bool) -> str:
    return "person" if person else "document"


def ledger_summary(ledger: PersistentLedger, *, person: bool | None = None) -> str:
    """One line (PRIVATE, local): the largest ε spent by one of the corpus's units, their cap, the releases that
    touched them, and which ledger admitted them (its random id, never its path)."""
    view = ledger.view()
    unit = _unit_word(bool(person)) if person is not None else getattr(ledger, "unit_name", "document")
    return (f"this corpus's {unit}s in the persistent ledger (app and CLI; private, local): the largest ε spent by "
            f"one {unit} is {view.largest_spend:g} ({_cap_text(view)} per {unit}); {len(view.releases)} release(s) "
            f"touched them; ledger id {ledger.ledger_id}. List them: python -m dpkps_core ledger --corpus …")


def format_view(view: CorpusView, *, person: bool = False, epsilon: float | None = None) -> str:
    """The releases that touched the corpus's units as a plain-text table, then their cap, the largest spend and the
    cap changes (PRIVATE, local)."""
    unit = _unit_word(person)
    header = ("#", "recorded (UTC)", "ε", "δ", "what", f"{unit}s here", "spent by")
    rows = []
    for i, r in enumerate(view.releases, 1):
        steps = ", ".join(f"{e.event.step} ({e.event.mechanism})" for e in r.events) or \
            f"{r.what} — no event recorded (failed or cancelled after admission; stays charged)"
        delta = sum(e.event.delta for e in r.events)
        rows.append((str(i), r.recorded, f"{r.epsilon:g}", f"{delta:g}", steps, f"{r.in_corpus:,}",
                     r.tool + (f" · {r.run}" if r.run else "")))
    lines = [f"Persistent privacy ledger of this corpus's {view.units:,} {unit}s: {len(view.releases)} release(s) "
             "touched them"]
    if rows:
        widths = [max(len(h), *(len(row[k]) for row in rows)) for k, h in enumerate(header)]
        fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
        lines += [fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in rows]
    else:
        lines.append(f"no {unit} of this corpus has spent anything yet")
    lines.append(f"{_cap_text(view)} per {unit}; largest ε spent by one {unit}: {view.largest_spend:g} "
                 f"({view.known:,} of {view.units:,} {unit}s already in the ledger)")
    if epsilon is not None:
        lines.append(f"a release of ε = {epsilon:g} now would leave out {view.left_out(epsilon):,} of them")
    for c in view.cap_history:
        fmt_cap = lambda v: "none" if v is None else f"{v:g}"  # noqa: E731
        prev = "new" if c.previous_min is None and c.previous_max is None else (
            fmt_cap(c.previous_min) if c.previous_min == c.previous_max else
            f"{fmt_cap(c.previous_min)}–{fmt_cap(c.previous_max)}")
        by = c.tool + (f" · {c.run}" if c.run else "")
        lines.append(f"cap changed {c.recorded}: {prev} → {fmt_cap(c.cap)} for {c.in_corpus:,} {unit}s here ({by})")
    lines.append("(private, local figures: they depend on which documents this corpus holds — never publish them)")
    return "\n".join(lines)


def view_json(view: CorpusView, *, epsilon: float | None = None) -> dict[str, Any]:
    """The view as JSON (no unit key, id or text: counts, ε, caps and the releases' public descriptions)."""
    lo, hi = view.cap_range
    out: dict[str, Any] = {
        "units": view.units, "units_in_ledger": view.known, "largest_spend": view.largest_spend,
        "cap_min": lo, "cap_max": hi, "releases": [r.to_dict() for r in view.releases],
        "cap_history": [c.to_dict() for c in view.cap_history], "private_local": True,
    }
    if epsilon is not None:
        out["left_out_at_epsilon"] = {"epsilon": epsilon, "units": view.left_out(epsilon)}
    return out


def _cmd_upgrade(corpus: Any, *, person: bool) -> int:
    """``ledger upgrade``: carry a version-1 store's spend of this corpus's documents (persons) into version 2
    (``dpkps_core.ledger_store.upgrade``); prints counts only (PRIVATE, local) and the ledger's id, never its path."""
    from dpkps_core.ledger_store.upgrade import V1_FOLDER, upgrade_v1

    result = upgrade_v1(corpus, by_person=person)
    unit = _unit_word(person)
    if result.moved:
        print(f"the version-1 ledger store was moved aside into {V1_FOLDER}/ of the ledger folder (kept as the record "
              "of what was spent); a version-2 store was started beside it under the same key")
    print(f"carried the version-1 spend of {result.carried:,} of this corpus's {result.units:,} {unit}s into ledger id "
          f"{result.ledger_id} (largest ε carried to one {unit}: {result.largest:g}); a text relabelled in version 1 "
          "carries the spend of all its labels. Run it once for every corpus you still hold (private, local figures).")
    return 0


def _cmd_ledger(args: argparse.Namespace) -> int:
    from dpkps_core.ledger_store.units import unit_strings
    from dpkps_core.corpus import load_corpus_spec

    corpus = load_corpus_spec(args.corpus, text_column=args.text_column, label_column=args.label_column,
                              person_column=args.person_column, encoding=args.encoding, **limits_from_args(args))
    person = args.person_column is not None
    if args.action == "upgrade":
        return _cmd_upgrade(corpus, person=person)
    units = unit_strings(corpus, by_person=person)
    store: LedgerStore | None = None
    if args.import_legacy:
        store = LedgerStore(allow_legacy=True)
        imported = store.import_legacy(corpus.texts, units, tool="cli ledger")
        print(f"imported {imported} release(s) of the previous-format ledger of this corpus" if imported else
              "no previous-format ledger file matches this corpus's documents")
        left = store.legacy_files()
        if left:
            print(f"{len(left)} previous-format file(s) remain in the ledger folder; import them with their corpora, "
                  "or move them out of the folder yourself")
            return 0
    led = open_corpus_ledger(corpus, tool="cli ledger", cap=None, units=units, store=store)
    notice = new_ledger_notice(led)
    if notice:
        print(notice, file=sys.stderr)
    if args.epsilon_cap is not None:
        changed = led.set_unit_cap(args.epsilon_cap)
        unit = "person" if person else "document"
        print(f"cap set to {args.epsilon_cap:g} for this corpus's {unit}s ({changed:,} changed; recorded)")
    view = led.view()
    if args.json:
        print(json.dumps(view_json(view, epsilon=args.epsilon), indent=2, ensure_ascii=False))
    else:
        print(format_view(view, person=person, epsilon=args.epsilon))
    return 0


def _positive(value: str) -> float:
    try:
        out = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError("must be a number") from None
    if not (out > 0 and out != float("inf")):
        raise argparse.ArgumentTypeError("must be a finite ε > 0")
    return out


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ledger", help="show what the persistent ledger knows about a private corpus's documents",
        description=(
            "Show the persistent privacy ledger of a private corpus's documents (persons with --person-column): "
            "every release that touched them — from the app or the CLI, from this file or any other holding the "
            "same documents — with ε, δ, when, what spent it and how many of this corpus's documents took part; "
            f"their cap (default {DEFAULT_EPSILON_CAP:g} for documents new to the ledger) and the largest ε one of "
            "them has spent. The ledger keeps keyed hashes of the documents in an owner-only folder: "
            "$DPKPS_LEDGER_DIR, else ~/.local/share/dpkps/ledgers. What it prints is private, local information."
        ),
    )
    p.add_argument("action", nargs="?", choices=("show", "upgrade"), default="show",
                   help="show (default): the corpus's releases and budgets; upgrade: carry this corpus's spend from a "
                        "version-1 ledger store (document keys of text and label, refused by this version) into a "
                        "version-2 store in the same folder — once per corpus you hold; the version-1 store is kept "
                        "aside in ledger-v1/")
    p.add_argument("--corpus", required=True, help="demo:bbc, demo:drugs, demo:drugs-rating or a path (as for sample)")
    p.add_argument("--text-column", help="column holding the document text (chosen from column names when omitted)")
    p.add_argument("--label-column", help="column holding the class label (not part of a document's budget: a text's "
                   "budget is the same under any label)")
    p.add_argument("--person-column", help="the privacy unit is a person: show the budgets of this column's persons")
    add_encoding_argument(p)  # the same file, decoded as `sample` decoded it: the same documents in the ledger
    add_limit_arguments(p)  # the same size limits as `sample` (corpus/limits.py)
    p.add_argument("--epsilon-cap", type=_positive, default=None,
                   help="set the cap of this corpus's documents (persons) on their total ε over all releases; the "
                        "change is recorded")
    p.add_argument("--epsilon", type=_positive, default=None,
                   help="also say how many of this corpus's documents a release of this ε would leave out now")
    p.add_argument("--import-legacy", action="store_true",
                   help="charge this corpus's previous-format ledger file (one JSON file per corpus) to its documents "
                        "and move the file to legacy-imported/")
    p.add_argument("--json", action="store_true", help="print the view as JSON")
    p.set_defaults(func=_cmd_ledger)
