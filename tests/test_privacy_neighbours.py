"""Whole-pipeline privacy on neighbouring corpora (issue 11 §1–§3): D and D ± one document.

The mechanisms have their own statistical tests; these check that nothing data-dependent picks their inputs:
the held-out split, the class list and the refusals. Each test here failed on the code before the fix.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from dp_stats import assert_ratio_within
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpkps_core.corpus import Corpus
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.pipeline import run_sampling, write_run_folder
from dpkps_core.method.split import split_corpus
from dpkps_core.method.vocabulary import PublicVocabulary

# ---- 1. the split --------------------------------------------------------------------------------------

_texts = st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=60, unique=True)


def _train_texts(texts: list[str], **kw) -> set[str]:
    split = split_corpus(texts, **kw)
    return {texts[i] for i in split.train}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=_texts, new=st.text(min_size=1, max_size=30), seed=st.integers(0, 2**31 - 1),
       test_fraction=st.floats(0.0, 0.9), client_fraction=st.floats(0.0, 0.9), data=st.data())
def test_adding_or_removing_one_document_moves_no_other(texts, new, seed, test_fraction, client_fraction, data):
    """For random corpora and a random added or removed document, the training parts of D and D' differ by at
    most that document, and every other document keeps its part (train / test / client)."""
    kw = dict(seed=seed, test_fraction=test_fraction, client_fraction=client_fraction)
    base = _train_texts(texts, **kw)
    if new not in texts:  # add one document anywhere (indices of the others shift)
        pos = data.draw(st.integers(0, len(texts)))
        bigger = texts[:pos] + [new] + texts[pos:]
        assert _train_texts(bigger, **kw) - {new} == base
    removed = data.draw(st.integers(0, len(texts) - 1))
    smaller = texts[:removed] + texts[removed + 1:]
    assert _train_texts(smaller, **kw) == base - {texts[removed]}
    # every part, not only train, is stable
    full, part = split_corpus(texts, **kw), split_corpus(smaller, **kw)
    for name in ("train", "test", "client"):
        kept = {texts[i] for i in getattr(full, name)} - {texts[removed]}
        assert {smaller[i] for i in getattr(part, name)} == kept


def test_split_is_deterministic_and_roughly_follows_the_fractions():
    texts = [f"document {i}" for i in range(4000)]
    a = split_corpus(texts, test_fraction=0.2, client_fraction=0.25, seed=3)
    assert a == split_corpus(texts, test_fraction=0.2, client_fraction=0.25, seed=3)
    assert a != split_corpus(texts, test_fraction=0.2, client_fraction=0.25, seed=4)
    held = len(a.test) + len(a.client)
    assert abs(held / 4000 - 0.2) < 0.03 and abs(len(a.client) / held - 0.25) < 0.06
    assert sorted(a.train + a.test + a.client) == list(range(4000))
    groups = [f"person {i // 5}" for i in range(4000)]  # whole groups land together
    g = split_corpus(texts, test_fraction=0.3, seed=0, groups=groups)
    assert all(len({i // 5 for i in part} & {i // 5 for i in other}) == 0
               for part, other in ((g.train, g.test), (g.train, g.client)))


# ---- 1b. the whole run_sampling on neighbouring corpora ---------------------------------------------

TERMS = tuple(f"term{i}" for i in range(20)) + ("target",)
VOCAB = PublicVocabulary("v", TERMS, "test", "test")


def _corpus(n: int = 300, drop: int | None = None, extra: tuple[tuple[str, str], ...] = ()) -> Corpus:
    texts, labels = [], []
    for i in range(n):
        if i == drop:
            continue
        term = "target" if i % 5 == 0 else TERMS[i % 20]
        texts.append(f"document number {i} mentions {term}")
        labels.append("a" if i % 2 else "b")
    for text, label in extra:
        texts.append(text)
        labels.append(label)
    return Corpus(tuple(texts), tuple(labels), "neighbours", "tests", public_classes=("a", "b"))


def _config(**kw) -> SamplingConfig:
    base = dict(corpus="neighbours", vocabulary="v", eps_voc=1.0, eps_kde=1.0, terms_per_doc=1,
                vocab_size=len(TERMS), per_class=1, length=1, remove_stopwords=False, junk_filter=False,
                bandwidth=0.0, test_fraction=0.2)
    base.update(kw)
    return SamplingConfig(**base).validate()


def _released_target_counts(corpus: Corpus, trials: int) -> np.ndarray:
    """The released noisy count of "target" in Ṽ (every term of V is in Ṽ here), once per fresh-noise run."""
    cfg, emb = _config(), HashingEmbedder(dim=8)
    out = np.empty(trials)
    for k in range(trials):
        run = run_sampling(corpus, cfg, vocabulary=VOCAB, embedder=emb,
                           context=ReleaseContext(noise=NoiseSource(sampler="numpy")))
        pv = run.private_vocabulary
        out[k] = pv.noisy_counts[pv.terms.index("target")]
    return out


def test_run_sampling_on_neighbouring_corpora_stays_within_e_epsilon():
    """Black-box: D (300 documents, one term each, S = 1, ε_voc = 1) and D' = D without one TRAINING document
    holding "target". With the old per-class shuffle, removing it moved other "target" documents between the
    parts and the released count shifted by several units (measured ratio ≫ e)."""
    d = _corpus()
    split = split_corpus(d.texts, test_fraction=0.2, seed=0)
    drop = next(i for i in split.train if "target" in d.texts[i])
    number = int(d.texts[drop].split()[2])
    d2 = _corpus(drop=number)
    true_train = sum("target" in d.texts[i] for i in split.train)
    trials = 1500
    counts_d, counts_d2 = _released_target_counts(d, trials), _released_target_counts(d2, trials)
    for threshold in (true_train - 1.5, true_train - 0.5, true_train + 0.5):
        assert_ratio_within(int((counts_d > threshold).sum()), int((counts_d2 > threshold).sum()), trials, 1.0)
    # and the means are one unit apart (the removed document), not more
    assert abs((counts_d.mean() - counts_d2.mean()) - 1.0) < 0.25


# ---- 2. the class list is public input ---------------------------------------------------------------

def _release(corpus: Corpus, tmp_path, name: str, **kw) -> tuple[dict, list[dict]]:
    run = run_sampling(corpus, _config(per_class=2, **kw), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8),
                       context=ReleaseContext(noise=NoiseSource(seed=5, sampler="numpy")))
    out = write_run_folder(run, tmp_path / name)
    report = json.loads((out / "privacy_report.json").read_text())
    seqs = [json.loads(line) for line in (out / "sequences.jsonl").read_text().splitlines()]
    return report, seqs


def test_a_new_private_label_changes_nothing_released(tmp_path):
    """Adding two documents labelled "zzz" used to add "zzz" to privacy_report.json and sequences.jsonl."""
    d = _corpus()
    d_plus = _corpus(extra=(("an odd note about target", "zzz"), ("another odd note about term3", "zzz")))
    rep, seqs = _release(d, tmp_path, "d")
    rep2, seqs2 = _release(d_plus, tmp_path, "d2")
    assert rep["classes"] == rep2["classes"] == ["a", "b"]
    assert "zzz" not in json.dumps(rep2) and "zzz" not in json.dumps(seqs2)
    assert [s["label"] for s in seqs] == [s["label"] for s in seqs2] == ["a", "a", "b", "b"]
    assert [e["params"] for e in rep["events"]] == [e["params"] for e in rep2["events"]]


def test_a_declared_class_without_documents_gets_noise_only_sequences(tmp_path):
    rep, seqs = _release(_corpus(), tmp_path, "e", classes=("a", "b", "empty"))
    assert rep["classes"] == ["a", "b", "empty"]
    assert [s["label"] for s in seqs] == ["a", "a", "b", "b", "empty", "empty"]
    assert all(len(s["keyphrases"]) == 1 for s in seqs)


def test_undeclared_corpus_is_refused_before_anything_is_spent():
    d = Corpus(_corpus().texts, _corpus().labels, "x", "tests")
    with pytest.raises(Exception, match="Declare the public class names"):
        run_sampling(d, _config(), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8))


def test_no_vocabulary_match_releases_for_both_neighbours(tmp_path):
    """D without any term of V and D' = D + one matching document are both released (noise only for D), with a
    local warning: the refusal used to release for D' only."""
    texts = tuple(f"plain words only {i}" for i in range(40))
    d = Corpus(texts, tuple("ab"[i % 2] for i in range(40)), "n", "t", public_classes=("a", "b"))
    d2 = Corpus(texts + ("now with target",), d.labels + ("a",), "n", "t", public_classes=("a", "b"))
    for corpus in (d, d2):
        run = run_sampling(corpus, _config(), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8),
                           context=ReleaseContext(noise=NoiseSource(seed=1, sampler="numpy")))
        assert len(run.private_vocabulary) == len(TERMS) and len(run.outcome.sequences) == 2
    run_d = run_sampling(d, _config(), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8))
    assert any("any term" in w for w in run_d.local_warnings)
    assert "local_warnings" not in run_d.privacy_report().to_json()


