"""The audit tests the mechanism that is released, from raw rows (docs/PRIVACY.md "Empirical audit"; docs/DESIGN.md §2,
§2.0).

The audited corpus is a CSV file on disk. The audit reads its raw rows, builds D⁻ (one row removed, or every row of
one person) and D⁺ (one canary row, or a canary person with several rows) on those rows, loads each through the
public loader, and weights its statistics with the release path's own contribution functions (per person under
the person unit). A correct person-level release must pass (it used to be reported as a violation: the audit counted
per document while D⁻ removed a whole person), and deliberately broken ones must be flagged: counting per document
(or 2S terms) while the noise is calibrated per person (for S), and a loader that collapses duplicate texts across
labels or persons. Seeded NumPy noise throughout, so the verdicts are reproducible.
"""

from __future__ import annotations

import csv
import itertools
import json
import string
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpkps_core import audit
from dpkps_core.method import pipeline
from dpkps_core.audit import raw as raw_mod
from dpkps_core.audit.raw import RawTable, raw_table_for, read_raw_table
from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.vocabulary import PublicVocabulary

CLASSES = ("blue", "red")
COLUMNS = ("record", "patient", "note_text", "label")
BOILERPLATE = "Standard discharge letter, nothing else to report here."


def _words(prefix: str, n: int) -> list[str]:
    return [prefix + "".join(t) for t in itertools.islice(itertools.product(string.ascii_lowercase, repeat=3), n)]


def _write_people(path: Path, n_people: int = 40, *, shared: int = 6) -> tuple[Path, PublicVocabulary]:
    """``n_people`` patients with 4, 3, 2, 1, 4, … notes; every note starts with a term of its own (so with S = 1 a note
    contributes one distinct term, a patient one in all), notes of one patient span both classes; the first
    ``shared`` patients also have the same boilerplate note (same text and label)."""
    own = iter(_words("u", 4 * n_people))
    topics = {"red": _words("r", 5), "blue": _words("b", 5)}
    rows: list[dict[str, str]] = []
    for p in range(n_people):
        pid = f"P{p:03d}"
        if p < shared:
            rows.append({"record": f"r{len(rows)}", "patient": pid, "note_text": BOILERPLATE, "label": "blue"})
        for j in range(4 - p % 4):
            label = CLASSES[(p + j) % 2]
            t = topics[label]
            rows.append({"record": f"r{len(rows)}", "patient": pid, "label": label,
                         "note_text": f"{next(own)} {t[j % 5]} {t[(j + 1) % 5]} noted at the visit."})
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    terms = _words("u", 4 * n_people) + topics["red"] + topics["blue"] + _words("zq", 40)
    return path, PublicVocabulary(name="tiny", terms=tuple(terms), licence="test data", source=__file__)


def _config(path: Path, vocab: PublicVocabulary, *, person: bool, **kw: Any) -> SamplingConfig:
    base = dict(corpus=str(path), vocabulary="tiny", eps_voc=0.5, eps_kde=0.5, terms_per_doc=1,
                vocab_size=len(vocab.terms), length=3, per_class=4, bandwidth=0.0, test_fraction=0.2,
                text_column="note_text", label_column="label", classes=CLASSES,
                person_column="patient" if person else None, remove_stopwords=False, junk_filter=False)
    base.update(kw)
    return SamplingConfig(**base).validate()


def _settings(**kw: Any) -> audit.AuditSettings:
    base = dict(trials=8, vocabulary_trials=1500, density_trials=40, seed=11, canary_documents=0)
    base.update(kw)
    return audit.AuditSettings(**base)


def _audit(tmp_path: Path, *, person: bool, **kw: Any) -> audit.AuditResult:
    path, vocab = _write_people(tmp_path / "notes.csv")
    config = _config(path, vocab, person=person)
    return audit.run_audit(raw_table_for(config), config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                           settings=_settings(**kw))


# ------------------------------------------------------------------------------------------- raw rows

def test_raw_table_reads_the_file_as_rows_and_loads_neighbours_through_the_loader(tmp_path: Path) -> None:
    path, vocab = _write_people(tmp_path / "notes.csv")
    raw = read_raw_table(path, text_column="note_text", label_column="label", person_column="patient",
                         classes=CLASSES)
    assert raw.columns == COLUMNS and raw.text_column == "note_text" and raw.person_column == "patient"
    assert "noted" not in repr(raw)  # never shows a cell
    direct = load_corpus(path, text_column="note_text", label_column="label", person_column="patient",
                         classes=CLASSES)
    loaded = raw.load_corpus()
    assert (loaded.texts, loaded.labels, loaded.persons) == (direct.texts, direct.labels, direct.persons)
    p5 = raw.rows_of_person("P005")
    minus = raw.without(p5).load_corpus()
    assert len(p5) == 4 and len(minus) == len(direct) - 4 and "P005" not in set(minus.persons or ())
    plus = raw.plus([raw.row("zqaaa zqaaa zqaaa zqaaa zqaaa.", "red", "new-person")]).load_corpus()
    assert len(plus) == len(direct) + 1 and plus.persons[-1] == "new-person"
    # JSON Lines keeps what the loader reads: numbers and missing cells read back as the same strings
    t = RawTable(("text", "label", "n"), (("a long enough text for the loader", 3, np.int64(4)),
                                          ("another long enough text here", 1.0, float("nan"))),
                 "text", "label", None, {"text_column": "text", "label_column": "label", "classes": ("1", "3")}, "t")
    assert t.load_corpus().labels == ("3", "1")
    assert [json.loads(x)["n"] for x in t.to_jsonl().decode().splitlines()] == [4, None]


