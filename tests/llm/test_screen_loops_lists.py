"""The non-document screen catches repetition loops and bare lists of names (dpkps_core/llm/quality.py), leaves
real documents alone, and the runner retries such replies on both paths (batched local, concurrent remote)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Sequence

import pytest

from dpkps_core.llm.backends import LLMBackend
from dpkps_core.llm.prompts import PromptConfig
from dpkps_core.llm.quality import (NonDocumentReply, document_problem, immediate_repeats, list_reply, screen)
from dpkps_core.llm.runner import run_generation
from dpkps_core.llm.settings import GenerationSettings
from dpkps_core.records.runfolder import AUDIT_FILE, read_documents, read_failures

DOCUMENT = ("St. Regina's hospital said on Monday that its new cardiology wing would open in the spring, after the "
            "council approved the plans and a local charity raised the last of the money.")
LOOPS = [
    "St. Regina, St. Regina, St. Regina, Adreno, Adreno…",
    "The clinic in St. Regina opened today. St. Regina, St. Regina, St. Regina, Adreno, Adreno, Adreno.",
    "Shares rose. " + " ".join(["Adreno"] * 6) + " and the market closed.",
    "The new phone uses the Adreno chip and the Adreno chip and the Adreno chip",       # the budget cut the loop
    "Nokia, Nokia, Apple, Apple, Samsung, Samsung, Google, Google and others were there.",  # many small loops
]
LISTS = [
    "Adreno, Qualcomm, St. Regina, Samsung, Nokia, Apple, Google, Microsoft",
    "John Smith, Mary Jones, Peter Brown, Anna White, Tom Green",
    "Arsenal; Chelsea; Manchester United; Liverpool; Everton; Leeds",
    "- Tony Blair\n- Gordon Brown\n- Michael Howard\n- Charles Kennedy\n- Jack Straw",
    "goal, market, shares, profit, economy, growth, inflation",
]
PROSE = [
    DOCUMENT,
    "I thrash around and scream no no no no no until someone tells me to stop, she said.",
    "We have a very very very very very close family, Serena said after the match in Melbourne.",
    "I took it for nausea, headache, dizziness, fatigue and insomnia, and it helped with all of them within a week.",
    "Synthetic document 2 about term2.",
]


@pytest.mark.parametrize("reply", LOOPS)
def test_repetition_loops_are_not_documents(reply: str) -> None:
    assert "repetition loop" in (document_problem(reply) or "")
    with pytest.raises(NonDocumentReply):
        screen(reply)


@pytest.mark.parametrize("reply", LISTS)
def test_bare_lists_of_names_or_terms_are_not_documents(reply: str) -> None:
    problem = document_problem(reply) or ""
    assert "a list of" in problem and list_reply(reply) in ("names", "terms")
    with pytest.raises(NonDocumentReply):
        screen(reply)


def test_lists_say_whether_they_hold_names() -> None:
    assert list_reply(LISTS[0]) == "names" and list_reply(LISTS[-1]) == "terms"


@pytest.mark.parametrize("reply", PROSE)
def test_prose_with_lists_or_emphasis_stays_a_document(reply: str) -> None:
    assert document_problem(reply) is None
    assert list_reply(reply) is None


def test_immediate_repeats_measures_units_and_the_cut_off_tail() -> None:
    r = immediate_repeats("St. Regina, St. Regina, St. Regina, Adreno, Adreno")
    assert (r.word, r.phrase) == (2, 3) and r.at_end is False and 0.5 < r.share < 0.7
    cut = immediate_repeats("He said the chip and the chip and the chip and the")
    assert cut.at_end and cut.phrase == 3
    assert immediate_repeats(DOCUMENT).share == 0.0


@pytest.mark.parametrize("spec", ["demo:bbc", "demo:drugs"])
def test_no_real_document_of_the_demo_corpora_is_refused(spec: str) -> None:
    """The rules are precise: every real BBC article and drug review passes the screen (public demo data)."""
    from dpkps_core.corpus import load_corpus_spec
    from dpkps_core.llm.quality import clean_reply

    corpus = load_corpus_spec(spec)
    refused = [i for i, t in enumerate(corpus.texts) if document_problem(clean_reply(t)) is not None]
    assert refused == []


class _LoopsFirst(LLMBackend):
    """A loop on the first attempt of every prompt, a list of names on the second, then a document."""

    name, model = "scripted", "scripted"

    def __init__(self, *, batched: bool) -> None:
        self.max_batch_size = 8 if batched else 1
        self.max_concurrency = 1 if batched else 2
        self.calls: dict[str, int] = {}
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def _reply(self, messages: Sequence[dict[str, str]]) -> str:
        key = messages[-1]["content"].split("terms: ")[1].split(",")[0]
        with self._lock:
            self.calls[key] = self.calls.get(key, 0) + 1
            n = self.calls[key]
        return (LOOPS[0] if n == 1 else LISTS[0] if n == 2 else DOCUMENT.replace("Monday", key))

    def generate(self, messages: Any, *, max_tokens: int, temperature: float, timeout: float) -> str:
        return self._reply(messages)

    def generate_batch(self, batch: Any, *, max_tokens: int, temperature: float, timeout: float,
                       cancel: Any = None, on_step: Any = None) -> list[Any]:
        self.batches.append(len(batch))
        return [self._reply(m) for m in batch]


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "concurrent"])
def test_the_runner_retries_loops_and_lists_until_a_document(tmp_path: Path, batched: bool) -> None:
    seqs = [{"id": f"s{i}", "label": "health", "keyphrases": [f"alpha{i}", "hospital"]} for i in range(3)]
    backend = _LoopsFirst(batched=batched)
    summary = run_generation(seqs, backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                             run_dir=tmp_path, settings=GenerationSettings(retries=2, backoff_base=0.0,
                                                                           backoff_max=0.01, batch_size=8))
    assert (summary.written, summary.failed) == (3, 0)
    docs = {d["id"]: d["text"] for d in read_documents(tmp_path)}
    assert docs == {f"s{i}": DOCUMENT.replace("Monday", f"alpha{i}") for i in range(3)}
    assert backend.calls == {f"alpha{i}": 3 for i in range(3)}
    attempts = sorted((a["id"], a["attempt"]) for a in
                      (json.loads(x) for x in (tmp_path / AUDIT_FILE).read_text().splitlines()))
    assert attempts == [(f"s{i}", k) for i in range(3) for k in (1, 2, 3)]
    if batched:
        assert backend.batches == [3, 3, 3]


def test_a_reply_that_always_loops_fails_as_a_non_document(tmp_path: Path) -> None:
    class AlwaysLoops(_LoopsFirst):
        def _reply(self, messages: Sequence[dict[str, str]]) -> str:
            return LOOPS[1]

    summary = run_generation([{"id": "s0", "label": "health", "keyphrases": ["alpha", "x"]}],
                             backend=AlwaysLoops(batched=True), prompt_config=PromptConfig(doc_type="a note"),
                             run_dir=tmp_path, settings=GenerationSettings(retries=1, backoff_base=0.0,
                                                                           backoff_max=0.01))
    assert (summary.written, summary.failed) == (0, 1)
    (fail,) = read_failures(tmp_path)
    assert fail["attempts"] == 2 and "repetition loop" in fail["error"]
