"""Fixtures of the CLI evaluation tests, shared with tests/evaluation/: a tiny corpus written to disk, a sampled run
folder of it, and faked embedding models (no real model is loaded)."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest
from eval_toys import POOLS, BowEmbedder, make_toy_corpus, make_toy_vocabulary, toy_config

from dpkps_core import embeddings
from dpkps_core.method.pipeline import run_sampling, write_run_folder


@pytest.fixture
def fake_models(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every `get_embedder` returns the bag-of-words test embedder; the term cache lives in tmp_path."""
    monkeypatch.setattr(embeddings, "get_embedder", lambda name="x", threads=None: BowEmbedder())
    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def corpus_files(tmp_path: Path) -> tuple[Path, Path]:
    corpus = make_toy_corpus()
    path = tmp_path / "corpus.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        w.writerows(zip(corpus.texts, corpus.labels))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(make_toy_vocabulary().terms) + "\n", encoding="utf-8")
    return path, vocab


def _make_run(tmp_path: Path, corpus_csv: Path, *, client_fraction: float, documents: bool) -> Path:
    from dpkps_core.corpus import load_corpus_spec

    corpus = load_corpus_spec(str(corpus_csv), classes=tuple(POOLS))
    cfg = dataclasses.replace(toy_config(), corpus=str(corpus_csv), seed=3, client_fraction=client_fraction,
                              vocabulary=str(corpus_csv.parent / "vocab.txt"),  # reloadable: the baseline needs V
                              test_fraction=0.4, per_class=12, classes=tuple(POOLS))
    run = run_sampling(corpus, cfg.validate(), vocabulary=make_toy_vocabulary(), embedder=BowEmbedder())
    out = write_run_folder(run, tmp_path / "run")
    if documents:
        with (out / "documents.jsonl").open("w", encoding="utf-8") as f:
            for s in run.outcome.sequences:
                text = "A short synthetic note about " + " and ".join(s.keyphrases) + "."
                f.write(json.dumps({"id": s.id, "label": s.label, "keyphrases": list(s.keyphrases), "text": text,
                                    "model": "fake"}) + "\n")
    return out
