"""The persistent ledger per private corpus (dpkps_core.ledger_store, issue 11 §4): shared totals across ledger
objects and processes, the cap over all past releases (CLI and app), the corpus fingerprint (label-, order- and
name-free, never exported), owner-only files, the ``ledger`` command and the comparison's joint cost."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.cli import main
from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.dp.ledger import PrivacyEvent, PrivacyLedger, SubLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import EmbeddingCache, HashingEmbedder
from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.export import bundle_bytes
from dpkps_core.pipeline import SamplingConfig, run_sampling, write_run_folder
from dpkps_core.vocabulary import PublicVocabulary

ROOT = Path(__file__).resolve().parents[1]
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


def write_csv(path: Path, rows: list[dict[str, str]], *, label: str = "label") -> Path:
    lines = [f"text,{label},other"] + [f'"{r["text"]}",{r["label"]},{r["other"]}' for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def store_root() -> Path:
    return Path(os.environ[ls.LEDGER_DIR_ENV])


def all_secrets() -> tuple[bytes, list[str]]:
    """The key and every fingerprint (ledger file name) in the test's ledger folder."""
    root = store_root()
    key = (root / ls.KEY_FILE).read_bytes().strip()
    return key, [p.stem for p in root.glob("*.json")]


# ------------------------------------------------------------------------------------------ store and ledger

def test_autouse_fixture_keeps_the_store_out_of_the_home_folder() -> None:
    assert ls.ledger_root() == store_root() and str(Path.home() / ".local") not in str(store_root())


def test_two_ledger_objects_on_the_same_corpus_share_the_total_and_the_cap() -> None:
    texts = [r["text"] for r in records()]
    a = ls.open_corpus_ledger(texts, tool="cli sample", run="run-a", cap=10.0)
    b = ls.open_corpus_ledger(list(reversed(texts)), tool="app", run="session x")
    a.charge(event(4.0))
    b.charge(event(3.0, "kde"))
    assert a.corpus_epsilon == b.corpus_epsilon == 7.0 and b.cap == 10.0
    # each object's own events are its run's (what its privacy report lists)
    assert [e.epsilon for e in a.events] == [4.0] and a.total_epsilon == 4.0 and b.by_step() == {"kde": 3.0}
    assert a.remaining == pytest.approx(3.0) and not b.can_afford(3.5) and b.can_afford(3.0)
    with pytest.raises(PrivacyBudgetError, match="over the budget cap of 10; nothing was spent"):
        a.charge(event(3.5))
    assert a.corpus_epsilon == 7.0 and len(a.events) == 1      # refused: nothing recorded anywhere
    releases = a.corpus_releases
    assert [(r.tool, r.run) for r in releases] == [("cli sample", "run-a"), ("app", "session x")]
    rep = b.to_dict()
    assert rep["epsilon_total"] == 3.0 and len(rep["events"]) == 1
    assert rep["corpus"] == {"epsilon_total": 7.0, "delta_total": 0.0, "releases": 2, "epsilon_cap": 10.0}
    b.cap = 20.0                                                 # raising the cap is recorded
    assert a.cap == 20.0 and [c["epsilon_cap"] for c in a.record().cap_history] == [10.0, 20.0]
    assert isinstance(a, PrivacyLedger) and "PersistentLedger" in repr(a)


