"""The persistent ledger's store (dpkps_core.ledger_store; docs/DESIGN.md §2.0): owner-only files that hold no text, path or
file name; fail closed (damaged, truncated or foreign store, damaged or missing key, unusable folder: an error that
spends nothing, never a fallback); previous-format files refused until imported; the ``ledger`` command; one
default cap for the CLI and the app.

Exact behaviour pinned (mutation testing) for the persistent ledger's filter (docs/TESTING.md "Mutation testing"; docs/DESIGN.md §2.0;
docs/PRIVACY.md): LedgerStore.admit and PersistentLedger.admit/charge — the user-facing refusals naming what is
wrong, forced charges, the float slack at the cap, what a release row records, and what the store holds.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.ledger_store.units import unit_strings
from dpkps_core.cli import main
from dpkps_core.cli.main import build_parser
from dpkps_core.dp.ledger import DEFAULT_EPSILON_CAP
from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger, _FLOAT_SLACK
from dpkps_core.embeddings import EmbeddingCache, HashingEmbedder
from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.dossier.export import bundle_bytes
from dpkps_core.method.vocabulary import PublicVocabulary


TOPICS = {
    "sport": "striker goal match league stadium coach team cup final fans".split(),
    "tech": "smartphone processor battery software browser broadband network console update chip".split(),
    "business": "shares bank profits inflation interest rates airline fuel margins market".split(),
}


VOCAB = PublicVocabulary("test", tuple(w for ws in TOPICS.values() for w in ws), "test", "test")


def event(eps: float, step: str = "vocabulary", delta: float = 0.0) -> PrivacyEvent:
    return PrivacyEvent(mechanism="test_mechanism", step=step, epsilon=eps, delta=delta, sensitivity=1.0,
                        noise_scale=1.0 / eps, released="a test release")


def records(n: int = 30) -> list[dict[str, str]]:
    rows = []
    for label, w in TOPICS.items():
        for i in range(n):
            rows.append({"text": f"Report {i}: the {w[i % 10]} and the {w[(i + 3) % 10]} with {w[(i + 5) % 10]} today.",
                         "label": label, "other": "even" if i % 2 else "odd"})
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], *, text: str = "text", label: str = "label") -> Path:
    lines = [f"{text},{label},other"] + [f'"{r["text"]}",{r["label"]},{r["other"]}' for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def store_root() -> Path:
    return Path(os.environ[ls.LEDGER_DIR_ENV])


def units_of(rows: list[dict[str, str]]) -> list[str]:
    return unit_strings(Corpus(tuple(r["text"] for r in rows), tuple(r["label"] for r in rows), "t", "t"),
                        by_person=False)


def secrets_in_store() -> list[bytes]:
    """The key and every unit key held in the test's ledger folder."""
    root = store_root()
    out = [(root / ls.KEY_FILE).read_bytes().strip()]
    with sqlite3.connect(root / ls.STORE_FILE) as conn:
        for (blob,) in conn.execute("SELECT keys FROM unit_keys"):
            out += [blob[i:i + ls.KEY_BYTES] for i in range(0, len(blob), ls.KEY_BYTES)]
    return out


def _no_secret_in(blobs: dict[str, bytes]) -> None:
    found = secrets_in_store()
    assert len(found) > 1
    for name, data in blobs.items():
        for s in found:
            assert s not in data and s.hex().encode() not in data, name


