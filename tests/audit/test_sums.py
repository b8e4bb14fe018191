"""The audit's neighbour statistics by subtraction equal recounting the neighbour (issue 31 §4; dpkps_core/audit/sums.py).

D's statistic minus or plus the changed units' contributions must be exactly what the release path's own functions
give on the neighbour's whole training part: the vocabulary histogram exactly (integers), the keyphrases exactly,
the keyphrase weights of the density step within 1e-9 relative — for the document unit and the person unit (where a
person's first S distinct terms run over all their documents in order, so S = 2 and several notes per person make
the order matter), for removing a unit, adding one, and for an arbitrary change (documents moved, as a faulty split
would). And the audit still runs the release's own noise step on these statistics: halving the vocabulary noise
is flagged.
"""

from __future__ import annotations

import itertools
import string

import numpy as np
import pytest

from dpkps_core import audit
from dpkps_core.audit.neighbours import density_contributions
from dpkps_core.audit.sums import (
    changed_units,
    compact_keyphrases,
    neighbour_density_contributions,
    neighbour_keyphrases,
    neighbour_term_counts,
)
from dpkps_core.corpus import Corpus
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.method import pipeline
from dpkps_core.method.vocabulary import PublicVocabulary

from test_audit import settings, synthetic

CLASSES = ("blue", "red")
S, M = 2, 3


def _words(prefix: str, n: int) -> list[str]:
    return [prefix + "".join(t) for t in itertools.islice(itertools.product(string.ascii_lowercase, repeat=3), n)]


def _corpus(n_people: int = 30, *, seed: int = 0) -> tuple[Corpus, PublicVocabulary]:
    """Notes of ``n_people`` patients (1–4 each, across both classes), each note 3–6 terms from a shared pool (so
    the first S distinct terms of a person depend on the order of their notes), with repeats."""
    rng = np.random.default_rng(seed)
    pool = _words("t", 40)
    texts, labels, persons = [], [], []
    for p in range(n_people):
        for j in range(1 + p % 4):
            words = [pool[int(k)] for k in rng.integers(0, len(pool), size=int(rng.integers(3, 7)))]
            texts.append(" ".join(words) + f" note {p} {j}.")
            labels.append(CLASSES[(p + j) % 2])
            persons.append(f"P{p:03d}")
    vocab = PublicVocabulary(name="tiny", terms=tuple(pool + _words("zq", 10)), licence="test data", source=__file__)
    return Corpus(tuple(texts), tuple(labels), "notes", "test", public_classes=CLASSES, persons=tuple(persons),
                  person_column="patient"), vocab


def _neighbours(d: Corpus) -> dict[str, Corpus]:
    """D⁻ (one patient's notes, or one note, removed), D⁺ (a canary patient's notes added), and an arbitrary
    change (several notes of several patients dropped, the order of the rest shuffled, a note duplicated)."""
    persons = d.persons or ()
    victim = persons[7]
    rng = np.random.default_rng(3)
    keep = [i for i in range(len(d)) if i % 5 != 2]
    rng.shuffle(keep)
    canary = Corpus(("zqaaa zqaab tabc. zqaac.", "zqaad zqaaa taab.", "zqaae."), ("red", "blue", "red"), "c", "c",
                    public_classes=CLASSES, persons=("CANARY",) * 3, person_column="patient")
    plus = Corpus(d.texts + canary.texts, d.labels + canary.labels, "notes", "test", public_classes=CLASSES,
                  persons=persons + canary.persons, person_column="patient")
    return {"minus_person": d.subset(i for i in range(len(d)) if persons[i] != victim),
            "minus_document": d.subset(i for i in range(len(d)) if i != 11),
            "plus": plus,
            "moved": d.subset(keep + [keep[0]])}


@pytest.mark.parametrize("by_person", [False, True], ids=["document unit", "person unit"])
def test_term_counts_by_subtraction_equal_recounting(by_person: bool) -> None:
    with_persons, vocab = _corpus()
    d = with_persons if by_person else with_persons.with_persons(None)
    base = np.asarray(pipeline.term_counts(d.texts, vocab, terms_per_doc=S, groups=d.persons))
    for name, other in _neighbours(with_persons).items():
        other = other if by_person else other.with_persons(None)
        change = changed_units(d, other, by_person=by_person)
        assert change.documents < len(d) + len(other), name  # only the changed units are recounted
        got = neighbour_term_counts(base, d, other, change, vocab, terms_per_doc=S, by_person=by_person)
        want = np.asarray(pipeline.term_counts(other.texts, vocab, terms_per_doc=S, groups=other.persons))
        assert np.array_equal(got, want), name
    assert changed_units(d, d, by_person=by_person).documents == 0


