"""The app's pure helpers (studio.session / steps / generation_steps) and the small core helpers the app shows:
run folders, ordering, summaries, the ε explainer, the run assembly."""

from __future__ import annotations

import json
import math
import stat
from pathlib import Path

import numpy as np
import pytest

from dpkps_core.corpus import Corpus, corpus_summary
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder, embed_terms
from dpkps_core.errors import ParameterError
from dpkps_core.method import pipeline
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.pipeline import build_density, build_private_vocabulary, extract_keyphrases, sample_sequences
from dpkps_core.risk import epsilon_explainer
from dpkps_core.records.runfolder import create_run_dir, runs_root
from dpkps_core.method.split import split_corpus
from dpkps_core.method.vocabulary import PublicVocabulary
from studio import PAGES, charts, generation_steps
from studio.state import SessionState


def test_runs_root_from_env_is_created_owner_only(tmp_path: Path) -> None:
    root = runs_root({"DPKPS_RUNS_DIR": str(tmp_path / "r" / "s")})
    assert root == tmp_path / "r" / "s" and root.is_dir()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_runs_root_default_is_under_the_home_or_a_tempdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    root = runs_root({})
    assert root == tmp_path / ".local" / "share" / "dpkps" / "runs"


def test_run_dirs_are_fresh_and_owner_only(tmp_path: Path) -> None:
    a = create_run_dir(tmp_path, "tok")
    b = create_run_dir(tmp_path, "tok")
    assert a != b and a.name.startswith("run-") and "tok" in a.name
    assert stat.S_IMODE(a.stat().st_mode) == 0o700


def test_interleave_by_class_round_robin_keeps_ids() -> None:
    seqs = [{"id": f"s{i}", "label": lab} for i, lab in enumerate("aaabbc")]
    out = generation_steps.interleave_by_class(seqs)
    assert [s["label"] for s in out] == list("abcaba")
    assert sorted(s["id"] for s in out) == sorted(s["id"] for s in seqs)


def test_corpus_summary_counts(toy_corpus: Corpus) -> None:
    info = corpus_summary(toy_corpus)
    assert info["documents"] == 11 and info["classes"] == 3
    assert info["class_counts"] == {"business": 3, "sport": 4, "tech": 4}
    assert info["words_min"] <= info["words_median"] <= info["words_max"]


def test_few_shot_examples_from_the_corpus_are_refused(toy_corpus: Corpus) -> None:
    generation_steps.check_few_shot_not_private(["a public example"], toy_corpus)
    with pytest.raises(ParameterError, match="private corpus"):
        generation_steps.check_few_shot_not_private([" " + toy_corpus.texts[3] + "\n"], toy_corpus)


def test_epsilon_explainer_plain_numbers() -> None:
    x = epsilon_explainer(eps_voc=1.0, eps_kde=5.0, terms_per_doc=10, public_vocabulary_size=400_000,
                          density_kind="histogram")
    assert x["odds_total"] == pytest.approx(math.exp(6)) and x["odds_voc"] == pytest.approx(math.e)
    assert x["voc_scale"] == 10 and x["voc_sd"] == pytest.approx(10 * math.sqrt(2))
    assert x["voc_floor"] == pytest.approx(10 * math.log(200_000))
    assert x["kde_sd"] == pytest.approx(math.sqrt(2) / 5)
    r = epsilon_explainer(eps_voc=1.0, eps_kde=5.0, terms_per_doc=10, public_vocabulary_size=10,
                          density_kind="rff", features=1000)
    assert r["kde_scale"] == pytest.approx(math.sqrt(2) * 1000 / 5)


