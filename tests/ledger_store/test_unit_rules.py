"""The ledger's unit rules on files through the real loader (docs/DESIGN.md §2.0 "Every key a release could touch is
charged, and checked", "One text normalisation…"; issue 35 parts 3, 6 and 7; docs/PRIVACY.md "Units and group
privacy").

A row's loss and a person's loss never exceed the cap, whichever unit each release used: switching to the person
unit opens no second budget, a relabelled text keeps its budget, document-unit releases count toward a known
person by group privacy — checked on fixed cases and against an in-test model of the true losses over random
sequences of document- and person-unit releases. One normalisation makes near-identical rows one document and one
unit. A new ledger says so and has a stable id that is not its path.
"""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path
from typing import Sequence

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.method.budget import admit
from dpkps_core.ledger_store.units import unit_strings
from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.method.budget import release_unit_count
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.errors import PrivacyBudgetError

CAP = 1.0
TOPICS = ("angina and a stent", "a seizure and migraine", "a tumour biopsy", "fever and nausea", "a stroke",
          "dizziness at night", "a tremor of the hand", "fatigue after the dose")


def _event(eps: float) -> PrivacyEvent:
    return PrivacyEvent(mechanism="test_mechanism", step="vocabulary", epsilon=eps, sensitivity=1.0,
                        noise_scale=1.0 / eps, released="a test release")


def _note(i: int) -> str:
    return f"Clinic note {i}: the patient reported {TOPICS[i % len(TOPICS)]} during the visit."


