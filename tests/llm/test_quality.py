"""Non-documents, preambles and repetition loops in LLM replies (issue 14 §5): pure functions and the runner."""

from __future__ import annotations

import pytest

from llm_fakes import chat_server  # noqa: F401 (fixture)

from dpkps_core.llm.quality import (NON_DOCUMENT_PREFIX, NonDocumentReply, clean_reply, document_problem,
                                    is_non_document_failure, repetition_share, screen)

ARTICLE = ("Shares in the retailer rose on Tuesday after it reported stronger sales over the holiday season, "
           "helped by online orders and lower fuel prices that left shoppers with more to spend.")


@pytest.mark.parametrize("preamble", [
    "Here's a short news article:\n\n", "Here is a short news article about business:\n", "Sure! Here's the article:\n",
    "Certainly. ", "Title: Retailer shares rise\n",
])
def test_preambles_are_cleaned(preamble: str) -> None:
    assert clean_reply(preamble + ARTICLE) == ARTICLE
    assert screen(preamble + ARTICLE) == ARTICLE


def test_a_document_is_left_alone() -> None:
    assert clean_reply(ARTICLE) == ARTICLE
    assert document_problem(ARTICLE) is None
    assert clean_reply(f"“{ARTICLE}”") == ARTICLE


@pytest.mark.parametrize("reply", [
    "I'm ready to help. Please share your article",
    "I am here to provide a copy of the news article on the subject of the call, talks and largest officials.",
    "Please provide the keyphrases you would like me to use.",
    "I'm sorry, but I cannot write that.",
    "Here's a short news article:",
    "Sure!",
])
def test_non_documents_are_refused(reply: str) -> None:
    assert document_problem(clean_reply(reply)) is not None
    with pytest.raises(NonDocumentReply) as info:
        screen(reply)
    assert is_non_document_failure(str(info.value))


def test_repetition_loops_are_refused() -> None:
    loop = "Walmart said " + "-".join(["walmart"] * 60)
    assert repetition_share(loop) > 0.9
    assert "repetition loop" in document_problem(loop)
    sentence = " ".join(["The market fell again today."] * 12)
    assert document_problem(sentence) is not None
    assert repetition_share(ARTICLE) < 0.1


def test_runner_retries_non_documents_and_counts_final_failures(tmp_path) -> None:
    from dpkps_core.llm.backends import LLMBackend
    from dpkps_core.llm.prompts import PromptConfig
    from dpkps_core.llm.runner import run_generation
    from dpkps_core.llm.settings import GenerationSettings
    from dpkps_core.records.runfolder import read_documents, read_failures

    class Scripted(LLMBackend):
        name, model, max_concurrency = "scripted", "scripted", 1

        def __init__(self) -> None:
            self.calls: dict[str, int] = {}

        def generate(self, messages, *, max_tokens, temperature, timeout):  # noqa: ANN001
            text = messages[-1]["content"]
            key = "a" if "alpha" in text else "b"
            self.calls[key] = self.calls.get(key, 0) + 1
            if key == "a":  # a non-document first, then a preamble before the document
                return "I'm ready to help. Please share your article" if self.calls[key] == 1 else (
                    "Here's a short news article:\n" + ARTICLE)
            return "-".join(["walmart"] * 50)  # always a loop: fails after every retry

    seqs = [{"id": "s1", "label": "business", "keyphrases": ["alpha", "shares"]},
            {"id": "s2", "label": "business", "keyphrases": ["beta"]}]
    backend = Scripted()
    summary = run_generation(seqs, backend=backend, run_dir=tmp_path, prompt_config=PromptConfig(),
                             settings=GenerationSettings(retries=2, backoff_base=0.001, backoff_max=0.01))
    assert (summary.written, summary.failed) == (1, 1)
    assert read_documents(tmp_path)[0]["text"] == ARTICLE
    fails = read_failures(tmp_path)
    assert [f["id"] for f in fails] == ["s2"] and is_non_document_failure(fails[0]["error"])
    assert backend.calls == {"a": 2, "b": 3}


def test_cli_counts_non_documents_and_cleans_preambles(tmp_path, chat_server, capsys) -> None:  # noqa: F811
    import json

    from llm_fakes import ChatServer, make_run_dir, serve

    from dpkps_core.cli import main

    script = ChatServer({1: ["ready", "ready"], 2: ["preamble"]})  # sequences are numbered from 1
    url = serve(chat_server, script)
    run = make_run_dir(tmp_path, 3)
    rc = main(["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", "openai", "--base-url", url,
               "--model", "m", "--doc-type", "a news article", "--retries", "1", "--backoff-base", "0.01"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "non-documents: 1 of 3 item(s) (33%)" in err
    docs = [json.loads(x) for x in (run / "documents.jsonl").read_text().splitlines()]
    assert sorted(d["text"] for d in docs) == ["Synthetic document 2 about term2.", "Synthetic document 3 about term3."]
    assert script.attempts[1] == 2                                  # retried once, then counted as failed


@pytest.mark.parametrize("reply", [
    "The article is about politics.",
    "This article discusses the new budget for schools and roads in the city.",
    "The text is about a football match between two rival teams.",
    "This review talks about a drug that helped with my migraines.",
])
def test_a_one_line_description_of_the_document_is_not_the_document(reply: str) -> None:
    problem = document_problem(reply)
    assert problem is not None and problem.startswith(NON_DOCUMENT_PREFIX) and "describes the document" in problem


@pytest.mark.parametrize("reply", [
    "The council met on Monday to discuss the new budget for local schools, roads and the library.",
    "This report describes in detail the findings of the committee, which met on Monday in the city hall to "
    "discuss the new budget for local schools, the roads and the library, and what the mayor said of it.",
    "The article is about to change everything. " * 1 + "Shares rose sharply on Tuesday after the bank said "
    "profits had doubled, and investors welcomed the news across the whole market as trading closed.",
])
def test_documents_that_merely_open_alike_are_kept(reply: str) -> None:
    assert document_problem(reply) is None
