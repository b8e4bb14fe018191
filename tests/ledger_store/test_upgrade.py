"""``python -m dpkps_core ledger upgrade``: a version-1 ledger store (document keys of text AND label), which version
2 refuses, is carried over per corpus into a version-2 store in the same folder (issue 35 part 7).

Each text carries the sum of what it spent under every label in version 1 (never less), each person id its spend;
the smallest cap of the merged keys; the version-1 store is kept aside; a corpus is carried once."""

from __future__ import annotations

import os
import sqlite3
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.cli.main import main
from dpkps_core.corpus import Corpus
from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.ledger_store.folder import KEY_BYTES, STORE_FILE, _read_or_create_key, _UnitHasher
from dpkps_core.ledger_store.upgrade import V1_FOLDER, upgrade_v1

SEP = "\x1f"
V1_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE unit_keys (chunk INTEGER PRIMARY KEY, keys BLOB NOT NULL);
CREATE TABLE unit_spent (chunk INTEGER PRIMARY KEY, spent BLOB NOT NULL);
CREATE TABLE unit_caps (chunk INTEGER PRIMARY KEY, caps BLOB NOT NULL);
CREATE TABLE releases (id INTEGER PRIMARY KEY, recorded TEXT NOT NULL, tool TEXT NOT NULL, run TEXT, what TEXT NOT NULL,
    epsilon REAL NOT NULL, units INTEGER NOT NULL, left_out INTEGER NOT NULL, filtered INTEGER NOT NULL,
    lo INTEGER NOT NULL, hi INTEGER NOT NULL, bitmap BLOB NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY, release_id INTEGER NOT NULL, recorded TEXT NOT NULL, tool TEXT NOT NULL,
    run TEXT, epsilon REAL NOT NULL, delta REAL NOT NULL, event TEXT NOT NULL);
CREATE TABLE cap_history (id INTEGER PRIMARY KEY, recorded TEXT NOT NULL, tool TEXT NOT NULL, run TEXT, cap REAL NOT NULL,
    previous_min REAL, previous_max REAL, units INTEGER NOT NULL, lo INTEGER NOT NULL, hi INTEGER NOT NULL,
    bitmap BLOB NOT NULL);
"""


def _v1_store(root: Path, spends: dict[str, tuple[float, float]]) -> None:
    """A version-1 store as version 1 wrote it: unit string → (spent, cap)."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    hasher = _UnitHasher(_read_or_create_key(root, may_create=True))
    keys = hasher.keys(list(spends))
    conn = sqlite3.connect(root / STORE_FILE)
    conn.executescript(V1_SCHEMA)
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [
        ("format", ls.FORMAT), ("version", "1"), ("key_check", hasher.check), ("units", str(len(spends))),
        ("generation", "g"), ("changes", "0"), ("created", "2026-01-01")])
    conn.execute("INSERT INTO unit_keys VALUES (0, ?)", (keys.tobytes(),))
    conn.execute("INSERT INTO unit_spent VALUES (0, ?)", (np.array([v[0] for v in spends.values()], "<f8").tobytes(),))
    conn.execute("INSERT INTO unit_caps VALUES (0, ?)", (np.array([v[1] for v in spends.values()], "<f8").tobytes(),))
    conn.commit()
    conn.close()


def _doc(text: str, label: str) -> str:
    return f"document{SEP}{unicodedata.normalize('NFC', ' '.join(text.split()))}{SEP}{label}"


TEXTS = ("the patient had a fever", "a cough at night", "the patient had a fever", "dizziness after the dose")
LABELS = ("flu", "flu", "cold", "other")          # text 0 under two labels: two budgets in version 1


def _corpus(persons: tuple[str, ...] | None = None) -> Corpus:
    return Corpus(texts=TEXTS, labels=LABELS, name="notes", source="test", public_classes=("cold", "flu", "other"),
                  persons=persons, person_column="patient" if persons else None)


def test_a_v1_store_is_refused_then_upgraded_per_corpus_never_lowering_a_spend(tmp_path: Path) -> None:
    root = tmp_path / "ledgers"
    _v1_store(root, {_doc(TEXTS[0], "flu"): (3.0, 20.0), _doc(TEXTS[0], "cold"): (4.0, 15.0),
                     _doc(TEXTS[1], "flu"): (2.5, 20.0)})
    with pytest.raises(PrivacyBudgetError, match="earlier version"):
        ls.LedgerStore(root)                                   # version 2 refuses it (and never resets it)
    result = upgrade_v1(_corpus(), root=root)
    assert result.moved and (result.units, result.carried, result.largest) == (3, 2, 7.0)
    assert (root / V1_FOLDER / STORE_FILE).is_file()           # the version-1 record is kept aside
    led = ls.open_corpus_ledger(_corpus(), tool="test", cap=20.0, store=ls.LedgerStore(root))
    view = led.view()
    assert sorted(view.spent.tolist()) == [0.0, 2.5, 7.0]      # 3 + 4: both labels' spend on the one text
    assert view.cap_range == (15.0, 20.0)                      # the smallest cap of the merged keys
    with pytest.raises(ParameterError, match="already"):
        upgrade_v1(_corpus(), root=root)                       # carried once


def test_persons_carry_their_spend_and_the_cli_runs_the_upgrade(tmp_path: Path, capsys, monkeypatch) -> None:
    root = tmp_path / "ledgers"
    _v1_store(root, {f"person{SEP}p1": (6.0, 20.0), f"person{SEP}p2": (1.0, 20.0)})
    path = tmp_path / "notes.csv"
    path.write_text("note,label,patient\n" + "\n".join(f"{t},{lab},{p}" for t, lab, p in
                                                      zip(TEXTS, LABELS, ("p1", "p1", "p2", "p3"))) + "\n")
    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(root))
    code = main(["ledger", "upgrade", "--corpus", str(path), "--text-column", "note", "--label-column", "label",
                 "--person-column", "patient"])
    out = capsys.readouterr().out
    assert code == 0 and "carried" in out and str(root) not in out
    store = ls.LedgerStore(root)
    persons = store.keys([f"person{SEP}p1", f"person{SEP}p2", f"person{SEP}p3"])
    view = store.view(persons, new_unit_cap=20.0)
    assert view.spent.tolist() == [6.0, 1.0, 0.0]
