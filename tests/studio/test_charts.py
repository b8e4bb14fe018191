"""Issue 14 §6, §8, §9 without a browser: the figures and tables the pages show (pure functions, fast)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from studio import charts, review


def _bars(fig):
    return [t for t in fig.data if t.type == "bar"]


def test_labels_do_not_sit_on_top_of_bars() -> None:
    figs = [charts.class_counts_bar({"a": 3, "b": 500}),
            charts.metrics_bars({"x": (0.5, 0.1), "y": (0.9, 0.0)}, 0.3),
            charts.no_llm_bars([{"method": "independent", "no_llm_accuracy": 0.6, "real_keyphrase_baseline": 0.9,
                                 "chance": 0.3}])]
    for fig in figs:
        assert all(b.textposition == "inside" for b in _bars(fig))
    for fig in figs[1:]:  # the reference lines' labels sit in the right margin, beside the plot, not over a bar
        assert all(a.x == 1 and a.xanchor == "left" for a in fig.layout.annotations)


def test_length_histogram_axis_follows_the_data() -> None:
    rng = np.random.default_rng(0)
    words = list(rng.integers(50, 900, 500)) + [4400]
    labels = [["business", "sport", "tech"][i % 3] for i in range(len(words))]
    fig = charts.length_histogram(words, labels)
    lo, hi = fig.layout.xaxis.range
    assert lo == 0 and 880 <= hi <= 1000                          # not stretched to 4,400
    assert "over" in fig.layout.title.text and "4,400 words) are not shown" in fig.layout.title.text
    one = charts.length_histogram(list(range(1, 35)) + [35], ["a"] * 35).layout.title.text
    assert "beyond" not in one and "up to" not in one   # walk 3: "up to 35 words beyond 34 words"
    if "not shown" in one:
        assert "1 document over" in one and "(35 words) is not shown" in one
    colours = {t.marker.color for t in fig.data}
    assert len(colours) == 3 and fig.layout.barmode == "stack"    # distinct hues, no overlaid similar reds


def test_umap_colour_is_a_rank_one_term_cannot_saturate() -> None:
    scores = np.array([0.0, 0.01, 0.02, 50.0])
    fig = charts.umap_density_map(np.zeros((4, 2)), list("abcd"), scores, "tech")
    colours = list(fig.data[0].marker.color)
    assert colours == pytest.approx([0, 100 / 3, 200 / 3, 100])
    assert list(fig.data[0].customdata) == pytest.approx(list(scores))   # the density itself is in the hover


def test_projection_by_source_keeps_the_real_classes_visible() -> None:
    df = pd.DataFrame({"x": np.arange(8.0), "y": np.arange(8.0), "label": list("abcabcab"),
                       "source": ["real"] * 6 + ["synthetic"] * 2})
    fig = charts.projection_by(df, color="source", method="tsne")
    names = [t.name for t in fig.data]
    assert names == ["real · a", "real · b", "real · c", "synthetic"]
    assert len({t.marker.color for t in fig.data}) == 4


def test_review_tables_are_human_rounded_and_warn_on_small_samples() -> None:
    rows = [{"method": "dpkps", "label": "DP-KPS", "epsilon": 10.0, "delta": 0.0, "documents": 5,
             "llm_calls": 5, "wall_seconds": 123.456, "accuracy": 0.5305164319248826, "accuracy_sd": 0.01234,
             "accuracy_low": 0.41, "accuracy_high": 0.6455, "macro_f1": 0.4999999, "notes": "a long note"}]
    df, notes = review.compare_table(rows, n_classes=5)
    assert df["95 % interval"][0] == "0.410–0.645"   # over the test documents (evaluation/metrics.py)
    assert review.compare_table([{**rows[0], "accuracy_low": None}], n_classes=5)[0]["95 % interval"][0] == ""
    assert df["Accuracy"][0] == 0.531 and df["Macro-F1"][0] == 0.5 and df["Minutes"][0] == 2.06
    assert df["Training documents"][0] == 5 and df["Enough to judge?"][0].startswith("⚠ too few")
    assert not any("_" in c for c in df.columns) and len(df.columns) <= 11 and notes == ["**DP-KPS** (ε = 10.0): a long note"]
    assert review.judge_note(50, 5) == ""


def test_compare_prompt_count_follows_the_selected_methods() -> None:
    one = review.compare_plan(["dpkps"], n_classes=5, per_class=2, max_tokens=48, epochs=10, gpu=False)
    assert list(one["Method"]) == ["DP-KPS"] and list(one["LLM prompts"]) == [10]
    two = review.compare_plan(["dpkps", "augpe"], n_classes=5, per_class=2, max_tokens=48, epochs=10, gpu=False)
    assert list(two["LLM prompts"]) == [10, 100] and all(t.startswith("≈") for t in two["Rough time"])


def test_compare_rows_are_kept_across_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from app_helpers import use_state

    state = use_state(monkeypatch)

    class Result:
        def __init__(self, rows):
            self.rows, self.info = rows, {"per_class": 2}

        def table(self):
            return self.rows

    class Job:
        def __init__(self, rows):
            self.result = Result(rows)

    review.keep_compare_rows(state, Job([{"method": "dpkps", "epsilon": 10.0, "delta": 0.0, "accuracy": 0.5}]))
    rows = review.keep_compare_rows(state, Job([{"method": "augpe", "epsilon": 10.0, "delta": 1e-6, "accuracy": 0.4}]))
    assert [r["method"] for r in rows] == ["dpkps", "augpe"]      # one method at a time: the earlier row stays
    again = Job([{"method": "dpkps", "epsilon": 10.0, "delta": 0.0, "accuracy": 0.6}])
    rows = review.keep_compare_rows(state, again)
    rows = review.keep_compare_rows(state, again)                        # the same job merged once
    assert [(r["method"], r["accuracy"]) for r in rows] == [("augpe", 0.4), ("dpkps", 0.6)]
