"""The persistent ledger as an individual privacy filter (docs/DESIGN.md §2.0; Feldman & Zrnic 2021): the budget follows
the documents (persons), not the file — supersets, subsets, reorderings, renamed columns and other files share
one budget, exhausted units are left out (exactly them), no unit ever exceeds its cap (checked against an
independent model over many random releases, and across processes really running at once)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.method.budget import admit
from dpkps_core.ledger_store.units import unit_strings
from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import SubLedger
from dpkps_core.errors import ParameterError, PrivacyBudgetError

WORDS = "striker goal match league stadium smartphone processor battery bank profits inflation airline".split()


def event(eps: float, step: str = "vocabulary") -> PrivacyEvent:
    return PrivacyEvent(mechanism="test_mechanism", step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0 / eps,
                        released="a test release")


def rows(start: int, stop: int) -> list[dict[str, str]]:
    return [{"text": f"Note {i}: the {WORDS[i % 12]} and the {WORDS[(i * 5) % 12]} were discussed at length today.",
             "label": ("alpha", "beta")[i % 2], "person": f"p{i // 3}"} for i in range(start, stop)]


def write_csv(path: Path, records: list[dict[str, str]], *, text: str = "text", label: str = "label") -> Path:
    lines = [f"{text},{label},person"] + [f'"{r["text"]}",{r["label"]},{r["person"]}' for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"body": r["text"], "cls": r["label"], "who": r["person"]}) + "\n"
                            for r in records), encoding="utf-8")
    return path


def spends(corpus: Corpus, *, by_person: bool = False) -> dict[str, float]:
    """Each unit's spend as the store holds it (through the public view of a one-unit corpus)."""
    store = ls.LedgerStore()
    out = {}
    for u in set(unit_strings(corpus, by_person=by_person)):
        out[u] = ls.open_corpus_ledger([u], tool="test", store=store).view().largest_spend
    return out


# ------------------------------------------------------------------------------------------ files share one budget

def test_supersets_subsets_reorderings_renamed_columns_and_other_files_share_one_budget(tmp_path: Path) -> None:
    base = load_corpus(write_csv(tmp_path / "private.csv", rows(0, 30)), label_column="label", text_column="text")
    led = ls.open_corpus_ledger(base, tool="test", cap=5.0)
    first = admit(base, led, 3.0, by_person=False)
    first.ticket.charge(event(3.0))
    assert first.left_out == 0 and len(first.corpus) == 30
    # a superset (10 new documents), reordered, in another format, under other column names and another file name
    sup = load_corpus(write_jsonl(tmp_path / "elsewhere.jsonl", rows(20, 40)[::-1] + rows(0, 20)[::-1]),
                      text_column="body", label_column="cls")
    led2 = ls.open_corpus_ledger(sup, tool="cli sample", cap=5.0)
    second = admit(sup, led2, 2.0, by_person=False)             # 3 + 2 = 5 ≤ 5: everyone still fits
    second.ticket.charge(event(2.0))
    assert second.left_out == 0
    third = admit(sup, led2, 1.0, by_person=False)              # the 30 shared documents are at the cap now
    third.ticket.charge(event(1.0))
    shared = {r["text"] for r in rows(0, 30)}
    assert third.left_out == 30 and set(third.corpus.texts) == {r["text"] for r in rows(30, 40)}
    assert not shared & set(third.corpus.texts)
    # a subset under renamed columns: every document is exhausted, all left out; nothing charged to anyone
    sub = load_corpus(write_csv(tmp_path / "subset.csv", rows(5, 15), text="notes", label="category"),
                      text_column="notes", label_column="category")
    assert admit(sub, ls.open_corpus_ledger(sub, tool="app"), 0.5, by_person=False).left_out == 10
    got = spends(sup)
    assert all(got[u] == pytest.approx(5.0) for u in unit_strings(base, by_person=False))
    assert all(got[u] == pytest.approx(3.0) for u in unit_strings(sup, by_person=False) if u not in
               set(unit_strings(base, by_person=False)))
    view = led.view()
    assert view.largest_spend == pytest.approx(5.0) and view.left_out(0.1) == 30
    # the releases that touched the base corpus's documents, from whichever file they came
    assert [(r.epsilon, r.in_corpus) for r in view.releases] == [(3.0, 30), (2.0, 30)]  # not the later ones
    assert [(r.epsilon, r.in_corpus) for r in ls.open_corpus_ledger(sup, tool="t").view().releases] == \
        [(3.0, 30), (2.0, 40), (1.0, 10)]


