"""Prompts: public template + DP sequence only; labels only on opt-in; few-shot never the private corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpkps_core.errors import ParameterError
from dpkps_core.llm import (
    FewShotExample,
    KeyphraseSequence,
    PromptConfig,
    check_not_private,
    file_fingerprint,
    load_few_shot,
    parse_few_shot,
    preview,
    read_sequences,
    render_prompt,
)

SEQ = {"id": "seq-000001", "label": "cardiology", "keyphrases": ["chest pain", "troponin", "stent"], "method": "x"}


def _all_text(messages: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in messages)


def test_default_prompt_has_doc_type_and_keyphrases_in_order() -> None:
    msgs = render_prompt(SEQ, PromptConfig(doc_type="a medical record"))
    assert [m["role"] for m in msgs] == ["system", "user"]
    user = msgs[-1]["content"]
    assert "Write a medical record that contains the following terms: chest pain, troponin, stent." in user


@pytest.mark.parametrize("template", [None, "Write {doc_type} using {keyphrases}."])
def test_label_never_in_prompt_unless_opted_in(template: str | None) -> None:
    kw = {"template": template} if template else {}
    off = render_prompt(SEQ, PromptConfig(doc_type="a medical record", **kw))
    assert "cardiology" not in _all_text(off)
    on = render_prompt(SEQ, PromptConfig(doc_type="a medical record", include_label=True, **kw))
    assert "cardiology" in _all_text(on)


def test_label_field_in_template_needs_opt_in() -> None:
    with pytest.raises(ParameterError, match="not marked public"):
        PromptConfig(doc_type="a note", template="Write {doc_type} about {label}: {keyphrases}")
    cfg = PromptConfig(doc_type="a note", template="Write {doc_type} about {label}: {keyphrases}", include_label=True)
    assert "about cardiology:" in render_prompt(SEQ, cfg)[-1]["content"]


@pytest.mark.parametrize(
    "template,match",
    [
        ("Write {doc_type}.", "must contain"),
        ("Write {doc_type} {keyphrases} {corpus}", "unknown field"),
        ("Write {doc_type} {keyphrases} {", "unbalanced"),
        ("Write {doc_type} {keyphrases!r}", "plain names"),
    ],
)
def test_template_validation(template: str, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        PromptConfig(doc_type="a note", template=template)


def test_doc_type_validation() -> None:
    with pytest.raises(ParameterError):
        PromptConfig(doc_type="   ")
    with pytest.raises(ParameterError):
        PromptConfig(doc_type="x" * 500)


def test_preview_is_exactly_the_rendered_messages() -> None:
    cfg = PromptConfig(doc_type="a news article", few_shot=(FewShotExample("Public example.", ("alpha",)),))
    text = preview(SEQ, cfg)
    for m in render_prompt(SEQ, cfg):
        assert m["content"] in text
    assert "Public example." in text and "(terms: alpha)" in text
    assert text.startswith("[system]")


def test_no_system_prompt() -> None:
    msgs = render_prompt(KeyphraseSequence.from_mapping(SEQ), PromptConfig(doc_type="a note", system_prompt=""))
    assert [m["role"] for m in msgs] == ["user"]


def test_read_sequences(tmp_path: Path) -> None:
    p = tmp_path / "sequences.jsonl"
    p.write_text(json.dumps(SEQ) + "\n\n" + json.dumps({**SEQ, "id": "seq-2"}) + "\n", encoding="utf-8")
    seqs = read_sequences(p)
    assert [s.id for s in seqs] == ["seq-000001", "seq-2"] and seqs[0].keyphrases == ("chest pain", "troponin", "stent")
    p.write_text(json.dumps(SEQ) + "\n" + json.dumps(SEQ) + "\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="repeats id"):
        read_sequences(p)
    p.write_text("{bad\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="line 1"):
        read_sequences(p)


# ---- few-shot ---------------------------------------------------------------------------------------------------


def test_few_shot_formats(tmp_path: Path) -> None:
    csv_p = tmp_path / "ex.csv"
    csv_p.write_text('text,keyphrases\n"First example.","a; b"\n"Second, example.",\n', encoding="utf-8")
    ex = load_few_shot(csv_p)
    assert ex == (FewShotExample("First example.", ("a", "b")), FewShotExample("Second, example.", ()))
    jl = tmp_path / "ex.jsonl"
    jl.write_text(json.dumps({"text": "One.", "keyphrases": ["x", "y"]}) + "\n", encoding="utf-8")
    assert load_few_shot(jl) == (FewShotExample("One.", ("x", "y")),)
    txt = tmp_path / "ex.txt"
    txt.write_text("Example one\nline two\n\n\nExample two\n", encoding="utf-8")
    assert [e.text for e in load_few_shot(txt)] == ["Example one\nline two", "Example two"]
    assert len(load_few_shot(txt, max_examples=1)) == 1
    bad = tmp_path / "ex.csv"
    bad.write_text("body\nx\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="'text' column"):
        load_few_shot(bad)
    with pytest.raises(ParameterError, match="must be"):
        parse_few_shot(b"x", filename="ex.docx")


def test_few_shot_refused_when_it_is_the_private_corpus(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.csv"
    corpus.write_text("text,label\nprivate,a\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="private corpus"):
        load_few_shot(corpus, private_corpus_path=corpus)
    # same file through another path
    with pytest.raises(ParameterError, match="private corpus"):
        load_few_shot(tmp_path / "." / "corpus.csv", private_corpus_path=str(corpus))
    # a copy (same content hash)
    copy = tmp_path / "copy.csv"
    copy.write_bytes(corpus.read_bytes())
    with pytest.raises(ParameterError, match="same content"):
        load_few_shot(copy, private_corpus_path=corpus)
    with pytest.raises(ParameterError, match="same content"):
        load_few_shot(copy, private_fingerprints=[file_fingerprint(corpus)])
    with pytest.raises(ParameterError, match="same content"):
        parse_few_shot(corpus.read_bytes(), filename="up.csv", private_fingerprints=[file_fingerprint(corpus)])
    # a file inside a private corpus folder
    folder = tmp_path / "corpus_dir" / "sport"
    folder.mkdir(parents=True)
    inside = folder / "a.txt"
    inside.write_text("private\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="inside the private corpus"):
        check_not_private(inside, private_corpus_path=tmp_path / "corpus_dir")
    # a different public file passes
    public = tmp_path / "public.csv"
    public.write_text("text\npublic example\n", encoding="utf-8")
    assert load_few_shot(public, private_corpus_path=corpus)[0].text == "public example"
