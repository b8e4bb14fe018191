"""Plotly figures of the app (pure functions: data in, ``go.Figure`` out; no Streamlit, no DP logic)."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PRIVATE_SUFFIX = " (private — local only)"


def class_counts_bar(class_counts: Mapping[str, int]) -> go.Figure:
    fig = go.Figure(go.Bar(x=list(class_counts), y=list(class_counts.values()), text=list(class_counts.values()),
                           textposition="inside", insidetextanchor="end", textfont={"color": "white"},
                           marker_color="#4C78A8"))
    fig.update_layout(title="Documents per class" + PRIVATE_SUFFIX, xaxis_title="class", yaxis_title="documents",
                      height=320, margin={"t": 50, "b": 40})
    return fig


def length_histogram(words: Sequence[int], labels: Sequence[str]) -> go.Figure:
    """Words per document, stacked by class in distinct colours; the x-axis ends at the 99th percentile so a few
    very long documents do not squeeze the rest into the left edge (how many lie beyond is said in the title)."""
    w = np.asarray(list(words), dtype=np.float64)
    hi = float(np.percentile(w, 99)) if w.size else 1.0
    hi = max(hi, 1.0)
    beyond = int((w > hi).sum())
    size = max(1.0, math.ceil(hi / 40))
    fig = go.Figure()
    classes = list(dict.fromkeys(labels))
    palette = px.colors.qualitative.D3
    for i, c in enumerate(classes):
        xs = [float(x) for x, y in zip(words, labels) if y == c]
        fig.add_trace(go.Histogram(x=xs, name=str(c), marker_color=palette[i % len(palette)],
                                   xbins={"start": 0, "end": hi + size, "size": size}))
    title = "Document lengths" + PRIVATE_SUFFIX
    if beyond:
        title += f"<br><sup>{beyond:,} longer document(s) beyond {hi:,.0f} words are not shown</sup>"
    fig.update_layout(title=title, barmode="stack", xaxis_title="words per document", yaxis_title="documents",
                      xaxis_range=[0, hi + size], legend_title_text="class", height=320, margin={"t": 60, "b": 40})
    return fig


def noisy_counts_bar(terms: Sequence[str], counts: Sequence[float], *, top: int = 30,
                     noise_floor: float | None = None) -> go.Figure:
    """Top terms of Ṽ by noisy count (DP outputs: safe to show and export)."""
    k = min(top, len(terms))
    t = list(terms[:k])[::-1]
    c = [float(x) for x in list(counts[:k])][::-1]
    fig = go.Figure(go.Bar(x=c, y=t, orientation="h", marker_color="#54A24B",
                           hovertemplate="%{y}: noisy count %{x:.1f}<extra></extra>"))
    if noise_floor is not None:
        fig.add_vline(x=noise_floor, line_dash="dash", line_color="red",
                      annotation_text=f"noise floor ≈ {noise_floor:,.0f}", annotation_position="bottom right")
    fig.update_layout(title=f"Top {k} terms of Ṽ by noisy count (DP output)", xaxis_title="noisy count",
                      height=max(320, 18 * k + 80), margin={"t": 50, "l": 10})
    return fig


def density_bars(classes: Sequence[str], terms: Sequence[str], scores: np.ndarray, *, top: int = 10) -> go.Figure:
    """Per-class bar charts of the highest-density terms (DP density scores, post-processing)."""
    n = len(classes)
    cols = min(3, max(n, 1))
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[str(c) for c in classes],
                        horizontal_spacing=0.18, vertical_spacing=0.12)
    for i, _ in enumerate(classes):
        s = np.asarray(scores[i], dtype=np.float64)
        best = np.argsort(-s, kind="stable")[:top][::-1]
        fig.add_trace(go.Bar(x=[float(s[j]) for j in best], y=[terms[j] for j in best], orientation="h",
                             showlegend=False, marker_color=px.colors.qualitative.Set2[i % 8],
                             hovertemplate="%{y}: %{x:.3g}<extra></extra>"), row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(title=f"Highest-density terms per class (top {top}; DP density scores)",
                      height=max(320, rows * (22 * top + 60)), margin={"t": 70, "l": 10})
    return fig


def umap_density_map(xy: np.ndarray, terms: Sequence[str], scores: np.ndarray, class_name: str) -> go.Figure:
    """Ṽ's embeddings in 2-D (UMAP), coloured by the RANK of one class's DP density (clipped at 0 as in sampling):
    a linear scale lets one large term saturate the map; ranks spread the colours over all terms."""
    s = np.maximum(np.asarray(scores, dtype=np.float64), 0.0)
    n = max(len(s), 1)
    rank = np.empty(len(s), dtype=np.float64)
    rank[np.argsort(s, kind="stable")] = np.arange(len(s)) / max(n - 1, 1) * 100.0  # percentile of the density
    fig = go.Figure(go.Scattergl(
        x=xy[:, 0], y=xy[:, 1], mode="markers", text=list(terms), customdata=s,
        marker={"color": rank, "colorscale": "Viridis", "cmin": 0, "cmax": 100, "size": 7, "opacity": 0.85,
                "colorbar": {"title": "density<br>percentile"}},
        hovertemplate="%{text}: density %{customdata:.3g} (percentile %{marker.color:.0f})<extra></extra>"))
    fig.update_layout(title=f"UMAP of Ṽ's embeddings, coloured by the DP density rank of class “{class_name}”",
                      xaxis_title="", yaxis_title="", height=480, margin={"t": 50})
    return fig


def projection_by(df, *, color: str, method: str) -> go.Figure:
    """Real (private) vs synthetic documents in one 2-D projection, coloured by ``label`` or ``source``.

    By source, the real points keep their classes (one muted colour per class) and the synthetic points are
    drawn on top as large outlined markers in one strong colour, so neither hides the other."""
    name = {"tsne": "t-SNE", "umap": "UMAP"}.get(method, method)
    if color == "label":
        fig = px.scatter(df, x="x", y="y", color="label", symbol="source", opacity=0.75)
        fig.for_each_trace(lambda t: t.update(marker={"size": 13, "line": {"width": 1.5, "color": "black"}})
                           if "synthetic" in t.name else None)
        what = "class"
    else:
        fig = go.Figure()
        real = df[df["source"] == "real"]
        palette = px.colors.qualitative.Pastel
        for i, cls in enumerate(sorted(real["label"].unique())):
            sub = real[real["label"] == cls]
            fig.add_trace(go.Scatter(x=sub["x"], y=sub["y"], mode="markers", name=f"real · {cls}",
                                     marker={"color": palette[i % len(palette)], "size": 7, "opacity": 0.8}))
        syn = df[df["source"] == "synthetic"]
        fig.add_trace(go.Scatter(x=syn["x"], y=syn["y"], mode="markers", name="synthetic", text=syn["label"],
                                 marker={"color": "#D62728", "size": 13, "symbol": "diamond",
                                         "line": {"width": 1.5, "color": "black"}},
                                 hovertemplate="synthetic · %{text}<extra></extra>"))
        what = "source (real points by class)"
    fig.update_layout(title=f"{name}: real vs synthetic, coloured by {what}" + PRIVATE_SUFFIX,
                      xaxis_title="", yaxis_title="", height=460, margin={"t": 50})
    return fig


def no_llm_bars(rows: Sequence[Mapping[str, float]]) -> go.Figure:
    """No-LLM accuracy of each check run this session, against the real keyphrase baseline and chance."""
    names = [f"#{i + 1} {r['method']}" for i, r in enumerate(rows)]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=[r["no_llm_accuracy"] for r in rows], name="DP sequences",
                         marker_color="#4C78A8", text=[f"{r['no_llm_accuracy']:.3g}" for r in rows],
                         textposition="inside", insidetextanchor="start", textfont={"color": "white"}))
    if rows:
        fig.add_hline(y=rows[-1]["real_keyphrase_baseline"], line_dash="dash", annotation_position="right",
                      annotation_text=f"real keyphrase baseline {rows[-1]['real_keyphrase_baseline']:.3g}")
        fig.add_hline(y=rows[-1]["chance"], line_dash="dot", annotation_position="right",
                      annotation_text=f"chance {rows[-1]['chance']:.2f}")
    fig.update_layout(title="No-LLM check: accuracy on held-out documents" + PRIVATE_SUFFIX, yaxis_range=[0, 1.05],
                      yaxis_title="accuracy", height=340, margin={"t": 50, "r": 190})
    return fig


def metrics_bars(metrics: Mapping[str, tuple[float, float]], chance: float | None) -> go.Figure:
    """Mean ± sd accuracy per evaluation metric."""
    names = list(metrics)
    fig = go.Figure(go.Bar(x=names, y=[m for m, _ in metrics.values()],
                           error_y={"type": "data", "array": [s for _, s in metrics.values()]},
                           text=[f"{m:.2f}" for m, _ in metrics.values()], textposition="inside",
                           insidetextanchor="start", marker_color="#72B7B2"))
    if chance is not None:
        fig.add_hline(y=chance, line_dash="dot", annotation_position="right", annotation_text=f"chance {chance:.2f}")
    fig.update_layout(title="Downstream accuracy on held-out real documents" + PRIVATE_SUFFIX, yaxis_range=[0, 1.1],
                      yaxis_title="accuracy", height=360, margin={"t": 50, "r": 110})
    return fig


def budget_split_bar(eps_voc: float, eps_kde: float, spent: float, cap: float | None, *,
                     eps_forecast: float = 0.0) -> go.Figure:
    """The planned ε split (the DP forecast's ε_forecast first, when planned) next to what the ledger already holds
    (and the cap)."""
    fig = go.Figure()
    if eps_forecast > 0:
        fig.add_trace(go.Bar(y=["planned"], x=[eps_forecast], name="ε_forecast (DP forecast)", orientation="h",
                             marker_color="#54A24B"))
    fig.add_trace(go.Bar(y=["planned"], x=[eps_voc], name="ε_voc (vocabulary)", orientation="h",
                         marker_color="#4C78A8"))
    fig.add_trace(go.Bar(y=["planned"], x=[eps_kde], name="ε_kde (densities)", orientation="h",
                         marker_color="#F58518"))
    fig.add_trace(go.Bar(y=["already spent"], x=[spent], name="ledger", orientation="h", marker_color="#9D755D"))
    if cap:
        fig.add_vline(x=cap, line_dash="dash", line_color="red", annotation_text=f"cap {cap:g}")
    fig.update_layout(barmode="stack", height=200, margin={"t": 30, "b": 30}, xaxis_title="ε",
                      legend={"orientation": "h", "y": -0.5})
    return fig
