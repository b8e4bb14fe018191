"""The EXACT "Will this work?" preview (docs/DESIGN.md §6) from the training part's TRUE counts: private, local — NOT
covered by ε (a choice made from it is a use of the data no ledger entry accounts for). Only behind an explicit
``exact=True`` (:func:`~dpkps_core.evaluation.forecast_dp.forecast_preview`, the CLI's ``--exact``) or the app's
badged switch; the default is the DP forecast (docs/PRIVACY.md "Previews that steer choices").

Nothing here logs or prints document text."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from dpkps_core.corpus.stream import default_chunk_rows
from dpkps_core.method import pipeline
from dpkps_core.method.config import LIMITS, SamplingConfig
from dpkps_core.method.density_plan import default_bandwidth
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.rff import exact_gaussian_kernel
from dpkps_core.embeddings import Embedder
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.forecast_outlook import (Forecast, assemble_forecast, density_outlook, forecast_epsilons,
                                                    rff_members, vocabulary_outlook)
from dpkps_core.method.matching import TermMatcher
from dpkps_core.method.vocabulary import PublicVocabulary


def _count_curve(counts: np.ndarray, max_points: int = 200) -> list[tuple[int, int]]:
    """(c, number of terms with true count ≥ c) at the distinct positive counts (thinned to ≤ max_points)."""
    pos = np.sort(np.asarray(counts)[np.asarray(counts) > 0])
    if pos.size == 0:
        return []
    values = np.unique(pos)
    if values.size > max_points:
        values = np.unique(np.geomspace(values[0], values[-1], max_points).round().astype(np.int64))
    ge = pos.size - np.searchsorted(pos, values, side="left")
    return [(int(v), int(g)) for v, g in zip(values, ge)]


def _class_histograms(matcher: TermMatcher, texts: Sequence[str], labels: Sequence[str], classes: list[str],
                      size: int, *, length: int) -> tuple[np.ndarray, dict[str, int]]:
    """The (C, |stand-in|) keyphrase histograms of the documents and each class's number of documents with a
    keyphrase, read :func:`~dpkps_core.corpus.stream.default_chunk_rows` documents at a time (issue 31 §4: memory is
    one chunk's keyphrases, whatever the corpus size; one chunk gives exactly the unchunked sums)."""
    rows = default_chunk_rows()
    hist = np.zeros((len(classes), size))
    contributing = dict.fromkeys(classes, 0)
    for start in range(0, len(texts), rows):
        part, part_labels = texts[start:start + rows], labels[start:start + rows]
        kp = matcher.occurrences(part, length, max_chars=LIMITS["max_chars_per_doc"])
        hist += class_keyphrase_histograms(kp, part_labels, classes, size, max_per_doc=length)
        for k_, y in zip(kp, part_labels):
            if k_ and y in contributing:
                contributing[y] += 1
    return hist, contributing


def _exact_density(config: SamplingConfig, texts: Sequence[str], labels: Sequence[str], classes: list[str],
                   stand_in: list[str], *, eps_kde: float, embedder: Embedder | None
                   ) -> tuple[dict[str, dict[str, float]], str, float | None]:
    """The density half of the exact preview on the true top-N stand-in for Ṽ: per class, the spread of the true
    scores over the stand-in — the keyphrase histogram (histogram), or the normalised exact KDE (RFF; with an
    ``embedder``: the stand-in terms come from private counts and are embedded in memory, never cached; without
    one the normalised histogram is the proxy) — against the expected error (:func:`density_outlook`)."""
    hist, contributing = _class_histograms(TermMatcher(stand_in), texts, labels, classes, len(stand_in),
                                           length=config.length)
    if config.density_kind == "histogram":
        kind = "Laplace sd √2/ε_kde vs sd of the class's keyphrase histogram over Ṽ (before smoothing)"
        scores = hist
    else:
        members = rff_members(config, n_classes=len(classes))
        scores = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1e-12)
        if embedder is not None:
            emb = np.asarray(embedder.encode(stand_in), dtype=np.float32)  # private-derived terms: never cached
            emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
            sigma = config.bandwidth if config.bandwidth else default_bandwidth(emb)
            scores = scores @ exact_gaussian_kernel(emb, emb, sigma)
            kind = (f"RFF + DP error 1/√I + 2√I/(n_c·ε_kde/{members}) vs sd of the normalised exact KDE scores "
                    f"(σ = {sigma:g})")
        else:
            kind = (f"RFF + DP error 1/√I + 2√I/(n_c·ε_kde/{members}) vs sd of the normalised keyphrase "
                    "histogram (proxy: no embedder given)")
    spreads = {c: (contributing[c], float(scores[ci].std())) for ci, c in enumerate(classes)}
    kde, suggested = density_outlook(config, spreads, eps_kde=eps_kde)
    return kde, kind, suggested


