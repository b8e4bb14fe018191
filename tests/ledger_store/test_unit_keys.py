"""A streamed corpus admits its units as precomputed keys, and the ledger ends exactly as if it had admitted the unit
strings (issue 31; docs/DESIGN.md §2.0 "Every key a release could touch is charged, and checked").

- The same corpus file, admitted release after release through unit strings (the loaded corpus,
  :func:`~dpkps_core.ledger_store.units.unit_strings`) and through the keys a :class:`StreamedCorpus` computes chunk by
  chunk — during its preparing pass, or by its own pass when a ledger first asks — under the same ledger key: the
  same admitted indices at every release and the same ledger rows (unit keys, spend, direct spend, caps, release
  records), for the document unit (with and without a person column) and the person unit.
- The streamed path never builds a unit string: its units are one 32-byte key per document in an ndarray (and one
  per person), and a run of admissions and views goes through with the string parser and ``unit_strings``
  disabled.
- Keys made under one ledger's key are refused by another ledger (they would name units it never saw).
"""

from __future__ import annotations

import csv
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.corpus import load_corpus
from dpkps_core.corpus.stream import CorpusStream
from dpkps_core.errors import ParameterError
from dpkps_core.ledger_store import UnitKeys, UnitKeysBuilder, key_check
from dpkps_core.method import budget
from dpkps_core.method.budget import admitted_indices
from dpkps_core.ledger_store.units import unit_strings
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.training_source import StreamedCorpus, StreamedUnits

CLASSES = ("alpha", "beta")
CAP = 1.0
TOPICS = ("a stent after angina", "a seizure at night", "a tumour biopsy", "fever and nausea", "a slow tremor")

#: (unit, person column of the file and of the stream): the person unit, the document unit linked to known
#: persons, and the document unit without persons
CASES = [("person", "patient"), ("document", "patient"), ("document", None)]


def _rows() -> list[list[str]]:
    """Notes that share texts across rows, labels and persons (one document key, charged per row), texts that
    normalise alike, persons with several rows, and an exact repeat (collapses)."""
    out = []
    for i in range(60):
        text = f"Clinic note {i % 17}: the patient reported {TOPICS[i % 17 % 5]} during the visit."
        if i % 11 == 0:
            text = text.replace(" the ", "  the ", 1)  # the same document key as the plain spacing
        out.append([text, CLASSES[i % 2] if i % 7 else CLASSES[(i + 1) % 2], f"p{i // 3 if i % 4 else i}"])
    return out + [list(out[5])]


