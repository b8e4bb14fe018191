"""Best of several drafts (dpkps_core/llm/selection.py, runner hooks): the kept draft passes the screen, is
assigned to its class by a classifier of the DP sequences only, uses the most keyphrases; ties go to the earlier
draft; both runner paths checkpoint the kept draft and log the others; and no private data reaches the choice."""

from __future__ import annotations

import builtins
import io
import json
import threading
from pathlib import Path
from typing import Any, Sequence

import pytest

from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend, TransientLLMError
from dpkps_core.llm.prompts import PromptConfig, as_sequence, read_sequences
from dpkps_core.llm.quality import NonDocumentReply
from dpkps_core.llm.runner import run_generation
from dpkps_core.llm.selection import DraftSelector, SequenceClassifier
from dpkps_core.llm.settings import GenerationSettings
from dpkps_core.records.runfolder import AUDIT_FILE, read_documents

SPORT = ["goal", "striker", "league", "match", "coach"]
BUSINESS = ["shares", "profit", "market", "investors", "bank"]
SEQS = [as_sequence({"id": f"s{i}", "label": lab, "keyphrases": terms[i % 5:] + terms[: i % 5]})
        for i in range(8) for lab, terms in (("sport", SPORT), ("business", BUSINESS))]
SEQS = [as_sequence({**s.to_dict(), "id": f"{s.id}-{s.label}"}) for s in SEQS]
ON_SPORT = "The striker scored a late goal and the coach praised the team after the league match on Saturday."
OFF_SPORT = "Investors sold shares as the bank reported lower profit and the market fell sharply on Saturday."
FEW_TERMS = "The striker trained hard with the team all week before the weekend fixture in the north."
LOOP = "goal, striker, league, match, coach, goal, striker, league, match, coach"


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def test_the_classifier_is_trained_on_the_sequences_and_reads_drafts_by_their_terms() -> None:
    clf = SequenceClassifier(SEQS)
    assert clf.classes == ("business", "sport") and set(clf.terms) == set(SPORT + BUSINESS)
    p = clf.probabilities([clf.matches(ON_SPORT), clf.matches(OFF_SPORT)])
    assert p is not None and p[0, 1] > 0.5 > p[1, 1]


def test_the_kept_draft_is_on_class_then_uses_the_most_keyphrases_then_the_earliest() -> None:
    sel = DraftSelector(SEQS)
    sport = SEQS[1] if SEQS[1].label == "sport" else SEQS[0]
    assert sport.label == "sport"
    # on-class beats off-class, whatever the order
    assert sel.choose(sport, [OFF_SPORT, ON_SPORT]).kept == 1
    assert sel.choose(sport, [ON_SPORT, OFF_SPORT]).kept == 0
    # among on-class drafts, more keyphrases used wins
    choice = sel.choose(sport, [FEW_TERMS, ON_SPORT])
    assert choice.kept == 1 and choice.scores[1].keyphrases_used > choice.scores[0].keyphrases_used
    # identical drafts: the earlier one (deterministic)
    assert sel.choose(sport, [ON_SPORT, ON_SPORT, ON_SPORT]).kept == 0
    # a non-document is never kept, even with every keyphrase in it; failed calls are skipped
    assert sel.choose(sport, [LOOP, TransientLLMError("429"), FEW_TERMS]).kept == 2
    record = sel.choose(sport, [OFF_SPORT, ON_SPORT]).audit_record()
    assert record["event"] == "drafts" and record["kept"] == 1
    assert record["drafts"][0]["text"] == OFF_SPORT and "text" not in record["drafts"][1]
    assert record["drafts"][0]["predicted_class"] == "business" and record["drafts"][1]["predicted_class"] == "sport"


def test_no_draft_a_document_raises_what_they_ended_with() -> None:
    sel = DraftSelector(SEQS)
    with pytest.raises(NonDocumentReply):
        sel.choose(SEQS[0], [LOOP, "Sure!"])
    with pytest.raises(TransientLLMError, match="429"):
        sel.choose(SEQS[0], [LOOP, TransientLLMError("429")])