def forecast(
    corpus_train_texts: Sequence[str], labels: Sequence[str], vocabulary: PublicVocabulary, config: SamplingConfig,
    *, eps_voc: float | None = None, counts: np.ndarray | None = None, embedder: Embedder | None = None,
    min_real_terms: int | None = None, max_noise_share: float = 0.5, reps: int = 5, seed: int = 0,
) -> Forecast:
    """"Will this work?" — the EXACT preview of ``config`` (ε_voc, ε_kde, S, N, L, method, density, I, σ) from the
    training part's true statistics (docs/DESIGN.md §6). PRIVATE, local — not covered by ε: a choice made from it is a use
    of the data no ledger entry accounts for; the default is :func:`~dpkps_core.evaluation.forecast_dp.dp_forecast`
    (docs/PRIVACY.md "Previews that steer choices").

    ``eps_voc``: a what-if ε_voc in place of the config's. ``counts``: the training part's term counts over V
    (first S distinct terms per document), computed here when not given.
    Vocabulary: :func:`~dpkps_core.evaluation.forecast_outlook.vocabulary_outlook` on the true counts (with the
    largest public-order prefix of V as a remedy). Density: the true top-N terms stand in for Ṽ
    (:func:`_exact_density`); usable when every class's signal-to-noise ratio is ≥ 1. Iterative members use more
    blocks and fewer documents than this single-keyphrase view: optimistic for them."""
    eps_voc, eps_kde = forecast_epsilons(config, eps_voc)
    if len(corpus_train_texts) != len(labels) or not len(labels):
        raise ParameterError("The forecast needs one label per training document and at least one document.")
    if counts is None:
        counts = pipeline.term_counts(corpus_train_texts, vocabulary, terms_per_doc=config.terms_per_doc)
    counts = np.asarray(counts)
    vocab = vocabulary_outlook(counts, eps_voc=eps_voc, terms_per_doc=config.terms_per_doc,
                               vocab_size=config.vocab_size, min_real_terms=min_real_terms,
                               max_noise_share=max_noise_share, reps=reps, seed=seed, suggest_prefix=True)
    classes = sorted(set(map(str, labels)))
    order = np.argsort(-counts, kind="stable")
    stand_in = [vocabulary.terms[i] for i in order[:config.vocab_size] if counts[i] > 0]
    kde: dict[str, dict[str, float]] = {}
    kde_kind, suggested_kde = "", None
    if stand_in:
        kde, kde_kind, suggested_kde = _exact_density(config, corpus_train_texts, labels, classes, stand_in,
                                                      eps_kde=eps_kde, embedder=embedder)
    return assemble_forecast(
        config, vocab, kde, eps_voc=eps_voc, eps_kde=eps_kde, kde_error_kind=kde_kind, suggested_eps_kde=suggested_kde,
        max_noise_share=max_noise_share, n_documents=len(labels),
        class_sizes={c: int(sum(1 for y in labels if y == c)) for c in classes},
        terms_in_corpus=int((counts > 0).sum()), count_curve=_count_curve(counts),
        computed_over=(f"every training document ({len(labels):,}), read {default_chunk_rows():,} at a time: the term "
                       "counts by the streaming vocabulary pass, the keyphrase histograms chunk by chunk (memory: one "
                       "chunk's keyphrases and the per-class sums over the top-N terms)"))