def test_the_store_is_owner_only_and_holds_no_text_path_or_file_name(tmp_path: Path) -> None:
    assert ls.ledger_root() == store_root() and str(Path.home() / ".local") not in str(store_root())
    rows = records()
    corpus = load_corpus(write_csv(tmp_path / "secret-name.csv", rows), label_column="label", text_column="text")
    led = ls.open_corpus_ledger(corpus, tool="cli sample", run="run-1", cap=5.0)
    ticket = led.admit(unit_strings(corpus, by_person=False), 1.0, what="the private vocabulary step")
    assert ticket.all()
    ticket.charge(event(1.0))
    root = store_root()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert {p.name for p in root.iterdir()} <= {ls.KEY_FILE, ls.STORE_FILE, ls.LOCK_FILE, ls.STORE_FILE + "-wal",
                                                ls.STORE_FILE + "-shm"}
    for p in root.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) & 0o077 == 0, p.name
    content = b"".join(p.read_bytes() for p in root.iterdir())
    assert b"secret-name" not in content and str(tmp_path).encode() not in content
    assert not any(r["text"][:25].encode() in content for r in rows)
    assert not any(r["label"].encode() + b"\x1f" in content for r in rows)
    # a loose folder is tightened
    os.chmod(root, 0o755)
    ls.ledger_root()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_validation_gives_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="not a path"):
        ls.open_corpus_ledger(["a document of some length"], tool="cli sample", run="/home/me/runs/x")
    with pytest.raises(ParameterError, match="finite ε > 0"):
        ls.open_corpus_ledger(["a document of some length"], tool="t", cap=-1.0)
    with pytest.raises(ParameterError, match="not one string"):
        ls.open_corpus_ledger("one string", tool="t")
    led = ls.open_corpus_ledger(["u"], tool="t")
    with pytest.raises(ParameterError, match="identified by a string"):
        led.admit([1, 2], 1.0)  # type: ignore[list-item]
    with pytest.raises(ParameterError, match="finite ε > 0"):
        led.set_unit_cap(0.0)
    assert led.store.totals() == {"units": 0, "releases": 0, "events": 0}


def _spent_store(root: Path) -> ls.LedgerStore:
    store = ls.LedgerStore(root)
    led = ls.open_corpus_ledger([f"u{i}" for i in range(50)], tool="t", store=store)
    led.admit([f"u{i}" for i in range(50)], 2.0).charge(event(2.0))
    return store


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "bad chunk", "bad header", "foreign key"])
def test_a_damaged_store_fails_closed_and_spends_nothing(tmp_path: Path, damage: str) -> None:
    root = tmp_path / "ledgers"
    store = _spent_store(root)
    path = store.path
    if damage == "garbage":
        path.write_bytes(os.urandom(8192))
    elif damage == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "bad chunk":
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE unit_spent SET spent = x'00' WHERE chunk = 0")
    elif damage == "bad header":
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE meta SET value = 'x' WHERE name = 'units'")
    elif damage == "foreign key":
        (root / ls.KEY_FILE).write_text(os.urandom(32).hex(), encoding="ascii")
    before = path.read_bytes()
    with pytest.raises(PrivacyBudgetError, match="nothing was spent|Nothing was spent"):
        s = ls.LedgerStore(root)
        led = ls.open_corpus_ledger([f"u{i}" for i in range(50)], tool="t", store=s)
        led.admit([f"u{i}" for i in range(50)], 1.0)
    if damage != "foreign key":                                         # (an open store keeps the key it read)
        with pytest.raises(PrivacyBudgetError):
            led = ls.PersistentLedger(store, [f"u{i}" for i in range(50)], tool="t")  # an object opened before
            led.admit(["u1"], 1.0)
    assert path.read_bytes() == before                                   # refused: nothing written
    assert {p.name for p in root.iterdir()} <= {ls.KEY_FILE, ls.STORE_FILE, ls.LOCK_FILE,
                                                ls.STORE_FILE + "-wal", ls.STORE_FILE + "-shm"}


