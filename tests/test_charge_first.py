"""Charge first, and admission before each release (docs/DESIGN.md §2.0) on the DP-KPS release path.

Every mechanism of the release path (private vocabulary, smoothed histogram density, RFF density with each
ensemble, and run_sampling chaining them) must, in this order: admit the units of its input (the individual
privacy filter), compute its statistic on the admitted documents only, record its ledger event, and only then
draw noise. A failure after the charge (a crash in the sampler, the noise-floor refusal) leaves ε spent; a
refusal on public input (N > |V|) happens before anything is admitted or charged.

The ledger and the noise source below record the order of calls; the noise source can crash inside a draw.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pytest

from dpkps_core.method import pipeline
from dpkps_core.corpus import Corpus
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.histogram import build_smoothed_histogram_density
from dpkps_core.dp.kde import build_rff_density, ensemble_blocks
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import privatize_vocabulary
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError, VocabularyError
from dpkps_core.ledger_store.units import release_unit
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.pipeline import run_sampling
from dpkps_core.method.split import split_documents
from dpkps_core.method.vocabulary import PublicVocabulary


class SamplerCrash(RuntimeError):
    """Raised from inside a noise draw (a crashed or cancelled sampler)."""


class RecordingLedger(PrivacyLedger):
    """An in-memory ledger that logs ``admit`` / ``charge`` calls and may leave units out (a fake filter)."""

    def __init__(self, log: list[tuple[Any, ...]], *, cap: float | None = None,
                 leave_out: Callable[[str], bool] = lambda unit: False) -> None:
        super().__init__(cap)
        self.log = log
        self.leave_out = leave_out
        self.admitted: list[list[str]] = []

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        mask = super().admit(units, epsilon, what=what)
        mask &= np.array([not self.leave_out(u) for u in units], dtype=bool)
        self.log.append(("admit", what, int(mask.sum()), len(units)))
        self.admitted.append([u for u, keep in zip(units, mask) if keep])
        return mask

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        self.log.append(("charge", event.step, event.epsilon))
        return super().charge(event)


class RecordingNoise(NoiseSource):
    """A seeded NoiseSource that logs every noise draw (and the statistic it was given) and can crash in one."""

    def __init__(self, log: list[tuple[Any, ...]], seed: int = 0, *, crash_on: int | None = None) -> None:
        super().__init__(seed, sampler="numpy")
        self.log = log
        self.crash_on = crash_on  # 1-based index of the draw that crashes
        self.draws = 0
        self.statistics: list[np.ndarray] = []

    def _draw(self, values: Any) -> None:
        self.draws += 1
        self.log.append(("noise", int(np.size(values))))
        self.statistics.append(np.array(values, dtype=np.float64, copy=True))
        if self.crash_on is not None and self.draws == self.crash_on:
            raise SamplerCrash("the sampler crashed mid-release")

    def add_laplace(self, values: Any, *, scale: float, integer_valued: bool = False) -> np.ndarray:
        self._draw(values)
        return super().add_laplace(values, scale=scale, integer_valued=integer_valued)

    def add_gaussian(self, values: Any, *, sigma: float) -> np.ndarray:
        self._draw(values)
        return super().add_gaussian(values, sigma=sigma)


def kinds(log: list[tuple[Any, ...]]) -> list[str]:
    """The log's entry kinds with runs of noise draws collapsed (one release may draw several times)."""
    out: list[str] = []
    for entry in log:
        if not (out and out[-1] == "noise" and entry[0] == "noise"):
            out.append(entry[0])
    return out


# ---- data ------------------------------------------------------------------------------------------------

TERMS = tuple(f"term{i}" for i in range(24))
VOCAB = PublicVocabulary("v", TERMS, "test", "test")
D = 8
EMB = HashingEmbedder(dim=D).encode(list(TERMS[:10]))
RNG = np.random.default_rng(0)
KEYPHRASES = [list(RNG.integers(0, 10, size=RNG.integers(1, 6))) for _ in range(30)]
LABELS = ["a" if i % 2 else "b" for i in range(30)]


