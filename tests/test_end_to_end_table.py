"""benchmarks.end_to_end: the README table block and its replacement between markers (no models run)."""

from __future__ import annotations

from benchmarks.end_to_end import END, START, Row, format_table, replace_block


def test_table_and_readme_block() -> None:
    rows = [Row("demo:bbc", False, 500, (0.9412, 0.004), (0.979, 0.002), 0.85, 2700.0, 80.0),
            Row("demo:bbc", True, 500, (0.95, 0.0), (0.979, 0.002), 0.85, 60.0, 75.0)]
    block = format_table(rows, header="header line")
    lines = block.splitlines()
    assert lines[0] == "header line" and lines[2].startswith("| corpus |") and len(lines) == 6
    assert "| demo:bbc | no | 500 | 0.941 ± 0.004 | 0.979 ± 0.002 | 0.850 | 45.0 min | 80 s |" in block
    assert "| yes |" in lines[5] and "60 s" in lines[5]
    readme = "# Title\n\nintro\n"
    once = replace_block(readme, block)
    assert once.startswith(readme.rstrip("\n")) and "## Headline" in once and once.count(START) == 1
    twice = replace_block(once, "new block")
    assert twice.count(START) == twice.count(END) == 1 and "new block" in twice and "header line" not in twice
    assert twice.split(START)[0] == once.split(START)[0] and twice.endswith(END + "\n")