def test_a_damaged_or_missing_key_fails_closed(tmp_path: Path) -> None:
    root = tmp_path / "ledgers"
    _spent_store(root)
    key = root / ls.KEY_FILE
    good = key.read_bytes()
    key.write_text("zz-not-hex", encoding="ascii")
    with pytest.raises(PrivacyBudgetError, match="key .* is damaged"):
        ls.LedgerStore(root)
    key.unlink()
    with pytest.raises(PrivacyBudgetError, match="key .* is missing while the ledger store exists"):
        ls.LedgerStore(root)
    assert not key.exists()                                             # no new key: that would reset every budget
    key.write_bytes(good)
    os.chmod(key, 0o644)
    assert ls.open_corpus_ledger(["u1"], tool="t", store=ls.LedgerStore(root)).view().largest_spend == 2.0
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_an_unusable_folder_fails_closed_with_no_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "not-a-dir"
    bad.write_text("x")
    with pytest.raises(PrivacyBudgetError, match="cannot be used"):
        ls.ledger_root({ls.LEDGER_DIR_ENV: str(bad)})
    with pytest.raises(PrivacyBudgetError, match="cannot be used"):
        ls.LedgerStore(bad / "sub")
    # the default folder unusable: an error, not a folder in the temp directory
    monkeypatch.delenv(ls.LEDGER_DIR_ENV)
    monkeypatch.setenv("HOME", str(bad))
    before = set(os.listdir(tempfile.gettempdir()))
    with pytest.raises(PrivacyBudgetError, match="cannot be used"):
        ls.open_corpus_ledger(["u"], tool="t")
    assert not {n for n in set(os.listdir(tempfile.gettempdir())) - before if "dpkps" in n}
    if hasattr(os, "geteuid") and os.geteuid() == 0:                    # a folder of another user
        other = tmp_path / "other"
        other.mkdir(mode=0o700)
        os.chown(other, 65534, 65534)
        with pytest.raises(PrivacyBudgetError, match="belongs to another user"):
            ls.ledger_root({ls.LEDGER_DIR_ENV: str(other)})


def test_the_store_is_never_a_half_written_file(tmp_path: Path) -> None:
    """A new store is built under a temporary name and linked into place: no zero-length or schema-less store."""
    root = tmp_path / "fresh"
    store = ls.LedgerStore(root)
    with sqlite3.connect(store.path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        meta = dict(conn.execute("SELECT name, value FROM meta"))
    assert {"meta", "unit_keys", "unit_spent", "unit_caps", "releases", "events", "cap_history"} <= names
    assert meta["format"] == ls.FORMAT and meta["units"] == "0"
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] == []


def _legacy_file(root: Path, texts: list[str], releases: list[float], cap: float | None) -> Path:
    """A ledger file of the previous format (one JSON file per corpus, named by the corpus fingerprint)."""
    import hashlib
    import hmac

    key = bytes.fromhex((root / ls.KEY_FILE).read_text().strip())
    digests = sorted(hashlib.sha256(" ".join(t.split()).encode()).digest() for t in texts)
    mac = hmac.new(key, ls._FINGERPRINT_DOMAIN, hashlib.sha256)
    mac.update(len(digests).to_bytes(8, "big"))
    for d in digests:
        mac.update(d)
    path = root / f"{mac.hexdigest()}.json"
    path.write_text(json.dumps({"format": ls.LEGACY_FORMAT, "version": 1, "epsilon_cap": cap, "cap_history": [],
                                "releases": [{"recorded": "2025-01-01T00:00:00+00:00", "tool": "app", "run": "r",
                                              "event": event(e).to_dict()} for e in releases]}), encoding="utf-8")
    return path


def test_previous_format_files_block_the_store_until_imported(tmp_path: Path, capsys) -> None:
    rows = records(10)
    src = write_csv(tmp_path / "old.csv", rows)
    ls.LedgerStore()                                                     # the folder and its key exist already
    legacy = _legacy_file(store_root(), [r["text"] for r in rows], [3.0, 2.0], 12.0)
    with pytest.raises(PrivacyBudgetError, match="previous format.*--import-legacy"):
        ls.LedgerStore()
    assert main(["sample", "--corpus", str(src), "--label-column", "label", "--classes", ",".join(TOPICS),
                 "--out", str(tmp_path / "run")]) == 2
    assert "--import-legacy" in capsys.readouterr().err and not (tmp_path / "run").exists()
    assert main(["ledger", "--corpus", str(src), "--label-column", "label", "--import-legacy"]) == 0
    out = capsys.readouterr().out
    assert "imported 2 release(s)" in out and not legacy.exists()
    assert (store_root() / ls.LEGACY_IMPORTED / legacy.name).is_file()
    view = ls.open_corpus_ledger(units_of(rows), tool="t").view()
    assert view.largest_spend == pytest.approx(5.0) and view.cap_range == (12.0, 12.0)
    assert [r.in_corpus for r in view.releases] == [30, 30] and not any(r.filtered for r in view.releases)


