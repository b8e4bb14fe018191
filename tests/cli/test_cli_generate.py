"""CLI generate/export: kill + resume, canaries never leave the private side, API key never written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from llm_fakes import ChatServer, chat_server, make_run_dir, serve  # noqa: F401 (fixture)

from dpkps_core.cli import main

REPO = Path(__file__).resolve().parents[2]
CANARY = "CANARY-7f3a9c-PRIVATE"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _all_files_text(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_help_explains_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd, options in (
        ("generate", ["--sequences", "--backend", "--base-url", "--model", "--api-key-env", "--doc-type", "--few-shot",
                      "--include-labels", "--concurrency", "--timeout", "--retries", "--max-tokens", "--temperature",
                      "--threads", "--limit", "--estimate-only", "--price-per-1k", "--out"]),
        ("export", ["--run", "--zip", "--folder"]),
    ):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        out = capsys.readouterr().out
        for opt in options:
            assert opt in out, opt


def test_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["generate", "--sequences", str(tmp_path / "nope.jsonl"), "--doc-type", "a note"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    run = make_run_dir(tmp_path, 2)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert main(["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", "openai", "--doc-type", "a note"]) == 2
    assert "No API key" in capsys.readouterr().err
    assert main(["export", "--run", str(tmp_path / "missing"), "--zip", str(tmp_path / "x.zip")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_estimate_only_makes_no_call(tmp_path: Path, chat_server, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    script = ChatServer()
    url = serve(chat_server, script)
    run = make_run_dir(tmp_path, 3)
    rc = main(["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", "openai", "--base-url", url,
               "--model", "m", "--doc-type", "a news article", "--estimate-only", "--price-per-1k", "0.002",
               "--max-tokens", "100"])
    assert rc == 0 and script.bodies == []
    cap = capsys.readouterr()
    assert "3 prompts" in cap.err and "≤300 completion tokens" in cap.err
    assert "Write a news article that contains the following terms: term1, goal, market." in cap.out
    assert not (run / "documents.jsonl").exists()


def test_canaries_never_reach_requests_audit_or_bundle(
    tmp_path: Path, chat_server, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    script = ChatServer({2: ["500", "ok"]})
    url = serve(chat_server, script)
    run = make_run_dir(tmp_path, 5, canary=CANARY)
    corpus = Path(json.loads((run / "run_config.json").read_text())["corpus_path"])
    examples = tmp_path / "public_examples.txt"
    examples.write_text("PUBLIC-EXAMPLE-ONE is a public note.\n\nPUBLIC-EXAMPLE-TWO too.\n", encoding="utf-8")
    base = ["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", "openai", "--base-url", url,
            "--model", "test-model", "--doc-type", "a clinical note", "--quiet", "--backoff-base", "0.01"]

    # The private corpus (or a copy of it) is refused as a few-shot file, found through run_config.json.
    assert main(base + ["--few-shot", str(corpus)]) == 2
    assert "private corpus" in capsys.readouterr().err
    copy = tmp_path / "renamed.csv"
    copy.write_bytes(corpus.read_bytes())
    assert main(base + ["--few-shot", str(copy)]) == 2
    assert "same content" in capsys.readouterr().err
    assert main(base + ["--few-shot", str(copy), "--private-corpus", str(corpus)]) == 2
    assert script.bodies == []

    assert main(base + ["--few-shot", str(examples)]) == 0
    assert len(script.bodies) == 6 and all("PUBLIC-EXAMPLE-ONE" in b for b in script.bodies)
    assert all(("sport" in b) != ("business" in b) for b in script.bodies)  # each one's public class name (default)
    zip_path, folder = tmp_path / "bundle.zip", tmp_path / "bundle"
    assert main(["export", "--run", str(run), "--zip", str(zip_path), "--folder", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "documents.parquet" in out

    needle = CANARY.encode()
    assert (run / "split.json").read_bytes().count(needle) == 1  # the canaries are really there
    for body in script.bodies:
        assert CANARY not in body
    assert needle not in (run / "audit_log.jsonl").read_bytes()
    with zipfile.ZipFile(zip_path) as zf:
        names = zf.namelist()
        assert "split.json" not in names and "evaluation.json" not in names
        for name in names:
            assert needle not in zf.read(name), name
    for name, data in _all_files_text(folder).items():
        assert needle not in data, name
    assert len(_lines(folder / "documents.jsonl")) == 5


def test_kill_mid_run_and_rerun_gives_each_sequence_once(tmp_path: Path, chat_server) -> None:  # noqa: F811
    key = "sk-test-KILL-abcdef0123456789"
    script = ChatServer(delay=0.15)
    url = serve(chat_server, script)
    run = make_run_dir(tmp_path, 40)
    env = {**os.environ, "DPKPS_TEST_KEY": key, "PYTHONPATH": str(REPO)}
    env.pop("OPENAI_API_KEY", None)
    cmd = [sys.executable, "-m", "dpkps_core", "generate", "--sequences", str(run / "sequences.jsonl"),
           "--backend", "openai", "--base-url", url, "--model", "test-model", "--api-key-env", "DPKPS_TEST_KEY",
           "--doc-type", "a news article", "--concurrency", "2", "--quiet", "--backoff-base", "0.01"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    docs = run / "documents.jsonl"
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            if docs.exists() and docs.read_bytes().count(b"\n") >= 4:
                break
            if proc.poll() is not None:
                pytest.fail(f"generate ended early: {proc.stderr.read().decode()}")
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(10)
        proc.stderr.close()
    first = docs.read_bytes().count(b"\n")
    assert 4 <= first < 40
    with docs.open("ab") as fh:  # as if the kill had hit in the middle of a line
        fh.write(b'{"id": "seq-000040", "label": "bus')
    script.delay = 0.0
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    ids = [d["id"] for d in _lines(docs)]
    assert sorted(ids) == [f"seq-{i:06d}" for i in range(1, 41)]
    assert all(h == f"Bearer {key}" for h in script.auth_headers)

    exp = subprocess.run([sys.executable, "-m", "dpkps_core", "export", "--run", str(run), "--zip",
                          str(tmp_path / "b.zip"), "--folder", str(tmp_path / "b")],
                         cwd=REPO, env=env, capture_output=True, timeout=60)
    assert exp.returncode == 0, exp.stderr.decode()
    needle = key.encode()
    for name, data in {**_all_files_text(run), **_all_files_text(tmp_path / "b")}.items():
        assert needle not in data, name
    with zipfile.ZipFile(tmp_path / "b.zip") as zf:
        assert all(needle not in zf.read(n) for n in zf.namelist())
