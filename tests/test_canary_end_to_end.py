"""Canaries planted in the private corpus never reach an LLM request, a log, a cache file or the bundle.

sample → generate → export through the CLI, with a recording chat-completions server on 127.0.0.1 and with the
offline model. The canaries are in the public vocabulary too (each in one document), so only the DP noisy
histogram stands between them and Ṽ; with these counts and the seed, they are not selected.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from llm_fakes import chat_server, completion_json  # noqa: F401 (fixture)
from werkzeug import Response

from dpkps_core.cli import main
from dpkps_core.llm import read_documents, read_failures

CANARIES = ["zqcanaryalpha", "zqcanarybeta", "SECRET-PATIENT-7731"]
TOPICS = {
    "sport": "striker goal match league stadium coach team cup final fans",
    "business": "shares bank profits inflation interest rates airline fuel margins market",
}


def _write_private_corpus(path: Path) -> None:
    rows = ["text,label"]
    for label, words in TOPICS.items():
        w = words.split()
        for i in range(40):
            extra = ""
            if label == "sport" and i < 3:
                extra = f" {CANARIES[i]}"  # one document per canary
            rows.append(f'"Item {i}: {w[i % 10]} {w[(i + 1) % 10]} {w[(i + 4) % 10]} {w[(i + 7) % 10]}{extra}.",{label}')
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def _scan(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _assert_clean(blobs: dict[str, bytes]) -> None:
    for name, data in blobs.items():
        for c in CANARIES:
            assert c.encode() not in data and c.lower().encode() not in data, f"{c} found in {name}"


@pytest.mark.model
def test_canaries_never_leave_the_private_side(tmp_path, chat_server, monkeypatch, capsys, caplog):  # noqa: F811
    import logging

    caplog.set_level(logging.DEBUG)
    cache = tmp_path / "cache"
    monkeypatch.setenv("DPKPS_CACHE_DIR", str(cache))
    corpus = tmp_path / "private.csv"
    _write_private_corpus(corpus)
    assert sum(c in corpus.read_text() for c in CANARIES) == 3
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(" ".join(TOPICS.values()).split() + [c.lower() for c in CANARIES]) + "\n")
    run = tmp_path / "run"
    assert main(["sample", "--corpus", str(corpus), "--vocabulary", str(vocab), "--eps-voc", "2", "--eps-kde", "2",
                 "-S", "4", "-N", "12", "--length", "4", "--per-class", "3", "--seed", "0", "--classes", ",".join(TOPICS), "--out", str(run)]) == 0
    pv = json.loads((run / "private_vocabulary.json").read_text())
    assert not set(pv["terms"]) & {c.lower() for c in CANARIES}

    # remote backend: every request body is recorded by the local server
    bodies: list[str] = []

    def record(request):
        bodies.append(request.get_data(as_text=True))
        return Response(json.dumps(completion_json(f"A synthetic article number {len(bodies)}.")),
                        content_type="application/json")

    chat_server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(record)
    url = chat_server.url_for("/v1")
    assert main(["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", "openai", "--base-url", url,
                 "--model", "test-model", "--doc-type", "a news article", "--quiet"]) == 0
    assert len(bodies) == 6 and all("keyphrases" in b or "," in b for b in bodies)
    _assert_clean({f"request {i}": b.encode() for i, b in enumerate(bodies)})

    # offline backend on a copy of the run (two short documents)
    offline_run = tmp_path / "offline_run"
    offline_run.mkdir()
    for name in ("sequences.jsonl", "privacy_report.json", "private_vocabulary.json", "run_config.json"):
        (offline_run / name).write_bytes((run / name).read_bytes())
    monkeypatch.delenv("DPKPS_CACHE_DIR")  # reuse the converted offline model from the user cache
    rc = main(["generate", "--sequences", str(offline_run / "sequences.jsonl"), "--backend", "offline",
               "--doc-type", "a news article", "--limit", "2", "--max-tokens", "8", "--quiet"])
    # the sampled 8-token replies may fail the document check: then the exit status says so (1), else 0; either
    # way each of the 2 items is one document or one recorded failure, and every prompt sent is in the audit log
    offline_docs, offline_failures = read_documents(offline_run), read_failures(offline_run)
    assert len(offline_docs) + len(offline_failures) == 2
    assert not {d["id"] for d in offline_docs} & {f["id"] for f in offline_failures}
    assert rc == (1 if offline_failures else 0)
    audit = [json.loads(x) for x in (offline_run / "audit_log.jsonl").read_text().splitlines()]
    assert len(audit) >= 2 and {a["backend"] for a in audit} == {"offline"}

    zip_path, folder = tmp_path / "bundle.zip", tmp_path / "bundle"
    assert main(["export", "--run", str(run), "--zip", str(zip_path), "--folder", str(folder)]) == 0
    outputs = capsys.readouterr()
    with zipfile.ZipFile(zip_path) as zf:
        bundle = {f"zip:{n}": zf.read(n) for n in zf.namelist()}
    _assert_clean(bundle)
    _assert_clean(_scan(folder))
    _assert_clean(_scan(run))          # the run folder holds no private text at all
    _assert_clean(_scan(offline_run))
    _assert_clean(_scan(cache))        # embedding cache: Ṽ only
    _assert_clean({"stdout": outputs.out.encode(), "stderr": outputs.err.encode()})
    # every log record of every library at DEBUG level: no document text (the canaries' sentences)
    log_text = "\n".join(r.getMessage() for r in caplog.records)
    _assert_clean({"logs": log_text.encode()})
    assert "Item 1:" not in log_text
