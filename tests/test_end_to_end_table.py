"""benchmarks.end_to_end: the README table block (a row per lever, the distribution score, wall times), the variant
options and the block's replacement between markers (no models run)."""

from __future__ import annotations

import argparse

import pytest

import dataclasses
from pathlib import Path

from benchmarks.end_to_end import (END, LEVERS, ROW_FILE, START, Row, Variant, _row_key, _stored_row, _variants,
                                   _write_json, format_table, replace_block)


def test_table_and_readme_block() -> None:
    rows = [Row("demo:bbc", False, 500, (0.9412, 0.004), (0.979, 0.002), 0.85, 2700.0, 80.0, engine="torch",
                label="before (torch, no class names, 1 draft)", precision=0.61, recall=0.42),
            Row("demo:bbc", True, 500, (0.95, 0.0), (0.979, 0.002), 0.85, 60.0, 75.0, engine="ct2", drafts=2,
                repetition=False, ratio_interval=(0.9312, 0.9951), n_test=429)]
    block = format_table(rows, header="header line")
    lines = block.splitlines()
    assert lines[0] == "header line" and lines[2].startswith("| corpus | variant |") and len(lines) == 6
    assert ("| demo:bbc | before (torch, no class names, 1 draft) | torch | no | yes | 1 | 500 | 0.941 ± 0.004 | "
            "0.979 ± 0.002 | 0.96 | 0.610 / 0.420 | 0.850 | 45.0 min | 80 s |") in block
    assert "| ct2 | yes | no | 2 |" in lines[5] and "| — |" in lines[5] and "60 s" in lines[5]
    assert "| 0.97 (0.93–1.00) |" in lines[5]  # the ratio's paired interval over the test documents
    readme = "# Title\n\nintro\n"
    once = replace_block(readme, block)
    assert once.startswith(readme.rstrip("\n")) and "## Headline" in once and once.count(START) == 1
    twice = replace_block(once, "new block")
    assert twice.count(START) == twice.count(END) == 1 and "new block" in twice and "header line" not in twice
    assert twice.split(START)[0] == once.split(START)[0] and twice.endswith(END + "\n")


def test_variants_from_the_options() -> None:
    assert Variant.parse("ct2,names,2") == Variant("ct2", True, 2)
    assert Variant.parse("torch,nonames,1").folder == "torch_nonames_d1"
    assert Variant.parse("torch,nonames,1,norep") == Variant("torch", False, 1, False)
    assert Variant.parse("torch,nonames,1,norep").folder == "torch_nonames_d1_norep"
    for text in ("ct2,names,2", "torch,nonames,1,norep"):
        assert Variant.parse(Variant.parse(text).spelled) == Variant.parse(text)
    for bad in ("ct2,yes,2", "ct2,names,0", "ct2,names,1,off", "ct2,names"):
        with pytest.raises(argparse.ArgumentTypeError):
            Variant.parse(bad)
    ns = argparse.Namespace(table="levers", variant=None, class_names="with", engine="ct2", drafts=1)
    assert _variants(ns) == list(LEVERS) and [v.drafts for v in LEVERS] == [1, 1, 1, 1, 2]
    # each lever added in turn: engine, class names, repetition control, drafts
    assert [(v.engine, v.class_names, v.repetition) for v in LEVERS] == [
        ("torch", False, False), ("ct2", False, False), ("ct2", True, False), ("ct2", True, True), ("ct2", True, True)]
    ns.table, ns.variant = None, [Variant("ct2", True, 1), Variant("ct2", True, 2), Variant("ct2", True, 1)]
    assert _variants(ns) == [Variant("ct2", True, 1), Variant("ct2", True, 2)]
    ns.variant, ns.class_names = None, "both"
    assert _variants(ns) == [Variant("ct2", False, 1), Variant("ct2", True, 1)]


def test_a_finished_row_is_reused_only_with_the_same_settings(tmp_path: Path) -> None:
    args = argparse.Namespace(per_class=100, max_tokens=200, batch_size=16, seeds=3, eps_voc=5.0, eps_kde=5.0)
    variant = Variant("ct2", True, 2)
    row = Row("demo:bbc", True, 498, (0.95, 0.0), (0.97, 0.01), 0.88, 600.0, 90.0, engine="ct2", drafts=2,
              precision=0.5, recall=0.6, label="+ best of 2 drafts", ratio_interval=(0.9, 1.0), n_test=52)
    assert _stored_row(tmp_path, _row_key(variant, args)) is None
    _write_json(tmp_path / ROW_FILE, {"key": _row_key(variant, args), "row": dataclasses.asdict(row)})
    assert _stored_row(tmp_path, _row_key(variant, args)) == row
    assert _stored_row(tmp_path, _row_key(Variant("ct2", True, 1), args)) is None
    assert _stored_row(tmp_path, _row_key(variant, argparse.Namespace(**{**vars(args), "per_class": 20}))) is None


def test_stored_only_reads_the_finished_rows_in_table_order_and_names_the_missing(tmp_path: Path) -> None:
    from benchmarks.end_to_end import stored_rows

    args = argparse.Namespace(out=str(tmp_path), per_class=100, max_tokens=200, batch_size=16, seeds=3, eps_voc=5.0,
                              eps_kde=5.0, table="levers", variants=list(LEVERS))
    for variant, acc in ((LEVERS[3], 0.93), (LEVERS[1], 0.88)):  # finished out of order (torch still running)
        folder = tmp_path / "demo_bbc" / variant.folder
        folder.mkdir(parents=True)
        row = Row("demo:bbc", variant.class_names, 500, (acc, 0.0), (0.97, 0.0), 0.87, 60.0, 9.0,
                  engine=variant.engine, drafts=variant.drafts, repetition=variant.repetition)
        _write_json(folder / ROW_FILE, {"key": _row_key(variant, args), "row": dataclasses.asdict(row)})
    rows, missing = stored_rows("demo:bbc", args)
    assert [r.synthetic[0] for r in rows] == [0.88, 0.93]                      # the table's order
    assert [r.label for r in rows] == ["+ CTranslate2 engine", "+ repetition control"]
    assert len(missing) == 3 and missing[0].startswith("demo:bbc before (torch")


