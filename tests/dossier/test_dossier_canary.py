"""Canaries (issue 34 "Done when"): unique strings planted in the private corpus's texts, file name, column names and
person ids reach NO file of the release edition — HTML, JSON, reproduce.md, reproduce_config.json — nor the bundle;
the internal edition, which is local, does carry the private figures (so the search could find them)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from dossier_helpers import CANARIES

from dpkps_core.dossier import DossierError, build_dossier
from dpkps_core.dossier.export import collect_bundle


def _private_strings(run: Path) -> list[str]:
    config = json.loads((run / "run_config.json").read_text(encoding="utf-8"))
    return list(CANARIES.values()) + [config["corpus_sha256"], config["corpus_path"], "c0ffee" * 10 + "abcd"]


def test_the_canaries_are_really_in_the_private_inputs(dossier_runs: dict[str, Path]) -> None:
    text = dossier_runs["corpus"].read_text(encoding="utf-8")
    for key in ("text_column", "label_column", "person_column", "text", "person"):
        assert CANARIES[key] in text
    assert dossier_runs["corpus"].name == CANARIES["file"]
    config = (dossier_runs["canary"] / "run_config.json").read_text(encoding="utf-8")
    assert CANARIES["file"] in config and CANARIES["person_column"] in config  # the local run folder keeps them


def test_no_canary_reaches_the_release_edition(dossier_runs: dict[str, Path]) -> None:
    run = dossier_runs["canary"]
    files = build_dossier(run, edition="release").files()
    assert set(files) == {"dossier.html", "dossier.json", "reproduce.md", "reproduce_config.json"}
    for name, data in files.items():
        text = data.decode("utf-8")
        for secret in _private_strings(run):
            assert secret not in text, (name, secret)
        assert "CANARY" not in text.upper(), name


def test_no_canary_reaches_the_bundle(dossier_runs: dict[str, Path]) -> None:
    bundle = collect_bundle(dossier_runs["canary"])
    assert {"dossier.html", "dossier.json", "reproduce.md", "reproduce_config.json"} <= set(bundle)
    assert not {"dossier_internal.html", "dossier_internal.json"} & set(bundle)
    for name, data in bundle.items():
        assert b"CANARY" not in data.upper(), name


def test_the_reproduce_files_hold_placeholders_only(dossier_runs: dict[str, Path]) -> None:
    d = build_dossier(dossier_runs["canary"])
    md, cfg = d.reproduce_markdown, d.reproduce_config
    assert cfg["corpus"] == "<YOUR_CORPUS.csv>"
    assert not {"text_column", "label_column", "person_column", "corpus_path", "corpus_sha256"} & set(cfg)
    assert "--corpus <YOUR_CORPUS.csv> --text-column <TEXT_COLUMN> --label-column <LABEL_COLUMN> --person-column " \
           "<PERSON_COLUMN>" in md
    from dpkps_core.cli.main import build_parser

    for line in d.content["reproduce"]["commands"]:  # every line is a command the CLI parses, placeholders filled
        words = shlex.split(re.sub(r"<[A-Z_]+(\.csv)?>", "x", line), comments=True)
        if not words:  # the scripted test LLM is no command-line backend: reproduce.md says so in a comment
            continue
        assert words[:3] == ["python", "-m", "dpkps_core"] and build_parser().parse_args(words[3:]).command
    vocab_sha = json.loads((dossier_runs["canary"] / "run_config.json").read_text())["vocabulary_sha256"]
    assert vocab_sha in md and cfg["vocabulary_sha256"] == vocab_sha  # public inputs by their SHA-256


def test_the_internal_edition_carries_what_the_release_leaves_out(dossier_runs: dict[str, Path]) -> None:
    run = dossier_runs["canary"]
    html = build_dossier(run, edition="internal").to_html()
    config = json.loads((run / "run_config.json").read_text(encoding="utf-8"))
    assert config["corpus_sha256"] in html and "c0ffee" * 10 + "abcd" in html and run.name in html
    assert not any(c in html for c in (CANARIES["text"], CANARIES["person"]))  # texts and ids are in no file at all


def test_a_release_edition_that_would_name_the_corpus_is_refused(canary_copy: Path) -> None:
    """Fail closed: a synthetic document that quotes the private file's path stops the release edition."""
    config = json.loads((canary_copy / "run_config.json").read_text(encoding="utf-8"))
    docs = (canary_copy / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(docs[0])
    first["text"] = f"See {config['corpus_path']} for more."
    (canary_copy / "documents.jsonl").write_text("\n".join([json.dumps(first)] + docs[1:]) + "\n", encoding="utf-8")
    with pytest.raises(DossierError, match="private corpus's name or fingerprint"):
        build_dossier(canary_copy)


def test_the_uploaded_file_name_the_app_recorded_is_searched_for(canary_copy: Path) -> None:
    """The app records an upload as ``upload:<file name>`` (run_state.json): that name stops the release edition
    too, should a document quote it."""
    docs = (canary_copy / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(docs[0])
    first["text"] = f"Taken from {CANARIES['file']}."
    (canary_copy / "documents.jsonl").write_text("\n".join([json.dumps(first)] + docs[1:]) + "\n", encoding="utf-8")
    (canary_copy / "run_config.json").write_text(json.dumps({"corpus": f"upload:{CANARIES['file']}"}),
                                                 encoding="utf-8")
    (canary_copy / "run_state.json").unlink()  # the spec alone names the file
    with pytest.raises(DossierError, match="private corpus's name"):
        build_dossier(canary_copy)


def test_no_canary_of_the_private_findings_reaches_the_release_edition(canary_copy: Path) -> None:
    """The internal edition's further findings (issue 34 §1, §2) carry canaries — a disclosure sentence and
    identifier counts, overlay labels, matched spans — and the release edition and the bundle still hold none."""
    secret = "CANARYFINDINGq7"
    (canary_copy / "disclosure.json").write_text(json.dumps({
        "private": True, "p_value": 0.001, "epsilon_lower_bound": 0.9, "claimed_epsilon": 10.0, "leakage": True,
        "verdict": "leakage", "sentence": f"matched {secret} spans", "train_matched": 9, "holdout_matched": 1,
        "reference_per_part": 30, "synthetic_documents": 10, "settings": {"identifiers": 1},
        "tiers": {"any match": {"train": 9, "holdout": 1, "p_value": 0.001, "epsilon_lower_bound": 0.9}}}))
    (canary_copy / "projection.json").write_text(json.dumps({"private": True, "method": "tsne", "points": [
        {"x": 1.0, "y": 2.0, "source": "real", "label": secret}, {"x": 2.0, "y": 1.0, "source": "synthetic",
                                                                   "label": "sport"}]}))
    internal = build_dossier(canary_copy, edition="internal").to_html()
    assert secret in internal  # the internal edition does show them (so the search below could find them)
    for name, data in build_dossier(canary_copy, edition="release").files().items():
        assert secret not in data.decode("utf-8") and "CANARY" not in data.decode("utf-8").upper(), name
    for name, data in collect_bundle(canary_copy).items():
        assert b"CANARY" not in data.upper(), name
