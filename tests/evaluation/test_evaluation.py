"""Evaluation layer (docs/DESIGN.md §5, §6): CORAL formula, no-LLM check, sweep, forecast, split discipline.

Tiny corpora are built here; :class:`BowEmbedder` (a bag of hashed word vectors) stands in for a real model
except in the ``model``-marked test.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from dpkps_core import evaluation as ev
from dpkps_core.method import pipeline
from dpkps_core.corpus import Corpus
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.split import split_corpus
from dpkps_core.method.vocabulary import PublicVocabulary

from eval_toys import POOLS, BowEmbedder, make_toy_corpus, make_toy_vocabulary, toy_config


# ------------------------------------------------------------------------------------------------ CORAL

def test_coral_loss_matches_hand_computation() -> None:
    torch = pytest.importorskip("torch")
    src = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    tgt = torch.tensor([[0.0, 0.0], [1.0, 1.0]])
    # By hand, (n−1) denominator: C_src = [[4/3, −2/3], [−2/3, 4/3]], C_tgt = [[1/2, 1/2], [1/2, 1/2]];
    # ‖C_src − C_tgt‖²_F = 2·(5/6)² + 2·(7/6)² = 37/9; divided by 4d² = 16 → 37/144.
    assert ev.coral_loss(src, tgt).item() == pytest.approx(37 / 144, rel=1e-6)
    assert ev.coral_loss(src, src).item() == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ParameterError):
        ev.coral_loss(src[:1], tgt)


def test_torch_head_with_and_without_coral_learns() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 0.3, (40, 6)) + 2, rng.normal(0, 0.3, (40, 6)) - 2]).astype(np.float32)
    y = ["a"] * 40 + ["b"] * 40
    client = (x + 0.5).astype(np.float32)
    for weight in (0.0, 1.0):
        head = ev.TorchHead(hidden=None, epochs=20, lr=1e-2, seed=0, coral_weight=weight).fit(x, y, client=client)
        assert (head.predict(x) == np.asarray(y)).mean() > 0.95
    with pytest.raises(ParameterError):
        ev.TorchHead(coral_weight=1.0).fit(x, y, client=None)


# ------------------------------------------------------------------------------------------ metrics

def test_scores_and_summary() -> None:
    s = ev.classification_scores(["a", "a", "b", "b"], ["a", "b", "b", "b"])
    assert s.accuracy == 0.75 and s.per_class_recall == {"a": 0.5, "b": 1.0}
    m = ev.MetricSummary("x", (0, 1), (s, dataclasses.replace(s, accuracy=0.25)), n_train=4)
    d = m.to_dict()
    assert d["mean"] == pytest.approx(0.5) and d["sd"] == pytest.approx(np.std([0.75, 0.25], ddof=1))
    assert [r["seed"] for r in d["seeds"]] == [0, 1] and set(d["per_class_recall"]) == {"a", "b"}
    assert ev.chance_accuracy(["a", "a", "a", "b"]) == 0.75


def test_keyphrase_analyzer_keeps_phrases_whole() -> None:
    doc = ev.join_keyphrases(["new york", "bank", "new york"])
    feats = ev.keyphrase_analyzer(doc)
    sep = ev.KEYPHRASE_SEPARATOR
    assert feats[:3] == ["new york", "bank", "new york"]
    assert f"new york{sep}bank" in feats and f"bank{sep}new york" in feats and "new" not in feats


def test_vocabulary_recall_and_noise_share() -> None:
    vocab = PublicVocabulary(name="v", terms=("a", "b", "c", "d"), licence="t", source="t")
    counts = np.array([5, 0, 3, 1])
    assert ev.vocabulary_recall(counts, vocab.terms, ["a", "b"], top=2) == 0.5  # true top-2 = a, c
    assert ev.vocabulary_recall(counts, vocab.terms, ["a", "c", "d"], top=10) == 1.0  # only 3 nonzero terms
    assert ev.noise_term_share(counts, vocab, ["a", "b"]) == 0.5


def test_no_llm_classifier_separates_classes() -> None:
    corpus = make_toy_corpus()
    seqs = [[w for w in re.findall(r"[a-z]+", t) if any(w in p for p in POOLS.values())] for t in corpus.texts]
    s = ev.keyphrase_classifier_scores(seqs[::2], corpus.labels[::2], seqs[1::2], corpus.labels[1::2])
    assert s.accuracy > 0.9


# -------------------------------------------------------------------- split discipline and the sweep

def _record_sampling_inputs(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    seen: dict[str, list] = {"term_counts": [], "density_keyphrases": [], "density_labels": []}
    orig_counts, orig_density = pipeline.term_counts, pipeline.build_density

    def term_counts(texts, vocabulary, **kw):
        seen["term_counts"].append(tuple(texts))
        return orig_counts(texts, vocabulary, **kw)

    def build_density(keyphrases, labels, **kw):
        seen["density_keyphrases"].append((keyphrases, kw["private_vocabulary"]))
        seen["density_labels"].append(tuple(labels))
        return orig_density(keyphrases, labels, **kw)

    monkeypatch.setattr(pipeline, "term_counts", term_counts)
    monkeypatch.setattr(pipeline, "build_density", build_density)
    return seen


def _assert_only_train(seen: dict[str, list], corpus: Corpus, split) -> None:
    index = {t: i for i, t in enumerate(corpus.texts)}
    train_texts = tuple(corpus.texts[i] for i in split.train)
    assert seen["term_counts"], "term counts were never computed"
    for texts in seen["term_counts"]:
        assert sorted(index[t] for t in texts) == sorted(split.train)
    assert seen["density_keyphrases"]
    for (kp, pv), labels in zip(seen["density_keyphrases"], seen["density_labels"]):
        assert labels == tuple(corpus.labels[i] for i in split.train)
        # the keyphrases that built the density are exactly the training documents' matches of Ṽ
        expected = pipeline.extract_keyphrases(train_texts, pv, max_per_doc=5)
        assert [list(k) for k in kp] == [list(k) for k in expected]
    assert not set(split.test) & set(split.train)


def test_sweep_and_sampling_touch_only_the_training_part(monkeypatch: pytest.MonkeyPatch) -> None:
    corpus, vocab, cfg = make_toy_corpus(), make_toy_vocabulary(), toy_config()
    split = split_corpus(corpus.texts, test_fraction=cfg.test_fraction, seed=cfg.split_seed)
    seen = _record_sampling_inputs(monkeypatch)
    ev.run_sweep(corpus, config=cfg, vocabulary=vocab, embedder=HashingEmbedder(32), eps_voc_grid=[5],
                 eps_kde_grid=[5], methods=["independent", "iterative-log"], seeds=1, per_class=10)
    _assert_only_train(seen, corpus, split)
    seen = _record_sampling_inputs(monkeypatch)
    run = pipeline.run_sampling(corpus, dataclasses.replace(cfg, seed=0), vocabulary=vocab, embedder=HashingEmbedder(32))
    assert run.split == split
    _assert_only_train(seen, corpus, split)


def test_sweep_counts_cells_and_reports_progress() -> None:
    corpus, vocab = make_toy_corpus(), make_toy_vocabulary()
    calls: list[float] = []
    df = ev.run_sweep(corpus, config=toy_config(), vocabulary=vocab, embedder=BowEmbedder(),
                      eps_voc_grid=[1, 20], eps_kde_grid=[2, 20], methods=["independent", "iterative-log"], seeds=2,
                      per_class=15, progress=lambda f, m: calls.append(f))
    assert len(df) == 2 * 2 * 2 * 2
    assert df.groupby(["method", "eps_voc", "eps_kde"]).size().eq(2).all()
    assert set(df["seed"]) == {0, 1} and (df["eps_total"] == df["eps_voc"] + df["eps_kde"]).all()
    assert (df["epsilon_spent"] == df["eps_total"]).all()
    assert df.attrs["private"] is True
    assert len([f for f in calls if f > 0]) == 16 and calls[-1] == 1.0
    for col in ("no_llm_accuracy", "real_keyphrase_baseline_accuracy", "vocabulary_recall", "chance_accuracy"):
        assert df[col].between(0, 1).all()
    best = df[(df.method == "independent") & (df.eps_voc == 20) & (df.eps_kde == 20)]
    assert best["no_llm_accuracy"].mean() > 0.7 and best["vocabulary_recall"].mean() > 0.8
    summary = ev.sweep_summary(df)
    assert len(summary) == 8 and (summary["seeds"] == 2).all()
    figs = ev.sweep_figures(df)
    assert set(figs) == {"heatmap:independent", "heatmap:iterative-log", "curves"}


def test_sweep_cell_equals_sample_run_with_that_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep cell re-uses the term counts but draws exactly the noise `run_sampling` would with that seed."""
    corpus, vocab, cfg = make_toy_corpus(), make_toy_vocabulary(), toy_config(eps_voc=2.0, eps_kde=3.0)
    emb = HashingEmbedder(32)
    seqs = []
    orig = pipeline.sample_sequences

    def spy(*a, **kw):
        out = orig(*a, **kw)
        seqs.append([s.keyphrases for s in out.sequences])
        return out

    monkeypatch.setattr(pipeline, "sample_sequences", spy)
    evaluator = ev.NoLLMEvaluator(corpus, config=cfg, vocabulary=vocab, embedder=emb)
    evaluator.evaluate(cfg, seed=7, per_class=6)
    evaluator.evaluate(cfg, seed=7, per_class=6)  # memoised Ṽ-dependent work: same result
    pipeline.run_sampling(corpus, dataclasses.replace(cfg, seed=7, per_class=6), vocabulary=vocab, embedder=emb)
    assert len(seqs) == 3 and seqs[0] == seqs[1] == seqs[2]