# ---- 3. nothing private at rest: a seeded Ṽ, local paths ---------------------------------------------------

def _cache_rows(path) -> int:
    import sqlite3

    with sqlite3.connect(path) as con:
        return int(con.execute("SELECT COUNT(*) FROM emb").fetchone()[0])


def test_a_seeded_run_embeds_its_vocabulary_in_memory_only(tmp_path):
    """A seeded (demo) Ṽ is not a DP release: it must not reach the persistent embedding cache. The same run with
    OS-entropy noise does fill it (so the check would see a seeded Ṽ written there)."""
    from dpkps_core.embeddings import EmbeddingCache

    cache = EmbeddingCache(tmp_path / "c.sqlite")
    run_sampling(_corpus(), _config(), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8), cache=cache,
                 context=ReleaseContext(noise=NoiseSource(seed=5, sampler="numpy")))
    assert _cache_rows(tmp_path / "c.sqlite") == 0
    run = run_sampling(_corpus(), _config(), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8), cache=cache,
                       context=ReleaseContext(noise=NoiseSource(sampler="numpy")))
    assert _cache_rows(tmp_path / "c.sqlite") == len(run.private_vocabulary)


def _csv_corpus(path) -> None:
    rows = ["text,label"] + [f'"document number {i} mentions {"target" if i % 5 == 0 else TERMS[i % 20]}",{"ab"[i % 2]}'
                             for i in range(120)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.mark.parametrize("seed", [7, None])
def test_cli_seeded_sample_leaves_the_persistent_cache_folder_empty(tmp_path, monkeypatch, seed):
    import dpkps_core.cli.sample as cli_sample
    from dpkps_core.cli import main

    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cli_sample, "get_embedder", lambda name, **kw: HashingEmbedder(dim=8))
    _csv_corpus(tmp_path / "c.csv")
    (tmp_path / "v.txt").write_text("\n".join(TERMS) + "\n", encoding="utf-8")
    args = ["sample", "--corpus", tmp_path / "c.csv", "--vocabulary", tmp_path / "v.txt", "--classes", "a,b",
            "--no-junk-filter", "-N", 10, "-S", 1, "-L", 2, "-K", 1, "--out", tmp_path / "run"]
    assert main([str(a) for a in args + (["--seed", seed] if seed is not None else [])]) == 0
    cached = tmp_path / "cache" / "embeddings.sqlite"
    if seed is not None:
        assert not cached.exists() or _cache_rows(cached) == 0
    else:  # the control: an OS-entropy run does store its DP Ṽ
        assert _cache_rows(cached) == 10