def test_drafts_need_sampling_and_are_bounded() -> None:
    with pytest.raises(ParameterError, match="temperature above 0"):
        GenerationSettings(drafts=2, temperature=0.0)
    with pytest.raises(ParameterError, match="drafts"):
        GenerationSettings(drafts=0)
    assert "drafts" not in GenerationSettings().request_params()
    assert GenerationSettings(drafts=3).request_params()["drafts"] == 3


class _TwoDrafts(LLMBackend):
    """Per prompt: an off-class draft, then the on-class one, then again (draft order alternates)."""

    name, model = "scripted", "scripted"

    def __init__(self, *, batched: bool, first_loops: bool = False) -> None:
        self.max_batch_size = 8 if batched else 1
        self.max_concurrency = 1 if batched else 2
        self.first_loops = first_loops
        self.calls: dict[str, int] = {}
        self.batches: list[int] = []
        self._lock = threading.Lock()

    def _reply(self, messages: Sequence[dict[str, str]]) -> str:
        content = messages[-1]["content"]
        sport = "about: sport" in content
        with self._lock:
            self.calls[content] = n = self.calls.get(content, 0) + 1
        if self.first_loops and n <= 2:
            return LOOP
        on, off = (ON_SPORT, OFF_SPORT) if sport else (OFF_SPORT, ON_SPORT)
        return off if n % 2 else on

    def generate(self, messages: Any, *, max_tokens: int, temperature: float, timeout: float) -> str:
        return self._reply(messages)

    def generate_batch(self, batch: Any, *, max_tokens: int, temperature: float, timeout: float,
                       cancel: Any = None, on_step: Any = None) -> list[Any]:
        self.batches.append(len(batch))
        return [self._reply(m) for m in batch]


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "concurrent"])
def test_the_runner_keeps_the_best_draft_and_logs_the_other(tmp_path: Path, batched: bool) -> None:
    seqs = SEQS[:4]
    backend = _TwoDrafts(batched=batched)
    settings = GenerationSettings(drafts=2, batch_size=4, retries=1, backoff_base=0.0, backoff_max=0.01)
    summary = run_generation(seqs, backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                             run_dir=tmp_path, settings=settings)
    assert (summary.written, summary.failed) == (4, 0)
    docs = {d["id"]: d["text"] for d in read_documents(tmp_path)}
    assert docs == {s.id: ON_SPORT if s.label == "sport" else OFF_SPORT for s in seqs}
    audit = _lines(tmp_path / AUDIT_FILE)
    prompts = [a for a in audit if "messages" in a]
    assert sorted((a["id"], a["draft"]) for a in prompts) == sorted((s.id, j) for s in seqs for j in (0, 1))
    assert all(a["parameters"]["drafts"] == 2 and a["prompt_config"]["include_label"] for a in prompts)
    events = {a["id"]: a for a in audit if a.get("event") == "drafts"}
    assert set(events) == {s.id for s in seqs} and all(e["kept"] == 1 for e in events.values())
    assert all(e["drafts"][0]["text"] != docs[i] for i, e in events.items())
    if batched:
        assert backend.batches == [4, 4]  # a call holds batch_size prompts: 2 items × 2 drafts
    # resume: nothing left to write, nothing sent
    again = run_generation(seqs, backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                           run_dir=tmp_path, settings=settings)
    assert (again.written, again.already_done) == (0, 4)


def test_drafts_that_are_all_loops_are_retried(tmp_path: Path) -> None:
    backend = _TwoDrafts(batched=True, first_loops=True)
    settings = GenerationSettings(drafts=2, batch_size=2, retries=2, backoff_base=0.0, backoff_max=0.01)
    summary = run_generation(SEQS[:1], backend=backend, prompt_config=PromptConfig(doc_type="a news article"),
                             run_dir=tmp_path, settings=settings)
    assert (summary.written, summary.failed) == (1, 0)
    prompts = [a for a in _lines(tmp_path / AUDIT_FILE) if "messages" in a]
    assert [(a["attempt"], a["draft"]) for a in prompts] == [(1, 0), (1, 1), (2, 0), (2, 1)]


