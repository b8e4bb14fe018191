"""AppTest: a run folder exists only once something is written to it, and page 8 lists no empty folder (issue 33 §6:
"6 of 11 run folders are empty").

Loading corpora, declaring classes, the DP forecast and a Ṽ release that fails leave no folder behind; a folder that
holds no run (say a comparison's scratch folder, or one left by a crash) is not listed on page 8.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app_helpers import state_of, click, fast_env, goto, new_app, toy_csv, upload_corpus  # noqa: F401
from dpkps_core.errors import DPKPSError

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow]


def folders(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []


def test_no_folder_before_something_is_written_and_page_8_hides_empty_ones(fast_env: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from dpkps_core.method import pipeline

    at = new_app()                                      # the demo corpus loads
    upload_corpus(at, toy_csv(20), "mine.csv")          # another corpus, classes declared
    goto(at, "budget")
    click(at, "DP forecast")
    assert folders(fast_env) == []

    def broken(*args, **kwargs):
        raise DPKPSError("The vocabulary step failed (test).")

    with monkeypatch.context() as patched:
        patched.setattr(pipeline, "vocabulary_step", broken)
        goto(at, "private-vocabulary")
        click(at, "Build Ṽ", clean=False)
    assert any("failed (test)" in e.value for e in at.error)
    assert folders(fast_env) == []                      # the failed release's folder is gone

    goto(at, "private-vocabulary")                      # the page drawn again after the failure
    click(at, "Build Ṽ")
    assert len(folders(fast_env)) == 1                 # written: Ṽ is in it
    (fast_env / "run-20260101-000000-deadbeef-000000").mkdir()   # a folder holding no run
    goto(at, "export")
    listed = "\n".join(str(df.value) for df in at.dataframe)
    assert "deadbeef" not in listed and Path(state_of(at).run.run_dir).name in listed