def _write(path: Path, rows: Sequence[tuple[str, str, str, str]]) -> Path:
    """rows: (note, condition, rating, patient) — one CSV file on disk, read back by the real loader."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["note", "condition", "rating", "patient"])
        w.writerows(rows)
    return path


def _load(path: Path, *, persons: bool, label: str = "condition") -> Corpus:
    return load_corpus(path, text_column="note", label_column=label, person_column="patient" if persons else None)


def _release(corpus: Corpus, eps: float, *, by_person: bool) -> Corpus:
    """One release of ``eps`` on ``corpus`` through the real entry (admit → compute → charge the ticket)."""
    led = ls.open_corpus_ledger(corpus, tool="test", cap=CAP, by_person=by_person)
    adm = admit(corpus, led, eps, by_person=by_person, what="a test release")
    adm.ticket.charge(_event(eps))
    return adm.corpus


def _text_spends(corpus: Corpus) -> list[float]:
    """The stored loss of each distinct document key of ``corpus``'s rows, in first-seen order (through the
    public view of a document-unit ledger)."""
    plain = Corpus(corpus.texts, corpus.labels, "t", "t")
    return ls.open_corpus_ledger(plain, tool="test", by_person=False).view().spent.tolist()


SIX = [(_note(0), "angina", "8", "P0"), (_note(1), "migraine", "3", "P0"), (_note(2), "tumour", "5", "P1"),
       (_note(3), "fever", "9", "P1"), (_note(4), "stroke", "2", "P2"), (_note(5), "dizziness", "7", "P3")]


# ------------------------------------------------------------------------------------------ part 3: fixed cases

def test_switching_to_the_person_unit_opens_no_second_budget(tmp_path: Path) -> None:
    path = _write(tmp_path / "notes.csv", SIX)
    docs = _load(path, persons=False)
    assert len(_release(docs, 1.0, by_person=False)) == 6            # every row admitted…
    assert len(_release(docs, 1.0, by_person=False)) == 0            # …then none: each row is at its cap
    people = _load(path, persons=True)
    assert len(set(people.persons)) == 4
    assert len(_release(people, 1.0, by_person=True)) == 0           # the same rows by person: still nothing
    assert len(_release(people, 0.05, by_person=True)) == 0          # however small the ε
    assert max(_text_spends(docs)) == pytest.approx(CAP)


def test_a_person_release_charges_each_of_their_rows_and_leaves_out_a_person_whose_row_is_spent(tmp_path: Path
                                                                                               ) -> None:
    path = _write(tmp_path / "notes.csv", SIX)
    people = _load(path, persons=True)
    assert len(_release(people, 0.25, by_person=True)) == 6          # rows charged 2 × 0.25 each
    assert _text_spends(people) == pytest.approx([0.5] * 6)
    view = ls.open_corpus_ledger(people, tool="test", cap=CAP).view()  # what the sidebar and `ledger` show
    assert view.spent.tolist() == pytest.approx([0.25] * 4)          # each person's loss
    assert view.left_out(0.25) == 0 and view.left_out(0.3) == 4      # rows at 0.5: 2 × 0.3 no longer fits
    one_row = _write(tmp_path / "one.csv", SIX[2:3])                 # P1's first note alone, document unit
    assert len(_release(_load(one_row, persons=False), 0.5, by_person=False)) == 1   # that row is now at 1.0
    again = _release(people, 0.25, by_person=True)                   # P1 has a spent row: P1 left out whole
    assert sorted(set(again.persons)) == ["P0", "P2", "P3"]
    assert max(_text_spends(people)) <= CAP + 1e-9


def test_a_relabelled_text_is_charged_against_the_same_budget(tmp_path: Path) -> None:
    path = _write(tmp_path / "drugs.csv", SIX)
    assert len(_release(_load(path, persons=False, label="condition"), 1.0, by_person=False)) == 6
    by_rating = _load(path, persons=False, label="rating")           # the same texts under other labels
    assert len(_release(by_rating, 0.1, by_person=False)) == 0
    # rows of one corpus that share a text share its key, charged once per row (group privacy)
    twice = _write(tmp_path / "twice.csv", [(_note(7), "tremor", "1", "P7"), (_note(7), "fatigue", "2", "P8")])
    shared = _load(twice, persons=False)
    assert len(shared) == 2
    assert len(_release(shared, 0.6, by_person=False)) == 0          # 2 × 0.6 > 1: both rows left out
    assert len(_release(shared, 0.5, by_person=False)) == 2          # 2 × 0.5 = 1
    assert _text_spends(shared) == pytest.approx([1.0])                # one key for the two rows


def test_document_unit_releases_count_toward_a_known_person(tmp_path: Path) -> None:
    rows = [(_note(i), "angina" if i % 2 else "fever", "1", "P0" if i < 3 else f"P{i}") for i in range(6)]
    path = _write(tmp_path / "notes.csv", rows)
    people = _load(path, persons=True)                               # the person column is known…
    got = _release(people, 0.4, by_person=False)                     # …in a document-unit release
    assert sorted(got.persons) == ["P3", "P4", "P5"]                 # P0's 3 rows: 3 × 0.4 > 1, left out
    assert len(_release(people, 0.3, by_person=False)) == 6          # P0: 3 × 0.3 ≤ 1; P3–P5: 0.4 + 0.3 ≤ 1
    later = _release(people, 0.15, by_person=True)                   # P0 has lost 0.9 by group privacy
    assert sorted(set(later.persons)) == ["P3", "P4", "P5"]          # 0.9 + 0.15 > 1; P3–P5: 0.7 + 0.15 ≤ 1
    # a document-unit release that did not know the persons still counts once they are known
    fresh = _write(tmp_path / "fresh.csv", [(_note(10 + i), "stroke", "1", "Q0") for i in range(3)])
    assert len(_release(_load(fresh, persons=False), 0.3, by_person=False)) == 3
    assert len(_release(_load(fresh, persons=True), 0.2, by_person=True)) == 0   # Q0: 3 × 0.3 + 0.2 > 1


def test_a_dp_count_of_persons_charges_each_row_once(tmp_path: Path) -> None:
    people = _load(_write(tmp_path / "notes.csv", SIX), persons=True)
    led = ls.open_corpus_ledger(people, tool="test", cap=CAP)
    released, left_out = release_unit_count(unit_strings(people, by_person=True), epsilon=0.5,
                                            context=ReleaseContext(noise=NoiseSource(3), ledger=led), what="persons")
    assert left_out == 0 and led.total_epsilon == 0.5
    assert _text_spends(people) == pytest.approx([0.5] * 6)          # factor 1: a row moves the count by ≤ 1
    assert sorted(led.view().spent.tolist()) == [0.5] * 4


# ------------------------------------------------------------------------------------------ part 3: random sequences

UNIVERSE = [  # (text, label, person): (text, label) unique, so a file without persons collapses nothing
    (_note(0), "angina", "P0"), (_note(1), "fever", "P0"), (_note(2), "angina", "P0"),
    (_note(3), "fever", "P1"), (_note(0), "fever", "P1"),              # P0's first text again, under P1
    (_note(4), "angina", "P2"), (_note(5), "angina", "P3"), (_note(5), "fever", "P3"),  # one text, two labels
    (_note(6), "angina", "P4"),
]


def _random_sequence(tmp_path: Path, seed: int, *, unknown_persons: bool) -> tuple[int, int]:
    """Random document- and person-unit releases over UNIVERSE, each on a file through the loader, checked after
    every release against a model of the true losses: a text's (ε per row of a document-unit release, 2ε per row
    of a person-unit release) and a person's (ε per person-unit release, ε per row of a document-unit release).

    ``unknown_persons``: some document-unit releases come from files without the person column (then they count
    toward the person only through the rows at hand: the releases that know persons use every row)."""
    rng = np.random.default_rng(seed)
    text_loss = {t: 0.0 for t, _, _ in UNIVERSE}
    person_loss = {p: 0.0 for _, _, p in UNIVERSE}
    admitted_rows = admitted_persons = 0
    for step in range(24):
        kind = rng.choice(["document", "person", "unknown"] if unknown_persons else ["document", "person"])
        eps = float(rng.choice([0.1, 0.15, 0.2, 0.3, 0.5]))
        if kind == "unknown" or not unknown_persons:
            chosen = sorted(rng.choice(len(UNIVERSE), int(rng.integers(1, len(UNIVERSE) + 1)), replace=False))
        else:
            chosen = list(range(len(UNIVERSE)))
        rows = [(UNIVERSE[i][0], UNIVERSE[i][1], "1", UNIVERSE[i][2]) for i in rng.permutation(chosen)]
        corpus = _load(_write(tmp_path / f"r{seed}-{step}.csv", rows), persons=kind != "unknown")
        got = _release(corpus, eps, by_person=kind == "person")
        index = {(t, y): p for t, y, p in UNIVERSE}
        took = [(t, y, index[(t, y)]) for t, y in zip(got.texts, got.labels)]
        for t, _, p in took:
            text_loss[t] += 2 * eps if kind == "person" else eps
            if kind != "person":
                person_loss[p] += eps
        if kind == "person":
            for p in {p for _, _, p in took}:
                person_loss[p] += eps
            admitted_persons += len({p for _, _, p in took})
        admitted_rows += len(took)
        assert max(text_loss.values()) <= CAP + 1e-9, (seed, step, text_loss)
        if not unknown_persons:
            assert max(person_loss.values()) <= CAP + 1e-9, (seed, step, person_loss)
        elif kind != "unknown":
            assert all(person_loss[p] <= CAP + 1e-9 for _, _, p in took), (seed, step, person_loss)
    return admitted_rows, admitted_persons


@pytest.mark.parametrize("seed", range(5))
def test_no_row_or_person_ever_exceeds_the_cap_over_random_releases(tmp_path: Path, seed: int) -> None:
    rows, persons = _random_sequence(tmp_path, seed, unknown_persons=False)
    assert rows > 0 and persons > 0                                   # the releases did take part, then bound


@pytest.mark.parametrize("seed", range(3))
def test_releases_that_did_not_know_the_persons_still_count_toward_them(tmp_path: Path, seed: int) -> None:
    rows, _ = _random_sequence(tmp_path, 100 + seed, unknown_persons=True)
    assert rows > 0


# ------------------------------------------------------------------------------------------ part 6: one normalisation

def test_near_identical_rows_are_one_document_and_one_unit(tmp_path: Path) -> None:
    """Five rows differing only in inner whitespace or Unicode form: one document (the loader's de-duplication
    and the document key share normalise_document_text) and one unit, charged once."""
    forms = ["Caf\u00e9 visit: the patient reported a fever and nausea.",       # NFC
             "Cafe\u0301 visit: the patient reported a fever and nausea.",      # NFD
             "Caf\u00e9 visit:  the patient reported a fever\tand nausea.",     # inner whitespace
             "Caf\u00e9 visit: the patient reported a fever\u00a0and nausea.",  # no-break space (NFKC)
             "Caf\u00e9 visit: the patient reported a fever and nausea. "]     # trailing space
    rows = [(f, "fever", "1", "P0") for f in forms] + [(_note(1), "migraine", "1", "P1")]
    path = _write(tmp_path / "forms.csv", rows)
    for persons in (False, True):
        corpus = _load(path, persons=persons)
        assert len(corpus) == 2                                       # one document of the five forms
        assert len(set(unit_strings(corpus, by_person=False))) == 2  # …and one unit
    docs = _load(path, persons=False)
    assert len(_release(docs, 0.5, by_person=False)) == 2
    assert _text_spends(docs) == pytest.approx([0.5, 0.5])           # charged once, not five times
    # under two labels they stay two documents, sharing one key that is charged per row
    two = _write(tmp_path / "two.csv", [(forms[0], "fever", "1", "P0"), (forms[1], "nausea", "1", "P0")])
    pair = _load(two, persons=False)
    assert len(pair) == 2 and len(set(unit_strings(pair, by_person=False))) == 1
    assert len(_release(pair, 0.25, by_person=False)) == 2
    assert _text_spends(pair) == pytest.approx([1.0])                # one key: 0.5 before + 2 × 0.25


# ------------------------------------------------------------------------------------------ part 7: a new ledger

def test_a_new_ledger_says_so_and_has_a_stable_id_that_is_not_its_path(tmp_path: Path) -> None:
    root = tmp_path / "new-ledger-folder"
    first = ls.LedgerStore(root)
    assert first.created
    again = ls.LedgerStore(root)
    assert not again.created and again.ledger_id == first.ledger_id
    assert len(first.ledger_id) == 32 and "ledger-folder" not in first.ledger_id
    assert ls.LedgerStore(tmp_path / "other").ledger_id != first.ledger_id
    led = ls.open_corpus_ledger(["document\x1fa"], tool="test", store=again)
    assert led.ledger_id == first.ledger_id and not led.created


def test_the_cli_says_when_it_created_a_new_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from dpkps_core.cli.main import main

    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(tmp_path / "fresh"))
    path = _write(tmp_path / "notes.csv", SIX)
    assert main(["ledger", "--corpus", str(path), "--text-column", "note", "--label-column", "condition"]) == 0
    err = capsys.readouterr().err
    assert "a new, empty privacy ledger was created" in err and ls.LedgerStore().ledger_id in err
    assert main(["ledger", "--corpus", str(path), "--text-column", "note", "--label-column", "condition"]) == 0
    assert "new, empty privacy ledger" not in capsys.readouterr().err


def test_a_ledger_of_the_previous_version_is_refused_not_reset(tmp_path: Path) -> None:
    root = tmp_path / "old"
    store = ls.LedgerStore(root)
    with sqlite3.connect(store.path) as conn:
        conn.execute("UPDATE meta SET value = '1' WHERE name = 'version'")
    with pytest.raises(PrivacyBudgetError, match="written by an earlier version"):
        ls.LedgerStore(root)


# ------------------------------------------------------------------------------------------ part 4: a run's events

def test_a_runs_events_are_recorded_under_the_run_that_admitted_them(tmp_path: Path) -> None:
    """The ledger files an event under the run of its admission, even when the ledger's run label moved on before
    the charge (another job of the same session), and lists a run's events for its report (issue 35 part 4)."""
    people = _load(_write(tmp_path / "notes.csv", SIX), persons=False)
    led = ls.open_corpus_ledger(people, tool="app", run="run-a", cap=10.0)
    first = admit(people, led, 1.0, by_person=False, what="the private vocabulary step")
    led.run = "run-b"                                                # the session starts another run meanwhile
    second = admit(people, led, 0.5, by_person=False, what="the DP forecast")
    second.ticket.charge(_event(0.5))
    first.ticket.charge(_event(1.0))                                 # charged after the label moved: still run-a
    assert [e.event.epsilon for e in led.run_events("run-a")] == [1.0]
    assert [e.event.epsilon for e in led.run_events()] == [0.5]      # this ledger's label: run-b
    again = ls.open_corpus_ledger(people, tool="cli ledger", cap=10.0)  # another process reads the same
    assert [(e.run, e.tool, e.event.epsilon) for e in again.run_events("run-a")] == [("run-a", "app", 1.0)]
    assert again.run_events() == () and again.run_events("run-c") == ()
    rebuilt = again.run_ledger("run-a")                               # what run-a's report is derived from
    assert rebuilt.total_epsilon == 1.0 and [e.step for e in rebuilt.events] == ["vocabulary"]
    assert again.run_ledger("run-c").total_epsilon == 0.0