def test_raw_table_from_a_loaded_corpus_is_a_stated_fallback() -> None:
    c = Corpus(("one document of enough length", "two documents of enough length"), ("a", "b"), "c", "x",
               public_classes=("a", "b"), persons=("p", "q"), person_column="who")
    raw = RawTable.from_corpus(c)
    assert raw.person_column == "person" and "not available" in raw.origin
    assert raw.load_corpus().persons == ("p", "q")
    with pytest.raises(ParameterError, match="no column"):
        RawTable(("text",), (), "text", "label", None, {}, "x")


# ------------------------------------------------------------------------------------------- correct releases pass

def test_a_correct_person_level_release_is_not_flagged(tmp_path: Path) -> None:
    """The person unit: D⁻ removes every raw row of one patient (boilerplate included), D⁺ adds a canary patient
    with three rows; the statistics count per person as the release does, so nothing is flagged. (The previous
    audit counted per document here and reported a violation of ε_voc.)"""
    result = _audit(tmp_path, person=True)
    r = result.to_dict()
    assert not result.violation, result.verdict
    assert result.verdict.startswith("consistent with ε = 1")
    assert r["vocabulary_stage_lower_bound"] <= 0.5 and r["density_stage_lower_bound"] <= 0.5
    assert r["privacy_unit"] == "one person" and r["rows"]["raw_rows"] == 106
    nb = r["neighbours"]
    assert nb["D⁻"]["removed_rows"] >= 2 and nb["D⁻"]["removed_documents"] == nb["D⁻"]["removed_rows"]
    assert nb["D⁺"]["added_rows"] == 3 and nb["D⁺"]["canary_in_training_part"]
    for pair in ("remove", "add"):
        assert nb["D⁻" if pair == "remove" else "D⁺"]["documents_changed_by_loading"] == 0
        check = r["sensitivity_check"][pair]
        assert 0 < check["vocabulary"]["l1_change"] <= check["vocabulary"]["sensitivity"] == 1
        assert 0 < check["density"]["l1_change"] <= 1 + 1e-9
    assert r["loader_probes"] and all(p["documents_changed"] == 0 for p in r["loader_probes"])
    assert "warnings" not in r
    assert "raw rows" in audit.render_markdown(result)


def test_a_correct_document_level_release_is_not_flagged(tmp_path: Path) -> None:
    result = _audit(tmp_path, person=False)
    r = result.to_dict()
    assert not result.violation, result.verdict
    nb = r["neighbours"]
    assert nb["D⁻"]["removed_rows"] == 1 and nb["D⁺"]["added_rows"] == 1
    assert nb["D⁻"]["training_documents"] == nb["D"]["training_documents"] - 1
    assert r["sensitivity_check"]["remove"]["vocabulary"]["l1_change"] == 1
    assert all(p["documents_changed"] == 0 for p in r["loader_probes"])


# ------------------------------------------------------------------------------------------- broken ones are flagged

