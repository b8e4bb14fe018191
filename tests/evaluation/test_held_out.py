"""The local evaluation scores on a bounded sample of the held-out part, stated in its output (issue 31 §4;
dpkps_core/evaluation/held_out.py): at most ``max_test_documents``, a public-seed sample, the whole part when it is no
larger (so small corpora keep their numbers), and the split and DP steps untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_toys import _make_run, corpus_files, fake_models  # noqa: F401 (fixtures)

from dpkps_core.cli import main
from dpkps_core.corpus import Corpus
from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.held_out import DEFAULT_MAX_TEST_DOCUMENTS, held_out_sample


def _part(n: int) -> Corpus:
    return Corpus(tuple(f"held-out document number {i}" for i in range(n)), tuple("ab"[i % 2] for i in range(n)),
                  "c", "test", public_classes=("a", "b"))


def test_a_large_held_out_part_is_sampled_within_the_bound_with_a_public_seed() -> None:
    part = _part(1000)
    s = held_out_sample(part, max_documents=100)
    assert s.sampled and len(s.corpus) == 100 and s.held_out == 1000
    assert set(s.corpus.texts) <= set(part.texts) and len(set(s.corpus.texts)) == 100
    order = [part.texts.index(t) for t in s.corpus.texts]
    assert order == sorted(order)  # corpus order
    assert held_out_sample(part, max_documents=100).corpus == s.corpus  # the same sample every time
    assert held_out_sample(part, max_documents=100, seed=1).corpus != s.corpus
    assert "100 of the 1,000 held-out documents" in s.note() and "DP step" in s.note()


def test_a_small_held_out_part_is_used_whole() -> None:
    part = _part(40)
    for bound in (40, 1000, None):
        s = held_out_sample(part, max_documents=bound)
        assert not s.sampled and s.corpus is part and s.note().startswith("all 40 held-out documents")
    assert DEFAULT_MAX_TEST_DOCUMENTS >= 1000
    with pytest.raises(ParameterError):
        held_out_sample(part, max_documents=0)


def test_evaluate_scores_on_the_bounded_sample_and_says_so(tmp_path: Path, corpus_files,  # noqa: F811
                                                           fake_models, capsys: pytest.CaptureFixture[str]  # noqa: F811
                                                           ) -> None:
    run = _make_run(tmp_path, corpus_files[0], client_fraction=0.0, documents=True)
    assert main(["evaluate", "--run", str(run), "--seeds", "1", "--no-coral"]) == 0
    whole = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    assert whole["n_test"] == whole["n_test_held_out"] > 6 and whole["held_out_sample"].startswith("all ")
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--seeds", "1", "--no-coral", "--max-test-documents", "6"]) == 0
    data = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    assert data["n_test"] == 6 and data["n_test_held_out"] == whole["n_test_held_out"]
    assert data["max_test_documents"] == 6 and "a uniform random sample of 6 of the" in data["held_out_sample"]
    assert data["n_train"] == whole["n_train"]  # the training part is untouched
    assert "scored on a uniform random sample of 6" in capsys.readouterr().out