def test_a_ledger_for_one_run_keeps_its_own_label_and_events(tmp_path: Path) -> None:
    people = _load(_write(tmp_path / "notes.csv", SIX), persons=True)
    session = ls.open_corpus_ledger(people, tool="app", run="session", cap=10.0)
    job = session.for_run("run-7", tool="app compare")
    assert (job.run, job.tool, job.cap, job.unit_name) == ("run-7", "app compare", 10.0, "person")
    admit(people, job, 1.0, by_person=True).ticket.charge(_event(1.0))
    session.run = "run-8"                                             # the session's label moves: the job's does not
    assert job.total_epsilon == 1.0 and session.total_epsilon == 0.0
    assert [(e.run, e.tool) for e in session.run_events("run-7")] == [("run-7", "app compare")]
    assert session.view().largest_spend == pytest.approx(1.0)        # one store, one corpus


def test_release_rows_are_parsed_alike_row_by_row_and_at_c_speed() -> None:
    from dpkps_core.errors import ParameterError
    from dpkps_core.ledger_store.rules import parse_rows

    def keyed(units: list[str]) -> list[tuple[str | None, str | None]]:
        rows = parse_rows(units)
        name = lambda i: None if i < 0 else rows.strings[i]  # noqa: E731
        return [(name(d), name(p)) for d, p in zip(rows.document.tolist(), rows.person.tolist())]

    linked = ["person\x1fp\x1edocument\x1fa", "person\x1fp\x1edocument\x1fb", "person\x1fq\x1edocument\x1fa"]
    assert keyed(linked) == [("document\x1fa", "person\x1fp"), ("document\x1fb", "person\x1fp"),
                             ("document\x1fa", "person\x1fq")]
    mixed = linked[:1] + ["person\x1fq"]                              # a plain person string among linked rows
    assert keyed(mixed) == [("document\x1fa", "person\x1fp"), (None, "person\x1fq")]
    known = ["document\x1fa\x1eperson\x1fp", "document\x1fb"]         # a person known for one row only
    assert keyed(known) == [("document\x1fa", "person\x1fp"), ("document\x1fb", None)]
    assert parse_rows(known).kind == "document" and parse_rows(mixed).kind == "person"
    with pytest.raises(ParameterError, match="mixes document-unit and person-unit rows"):
        parse_rows(["document\x1fa", "person\x1fp"])
    with pytest.raises(ParameterError, match="identified by a string"):
        parse_rows(["document\x1fa", 3])  # type: ignore[list-item]


