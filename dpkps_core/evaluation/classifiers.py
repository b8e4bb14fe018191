"""Downstream classifiers on sentence embeddings (docs/DESIGN.md §5): logistic regression or a small torch head, Deep CORAL ([DP-KPS] Appendix C.1.2), and the same classifier on as many real documents.

Nothing here logs or prints document text."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from dpkps_core.dp.validation import check_positive_float, check_positive_int
from dpkps_core.embeddings import Embedder, embed_texts
from dpkps_core.errors import ParameterError
from dpkps_core.progress import Progress
from dpkps_core.evaluation.metrics import MetricSummary, classification_scores

if TYPE_CHECKING:  # heavy imports stay lazy
    import torch


CLASSIFIERS = ("logreg", "mlp")
# ------------------------------------------------------------------------------ embedding classifiers

def coral_loss(source: "torch.Tensor", target: "torch.Tensor") -> "torch.Tensor":
    """Deep CORAL loss ‖C_S − C_T‖²_F / (4d²) ([DP-KPS] Appendix C.1.2; Sun & Saenko 2016, eq. 1).

    ``source`` (n_S, d) and ``target`` (n_T, d) are feature batches; C is the feature covariance with the
    (n − 1) denominator, as in Sun & Saenko (2016): C = (XᵀX − (1ᵀX)ᵀ(1ᵀX)/n) / (n − 1).
    """
    import torch

    if source.ndim != 2 or target.ndim != 2 or source.shape[1] != target.shape[1]:
        raise ParameterError("CORAL needs two 2-D feature batches with the same number of columns.")
    if source.shape[0] < 2 or target.shape[0] < 2:
        raise ParameterError("CORAL needs at least two rows in each batch to estimate a covariance.")
    d = source.shape[1]
    c_s = torch.cov(source.T, correction=1)
    c_t = torch.cov(target.T, correction=1)
    return ((c_s - c_t) ** 2).sum() / (4.0 * d * d)


class TorchHead:
    """A linear (``hidden=None``) or one-hidden-layer MLP classifier on embeddings, trained with Adam on
    cross-entropy, optionally + λ·CORAL between the logits of each synthetic batch and an equally sized batch of
    unlabelled client embeddings (Deep CORAL applies the loss to the last layer's activations)."""

    def __init__(self, *, hidden: int | None = 256, epochs: int = 30, lr: float = 1e-3, weight_decay: float = 1e-4,
                 batch_size: int = 64, seed: int = 0, coral_weight: float = 0.0, dropout: float = 0.1) -> None:
        self.hidden = None if hidden is None else check_positive_int(hidden, "hidden units")
        self.epochs = check_positive_int(epochs, "epochs", maximum=1000)
        self.lr = check_positive_float(lr, "learning rate")
        self.weight_decay = check_positive_float(weight_decay, "weight decay", allow_zero=True)
        self.batch_size = check_positive_int(batch_size, "batch size", minimum=2)
        self.seed = int(seed)
        self.coral_weight = check_positive_float(coral_weight, "CORAL weight λ", allow_zero=True)
        self.dropout = float(dropout)
        self.classes_: tuple[str, ...] = ()
        self._model: Any = None

    def fit(self, x: np.ndarray, y: Sequence[str], *, client: np.ndarray | None = None) -> "TorchHead":
        import torch
        from torch import nn

        x = np.asarray(x, dtype=np.float32)
        self.classes_ = tuple(sorted(set(map(str, y))))
        index = {c: i for i, c in enumerate(self.classes_)}
        y_idx = np.array([index[str(v)] for v in y], dtype=np.int64)
        if self.coral_weight > 0 and (client is None or len(client) < 2):
            raise ParameterError("Deep CORAL needs at least two unlabelled client documents.")
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a tiny model: one thread is fastest and leaves the cores to the rest
        try:
            return self._fit(x, y_idx, client)
        finally:
            torch.set_num_threads(threads)

    def _fit(self, x: np.ndarray, y_idx: np.ndarray, client: np.ndarray | None) -> "TorchHead":
        import torch
        from torch import nn

        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        dim, k = x.shape[1], len(self.classes_)
        if self.hidden is None:
            model = nn.Linear(dim, k)
        else:
            model = nn.Sequential(nn.Linear(dim, self.hidden), nn.ReLU(), nn.Dropout(self.dropout), nn.Linear(self.hidden, k))
        opt = torch.optim.Adam(model.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        xt, yt = torch.from_numpy(x), torch.from_numpy(y_idx)
        ct = torch.from_numpy(np.asarray(client, dtype=np.float32)) if client is not None and len(client) else None
        ce = nn.CrossEntropyLoss()
        model.train()
        for _ in range(self.epochs):
            order = rng.permutation(len(x))
            for start in range(0, len(x), self.batch_size):
                idx = order[start:start + self.batch_size]
                logits = model(xt[idx])
                loss = ce(logits, yt[idx])
                if self.coral_weight > 0 and ct is not None and len(idx) >= 2:
                    cidx = rng.choice(len(ct), size=len(idx), replace=len(ct) < len(idx))
                    loss = loss + self.coral_weight * coral_loss(logits, model(ct[cidx]))
                opt.zero_grad()
                loss.backward()
                opt.step()
        model.eval()
        self._model = model
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        import torch

        if self._model is None:
            raise ParameterError("Fit the classifier before predicting.")
        with torch.no_grad():
            logits = self._model(torch.from_numpy(np.asarray(x, dtype=np.float32)))
        return np.asarray(self.classes_, dtype=object)[logits.argmax(dim=1).numpy()]


def make_classifier(*, classifier: str = "logreg", seed: int = 0, coral_weight: float = 0.0, torch_head: bool = False,
                    epochs: int | None = None) -> Any:
    """An unfitted classifier with ``fit(x, y)`` / ``predict(x)``.

    ``logreg``: scikit-learn logistic regression (or, with ``torch_head`` / CORAL, the equivalent torch linear
    head); ``mlp``: a one-hidden-layer torch MLP (256 units, a few epochs)."""
    if classifier not in CLASSIFIERS:
        raise ParameterError(f"Unknown classifier {classifier!r}; choose one of {', '.join(CLASSIFIERS)}.")
    if classifier == "logreg" and not torch_head and coral_weight == 0:
        from sklearn.linear_model import LogisticRegression

        return LogisticRegression(max_iter=2000, C=1.0, random_state=seed)
    if classifier == "logreg":
        return TorchHead(hidden=None, epochs=epochs or 60, lr=1e-2, seed=seed, coral_weight=coral_weight)
    return TorchHead(hidden=256, epochs=epochs or 30, lr=1e-3, seed=seed, coral_weight=coral_weight)


def embedding_accuracy(
    train_embeddings: np.ndarray, train_labels: Sequence[str], test_embeddings: np.ndarray, test_labels: Sequence[str],
    *, classifier: str = "logreg", seeds: Sequence[int] = (0, 1, 2), name: str = "accuracy",
    client_embeddings: np.ndarray | None = None, coral_weight: float = 0.0, torch_head: bool = False, note: str = "",
) -> MetricSummary:
    """Train on (embedding, label) pairs once per seed and score on the test embeddings (docs/DESIGN.md §5)."""
    if len(train_labels) == 0:
        raise ParameterError("There are no training documents to evaluate.")
    if len(set(train_labels)) < 2:
        raise ParameterError("Training a classifier needs documents of at least two classes.")
    classes = sorted(set(map(str, test_labels)))
    scores = []
    for seed in seeds:
        model = make_classifier(classifier=classifier, seed=seed, coral_weight=coral_weight, torch_head=torch_head)
        if isinstance(model, TorchHead):
            model.fit(train_embeddings, list(train_labels), client=client_embeddings)
        else:
            model.fit(train_embeddings, list(train_labels))
        scores.append(classification_scores(test_labels, model.predict(test_embeddings), classes=classes))
    return MetricSummary(name, tuple(int(s) for s in seeds), tuple(scores), len(train_labels), note)


def matched_real_sample(
    train_labels: Sequence[str], per_class: Mapping[str, int], *, seed: int
) -> list[int]:
    """Indices (into the training part) of a random real sample with ``per_class[c]`` documents of class c
    (capped at what the class has)."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(train_labels)
    out: list[int] = []
    for c, k in sorted(per_class.items()):
        idx = np.flatnonzero(labels == c)
        take = min(int(k), idx.size)
        if take:
            out.extend(rng.choice(idx, size=take, replace=False).tolist())
    return sorted(out)


def real_baseline_accuracy(
    train_texts: Sequence[str], train_labels: Sequence[str], test_embeddings: np.ndarray, test_labels: Sequence[str],
    *, per_class: Mapping[str, int], embedder: Embedder, classifier: str = "logreg", seeds: Sequence[int] = (0, 1, 2),
    progress: Progress | None = None,
) -> MetricSummary:
    """The same classifier trained on the same number of REAL training documents per class, re-sampled per seed.

    Only the union of the sampled documents is embedded (in memory; never cached)."""
    samples = {s: matched_real_sample(train_labels, per_class, seed=s) for s in seeds}
    union = sorted(set().union(*samples.values()))
    if not union:
        raise ParameterError("There are no real training documents to sample for the baseline.")
    emb = embed_texts([train_texts[i] for i in union], embedder, progress=progress)
    pos = {i: k for k, i in enumerate(union)}
    classes = sorted(set(map(str, test_labels)))
    scores = []
    for s in seeds:
        rows = [pos[i] for i in samples[s]]
        model = make_classifier(classifier=classifier, seed=s)
        model.fit(emb[rows], [train_labels[i] for i in samples[s]])
        scores.append(classification_scores(test_labels, model.predict(test_embeddings), classes=classes))
    capped = any(sum(1 for y in train_labels if y == c) < k for c, k in per_class.items())
    note = "real training documents re-sampled per seed, per-class counts matched to the synthetic set"
    if capped:
        note += " (capped where a class has fewer real documents)"
    return MetricSummary("real_baseline_accuracy", tuple(int(s) for s in seeds), tuple(scores),
                         len(samples[seeds[0]]), note)