def test_a_release_that_is_refused_whole_only_on_public_input() -> None:
    units = [f"document\x1fdoc {i}\x1fx" for i in range(5)]
    led = ls.open_corpus_ledger(units, tool="test", cap=4.0)
    with pytest.raises(ParameterError, match="ε must be a finite number > 0"):
        led.admit(units, float("nan"))
    with pytest.raises(PrivacyBudgetError, match="over the budget cap of 4"):
        led.admit(units, 4.5)                                     # the user's ε vs the cap setting: public
    assert led.view().largest_spend == 0 and led.view().releases == ()
    ticket = led.admit(units, 4.0)
    assert ticket.all()
    ticket.charge(event(4.0))
    # every unit is exhausted: the release still goes ahead (on no input) — no refusal that depends on the data
    other = ls.open_corpus_ledger(units, tool="test", cap=4.0)
    ticket = other.admit(units, 1.0)
    assert not ticket.any()
    ticket.charge(event(1.0))
    assert other.view().largest_spend == pytest.approx(4.0) and len(other.view().releases) == 1  # none took part
    assert other.store.totals() == {"units": 5, "releases": 2, "events": 2}  # …but the release is recorded


def test_an_event_belongs_to_its_admission_and_a_charge_without_one_is_explicit() -> None:
    """Issue 35 part 7: the ticket ``admit`` returns is the only way to charge that release's events, even with
    several admissions open at once (two threads of one app session); with no admission an event is charged to
    every unit explicitly (``charge_every_unit``), and a plain ``charge`` is refused."""
    units = [f"document\x1fdoc {i}" for i in range(6)]
    led = ls.open_corpus_ledger(units, tool="test", run="r1", cap=10.0)
    first = led.admit(units[:4], 3.0, what="the private vocabulary step")
    second = led.admit(units[:1], 1.0, what="the DP count")         # both admissions open at once
    assert first.mask.tolist() == [True] * 4 and len(second) == 1
    second.charge(event(1.0, "size"))                                # the later admission's event, charged first
    first.charge(event(1.0, "kde"))
    first.charge(event(2.0, "kde"))                                  # one admission, two events (ensemble members)
    with pytest.raises(ParameterError, match="more than its admission reserved"):
        second.charge(event(0.5))                                    # its ε is used up: never another's
    with pytest.raises(ParameterError, match="is charged through its admission's ticket"):
        led.charge(event(0.5))
    led2 = ls.open_corpus_ledger(units, tool="test", run="r2", cap=10.0)
    led2.charge_every_unit(event(2.0, "class_counts"))               # explicit: every opened unit is charged
    view = led2.view()
    assert [(r.what, r.epsilon, r.in_corpus, r.filtered, [e.event.step for e in r.events]) for r in view.releases] == [
        ("the private vocabulary step", 3.0, 4, True, ["kde", "kde"]),
        ("the DP count", 1.0, 1, True, ["size"]),
        ("class_counts (test_mechanism)", 2.0, 6, False, ["class_counts"]),
    ]
    assert sorted(view.spent.tolist()) == [2.0, 2.0, 5.0, 5.0, 5.0, 6.0]
    # the run's own report lists its events only, and never the corpus's private figures
    assert led.total_epsilon == 4.0 and led2.total_epsilon == 2.0
    assert [e.step for e in first.events] == ["kde", "kde"] and first.remaining_epsilon == 0.0
    assert set(led.to_dict()) == {"epsilon_total", "delta_total", "epsilon_cap", "epsilon_by_step", "events"}