def test_sweep_rejects_bad_grid() -> None:
    corpus, vocab = make_toy_corpus(), make_toy_vocabulary()
    with pytest.raises(ParameterError):
        ev.run_sweep(corpus, config=toy_config(), vocabulary=vocab, embedder=HashingEmbedder(8), eps_voc_grid=[0])
    with pytest.raises(ParameterError):
        ev.run_sweep(corpus, config=toy_config(), vocabulary=vocab, embedder=HashingEmbedder(8), methods=["magic"])


# ------------------------------------------------------------------------------------------- forecast

def test_forecast_verdict_changes_with_epsilon() -> None:
    corpus, vocab = make_toy_corpus(), make_toy_vocabulary(n_filler=20_000)
    kw = dict(terms_per_doc=5, vocab_size=30, method="independent", length=5)
    low = ev.forecast(corpus.texts, corpus.labels, vocab, SamplingConfig(eps_voc=0.05, eps_kde=0.01, **kw))
    high = ev.forecast(corpus.texts, corpus.labels, vocab, SamplingConfig(eps_voc=200.0, eps_kde=200.0, **kw))
    assert low.private and high.private
    assert low.expected_noise_share > 0.8 > 0.2 > high.expected_noise_share
    assert not low.vocabulary_usable and high.vocabulary_usable
    assert not low.kde_usable and high.kde_usable
    assert low.verdict.startswith("Not usable") and high.verdict.startswith("Likely usable")
    assert low.suggested_eps_voc is not None and low.suggested_eps_voc > 0.05
    assert low.suggested_eps_kde is not None and low.suggested_eps_kde > 0.01
    assert low.noise_floor > high.noise_floor and "disclosure" in low.disclosure_note
    mid = ev.forecast(corpus.texts, corpus.labels, vocab, SamplingConfig(eps_voc=2.0, eps_kde=2.0, **kw))
    assert high.expected_noise_share <= mid.expected_noise_share <= low.expected_noise_share
    d = low.to_dict()
    assert d["private"] is True and d["usable"] is False and d["count_curve"]
    fig = ev.forecast_figure(low)
    assert fig.data and fig.layout.xaxis.type == "log"