def _write(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label", "patient"])
        w.writerows(_rows())
    return path


def _twin_stores(tmp_path: Path) -> tuple[ls.LedgerStore, ls.LedgerStore]:
    """Two empty ledgers under the same ledger key (the second folder gets a copy of the first's key file)."""
    a = ls.LedgerStore(tmp_path / "strings")
    (tmp_path / "keys").mkdir(mode=0o700)
    shutil.copy2(a.root / ls.KEY_FILE, tmp_path / "keys" / ls.KEY_FILE)
    b = ls.LedgerStore(tmp_path / "keys")
    assert key_check(a.keys) == key_check(b.keys) and a.ledger_id != b.ledger_id
    return a, b


def _contents(store: ls.LedgerStore) -> dict[str, list[tuple[Any, ...]]]:
    """Everything the store holds about units and releases (not the wall-clock times)."""
    conn = sqlite3.connect(store.path)
    try:
        out = {t: conn.execute(f"SELECT * FROM {t} ORDER BY chunk").fetchall()
               for t in ("unit_keys", "unit_spent", "unit_caps", "unit_direct")}
        out["releases"] = conn.execute("SELECT tool, run, what, epsilon, units, left_out, filtered, lo, hi, bitmap "
                                       "FROM releases ORDER BY id").fetchall()
    finally:
        conn.close()
    return out


def _streamed(path: Path, unit: str, person_column: str | None, *, keys_of: Any = None) -> StreamedCorpus:
    config = SamplingConfig(corpus=str(path), classes=CLASSES, person_column="patient" if unit == "person" else None,
                            test_fraction=0.2, split_seed=3).validate()
    return StreamedCorpus.open(CorpusStream(path, person_column=person_column, chunk_rows=4), config,
                               keys_of=keys_of)


@pytest.mark.parametrize("eager", [True, False], ids=["keyed-while-preparing", "keyed-when-asked"])
@pytest.mark.parametrize("unit, person_column", CASES)
def test_keys_and_strings_admit_the_same_rows_and_leave_the_same_ledger(tmp_path: Path, unit: str,
                                                                       person_column: str | None,
                                                                       eager: bool) -> None:
    path = _write(tmp_path / "notes.csv")
    by_person = unit == "person"
    by_strings, by_keys = _twin_stores(tmp_path)
    streamed = _streamed(path, unit, person_column, keys_of=by_keys.keys if eager else None)
    assert isinstance(streamed.units, UnitKeys if eager else StreamedUnits)
    loaded = load_corpus(path, person_column=person_column)
    assert streamed.documents == len(loaded) and len(streamed) > 0
    strings = unit_strings(loaded, by_person=by_person)
    led_s = ls.open_corpus_ledger(strings, tool="test", cap=CAP, store=by_strings)
    led_k = ls.open_corpus_ledger(streamed.units, tool="test", cap=CAP, store=by_keys)
    train = streamed.train_index
    some = train[::3]  # a first release on some rows, so that later ones leave rows out
    left_out = 0
    for rows, eps in ((some, 0.5), (train, 0.2), (train, 0.2), (train[::-1], 0.1)):
        idx_s, _ = admitted_indices([strings[i] for i in rows.tolist()], led_s, eps, what="a test release")
        idx_k, _ = admitted_indices(streamed.units.take(rows), led_k, eps, what="a test release")
        np.testing.assert_array_equal(idx_k, idx_s)
        left_out += len(rows) - len(idx_s)
    assert 0 < left_out < 4 * len(train)  # some rows were left out, others admitted
    part = streamed.admit(SamplingConfig(corpus=str(path), classes=CLASSES,
                                         person_column="patient" if by_person else None).validate(),
                          led_k, 0.1, "a test release")
    idx_s, _ = admitted_indices([strings[i] for i in train.tolist()], led_s, 0.1, what="a test release")
    assert (part.documents, part.left_out) == (len(idx_s), len(train) - len(idx_s))
    assert list(part.labels) == [loaded.labels[i] for i in train[idx_s].tolist()]
    assert _contents(by_keys) == _contents(by_strings)
    for led in (led_s, led_k):
        led._view_cache = None
    vs, vk = led_s.view(), led_k.view()
    assert (vk.units, vk.known, vk.largest_spend, vk.left_out(0.3), len(vk.releases)) == (
        vs.units, vs.known, vs.largest_spend, vs.left_out(0.3), len(vs.releases))


@pytest.mark.parametrize("unit, person_column", CASES)
def test_the_streamed_path_holds_fixed_width_keys_and_never_a_unit_string(tmp_path: Path, monkeypatch, unit: str,
                                                                          person_column: str | None) -> None:
    path = _write(tmp_path / "notes.csv")

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the streamed path built or parsed unit strings")

    monkeypatch.setattr(budget, "unit_strings", refused)
    monkeypatch.setattr(ls.rules, "split_units", refused)
    store = ls.LedgerStore(tmp_path / "ledger")
    eager = _streamed(path, unit, person_column, keys_of=store.keys)
    keys = eager.units
    assert isinstance(keys, UnitKeys) and keys.kind == unit
    assert keys.documents.dtype == np.dtype("S32") and keys.documents.nbytes == 32 * eager.documents
    if person_column:
        assert keys.persons is not None and keys.persons.dtype == np.dtype("S32")
        assert keys.person_of is eager.person_codes  # one person code per row, shared, not copied
    else:
        assert keys.persons is None and keys.person_of is None
    # no per-document list (of strings or anything else) is kept by the streamed corpus
    assert not [name for name, value in vars(eager).items() if isinstance(value, (list, tuple, dict))
                and len(value) >= eager.documents]
    lazy = _streamed(path, unit, person_column)
    assert isinstance(lazy.units, StreamedUnits) and "note" not in repr(lazy.units).lower()
    led = ls.open_corpus_ledger(lazy.units, tool="test", cap=CAP, store=store)
    idx, _ = admitted_indices(lazy.units.take(lazy.train_index), led, 0.05, what="a test release")
    assert len(idx) == len(lazy.train_index) and led.view().units > 0
    made = lazy.units.keys_under(store.keys)
    np.testing.assert_array_equal(made.documents, keys.documents)
    assert made.documents.base is None or made.documents.base.dtype == np.dtype("S32")


def test_keys_made_under_another_ledger_key_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "notes.csv")
    one, other = ls.LedgerStore(tmp_path / "one"), ls.LedgerStore(tmp_path / "other")
    streamed = _streamed(path, "document", None, keys_of=one.keys)
    led = ls.open_corpus_ledger(streamed.units, tool="test", cap=CAP, store=other)
    with pytest.raises(ParameterError, match="made under another ledger's key"):
        admitted_indices(streamed.units.take(streamed.train_index), led, 0.5, what="a test release")
    assert other.totals() == {"units": 0, "releases": 0, "events": 0}


def test_unit_keys_check_their_shape() -> None:
    keys = np.array([b"k" * 32, b"l" * 32], dtype="S32")
    check = b"c" * 32
    assert len(UnitKeys("document", keys, None, None, check)) == 2
    assert "k" * 32 not in repr(UnitKeys("document", keys, None, None, check))
    with pytest.raises(ParameterError, match="'document' or 'person'"):
        UnitKeys("row", keys, None, None, check)
    with pytest.raises(ParameterError, match="one 32-byte document key per row"):
        UnitKeys("document", np.array([b"short"]), None, None, check)
    with pytest.raises(ParameterError, match="Person-unit keys need the persons' keys"):
        UnitKeys("person", keys, None, None, check)
    with pytest.raises(ParameterError, match="both the persons' keys and each row's person code"):
        UnitKeys("document", keys, keys[:1], None, check)
    with pytest.raises(ParameterError, match="names no person"):
        UnitKeys("person", keys, keys[:1], np.array([0, 1]), check)
    with pytest.raises(ParameterError, match="one 32-byte key per string"):
        UnitKeysBuilder(lambda strings: np.zeros(len(strings)), kind="document", with_persons=False)
