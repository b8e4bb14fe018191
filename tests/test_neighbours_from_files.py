"""Neighbours stay neighbours from the raw file on disk (docs/DESIGN.md §2, §2.0; docs/PRIVACY.md "Loading and
de-duplication").

Each case writes two CSV files to disk, D and D′, that differ by one row (document unit) or by all rows of one
person (person unit), loads both through the public loader with the SAME public arguments, and runs the release
path's statistics on what was loaded:

- the held-out split (``split_documents``): the training parts differ by at most that document / person;
- the vocabulary histogram (``pipeline.term_counts`` with S; groups = persons for the person unit): L1 ≤ S;
- the stacked per-class keyphrase histograms (``class_keyphrase_histograms`` over a fixed public Ṽ, with M):
  L1 ≤ 1.

The cases are those a careless loader breaks: a text repeated under ANOTHER label before or after the original
(first-copy de-duplication across labels turned it into a label swap), an empty label or person id (refusing
the whole file), a much longer text in another column (a value-based column guess switched columns), an
identical row, and removing one person who shares boilerplate notes with k = 20 others (first-copy
de-duplication across persons moved the boilerplate to another person).
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.errors import DPKPSError
from dpkps_core.method.pipeline import extract_keyphrases, term_counts
from dpkps_core.method.split import split_documents
from dpkps_core.method.vocabulary import PublicVocabulary

CLASSES = ("cardiology", "neurology", "oncology")
TERMS = ("angina", "arrhythmia", "stent", "murmur", "infarction", "seizure", "migraine", "stroke", "tremor",
         "neuropathy", "tumour", "biopsy", "chemotherapy", "metastasis", "lymphoma", "fever", "fatigue", "nausea",
         "dizziness", "discharge", "follow", "medication", "dose", "scan")
V = PublicVocabulary("test-v", TERMS, "test", "tests/test_neighbours_from_files.py")
S = 3   # distinct terms counted per document (per person for the person unit)
M = 4   # keyphrases kept per document
# a fixed PUBLIC Ṽ (in a release it is the DP output of the vocabulary step; here fixed so only D vs D′ varies)
V_TILDE = PrivateVocabulary(terms=TERMS[::2] + ("discharge", "follow", "medication"), noisy_counts=np.zeros(15),
                            public_vocabulary="test-v", public_vocabulary_size=len(TERMS), epsilon=1.0,
                            terms_per_doc=S, requested_size=15, noise_scale=S)
COLUMNS = ("record", "patient", "note_text", "summary", "label")
BOILERPLATE = ("Discharge instructions: take medication dose daily and follow up, scan if fever or nausea.",
               "Standard follow up letter: medication reviewed, dose unchanged, dizziness or fatigue to report.")


def _row(i: int, text: str, label: str, patient: str, summary: str | None = None) -> dict[str, str]:
    return {"record": f"r{i:04d}", "patient": patient, "note_text": text, "summary": summary or text[:24],
            "label": label}


def _base_rows(n_patients: int = 30, *, shared: int = 0) -> list[dict[str, str]]:
    """Clinical-looking notes: each patient has 1–3 notes of their own class's terms; the first ``shared``
    patients also have the two boilerplate notes (same text, same label under each of them)."""
    rng = np.random.default_rng(7)
    rows: list[dict[str, str]] = []
    for p in range(n_patients):
        pid = f"P{p:03d}"
        cls = CLASSES[p % 3]
        if p < shared:
            rows += [_row(len(rows), BOILERPLATE[0], "cardiology", pid), _row(len(rows) + 1, BOILERPLATE[1],
                                                                              "cardiology", pid)]
        own = TERMS[5 * (p % 3): 5 * (p % 3) + 5]
        for j in range(1 + p % 3):
            words = rng.choice(own + TERMS[15:], size=5, replace=False)
            rows.append(_row(len(rows), f"Note {j} for patient {p}: " + ", then ".join(words) + " were noted.",
                             cls, pid))
    return rows


def _write(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return path


def _load(path: Path, by_person: bool) -> Corpus | str:
    """The public loader with fixed public arguments; a refusal is returned as its message."""
    try:
        return load_corpus(path, classes=CLASSES, person_column="patient" if by_person else None)
    except DPKPSError as exc:
        return f"refused: {exc}"


def _rows_of(c: Corpus, by_person: bool) -> Counter:
    persons = c.persons if by_person else [""] * len(c)
    return Counter(zip(c.texts, c.labels, persons))


def _statistics(c: Corpus, by_person: bool, test_fraction: float) -> dict[str, Any]:
    """The release path's statistics of a loaded corpus (pipeline.run_sampling's order: split, training part of
    the declared classes, term counts, keyphrases, stacked per-class histograms)."""
    split = split_documents(c, test_fraction=test_fraction, seed=0, by_person=by_person)
    train = c.subset(split.train).declared_only()
    groups = train.persons if by_person else None
    counts = term_counts(train.texts, V, terms_per_doc=S, groups=groups)
    keyphrases = extract_keyphrases(train.texts, V_TILDE, max_per_doc=M)
    hist = class_keyphrase_histograms(keyphrases, train.labels, CLASSES, len(V_TILDE), max_per_doc=M, groups=groups)
    return {"train": _rows_of(train, by_person), "counts": counts, "hist": hist}


def _assert_neighbours(tmp_path: Path, rows_d: list[dict[str, str]], rows_d2: list[dict[str, str]], *,
                       by_person: bool, removed_person: str | None = None) -> None:
    """D and D′ load as neighbours and every release statistic moves by at most its stated sensitivity."""
    a = _load(_write(tmp_path / "d.csv", rows_d), by_person)
    b = _load(_write(tmp_path / "d_prime.csv", rows_d2), by_person)
    assert not isinstance(a, str), a
    assert not isinstance(b, str), f"D loads but its neighbour D′ is {b}"
    broken: list[str] = []  # every violated bound, so a failure shows all of them at once
    da, db = _rows_of(a, by_person), _rows_of(b, by_person)
    diff = (da - db) + (db - da)
    if removed_person is None and sum(diff.values()) > 1:
        broken.append(f"the loaded corpora differ by {sum(diff.values())} documents, not at most 1")
    if removed_person is not None and any(p != removed_person for (_, _, p) in diff):
        broken.append("removing one person changed another person's loaded documents")
    for test_fraction in (0.3, 0.0):  # two public settings: a held-out part, and every document in training
        sa, sb = _statistics(a, by_person, test_fraction), _statistics(b, by_person, test_fraction)
        tdiff = (sa["train"] - sb["train"]) + (sb["train"] - sa["train"])
        at = f" (test fraction {test_fraction:g})"
        if removed_person is None and sum(tdiff.values()) > 1:
            broken.append(f"the training parts differ by {sum(tdiff.values())} documents, not at most 1{at}")
        if removed_person is not None:
            moved = {p for (_, _, p) in tdiff if p != removed_person}
            if moved:
                broken.append(f"{len(moved)} other person(s) changed in the training part{at}")
        l1_counts = int(np.abs(sa["counts"] - sb["counts"]).sum())
        if l1_counts > S:
            broken.append(f"vocabulary histogram moved by L1 = {l1_counts} > S = {S}{at}")
        l1_hist = float(np.abs(sa["hist"] - sb["hist"]).sum())
        if l1_hist > 1.0 + 1e-9:
            broken.append(f"stacked keyphrase histograms moved by L1 = {l1_hist:.3f} > 1{at}")
    assert not broken, "; ".join(broken)


# ---- document unit: one row added or removed -------------------------------------------------------------


def _doc_rows() -> list[dict[str, str]]:
    rows = _base_rows()
    # a text that also appears, later in the file, under another label (two different documents)
    assert rows[4]["label"] != "neurology"
    rows.append(_row(900, rows[4]["note_text"], "neurology", "P900"))
    return rows


def test_added_duplicate_text_under_another_label_before_the_original(tmp_path):
    rows = _doc_rows()
    extra = _row(901, rows[0]["note_text"], "neurology", "P901")
    _assert_neighbours(tmp_path, rows, [extra] + rows, by_person=False)


def test_added_duplicate_text_under_another_label_after_the_original(tmp_path):
    rows = _doc_rows()
    extra = _row(901, rows[0]["note_text"], "neurology", "P901")
    _assert_neighbours(tmp_path, rows, rows + [extra], by_person=False)


def test_removed_first_copy_of_a_text_shared_with_another_label(tmp_path):
    rows = _doc_rows()
    _assert_neighbours(tmp_path, rows, rows[:4] + rows[5:], by_person=False)


@pytest.mark.parametrize("where", [0, 17, -1])
def test_added_row_with_an_empty_label(tmp_path, where):
    rows = _doc_rows()
    extra = _row(902, "A note about seizure and migraine with tremor and fatigue noted today.", "", "P902")
    d2 = list(rows)
    d2.insert(where if where >= 0 else len(d2), extra)
    _assert_neighbours(tmp_path, rows, d2, by_person=False)


def test_added_row_with_a_much_longer_text_in_another_column(tmp_path):
    rows = _doc_rows()
    extra = _row(903, "A short note on stent and angina.", "cardiology", "P903", summary="stroke " * 60_000)
    _assert_neighbours(tmp_path, rows, [extra] + rows, by_person=False)


@pytest.mark.parametrize("where", [0, -1])
def test_added_row_identical_to_an_existing_one(tmp_path, where):
    rows = _doc_rows()
    d2 = [dict(rows[3])] + rows if where == 0 else rows + [dict(rows[3])]
    _assert_neighbours(tmp_path, rows, d2, by_person=False)
    assert _rows_of(_load(tmp_path / "d.csv", False), False) == _rows_of(_load(tmp_path / "d_prime.csv", False), False)


# ---- person unit: one person removed (or a row no person owns added) -------------------------------------


@pytest.mark.parametrize("who", [0, 1, 7, 19])
def test_removed_person_who_shares_boilerplate_with_twenty_others(tmp_path, who):
    """k = 20: persons P000…P020 each hold the same two boilerplate notes (same label). Removing any one of them
    removes exactly their documents; first-copy de-duplication moved the boilerplate to the next person."""
    rows = _base_rows(40, shared=21)
    pid = f"P{who:03d}"
    _assert_neighbours(tmp_path, rows, [r for r in rows if r["patient"] != pid], by_person=True, removed_person=pid)


def test_removed_person_with_a_text_shared_under_another_label(tmp_path):
    rows = _base_rows(30)
    other = dict(rows[0], patient="P050", label="oncology", record="r0950")
    rows = [other] + rows  # P050's note repeats P000's text under another label, before it
    _assert_neighbours(tmp_path, rows, [r for r in rows if r["patient"] != "P050"], by_person=True,
                       removed_person="P050")
    _assert_neighbours(tmp_path, rows, [r for r in rows if r["patient"] != "P000"], by_person=True,
                       removed_person="P000")


@pytest.mark.parametrize("column", ["patient", "label"])
def test_person_unit_added_row_with_an_empty_person_id_or_label(tmp_path, column):
    rows = _base_rows(30, shared=5)
    extra = dict(rows[2], record="r0999", note_text="New note about biopsy and lymphoma with fatigue.")
    extra[column] = ""
    _assert_neighbours(tmp_path, rows, rows[:3] + [extra] + rows[3:], by_person=True, removed_person="")


@pytest.mark.parametrize("who", ["P000", "P005"])
def test_removed_person_whose_notes_are_each_shared_with_another_person(tmp_path, who):
    """k = 20 templates: P000 holds all of them first in the file, persons P001…P020 each hold one (same text,
    same label). First-copy de-duplication across persons kept P000's copies only, so removing P000 handed each
    template to a different person: twenty persons' documents, split keys and contributions changed."""
    templates = [f"Template {k}: " + " and ".join(TERMS[(3 * k + j) % len(TERMS)] for j in range(4)) + " reviewed."
                 for k in range(1, 21)]
    rows = [_row(k, t, CLASSES[k % 3], "P000") for k, t in enumerate(templates)]
    rows += [_row(100 + k, templates[k - 1], CLASSES[k % 3], f"P{k:03d}") for k in range(1, 21)]
    rows += [r for r in _base_rows(40) if r["patient"] > "P020"]  # other persons' own notes
    _assert_neighbours(tmp_path, rows, [r for r in rows if r["patient"] != who], by_person=True, removed_person=who)