def test_forecast_rff_with_embedder_and_validation() -> None:
    corpus, vocab = make_toy_corpus(), make_toy_vocabulary()
    cfg = SamplingConfig(eps_voc=10.0, eps_kde=10.0, terms_per_doc=5, vocab_size=30, method="iterative-log", length=5)
    f = ev.forecast(corpus.texts, corpus.labels, vocab, cfg, embedder=BowEmbedder())
    assert f.density == "rff" and set(f.kde) == set(POOLS) and "exact KDE" in f.kde_error_kind
    with pytest.raises(ParameterError):
        ev.forecast(corpus.texts, corpus.labels, vocab, cfg, eps_voc=0)
    with pytest.raises(ParameterError):
        ev.forecast(corpus.texts, corpus.labels[:-1], vocab, cfg)
    with pytest.raises(ParameterError, match="SamplingConfig"):
        ev.forecast(corpus.texts, corpus.labels, vocab, cfg.to_dict())


# ---------------------------------------------------------------------------------------- projections

def test_projection_frame_tsne() -> None:
    rng = np.random.default_rng(0)
    df = ev.projection_frame(rng.normal(size=(12, 8)), ["a", "b"] * 6, rng.normal(size=(10, 8)), ["a", "b"] * 5,
                             method="tsne", max_points_per_source=8)
    assert list(df.columns) == ["x", "y", "source", "label"] and len(df) == 16
    assert (df.source == "real").sum() == 8 and df.attrs["private"] is True
    assert ev.projection_figure(df).data


@pytest.mark.slow
def test_projection_frame_umap() -> None:
    pytest.importorskip("umap")
    rng = np.random.default_rng(0)
    df = ev.projection_frame(rng.normal(size=(30, 8)), ["a"] * 30, rng.normal(size=(30, 8)), ["b"] * 30, method="umap")
    assert len(df) == 60 and set(df.source) == {"real", "synthetic"}


# ----------------------------------------------------------------------------------- real model / data

