"""Release bundle: allowlist, CSV escaping, report, manifest, no secrets."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from llm_fakes import FakeBackend, make_run_dir

from dpkps_core.errors import ExportError
from dpkps_core.dossier.export import (
    ALLOWED_RUN_FILES,
    PRIVATE_CORPUS_PLACEHOLDER,
    build_bundle,
    bundle_bytes,
    check_allowed,
    collect_bundle,
    csv_safe,
)
from dpkps_core.llm import GenerationSettings, PromptConfig, run_generation
from dpkps_core.records.report_markdown import DEMO_HEADING
from dpkps_core.records.runfolder import DOCUMENTS_FILE

EXPECTED = {
    "documents.csv", "documents.jsonl", "documents.parquet", "sequences.jsonl", "privacy_report.json",
    "privacy_report.md", "run_config.json", "private_vocabulary.json", "audit_log.jsonl",
    "generation_failures.jsonl", "manifest.json", "dossier.html", "dossier.json", "reproduce.md",
    "reproduce_config.json",
}


def _generated_run(tmp_path: Path, *, seed_policy: str = "os-entropy", canary: str | None = None) -> Path:
    run = make_run_dir(tmp_path, 4, seed_policy=seed_policy, canary=canary)
    seqs = [json.loads(x) for x in (run / "sequences.jsonl").read_text().splitlines()]
    run_generation(seqs, backend=FakeBackend({4: ["fatal"]}), prompt_config=PromptConfig(doc_type="a note"),
                   run_dir=run, settings=GenerationSettings(retries=0, max_tokens=50, backoff_base=0.0))
    return run


@pytest.mark.parametrize(
    "value,expected",
    [("=SUM(A1)", "'=SUM(A1)"), ("+1", "'+1"), ("-2", "'-2"), ("@cmd", "'@cmd"), ("\tx", "'\tx"),
     ("\rx", "'\rx"), ("plain", "plain"), ("a=b", "a=b"), ("", ""), (None, "")],
)
def test_csv_safe(value: object, expected: str) -> None:
    assert csv_safe(value) == expected


def test_allowlist_refuses_private_and_unknown_files(tmp_path: Path) -> None:
    for name in ALLOWED_RUN_FILES:
        assert check_allowed(name) == name
    for bad in ("split.json", "evaluation.json", "sub/split.json", "../corpus.csv", "notes.txt", "", "/etc/passwd",
                "..\\evaluation.json"):
        with pytest.raises(ExportError):
            check_allowed(bad)
    run = _generated_run(tmp_path, canary="CANARY-EXPORT")
    with pytest.raises(ExportError, match="never exported"):
        build_bundle(run, out_zip=tmp_path / "b.zip", files=["sequences.jsonl", "privacy_report.json", "split.json"])
    with pytest.raises(ExportError, match="never exported"):
        build_bundle(run, out_zip=tmp_path / "b.zip", files=list(ALLOWED_RUN_FILES) + ["evaluation.json"])
    with pytest.raises(ExportError, match="required"):
        build_bundle(run, out_zip=tmp_path / "b.zip", files=["sequences.jsonl"])
    assert not (tmp_path / "b.zip").exists()


@pytest.mark.parametrize("prefix", ["sub/", "a/b/", "../", "./", "/tmp/", "sub\\", "..\\"])
def test_allowlist_refuses_every_allowed_name_inside_a_sub_folder(prefix: str) -> None:
    """The allowlist is of file names IN the run folder: ``sub/<allowed name>`` is another file."""
    for name in ALLOWED_RUN_FILES:
        with pytest.raises(ExportError, match="not on the export allowlist"):
            check_allowed(prefix + name)


def test_bundle_refuses_a_sub_folder_copy_of_an_allowed_file(tmp_path: Path) -> None:
    run = _generated_run(tmp_path)
    (run / "sub").mkdir()
    (run / "sub" / "private_vocabulary.json").write_text('{"terms": ["CANARY-SUBFOLDER"]}', encoding="utf-8")
    files = ["sequences.jsonl", "privacy_report.json", "sub/private_vocabulary.json"]
    with pytest.raises(ExportError, match="not on the export allowlist"):
        build_bundle(run, out_zip=tmp_path / "b.zip", out_dir=tmp_path / "bundle", files=files)
    assert not (tmp_path / "b.zip").exists() and not (tmp_path / "bundle").exists()
    assert b"CANARY-SUBFOLDER" not in bundle_bytes(run)  # the default bundle never looks into sub-folders


@pytest.mark.parametrize("name, target", [("private_vocabulary.json", "corpus"), ("sequences.jsonl", "split.json"),
                                          ("audit_log.jsonl", "evaluation.json")])
def test_bundle_refuses_symlinks_in_the_run_folder(tmp_path: Path, name: str, target: str) -> None:
    """An allowlisted NAME may be a link to a private file: the bundle refuses it and writes nothing."""
    run = _generated_run(tmp_path, canary="CANARY-SYMLINK")
    pointed = tmp_path / "private_corpus.csv" if target == "corpus" else run / target
    assert pointed.is_file() and "CANARY-SYMLINK" in pointed.read_text(encoding="utf-8")
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(pointed)
    with pytest.raises(ExportError, match="symbolic link"):
        build_bundle(run, out_zip=tmp_path / "b.zip", out_dir=tmp_path / "bundle")
    with pytest.raises(ExportError, match="symbolic link"):
        bundle_bytes(run)
    assert not (tmp_path / "b.zip").exists() and not (tmp_path / "bundle").exists()


def test_bundle_refuses_a_folder_under_an_allowed_name(tmp_path: Path) -> None:
    run = _generated_run(tmp_path)
    (run / "run_config.json").unlink()
    (run / "run_config.json").mkdir()
    with pytest.raises(ExportError, match="not a regular file"):
        build_bundle(run, out_zip=tmp_path / "b.zip")
    assert not (tmp_path / "b.zip").exists()


def test_bundle_contents_zip_folder_manifest(tmp_path: Path) -> None:
    run = _generated_run(tmp_path, canary="CANARY-EXPORT")
    # a document whose text starts like a formula
    with (run / DOCUMENTS_FILE).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "seq-000004", "label": "=HYPERLINK(\"x\")", "keyphrases": ["term4"],
                             "text": "=1+1 and more", "model": "fake-model"}) + "\n")
    zip_path, folder = tmp_path / "out" / "bundle.zip", tmp_path / "bundle"
    manifest = build_bundle(run, out_zip=zip_path, out_dir=folder)
    assert set(manifest.names) == EXPECTED
    with zipfile.ZipFile(zip_path) as zf:
        assert set(zf.namelist()) == EXPECTED
        for f in manifest.files:
            data = zf.read(f.name)
            assert hashlib.sha256(data).hexdigest() == f.sha256 == hashlib.sha256((folder / f.name).read_bytes()).hexdigest()
            assert b"CANARY-EXPORT" not in data
    listed = json.loads((folder / "manifest.json").read_text())["files"]
    assert {f["name"] for f in listed} == EXPECTED - {"manifest.json"}
    assert bundle_bytes(run) == zip_path.read_bytes()  # deterministic

    rows = list(csv.DictReader(io.StringIO((folder / "documents.csv").read_text(encoding="utf-8"))))
    assert [r["id"] for r in rows] == ["seq-000001", "seq-000002", "seq-000003", "seq-000004"]
    last = rows[-1]
    assert last["text"] == "'=1+1 and more" and last["label"].startswith("'=")
    assert rows[0]["keyphrases"] == "term1; goal; market" and rows[0]["model"] == "fake-model"

    import pyarrow.parquet as pq

    table = pq.read_table(folder / "documents.parquet")
    assert table.column_names == ["id", "text", "label", "keyphrases", "model"]
    assert table.column("keyphrases").to_pylist()[0] == ["term1", "goal", "market"]
    assert table.column("text").to_pylist()[-1] == "=1+1 and more"  # only the CSV is escaped

    report = json.loads((folder / "privacy_report.json").read_text())
    gen = report["generation"]
    assert gen["backend"] == "fake" and gen["model"] == "fake-model"
    assert gen["counts"] == {"sequences": 4, "documents": 4, "failed": 0, "prompts_sent": 4}
    assert gen["parameters"]["max_tokens"] == 50
    assert report["epsilon_total"] == 6.0
    md = (folder / "privacy_report.md").read_text(encoding="utf-8")
    assert DEMO_HEADING not in md and "Total ε: **6**" in md and "GloVe 6B 400k" in md
    assert "all-MiniLM-L6-v2" in md and "noisy counts of 400,000 public terms" in md and "fake-model" in md
    assert "Document type: a note" in md and "Class names in prompts: **yes**" in md  # the default (public names)
    assert gen["prompt_config"]["include_label"] is True
    failures = (folder / "generation_failures.jsonl").read_text()
    assert failures == ""  # seq-000004 failed, but now has a document


def test_demo_seed_policy_gets_big_heading(tmp_path: Path) -> None:
    run = _generated_run(tmp_path, seed_policy="seeded-demo-not-for-release")
    files = collect_bundle(run)
    md = files["privacy_report.md"].decode("utf-8")
    assert md.startswith(DEMO_HEADING + "\n") and "NOT FOR RELEASE" in DEMO_HEADING
    assert json.loads(files["generation_failures.jsonl"])["id"] == "seq-000004"


def test_export_refuses_secret_and_bad_targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _generated_run(tmp_path)
    secret = "sk-live-SECRET-123456789"
    cfg = json.loads((run / "run_config.json").read_text())
    cfg["oops"] = secret
    (run / "run_config.json").write_text(json.dumps(cfg))
    with pytest.raises(ExportError, match="API key"):
        build_bundle(run, out_zip=tmp_path / "b.zip", secrets=[secret])
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with pytest.raises(ExportError, match="API key"):
        bundle_bytes(run)
    assert not (tmp_path / "b.zip").exists()
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ExportError, match="not be the run folder"):
        build_bundle(run, out_dir=run)
    with pytest.raises(ExportError, match="Say where"):
        build_bundle(run)
    (run / "privacy_report.json").unlink()
    with pytest.raises(ExportError, match="privacy_report.json"):
        bundle_bytes(run)


def test_private_file_fingerprints_are_dropped_from_run_config(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path, 2)
    cfg = {"epsilon_kde": 5.0, "corpus_sha256": "ab" * 32, "corpus": {"path": "c.csv", "fingerprint": "cd" * 32}}
    (run / "run_config.json").write_text(json.dumps(cfg))
    exported = json.loads(collect_bundle(run)["run_config.json"])
    assert exported == {"epsilon_kde": 5.0, "corpus": PRIVATE_CORPUS_PLACEHOLDER}


def test_bundle_holds_no_private_path_or_file_name(tmp_path: Path) -> None:
    """Issue 11 §4: the run folder keeps the corpus path for re-runs; the bundle names no private file."""
    run = make_run_dir(tmp_path, 2)
    cfg = {"corpus": "/home/alice/ward7_patients_2024.csv", "corpus_path": "/home/alice/ward7_patients_2024.csv",
           "text_column": "note", "eps_voc": 5.0}
    (run / "run_config.json").write_text(json.dumps(cfg))
    files = collect_bundle(run)
    assert all(b"ward7_patients" not in data and b"/home/alice" not in data for data in files.values())
    exported = json.loads(files["run_config.json"])
    assert exported["corpus"] == PRIVATE_CORPUS_PLACEHOLDER and exported["eps_voc"] == 5.0
    assert "ward7_patients" in (run / "run_config.json").read_text()  # kept locally for re-runs
    demo = {"corpus": "demo:bbc", "eps_voc": 5.0}
    (run / "run_config.json").write_text(json.dumps(demo))
    assert json.loads(collect_bundle(run)["run_config.json"])["corpus"] == "demo:bbc"


def test_export_without_generation(tmp_path: Path) -> None:
    run = make_run_dir(tmp_path, 3)
    files = collect_bundle(run)
    assert files["documents.jsonl"] == b"" and files["documents.csv"].startswith(b"id,text,label,keyphrases,model")
    assert json.loads(files["privacy_report.json"])["generation"]["counts"]["documents"] == 0
    assert "No LLM generation" in files["privacy_report.md"].decode()


def test_the_bundle_is_read_back_by_export_alone(tmp_path: Path) -> None:
    """issue 32 §7: page 8 reads the collected bundle through export.BundleContents (its report, documents, number of
    sequences and the members offered one by one), never by parsing member names itself."""
    from dpkps_core.dossier.export import SINGLE_DOWNLOADS, BundleContents

    files = {"privacy_report.json": json.dumps({"epsilon_total": 10.0}).encode(),
             "documents.jsonl": b'{"id": "a", "text": "x"}\n\n{"id": "b", "text": "y"}\n',
             "sequences.jsonl": b'{"id": "a"}\n{"id": "b"}\n{"id": "c"}\n',
             "documents.csv": b"id,text\n", "privacy_report.md": b"# report\n"}
    contents = BundleContents.of(files)
    assert contents.report == {"epsilon_total": 10.0} and contents.sequences == 3
    assert [d["id"] for d in contents.documents] == ["a", "b"]
    assert [name for name, _, _ in contents.single_downloads()] == [name for name, _ in SINGLE_DOWNLOADS]
