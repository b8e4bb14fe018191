"""Issue 35 §7: the audit reads a latin-1 corpus as the release path does (the same ``--encoding``), and says what it
covers — not the per-unit filter, the forecast or the baselines — in its output, its reports and on page 9."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_helpers import fast_env  # noqa: F401 (fixture)
from test_audit import CLASSES, synthetic

from dpkps_core import audit
from dpkps_core.embeddings import HashingEmbedder


def _latin1_corpus(tmp_path: Path) -> tuple[Path, Path, int]:
    corpus, vocab, _ = synthetic(60)
    csv = tmp_path / "privé.csv"
    rows = (f"{t} Écrit pour le café de l'audit par le señor.,{y}" for t, y in zip(corpus.texts, corpus.labels))
    csv.write_bytes(("text,label\n" + "\n".join(rows) + "\n").encode("latin-1"))
    vfile = tmp_path / "vocab.txt"
    vfile.write_text("\n".join(vocab.terms) + "\n")
    return csv, vfile, len(vocab)


def test_read_raw_table_decodes_with_the_release_encoding(tmp_path: Path) -> None:
    csv, _, _ = _latin1_corpus(tmp_path)
    table = audit.read_raw_table(csv, text_column="text", label_column="label", classes=CLASSES, encoding="latin-1")
    texts = [row[table.columns.index("text")] for row in table.rows]
    assert all("Écrit pour le café" in t and "señor" in t for t in texts)
    loaded = table.load_corpus()  # the neighbours go to the loader as UTF-8 JSON Lines: the same texts
    assert loaded.texts[0].endswith("señor.") and len(loaded) == 60
    with pytest.raises(Exception, match="latin-1|encoding|UTF-8"):
        audit.read_raw_table(csv, text_column="text", label_column="label", classes=CLASSES)


def test_cli_audit_takes_encoding_and_says_what_it_covers(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from dpkps_core.cli import audit as cli_audit
    from dpkps_core.cli import main

    monkeypatch.setattr(cli_audit, "get_embedder", lambda name: HashingEmbedder(dim=16))
    csv, vfile, n_terms = _latin1_corpus(tmp_path)
    out = tmp_path / "audit"
    argv = ["audit", "--corpus", str(csv), "--vocabulary", str(vfile), "--eps-voc", "0.5", "--eps-kde", "0.5",
            "-S", "1", "-N", str(n_terms), "--length", "3", "--per-class", "3", "--bandwidth", "0",
            "--trials", "4", "--vocabulary-trials", "40", "--density-trials", "8", "--canaries", "0",
            "--audit-seed", "1", "--quiet", "--classes", ",".join(CLASSES), "--out", str(out)]
    assert main(argv[:-2] + ["--encoding", "utf-8"]) == 2  # the file is not UTF-8: refused in one line
    assert "encoding" in capsys.readouterr().err.lower()
    assert main(argv + ["--encoding", "latin-1"]) == 0
    printed = capsys.readouterr().out
    assert "empirical_epsilon_lower_bound:" in printed
    assert "This audit covers" in printed and "It does NOT cover the per-unit privacy filter" in printed
    assert "Not covered by this audit:" in printed and "the DP forecast" in printed and "the baselines" in printed
    report = json.loads((out / "audit_report.json").read_text(encoding="utf-8"))
    assert report["covers"] == list(audit.AUDIT_COVERS)
    assert report["does_not_cover"] == list(audit.AUDIT_DOES_NOT_COVER)
    markdown = (out / "audit_report.md").read_text(encoding="utf-8")
    assert "### What this audit covers" in markdown and "per-unit privacy filter" in markdown


@pytest.mark.slow
def test_page_9_says_what_the_audit_covers(fast_env: Path) -> None:
    from app_helpers import goto, new_app

    at = goto(new_app(), "audit")
    found = [i.value for i in at.info if "What this audit covers" in i.value]
    assert found and "per-unit privacy filter" in found[0] and "DP forecast" in found[0]
    assert "baselines" in found[0]


def test_exposure_canaries_with_an_in_distribution_prefix() -> None:
    """[Canary]: each exposure canary begins like a training document of its class (words no public term matches
    here, so the rare suffix keeps its place among the S terms a document contributes) and ends with rare public
    terms; the audit says how many had a prefix and never shows the prefix itself (it is private text)."""
    import dataclasses

    from dpkps_core.corpus import Corpus

    corpus, vocab, config = synthetic(120)
    texts = tuple(f"wardnote{i} nursescribe{i} {t}" for i, t in enumerate(corpus.texts))
    corpus = dataclasses.replace(corpus, texts=texts) if dataclasses.is_dataclass(corpus) else Corpus(
        texts=texts, labels=corpus.labels, name=corpus.name, source=corpus.source)
    config = dataclasses.replace(config, terms_per_doc=2)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                             settings=audit.AuditSettings(trials=6, vocabulary_trials=200, density_trials=12, seed=3,
                                                          canary_documents=2, canary_prefix_words=2))
    ex = result.exposure
    assert ex["prefix_words"] == 2 and ex["canaries_with_prefix"] == 2
    assert ex["terms_per_canary"] == 1  # S = 2: one rare term after a prefix, which matches no public term
    assert all(t.startswith("zq") for c in ex["per_canary"] for t in c["terms"])
    report = json.dumps(result.to_dict()) + audit.render_markdown(result)
    assert "wardnote" not in report and "nursescribe" not in report  # the private prefix is never shown
    assert "in-distribution prefix of up to 2 words" in audit.render_markdown(result)
    with pytest.raises(Exception):
        audit.AuditSettings(canary_prefix_words=-1).validate()
