"""The release edition (issue 34 §1): what it holds, in human words, from the run folder alone."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from dossier_helpers import visible_text

from dpkps_core.dossier import SCHEMA, SCHEMA_VERSION, DossierError, build_dossier
from dpkps_core.dossier.labels import PARAMETER_LABELS, PRIVATE_PARAMETER_KEYS
from dpkps_core.dossier.release import public_inputs
from dpkps_core.risk import risk_sentences


def test_release_edition_of_a_cli_run_answers_every_question(dossier_runs: dict[str, Path]) -> None:
    run = dossier_runs["cli"]
    report = json.loads((run / "privacy_report.json").read_text(encoding="utf-8"))
    d = build_dossier(run)
    c = d.to_dict()
    assert (c["schema"], c["schema_version"], c["edition"]) == (SCHEMA, SCHEMA_VERSION, "release")
    assert c["run"]["classes"] == ["sport", "tech", "business"] and c["run"]["software_version"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", c["generated"])
    g = c["guarantee"]
    assert g["epsilon_total"] == report["epsilon_total"] == 10 and g["delta"] == 0
    assert [(s["step"], s["epsilon"]) for s in g["steps"]] == [("vocabulary", 4.0), ("kde", 6.0)]
    assert g["unit"] == "one document"
    assert g["sentence"].startswith("Adding or removing any one document changes the probability of any output")
    assert f"e^10 ≈ {math.exp(10):,.0f}" in g["sentence"]
    assert g["risk_sentences"] == [s[0].upper() + s[1:] + "." for s in risk_sentences(10)]
    assert "at most ε = 20" in g["cap_policy"]
    assert [m["mechanism"] for m in c["mechanisms"]][0].startswith("Laplace noise on the count of every public term")
    assert c["counts"]["sequences"] == 12 and c["counts"]["documents"] == 0 and c["sample_documents"] == []
    assert c["noise"]["seeded"] is True
    text = visible_text(d.to_html())
    for needle in ("Adding or removing any one document", "δ = 0", "REPRODUCIBLE DEMO — NOT FOR RELEASE",
                   "NIST SP 800-226", "Unit of privacy", "Noise sampler", "Seed policy", "ε per step",
                   "No LLM step is recorded", "sport, tech, business"):
        assert needle in text, needle
    questions = {q["question"]: q["answer"] for q in c["nist_checklist"]}
    for q in ("Unit of privacy (who is protected)", "Privacy loss ε and δ", "What was released", "How many times",
              "By which mechanism", "Noise sampler", "Seed policy"):
        assert questions[q] and questions[q] != "—", q
    assert "2 DP release(s)" in questions["How many times"]


def test_no_raw_configuration_key_is_shown(dossier_runs: dict[str, Path]) -> None:
    """Every parameter the run recorded is shown by its human label; no config key (``density_density``,
    ``client_fraction``…) appears in the page, and no key was left out for want of a label."""
    for name in ("cli", "canary"):
        run = dossier_runs[name]
        report = json.loads((run / "privacy_report.json").read_text(encoding="utf-8"))
        config = json.loads((run / "run_config.json").read_text(encoding="utf-8"))
        d = build_dossier(run)
        text = visible_text(d.to_html())
        keys = set(report["parameters"]) | set(config)
        assert {"density_density", "client_fraction", "terms_per_doc"} <= keys
        for key in keys:
            if "_" in key:
                assert key not in text, key
        assert set(report["parameters"]) - PRIVATE_PARAMETER_KEYS <= set(PARAMETER_LABELS)
        assert d.content["settings_left_out"] == 0
        labels = {s["label"] for s in d.content["settings"]}
        assert {"Density estimator (used)", "Share of the held-out part kept as unlabelled client data",
                "Distinct terms counted per document (S)"} <= labels


def test_a_setting_without_a_label_is_left_out_not_shown(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(dossier_runs["cli"], run)
    report = json.loads((run / "privacy_report.json").read_text(encoding="utf-8"))
    report["parameters"]["secret_new_setting_xyz"] = "VALUE-NOBODY-LABELLED"
    (run / "privacy_report.json").write_text(json.dumps(report), encoding="utf-8")
    d = build_dossier(run)
    assert d.content["settings_left_out"] == 1
    assert "VALUE-NOBODY-LABELLED" not in d.to_html() and "secret_new_setting_xyz" not in d.to_html()


def test_the_uploaded_corpus_run_shows_person_unit_model_template_and_documents(dossier_runs: dict[str, Path]) -> None:
    d = build_dossier(dossier_runs["canary"], edition="release")
    c = d.content
    assert c["guarantee"]["unit"] == "one person"
    assert c["guarantee"]["sentence"].startswith("Adding or removing any one person's documents")
    assert all("person's documents were in the corpus" in s for s in c["guarantee"]["risk_sentences"])
    gen = c["generation"]
    assert gen["models"] == ["scripted-test-llm"] and gen["document_type"] == "a short news note"
    n = c["counts"]
    assert "{keyphrases}" in gen["template"] and gen["prompts_sent"] == n["sequences"] == 12
    assert n["documents"] + n["failed_generations"] == 12 and n["documents"] >= 5
    docs = c["sample_documents"]
    assert len(docs) == 5 and {d["label"] for d in docs} == {"sport", "tech", "business"}
    assert all(doc["text"].startswith("A short synthetic note about ") for doc in docs)
    assert c["run"]["id"] == dossier_runs["canary"].name  # a folder name create_run_dir makes is the run id
    assert c["run"]["corpus"].startswith("a private corpus")


def test_public_inputs_carry_their_licences() -> None:
    rows = public_inputs({"embedding_model": "all-MiniLM-L6-v2"}, {"corpus": "demo:bbc", "vocabulary": "glove"})
    by = {r["input"]: r for r in rows}
    assert "PDDL" in by["Public vocabulary V"]["licence"]
    assert "Apache-2.0" in by["Embedding model"]["licence"]
    assert "BBC" in by["Demo corpus (public, standing in for a private one)"]["licence"]
    user = public_inputs({}, {"vocabulary": "terms.txt", "vocabulary_sha256": "ab" * 32})
    assert user[0]["sha256"] == "ab" * 32 and "User-supplied" in user[0]["licence"]


def test_a_reopened_run_gives_the_same_dossier(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    """From the run folder alone: a copy of the folder elsewhere (a reopened run) gives the same content."""
    src = dossier_runs["canary"]
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    a, b = build_dossier(src).to_dict(), build_dossier(dst).to_dict()
    a.pop("generated"), b.pop("generated")
    assert a == b


def test_html_is_one_self_contained_printable_file(dossier_runs: dict[str, Path]) -> None:
    html = build_dossier(dossier_runs["canary"]).to_html()
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I)
    assert "@import" not in html and "url(" not in html
    assert "@page" in html and "break-before: page" in html and "<svg" in html


def test_refusals(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(DossierError, match="edition"):
        build_dossier(dossier_runs["cli"], edition="public")
    with pytest.raises(DossierError, match="does not exist"):
        build_dossier(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DossierError, match="no privacy report"):
        build_dossier(tmp_path / "empty")
    with pytest.raises(DossierError, match="sample_documents"):
        build_dossier(dossier_runs["cli"], sample_documents=-1)


def test_a_linked_file_in_the_run_folder_is_refused(canary_copy: Path) -> None:
    """A dossier is built from the run folder's own files: a link named documents.jsonl could point anywhere
    (the private corpus)."""
    target = canary_copy / "linked.jsonl"
    (canary_copy / "documents.jsonl").rename(target)
    (canary_copy / "documents.jsonl").symlink_to(target)
    with pytest.raises(DossierError, match="symbolic link"):
        build_dossier(canary_copy)


def test_odd_reports_still_give_a_dossier(tmp_path: Path) -> None:
    """A hand-made or older run folder (short parameter names, a ledger's to_dict() in place of the events, no run
    config) still gives a dossier, with what it records."""
    from llm_fakes import make_run_dir

    run = make_run_dir(tmp_path, 3)
    report = json.loads((run / "privacy_report.json").read_text(encoding="utf-8"))
    report["events"] = {"events": report["events"]}
    (run / "privacy_report.json").write_text(json.dumps(report), encoding="utf-8")
    (run / "run_config.json").unlink()
    c = build_dossier(run).content
    assert [(s["step"], s["epsilon"]) for s in c["guarantee"]["steps"]] == [("vocabulary", 1.0), ("kde", 5.0)]
    assert {s["label"] for s in c["settings"]} == {"Distinct terms counted per document (S)",
                                                   "Private vocabulary size (N)", "Keyphrases per sequence (L)",
                                                   "Kernel bandwidth σ"}
    assert c["run"]["id"].startswith("run-") and len(c["mechanisms"]) == 2


def test_text_from_the_run_is_escaped(canary_copy: Path) -> None:
    """A synthetic document (LLM output) that holds markup stays text: the page runs no script and loads nothing."""
    docs = (canary_copy / "documents.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(docs[0])
    first["text"] = '<script>alert(1)</script><img src="https://example.org/x.png"></style>'
    (canary_copy / "documents.jsonl").write_text("\n".join([json.dumps(first)] + docs[1:]) + "\n", encoding="utf-8")
    html = build_dossier(canary_copy).to_html()
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert html.count("</style>") == 1