def test_step_by_step_pieces_write_the_cli_run_folder(toy_corpus: Corpus, tmp_path: Path) -> None:
    vocab = PublicVocabulary("toy", ("goal", "match", "team", "software", "browser", "bank", "profits", "shares",
                                     "network", "league", "rates"), "test", "test")
    cfg = SamplingConfig(eps_voc=2.0, eps_kde=3.0, vocab_size=8, per_class=2, length=3, test_fraction=0.0)
    split = split_corpus(toy_corpus.texts, test_fraction=0.0)
    train = toy_corpus.subset(split.train)
    ledger, noise = PrivacyLedger(10.0), NoiseSource(7)
    pv = build_private_vocabulary(train.texts, vocab, eps_voc=2.0, terms_per_doc=10, vocab_size=8,
                                  context=ReleaseContext(noise=noise, ledger=ledger))
    emb = embed_terms(pv.terms, HashingEmbedder(16))
    kp = extract_keyphrases(train.texts, pv, max_per_doc=3)
    density, info = build_density(kp, train.labels, classes=tuple(toy_corpus.classes), embeddings=emb, config=cfg,
                                  private_vocabulary=pv, context=ReleaseContext(noise=noise, ledger=ledger))
    outcome = sample_sequences(density, terms=pv.terms, embeddings=emb, config=cfg, rng=noise.child())
    report = pipeline.privacy_report(config=cfg, context=ReleaseContext(noise=noise, ledger=ledger),
                                     private_vocabulary=pv,
                                     vocabulary_name="toy", density_info=info, outcome=outcome,
                                     classes=toy_corpus.classes)
    out = pipeline.write_run_files(tmp_path / "run", config=cfg, split=split, private_vocabulary=pv, outcome=outcome,
                                   report=report)
    whole = pipeline.SamplingRun(cfg, split, ledger, noise, pv, emb, density, info, outcome,
                                 tuple(toy_corpus.classes), {}, "toy")  # what run_sampling returns for the same draw
    assert whole.privacy_report() == report
    twin = pipeline.write_run_folder(whole, tmp_path / "twin")
    for name in ("sequences.jsonl", "privacy_report.json", "private_vocabulary.json", "run_config.json", "split.json"):
        assert (out / name).read_bytes() == (twin / name).read_bytes()  # the app and the CLI write the same files
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert {p.name for p in out.iterdir()} == {"sequences.jsonl", "privacy_report.json", "private_vocabulary.json",
                                               "run_config.json", "split.json"}
    report = json.loads((out / "privacy_report.json").read_text())
    assert report["epsilon_total"] == pytest.approx(5.0) and report["epsilon_cap"] == 10.0
    assert report["seed_policy"] == "seeded-demo-not-for-release"
    assert len((out / "sequences.jsonl").read_text().splitlines()) == 6


def test_pages_registry_points_at_files() -> None:
    root = Path(__file__).resolve().parents[2]
    assert len(PAGES) == 9 and len({p.url_path for p in PAGES}) == 9
    for p in PAGES:
        assert (root / p.path).is_file()
        text = (root / p.path).read_text()
        assert "import streamlit" in text and "dpkps_core.dp" not in text     # thin pages: no DP logic


def test_core_never_imports_streamlit() -> None:
    root = Path(__file__).resolve().parents[2] / "dpkps_core"
    offenders = [p.name for p in root.rglob("*.py") if "import streamlit" in p.read_text()]
    assert offenders == []


def test_charts_are_plotly_figures() -> None:
    fig = charts.density_bars(["a", "b"], ["x", "y", "z"], np.array([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]]), top=2)
    assert len(fig.data) == 2 and list(fig.data[0].y) == ["x", "y"]
    fig = charts.umap_density_map(np.zeros((3, 2)), ["x", "y", "z"], np.array([-1.0, 2.0, 3.0]), "a")
    assert list(fig.data[0].customdata) == [0.0, 2.0, 3.0]              # clipped at 0 like the sampler
    assert list(fig.data[0].marker.color) == [0.0, 50.0, 100.0]         # coloured by rank (issue 14 §8)
    fig = charts.noisy_counts_bar(["x", "y"], [5.0, 3.0], noise_floor=4.0)
    assert list(fig.data[0].y) == ["y", "x"]


def test_session_upload_folder_is_removed_when_the_session_state_goes(monkeypatch) -> None:
    import gc

    from studio import uploads

    from app_helpers import use_state

    state = use_state(monkeypatch)
    path = uploads.save_vocabulary_upload(state, b"goal\nmatch\n", "my vocab.txt")
    folder = path.parent
    assert path.read_bytes() == b"goal\nmatch\n" and oct(folder.stat().st_mode)[-3:] == "700"
    import streamlit

    del state
    streamlit.session_state.clear()  # what Streamlit does with a session's state when the session ends
    gc.collect()
    assert not folder.exists()


def test_the_app_steps_release_what_run_sampling_releases(toy_corpus: Corpus) -> None:
    """The app takes the steps one page at a time (vocabulary_step, density_step, sample_sequences); the CLI's
    run_sampling chains the same functions: with the same seeded noise they release the same Ṽ, densities and
    sequences, and charge the same events."""
    from dpkps_core.method.split import split_documents

    vocab = PublicVocabulary("toy", ("goal", "match", "team", "software", "browser", "bank", "profits", "shares",
                                     "network", "league", "rates"), "test", "test")
    cfg = SamplingConfig(eps_voc=2.0, eps_kde=3.0, vocab_size=8, per_class=2, length=3, test_fraction=0.2, seed=5)
    whole = pipeline.run_sampling(toy_corpus, cfg, vocabulary=vocab, embedder=HashingEmbedder(16),
                                  context=ReleaseContext(noise=NoiseSource(5), ledger=PrivacyLedger(10.0)))
    noise, ledger = NoiseSource(5), PrivacyLedger(10.0)
    train = toy_corpus.subset(split_documents(toy_corpus, test_fraction=0.2).train).declared_only()
    voc = pipeline.vocabulary_step(train, vocab, cfg, context=ReleaseContext(noise=noise, ledger=ledger))
    dens = pipeline.density_step(train, voc.private_vocabulary, cfg, classes=toy_corpus.classes,
                                 embedder=HashingEmbedder(16), context=ReleaseContext(noise=noise, ledger=ledger))
    outcome = pipeline.sample_sequences(dens.density, terms=voc.private_vocabulary.terms, embeddings=dens.embeddings,
                                        config=cfg, rng=noise.child())
    assert voc.private_vocabulary.terms == whole.private_vocabulary.terms
    assert np.allclose(dens.embeddings, whole.embeddings) and dens.info == whole.density_info
    assert [s.to_dict() for s in outcome.sequences] == [s.to_dict() for s in whole.outcome.sequences]
    assert [(e.step, e.epsilon, e.noise_scale) for e in ledger.events] == \
        [(e.step, e.epsilon, e.noise_scale) for e in whole.ledger.events]
    assert voc.local_warnings == whole.local_warnings