def corpus(n: int = 80, *, persons: bool = False) -> Corpus:
    texts = tuple(f"note {i} about term{i % 24} and term{(i * 7) % 24}" for i in range(n))
    labels = tuple("ab"[i % 2] for i in range(n))
    c = Corpus(texts, labels, "charge-first", "tests", public_classes=("a", "b"))
    return c.with_persons([f"p{i % 20}" for i in range(n)], "person") if persons else c


def config(**kw: Any) -> SamplingConfig:
    base = dict(corpus="charge-first", vocabulary="v", eps_voc=1.0, eps_kde=2.0, terms_per_doc=2,
                vocab_size=10, per_class=2, length=3, remove_stopwords=False, junk_filter=False,
                bandwidth=0.0, test_fraction=0.2, seed=3)
    base.update(kw)
    return SamplingConfig(**base).validate()


def vocabulary_release(ledger: PrivacyLedger, noise: NoiseSource, **kw: Any):
    counts = np.arange(len(TERMS)) % 5
    args = dict(epsilon=1.0, terms_per_doc=2, size=10, context=ReleaseContext(noise=noise, ledger=ledger))
    args.update(kw)
    return privatize_vocabulary(counts, TERMS, **args)


def histogram_release(ledger: PrivacyLedger, noise: NoiseSource):
    return build_smoothed_histogram_density(KEYPHRASES, LABELS, classes=("a", "b"), embeddings=EMB, epsilon=2.0,
                                            bandwidth=0.5, context=ReleaseContext(noise=noise, ledger=ledger))


def rff_release(kind: str):
    def release(ledger: PrivacyLedger, noise: NoiseSource):
        return build_rff_density(KEYPHRASES, LABELS, classes=("a", "b"), embeddings=EMB, kind=kind, epsilon=2.0,
                                 bandwidth=0.5, features=16, length=4,
                                 context=ReleaseContext(noise=noise, ledger=ledger))
    return release


MECHANISMS = {
    "vocabulary": (vocabulary_release, 1.0, 1),
    "histogram": (histogram_release, 2.0, 1),
    **{f"rff-{kind}": (rff_release(kind), 2.0, len(ensemble_blocks(kind, 4)))
       for kind in ("independent", "iterative-linear", "iterative-log")},
}


# ---- 1. each mechanism charges before its first noise draw -----------------------------------------------

@pytest.mark.parametrize("name", list(MECHANISMS))
def test_each_mechanism_records_its_event_before_the_first_noise_draw(name):
    release, eps, draws = MECHANISMS[name]
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    release(ledger, RecordingNoise(log))
    assert kinds(log) == ["charge", "noise"]
    assert sum(1 for e in log if e[0] == "noise") == draws  # one draw per ensemble member
    assert ledger.total_epsilon == pytest.approx(eps) and len(ledger.events) == 1


@pytest.mark.parametrize("name", list(MECHANISMS))
@pytest.mark.parametrize("crash_on", ["first", "last"])
def test_a_crash_inside_the_noise_draw_leaves_the_epsilon_charged(name, crash_on):
    release, eps, draws = MECHANISMS[name]
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    with pytest.raises(SamplerCrash):
        release(ledger, RecordingNoise(log, crash_on=1 if crash_on == "first" else draws))
    assert ledger.total_epsilon == pytest.approx(eps)
    assert log[0][0] == "charge"


def test_the_noise_floor_refusal_costs_epsilon():
    """The refusal is decided from the noisy counts (it differs between neighbours), so it must be paid for."""
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    counts = np.zeros(len(TERMS), dtype=np.int64)
    with pytest.raises(VocabularyError, match="ε_voc was spent"):
        privatize_vocabulary(counts, TERMS, epsilon=0.5, terms_per_doc=2, size=10,
                             context=ReleaseContext(noise=RecordingNoise(log), ledger=ledger),
                             selection_rule="noise-floor", floor_fraction=1000.0)
    assert kinds(log) == ["charge", "noise"]
    assert ledger.total_epsilon == pytest.approx(0.5)
    (event,) = ledger.events
    assert event.params["requested_size"] == 10 and "private_vocabulary_size" not in event.params


@pytest.mark.parametrize("bad", [dict(size=len(TERMS) + 1), dict(selection_rule="top-k"), dict(epsilon=0.0)])
def test_refusals_on_public_settings_cost_nothing(bad):
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    with pytest.raises(ParameterError):
        vocabulary_release(ledger, RecordingNoise(log), **bad)
    assert log == [] and ledger.total_epsilon == 0


