"""Issue 14, core side: a readable forecast chart (§1) and ONE real keyphrase baseline (§7)."""

from __future__ import annotations

import math

import numpy as np

from dpkps_core import evaluation as ev
from dpkps_core.method import pipeline
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.split import split_documents

from eval_toys import BowEmbedder, make_toy_corpus, make_toy_vocabulary, toy_config


def _axis_ok(fig, f) -> None:
    xr, yr = fig.layout.xaxis.range, fig.layout.yaxis.range
    xs = [p[0] for p in f.count_curve] + [max(f.noise_floor, 1.0)]
    ys = [p[1] for p in f.count_curve]
    # every point and line inside the axes, and the axes no wider than ~1 decade beyond them (not 10^21)
    assert 10 ** xr[0] <= min(xs) and max(xs) <= 10 ** xr[1] <= 10 * max(xs)
    assert 10 ** yr[0] <= min(ys) and max(ys) <= 10 ** yr[1] <= 10 * max(max(ys), 10)
    assert not fig.layout.shapes and not fig.layout.annotations  # no vline shapes/annotations on log axes
    for tr in fig.data:  # every trace lies inside the ranges, labels included
        for x in tr.x:
            assert 10 ** xr[0] <= x <= 10 ** xr[1]
        for y in tr.y:
            assert 10 ** yr[0] <= y <= 10 ** yr[1]
    assert fig.layout.yaxis.dtick == 1 and fig.layout.xaxis.dtick == 1  # ticks at decades: 1, 10, 100…


def test_forecast_figure_axes_cover_the_data_and_nothing_far_beyond() -> None:
    corpus, vocab = make_toy_corpus(), make_toy_vocabulary(n_filler=20_000)
    for eps in (0.05, 1.0, 200.0):
        f = ev.forecast(corpus.texts, corpus.labels, vocab, SamplingConfig(eps_voc=eps, eps_kde=2.0, terms_per_doc=5,
                                                                           vocab_size=30, length=5))
        fig = ev.forecast_figure(f)
        _axis_ok(fig, f)
        texts = [t for tr in fig.data if tr.mode == "text" for t in tr.text]
        assert any(t.startswith("noise floor ≈") for t in texts)


def test_real_keyphrase_baseline_is_one_value_everywhere() -> None:
    corpus, vocab = make_toy_corpus(), make_toy_vocabulary()
    cfg = toy_config()
    df = ev.run_sweep(corpus, config=cfg, vocabulary=vocab, embedder=BowEmbedder(), eps_voc_grid=[0.5, 20],
                      eps_kde_grid=[2], methods=["independent"], seeds=1, per_class=5)
    assert df["real_keyphrase_baseline_accuracy"].nunique() == 1  # not a function of ε or of the noisy Ṽ
    sp = split_documents(corpus, test_fraction=cfg.test_fraction, client_fraction=cfg.client_fraction,
                         seed=cfg.split_seed)
    train, test = corpus.subset(sp.train), corpus.subset(sp.test)
    counts = pipeline.term_counts(train.texts, vocab, terms_per_doc=cfg.terms_per_doc)
    direct = ev.real_keyphrase_baseline(train.texts, train.labels, test.texts, test.labels, vocabulary=vocab,
                                        counts=counts, vocab_size=cfg.vocab_size, length=cfg.length)
    assert math.isclose(direct.accuracy, float(df["real_keyphrase_baseline_accuracy"].iloc[0]))
    curves = ev.sweep_figures(df)["curves"]
    labels = [a.text for a in curves.layout.annotations]
    assert f"real keyphrase baseline {direct.accuracy:.3g}" in labels and not any("≈" in t for t in labels)
    assert np.isfinite(direct.accuracy)