@pytest.mark.parametrize("by_person", [False, True], ids=["document unit", "person unit"])
@pytest.mark.parametrize("kind", ["independent", "iterative-log"])
def test_keyphrases_and_density_weights_by_subtraction_equal_recounting(by_person: bool, kind: str) -> None:
    with_persons, vocab = _corpus(seed=1)
    d = with_persons if by_person else with_persons.with_persons(None)
    terms = vocab.terms
    pv = PrivateVocabulary(terms=terms, noisy_counts=np.ones(len(terms)), public_vocabulary="tiny",
                           public_vocabulary_size=len(terms), epsilon=1.0, terms_per_doc=S, requested_size=len(terms),
                           noise_scale=S)
    kps_d = compact_keyphrases(d, pv, max_per_doc=M)
    hist_d = density_contributions(kps_d, d.labels, CLASSES, len(terms), kind=kind, max_per_doc=M, groups=d.persons)
    for name, other in _neighbours(with_persons).items():
        other = other if by_person else other.with_persons(None)
        kps = neighbour_keyphrases(kps_d, d, other, pv, max_per_doc=M)
        assert kps == pipeline.extract_keyphrases(other.texts, pv, max_per_doc=M), name
        change = changed_units(d, other, by_person=by_person)
        got, delta = neighbour_density_contributions(hist_d, kps_d, d, kps, other, change, CLASSES, len(terms),
                                                     kind=kind, max_per_doc=M, by_person=by_person)
        want = density_contributions(pipeline.extract_keyphrases(other.texts, pv, max_per_doc=M), other.labels,
                                     CLASSES, len(terms), kind=kind, max_per_doc=M, groups=other.persons)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(delta, want - hist_d, rtol=1e-9, atol=1e-12, err_msg=name)


def test_the_audit_says_how_its_neighbour_statistics_were_computed() -> None:
    corpus, vocab, config = synthetic(60)
    r = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                        settings=settings(trials=4, vocabulary_trials=20, density_trials=4)).to_dict()
    note = r["neighbour_statistics"]
    assert "counted and matched once" in note["method"]
    # one removed document on each side of D⁻, one canary document on D⁺'s side
    assert note["documents_of_changed_units"]["D⁻"] == 1 and note["documents_of_changed_units"]["D⁺"] == 1


def test_halving_the_vocabulary_noise_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vocabulary stage's trials run the release's own step 1 on the counts computed once: a mechanism whose
    Laplace noise is half what ε_voc needs (effective 2·ε_voc) is a violation; the correct one is not."""
    import dpkps_core.dp.vocabulary as dpv

    corpus, vocab, config = synthetic(60, eps_voc=1.0, eps_kde=0.1)
    run = dict(vocabulary=vocab, embedder=HashingEmbedder(dim=16),
               settings=settings(vocabulary_trials=1500, trials=6, density_trials=20))
    correct = audit.run_audit(corpus, config, **run)
    assert not correct.violation and correct.to_dict()["vocabulary_stage_lower_bound"] <= config.eps_voc
    real = dpv.noisy_term_histogram

    def halved(counts, *, epsilon, terms_per_doc, noise):
        return real(counts, epsilon=2 * epsilon, terms_per_doc=terms_per_doc, noise=noise)

    monkeypatch.setattr(dpv, "noisy_term_histogram", halved)
    result = audit.run_audit(corpus, config, **run)
    r = result.to_dict()
    assert result.violation and result.verdict.startswith("VIOLATION")
    assert r["vocabulary_stage_lower_bound"] > config.eps_voc and r["stages"]["vocabulary"]["violation"]


def test_the_markdown_says_how_the_neighbour_statistics_were_computed() -> None:
    corpus, vocab, config = synthetic(40)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                             settings=settings(trials=4, vocabulary_trials=20, density_trials=4))
    md = audit.render_markdown(result)
    assert "Neighbour statistics: D's training part counted and matched once" in md
    assert "(documents of the changed units: D⁻ 1, D⁺ 1)" in md
    older = {k: v for k, v in result.to_dict().items() if k != "neighbour_statistics"}
    assert "Neighbour statistics" not in audit.render_markdown(older)
