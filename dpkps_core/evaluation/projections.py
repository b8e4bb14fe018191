"""t-SNE / UMAP projections of real (PRIVATE, in memory) and synthetic embeddings for overlays.

Nothing here logs or prints document text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

from dpkps_core.dp.validation import check_positive_int
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.metrics import PRIVATE_NOTE

if TYPE_CHECKING:  # heavy imports stay lazy
    import pandas as pd
    import plotly.graph_objects as go


PROJECTIONS = ("tsne", "umap")
# ------------------------------------------------------------------------------------------- projections


def subsample(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of at most ``k`` of ``n`` items drawn without replacement (all of them when n ≤ k)."""
    idx = np.arange(int(n))
    if idx.size > k:
        idx = np.sort(rng.choice(idx, int(k), replace=False))
    return idx


def term_map(embeddings: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """2-D UMAP of term embeddings (Ṽ's DP terms under the public model: post-processing, no private input)."""
    import umap

    emb = np.asarray(embeddings, dtype=np.float32)
    n = emb.shape[0]
    if n < 4:
        raise ParameterError("The UMAP map needs at least four terms in Ṽ.")
    xy = umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), random_state=seed, n_epochs=200).fit_transform(emb)
    return np.asarray(xy)


def projection_frame(
    real_embeddings: np.ndarray, real_labels: Sequence[str], synthetic_embeddings: np.ndarray,
    synthetic_labels: Sequence[str], *, method: str = "tsne", seed: int = 0, max_points_per_source: int = 1000,
) -> "pd.DataFrame":
    """2-D t-SNE or UMAP of real and synthetic embeddings together → DataFrame ``x, y, source, label``
    (``source`` ∈ {"real", "synthetic"}). Real points are private: ``df.attrs["private"] = True``."""
    import pandas as pd

    if method not in PROJECTIONS:
        raise ParameterError(f"Unknown projection {method!r}; choose one of {', '.join(PROJECTIONS)}.")
    max_points_per_source = check_positive_int(max_points_per_source, "points per source")
    rng = np.random.default_rng(seed)
    parts, sources, labels = [], [], []
    for name, emb, labs in (("real", real_embeddings, real_labels), ("synthetic", synthetic_embeddings, synthetic_labels)):
        emb = np.asarray(emb, dtype=np.float32)
        if emb.shape[0] != len(labs):
            raise ParameterError(f"The {name} embeddings and labels differ in length.")
        idx = subsample(emb.shape[0], max_points_per_source, rng)
        parts.append(emb[idx])
        sources += [name] * idx.size
        labels += [str(labs[i]) for i in idx]
    x = np.concatenate(parts) if parts else np.zeros((0, 2))
    n = x.shape[0]
    if n < 4:
        raise ParameterError("A projection needs at least four documents in total.")
    if method == "tsne":
        from sklearn.manifold import TSNE

        xy = TSNE(n_components=2, perplexity=float(min(30.0, max(2.0, (n - 1) / 3))), init="pca",
                  random_state=seed).fit_transform(x)
    else:
        import umap

        xy = umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), random_state=seed).fit_transform(x)
    df = pd.DataFrame({"x": xy[:, 0], "y": xy[:, 1], "source": sources, "label": labels})
    df.attrs.update(private=True, note=PRIVATE_NOTE, method=method)
    return df


def projection_figure(df: "pd.DataFrame", *, title: str | None = None) -> "go.Figure":
    """Scatter of a :func:`projection_frame` (colour = label, symbol = real/synthetic)."""
    import plotly.express as px

    fig = px.scatter(df, x="x", y="y", color="label", symbol="source", opacity=0.7,
                     title=title or f"{df.attrs.get('method', 'projection')}: real vs synthetic (private)")
    fig.update_layout(xaxis_title="", yaxis_title="")
    return fig
