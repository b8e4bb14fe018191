"""``compare_methods`` and ``python -m dpkps_core compare``: the three methods at equal ε on the same split, one
table, compare.csv + compare.md — with a fake LLM backend, a fake causal LM and a hashing embedder."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from pathlib import Path

import pytest

from dpkps_core.baselines import compare as cmp
from dpkps_core.baselines.compare_result import CSV_COLUMNS
from dpkps_core.baselines.compare_settings import GENERATION_METHODS, size_epsilon
from dpkps_core.cli import build_parser
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.baselines.prediction_config import PrivatePredictionConfig
from baseline_toys import VOCAB, EchoBackend, FakeLM, FakeTokenizer, compare_corpus, run_compare

def test_compare_runs_every_method_at_equal_epsilon_and_writes_one_table(tmp_path: Path) -> None:
    res, backend = run_compare(tmp_path)
    rows = {r.method: r for r in res.rows}
    assert list(rows) == ["dpkps", "private-prediction", "augpe", "real"]
    for m in GENERATION_METHODS:  # same ε for every method (never above it); δ = 0 only for DP-KPS
        assert rows[m].epsilon <= 8.0 + 1e-9 and rows[m].epsilon > 7.9
        assert rows[m].documents == 6 and not math.isnan(rows[m].accuracy)
    assert rows["dpkps"].delta == 0 and rows["dpkps"].guarantee.startswith("ε-DP")
    assert rows["private-prediction"].delta == 1e-6 and rows["augpe"].delta == 1e-6
    # prompt budget: AugPE makes T = 10 prompts per document, DP-KPS one
    assert rows["augpe"].prompts_per_document == 10 and rows["dpkps"].prompts_per_document == 1
    assert rows["augpe"].llm_calls == 3 * 2 * 10 and rows["dpkps"].llm_calls == 6
    assert rows["private-prediction"].llm_calls > 0 and rows["private-prediction"].prompt_tokens > 0
    # the same split for everybody, and Ṽ shared: AugPE's ledger holds DP-KPS's vocabulary event
    assert res.info["n_train"] + res.info["n_test"] == 60
    voc = [e for e in res.privacy["augpe"]["events"] if e["step"] == "vocabulary"]
    assert len(voc) == 1 and voc[0]["epsilon"] == 4.0
    assert res.privacy["dpkps"]["epsilon_vocabulary"] == 4.0
    # files
    out = tmp_path / "cmp"
    with open(out / "compare.csv", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert [r["method"] for r in table] == ["dpkps", "private-prediction", "augpe", "real"]
    assert set(CSV_COLUMNS) <= set(table[0])
    evaluated = [r for r in table if r["accuracy"]]
    assert evaluated and all(float(r["accuracy_low"]) <= float(r["accuracy"]) <= float(r["accuracy_high"])
                             for r in evaluated)  # each accuracy's interval over the held-out documents holds it
    md = (out / "compare.md").read_text(encoding="utf-8")
    assert "(95 % " in md
    assert "pure ε-DP" in md and "(ε, δ)" in md and "not for release" in md and "AugPE+Ṽ" in md
    for m in GENERATION_METHODS:
        docs = [json.loads(line) for line in (out / f"documents_{m}.jsonl").read_text().splitlines()]
        assert len(docs) == 6
        assert (out / f"privacy_{m}.json").is_file()
    # no private text in any prompt sent to the (remote-style) backend, nor in the written audit logs
    written = "".join((out / f"audit_{m}.jsonl").read_text() for m in GENERATION_METHODS)
    for blob in backend.prompts + [written]:
        assert "zzprivate" not in blob
    assert oct(out.stat().st_mode)[-3:] == "700"


def test_compare_subset_builds_its_own_vocabulary_and_validates(tmp_path: Path) -> None:
    res, _ = run_compare(tmp_path, methods=("augpe",), real_baseline=False)
    assert [r.method for r in res.rows] == ["augpe"]
    assert res.rows[0].epsilon <= 8.0 and res.rows[0].notes.count("Ṽ built for AugPE") == 1
    with pytest.raises(ParameterError, match="ε_voc"):
        cmp.CompareSettings(methods=("dpkps",), eps_total=2.0, eps_voc=2.0)
    with pytest.raises(ParameterError, match="nope"):
        cmp.CompareSettings(methods=("nope",), eps_total=2.0)
    with pytest.raises(ParameterError, match="CompareSettings"):
        cmp.compare_methods(compare_corpus(), {"eps_total": 2.0}, backend=EchoBackend(), embedder=HashingEmbedder())
    assert cmp.CompareSettings(eps_total=4.0, methods=("augpe", "augpe")).methods == ("augpe",)


def test_cli_compare_is_registered_and_warns_about_private_prompts(monkeypatch, tmp_path: Path, capsys) -> None:
    parser = build_parser()
    args = parser.parse_args(["compare", "--eps", "6", "--methods", "dpkps,private-prediction", "--per-class", "2",
                              "--pp-svt-threshold", "0.5", "--out", str(tmp_path / "o")])
    assert args.methods == ["dpkps", "private-prediction"] and args.pp_svt_threshold == 0.5 and args.delta == 1e-6
    with pytest.raises(SystemExit):
        parser.parse_args(["compare", "--eps", "6", "--methods", "magic", "--out", "x"])
    seen = {}

    def fake_compare(corpus, settings, **kw):
        seen.update({f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}, **kw)
        res = cmp.CompareResult([cmp.MethodRow("dpkps", "DP-KPS", 6.0, 0.0, "ε-DP (pure)", 4, 4, 1, 10, 10, 1.0,
                                               0.5, 0.1, 0.4)],
                                {"eps_total": 6.0, "n_train": 8, "n_test": 2, "per_class": 2, "seeds": [0],
                                 "chance_accuracy": 0.5}, {}, {}, {}, [])
        res.write(kw["out_dir"])
        return res

    monkeypatch.setattr("dpkps_core.baselines.compare.compare_methods", fake_compare)
    monkeypatch.setattr("dpkps_core.embeddings.get_embedder", lambda name: HashingEmbedder(name=name))
    monkeypatch.setattr("dpkps_core.corpus.load_corpus_spec", lambda spec, **kw: compare_corpus())
    code = args.func(args)
    captured = capsys.readouterr()
    assert code == 0 and "private prediction puts PRIVATE documents" in captured.err
    assert "| DP-KPS |" in captured.out and (tmp_path / "o" / "compare.csv").is_file()
    assert seen["eps_total"] == 6.0 and seen["private_prediction"].svt_threshold == 0.5
    assert seen["private_prediction"].private_tokens == 48


def test_private_prediction_buckets_never_follow_the_private_size(tmp_path: Path, monkeypatch) -> None:
    """Issue 11 §3: without a public class-size estimate the hash buckets used to be ⌊(n_train / C) / s⌋ from the
    private n (written into the released report). Now they come from a DP count charged to the method's ε."""
    from dpkps_core.baselines import private_prediction as pp

    sizes: list[float] = []
    original = pp.buckets_for
    monkeypatch.setattr(pp, "buckets_for", lambda n, s: sizes.append(n) or original(n, s))
    backend = EchoBackend()
    settings = cmp.CompareSettings(
        eps_total=8.0, methods=("private-prediction",), delta=1e-6, per_class=2, max_tokens=6,
        private_prediction=PrivatePredictionConfig(batch_size=4, private_tokens=6, public_top_k=None),
        class_size_estimate=None, seeds=(0,), seed=None, real_baseline=False)
    res = cmp.compare_methods(compare_corpus(), settings, backend=backend, embedder=HashingEmbedder(dim=32),
                              vocabulary=VOCAB, local_lm=(FakeLM(seed=7), FakeTokenizer()))
    events = res.privacy["private-prediction"]["events"]
    size = [e for e in events if e["step"] == "size"]
    assert len(size) == 1 and size[0]["sensitivity"] == 1.0 and size[0]["epsilon"] == pytest.approx(size_epsilon(8.0))
    assert res.privacy["private-prediction"]["epsilon_total"] == pytest.approx(8.0, abs=1e-3)
    assert res.rows[0].epsilon == pytest.approx(8.0, abs=1e-3) and res.rows[0].epsilon <= 8.0
    n_train = res.info["n_train"]
    released = json.dumps(res.privacy["private-prediction"])
    assert "DP count" in res.rows[0].notes and f"n_train\": {n_train}" not in released
    # the buckets were sized from the noisy count, not from n_train / C; the event was frozen (and charged) before
    # the noise was drawn, so the DP count is reported next to it, not inside it
    assert "noisy_count" not in size[0]["params"]
    noisy = res.privacy["private-prediction"]["dp_training_count"]["noisy_count"]
    assert sizes == [pytest.approx(max(noisy, 1.0) / 3)]
