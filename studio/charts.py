"""Plotly figures of the app (pure functions: data in, ``go.Figure`` out; no Streamlit, no DP logic)."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np
import plotly.express as px
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PRIVATE_SUFFIX = " (private — local only)"

#: Title line width (characters) before it wraps: a half-width column of the wide layout holds about this much.
TITLE_WIDTH = 58
#: Pixels kept free above a chart's title for Plotly's toolbar (the modebar sits in the top right corner).
TOOLBAR_PX = 30


def _wrap(text: str, width: int = TITLE_WIDTH) -> str:
    """Break a one-line title into lines of at most ``width`` characters at spaces (Plotly never wraps titles:
    a long one runs off the chart, under the toolbar)."""
    lines: list[str] = []
    for part in text.split("<br>"):
        if part.startswith("<sup>") or len(part) <= width:
            lines.append(part)
            continue
        line = ""
        for word in part.split(" "):
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "<br>".join(lines)


def tidy(fig: go.Figure, *, width: int = TITLE_WIDTH) -> go.Figure:
    """Make a figure's title readable in the app: wrapped to ``width`` characters, placed below the toolbar
    (padding above it) and with a top margin that holds every title line, so neither the toolbar nor the chart's
    edge cuts it. Works on any figure (the core's figures included); returns ``fig``."""
    title = fig.layout.title.text
    if not title:
        return fig
    text = _wrap(str(title), width)
    lines = text.count("<br>") + 1
    top = TOOLBAR_PX + 24 * lines + 12
    margin_t = fig.layout.margin.t
    fig.update_layout(title={"text": text, "x": 0.0, "xanchor": "left", "xref": "container", "y": 1.0,
                             "yref": "container", "yanchor": "top", "pad": {"t": TOOLBAR_PX, "l": 10}},
                      margin={"t": max(int(margin_t or 0), top)})
    if fig.layout.height:
        fig.update_layout(height=int(fig.layout.height) + max(0, top - int(margin_t or 0)))
    return fig


def class_colours(classes: Sequence[str]) -> dict[str, str]:
    """One colour per class, the same in every chart of a corpus, with a distinct hue for each: classes in sorted
    order take D3's ten colours (its grey, which has no hue, swapped for gold) or, beyond ten, hues evenly spaced
    around the colour wheel with alternating lightness. Pass the union of every class a page shows (declared and
    observed) so that the mapping is the same on every page."""
    names = sorted({str(c) for c in classes})
    n = len(names)
    if n <= len(HUED_D3):
        palette = list(HUED_D3)
    else:
        palette = [f"hsl({round(360 * i / n)}, 70%, {42 if i % 2 else 58}%)" for i in range(n)]
    return {c: palette[i] for i, c in enumerate(names)}


#: D3's categorical colours with its grey (#7F7F7F, no hue) replaced by gold.
HUED_D3 = tuple("#FFD700" if c.upper() == "#7F7F7F" else c for c in px.colors.qualitative.D3)


def _colours(classes: Sequence[str], colours: Mapping[str, str] | None) -> dict[str, str]:
    """``colours`` completed for any class it lacks (a chart never fails over a missing colour)."""
    out = dict(colours or {})
    missing = [str(c) for c in classes if str(c) not in out]
    if missing:
        extra = class_colours(list(out) + missing) if not out else class_colours(missing)
        for c in missing:
            out[c] = extra[c]
    return out


def class_counts_bar(class_counts: Mapping[str, int], *, colours: Mapping[str, str] | None = None) -> go.Figure:
    """Documents per class, each bar in its class's colour (:func:`class_colours`)."""
    col = _colours(list(class_counts), colours)
    fig = go.Figure(go.Bar(x=list(class_counts), y=list(class_counts.values()), text=list(class_counts.values()),
                           textposition="inside", insidetextanchor="end", textfont={"color": "white"},
                           marker_color=[col[str(c)] for c in class_counts]))
    fig.update_layout(title="Documents per class" + PRIVATE_SUFFIX, xaxis_title="class", yaxis_title="documents",
                      height=320, margin={"t": 50, "b": 40})
    return tidy(fig)


def length_histogram(words: Sequence[int], labels: Sequence[str], *,
                     colours: Mapping[str, str] | None = None) -> go.Figure:
    """Words per document, stacked by class in distinct colours; the x-axis ends at the 99th percentile so a few
    very long documents do not squeeze the rest into the left edge (how many lie beyond is said in the title)."""
    w = np.asarray(list(words), dtype=np.float64)
    hi = 1.0
    if w.size:
        # the 99th percentile, but never past the longest document inside Tukey's far fence (Q3 + 3·IQR): in a
        # small corpus one 360,000-word row would otherwise pull the percentile (interpolated) far out with it
        q1, q3 = np.percentile(w, [25, 75])
        fence = q3 + 3.0 * max(q3 - q1, 1.0)
        inside = w[w <= fence]
        hi = min(float(np.percentile(w, 99)), float(inside.max()) if inside.size else float(w.max()))
    hi = max(hi, 1.0)
    beyond = int((w > hi).sum())
    size = max(1.0, math.ceil(hi / 40))
    fig = go.Figure()
    classes = sorted(dict.fromkeys(map(str, labels)))
    col = _colours(classes, colours)
    lab = np.asarray([str(y) for y in labels], dtype=object)
    for c in classes:
        xs = w[lab == c]
        fig.add_trace(go.Histogram(x=xs, name=c, marker_color=col[c],
                                   xbins={"start": 0, "end": hi + size, "size": size}))
    title = "Document lengths" + PRIVATE_SUFFIX
    if beyond:
        title += (f"<br><sup>{beyond:,} document{'s' if beyond != 1 else ''} over {hi:,.0f} words "
                  f"({'the longest ' if beyond != 1 else ''}{w.max():,.0f} words) {'are' if beyond != 1 else 'is'} "
                  "not shown</sup>")
    fig.update_layout(title=title, barmode="stack", xaxis_title="words per document", yaxis_title="documents",
                      xaxis_range=[0, hi + size], legend_title_text="class", height=320, margin={"t": 60, "b": 40})
    return tidy(fig)


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
    return tidy(fig)


def density_bars(classes: Sequence[str], terms: Sequence[str], scores: np.ndarray, *, top: int = 10,
                 colours: Mapping[str, str] | None = None) -> go.Figure:
    """Per-class bar charts of the highest-density terms (DP density scores, post-processing), each panel in its
    class's colour (:func:`class_colours`)."""
    col = _colours(classes, colours)
    n = len(classes)
    cols = min(3, max(n, 1))
    rows = math.ceil(n / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[str(c) for c in classes],
                        horizontal_spacing=0.18, vertical_spacing=0.12)
    for i, cls in enumerate(classes):
        s = np.asarray(scores[i], dtype=np.float64)
        best = np.argsort(-s, kind="stable")[:top][::-1]
        fig.add_trace(go.Bar(x=[float(s[j]) for j in best], y=[terms[j] for j in best], orientation="h",
                             showlegend=False, marker_color=col[str(cls)],
                             hovertemplate="%{y}: %{x:.3g}<extra></extra>"), row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(title=f"Highest-density terms per class (top {top}; DP density scores)",
                      height=max(320, rows * (22 * top + 60)), margin={"t": 70, "l": 10})
    return tidy(fig, width=90)


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
    return tidy(fig, width=90)


def projection_by(df, *, color: str, method: str, colours: Mapping[str, str] | None = None) -> go.Figure:
    """Real (private) vs synthetic documents in one 2-D projection, coloured by ``label`` or ``source``.

    Every class keeps its one colour (:func:`class_colours`) in both panels. By label: real points small, synthetic
    points large and outlined, both in their class's colour. By source: the real points in their class's colour,
    faded, and the synthetic points on top as large black diamonds, so neither hides the other."""
    name = {"tsne": "t-SNE", "umap": "UMAP"}.get(method, method)
    col = _colours(sorted({str(v) for v in df["label"]}), colours)
    fig = go.Figure()
    real = df[df["source"] == "real"]
    syn = df[df["source"] == "synthetic"]
    if color == "label":
        for cls in sorted({str(v) for v in df["label"]}):
            r = real[real["label"].astype(str) == cls]
            if len(r):
                fig.add_trace(go.Scatter(x=r["x"], y=r["y"], mode="markers", name=f"real · {cls}",
                                         legendgroup=cls, marker={"color": col[cls], "size": 7, "opacity": 0.6}))
            y = syn[syn["label"].astype(str) == cls]
            if len(y):
                fig.add_trace(go.Scatter(x=y["x"], y=y["y"], mode="markers", name=f"synthetic · {cls}",
                                         legendgroup=cls,
                                         marker={"color": col[cls], "size": 13, "symbol": "diamond",
                                                 "line": {"width": 1.5, "color": "black"}}))
        what = "class"
    else:
        for cls in sorted({str(v) for v in real["label"]}):
            sub = real[real["label"].astype(str) == cls]
            fig.add_trace(go.Scatter(x=sub["x"], y=sub["y"], mode="markers", name=f"real · {cls}",
                                     marker={"color": col[cls], "size": 7, "opacity": 0.45}))
        fig.add_trace(go.Scatter(x=syn["x"], y=syn["y"], mode="markers", name="synthetic", text=syn["label"],
                                 marker={"color": "#111111", "size": 12, "symbol": "diamond",
                                         "line": {"width": 1.5, "color": "white"}},
                                 hovertemplate="synthetic · %{text}<extra></extra>"))
        what = "source"
    fig.update_layout(title=f"{name}: real vs synthetic, by {what}<br><sup>{PRIVATE_SUFFIX.strip(' ()')}</sup>",
                      xaxis_title="", yaxis_title="", height=460, margin={"t": 50},
                      legend={"font": {"size": 11}})
    return tidy(fig, width=44)


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
    return tidy(fig, width=90)


def metrics_bars(metrics: Mapping[str, tuple[float, float | None]], chance: float | None) -> go.Figure:
    """Mean ± sd accuracy per evaluation metric (no error bar where the sd is None: one seed has no spread)."""
    names = list(metrics)
    sds = [s for _, s in metrics.values()]
    fig = go.Figure(go.Bar(x=names, y=[m for m, _ in metrics.values()],
                           error_y={"type": "data", "array": [0.0 if s is None else s for s in sds],
                                    "visible": any(s is not None for s in sds)},
                           text=[f"{m:.2f}" for m, _ in metrics.values()], textposition="inside",
                           insidetextanchor="start", marker_color="#72B7B2"))
    if chance is not None:
        fig.add_hline(y=chance, line_dash="dot", annotation_position="right", annotation_text=f"chance {chance:.2f}")
    fig.update_layout(title="Downstream accuracy on held-out real documents" + PRIVATE_SUFFIX, yaxis_range=[0, 1.1],
                      yaxis_title="accuracy", height=360, margin={"t": 50, "r": 110})
    return tidy(fig, width=90)


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