# ---- 2. the whole release path -----------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["independent", "iterative-log", "iterative-linear"])
def test_run_sampling_admits_and_charges_before_each_noise_draw(method):
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    cfg = config(method=method, bandwidth=0.0 if method == "independent" else 0.5, features=16)
    run_sampling(corpus(), cfg, vocabulary=VOCAB, embedder=HashingEmbedder(dim=D),
                 context=ReleaseContext(noise=RecordingNoise(log), ledger=ledger))
    assert kinds(log) == ["admit", "charge", "noise", "admit", "charge", "noise"]
    admits = [e for e in log if e[0] == "admit"]
    assert [e[1] for e in admits] == ["the private vocabulary step", "the keyphrase density step"]
    assert [e[1] for e in log if e[0] == "charge"] == ["vocabulary", "kde"]


@pytest.mark.parametrize("crash_on", [1, 2])
def test_run_sampling_crash_mid_release_leaves_what_was_admitted_charged(crash_on):
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    with pytest.raises(SamplerCrash):
        run_sampling(corpus(), config(), vocabulary=VOCAB, embedder=HashingEmbedder(dim=D),
                     context=ReleaseContext(noise=RecordingNoise(log, crash_on=crash_on), ledger=ledger))
    assert ledger.total_epsilon == pytest.approx(1.0 if crash_on == 1 else 3.0)
    assert [e.step for e in ledger.events] == ["vocabulary", "kde"][:crash_on]


def test_n_larger_than_v_refuses_before_anything_is_admitted_or_charged():
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    with pytest.raises(ParameterError, match="larger than the public vocabulary"):
        run_sampling(corpus(), config(vocab_size=len(TERMS) + 1), vocabulary=VOCAB,
                     embedder=HashingEmbedder(dim=D), context=ReleaseContext(noise=RecordingNoise(log), ledger=ledger))
    with pytest.raises(ParameterError, match="larger than the public vocabulary"):
        pipeline.vocabulary_step(corpus(), VOCAB, config(vocab_size=len(TERMS) + 1),
                                 context=ReleaseContext(noise=RecordingNoise(log), ledger=ledger))
    assert log == [] and ledger.total_epsilon == 0


def test_a_density_the_settings_cannot_build_refuses_before_admission():
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log)
    voc = pipeline.vocabulary_step(corpus(), VOCAB, config(),
                                   context=ReleaseContext(noise=RecordingNoise(log), ledger=ledger))
    log.clear()
    cfg = config(method="iterative-log", bandwidth=0.0, features=16)  # RFF with σ = 0: a public refusal
    with pytest.raises(ParameterError, match="bandwidth"):
        pipeline.density_step(corpus(), voc.private_vocabulary, cfg, classes=("a", "b"),
                              embedder=HashingEmbedder(dim=D),
                              context=ReleaseContext(noise=RecordingNoise(log), ledger=ledger))
    assert log == [] and ledger.total_epsilon == pytest.approx(1.0)


# ---- 3. admission: left-out units take no part, and their count stays local ----------------------------------

def _leave_out_every_seventh(unit: str) -> bool:
    number = int(unit.split("\x1f")[1].split()[1])  # "document␟note <i> about …␟label"
    return number % 7 == 0