def test_the_cap_holds_across_concurrent_processes() -> None:
    texts = [r["text"] for r in records(5)]
    ls.open_corpus_ledger(texts, tool="test", cap=3.0)
    script = (
        "import json, sys\n"
        "from dpkps_core.dp.ledger import PrivacyEvent\n"
        "from dpkps_core.errors import PrivacyBudgetError\n"
        "from dpkps_core.ledger_store import open_corpus_ledger\n"
        "texts = json.loads(sys.stdin.read())\n"
        "led = open_corpus_ledger(texts, tool='cli test', run='run-' + sys.argv[1])\n"
        "try:\n"
        "    led.charge(PrivacyEvent('m', 'vocabulary', 1.0, 1.0, 1.0, 'x'))\n"
        "    print('charged')\n"
        "except PrivacyBudgetError:\n"
        "    print('refused')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=ROOT) for i in range(6)]
    outs = [p.communicate(json.dumps(texts), timeout=120)[0].strip() for p in procs]
    assert sorted(outs) == ["charged"] * 3 + ["refused"] * 3
    led = ls.open_corpus_ledger(texts, tool="test")
    assert led.corpus_epsilon == 3.0 and len(led.corpus_releases) == 3


def test_fingerprint_ignores_labels_order_file_name_and_format(tmp_path: Path) -> None:
    rows = records()
    a = load_corpus(write_csv(tmp_path / "private.csv", rows), label_column="label")
    b = load_corpus(write_csv(tmp_path / "renamed.csv", rows[::-1]), label_column="other")
    jl = tmp_path / "copy.jsonl"
    jl.write_text("".join(json.dumps({"body": r["text"], "cls": r["label"]}) + "\n" for r in rows), encoding="utf-8")
    c = load_corpus(jl, text_column="body", label_column="cls")
    store = ls.LedgerStore()
    assert store.fingerprint(a.texts) == store.fingerprint(b.texts) == store.fingerprint(c.texts)
    # another corpus (one document more or less, or one changed) has another ledger
    assert store.fingerprint(a.texts[1:]) != store.fingerprint(a.texts)
    assert store.fingerprint(a.texts[:-1] + ("A different final document about the market.",)) != \
        store.fingerprint(a.texts)
    # another machine / key folder: another fingerprint (it is a keyed HMAC, not a plain hash)
    other = ls.LedgerStore(tmp_path / "elsewhere")
    assert other.fingerprint(a.texts) != store.fingerprint(a.texts)
    led = ls.open_corpus_ledger(a, tool="test")
    led.charge(event(1.0))
    assert ls.open_corpus_ledger(c, tool="test").corpus_epsilon == 1.0
    assert ls.open_corpus_ledger(Corpus(("another text entirely, long enough",), ("x",), "n", "s"),
                                 tool="test").corpus_epsilon == 0.0


def test_files_are_owner_only_and_hold_no_path_or_text(tmp_path: Path) -> None:
    rows = records()
    corpus = load_corpus(write_csv(tmp_path / "secret-name.csv", rows), label_column="label")
    led = ls.open_corpus_ledger(corpus, tool="cli sample", run="run-1", cap=5.0)
    led.charge(event(1.0))
    root = store_root()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    files = list(root.iterdir())
    assert {p.suffix for p in files} == {".key", ".json", ".lock"}
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name
    (ledger_file,) = root.glob("*.json")
    content = ledger_file.read_text(encoding="utf-8")
    assert "secret-name" not in content and str(tmp_path) not in content
    assert not any(r["text"][:30] in content for r in rows)
    # a loose folder is tightened; a damaged ledger is never reset silently
    os.chmod(root, 0o755)
    ls.ledger_root()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    ledger_file.write_text("{not json", encoding="utf-8")
    with pytest.raises(PrivacyBudgetError, match="damaged"):
        led.charge(event(1.0))


def test_validation_gives_clear_errors(tmp_path: Path) -> None:
    store = ls.LedgerStore()
    with pytest.raises(ParameterError, match="not a path"):
        ls.open_corpus_ledger(["a document of some length"], tool="cli sample", run="/home/me/runs/x")
    with pytest.raises(ParameterError, match="finite ε > 0"):
        ls.open_corpus_ledger(["a document of some length"], tool="t", cap=-1.0)
    with pytest.raises(ParameterError, match="fingerprint"):
        store.read("../escape")
    bad = tmp_path / "not-a-dir"
    bad.write_text("x")
    with pytest.raises(PrivacyBudgetError, match="cannot be used"):
        ls.ledger_root({ls.LEDGER_DIR_ENV: str(bad)})


def test_sub_ledger_charges_its_parent_once_and_honours_both_caps() -> None:
    parent = ls.open_corpus_ledger(["a private document, long enough"], tool="cli compare", cap=10.0)
    a, b = SubLedger(parent, cap=6.0), SubLedger(parent, cap=6.0)
    shared = a.charge(event(4.0))
    b.reuse(shared)                                             # one release used by two methods
    b.charge(event(2.0, "augpe"))
    assert parent.corpus_epsilon == 6.0 and a.total_epsilon == 4.0 and b.total_epsilon == 6.0
    with pytest.raises(PrivacyBudgetError):
        b.charge(event(0.5, "augpe"))                           # over b's own cap
    with pytest.raises(PrivacyBudgetError):
        a.charge(event(4.5, "kde"))                             # over a's own cap
    c = SubLedger(parent, cap=8.0)
    with pytest.raises(PrivacyBudgetError, match="this corpus's total"):
        c.charge(event(4.5, "kde"))                             # within c's cap, over the parent's (6 + 4.5 > 10)
    assert parent.corpus_epsilon == 6.0


# ------------------------------------------------------------------------------------------ runs, bundle, CLI

def _no_secret_in(blobs: dict[str, bytes]) -> None:
    key, fingerprints = all_secrets()
    assert fingerprints
    for name, data in blobs.items():
        assert key not in data, name
        for fp in fingerprints:
            assert fp.encode() not in data and fp[:16].encode() not in data, name


def test_run_report_lists_the_run_and_the_corpus_total_but_never_the_fingerprint(tmp_path: Path) -> None:
    rows = records()
    corpus = Corpus(tuple(r["text"] for r in rows), tuple(r["label"] for r in rows), "toy", "test",
                    public_classes=tuple(TOPICS))
    earlier = ls.open_corpus_ledger(corpus, tool="app", run="session a")
    earlier.charge(event(2.0))
    led = ls.open_corpus_ledger(corpus, tool="cli sample", run="run")
    cfg = SamplingConfig(corpus="toy", eps_voc=1.0, eps_kde=1.0, vocab_size=10, terms_per_doc=3, per_class=2,
                         length=3, embedding_model="hashing-test", test_fraction=0.2)
    run = run_sampling(corpus, cfg, vocabulary=VOCAB, embedder=HashingEmbedder(dim=16), noise=NoiseSource(3),
                       ledger=led)
    out = write_run_folder(run, tmp_path / "run")
    report = json.loads((out / "privacy_report.json").read_text())
    assert report["epsilon_total"] == 2.0 and [e["step"] for e in report["events"]] == ["vocabulary", "kde"]
    assert report["corpus_to_date"]["epsilon_total"] == 4.0 and report["corpus_to_date"]["releases"] == 3
    _no_secret_in({p.name: p.read_bytes() for p in out.iterdir() if p.is_file()})
    with zipfile.ZipFile(io.BytesIO(bundle_bytes(out))) as zf:
        _no_secret_in({n: zf.read(n) for n in zf.namelist()})


@pytest.fixture
def fast_cli(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``sample`` with a hashing embedder and a test-local embedding cache (no model, nothing in the home folder)."""
    monkeypatch.setattr("dpkps_core.cli.sample.get_embedder", lambda name: HashingEmbedder(dim=16))
    monkeypatch.setattr("dpkps_core.cli.sample.EmbeddingCache", lambda: EmbeddingCache(tmp_path / "emb.sqlite"))


def _sample(corpus: Path, out: Path, vocab: Path, *extra: object) -> int:
    return main([str(a) for a in ("sample", "--corpus", corpus, "--vocabulary", vocab, "--eps-voc", 4, "--eps-kde", 4,
                                  "--vocab-size", 10, "-S", 3, "--per-class", 2, "--length", 3,
                                  "--classes", ",".join(TOPICS), "--out", out, *extra)])


def test_second_cli_run_on_the_same_corpus_is_refused_over_the_cap(tmp_path: Path, fast_cli: None, capsys) -> None:
    rows = records()
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(VOCAB.terms) + "\n", encoding="utf-8")
    first = write_csv(tmp_path / "private.csv", rows)
    assert _sample(first, tmp_path / "run-1", vocab, "--epsilon-cap", 12) == 0
    assert "this corpus to date (persistent ledger, app and CLI): ε = 8 over 2 release(s); cap 12, 4 left" in \
        capsys.readouterr().out
    # the same documents under another name, order and label column: the same ledger, so the cap holds
    second = write_csv(tmp_path / "copy.csv", rows[::-1], label="category")
    assert _sample(second, tmp_path / "run-2", vocab, "--label-column", "category") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "over the budget cap of 12; nothing was spent" in err
    assert "taking this corpus's total over all past releases" in err and "Traceback" not in err
    assert not (tmp_path / "run-2").exists()
    # the ledger command lists both releases of run-1, the total and the cap; nothing of the refused run
    assert main(["ledger", "--corpus", str(second), "--label-column", "category"]) == 0
    out = capsys.readouterr().out
    assert out.count("cli sample · run-1") == 3 and "run-2" not in out      # two releases and the cap change
    assert "none → 12 (cli sample · run-1)" in out
    assert "total: ε = 8, δ = 0 (basic composition); cap 12 (4 left)" in out
    # raising the cap (the ledger command or --epsilon-cap) lets the second run through
    assert main(["ledger", "--corpus", str(first), "--epsilon-cap", "20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["epsilon_cap"] == 20 and data["epsilon_total"] == 8 and len(data["releases"]) == 2
    assert _sample(second, tmp_path / "run-2", vocab, "--label-column", "category") == 0
    report = json.loads((tmp_path / "run-2" / "privacy_report.json").read_text())
    assert report["epsilon_total"] == 8 and report["corpus_to_date"]["epsilon_total"] == 16
    _no_secret_in({p.name: p.read_bytes() for p in (tmp_path / "run-2").iterdir()})
    assert str(tmp_path) not in next(store_root().glob("*.json")).read_text()


def test_compare_charges_its_joint_cost_to_the_corpus(tmp_path: Path) -> None:
    from dpkps_core.baselines import compare as cmp
    from test_compare import _corpus, _run

    assert cmp.joint_cost(("dpkps", "augpe", "private-prediction"), eps_total=8, eps_voc=4, delta=1e-6) == \
        pytest.approx((20.0, 2e-6))
    assert cmp.joint_cost(("augpe", "dpkps"), eps_total=8, eps_voc=4, delta=1e-6)[0] == 16.0
    led = ls.open_corpus_ledger(_corpus(), tool="cli compare", run="cmp", cap=15.0)
    with pytest.raises(PrivacyBudgetError, match="joint cost"):
        _run(tmp_path, methods=("dpkps", "augpe", "private-prediction"), real_baseline=False, ledger=led)
    assert led.corpus_epsilon == 0                              # refused before anything ran
    res, _ = _run(tmp_path, methods=("dpkps", "augpe"), real_baseline=False, ledger=led)
    joint = res.info["joint"]
    assert 11.9 < joint["epsilon"] <= 12.0 + 1e-9 and joint["delta"] == pytest.approx(1e-6)  # AugPE: ε ≤ ε_aug
    assert led.corpus_epsilon == pytest.approx(joint["epsilon"])  # the shared Ṽ counted once
    assert len(led.corpus_releases) == joint["releases"] == 3
    assert "**Joint cost:**" in (tmp_path / "cmp" / "compare.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------ app

@pytest.mark.assets
@pytest.mark.slow
def test_app_ledger_survives_a_new_session_and_another_label_column(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    from app_helpers import click, goto, metrics, new_app, table, upload_corpus

    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    rows = records(20)
    data = write_csv(tmp_path / "x.csv", rows).read_bytes()
    a = new_app()
    upload_corpus(a, data, "mine.csv")
    cid = a.session_state["corpus_id"]
    assert cid.startswith("upload:") and metrics(a)["ε spent / cap"] == "0 / 20"
    a.session_state["ledgers"][cid].charge(event(3.0))          # a release in session A
    a.run()
    assert metrics(a)["ε spent / cap"] == "3 / 20"
    # a new session (a reload) on the same documents, renamed, with another label column: the same ledger
    b = new_app()
    upload_corpus(b, data, "renamed.csv", load=False)
    b.selectbox(key="upload_label_col").set_value("other").run()
    click(b, "Load this corpus", clean=False)
    assert b.session_state["corpus_id"] != cid and metrics(b)["ε spent / cap"] == "3 / 20"
    goto(b, 1)
    releases = table(b, "recorded (UTC)")
    assert list(releases["ε"]) == [3.0] and releases["spent by"][0].startswith("app · session ")
    # the CLI sets the cap elsewhere: the session shows it; a change made in the session is the corpus's cap
    ls.open_corpus_ledger([r["text"] for r in rows], tool="cli ledger", cap=4.0)
    b.run()
    b.run()
    assert metrics(b)["ε spent / cap"] == "3 / 4" and b.session_state["epsilon_cap"] == 4.0
    b.session_state["epsilon_cap"] = 30.0
    b.run()
    assert ls.open_corpus_ledger([r["text"] for r in rows], tool="t").cap == 30.0
    assert metrics(a.run())["ε spent / cap"] == "3 / 30"
