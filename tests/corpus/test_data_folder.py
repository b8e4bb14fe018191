"""The server-side data folder (dpkps_core.corpus.data_folder; issue 31 §2): one folder named by the deployment,
entries picked by name only, nothing outside it reachable."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from app_helpers import toy_records

from dpkps_core.corpus import load_corpus
from dpkps_core.corpus.data_folder import DATA_DIR_ENV, data_root, list_data_entries, resolve_data_entry
from dpkps_core.errors import CorpusError, ParameterError


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir()
    recs = toy_records(20)
    pd.DataFrame(recs).to_csv(root / "notes.csv", index=False)
    (root / "export").mkdir()
    for i in range(3):
        pd.DataFrame(recs[i * 20:(i + 1) * 20]).to_parquet(root / "export" / f"part-{i}.parquet")
    (root / "empty").mkdir()
    (root / "readme.txt").write_text("not a corpus")
    (root / ".hidden.csv").write_text("text,label\n")
    secret = tmp_path / "secret.csv"
    secret.write_text("text,label\nsecret row,x\n")
    os.symlink(secret, root / "link.csv")
    os.symlink(tmp_path, root / "up")
    return root


def test_lists_corpus_files_and_folders_of_parts_only(folder: Path) -> None:
    entries = {e.name: e for e in list_data_entries(folder)}
    assert set(entries) == {"notes.csv", "export"}          # no .txt, hidden file, empty folder or link
    assert entries["export"].kind == "folder" and entries["export"].parts == 3
    assert "folder of 3 parts" in entries["export"].label
    assert entries["notes.csv"].size_bytes == (folder / "notes.csv").stat().st_size


def test_entries_load_through_the_one_loader(folder: Path) -> None:
    assert len(load_corpus(resolve_data_entry(folder, "notes.csv"))) == 60
    assert len(load_corpus(resolve_data_entry(folder, "export"))) == 60


@pytest.mark.parametrize("name", ["../secret.csv", "/etc/passwd", "..", ".", "link.csv", "up", "export/part-0.parquet",
                                  ".hidden.csv", "readme.txt", "missing.csv", "", " notes.csv", "notes.csv\x00"])
def test_anything_but_an_entry_name_is_refused_alike(folder: Path, name: str) -> None:
    with pytest.raises(ParameterError) as caught:
        resolve_data_entry(folder, name)
    assert str(caught.value) == f"There is no corpus called {name!r} in the server's data folder."


def test_the_setting(folder: Path, tmp_path: Path) -> None:
    assert data_root({}) is None and data_root({DATA_DIR_ENV: "  "}) is None
    assert data_root({DATA_DIR_ENV: str(folder)}) == folder.resolve()
    with pytest.raises(CorpusError, match="DPKPS_DATA_DIR"):
        data_root({DATA_DIR_ENV: str(tmp_path / "nowhere")})
