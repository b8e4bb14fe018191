"""An uploaded PUBLIC vocabulary is saved and named by its own file name (sanitised; a clash gets a short ``-2``
suffix, never a hash), and the run folder names it by that name and its SHA-256 — never a temporary path
(docs/PRIVACY.md: public inputs are named, not located; config.SamplingConfig.to_run_dict)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app_helpers import state_of, goto, new_app, toy_csv, upload_corpus, walk
from studio.uploads import vocabulary_file_name

pytestmark = [pytest.mark.assets]


@pytest.mark.parametrize("given,saved", [("clinical.txt", "clinical.txt"), ("My Terms (v2).txt", "My_Terms__v2_.txt"),
                                         ("../../etc/passwd", "passwd.txt"), ("C:\\\\x\\\\terms.csv", "terms.csv"),
                                         ("", "vocabulary.txt"), ("...", "vocabulary.txt")])
def test_vocabulary_file_names_are_sanitised(given: str, saved: str) -> None:
    assert vocabulary_file_name(given) == saved


def _terms(words: str) -> bytes:
    return "\n".join(words.split()).encode("utf-8")


@pytest.mark.model
def test_the_run_folder_names_the_uploaded_vocabulary_as_the_user_knows_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    at = new_app()
    upload_corpus(at, toy_csv(10), "toy.csv")
    goto(at, "budget")
    at.selectbox(key="_w.vocabulary").set_value("upload").run()
    first = _terms("football match goal league striker coach team season")
    at.file_uploader(key="vocab_upload").set_value(("clinical terms.txt", first, "text/plain")).run()
    assert Path(state_of(at).uploads.vocab_upload_path).name == "clinical_terms.txt"
    # another file of the same name: a short suffix, not a hash
    words = ("football match goal league striker coach team season cup software computer internet mobile phone "
             "network bank shares profits market economy")
    # ≥ N = 200 terms (the fast settings' N): the toy corpus's words and letters-only filler terms
    filler = " ".join("zq" + a + b + c for a in "bcdfgh" for b in "jklmn" for c in "prstvw")
    second = _terms(words + " " + filler)
    at.file_uploader(key="vocab_upload").set_value(("clinical terms.txt", second, "text/plain")).run()
    path = Path(state_of(at).uploads.vocab_upload_path)
    assert path.name == "clinical_terms-2.txt" and path.read_bytes() == second
    walk(at, "sequences")  # Ṽ, densities and sequences: the run folder is written
    run_dir = Path(state_of(at).run.run_dir)
    text = (run_dir / "run_config.json").read_text(encoding="utf-8")
    config = json.loads(text)
    assert "clinical_terms-2.txt" in config["vocabulary"]
    assert config["vocabulary_sha256"] == hashlib.sha256(second).hexdigest()
    assert str(path.parent) not in text and "/tmp" not in text and "dpkps-session" not in text
