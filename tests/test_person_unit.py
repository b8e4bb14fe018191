"""The person as the unit of privacy (issue 15): neighbours differ by ALL documents of one person."""

from __future__ import annotations

import json

import numpy as np
import pytest
from dp_stats import assert_ratio_within

from dpkps_core.cli import main
from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.kde import rff_feature_sums
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rff import RandomFourierFeatures
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.dossier.export import collect_bundle
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.pipeline import run_sampling, write_run_folder
from dpkps_core.method.split import split_documents
from dpkps_core.method.vocabulary import PublicVocabulary

TERMS = tuple(f"term{i}" for i in range(12)) + ("target",)
VOCAB = PublicVocabulary("v", TERMS, "test", "test")


def _people(n_people: int = 120, drop: str | None = None) -> Corpus:
    """Each person has 1–4 notes; person-7x people write about "target" in every note."""
    texts, labels, persons = [], [], []
    for p in range(n_people):
        pid = f"patient-{p:04d}-id"
        if pid == drop:
            continue
        for j in range(1 + p % 4):
            term = "target" if p % 7 == 0 else TERMS[(p + j) % 12]
            texts.append(f"note {j} of person {p} about {term}")
            labels.append("a" if (p + j) % 2 else "b")  # a person's notes span both classes
            persons.append(pid)
    return Corpus(tuple(texts), tuple(labels), "people", "tests", public_classes=("a", "b"), persons=tuple(persons),
                  person_column="patient")


def _config(**kw) -> SamplingConfig:
    base = dict(corpus="people", vocabulary="v", eps_voc=1.0, eps_kde=1.0, terms_per_doc=1, vocab_size=len(TERMS),
                per_class=2, length=2, remove_stopwords=False, junk_filter=False, bandwidth=0.0,
                person_column="patient")
    base.update(kw)
    return SamplingConfig(**base).validate()


def _target_counts(corpus: Corpus, cfg: SamplingConfig, trials: int) -> np.ndarray:
    emb, out = HashingEmbedder(dim=8), np.empty(trials)
    for k in range(trials):
        pv = run_sampling(corpus, cfg, vocabulary=VOCAB, embedder=emb,
                          context=ReleaseContext(noise=NoiseSource(sampler="numpy"))).private_vocabulary
        out[k] = pv.noisy_counts[pv.terms.index("target")]
    return out


def test_removing_all_documents_of_one_person_stays_within_e_epsilon():
    """D and D' = D without every note of one training person who wrote 4 notes about "target": through the
    whole run_sampling, the released count moves by 1 (the person), not 4 (the notes)."""
    d = _people()
    split = split_documents(d, test_fraction=0.2, by_person=True)
    train_people = {d.persons[i] for i in split.train}
    victim = next(f"patient-{p:04d}-id" for p in range(0, 120, 7) if p % 4 == 3 and f"patient-{p:04d}-id" in train_people)
    d2 = _people(drop=victim)
    cfg, trials = _config(), 1200
    a, b = _target_counts(d, cfg, trials), _target_counts(d2, cfg, trials)
    for threshold in np.quantile(a, [0.3, 0.5, 0.7]):
        assert_ratio_within(int((a > threshold).sum()), int((b > threshold).sum()), trials, 1.0)
    assert abs((a.mean() - b.mean()) - 1.0) < 0.3
    # the same neighbours at the DOCUMENT level move the count by 4: the person unit is what protects them
    doc_cfg = _config(person_column=None, test_fraction=0.0)  # every note in training: the whole person is removed
    a4, b4 = _target_counts(d, doc_cfg, 300), _target_counts(d2, doc_cfg, 300)
    assert (a4.mean() - b4.mean()) > 3.0


def test_person_level_noise_equals_document_level_noise_and_the_unit_is_stated(tmp_path):
    d = _people()
    runs = {}
    for name, column in (("person", "patient"), ("document", None)):
        runs[name] = run_sampling(d, _config(person_column=column), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8),
                                  context=ReleaseContext(noise=NoiseSource(seed=3, sampler="numpy")))
    for ep, ed in zip(runs["person"].ledger.events, runs["document"].ledger.events):
        assert (ep.noise_scale, ep.sensitivity, ep.epsilon) == (ed.noise_scale, ed.sensitivity, ed.epsilon)
        assert "one person" in ep.neighbouring and "'patient'" in ep.neighbouring
        assert ed.neighbouring == "add/remove one document"
    report = runs["person"].privacy_report()
    assert "all documents of one person (identified by column 'patient')" in report["neighbouring"]
    out = write_run_folder(runs["person"], tmp_path / "run")
    bundle = collect_bundle(out)
    blobs = [p.read_bytes() for p in out.iterdir() if p.name != "split.json"] + list(bundle.values())
    assert not any(b"patient-0" in blob for blob in blobs)  # no person identifier is ever released
    assert "Unit of privacy: **one person**" in bundle["privacy_report.md"].decode()


