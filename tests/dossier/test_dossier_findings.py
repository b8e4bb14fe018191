"""The internal edition's further private findings (issue 34 §1, §2): the disclosure test of a DP run, the overlay of
real and synthetic embeddings, the ledger's left-out counts and the corpus's ε to date per unit (``dpkps report
--internal --corpus``), the policy's disclosure rule — and none of it in the release edition or the bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dossier_helpers import CANARIES, visible_text

from dpkps_core.cli import main
from dpkps_core.dossier import BLOCK, RESTRICT, SHARE, Policy, PolicyError, build_dossier, decide
from dpkps_core.dossier.internal import PROJECTION_FILE
from dpkps_core.evaluation.disclosure import DISCLOSURE_FILE, disclosure_for_run, write_disclosure
from dpkps_core.evaluation.run import load_run
from dpkps_core.dossier.export import build_bundle, check_allowed, collect_bundle
from dpkps_core.errors import ExportError


def test_the_disclosure_test_does_not_flag_a_dp_run(dossier_runs: dict[str, Path]) -> None:
    """Documents written from DP keyphrase sequences (scripted LLM) against the run's own training part and its
    held-out part: no evidence of leakage and a bound within the claimed ε (deterministic: fixed seeds, fixed run)."""
    result = disclosure_for_run(load_run(dossier_runs["canary"]))
    assert result.synthetic_documents > 0 and result.reference_per_part > 0
    assert not result.leakage and result.verdict == "no evidence of leakage"
    assert result.claimed_epsilon == pytest.approx(10.0)
    assert result.epsilon_lower_bound <= result.claimed_epsilon


def _projection(run: Path) -> None:
    points = [{"x": float(i), "y": float(i % 7), "source": "real", "label": "sport"} for i in range(20)]
    points += [{"x": float(i) + 0.5, "y": float(i % 5), "source": "synthetic", "label": c}
               for i, c in enumerate(["sport", "tech", "business"] * 5)]
    (run / PROJECTION_FILE).write_text(json.dumps({"private": True, "method": "tsne", "points": points}),
                                       encoding="utf-8")


def test_internal_edition_shows_disclosure_and_overlay_release_never(canary_copy: Path, tmp_path: Path) -> None:
    write_disclosure(disclosure_for_run(load_run(canary_copy)), canary_copy)
    _projection(canary_copy)
    d = build_dossier(canary_copy, edition="internal")
    i = d.content["internal"]
    assert i["disclosure"]["verdict"] == "no evidence of leakage"
    assert i["overlay"]["real"] == 20 and i["overlay"]["synthetic"] == 15
    html = d.to_html()
    for needle in ("Disclosure test (training vs held-out matches)", "NO EVIDENCE OF LEAKAGE",
                   "Disclosure test: matched training vs held-out documents", "Overlay of real and synthetic documents",
                   "synthetic: business", "TSNE of sentence embeddings"):
        assert needle in html, needle
    release = build_dossier(canary_copy)
    for name, data in release.files().items():
        text = data.decode("utf-8")
        assert "isclosure" not in text and "Overlay" not in text and "held-out matches" not in text, name
    bundle = collect_bundle(canary_copy)
    assert DISCLOSURE_FILE not in bundle and PROJECTION_FILE not in bundle
    assert all(b"held-out matches" not in data and b"train_matched" not in data for data in bundle.values())
    for name in (DISCLOSURE_FILE, PROJECTION_FILE):  # asked for by name, the export refuses them
        with pytest.raises(ExportError):
            check_allowed(name)
        with pytest.raises(ExportError):
            build_bundle(canary_copy, out_zip=tmp_path / "b.zip", files=["sequences.jsonl", name])
    assert not (tmp_path / "b.zip").exists()


def test_report_internal_with_the_corpus_adds_the_ledger_figures(dossier_runs: dict[str, Path], canary_copy: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(dossier_runs["corpus"].parent / "ledgers"))
    out = canary_copy.parent / "internal-out"
    assert main(["report", "--run", str(canary_copy), "--internal", "--corpus", str(dossier_runs["corpus"]),
                 "--out", str(out)]) == 0
    data = json.loads((out / "dossier_internal.json").read_text(encoding="utf-8"))
    led = data["internal"]["ledger"]
    assert led is not None and led["run"] == canary_copy.name
    assert [r["what"] for r in led["releases"]] and all(r["left_out"] >= 0 for r in led["releases"])
    assert led["units"] == 25  # the canary corpus's persons (person unit: 25 person ids)
    assert led["epsilon_to_date"]["largest"] == pytest.approx(10.0)  # ε_voc 4 + ε_kde 6, one run on this corpus
    assert not data["internal"]["not_in_run_folder"]
    text = visible_text((out / "dossier_internal.html").read_text(encoding="utf-8"))
    assert "The corpus's ε to date per unit (persistent ledger)" in text and "Left out of this run's releases" in text
    # the release edition refuses the option: the ledger's figures are private
    assert main(["report", "--run", str(canary_copy), "--corpus", str(dossier_runs["corpus"])]) == 2
    assert "add --internal" in capsys.readouterr().err
    release = build_dossier(canary_copy).to_html()  # and the release edition holds none of the private strings
    assert not [v for v in CANARIES.values() if v in release]


def test_policy_disclosure_rule() -> None:
    base = dict(epsilon_total=5.0, epsilon_cap=None, seeded=False, audit=None, utility_ratio=None)
    require = Policy(required_disclosure_verdict="no-leakage")
    beyond = {"verdict": "leakage beyond the claimed ε", "epsilon_lower_bound": 7.0, "claimed_epsilon": 5.0,
              "p_value": 1e-9}
    above = {**beyond, "verdict": "leakage", "epsilon_lower_bound": 1.2}
    clean = {**beyond, "verdict": "no evidence of leakage", "epsilon_lower_bound": 0.0, "p_value": 0.7}
    assert decide(Policy(), **base, disclosure=beyond).verdict == BLOCK  # always, whatever the policy
    assert decide(require, **base, disclosure=above).verdict == RESTRICT
    assert decide(Policy(), **base, disclosure=above).verdict == SHARE  # within the claim, not required
    assert decide(require, **base, disclosure=None).verdict == RESTRICT
    assert decide(require, **base, disclosure=clean).verdict == SHARE
    reasons = decide(require, **base, disclosure=above).reasons
    assert [r["rule"] for r in reasons] == ["required_disclosure_verdict"]
    with pytest.raises(PolicyError):
        Policy(required_disclosure_verdict="maybe")


def test_evaluate_disclosure_only_writes_the_private_file(canary_copy: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{CANARIES['person']}3\nnobody-at-all\n", encoding="utf-8")
    assert main(["evaluate", "--run", str(canary_copy), "--disclosure-only", "--identifiers", str(ids)]) == 0
    out = capsys.readouterr().out
    assert "disclosure test: NO EVIDENCE OF LEAKAGE" in out and "PRIVATE" in out
    written = (canary_copy / DISCLOSURE_FILE).read_text(encoding="utf-8")
    assert json.loads(written)["settings"]["identifiers"] == 2 and CANARIES["person"] not in written
    assert (canary_copy / DISCLOSURE_FILE).stat().st_mode & 0o777 == 0o600
    assert not (canary_copy / "evaluation.json").stat().st_mtime > (canary_copy / DISCLOSURE_FILE).stat().st_mtime
