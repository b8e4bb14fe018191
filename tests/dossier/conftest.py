"""Run folders for the dossier tests, made by the real CLI without models (a hashing embedder, seeded NumPy noise):
a CLI run on a plain CSV, and an uploaded-corpus-like run whose file name, column names, texts and person ids carry
unique CANARY strings (the release edition must contain none of them), with documents written by a scripted LLM,
a local evaluation (evaluation.json), an audit report and the app's private content fingerprint."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from dossier_helpers import CANARIES
from eval_toys import BowEmbedder, make_toy_corpus, make_toy_vocabulary

from dpkps_core.llm.backends import LLMBackend

CLASSES = ("sport", "tech", "business")


class ScriptedLLM(LLMBackend):
    """A stand-in LLM: writes one sentence from the keyphrases of the prompt (no model, no network)."""

    name = "scripted"
    model = "scripted-test-llm"
    max_concurrency = 1

    def generate(self, messages: Any, *, max_tokens: int, temperature: float, timeout: float) -> str:
        terms = re.findall(r"terms: (.*?)\.", messages[-1]["content"])
        return f"A short synthetic note about {terms[0] if terms else 'nothing'}."


def _sample(args: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import dpkps_core.cli.sample as sample_cli
    from dpkps_core.cli import main

    monkeypatch.setattr(sample_cli, "get_embedder", lambda name, **kw: BowEmbedder())
    assert main(args) == 0


def _write_corpus(path: Path, *, canary: bool) -> None:
    corpus = make_toy_corpus()
    head = ([CANARIES["text_column"], CANARIES["label_column"], CANARIES["person_column"]] if canary
            else ["text", "label"])
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(head)
        for i, (text, label) in enumerate(zip(corpus.texts, corpus.labels)):
            if canary:
                w.writerow([f"{text} {CANARIES['text']}{i}", label, f"{CANARIES['person']}{i % 25}"])
            else:
                w.writerow([text, label])


def _generate(run: Path) -> None:
    from dpkps_core.llm import GenerationSettings, PromptConfig, run_generation

    seqs = [json.loads(x) for x in (run / "sequences.jsonl").read_text(encoding="utf-8").splitlines()]
    run_generation(seqs, backend=ScriptedLLM(), prompt_config=PromptConfig(doc_type="a short news note"),
                   run_dir=run, settings=GenerationSettings(retries=0, max_tokens=60, backoff_base=0.0))


def _evaluate(run: Path) -> None:
    from dpkps_core.evaluation.run import evaluate_run, write_evaluation

    write_evaluation(evaluate_run(run, embedder=BowEmbedder(), seeds=2), run)


def _audit_report(run: Path, *, lower_bound: float, claimed: float, kind: str) -> None:
    from dpkps_core.audit.report import AuditResult

    result = AuditResult(claimed_epsilon=claimed, lower_bound=lower_bound, confidence=0.95,
                         violation=kind == "violation", verdict=f"The audit is {kind}.", events=[], exposure=None,
                         info={"noise_sampler_note": "numpy"}, kind=kind)
    (run / "audit_report.json").write_text(json.dumps(result.to_dict()), encoding="utf-8")


@pytest.fixture(scope="session")
def dossier_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"cli": a CLI run on a plain CSV (sequences only), "canary": the uploaded-corpus-like run (documents,
    evaluation, audit report, app fingerprint), "corpus": the canary run's private CSV}."""
    root = tmp_path_factory.mktemp("dossier-runs")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(make_toy_vocabulary().terms) + "\n", encoding="utf-8")
    common = ["--vocabulary", str(vocab), "--classes", ",".join(CLASSES), "--eps-voc", "4", "--eps-kde", "6",
              "--seed", "3", "--noise-sampler", "numpy", "--vocab-size", "30", "-S", "5", "--length", "5",
              "--per-class", "4", "--test-fraction", "0.4"]
    plain, private = root / "corpus.csv", root / CANARIES["file"]
    _write_corpus(plain, canary=False)
    _write_corpus(private, canary=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPKPS_LEDGER_DIR", str(root / "ledgers"))
        mp.setenv("DPKPS_CACHE_DIR", str(root / "cache"))
        _sample(["sample", "--corpus", str(plain), *common, "--out", str(root / "run-cli")], mp)
        canary_run = root / "run-20260101-120000-abc123-0a1b2c"
        _sample(["sample", "--corpus", str(private), "--text-column", CANARIES["text_column"], "--label-column",
                 CANARIES["label_column"], "--person-column", CANARIES["person_column"], *common,
                 "--out", str(canary_run)], mp)
        _generate(canary_run)
        _evaluate(canary_run)
    _audit_report(canary_run, lower_bound=0.42, claimed=10.0, kind="consistent")
    (canary_run / "corpus_fingerprint.json").write_text(json.dumps(
        {"format": "dpkps-run-corpus", "version": 1, "content_sha256": "c0ffee" * 10 + "abcd"}), encoding="utf-8")
    (canary_run / "run_state.json").write_text(json.dumps(
        {"corpus_name": CANARIES["file"], "corpus_spec": f"upload:{CANARIES['file']}"}), encoding="utf-8")
    return {"cli": root / "run-cli", "canary": canary_run, "corpus": private, "vocab": vocab}


@pytest.fixture
def canary_copy(dossier_runs: dict[str, Path], tmp_path: Path) -> Path:
    """A private copy of the canary run (for tests that write into the run folder)."""
    dst = tmp_path / dossier_runs["canary"].name
    shutil.copytree(dossier_runs["canary"], dst)
    return dst