def test_the_run_folder_names_a_user_vocabulary_file_without_its_path(tmp_path, monkeypatch):
    """run_config.json and privacy_report.json name a user vocabulary file by file name + SHA-256, never its local
    folder; the run folder still serves the LLM step (the corpus hints) and evaluation (the file found again)."""
    import hashlib

    from dpkps_core.method.config import load_vocabulary_for
    from dpkps_core.errors import VocabularyError
    from dpkps_core.dossier.export import collect_bundle
    from dpkps_core.records.runfolder import RunFolder

    (tmp_path / "data").mkdir()
    (tmp_path / "secret-vocab-folder").mkdir()
    corpus_file, vocab_file = tmp_path / "data" / "c.csv", tmp_path / "secret-vocab-folder" / "myvocab.txt"
    _csv_corpus(corpus_file)
    vocab_file.write_text("\n".join(TERMS) + "\n", encoding="utf-8")
    digest = hashlib.sha256(vocab_file.read_bytes()).hexdigest()
    cfg = _config(corpus=str(corpus_file), vocabulary=str(vocab_file))
    run = run_sampling(_corpus(), cfg, vocabulary=VOCAB, embedder=HashingEmbedder(dim=8),
                       context=ReleaseContext(noise=NoiseSource(seed=5, sampler="numpy")))
    out = write_run_folder(run, tmp_path / "run")
    for name in ("run_config.json", "privacy_report.json"):
        assert "secret-vocab-folder" not in (out / name).read_text(encoding="utf-8"), name
    written = json.loads((out / "run_config.json").read_text())
    assert written["vocabulary"] == "myvocab.txt" and written["vocabulary_sha256"] == digest
    report = json.loads((out / "privacy_report.json").read_text())
    assert report["parameters"]["vocabulary"] == "myvocab.txt"
    assert report["parameters"]["vocabulary_sha256"] == digest
    bundle = collect_bundle(out)
    assert not any(b"secret-vocab-folder" in data for data in bundle.values())
    # the LLM step still finds the private corpus to refuse it as few-shot examples
    path, hashes = RunFolder(out).private_corpus_hints()
    assert path == str(corpus_file.resolve()) and hashes
    # evaluation finds the vocabulary again by name + SHA-256 (working folder or beside the corpus) …
    again = SamplingConfig.from_dict(written)
    with pytest.raises(VocabularyError, match="was not found"):
        load_vocabulary_for(again)
    monkeypatch.chdir(tmp_path / "secret-vocab-folder")
    assert load_vocabulary_for(again).terms == VOCAB.terms
    # … and refuses a file of that name with other content
    monkeypatch.chdir(tmp_path / "data")
    (tmp_path / "data" / "myvocab.txt").write_text("other\nterms\n", encoding="utf-8")
    with pytest.raises(VocabularyError, match="other content"):
        load_vocabulary_for(again)


