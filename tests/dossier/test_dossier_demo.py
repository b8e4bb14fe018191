"""Both editions of a demo run (issue 34 "Done when": a demo run and an uploaded-corpus run): the public demo corpus
is named with its licence beside GloVe's, and its reproduce_config.json re-runs the DP steps without any corpus
option (the demo is public)."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_toys import BowEmbedder

import dpkps_core.cli.sample as sample_cli
from dpkps_core.cli import main
from dpkps_core.dossier import build_dossier

pytestmark = pytest.mark.assets

_ARGS = ["--vocabulary", "glove", "--vocab-max-terms", "20000", "--eps-voc", "5", "--eps-kde", "5", "--seed", "1",
         "--noise-sampler", "numpy", "--vocab-size", "200", "--per-class", "3", "--length", "5"]


@pytest.fixture
def demo_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sample_cli, "get_embedder", lambda name, **kw: BowEmbedder())
    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run-20260102-090000-demo01-abcdef"
    assert main(["sample", "--corpus", "demo:drugs", *_ARGS, "--out", str(out)]) == 0
    return out


def test_both_editions_of_a_demo_run(demo_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = build_dossier(demo_run)
    c = release.content
    assert c["run"]["corpus"] == "the public demo corpus demo:drugs"
    inputs = {r["input"]: r for r in c["public_inputs"]}
    assert "PDDL" in inputs["Public vocabulary V"]["licence"]
    assert "CC BY 4.0" in inputs["Demo corpus (public, standing in for a private one)"]["licence"]
    assert c["reproduce"]["config"]["corpus"] == "demo:drugs"
    assert "<YOUR_CORPUS.csv>" not in c["reproduce"]["commands"][0]
    internal = build_dossier(demo_run, edition="internal").content
    assert internal["internal"]["utility"] is None and internal["internal"]["audit"] is None
    assert internal["decision"]["verdict"] == "do not share"  # seeded
    config = tmp_path / "reproduce_config.json"
    config.write_bytes(release.files()["reproduce_config.json"])
    out = tmp_path / "again"
    assert main(["sample", "--config", str(config), "--out", str(out)]) == 0
    assert (out / "sequences.jsonl").read_bytes() == (demo_run / "sequences.jsonl").read_bytes()
