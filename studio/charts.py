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
                           textposition="outside", marker_color="#4C78A8"))
    fig.update_layout(title="Documents per class" + PRIVATE_SUFFIX, xaxis_title="class", yaxis_title="documents",
                      height=320, margin={"t": 50, "b": 40})
    return fig


def length_histogram(words: Sequence[int], labels: Sequence[str]) -> go.Figure:
    fig = px.histogram(x=list(words), color=list(labels), nbins=40, barmode="overlay", opacity=0.6,
                       labels={"x": "words per document", "color": "class"})
    fig.update_layout(title="Document lengths" + PRIVATE_SUFFIX, yaxis_title="documents", height=320,
                      margin={"t": 50, "b": 40})
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
    """Ṽ's embeddings in 2-D (UMAP), coloured by one class's DP density (clipped at 0 as in sampling)."""
    s = np.maximum(np.asarray(scores, dtype=np.float64), 0.0)
    fig = go.Figure(go.Scattergl(
        x=xy[:, 0], y=xy[:, 1], mode="markers", text=list(terms),
        marker={"color": s, "colorscale": "Viridis", "size": 7, "colorbar": {"title": "density"}, "opacity": 0.85},
        hovertemplate="%{text}: %{marker.color:.3g}<extra></extra>"))
    fig.update_layout(title=f"UMAP of Ṽ's embeddings, coloured by the DP density of class “{class_name}”",
                      xaxis_title="", yaxis_title="", height=480, margin={"t": 50})
    return fig


def projection_by(df, *, color: str, method: str) -> go.Figure:
    """Real (private) vs synthetic documents in one 2-D projection, coloured by ``label`` or ``source``."""
    symbol = "source" if color == "label" else "label"
    fig = px.scatter(df, x="x", y="y", color=color, symbol=symbol, opacity=0.75,
                     color_discrete_map={"real": "#9D755D", "synthetic": "#E45756"} if color == "source" else None)
    what = "class" if color == "label" else "source"
    fig.for_each_trace(lambda t: t.update(marker={"size": 13, "line": {"width": 1.5, "color": "black"}})
                       if "synthetic" in t.name else None)
    name = {"tsne": "t-SNE", "umap": "UMAP"}.get(method, method)
    fig.update_layout(title=f"{name}: real vs synthetic, coloured by {what}" + PRIVATE_SUFFIX,
                      xaxis_title="", yaxis_title="", height=460, margin={"t": 50})
    return fig


def no_llm_bars(rows: Sequence[Mapping[str, float]]) -> go.Figure:
    """No-LLM accuracy of each check run this session, against the real keyphrase baseline and chance."""
    names = [f"#{i + 1} {r['method']}" for i, r in enumerate(rows)]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=[r["no_llm_accuracy"] for r in rows], name="DP sequences",
                         marker_color="#4C78A8", text=[f"{r['no_llm_accuracy']:.2f}" for r in rows],
                         textposition="outside"))
    if rows:
        fig.add_hline(y=rows[-1]["real_keyphrase_baseline"], line_dash="dash",
                      annotation_text=f"real keyphrase baseline {rows[-1]['real_keyphrase_baseline']:.2f}")
        fig.add_hline(y=rows[-1]["chance"], line_dash="dot", annotation_text=f"chance {rows[-1]['chance']:.2f}")
    fig.update_layout(title="No-LLM check: accuracy on held-out documents" + PRIVATE_SUFFIX, yaxis_range=[0, 1.05],
                      yaxis_title="accuracy", height=340, margin={"t": 50})
    return fig


def metrics_bars(metrics: Mapping[str, tuple[float, float]], chance: float | None) -> go.Figure:
    """Mean ± sd accuracy per evaluation metric."""
    names = list(metrics)
    fig = go.Figure(go.Bar(x=names, y=[m for m, _ in metrics.values()],
                           error_y={"type": "data", "array": [s for _, s in metrics.values()]},
                           text=[f"{m:.2f}" for m, _ in metrics.values()], textposition="outside",
                           marker_color="#72B7B2"))
    if chance is not None:
        fig.add_hline(y=chance, line_dash="dot", annotation_text=f"chance {chance:.2f}")
    fig.update_layout(title="Downstream accuracy on held-out real documents" + PRIVATE_SUFFIX, yaxis_range=[0, 1.1],
                      yaxis_title="accuracy", height=360, margin={"t": 50})
    return fig


def budget_split_bar(eps_voc: float, eps_kde: float, spent: float, cap: float | None) -> go.Figure:
    """The planned ε split next to what the ledger already holds (and the cap)."""
    fig = go.Figure()
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