@pytest.mark.parametrize("seed", [5, None])
def test_the_apps_seeded_density_step_keeps_its_vocabulary_out_of_the_persistent_cache(tmp_path, monkeypatch, seed):
    """studio.steps.run_density with the "reproducible demo" seed: Ṽ's embeddings stay in memory (the control, an
    OS-entropy run, writes them to the persistent cache)."""
    from dpkps_core.method import pipeline
    from dpkps_core.dp.ledger import PrivacyLedger
    from dpkps_core.embeddings import EmbeddingCache
    from app_helpers import use_state
    from studio import run_view, steps

    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path / "cache"))
    c = _corpus()
    cfg = _config(seed=seed)
    state = use_state(monkeypatch)
    released: dict = {}
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    noise = NoiseSource(seed, sampler="numpy")
    ledger = PrivacyLedger()
    pv = pipeline.vocabulary_step(c, VOCAB, cfg, context=ReleaseContext(noise=noise, ledger=ledger)).private_vocabulary
    # the open run's Ṽ, and what the step keeps in the session (studio.run_view)
    monkeypatch.setattr(run_view, "private_vocabulary", lambda state: pv)
    monkeypatch.setattr(run_view, "remember_density",
                        lambda state, path, density, emb, **kw: released.update(density=density))
    monkeypatch.setattr(run_view, "set_notes", lambda state, path, step, notes: released.update(notes=notes))
    for name, value in {"corpus": lambda state: c, "current_config": lambda state, **kw: cfg,
                        "ledger": lambda state: ledger, "noise": lambda state: noise, "train_part": lambda state: c,
                        "embedder": lambda name: HashingEmbedder(dim=8),
                        "embedding_cache": lambda: EmbeddingCache(),
                        "clear_after": lambda state, step, include=False: None,
                        "require_selected_corpus": lambda state: c, "run_state_base": lambda state: {},
                        "run_dir": lambda state, create=True: run_folder}.items():
        monkeypatch.setattr(steps, name, value)
    monkeypatch.setattr(steps.spend, "started", lambda state: None)
    steps.run_density(state)
    assert released["notes"]["left_out"] == 0 and released["density"] is not None
    cached = tmp_path / "cache" / "embeddings.sqlite"
    if seed is not None:
        assert not cached.exists() or _cache_rows(cached) == 0
    else:
        assert _cache_rows(cached) == len(pv)