def test_the_choice_reads_no_private_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The selection runs with the run folder's sequences and a fake backend only: the private corpus, the split
    and the evaluation are never opened or loaded, and a canary in the private corpus changes no choice."""
    from llm_fakes import make_run_dir

    import dpkps_core.corpus as corpus_pkg
    import dpkps_core.corpus.readers as readers

    def run_once(root: Path, canary: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
        run = make_run_dir(root, 6, canary=canary)
        private = {str(root / "private_corpus.csv"), str(run / "split.json"), str(run / "evaluation.json")}
        opened: list[str] = []
        real_open, real_io_open = builtins.open, io.open

        def spy(file: Any, *a: Any, **k: Any) -> Any:
            opened.append(str(file))
            return real_open(file, *a, **k)

        def refuse(*a: Any, **k: Any) -> Any:
            raise AssertionError("the private corpus was loaded")

        with monkeypatch.context() as m:
            m.setattr(builtins, "open", spy)
            m.setattr(io, "open", spy)
            m.setattr(corpus_pkg, "load_corpus_spec", refuse)
            m.setattr(readers, "load_corpus", refuse)
            backend = _TwoDrafts(batched=True)
            run_generation(read_sequences(run / "sequences.jsonl"), backend=backend,
                           prompt_config=PromptConfig(doc_type="a news article"), run_dir=run,
                           settings=GenerationSettings(drafts=2, batch_size=4))
        assert builtins.open is real_open and io.open is real_io_open
        assert not private & set(opened), private & set(opened)
        strip = [{k: v for k, v in a.items() if k != "timestamp"} for a in _lines(run / AUDIT_FILE)]
        return read_documents(run), strip, opened

    a_docs, a_audit, _ = run_once(tmp_path / "a", "CANARY goal striker league match coach")
    b_docs, b_audit, _ = run_once(tmp_path / "b", "CANARY shares profit market investors bank")
    assert a_docs == b_docs and a_audit == b_audit
    assert not any("CANARY" in json.dumps(x) for x in a_audit + a_docs)


def test_cli_generate_takes_drafts_and_the_class_name_opt_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    from llm_fakes import make_run_dir

    from dpkps_core.cli import main

    run = make_run_dir(tmp_path, 2)
    base = ["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", "openai", "--base-url",
            "http://127.0.0.1:9/v1", "--model", "m", "--doc-type", "a news article", "--estimate-only"]
    assert main(base + ["--drafts", "3"]) == 0
    cap = capsys.readouterr()
    assert "estimate: 6 prompts" in cap.err and "best of 3 drafts" in cap.err
    assert "class names in the prompt: yes" in cap.err and "The document is about: business." in cap.out
    assert main(base + ["--no-class-names"]) == 0
    cap = capsys.readouterr()
    assert "class names in the prompt: no" in cap.err and "The document is about" not in cap.out
    assert main(base + ["--drafts", "2", "--temperature", "0"]) == 2
    assert "temperature above 0" in capsys.readouterr().err


def test_the_bundle_counts_prompts_not_draft_records_and_keeps_the_drafts(tmp_path: Path) -> None:
    from llm_fakes import make_run_dir

    from dpkps_core.dossier.export import collect_bundle

    run = make_run_dir(tmp_path, 4)
    run_generation(read_sequences(run / "sequences.jsonl"), backend=_TwoDrafts(batched=True),
                   prompt_config=PromptConfig(doc_type="a news article"), run_dir=run,
                   settings=GenerationSettings(drafts=2, batch_size=4))
    files = collect_bundle(run)
    gen = json.loads(files["privacy_report.json"])["generation"]
    assert gen["counts"]["prompts_sent"] == 8 and gen["counts"]["documents"] == 4
    assert gen["parameters"]["drafts"] == 2 and len(gen["configurations"]) == 1
    lines = [json.loads(x) for x in files[AUDIT_FILE].decode().splitlines()]
    assert sum(1 for x in lines if x.get("event") == "drafts") == 4 and sum(1 for x in lines if "messages" in x) == 8