def test_flags_per_document_counting_under_the_person_unit(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Broken: the vocabulary histogram counts each DOCUMENT's first S terms while the noise is calibrated for one
    person (S): removing a patient with 4 notes moves the counts by 4."""
    real = pipeline.term_counts

    def per_document(texts, vocabulary, *, terms_per_doc, matcher=None, groups=None):
        return real(texts, vocabulary, terms_per_doc=terms_per_doc, matcher=matcher, groups=None)

    monkeypatch.setattr(pipeline, "term_counts", per_document)
    result = _audit(tmp_path, person=True)
    r = result.to_dict()
    assert result.violation and result.verdict.startswith("VIOLATION")
    check = r["sensitivity_check"]["remove"]["vocabulary"]
    assert check["exceeded"] and check["l1_change"] == 4 and check["sensitivity"] == 1
    assert r["vocabulary_stage_lower_bound"] > 0.5  # the trials see it too, not only the check


def test_flags_2S_terms_counted_while_the_noise_is_for_S(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = pipeline.term_counts

    def doubled(texts, vocabulary, *, terms_per_doc, matcher=None, groups=None):
        return real(texts, vocabulary, terms_per_doc=2 * terms_per_doc, matcher=matcher, groups=groups)

    monkeypatch.setattr(pipeline, "term_counts", doubled)
    result = _audit(tmp_path, person=False)
    check = result.to_dict()["sensitivity_check"]["remove"]["vocabulary"]
    assert result.violation and check["exceeded"] and check["l1_change"] == 2


def _first_copy_loader(real: Any) -> Any:
    """A loader that keeps only the first copy of each text, across labels and persons (the old de-duplication)."""
    def load(*args: Any, **kwargs: Any) -> Corpus:
        c = real(*args, **kwargs)
        seen: set[str] = set()
        keep = [i for i, t in enumerate(c.texts) if not (t in seen or seen.add(t))]
        return c.subset(keep)
    return load


def test_flags_a_loader_that_collapses_duplicates_across_persons(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    monkeypatch.setattr(raw_mod, "load_corpus", _first_copy_loader(raw_mod.load_corpus))
    result = _audit(tmp_path, person=True, vocabulary_trials=200, density_trials=10, trials=4)
    r = result.to_dict()
    assert result.violation and "loading breaks neighbours" in result.verdict
    removed = [p for p in r["loader_probes"] if "removed" in p["probe"]]
    assert removed and removed[0]["documents_changed"] >= 1  # another patient's boilerplate note appears


def test_flags_a_loader_that_collapses_duplicates_across_labels(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setattr(raw_mod, "load_corpus", _first_copy_loader(raw_mod.load_corpus))
    result = _audit(tmp_path, person=False, vocabulary_trials=200, density_trials=10, trials=4)
    r = result.to_dict()
    assert result.violation and "loading breaks neighbours" in result.verdict
    inserted = [p for p in r["loader_probes"] if "inserted before" in p["probe"]]
    assert inserted and inserted[0]["documents_changed"] == 1  # the original became a label swap


def test_the_person_unit_needs_the_person_column(tmp_path: Path) -> None:
    path, vocab = _write_people(tmp_path / "notes.csv")
    config = _config(path, vocab, person=True)
    no_person = read_raw_table(path, text_column="note_text", label_column="label", classes=CLASSES)
    with pytest.raises(ParameterError, match="person"):
        audit.run_audit(no_person, config, vocabulary=vocab, embedder=HashingEmbedder(dim=8), settings=_settings())


@pytest.mark.slow
def test_person_unit_with_the_rff_log_ensemble_passes(tmp_path: Path) -> None:
    """The iterative ensemble's members weigh a person's qualifying documents to 1 (``prefix_weights``): the
    audit's density check reads the same weights."""
    path, vocab = _write_people(tmp_path / "notes.csv")
    config = _config(path, vocab, person=True, method="iterative-log", density="rff", features=64, bandwidth=0.5)
    result = audit.run_audit(raw_table_for(config), config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                             settings=_settings(vocabulary_trials=300, density_trials=40, trials=6))
    r = result.to_dict()
    assert not result.violation, result.verdict
    assert 0 < r["sensitivity_check"]["remove"]["density"]["l1_change"] <= 1 + 1e-9


def test_cli_audit_builds_its_neighbours_from_the_file(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``audit --person-column`` reads the CSV's raw rows (not the loaded corpus) and passes."""
    from dpkps_core.cli import audit as cli_audit
    from dpkps_core.cli import main

    monkeypatch.setattr(cli_audit, "get_embedder", lambda name: HashingEmbedder(dim=16))
    seen: list[Any] = []
    real = audit.run_audit
    monkeypatch.setattr(cli_audit.audit, "run_audit", lambda rows, *a, **k: seen.append(rows) or real(rows, *a, **k))
    path, vocab = _write_people(tmp_path / "notes.csv")
    vfile = tmp_path / "vocab.txt"
    vfile.write_text("\n".join(vocab.terms) + "\n")
    out = tmp_path / "audit"
    argv = ["audit", "--corpus", str(path), "--vocabulary", str(vfile), "--text-column", "note_text",
            "--label-column", "label", "--person-column", "patient", "--classes", ",".join(CLASSES),
            "--eps-voc", "0.5", "--eps-kde", "0.5", "-S", "1", "-N", str(len(vocab)), "--length", "3",
            "--per-class", "3", "--bandwidth", "0", "--trials", "4", "--vocabulary-trials", "100",
            "--density-trials", "8", "--canaries", "0", "--audit-seed", "3", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "consistent with ε = 1" in printed
    assert len(seen) == 1 and isinstance(seen[0], RawTable) and len(seen[0]) == 106
    report = json.loads((out / "audit_report.json").read_text())
    assert report["privacy_unit"] == "one person" and report["rows"]["origin"] == "notes.csv"
    assert report["neighbours"]["D⁻"]["removed_rows"] >= 2