def test_left_out_documents_take_no_part_in_either_statistic():
    train = corpus()
    left = [i for i, t in enumerate(train.texts) if int(t.split()[1]) % 7 == 0]
    kept = train.subset([i for i in range(len(train)) if i not in set(left)])
    log: list[tuple[Any, ...]] = []
    ledger = RecordingLedger(log, leave_out=_leave_out_every_seventh)
    cfg = config()
    # precomputed counts over ALL of train must not be used once someone was left out
    all_counts = pipeline.term_counts(train.texts, VOCAB, terms_per_doc=cfg.terms_per_doc)
    noise = RecordingNoise(log)
    voc = pipeline.vocabulary_step(train, VOCAB, cfg, context=ReleaseContext(noise=noise, ledger=ledger),
                                   counts=all_counts)
    expected = pipeline.term_counts(kept.texts, VOCAB, terms_per_doc=cfg.terms_per_doc)
    assert not np.array_equal(expected, all_counts)
    assert np.array_equal(voc.counts, expected) and np.array_equal(noise.statistics[0], expected)
    assert voc.left_out == len(left) and str(len(left)) in voc.local_warnings[0]
    assert "had no budget left" in voc.local_warnings[0]

    dens = pipeline.density_step(train, voc.private_vocabulary, cfg, classes=("a", "b"),
                                 embedder=HashingEmbedder(dim=D), context=ReleaseContext(noise=noise, ledger=ledger))
    kps = pipeline.extract_keyphrases(kept.texts, voc.private_vocabulary, max_per_doc=cfg.length)
    hist = class_keyphrase_histograms(kps, kept.labels, ("a", "b"), len(voc.private_vocabulary), max_per_doc=cfg.length)
    assert np.allclose(noise.statistics[1], hist)  # the density's statistic: the admitted documents only
    assert dens.left_out == len(left) and len(dens.keyphrases) == len(kept)
    assert any("had no budget left" in w for w in dens.local_warnings)


def test_admission_by_person_leaves_out_all_of_a_persons_documents():
    train = corpus(persons=True)
    ledger = RecordingLedger([], leave_out=lambda unit: release_unit(unit) == "person\x1fp3")
    cfg = config(person_column="person")
    voc = pipeline.vocabulary_step(train, VOCAB, cfg, context=ReleaseContext(noise=RecordingNoise([]), ledger=ledger))
    mine = [i for i, p in enumerate(train.persons) if p == "p3"]
    kept = train.subset([i for i in range(len(train)) if i not in set(mine)])
    expected = pipeline.term_counts(kept.texts, VOCAB, terms_per_doc=cfg.terms_per_doc, groups=kept.persons)
    assert np.array_equal(voc.counts, expected) and voc.left_out == len(mine)
    assert f"{len(mine)} document(s) (1 person(s))" in voc.local_warnings[0]
    assert all(u.startswith("person\x1f") for u in ledger.admitted[0])


def _walk(obj: Any):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from _walk(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _walk(v)
    else:
        yield obj


def test_the_left_out_count_stays_local(tmp_path):
    """run_sampling reports the count to the caller (CLI, app) and nowhere in the privacy report or run folder."""
    import json

    train_left = 17  # a distinctive count: leave out exactly 17 training documents
    c = corpus(200)
    split = split_documents(c, test_fraction=0.2, seed=0)
    chosen = {c.texts[i] for i in split.train[:train_left]}
    ledger = RecordingLedger([], leave_out=lambda unit: unit.split("\x1f")[1] in chosen)
    run = run_sampling(c, config(), vocabulary=VOCAB, embedder=HashingEmbedder(dim=D),
                       context=ReleaseContext(noise=NoiseSource(4), ledger=ledger))
    assert run.left_out == {"vocabulary": train_left, "kde": train_left}
    assert sum("had no budget left" in w for w in run.local_warnings) == 2
    out = pipeline.write_run_folder(run, tmp_path / "run")
    for path in out.iterdir():
        text = path.read_text(encoding="utf-8")
        assert "left_out" not in text and "no budget left" not in text, path.name
        if path.suffix == ".json" and path.name != "split.json":  # split.json is private and never exported
            values = list(_walk(json.loads(text)))
            assert train_left not in [v for v in values if isinstance(v, int) and not isinstance(v, bool)], path.name
    assert "left_out" not in run.privacy_report().to_json()


def test_a_release_with_every_unit_left_out_is_noise_only_and_says_why():
    """Nobody has budget left: the release still happens (its refusal would depend on the units' history), on no
    document, and the local note names the reason instead of a misleading "no training document" check."""
    train = corpus()
    ledger = RecordingLedger([], leave_out=lambda unit: True)
    voc = pipeline.vocabulary_step(train, VOCAB, config(),
                                   context=ReleaseContext(noise=RecordingNoise([]), ledger=ledger))
    assert voc.left_out == len(train) and int(voc.counts.sum()) == 0 and len(voc.private_vocabulary) == 10
    assert len(voc.local_warnings) == 1 and "had no budget left" in voc.local_warnings[0]
    assert [e.step for e in ledger.events] == ["vocabulary"]