def test_sub_ledger_admits_through_its_parent_and_honours_both_caps() -> None:
    units = [f"document\x1fdoc {i}" for i in range(4)]
    parent = ls.open_corpus_ledger(units, tool="cli compare", cap=10.0)
    a = SubLedger(parent, cap=6.0)
    ticket = a.admit(units, 4.0)
    assert ticket.all()
    shared = ticket.charge(event(4.0))
    b = SubLedger(parent, cap=6.0)
    b.reuse(shared)                                                  # one release used by two methods
    ticket = b.admit(units[:2], 2.0)
    assert ticket.all()
    ticket.charge(event(2.0, "augpe"))
    with pytest.raises(ParameterError, match="is charged through its admission's ticket"):
        SubLedger(parent).charge(event(0.1, "augpe"))                # no admission: the parent refuses it
    with pytest.raises(PrivacyBudgetError, match="over the budget cap of 6"):
        b.admit(units, 0.5)                                          # b's own cap: public
    assert parent.total_epsilon == 6.0 and parent.view().largest_spend == pytest.approx(6.0)
    assert sorted(parent.view().spent.tolist()) == [4.0, 4.0, 6.0, 6.0]


# ------------------------------------------------------------------------------------------ persons

def test_a_persons_documents_are_admitted_or_left_out_together_and_charged_once(tmp_path: Path) -> None:
    corpus = load_corpus(write_csv(tmp_path / "people.csv", rows(0, 12)), text_column="text", label_column="label",
                         person_column="person")
    assert len(set(corpus.persons)) == 4
    led = ls.open_corpus_ledger(corpus, tool="test", cap=4.0)        # units by person (it has a person column)
    first = admit(corpus, led, 1.5, by_person=True)
    first.ticket.charge(event(1.5))
    assert first.left_out == 0
    assert sorted(led.view().spent.tolist()) == [1.5] * 4            # ε once per person, not per document
    # each of their rows' document keys took 2 × 1.5 (PRIVACY.md "Units and group privacy")
    assert spends(corpus) == {u: pytest.approx(3.0) for u in unit_strings(corpus, by_person=False)}
    # another file holds new persons, new documents of p0 and p3, and one old document of each
    more = (rows(100, 103) + [dict(r, person="p0") for r in rows(200, 202)] + rows(0, 1)
            + [dict(r, person="p3") for r in rows(300, 301)] + rows(9, 10))
    other = load_corpus(write_csv(tmp_path / "more.csv", more), text_column="text", label_column="label",
                        person_column="person")
    res = admit(other, ls.open_corpus_ledger(other, tool="test", cap=4.0), 2.0, by_person=True)
    kept = set(res.corpus.persons)
    assert kept == {"p33", "p34"} and res.left_out == 5              # p0's and p3's documents left out together
    mask = ls.open_corpus_ledger(other, tool="test", cap=4.0).admit(unit_strings(other, by_person=True), 0.5).mask
    persons = np.array(other.persons)
    for p in set(other.persons):
        assert len(set(mask[persons == p].tolist())) == 1                # never split a person
    assert mask[persons == "p0"].all()                                    # rows 3 + 1 ≤ 4, person 1.5 + 0.5 ≤ 4


# ------------------------------------------------------------------------------------------ randomized, against a model

