"""benchmarks.end_to_end: the README table block (a row per lever, the distribution score, wall times), the variant
options and the block's replacement between markers (no models run)."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.end_to_end import END, LEVERS, START, Row, Variant, _variants, format_table, replace_block


def test_table_and_readme_block() -> None:
    rows = [Row("demo:bbc", False, 500, (0.9412, 0.004), (0.979, 0.002), 0.85, 2700.0, 80.0, engine="torch",
                label="before (torch, no class names, 1 draft)", precision=0.61, recall=0.42),
            Row("demo:bbc", True, 500, (0.95, 0.0), (0.979, 0.002), 0.85, 60.0, 75.0, engine="ct2", drafts=2)]
    block = format_table(rows, header="header line")
    lines = block.splitlines()
    assert lines[0] == "header line" and lines[2].startswith("| corpus | variant |") and len(lines) == 6
    assert ("| demo:bbc | before (torch, no class names, 1 draft) | torch | no | 1 | 500 | 0.941 ± 0.004 | "
            "0.979 ± 0.002 | 0.96 | 0.610 / 0.420 | 0.850 | 45.0 min | 80 s |") in block
    assert "| ct2 | yes | 2 |" in lines[5] and "| — |" in lines[5] and "60 s" in lines[5]
    readme = "# Title\n\nintro\n"
    once = replace_block(readme, block)
    assert once.startswith(readme.rstrip("\n")) and "## Headline" in once and once.count(START) == 1
    twice = replace_block(once, "new block")
    assert twice.count(START) == twice.count(END) == 1 and "new block" in twice and "header line" not in twice
    assert twice.split(START)[0] == once.split(START)[0] and twice.endswith(END + "\n")


def test_variants_from_the_options() -> None:
    assert Variant.parse("ct2,names,2") == Variant("ct2", True, 2)
    assert Variant.parse("torch,nonames,1").folder == "torch_nonames_d1"
    with pytest.raises(argparse.ArgumentTypeError):
        Variant.parse("ct2,yes,2")
    ns = argparse.Namespace(table="levers", variant=None, class_names="with", engine="ct2", drafts=1)
    assert _variants(ns) == list(LEVERS) and [v.drafts for v in LEVERS] == [1, 1, 1, 2]
    assert [(v.engine, v.class_names) for v in LEVERS] == [("torch", False), ("ct2", False), ("ct2", True),
                                                             ("ct2", True)]
    ns.table, ns.variant = None, [Variant("ct2", True, 1), Variant("ct2", True, 2), Variant("ct2", True, 1)]
    assert _variants(ns) == [Variant("ct2", True, 1), Variant("ct2", True, 2)]
    ns.variant, ns.class_names = None, "both"
    assert _variants(ns) == [Variant("ct2", False, 1), Variant("ct2", True, 1)]