def test_run_folders_are_listed_and_reopened_from_their_files_alone(tmp_path: Path) -> None:
    """dpkps_core.records.runfolder: list_runs / open_run read a run back from its folder (DP outputs and public settings);
    a folder without Ṽ is no run; a run is named by its bare folder name, never a path."""
    from dpkps_core.records.runfolder import (DENSITY_FILE, RUN_STATE_FILE, VOCABULARY_FILE, list_runs, open_run,
                                      resolve_run_name, write_json)

    old = create_run_dir(tmp_path, "tok")
    new = create_run_dir(tmp_path, "tok")
    (tmp_path / "not-a-run").mkdir()
    write_json(old / VOCABULARY_FILE, {"terms": ["goal", "bank"], "noisy_counts": [3.0, 2.0],
                                       "public_vocabulary": "toy", "public_vocabulary_size": 11, "epsilon": 2.0,
                                       "terms_per_doc": 10, "requested_size": 2, "noise_scale": 5.0})
    write_json(old / RUN_STATE_FILE, {"corpus_spec": "demo:bbc", "corpus_name": "bbc", "epsilon_total": 5.0,
                                      "density_meta": {"method": "independent", "eps_kde": 3.0}})
    write_json(old / DENSITY_FILE, {"classes": ["a", "b"], "scores": [[1.0, 0.0], [0.0, 2.0]]})
    runs = list_runs(tmp_path)
    assert [r.name for r in runs] == [old.name]                  # the empty folder and the stray one are no runs
    assert (runs[0].corpus, runs[0].method, runs[0].epsilon_total, runs[0].documents) == ("bbc", "independent", 5.0, 0)
    run = open_run(resolve_run_name(old.name, tmp_path))
    assert run.vocabulary["terms"] == ["goal", "bank"] and run.sequences == [] and run.documents == []
    density = run.density()
    assert density.classes == ("a", "b") and np.allclose(density.scores(), [[1.0, 0.0], [0.0, 2.0]])
    for bad in ("../etc", str(old), "not-a-run", ""):
        with pytest.raises(ParameterError):
            resolve_run_name(bad, tmp_path)
    with pytest.raises(ParameterError, match="no private vocabulary"):
        open_run(new)


# ------------------------------------------------------------------- one path for a setting; the run folder as state

def _fake_session(monkeypatch: pytest.MonkeyPatch) -> SessionState:
    """A fresh session's typed state (``studio.state.SessionState``, every default) that the studio modules read."""
    from app_helpers import use_state

    return use_state(monkeypatch)


def test_current_config_is_built_once_through_build_sampling_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/DESIGN.md §2 / docs/ARCHITECTURE.md: the app's settings become a SamplingConfig through the one builder, checked
    once there — the budget page's total and share become ε_voc + ε_kde by split_epsilon."""
    from dpkps_core.method import config as core_config
    from studio import session

    state = _fake_session(monkeypatch)
    calls: list[dict] = []

    def counting(*args, **kwargs):
        calls.append(kwargs)
        return core_config.build_sampling_config(*args, **kwargs)

    monkeypatch.setattr(session, "build_sampling_config", counting)
    state.settings.eps_total, state.settings.eps_voc_share, state.settings.length = 8.0, 0.25, 4
    cfg = session.current_config(state)
    assert len(calls) == 1 and (cfg.eps_voc, cfg.eps_kde, cfg.length) == (2.0, 6.0, 4)
    assert (calls[0]["eps_total"], calls[0]["eps_voc_share"]) == (8.0, 0.25)
    cfg = session.current_config(state, eps_kde=3.0, method="iterative-log", density="rff")
    assert len(calls) == 2 and (cfg.eps_voc, cfg.eps_kde, cfg.method) == (2.0, 3.0, "iterative-log")
    state.settings.length = 0                                      # an invalid setting never becomes a config
    with pytest.raises(ParameterError, match="L \\(sequence length\\)"):
        session.current_config(state)


