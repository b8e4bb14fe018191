"""The counting passes as map/reduce over chunks (issue 31; dpkps_core/method/streaming_counts.py): the same statistics
as the in-memory functions — counts exactly, weighted sums within 1e-9 relative — for any chunk size and worker
count, per document and per person, and the same sensitivities on neighbouring inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpkps_core.corpus.stream import CorpusStream
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.errors import ParameterError
from dpkps_core.method.pipeline import extract_keyphrases, term_counts
from dpkps_core.method.streaming_counts import PersonSpill, chunked, keyphrase_pass, vocabulary_pass
from dpkps_core.method.vocabulary import PublicVocabulary

TERMS = ("goal", "match", "league", "cup final", "bank", "shares", "interest rates", "profit", "chip", "network",
         "broadband", "software", "stadium", "market", "fuel", "the cup")
V = PublicVocabulary("v", TERMS, "test", "tests/method/test_streaming_counts.py")
V_TILDE = TERMS[::2] + ("interest rates",)
CLASSES = ("sport", "business", "tech")
S, M = 3, 4


def _corpus(n: int = 150, seed: int = 3) -> tuple[list[str], list[str], list[str]]:
    rng = np.random.default_rng(seed)
    words = list(TERMS) + ["the", "and", "today", "said", "a", "of"] * 3
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 14)))) + "." for _ in range(n)]
    labels = [str(rng.choice(CLASSES + ("weather",))) for _ in range(n)]  # "weather" is undeclared
    persons = [f"P{int(rng.integers(0, 23)):03d}" for _ in range(n)]
    return texts, labels, persons


def _expected(texts, labels, persons, by_person):
    groups = persons if by_person else None
    counts = term_counts(texts, V, terms_per_doc=S, groups=groups)
    pv = PrivateVocabulary(terms=V_TILDE, noisy_counts=np.zeros(len(V_TILDE)), public_vocabulary="v",
                           public_vocabulary_size=len(TERMS), epsilon=1.0, terms_per_doc=S,
                           requested_size=len(V_TILDE), noise_scale=S)
    kp = extract_keyphrases(texts, pv, max_per_doc=M)
    hist = class_keyphrase_histograms(kp, labels, CLASSES, len(V_TILDE), max_per_doc=M, groups=groups)
    return counts, hist


@pytest.mark.parametrize("by_person", [False, True])
@pytest.mark.parametrize("workers", [1, 2])
def test_passes_equal_the_in_memory_statistics(by_person, workers):
    texts, labels, persons = _corpus()
    counts, hist = _expected(texts, labels, persons, by_person)
    assert counts.sum() > 0 and hist.sum() > 0
    for size in (1, 7, 1000):
        got = vocabulary_pass(chunked(texts, labels, persons, size=size), TERMS, terms_per_doc=S,
                              by_person=by_person, workers=workers, partitions=3)
        assert got.counts.dtype == np.int64 and np.array_equal(got.counts, counts), size
        assert got.documents == len(texts) and got.truncated == 0
        h = keyphrase_pass(chunked(texts, labels, persons, size=size), V_TILDE, classes=CLASSES, max_per_doc=M,
                           by_person=by_person, workers=workers, partitions=3)
        assert h.shape == hist.shape
        np.testing.assert_allclose(h, hist, rtol=1e-9, atol=1e-12)


def test_one_added_row_moves_the_statistics_by_their_sensitivity():
    texts, labels, persons = _corpus(120, seed=5)
    extra = "goal match league cup final bank shares interest rates profit chip network."
    for where in (0, 60, 120):
        t2, l2, p2 = texts[:where] + [extra] + texts[where:], labels[:where] + ["sport"] + labels[where:], \
            persons[:where] + ["NEW"] + persons[where:]
        for size in (1, 7):
            a = vocabulary_pass(chunked(texts, size=size), TERMS, terms_per_doc=S, workers=1).counts
            b = vocabulary_pass(chunked(t2, size=size), TERMS, terms_per_doc=S, workers=1).counts
            assert 0 < np.abs(a - b).sum() <= S
            ha = keyphrase_pass(chunked(texts, labels, size=size), V_TILDE, classes=CLASSES, max_per_doc=M, workers=1)
            hb = keyphrase_pass(chunked(t2, l2, size=size), V_TILDE, classes=CLASSES, max_per_doc=M, workers=1)
            assert np.abs(ha - hb).sum() <= 1 + 1e-9
            # person unit: removing every row of one person moves the counts by ≤ S and the histograms by ≤ 1
            keep = [i for i, p in enumerate(p2) if p != persons[0]]
            pa = vocabulary_pass(chunked(t2, l2, p2, size=size), TERMS, terms_per_doc=S, by_person=True,
                                 workers=1).counts
            pb = vocabulary_pass(chunked([t2[i] for i in keep], None, [p2[i] for i in keep], size=size), TERMS,
                                 terms_per_doc=S, by_person=True, workers=1).counts
            assert np.abs(pa - pb).sum() <= S


def test_truncation_is_counted_and_applied_per_document():
    texts = ["goal " * 30 + "bank", "bank shares"] * 5
    got = vocabulary_pass(chunked(texts, size=3), TERMS, terms_per_doc=S, workers=1, max_chars=40)
    assert got.truncated == 5 and got.counts[TERMS.index("bank")] == 5


def test_a_stream_from_a_file_counts_what_the_loaded_corpus_counts(tmp_path):
    texts, labels, persons = _corpus(90)
    path = tmp_path / "notes.csv"
    pd.DataFrame({"text": texts, "label": labels, "patient": persons}).to_csv(path, index=False)
    stream = CorpusStream(path, person_column="patient", min_chars=5, chunk_rows=11)
    got = vocabulary_pass(stream.chunks(), TERMS, terms_per_doc=S, by_person=True, workers=1)
    loaded = [c for c in CorpusStream(path, person_column="patient", min_chars=5).chunks()][0]
    assert np.array_equal(got.counts, term_counts(loaded.texts, V, terms_per_doc=S, groups=loaded.persons))
    assert got.documents == stream.report.n_kept


def test_the_person_spill_holds_no_person_id_and_is_removed():
    spill = PersonSpill(partitions=4)
    keys = spill.digests(["patient-0042", "patient-0042", "patient-7"])
    spill.add(keys, np.array([5, 6, 7]))
    folder = spill._dir.name
    raw = b"".join(p.read_bytes() for p in spill._paths if p.exists())
    assert b"patient" not in raw and len(raw) == 3 * 24
    groups = list(spill.partitions())
    assert sorted(v for _, values in groups for v in values.tolist()) == [5, 6, 7]
    spill.close()
    import os
    assert not os.path.exists(folder)
    with pytest.raises(ParameterError):
        vocabulary_pass(chunked(["goal"], size=1), TERMS, terms_per_doc=S, by_person=True, workers=1)
    with pytest.raises(ParameterError, match="workers"):
        vocabulary_pass(chunked(["goal"], size=1), TERMS, terms_per_doc=S, workers=0)


def test_worker_setting(monkeypatch):
    from dpkps_core.method.streaming_counts import check_workers, default_workers

    monkeypatch.setenv("DPKPS_WORKERS", "3")
    assert default_workers() == 3 and check_workers(None) == 3 and check_workers(1) == 1
    monkeypatch.setenv("DPKPS_WORKERS", "many")
    with pytest.raises(ParameterError, match="DPKPS_WORKERS must be a whole number"):
        default_workers()
    monkeypatch.delenv("DPKPS_WORKERS")
    assert default_workers() >= 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_progress_callback_that_raises_cancels_between_chunks(workers, tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the person spill's folder goes
    texts, labels, persons = _corpus(60)
    seen: list[int] = []

    class Cancelled(Exception):
        pass

    def progress(done: int) -> None:
        seen.append(done)
        if done >= 20:
            raise Cancelled

    with pytest.raises(Cancelled):
        vocabulary_pass(chunked(texts, labels, persons, size=10), TERMS, terms_per_doc=S, by_person=True,
                        workers=workers, progress=progress)
    assert seen == [10, 20] and not list(tmp_path.iterdir())  # stopped at once; the spill folder is gone