@pytest.mark.parametrize("seed", range(4))
def test_the_filter_holds_the_caps_over_long_random_sequences_with_either_factor(seed: int) -> None:
    """200 releases on in-memory corpora (rows in random order and subsets, persons always known, a factor of 1 or
    2 per person-unit release): no text's or person's true loss ever passes the cap, and the releases keep
    admitting rows until the caps bind."""
    rng = np.random.default_rng(1000 + seed)
    universe = UNIVERSE + [(_note(7), "angina", "P4"), (_note(4), "fever", "P1")]   # P1 shares P2's text too
    text_loss = {t: 0.0 for t, _, _ in universe}
    person_loss = {p: 0.0 for _, _, p in universe}
    admitted = 0
    for step in range(200):
        chosen = rng.permutation(rng.choice(len(universe), int(rng.integers(1, len(universe) + 1)), replace=False))
        rows = [universe[i] for i in chosen]
        corpus = Corpus(tuple(r[0] for r in rows), tuple(r[1] for r in rows), "t", "memory",
                        persons=tuple(r[2] for r in rows))
        by_person = bool(rng.integers(2))
        eps, factor = float(rng.choice([0.05, 0.1, 0.2])), float(rng.choice([1.0, 2.0]))
        led = ls.open_corpus_ledger(corpus, tool="test", cap=CAP, by_person=by_person)
        adm = admit(corpus, led, eps, by_person=by_person, row_factor=factor)
        adm.ticket.charge(_event(eps))
        took = list(zip(adm.corpus.texts, adm.corpus.persons or ()))
        for t, p in took:
            text_loss[t] += factor * eps if by_person else eps
            person_loss[p] += 0.0 if by_person else eps
        for p in {p for _, p in took} if by_person else ():
            person_loss[p] += eps
        admitted += len(took)
        assert max(text_loss.values()) <= CAP + 1e-9, (seed, step)
        assert max(person_loss.values()) <= CAP + 1e-9, (seed, step)
    assert admitted > 0 and max(text_loss.values()) > CAP - 0.25      # the caps did bind