def _write_run(folder: Path, *, seq_meta: bool = True) -> None:
    from dpkps_core.records.runfolder import (DENSITY_FILE, PRIVACY_REPORT_FILE, RUN_STATE_FILE, SEQUENCES_FILE,
                                      VOCABULARY_FILE, write_json, write_jsonl)

    write_json(folder / VOCABULARY_FILE, {"terms": ["goal", "bank", "match"], "noisy_counts": [9.5, 7.25, 3.0],
                                          "public_vocabulary": "toy", "public_vocabulary_size": 11, "epsilon": 2.0,
                                          "terms_per_doc": 10, "requested_size": 3, "noise_scale": 5.0})
    write_json(folder / RUN_STATE_FILE, {
        "corpus_spec": "demo:bbc", "pv_meta": {"eps_voc": 2.0, "vocabulary_spec": "glove"},
        "density_meta": {"method": "independent", "density": "auto", "length": 2, "eps_kde": 3.0,
                         "embedding_model": "toy-model", "seeded": False},
        "density_info": {"density": "histogram", "bandwidth": 0.3},
        "seq_meta": {"per_class": 1, "temperature": 1.0, "seeded": False} if seq_meta else None})
    write_json(folder / DENSITY_FILE, {"classes": ["sport", "business"], "scores": [[1.0, 0.0, 0.5], [0.0, 2.0, 0.0]]})
    write_jsonl(folder / SEQUENCES_FILE, [{"id": "seq-000001", "label": "sport", "keyphrases": ["goal", "match"],
                                           "method": "independent"},
                                          {"id": "seq-000002", "label": "business", "keyphrases": ["bank", "bank"],
                                           "method": "independent"}])
    write_json(folder / PRIVACY_REPORT_FILE, {"uniform_fallback_draws": 1})


def test_the_run_view_reads_the_folder_and_follows_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """studio.run_view: the session holds a pointer; Ṽ, densities and sequences come from the folder (cached until a
    file changes); the private local figures and the density released in this session live in memory only."""
    from dpkps_core.records.runfolder import DENSITY_FILE, SEQUENCES_FILE, write_json, write_jsonl
    from studio import run_view

    state = _fake_session(monkeypatch)
    assert run_view.private_vocabulary(state) is None and run_view.outcome(state) is None and run_view.run_state(state) == {}
    folder = create_run_dir(tmp_path, "tok")
    _write_run(folder)
    state.run.run_dir = str(folder)
    pv = run_view.private_vocabulary(state)
    assert pv.terms == ("goal", "bank", "match") and run_view.private_vocabulary(state) is pv     # cached
    assert np.allclose(run_view.density_scores(state), [[1.0, 0.0, 0.5], [0.0, 2.0, 0.0]])
    meta = run_view.density_meta(state)
    assert meta["reopened"] and meta["documents_without_keyphrases"] == 0 and meta["left_out"] == 0
    out = run_view.outcome(state)
    assert [q.keyphrases for q in out.sequences] == [("goal", "match"), ("bank", "bank")]
    assert (out.uniform_fallbacks, out.draws) == (1, 4)
    # a rewritten file is read again
    write_jsonl(folder / SEQUENCES_FILE, [{"id": "seq-000001", "label": "sport", "keyphrases": ["match"],
                                           "method": "independent"}])
    assert [q.keyphrases for q in run_view.outcome(state).sequences] == [("match",)]
    # this session's private notes and released density: memory only, for this folder only
    run_view.set_notes(state, folder, "density", {"documents_without_keyphrases": 3, "left_out": 1, "secret": "x"})
    released = object()
    run_view.remember_density(state, folder, released, np.zeros((3, 2)), model="toy-model", seeded=False)
    meta = run_view.density_meta(state)
    assert run_view.density(state) is released and "reopened" not in meta and "secret" not in meta
    assert (meta["documents_without_keyphrases"], meta["left_out"]) == (3, 1)
    assert "secret" not in json.dumps(run_view.run_state(state))
    write_json(folder / DENSITY_FILE, {"classes": ["sport", "business"], "scores": [[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]})
    assert run_view.density(state) is not released and run_view.density_meta(state)["reopened"]  # the folder is the source
    # a pointer elsewhere shows that run, and no pointer shows none
    other = create_run_dir(tmp_path, "tok")
    _write_run(other, seq_meta=False)
    state.run.run_dir = str(other)
    assert run_view.outcome(state) is None and run_view.density_meta(state)["documents_without_keyphrases"] == 0
    state.run.run_dir = None
    assert run_view.private_vocabulary(state) is None and run_view.density(state) is None