def test_no_unit_ever_exceeds_its_cap_over_many_random_releases() -> None:
    """300 releases of random subsets (with repeats: a person's documents) at random ε, with cap raises and new
    units on the way, checked against an independent model of the filter after every release."""
    rng = np.random.default_rng(20240611)
    pool = [f"document\x1fpool text {i}" for i in range(60)]
    model_spent: dict[str, float] = {}
    model_cap: dict[str, float] = {}
    store = ls.LedgerStore()
    cap_setting = 6.0
    for step in range(300):
        if step % 60 == 59:                                              # raise the cap of one corpus's units
            corpus = list(dict.fromkeys(pool[int(i)] for i in rng.choice(len(pool), 20, replace=False)))
            new_cap = max(model_cap.get(u, cap_setting) for u in corpus) + float(rng.choice([1.0, 2.0]))  # a raise
            ls.open_corpus_ledger(corpus, tool="test", store=store).set_unit_cap(new_cap)
            for u in corpus:
                model_cap[u] = new_cap
                model_spent.setdefault(u, 0.0)
        if step == 150:
            cap_setting = 8.0                                           # new units from now on get 8
        docs = [pool[int(i)] for i in rng.choice(len(pool), int(rng.integers(1, 40)), replace=True)]
        eps = float(rng.choice([0.25, 0.5, 1.0, 2.0, 3.0]))
        led = ls.open_corpus_ledger(docs, tool="test", store=store, cap=cap_setting)
        ticket = led.admit(docs, eps)
        ticket.charge(event(eps))
        expected = []
        for u in docs:
            if u not in model_spent:
                model_spent[u], model_cap[u] = 0.0, cap_setting
        decided: dict[str, bool] = {}
        for u in docs:                                                  # rows sharing a text: charged per row
            if u not in decided:
                decided[u] = model_spent[u] + docs.count(u) * eps <= model_cap[u] + 1e-9
                if decided[u]:
                    model_spent[u] += docs.count(u) * eps
            expected.append(decided[u])
        assert ticket.mask.tolist() == expected, step
    view = ls.open_corpus_ledger(pool, tool="test", store=store).view()
    assert view.known == len(model_spent)
    by_unit = {u: (float(view.spent[k]), float(view.caps[k])) for k, u in enumerate(pool)}
    for u, (spent, cap) in by_unit.items():
        assert spent <= cap + 1e-9
        assert spent == pytest.approx(model_spent.get(u, 0.0), abs=1e-12)
        if u in model_cap:
            assert cap == model_cap[u]
    assert max(model_spent.values()) > 5.0                                # the caps did bind


# ------------------------------------------------------------------------------------------ really concurrent

def _concurrent_run(root: Path, workers: int = 4, releases: int = 25) -> tuple[list, list[str], float]:
    from ledger_workers import admit_and_charge

    pool = [f"document\x1fshared text {i}" for i in range(40)]
    cap = 6.0
    ls.open_corpus_ledger(pool, tool="test", store=ls.LedgerStore(root)).set_unit_cap(cap)  # the units' cap
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    # each worker's own run cap is far above: only the units' caps bind
    procs = [ctx.Process(target=admit_and_charge, args=(str(root), pool, 1000.0, seed, releases, barrier, results))
             for seed in range(workers)]
    for p in procs:
        p.start()
    out = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return out, pool, cap


@pytest.mark.slow
def test_concurrent_processes_never_overspend_and_every_charge_is_accounted_for(tmp_path: Path) -> None:
    root = tmp_path / "ledgers"
    out, pool, cap = _concurrent_run(root)
    assert [o[4] for o in out] == [None] * len(out)                    # no worker failed
    starts, ends = [o[2] for o in out], [o[3] for o in out]
    assert max(starts) < min(ends)                                     # they really ran at the same time
    expected = {u: 0.0 for u in pool}
    admissions = 0
    for _, done, *_ in out:
        admissions += len(done)
        for chosen, eps in done:
            for i in chosen:
                expected[pool[i]] += eps
    store = ls.LedgerStore(root)
    view = ls.open_corpus_ledger(pool, tool="test", store=store).view()
    stored = {u: float(view.spent[k]) for k, u in enumerate(pool)}
    assert all(v <= cap + 1e-9 for v in expected.values())             # no unit took part beyond its cap…
    assert all(s <= cap + 1e-9 for s in stored.values())               # …nor is charged beyond it
    assert stored == pytest.approx(expected, abs=1e-9)                 # every admitted charge is in the store
    assert max(stored.values()) > cap - 1.5                            # and the cap did bind
    totals = store.totals()
    assert totals["releases"] == totals["events"] == admissions == 4 * 25


# ------------------------------------------------------------------------------------------ the store's size

def test_participation_records_are_compact() -> None:
    store = ls.LedgerStore()
    units = [f"document\x1fdoc {i}\x1fx" for i in range(20_000)]
    led = ls.open_corpus_ledger(units, tool="test", store=store)
    for _ in range(5):
        led.admit(units, 1.0)
    with sqlite3.connect(store.path) as conn:
        sizes = [len(b) for (b,) in conn.execute("SELECT bitmap FROM releases")]
    assert len(sizes) == 5 and max(sizes) < 200                        # 20,000 participants in < 200 bytes each
    assert os.path.getsize(store.path) < 3_000_000
