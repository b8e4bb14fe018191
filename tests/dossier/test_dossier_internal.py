"""The internal edition (issue 34 §1): private findings from the run folder, the share decision from a policy file
with each reason named, the INTERNAL mark on every printed page, and the export's refusal of it by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dossier_helpers import visible_text

from dpkps_core.dossier import BLOCK, RESTRICT, SHARE, Policy, PolicyError, build_dossier, decide, load_policy
from dpkps_core.dossier.internal import APP_FINGERPRINT_NAME
from dpkps_core.dossier.render import INTERNAL_MARK
from dpkps_core.errors import ExportError
from dpkps_core.dossier.export import ALLOWED_RUN_FILES, build_bundle, check_allowed, collect_bundle
from dpkps_core.records.runfolder import INTERNAL_DOSSIER_FILES


def test_internal_edition_reads_evaluation_audit_and_fingerprint(dossier_runs: dict[str, Path]) -> None:
    run = dossier_runs["canary"]
    evaluation = json.loads((run / "evaluation.json").read_text(encoding="utf-8"))
    d = build_dossier(run, edition="internal")
    i = d.content["internal"]
    u = i["utility"]
    by = {r["key"]: r for r in u["accuracies"]}
    syn = evaluation["synthetic_accuracy"]
    assert by["synthetic_accuracy"]["mean"] == pytest.approx(syn["mean"])
    assert (by["synthetic_accuracy"]["low"], by["synthetic_accuracy"]["high"]) == pytest.approx(
        (syn["interval"]["low"], syn["interval"]["high"]))
    assert set(by["real_baseline_accuracy"]["per_class_recall"]) == {"sport", "tech", "business"}
    assert u["ratio"]["estimate"] == pytest.approx(evaluation["synthetic_to_real"]["estimate"])
    assert u["chance_accuracy"] == pytest.approx(evaluation["chance_accuracy"])
    assert i["audit"]["lower_bound"] == pytest.approx(0.42) and i["audit"]["claimed_epsilon"] == 10
    assert set(i["fingerprint"]) == {"file_sha256", "content_sha256"}
    assert i["run_folder"] == run.name
    html = d.to_html()
    for needle in ("Downstream accuracy", "Synthetic / real accuracy", "Recall per class", "Empirical lower bound",
                   "0.42", "Corpus fingerprint", "dpkps_core ledger"):
        assert needle in html, needle
    assert "Accuracy, synthetic vs real, with 95 % intervals" in html  # the chart


def test_internal_mark_on_every_printed_page(dossier_runs: dict[str, Path]) -> None:
    html = build_dossier(dossier_runs["cli"], edition="internal").to_html()
    css = html[html.index("<style>"):html.index("</style>")]
    assert f'@top-center {{ content: "{INTERNAL_MARK}"' in css  # running header of every page
    assert f'@bottom-center {{ content: "{INTERNAL_MARK}' in css  # and footer
    assert f'<div class="banner">{INTERNAL_MARK}</div>' in html and "<title>INTERNAL" in html
    release = build_dossier(dossier_runs["cli"]).to_html()
    assert "INTERNAL" not in release


def test_decision_line_and_reasons_from_a_toml_policy(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[policy]\nmax_epsilon_per_release = 8\nmax_epsilon_per_unit = 25\n'
                      'required_audit_verdict = "consistent"\nmin_utility_ratio = 0.01\nallow_seeded_demo = true\n',
                      encoding="utf-8")
    d = build_dossier(dossier_runs["canary"], edition="internal", policy=policy)
    dec = d.content["decision"]
    assert dec["verdict"] == BLOCK
    rules = {r["rule"]: r for r in dec["reasons"]}
    assert rules["max_epsilon_per_release"]["level"] == BLOCK and "exceeds" in rules["max_epsilon_per_release"]["text"]
    assert rules["max_epsilon_per_unit"]["level"] == SHARE
    assert rules["required_audit_verdict"]["level"] == SHARE and "0.42" in rules["required_audit_verdict"]["text"]
    assert rules["min_utility_ratio"]["level"] == SHARE
    html = visible_text(d.to_html())
    assert "DO NOT SHARE" in html and "policy.toml" in html and "exceeds the policy's maximum per release" in html


def test_decision_from_a_json_policy_and_the_default(dossier_runs: dict[str, Path], tmp_path: Path) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"max_epsilon_per_release": 12, "allow_seeded_demo": True,
                                  "min_utility_ratio": 5.0}), encoding="utf-8")
    d = build_dossier(dossier_runs["canary"], edition="internal", policy=policy)
    assert d.content["decision"]["verdict"] == RESTRICT  # within ε, but utility under the minimum
    default = build_dossier(dossier_runs["cli"], edition="internal").content["decision"]
    assert default["verdict"] == BLOCK and default["reasons"][0]["rule"] == "allow_seeded_demo"  # seeded demo


@pytest.mark.parametrize("kwargs, verdict, rule", [
    ({}, SHARE, "policy"),
    ({"seeded": True}, BLOCK, "allow_seeded_demo"),
    ({"audit": {"verdict_kind": "violation", "empirical_epsilon_lower_bound": 12, "claimed_epsilon": 10}}, BLOCK,
     "required_audit_verdict"),
    ({"audit": {"verdict_kind": "inconclusive"}, "policy": Policy(required_audit_verdict="consistent")}, RESTRICT,
     "required_audit_verdict"),
    ({"audit": {"verdict_kind": "inconclusive"}, "policy": Policy(required_audit_verdict="no-violation")}, SHARE,
     "required_audit_verdict"),
    ({"policy": Policy(required_audit_verdict="consistent")}, RESTRICT, "required_audit_verdict"),
    ({"epsilon_cap": None, "policy": Policy(max_epsilon_per_unit=20)}, RESTRICT, "max_epsilon_per_unit"),
    ({"epsilon_cap": 30, "policy": Policy(max_epsilon_per_unit=20)}, BLOCK, "max_epsilon_per_unit"),
    ({"utility_ratio": None, "policy": Policy(min_utility_ratio=0.8)}, RESTRICT, "min_utility_ratio"),
    ({"utility_ratio": 0.9, "policy": Policy(min_utility_ratio=0.8)}, SHARE, "min_utility_ratio"),
])
def test_decide_names_each_rule(kwargs: dict, verdict: str, rule: str) -> None:
    args = {"epsilon_total": 6.0, "epsilon_cap": 20.0, "seeded": False, "audit": None, "utility_ratio": None}
    policy = kwargs.pop("policy", Policy())
    args.update(kwargs)
    d = decide(policy, **args)
    assert d.verdict == verdict and rule in {r["rule"] for r in d.reasons}


@pytest.mark.parametrize("text, suffix, message", [
    ('{"max_epsilon": 3}', ".json", "unknown setting"),
    ('{"max_epsilon_per_release": -1}', ".json", "finite number > 0"),
    ('{"required_audit_verdict": "pass"}', ".json", "one of none"),
    ("not = [toml", ".toml", "not valid TOML"),
    ("[1, 2]", ".json", "must hold an object"),
])
def test_bad_policy_files_are_one_sentence_errors(tmp_path: Path, text: str, suffix: str, message: str) -> None:
    path = tmp_path / f"p{suffix}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PolicyError, match=message):
        load_policy(path)


def test_the_export_refuses_the_internal_edition_by_name(dossier_runs: dict[str, Path], canary_copy: Path,
                                                         tmp_path: Path) -> None:
    for name in INTERNAL_DOSSIER_FILES:
        assert name not in ALLOWED_RUN_FILES
        with pytest.raises(ExportError, match="holds private data and is never exported"):
            check_allowed(name)
    for name, data in build_dossier(canary_copy, edition="internal").files().items():
        (canary_copy / name).write_bytes(data)  # `report --internal` writes it into the run folder
    with pytest.raises(ExportError, match="never exported"):
        build_bundle(canary_copy, out_zip=tmp_path / "b.zip",
                     files=["sequences.jsonl", "privacy_report.json", "dossier_internal.html"])
    assert not (tmp_path / "b.zip").exists()
    bundle = collect_bundle(canary_copy)  # the default bundle leaves it where it is
    assert not set(INTERNAL_DOSSIER_FILES) & set(bundle)
    assert all(b"INTERNAL" not in data for data in bundle.values())


def test_the_app_fingerprint_file_name_matches_the_app() -> None:
    from studio.session import CORPUS_FINGERPRINT_FILE

    assert APP_FINGERPRINT_NAME == CORPUS_FINGERPRINT_FILE
