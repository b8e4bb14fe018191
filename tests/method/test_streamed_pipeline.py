"""The pipeline's DP steps read their documents in chunks, from memory or streamed from a file (issue 31;
docs/DESIGN.md §2.0–§2.2; [DP-KPS] §2).

For a small (3 rows) and a large (100,000 rows) chunk size:

- a seeded run on an in-memory corpus writes the same files, byte for byte, as with the default chunk size;
- a run on a corpus FILE streamed through :class:`~dpkps_core.method.training_source.StreamedCorpus` writes the same
  files (split included) as a run on the same file loaded whole, for the document and the person unit;
- charge first holds on the streamed path: admit, charge, then noise, for each release; left-out units take no
  part in either statistic;
- neighbours stay neighbours through the streamed path: D and D + one row (one person) move the vocabulary
  statistic by ≤ S and the stacked keyphrase histograms by ≤ 1 in L1;
- the compact keyphrases (:class:`~dpkps_core.dp.contributions.Keyphrases`) give the histograms of the lists.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus, load_corpus
from dpkps_core.corpus.stream import CorpusStream
from dpkps_core.dp.contributions import Keyphrases, class_keyphrase_histograms
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.ledger_store import primary_keys
from dpkps_core.ledger_store.folder import _UnitHasher
from dpkps_core.method.pipeline import density_step, run_sampling, vocabulary_step, write_run_files
from dpkps_core.method.training_source import StreamedCorpus
from dpkps_core.method.vocabulary import PublicVocabulary

CHUNKS = [3, 100_000]
CLASSES = ("cardio", "neuro", "onco")
WORDS = {"cardio": ("angina", "stent", "murmur", "infarction", "arrhythmia"),
         "neuro": ("seizure", "migraine", "stroke", "tremor", "neuropathy"),
         "onco": ("tumour", "biopsy", "chemotherapy", "metastasis", "lymphoma")}
TERMS = tuple(w for ws in WORDS.values() for w in ws) + ("fever", "dose", "scan", "follow") + tuple(
    f"public{i}" for i in range(20))
VOCAB = PublicVocabulary("test-v", TERMS, "test", "tests/method/test_streamed_pipeline.py")
EMBEDDER = HashingEmbedder(dim=16)
S = 3


def _rows(n: int = 90) -> list[dict[str, str]]:
    """Notes of three classes, 1–3 per patient, with the rows a loader must treat per row: an identical repeat
    (collapses), an empty text and a too-short one (dropped), an undeclared label (enters no DP step)."""
    rows = []
    for i in range(n):
        label = CLASSES[i % 3]
        ws = WORDS[label]
        text = (f"Note {i}: {ws[i % 5]} and {ws[(i * 2 + 1) % 5]} seen, {ws[(i + 3) % 5]} noted; fever dose "
                f"scan follow {'public' + str(i % 20)}.")
        rows.append({"text": text, "label": label, "patient": f"p{i // 2 if i % 5 else i}"})
    rows += [dict(rows[4]), {"text": "", "label": "neuro", "patient": "p1"},
             {"text": "too short", "label": "onco", "patient": "p2"},
             {"text": "An undeclared note about angina and a stroke, fever noted.", "label": "other",
              "patient": "p3"}]
    return rows


def _write(path: Path, rows: Sequence[dict[str, str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["text", "label", "patient"])
        w.writeheader()
        w.writerows(rows)
    return path


def _config(**kw: Any) -> SamplingConfig:
    base = dict(corpus="corpus.csv", vocabulary="test-v", classes=CLASSES, eps_voc=4.0, eps_kde=4.0,
                terms_per_doc=S, vocab_size=12, per_class=3, length=4, remove_stopwords=False, junk_filter=False,
                test_fraction=0.2, seed=11, noise_sampler="numpy")
    base.update(kw)
    return SamplingConfig(**base).validate()


def _files(folder: Path, run: Any, config: SamplingConfig) -> dict[str, bytes]:
    out = write_run_files(folder, config=config, split=run.split, private_vocabulary=run.private_vocabulary,
                          outcome=run.outcome, report=run.privacy_report())
    files = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    # the events' wall-clock timestamps are the only bytes two runs may not share
    files["privacy_report.json"] = re.sub(rb'"timestamp": "[^"]*"', b'"timestamp": ""', files["privacy_report.json"])
    return files


def _run(corpus: Any, config: SamplingConfig, ledger: PrivacyLedger | None = None,
         noise: NoiseSource | None = None) -> Any:
    return run_sampling(corpus, config, vocabulary=VOCAB, embedder=EMBEDDER,
                        context=ReleaseContext(
                            noise=noise if noise is not None else NoiseSource(config.seed, sampler="numpy"),
                            ledger=ledger if ledger is not None else PrivacyLedger()))


def _streamed(path: Path, config: SamplingConfig, chunk_rows: int) -> StreamedCorpus:
    stream = CorpusStream(path, person_column="patient" if config.person_column else None, chunk_rows=chunk_rows)
    return StreamedCorpus.open(stream, config)


# ---- the same run for any chunk size ------------------------------------------------------------------------

@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("method", ["independent", "iterative-log"])
@pytest.mark.parametrize("person", [False, True])
def test_a_seeded_in_memory_run_is_byte_identical_for_any_chunk_size(tmp_path, monkeypatch, chunk_rows, method,
                                                                      person):
    path = _write(tmp_path / "corpus.csv", _rows())
    corpus = load_corpus(path, classes=CLASSES, person_column="patient" if person else None)
    config = _config(method=method, person_column="patient" if person else None)
    expected = _files(tmp_path / "default", _run(corpus, config), config)
    monkeypatch.setenv("DPKPS_CHUNK_ROWS", str(chunk_rows))
    assert _files(tmp_path / "chunked", _run(corpus, config), config) == expected


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("method", ["independent", "iterative-linear"])
@pytest.mark.parametrize("person", [False, True])
def test_a_streamed_file_runs_exactly_as_the_loaded_file(tmp_path, chunk_rows, method, person):
    path = _write(tmp_path / "corpus.csv", _rows())
    config = _config(method=method, person_column="patient" if person else None)
    loaded = load_corpus(path, classes=CLASSES, person_column="patient" if person else None)
    expected_run = _run(loaded, config)
    streamed = _streamed(path, config, chunk_rows)
    run = _run(streamed, config)
    assert _files(tmp_path / "streamed", run, config) == _files(tmp_path / "loaded", expected_run, config)
    assert (run.undeclared_documents, run.truncated_documents, run.local_warnings, run.privacy_unit) == (
        expected_run.undeclared_documents, expected_run.truncated_documents, expected_run.local_warnings,
        expected_run.privacy_unit)
    assert streamed.documents == len(loaded) and len(streamed) == len(loaded.subset(run.split.train).declared_only())


def test_the_streamed_corpus_keeps_no_text_in_its_repr_and_refuses_undeclared_classes(tmp_path):
    path = _write(tmp_path / "corpus.csv", _rows())
    streamed = _streamed(path, _config(), 5)
    assert "Note" not in repr(streamed) and "angina" not in repr(streamed)
    with pytest.raises(Exception, match="Declare the public class names.*cardio, neuro, onco, other"):
        _streamed(path, _config(classes=None), 5)


# ---- charge first and admission -----------------------------------------------------------------------------

#: a test keying (a ledger's HMAC under a fixed key): the loaded path admits unit strings, the streamed one keys
_TEST_KEYS = _UnitHasher(b"streamed-pipeline test key 0123").keys


class RecordingLedger(PrivacyLedger):
    """Logs admissions and charges; leaves out the rows whose unit key (under a test keying, whether the release
    gives unit strings or keys) ``leave_out`` says."""

    def __init__(self, log: list[tuple[Any, ...]], leave_out: Any = lambda key: False) -> None:
        super().__init__(None)
        self.log, self.leave_out = log, leave_out

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        keys = primary_keys(units, _TEST_KEYS)
        mask = super().admit(units, epsilon, what=what) & np.array([not self.leave_out(k) for k in keys], bool)
        self.log.append(("admit", int(mask.sum())))
        return mask

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        self.log.append(("charge", event.step))
        return super().charge(event)


class RecordingNoise(NoiseSource):
    """A seeded NoiseSource that logs each draw and keeps the statistic it was given."""

    def __init__(self, log: list[tuple[Any, ...]], seed: int = 0) -> None:
        super().__init__(seed, sampler="numpy")
        self.log, self.statistics = log, []

    def add_laplace(self, values: Any, *, scale: float, integer_valued: bool = False) -> np.ndarray:
        self.log.append(("noise",))
        self.statistics.append(np.array(values, dtype=np.float64, copy=True))
        return super().add_laplace(values, scale=scale, integer_valued=integer_valued)


def _kinds(log: list[tuple[Any, ...]]) -> list[str]:
    out: list[str] = []
    for entry in log:
        if not (out and out[-1] == entry[0] == "noise"):
            out.append(entry[0])
    return out


def _every_fifth(key: bytes) -> bool:
    return key[0] % 5 == 0


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("person", [False, True])
def test_charge_first_and_admission_hold_on_the_streamed_path(tmp_path, chunk_rows, person):
    path = _write(tmp_path / "corpus.csv", _rows())
    config = _config(person_column="patient" if person else None)
    statistics = {}
    for name, source in (("loaded", load_corpus(path, classes=CLASSES,
                                                person_column="patient" if person else None)),
                         ("streamed", _streamed(path, config, chunk_rows))):
        log: list[tuple[Any, ...]] = []
        noise = RecordingNoise(log)
        run = _run(source, config, RecordingLedger(log, _every_fifth), noise)
        assert _kinds(log)[:6] == ["admit", "charge", "noise", "admit", "charge", "noise"]
        assert 0 < run.left_out["vocabulary"] == run.left_out["kde"]
        statistics[name] = noise.statistics[:2]
    for a, b in zip(statistics["loaded"], statistics["streamed"]):
        np.testing.assert_array_equal(a, b)  # the admitted documents only, read the same way


# ---- neighbours through the streamed path ---------------------------------------------------------------------

def _statistics(path: Path, config: SamplingConfig, chunk_rows: int) -> tuple[np.ndarray, np.ndarray]:
    log: list[tuple[Any, ...]] = []
    noise = RecordingNoise(log)
    streamed = _streamed(path, config, chunk_rows)
    voc = vocabulary_step(streamed, VOCAB, config, context=ReleaseContext(noise=noise, ledger=PrivacyLedger()))
    # a fixed PUBLIC Ṽ for both neighbours, so that only D vs D′ varies
    fixed = type(voc.private_vocabulary)(terms=TERMS[:12], noisy_counts=np.zeros(12), public_vocabulary="test-v",
                                         public_vocabulary_size=len(TERMS), epsilon=1.0, terms_per_doc=S,
                                         requested_size=12, noise_scale=S)
    density_step(streamed, fixed, config, classes=CLASSES, embedder=EMBEDDER,
                 context=ReleaseContext(noise=noise, ledger=PrivacyLedger()))
    return noise.statistics[0], noise.statistics[1]


@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("person", [False, True])
def test_neighbours_stay_neighbours_through_the_streamed_path(tmp_path, chunk_rows, person):
    config = _config(person_column="patient" if person else None, test_fraction=0.0, bandwidth=0.0)
    rows = _rows()
    if person:  # D′ = D without every row of one person (who has several rows)
        who = rows[1]["patient"]
        other = [r for r in rows if r["patient"] != who]
        assert len(rows) - len(other) >= 2
    else:  # D′ = D plus one row, placed in the middle of the file
        other = rows[:40] + [{"text": "Note x: angina, seizure and tumour with fever.", "label": "neuro",
                              "patient": "px"}] + rows[40:]
    voc_d, hist_d = _statistics(_write(tmp_path / "d.csv", rows), config, chunk_rows)
    voc_n, hist_n = _statistics(_write(tmp_path / "n.csv", other), config, chunk_rows)
    assert 0 < np.abs(voc_d - voc_n).sum() <= S
    assert 0 < np.abs(hist_d - hist_n).sum() <= 1 + 1e-9


# ---- compact keyphrases ---------------------------------------------------------------------------------------

def test_compact_keyphrases_give_the_histograms_of_the_lists():
    rng = np.random.default_rng(0)
    lists = [rng.integers(0, 9, size=rng.integers(0, 7)).tolist() for _ in range(200)]
    labels = [("a", "b", "z")[i % 3] for i in range(200)]
    groups = np.array([i // 3 for i in range(200)])
    kp = Keyphrases.from_lists(lists)
    assert len(kp) == 200 and kp == lists and list(kp) == lists and kp[-1] == lists[-1]
    assert kp[5:9] == lists[5:9] and kp.take(np.array([7, 2])) == [lists[7], lists[2]]
    assert kp.truncated(2) == [k[:2] for k in lists]
    for m in (None, 3):
        for g in (None, groups, [str(x) for x in groups]):
            np.testing.assert_array_equal(
                class_keyphrase_histograms(kp, labels, ("a", "b"), 9, max_per_doc=m, groups=g),
                class_keyphrase_histograms(lists, labels, ("a", "b"), 9, max_per_doc=m, groups=g))
    assert "Keyphrases(documents=200" in repr(kp)
    with pytest.raises(ValueError):
        Keyphrases(np.array([2, 1]), np.array([1, 2]))


# ---- the DP forecast over a streamed file (issue 31 §4) ------------------------------------------------------

@pytest.mark.parametrize("chunk_rows", CHUNKS)
@pytest.mark.parametrize("person", [False, True])
def test_the_dp_forecast_of_a_streamed_file_is_the_loaded_files(tmp_path, chunk_rows, person):
    """The same release — counts, class sizes, event — from the file streamed in chunks as from the file loaded
    whole (seeded noise), charged before any chunk is read, with progress after each chunk."""
    from dpkps_core.evaluation.forecast_dp import release_forecast
    from dpkps_core.method.pipeline import _training

    path = _write(tmp_path / "corpus.csv", _rows())
    config = _config(person_column="patient" if person else None)
    loaded = load_corpus(path, classes=CLASSES, person_column="patient" if person else None)
    train = _training(loaded, config)[0]
    expected_ledger, ledger = PrivacyLedger(), PrivacyLedger()
    expected = release_forecast(train, VOCAB,
                                context=ReleaseContext(noise=NoiseSource(5, sampler="numpy"), ledger=expected_ledger),
                                epsilon=0.5, terms_per_doc=S, by_person=person)
    heard: list[str] = []
    streamed = _streamed(path, config, chunk_rows)
    got = release_forecast(streamed, VOCAB,
                           context=ReleaseContext(noise=NoiseSource(5, sampler="numpy"), ledger=ledger), epsilon=0.5,
                           terms_per_doc=S, by_person=person, progress=lambda f, m: heard.append(m))
    assert got.to_dict() == expected.to_dict()
    assert [e.to_dict() | {"timestamp": ""} for e in ledger.events] == [
        e.to_dict() | {"timestamp": ""} for e in expected_ledger.events]
    assert (len(heard) >= 2) == (chunk_rows < len(train))     # told between chunks when there are several
    with pytest.raises(ParameterError, match="another unit of privacy"):
        release_forecast(streamed, VOCAB,
                         context=ReleaseContext(noise=NoiseSource(5, sampler="numpy"), ledger=PrivacyLedger()),
                         epsilon=0.5, terms_per_doc=S, by_person=not person)