def test_one_document_per_person_gives_the_same_release_as_without_the_column():
    texts = tuple(f"a note about {TERMS[i % 13]} number {i}" for i in range(80))
    labels = tuple("ab"[i % 2] for i in range(80))
    plain = Corpus(texts, labels, "x", "t", public_classes=("a", "b"))
    with_people = plain.with_persons([f"p{i}" for i in range(80)], "patient")
    cfg = _config(length=3, bandwidth=None)
    r1 = run_sampling(plain, _config(person_column=None, length=3, bandwidth=None), vocabulary=VOCAB,
                      embedder=HashingEmbedder(dim=8),
                      context=ReleaseContext(noise=NoiseSource(seed=9, sampler="numpy")))
    r2 = run_sampling(with_people, cfg, vocabulary=VOCAB, embedder=HashingEmbedder(dim=8),
                      context=ReleaseContext(noise=NoiseSource(seed=9, sampler="numpy")))
    assert r1.split == r2.split
    assert r1.private_vocabulary.terms == r2.private_vocabulary.terms
    np.testing.assert_array_equal(r1.private_vocabulary.noisy_counts, r2.private_vocabulary.noisy_counts)
    assert [s.to_dict() for s in r1.outcome.sequences] == [s.to_dict() for s in r2.outcome.sequences]
    # the iterative RFF path too
    it = dict(method="iterative-log", density="rff", bandwidth=0.5, features=64, length=4)
    s1 = run_sampling(plain, _config(person_column=None, **it), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8),
                      context=ReleaseContext(noise=NoiseSource(seed=4, sampler="numpy")))
    s2 = run_sampling(with_people, _config(**it), vocabulary=VOCAB, embedder=HashingEmbedder(dim=8),
                      context=ReleaseContext(noise=NoiseSource(seed=4, sampler="numpy")))
    assert [s.keyphrases for s in s1.outcome.sequences] == [s.keyphrases for s in s2.outcome.sequences]


def test_a_person_weighs_one_across_classes_in_every_statistic():
    keyphrases = [[0, 1, 2], [3], [4, 4], [1]]
    labels = ["a", "b", "a", "b"]
    persons = ["p", "p", "p", "q"]  # p spans both classes with 6 occurrences
    full = class_keyphrase_histograms(keyphrases, labels, ("a", "b"), 5, groups=persons)
    without_p = class_keyphrase_histograms(keyphrases[3:], labels[3:], ("a", "b"), 5, groups=persons[3:])
    assert np.abs(full - without_p).sum() == pytest.approx(1.0)
    emb = np.eye(5, 4, dtype=np.float32) + 0.1
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    for blocks in (1, 2):
        feats = RandomFourierFeatures.draw(dim=4 * blocks, features=16, bandwidth=0.5, rng=np.random.default_rng(0))
        kw = dict(classes=("a", "b"), embeddings=emb, features=feats, blocks=blocks, block_scale=1.0,
                  kind="iterative-log", max_per_doc=3)
        s_full = rff_feature_sums(keyphrases, labels, groups=persons, **kw)
        s_wo = rff_feature_sums(keyphrases[3:], labels[3:], groups=persons[3:], **kw)
        assert np.abs(s_full - s_wo).sum() <= np.sqrt(2) * 16 + 1e-9


def test_cli_person_column(tmp_path, capsys):
    rows = ["text,label,patient"] + [f'"note {i} about term{i % 12} and target",{"ab"[i % 2]},P{i // 3}'
                                     for i in range(90)]
    path = tmp_path / "notes.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    vocab = tmp_path / "v.txt"
    vocab.write_text("\n".join(TERMS) + "\n", encoding="utf-8")
    assert load_corpus(path, person_column="patient").persons[:4] == ("P0", "P0", "P0", "P1")
    out = tmp_path / "run"
    assert main(["sample", "--corpus", str(path), "--vocabulary", str(vocab), "--classes", "a,b", "--person-column",
                 "patient", "-K", "1", "-L", "2", "-N", "8", "-S", "2", "--no-junk-filter", "--seed", "0",
                 "--out", str(out)]) == 0
    report = json.loads((out / "privacy_report.json").read_text())
    assert "one person" in report["neighbouring"] and all("one person" in e["neighbouring"] for e in report["events"])
    assert b"P1," not in (out / "sequences.jsonl").read_bytes()
    assert main(["sample", "--corpus", str(path), "--vocabulary", str(vocab), "--classes", "a,b", "--person-column",
                 "nobody", "--out", str(tmp_path / "r2")]) == 2
    assert "Person column 'nobody' was not found" in capsys.readouterr().err


def test_app_person_column_on_page_1(tmp_path, monkeypatch):
    from app_helpers import state_of, click, declare_classes, goto, new_app, walk

    monkeypatch.setenv("DPKPS_TEST_FAST", "1")
    monkeypatch.setenv("DPKPS_WARMUP", "0")
    monkeypatch.setenv("DPKPS_RUNS_DIR", str(tmp_path / "runs"))
    rows = ["text,label,patient"] + [f'"note {i} about the striker and the goal in the match {i}",{"sport" if i % 2 else "tech"},P{i // 3}'
                                     for i in range(60)]
    at = new_app()
    goto(at, "corpus")
    at.radio(key="_w.corpus_source").set_value("upload").run()
    at.file_uploader(key="corpus_upload").set_value(("notes.csv", ("\n".join(rows) + "\n").encode(), "text/csv")).run()
    at.selectbox(key="upload_person_col").set_value("patient").run()
    click(at, "Load this corpus", clean=False)
    declare_classes(at)
    assert any("one person" in i.value for i in at.info)
    split = state_of(at).loaded.split
    c = state_of(at).loaded.corpus
    train_people, test_people = {c.persons[i] for i in split.train}, {c.persons[i] for i in split.test}
    assert not train_people & test_people  # whole persons
    walk(at, "private-vocabulary")
    events = state_of(at).ledgers[state_of(at).loaded.corpus_id].events
    assert events and all("one person" in e.neighbouring for e in events)