@pytest.mark.model
@pytest.mark.assets
def test_real_document_baseline_beats_chance_on_bbc() -> None:
    from dpkps_core.corpus import load_demo_corpus
    from dpkps_core.embeddings import embed_texts, get_embedder

    corpus = load_demo_corpus("bbc")
    split = split_corpus(corpus.texts, test_fraction=0.2, seed=0)
    train, test = corpus.subset(split.train), corpus.subset(split.test)
    test_idx = ev.matched_real_sample(test.labels, {c: 8 for c in test.classes}, seed=1)
    test_texts = [test.texts[i][:600] for i in test_idx]
    test_labels = [test.labels[i] for i in test_idx]
    embedder = get_embedder("all-MiniLM-L6-v2")
    test_emb = embed_texts(test_texts, embedder)
    short = [t[:600] for t in train.texts]
    m = ev.real_baseline_accuracy(short, train.labels, test_emb, test_labels, per_class={c: 8 for c in train.classes},
                                  embedder=embedder, seeds=(0,))
    chance = ev.chance_accuracy(test_labels)
    assert chance == pytest.approx(0.2)
    assert m.accuracy_mean >= 0.7 and m.accuracy_mean > 3 * chance


def test_app_and_core_give_identical_sweep_and_no_llm_numbers(monkeypatch) -> None:
    """Issue 12: the app's sweep job and no-LLM check are the core's functions: same settings, same numbers."""
    import threading

    from studio import evaluation_steps, jobs

    corpus, vocab = make_toy_corpus(), make_toy_vocabulary()
    cfg = toy_config()
    core = ev.run_sweep(corpus, config=cfg, vocabulary=vocab, embedder=BowEmbedder(), eps_voc_grid=[2, 20],
                        eps_kde_grid=[5], methods=["independent"], seeds=2, per_class=10)
    # the app's job body, with the session's accessors pointed at the same inputs
    from app_helpers import use_state

    state = use_state(monkeypatch)
    monkeypatch.setattr(evaluation_steps, "corpus", lambda state: corpus)
    monkeypatch.setattr(evaluation_steps, "current_config", lambda state, **kw: dataclasses.replace(cfg, **kw))
    monkeypatch.setattr(evaluation_steps, "public_vocabulary", lambda state: vocab)
    monkeypatch.setattr(evaluation_steps, "embedder", lambda *a, **k: BowEmbedder())
    monkeypatch.setattr(evaluation_steps, "embedding_cache", lambda: None)
    monkeypatch.setattr(evaluation_steps, "split", lambda state: None)
    captured = {}
    monkeypatch.setattr(evaluation_steps, "start_job", lambda state, name, kind,
                        work: captured.setdefault("work", work))
    evaluation_steps.start_sweep(state, eps_voc=[2, 20], eps_kde=[5], methods=["independent"], seeds=2, per_class=10)
    job = jobs.Job(kind="sweep")
    app = captured["work"](job)
    cols = ["method", "eps_voc", "eps_kde", "seed", "no_llm_accuracy", "real_keyphrase_baseline_accuracy",
            "vocabulary_recall"]
    assert app[cols].to_dict("records") == core[cols].to_dict("records")
    assert len(job.partial) == len(core)
    # cancelling keeps the finished cells
    stop = threading.Event()
    rows: list = []
    part = ev.run_sweep(corpus, config=cfg, vocabulary=vocab, embedder=BowEmbedder(), eps_voc_grid=[2, 20],
                        eps_kde_grid=[5], methods=["independent"], seeds=2, per_class=10, rows=rows,
                        progress=lambda f, m: stop.set() if f >= 0.5 else None, cancel=stop)
    assert 0 < len(part) < len(core) and len(rows) == len(part)
    # the no-LLM check of one configuration is the sweep's number for that cell
    row = core.iloc[0]
    e = ev.NoLLMEvaluator(corpus, config=cfg, vocabulary=vocab, embedder=BowEmbedder())
    again = e.evaluate(cfg.replace(eps_voc=float(row.eps_voc), eps_kde=float(row.eps_kde)), seed=int(row.seed),
                       per_class=10)
    assert again["no_llm_accuracy"] == row.no_llm_accuracy


def test_subsample_is_sorted_distinct_and_bounded() -> None:
    """The one "k of n points for a projection" helper (core, shared by the CLI's and the app's overlays)."""
    from dpkps_core.evaluation import subsample

    rng = np.random.default_rng(0)
    idx = subsample(50, 10, rng)
    assert idx.tolist() == sorted(set(idx.tolist())) and len(idx) == 10 and idx.max() < 50
    assert subsample(7, 10, rng).tolist() == list(range(7))