def test_re_evaluate_evaluates_the_stored_documents_again_without_generating(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import benchmarks.end_to_end as end_to_end
    import dpkps_core.embeddings as embeddings
    import dpkps_core.evaluation as evaluation
    import dpkps_core.llm as llm
    from benchmarks.end_to_end import run_corpus
    from dpkps_core.evaluation import EvaluationResult
    from dpkps_core.evaluation.metrics import Interval, MetricSummary, Scores

    args = argparse.Namespace(out=str(tmp_path), per_class=1, max_tokens=200, batch_size=16, seeds=1, eps_voc=5.0,
                              eps_kde=5.0, table=None, variants=[Variant("ct2", True, 1)], re_evaluate=True,
                              device="cpu", threads=1)
    sampled = tmp_path / "demo_bbc" / "sampled"
    sampled.mkdir(parents=True)
    (sampled / "sequences.jsonl").write_text(json.dumps({"id": "s1", "label": "tech", "keyphrases": ["chip"]}) + "\n",
                                             encoding="utf-8")
    folder = tmp_path / "demo_bbc" / args.variants[0].folder
    folder.mkdir()
    (folder / "run_config.json").write_text(json.dumps({"embedding_model": "toy-model"}), encoding="utf-8")
    old = Row("demo:bbc", True, 480, (0.9, 0.0), (0.95, 0.0), 0.8, 1234.0, 60.0, engine="ct2")
    _write_json(folder / ROW_FILE, {"key": _row_key(args.variants[0], args), "row": dataclasses.asdict(old)})

    def summary(name: str, acc: float) -> MetricSummary:
        return MetricSummary(name, (0,), (Scores(acc, acc, {}),), 10)

    class ToyEmbedder:
        def __init__(self, name: str) -> None:
            self.name, self.dim = name, 2

    def fake_evaluate(path: Path, *, embedder: object, **kwargs: object) -> EvaluationResult:
        assert Path(path) == folder
        # the process's in-memory memo around the run's embedding model (real documents embedded once per process)
        assert embedder is end_to_end._memo_embedder(folder, "cpu") and embedder.name == "toy-model"
        metrics = {n: summary(n, a) for n, a in (("synthetic_accuracy", 0.92), ("real_baseline_accuracy", 0.96),
                                                  ("no_llm_accuracy", 0.8))}
        return EvaluationResult(metrics, {"n_test": 52}, None, Interval(0.92 / 0.96, 0.88, 0.99, 52))

    monkeypatch.setattr(evaluation, "evaluate_run", fake_evaluate)
    monkeypatch.setattr(embeddings, "get_embedder", lambda name, device=None: ToyEmbedder(name))
    monkeypatch.setattr(end_to_end, "_EMBEDDERS", {})
    monkeypatch.setattr(llm, "run_generation", lambda *a, **k: pytest.fail("re-evaluation generated documents"))
    (row,) = run_corpus("demo:bbc", args, {})
    assert (row.documents, row.generate_s) == (480, 1234.0)  # the stored generation is kept
    assert row.synthetic[0] == 0.92 and row.ratio_interval == (0.88, 0.99) and row.n_test == 52
    assert _stored_row(folder, _row_key(args.variants[0], args)) == row
    assert (folder / "evaluation.json").is_file()


def test_generations_get_their_own_folders_keys_rows_and_a_spread_line(tmp_path: Path) -> None:
    from benchmarks.end_to_end import _folder_name, _label, _slots, generation_spread, stored_rows

    variant = Variant("ct2", True, 1)
    args = argparse.Namespace(out=str(tmp_path), per_class=100, max_tokens=200, batch_size=16, seeds=3, eps_voc=5.0,
                              eps_kde=5.0, table=None, variants=[variant], generations=3)
    assert _slots(args) == [(variant, 1), (variant, 2), (variant, 3)]
    assert [_folder_name(variant, g) for g in (1, 2)] == ["ct2_names_d1", "ct2_names_d1_g2"]
    assert _row_key(variant, args, 1) == _row_key(variant, args)          # the first reuses the existing rows
    assert _row_key(variant, args, 2) != _row_key(variant, args, 3)
    assert _label(variant, 2, args).endswith("(generation 2)")
    for g, acc in ((1, 0.92), (2, 0.90)):
        folder = tmp_path / "demo_bbc" / _folder_name(variant, g)
        folder.mkdir(parents=True)
        row = Row("demo:bbc", True, 500, (acc, 0.0), (0.97, 0.0), 0.87, 60.0, 9.0, engine="ct2", generation=g)
        _write_json(folder / ROW_FILE, {"key": _row_key(variant, args, g), "row": dataclasses.asdict(row)})
    rows, missing = stored_rows("demo:bbc", args)
    assert [r.generation for r in rows] == [1, 2] and len(missing) == 1 and "(generation 3)" in missing[0]
    (line,) = generation_spread(rows)
    assert "synthetic accuracy 0.910 ± 0.014 over 2 generations (0.920, 0.900)" in line
    assert line in format_table(rows, header="h").splitlines()
    assert generation_spread(rows[:1]) == []                               # one generation: no spread to say