def test_ledger_command_lists_the_releases_that_touched_a_corpus_and_sets_its_cap(tmp_path: Path, capsys) -> None:
    rows = records(10)
    first = write_csv(tmp_path / "private.csv", rows[:20])
    both = write_csv(tmp_path / "renamed.csv", rows[::-1], text="body", label="category")
    a = ls.open_corpus_ledger(units_of(rows[:20]), tool="cli sample", run="run-1", cap=5.0)
    a.admit(units_of(rows[:20]), 4.0, what="the private vocabulary step").charge(event(4.0))
    b = ls.open_corpus_ledger(units_of(rows), tool="app", run="session x", cap=5.0)
    ticket = b.admit(units_of(rows), 2.0, what="the keyphrase density step")
    assert ticket.sum() == 10  # the 20 shared: left out
    ticket.charge(event(2.0, "kde"))
    assert main(["ledger", "--corpus", str(first), "--label-column", "label", "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert "30" not in out.split("\n")[0] and "20 documents: 1 release(s) touched them" in out
    assert "cli sample · run-1" in out and "session x" not in out          # b's release admitted none of them
    assert "cap 5 per document; largest ε spent by one document: 4" in out
    assert "a release of ε = 1 now would leave out 0 of them" in out and "private, local" in out
    assert main(["ledger", "--corpus", str(both), "--text-column", "body", "--label-column", "category",
                 "--epsilon-cap", "8", "--json"]) == 0
    lines = capsys.readouterr().out.split("\n", 1)
    assert lines[0].startswith("cap set to 8 for this corpus's documents (30 changed; recorded)")
    data = json.loads(lines[1])
    assert data["units"] == 30 and data["cap_min"] == data["cap_max"] == 8 and data["largest_spend"] == 4
    assert [(r["epsilon"], r["units_in_corpus"]) for r in data["releases"]] == [(4.0, 20), (2.0, 10)]
    assert [(c["cap"], c["previous_min"], c["in_corpus"]) for c in data["cap_history"]] == [(8.0, 5.0, 30)]
    # the raised cap lets the shared documents take part again
    assert b.admit(units_of(rows), 2.0).all()
    assert main(["ledger", "--corpus", str(first), "--label-column", "label"]) == 0
    out = capsys.readouterr().out
    assert "cap changed" in out and "5 → 8 for 20 documents here (cli ledger)" in out
    with pytest.raises(SystemExit):
        main(["ledger", "--corpus", str(first), "--epsilon-cap", "-1"])    # argparse: a finite ε > 0
    assert "must be a finite ε > 0" in capsys.readouterr().err


def test_ledger_command_by_person(tmp_path: Path, capsys) -> None:
    path = tmp_path / "people.csv"
    lines = ["text,label,person"] + [f'"Visit {i}: the patient reported {TOPICS["sport"][i % 10]} pains again.",'
                                     f'{("a", "b")[i % 2]},p{i // 4}' for i in range(12)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    corpus = load_corpus(path, text_column="text", label_column="label", person_column="person")
    led = ls.open_corpus_ledger(corpus, tool="t")                         # by person: the corpus has persons
    assert led.admit(unit_strings(corpus, by_person=True), 3.0).all()
    assert main(["ledger", "--corpus", str(path), "--label-column", "label", "--person-column", "person"]) == 0
    out = capsys.readouterr().out
    assert "3 persons: 1 release(s) touched them" in out and "largest ε spent by one person: 3" in out
    assert f"cap {DEFAULT_EPSILON_CAP:g} per person" in out


def test_ledger_command_errors_are_one_line(tmp_path: Path, capsys) -> None:
    ls.LedgerStore()
    (store_root() / ls.STORE_FILE).write_bytes(b"not a database at all" * 100)
    path = write_csv(tmp_path / "x.csv", records(5))
    assert main(["ledger", "--corpus", str(path), "--label-column", "label"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: The privacy ledger") and "Nothing was spent" in err and "Traceback" not in err


def test_the_app_and_the_cli_share_one_default_cap() -> None:
    from studio.defaults import default_settings

    parser = build_parser()
    sample = parser.parse_args(["sample", "--out", "x"])
    compare = parser.parse_args(["compare", "--eps", "6", "--out", "x"])
    assert default_settings()["epsilon_cap"] == sample.epsilon_cap == compare.epsilon_cap == DEFAULT_EPSILON_CAP
    assert default_settings()["cap_enabled"] is True
    assert ls.open_corpus_ledger(["u"], tool="t").cap == DEFAULT_EPSILON_CAP
    assert ls.open_corpus_ledger(["u"], tool="t", cap=None).new_unit_cap == DEFAULT_EPSILON_CAP


@pytest.fixture
def fast_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``sample`` with a hashing embedder and a test-local embedding cache (no model, nothing in the home folder)."""
    monkeypatch.setattr("dpkps_core.cli.sample.get_embedder", lambda name: HashingEmbedder(dim=16))
    monkeypatch.setattr("dpkps_core.cli.sample.EmbeddingCache", lambda: EmbeddingCache(tmp_path / "emb.sqlite"))


def _sample(corpus: Path, out: Path, vocab: Path, *extra: object) -> int:
    return main([str(a) for a in ("sample", "--corpus", corpus, "--vocabulary", vocab, "--eps-voc", 4, "--eps-kde", 4,
                                  "--vocab-size", 10, "-S", 3, "--per-class", 2, "--length", 3,
                                  "--classes", ",".join(TOPICS), "--out", out, *extra)])


def test_cli_runs_on_two_files_share_the_documents_budget(tmp_path: Path, fast_cli: None, capsys) -> None:
    rows = records()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB.terms) + "\n", encoding="utf-8")
    first = write_csv(tmp_path / "private.csv", rows)
    assert _sample(first, tmp_path / "run-1", vocab, "--epsilon-cap", 12, "--label-column", "label") == 0
    out = capsys.readouterr().out
    assert "the largest ε spent by one document is 8 (cap 12 per document)" in out
    assert f"ledger id {ls.LedgerStore().ledger_id}" in out and str(ls.LedgerStore().root) not in out
    # the same documents under another name, order and column names: the same budgets — ε_voc fits (8 + 4 = 12),
    # the densities leave every shared document out (12 + 4 > 12); a run's own cap setting does not raise theirs
    second = write_csv(tmp_path / "copy.csv", rows[::-1], text="body", label="category")
    assert _sample(second, tmp_path / "run-2", vocab, "--text-column", "body", "--label-column", "category",
                   "--epsilon-cap", 30) == 0
    capsys.readouterr()
    led = ls.open_corpus_ledger(units_of(rows), tool="t")
    view = led.view()
    assert view.largest_spend == pytest.approx(12.0) and view.cap_range == (12.0, 12.0)
    assert [r.tool + " · " + str(r.run) for r in view.releases] == ["cli sample · run-1"] * 2 + ["cli sample · run-2"]
    assert view.left_out(0.1) == max(r.in_corpus for r in view.releases)    # the training documents are exhausted
    report = json.loads((tmp_path / "run-2" / "privacy_report.json").read_text())
    assert report["epsilon_total"] == 8 and "corpus_to_date" not in report    # the run's own events; no private figure
    _no_secret_in({p.name: p.read_bytes() for p in (tmp_path / "run-2").iterdir() if p.is_file()})
    with zipfile.ZipFile(io.BytesIO(bundle_bytes(tmp_path / "run-2"))) as zf:
        _no_secret_in({n: zf.read(n) for n in zf.namelist()})
    # the run's public cap setting refuses a run whose own ε is over it, before anything is read
    assert _sample(second, tmp_path / "run-3", vocab, "--text-column", "body", "--label-column", "category",
                   "--epsilon-cap", 6) == 2
    assert "over the budget cap of 6" in capsys.readouterr().err and not (tmp_path / "run-3").exists()


def test_compare_charges_its_joint_cost(tmp_path: Path) -> None:
    from dpkps_core.baselines import compare_settings as cmp
    from baseline_toys import compare_corpus as _corpus, run_compare as _run

    assert cmp.joint_cost(("dpkps", "augpe", "private-prediction"), eps_total=8, eps_voc=4, delta=1e-6) == \
        pytest.approx((20.0, 2e-6))
    led = ls.open_corpus_ledger(_corpus(), tool="cli compare", run="cmp", cap=15.0)
    with pytest.raises(PrivacyBudgetError, match="joint cost"):
        _run(tmp_path, methods=("dpkps", "augpe", "private-prediction"), real_baseline=False, ledger=led)
    assert led.view().largest_spend == 0 and led.view().releases == ()   # refused before anything ran
    res, _ = _run(tmp_path, methods=("dpkps", "augpe"), real_baseline=False, ledger=led)
    joint = res.info["joint"]
    assert led.total_epsilon == pytest.approx(joint["epsilon"])         # the shared Ṽ counted once
    assert 0 < led.view().largest_spend <= joint["epsilon"] + 1e-9        # no document spent more than the joint cost
    assert isinstance(led, PrivacyLedger)


@pytest.mark.assets
@pytest.mark.slow
def test_app_sidebar_follows_the_documents_across_sessions_files_and_the_cli(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    from app_helpers import state_of, click, goto, metrics, new_app, toy_csv, upload_corpus

    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    a = new_app()
    upload_corpus(a, toy_csv(20), "mine.csv")
    assert metrics(a)["Most-used document: ε spent / cap"] == f"0 / {DEFAULT_EPSILON_CAP:g}"
    assert any("No release has used this corpus's documents yet" in m.value for m in a.sidebar.markdown)
    goto(a, "private-vocabulary")
    click(a, "Build Ṽ")
    assert metrics(a)["Most-used document: ε spent / cap"] == "5 / 20"
    # a new session on the same documents under another file name and other column names: the same budgets
    b = new_app()
    upload_corpus(b, toy_csv(20, text="notes", label="category"), "renamed.csv")
    assert state_of(b).loaded.corpus_id != state_of(a).loaded.corpus_id
    assert metrics(b)["Most-used document: ε spent / cap"] == "5 / 20"
    side = " ".join(m.value for m in b.sidebar.markdown)
    assert "This session has released nothing on this corpus yet" in side and "No release has used" not in side
    # the CLI raises these documents' cap: the session shows it
    ls.open_corpus_ledger(state_of(b).loaded.corpus, tool="cli ledger").set_unit_cap(30.0)
    b.run()
    assert metrics(b)["Most-used document: ε spent / cap"] == "5 / 30"
    assert any("new to the ledger get 20" in c.value for c in b.sidebar.caption)
    # changing the session's cap field sets the cap of the loaded corpus's documents (recorded, by the app)
    state_of(b).settings.epsilon_cap = 12.0
    b.run()
    view = ls.open_corpus_ledger(state_of(b).loaded.corpus, tool="t").view()
    assert view.cap_range == (12.0, 12.0) and view.cap_history[-1].tool == "app"
    assert metrics(a.run())["Most-used document: ε spent / cap"] == "5 / 12"


def test_ledger_and_compare_read_a_latin1_file_with_encoding(tmp_path: Path, capsys) -> None:
    """A corpus saved in latin-1: ``ledger`` (and ``compare``) take ``--encoding`` as ``sample`` does, so the file
    decodes to the same documents — the same ledger units; without it, the error names the option."""
    rows = [{**r, "text": r["text"].replace("today", "café")} for r in records(4)]
    path = tmp_path / "latin.csv"
    path.write_bytes(("text,label,other\n" + "".join(f'"{r["text"]}",{r["label"]},{r["other"]}\n' for r in rows))
                     .encode("latin-1"))
    a = ls.open_corpus_ledger(units_of(rows), tool="cli sample", run="run-latin", cap=5.0)
    a.admit(units_of(rows), 1.5, what="the private vocabulary step").charge(event(1.5))
    assert main(["ledger", "--corpus", str(path), "--label-column", "label", "--encoding", "latin-1"]) == 0
    out = capsys.readouterr().out
    assert "12 documents: 1 release(s) touched them" in out and "cli sample · run-latin" in out
    assert main(["ledger", "--corpus", str(path), "--label-column", "label"]) != 0
    err = capsys.readouterr().err
    assert "--encoding latin-1" in err and "Traceback" not in err
    compare = build_parser().parse_args(["compare", "--corpus", str(path), "--eps", "4", "--encoding", "cp1252",
                                         "--out", str(tmp_path / "cmp")])
    assert compare.encoding == "cp1252"


POOL = [f"document\x1fmutation text {i}\x1fx" for i in range(6)]


def _event(eps: float, step: str = "vocabulary") -> PrivacyEvent:
    return PrivacyEvent(mechanism="test_mechanism", step=step, epsilon=eps, sensitivity=1.0, noise_scale=1.0,
                        released="a test release")


def _store(tmp_path: Path) -> ls.LedgerStore:
    return ls.LedgerStore(tmp_path / "ledgers")


def _keys(store: ls.LedgerStore, units: list[str]) -> np.ndarray:
    return ls.unique_keys(store.keys(units))[0]


def _spent(led: ls.PersistentLedger) -> list[float]:
    """The opened corpus's spends, in POOL order (the view holds its units in their first-seen order)."""
    return [float(x) for x in led.view().spent]


def test_store_admit_refuses_a_missing_tool_and_a_path_as_run_name(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL)
    for bad in (None, " "):
        with pytest.raises(ParameterError, match=r"^The ledger's tool must be a short non-empty text, got "):
            store.admit(keys, 1.0, new_cap=5.0, tool=bad, run=None, what="x")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^The ledger's run name is a name, not a path"):
        store.admit(keys, 1.0, new_cap=5.0, tool="test", run="runs/a", what="x")
    assert store.totals()["releases"] == 0  # nothing recorded by a refusal


def test_forced_admission_charges_every_unit_even_over_its_cap(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL)
    _, ok = store.admit(keys[:3], 4.0, new_cap=5.0, tool="test", run=None, what="first")
    assert ok.tolist() == [True] * 3
    _, ok = store.admit(keys, 2.0, new_cap=5.0, tool="test", run=None, what="filtered")
    assert ok.tolist() == [False] * 3 + [True] * 3
    _, ok = store.admit(keys, 2.0, new_cap=5.0, tool="test", run=None, what="forced", force=True)
    assert ok.tolist() == [True] * 6
    view = store.view(keys, new_unit_cap=5.0)
    assert sorted(view.spent.tolist()) == [4.0, 4.0, 4.0, 6.0, 6.0, 6.0]
    rel = {r.what: r for r in view.releases}
    assert (rel["filtered"].units, rel["filtered"].left_out, rel["filtered"].filtered) == (3, 3, True)
    assert (rel["forced"].units, rel["forced"].left_out, rel["forced"].filtered) == (6, 0, False)


def test_a_spend_that_reaches_the_cap_within_the_slack_still_fits(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL[:1])
    eps = 1.0 + _FLOAT_SLACK  # spent + ε equals cap + slack exactly
    assert 0.0 + eps == 1.0 + _FLOAT_SLACK
    _, ok = store.admit(keys, eps, new_cap=1.0, tool="test", run=None, what="at the cap")
    assert ok.tolist() == [True]


def test_the_release_row_keeps_300_characters_of_what(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keys = _keys(store, POOL)
    store.admit(keys, 1.0, new_cap=5.0, tool="test", run="r1", what="w" * 400)
    (release,) = store.view(keys, new_unit_cap=5.0).releases
    assert release.what == "w" * 300 and release.run == "r1" and release.tool == "test"


def test_ledger_admit_refusals_name_the_release(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=1.0)
    with pytest.raises(PrivacyBudgetError, match=r"^Running the vocabulary would spend ε = 2"):
        led.admit(POOL, 2.0, what="the vocabulary")
    with pytest.raises(ParameterError, match=r"^admit needs one unit string per document, not one string\.$"):
        led.admit("document\x1fone\x1fx", 0.5)
    assert led.store.totals()["releases"] == 0


def test_ledger_admit_of_no_units_is_an_empty_boolean_mask(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    mask = led.admit([], 0.5)
    assert mask.tolist() == [] and mask.dtype == np.bool_


def test_the_view_after_an_admission_shows_its_charge(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    assert _spent(led) == [0.0] * 6  # the view is cached…
    led.admit(POOL[:2], 1.5)
    assert _spent(led) == [1.5, 1.5, 0.0, 0.0, 0.0, 0.0]  # …and the admission drops the cache


def test_ledger_charge_refusals(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=1.0)
    with pytest.raises(ParameterError, match=r"^vocabulary is charged through its admission's ticket"):
        led.charge(_event(0.5))  # an event belongs to its admission (issue 35 part 7)
    with pytest.raises(ParameterError, match=r"^Only a PrivacyEvent can be charged to a ledger\.$"):
        led.charge_every_unit({"epsilon": 0.5})  # type: ignore[arg-type]
    with pytest.raises(PrivacyBudgetError, match=r"^Running vocabulary \(test_mechanism\) would spend ε = 2"):
        led.charge_every_unit(_event(2.0))
    ticket = led.admit(POOL, 0.5)
    with pytest.raises(ParameterError, match=r"^Only a PrivacyEvent can be charged to a ledger\.$"):
        ticket.charge({"epsilon": 0.5})  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"^vocabulary \(test_mechanism\) charges ε = 0\.75, more than its "
                                             r"admission reserved \(0\.5\)"):
        ticket.charge(_event(0.75))
    with pytest.raises(ParameterError, match=r"^An admission ticket charges one release"):
        ticket.admit(POOL, 0.1)
    assert led.store.totals() == {"units": 6, "releases": 1, "events": 0} and led.events == ()


def test_an_event_within_the_slack_of_its_admission_is_attached_to_it(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    led.admit(POOL, 1.0).charge(_event(1.0 + _FLOAT_SLACK))  # ε = reserved + slack exactly: still this admission's
    totals = led.store.totals()
    assert totals["releases"] == 1 and totals["events"] == 1


def test_an_admission_used_up_to_the_slack_is_closed(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="test", cap=5.0)
    ticket = led.admit(POOL[:2], 2 * _FLOAT_SLACK)
    ticket.charge(_event(_FLOAT_SLACK))  # leaves exactly the slack: the admission is used up
    with pytest.raises(ParameterError, match="more than its admission reserved"):
        ticket.charge(_event(0.5, step="density"))
    led.charge_every_unit(_event(0.5, step="density"))  # charged to the whole corpus, explicitly
    totals = led.store.totals()
    assert totals["releases"] == 2 and totals["events"] == 2
    assert _spent(led) == pytest.approx([0.5 + 2 * _FLOAT_SLACK] * 2 + [0.5] * 4, abs=1e-15)


def test_a_charge_without_admission_records_the_run_and_the_new_units_cap(tmp_path: Path) -> None:
    led = ls.PersistentLedger(_store(tmp_path), POOL, tool="cli sample", run="run-1", cap=3.0)
    led.charge_every_unit(_event(0.5))
    view = led.view()
    assert view.cap_range == (3.0, 3.0) and view.known == 6
    (release,) = view.releases
    assert (release.tool, release.run, release.what, release.filtered) == ("cli sample", "run-1",
                                                                            "vocabulary (test_mechanism)", False)
    (recorded,) = view.events
    assert recorded.to_dict()["run"] == "run-1" and recorded.tool == "cli sample"
    assert recorded.event.to_dict()["epsilon"] == 0.5
