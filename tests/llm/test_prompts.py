"""Prompts: public template + DP sequence only; labels only on opt-in; few-shot never the private corpus."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
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
def test_class_name_in_prompt_by_default_and_left_out_on_opt_out(template: str | None) -> None:
    kw = {"template": template} if template else {}
    default = render_prompt(SEQ, PromptConfig(doc_type="a medical record", **kw))
    assert "The document is about: cardiology." in _all_text(default)
    off = render_prompt(SEQ, PromptConfig(doc_type="a medical record", include_label=False, **kw))
    assert "cardiology" not in _all_text(off)
    assert PromptConfig(doc_type="a note").to_dict()["include_label"] is True


def test_label_field_in_template_needs_class_names_included() -> None:
    with pytest.raises(ParameterError, match="class names are left out"):
        PromptConfig(doc_type="a note", template="Write {doc_type} about {label}: {keyphrases}", include_label=False)
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


# ---------------------------------------------------------------------------------- few-shot guard (docs/DESIGN.md §2.5)

PRIVATE_DOCS = [
    "The patient reported severe headaches after starting the new medication in early March of this year.",
    "Quarterly revenue rose sharply as the company expanded its retail network across three northern regions.",
    "Short private note here.",
]


def test_few_shot_guard_refuses_an_example_containing_a_private_document() -> None:
    from dpkps_core.llm.prompts import PrivateSpanIndex

    index = PrivateSpanIndex(PRIVATE_DOCS)
    example = "Intro sentence. " + PRIVATE_DOCS[1] + " And a public closing line."
    with pytest.raises(ParameterError, match="Few-shot example 2 shares a run of 8") as err:
        index.check(["A public example about gardening and tomatoes in summer.", example])
    assert "revenue" not in str(err.value) and "northern" not in str(err.value)  # never quotes private text
    with pytest.raises(ParameterError, match="contains a whole document of the private corpus"):
        index.check(["Prefix words, then: SHORT private  note here! and more"])  # shorter than 8 tokens, normalised


def test_few_shot_guard_refuses_a_long_shared_span_after_normalisation() -> None:
    from dpkps_core.llm.prompts import check_examples_not_private

    # 8 consecutive tokens of a private document, with other case, punctuation and NFKC-equivalent spacing
    span = "SEVERE headaches, after starting the new medication in"
    with pytest.raises(ParameterError, match="shares a run of 8 or more words"):
        check_examples_not_private([f"A different story: {span} a public trial."], PRIVATE_DOCS)
    # 7 shared tokens are ordinary shared phrasing: accepted
    check_examples_not_private(["A different story: severe headaches after starting the new medication. Then a "
                                "public ending."], PRIVATE_DOCS)


def test_few_shot_guard_accepts_unrelated_public_examples() -> None:
    from dpkps_core.llm.prompts import PrivateSpanIndex, parse_few_shot

    index = PrivateSpanIndex(PRIVATE_DOCS)
    public = ("The museum opened a new wing dedicated to early photography and its inventors.\n\n"
              "Local farmers reported an early harvest of apples thanks to a warm and dry spring.\n")
    examples = parse_few_shot(public.encode(), filename="public.txt", private_texts=index)
    assert len(examples) == 2
    with pytest.raises(ParameterError, match="Few-shot example 1"):
        parse_few_shot((PRIVATE_DOCS[0] + "\n").encode(), filename="x.txt", private_texts=PRIVATE_DOCS)


def test_few_shot_guard_is_vectorised_over_a_large_corpus() -> None:
    """Built once over 20,000 documents, checking examples takes no per-document loop."""
    import time

    from dpkps_core.llm.prompts import PrivateSpanIndex

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(5000)]
    docs = [" ".join(words[i] for i in row) for row in rng.integers(0, len(words), (20_000, 60)).tolist()]
    index = PrivateSpanIndex(docs)
    t = time.perf_counter()
    with pytest.raises(ParameterError):
        index.check(["public intro " + " ".join(docs[12_345].split()[10:20]) + " public outro"])
    index.check([" ".join(words[i] for i in row) for row in rng.integers(0, len(words), (20, 200)).tolist()])
    assert time.perf_counter() - t < 5.0


def test_cli_generate_refuses_few_shot_sharing_a_span_with_the_private_corpus(tmp_path: Path, capsys) -> None:
    """The CLI checks few-shot examples against the private corpus's documents (--private-corpus, or the corpus
    recorded in the run folder) before any model is loaded; the error quotes nothing of the corpus."""
    import csv

    from dpkps_core.cli.main import main

    corpus = tmp_path / "private.csv"
    with corpus.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["text", "label"])
        for i, doc in enumerate(PRIVATE_DOCS[:2] * 3):
            w.writerow([f"{doc} Copy {i}.", "a" if i % 2 else "b"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "sequences.jsonl").write_text(json.dumps({"id": "seq-000001", "label": "a", "keyphrases": ["x"],
                                                     "method": "independent"}) + "\n", encoding="utf-8")
    few = tmp_path / "few.txt"
    few.write_text("A public example about museums.\n\nNews: quarterly revenue rose sharply as the company expanded "
                   "its retail network, said a source.\n", encoding="utf-8")
    rc = main(["generate", "--sequences", str(run / "sequences.jsonl"), "--doc-type", "a note", "--few-shot",
               str(few), "--private-corpus", str(corpus), "--estimate-only"])
    err = capsys.readouterr().err
    assert rc == 2 and "Few-shot example 2 shares a run of 8" in err and "revenue" not in err
