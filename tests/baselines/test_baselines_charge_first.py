"""Charge first for the other generation methods and the comparison (docs/DESIGN.md §2.0): AugPE+Ṽ, private prediction
and the DP count admit their units and record their ε BEFORE any noise is drawn and before anything derived from
the private documents reaches a backend; a crash (a BaseException, like the process dying), Ctrl-C or a
cancellation mid-run leaves the ε charged. Also (docs/DESIGN.md §2.0, §3): the size event names the real privacy unit,
left-out units never reach the model, and the compare folder's releasable files hold no exact private count."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from dpkps_core.method import budget

from dpkps_core.baselines import augpe
from dpkps_core.baselines import compare as cmp
from dpkps_core.baselines import private_prediction as pp
from dpkps_core.baselines.prediction_config import STEP, reservation_event
from dpkps_core.corpus import Corpus
from dpkps_core.dp import count as dpcount
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import PrivacyBudgetError
from dpkps_core.method.vocabulary import PublicVocabulary
from llm_fakes import CrashingRemoteBackend, SimulatedCrash
from baseline_toys import FakeLM, FakeTokenizer

CRASHES = [SimulatedCrash, KeyboardInterrupt]


class RecordingLedger(PrivacyLedger):
    """An in-memory ledger that logs admissions and charges in order, and leaves out the units in ``deny`` (as
    a persistent ledger leaves out exhausted units)."""

    def __init__(self, cap: float | None = None, *, deny: Sequence[str] = ()) -> None:
        super().__init__(cap)
        self.deny = set(deny)
        self.log: list[tuple[str, Any]] = []

    def admit(self, units: Sequence[str], epsilon: float, *, what: str = "this release") -> np.ndarray:
        mask = super().admit(units, epsilon, what=what)
        mask &= np.array([not any(d in u for d in self.deny) for u in units], dtype=bool)
        self.log.append(("admit", (round(float(epsilon), 9), int(mask.sum()), len(units))))
        return mask

    def charge(self, event: PrivacyEvent) -> PrivacyEvent:
        out = super().charge(event)
        self.log.append(("charge", (event.step, event.epsilon)))
        return out


def _private_corpus() -> tuple[list[str], list[str]]:
    texts = [f"zyxsecret patient {i} has a fever and a cough" for i in range(12)]
    texts += [f"qwvprivate invoice {i} shows a large payment" for i in range(10)]
    return texts, ["medicine"] * 12 + ["finance"] * 10


VOCAB_TERMS = ("fever", "payment", "weather", "travel", "city", "report", "river", "school")


# ------------------------------------------------------------------------------------------------- AugPE+Ṽ

@pytest.mark.parametrize("crash", CRASHES)
def test_augpe_charges_all_epochs_before_the_first_prompt_and_stays_charged_after_a_crash(crash) -> None:
    texts, labels = _private_corpus()
    ledger = RecordingLedger(cap=10.0)
    cfg = augpe.AugPEConfig(epochs=4, population=2, words_per_prompt=3, retries=0)
    n_first = 2 * 2  # C·K random-API prompts, then C·K vote-chosen rewrites per epoch
    # crash on the first rewrite prompt of epoch 2 (after epoch 1's rewrites went out)
    backend = CrashingRemoteBackend(probe=lambda: ledger.total_epsilon, crash_at=n_first + n_first + 1, crash=crash,
                                    max_concurrency=2)
    with pytest.raises(crash):
        augpe.run_augpe(texts, labels, vocabulary_terms=VOCAB_TERMS, classes=("finance", "medicine"), config=cfg,
                        epsilon=3.0, delta=1e-6, embedder=HashingEmbedder(dim=32), backend=backend,
                        context=ReleaseContext(noise=NoiseSource(5), ledger=ledger))
    (ev,) = ledger.events
    assert ev.step == augpe.STEP and 2.9 < ev.epsilon <= 3.0 and ev.params["epochs_T"] == 4
    assert ledger.total_epsilon == ev.epsilon  # all T epochs charged, though the run died in epoch 2
    # admission, then the charge, then the first prompt: every prompt sent found the whole ε already charged
    assert [k for k, _ in ledger.log] == ["admit", "charge"] and ledger.log[0][1][1:] == (22, 22)
    assert len(backend.sent) >= n_first + n_first + 1
    assert all(spent == ev.epsilon for _, spent in backend.sent)
    rewrites = [m for m, _ in backend.sent if "Rewrite the following text" in m[-1]["content"]]
    assert len(rewrites) >= n_first + 1  # vote-chosen prompts did go out before the crash


def test_augpe_runs_only_on_admitted_documents_and_cancel_leaves_the_charge() -> None:
    texts, labels = _private_corpus()
    seen: list[list[str]] = []

    class SpyEmbedder(HashingEmbedder):
        def encode(self, texts, **kw):  # noqa: ANN001
            seen.append(list(texts))
            return super().encode(texts, **kw)

    ledger = RecordingLedger(cap=10.0, deny=["patient 3 ", "invoice 7 "])
    cancel = threading.Event()
    backend = CrashingRemoteBackend(probe=lambda: ledger.total_epsilon)
    messages: list[str] = []

    def progress(frac: float, message: str) -> None:
        messages.append(message)
        if "epoch 1/" in message:
            cancel.set()  # the user presses "Cancel" during epoch 1

    res = augpe.run_augpe(texts, labels, vocabulary_terms=VOCAB_TERMS, classes=("finance", "medicine"),
                          config=augpe.AugPEConfig(epochs=3, population=2, retries=0), epsilon=2.0, delta=1e-6,
                          embedder=SpyEmbedder(dim=32), backend=backend,
                          context=ReleaseContext(noise=NoiseSource(1), ledger=ledger),
                          progress=progress, cancel=cancel)
    assert ledger.total_epsilon == res.epsilon > 0  # cancelled in epoch 1, still charged
    private_batches = [b for b in seen if any("zyxsecret" in t or "qwvprivate" in t for t in b)]
    assert len(private_batches) == 1 and len(private_batches[0]) == 20  # the two left-out documents never read
    assert not any("patient 3 " in t or "invoice 7 " in t for t in private_batches[0])
    # how many private documents were embedded is private: the message says what, not how many
    assert any("embedding the private documents" in m for m in messages)
    assert not any("embedding" in m and any(ch.isdigit() for ch in m) for m in messages)


def test_augpe_refuses_over_the_cap_before_reading_or_sending_anything() -> None:
    texts, labels = _private_corpus()
    ledger = RecordingLedger(cap=1.0)
    backend = CrashingRemoteBackend()
    with pytest.raises(PrivacyBudgetError):
        augpe.run_augpe(texts, labels, vocabulary_terms=VOCAB_TERMS, classes=("finance", "medicine"),
                        config=augpe.AugPEConfig(epochs=2, population=2), epsilon=2.0, delta=1e-6,
                        embedder=HashingEmbedder(dim=32), backend=backend,
                        context=ReleaseContext(noise=NoiseSource(), ledger=ledger))
    assert ledger.total_epsilon == 0 and ledger.log == [] and backend.sent == []


# ------------------------------------------------------------------------------------------ private prediction

class CrashingLM(FakeLM):
    """FakeLM that records ``probe()`` at every forward pass and raises ``crash`` on forward number ``crash_at``."""

    def __init__(self, *, probe, crash_at: int | None, crash=SimulatedCrash, **kw) -> None:  # noqa: ANN001
        super().__init__(**kw)
        self.probe, self.crash_at, self.crash = probe, crash_at, crash
        self.seen: list[Any] = []

    def forward(self, *args, **kw):  # noqa: ANN002, ANN003
        self.seen.append(self.probe())
        if self.crash_at is not None and len(self.seen) >= self.crash_at:
            raise self.crash("simulated crash mid-decoding")
        return super().forward(*args, **kw)


def _pp_corpus() -> tuple[list[str], list[str]]:
    texts = [f"the match goal {i}" for i in range(24)] + [f"bank market shares {i}" for i in range(24)]
    return texts, ["sport"] * 24 + ["business"] * 24


@pytest.mark.parametrize("crash", CRASHES)
def test_private_prediction_charges_before_the_first_forward_pass_and_stays_charged(crash) -> None:
    texts, labels = _pp_corpus()
    ledger = RecordingLedger(cap=20.0)
    model = CrashingLM(probe=lambda: ledger.total_epsilon, crash_at=7, crash=crash, seed=4, eos_bias=-30.0)
    cfg = pp.PrivatePredictionConfig(batch_size=8, private_tokens=6, max_new_tokens=6, svt_threshold=None,
                                     public_top_k=None)
    with pytest.raises(crash):  # after a few private tokens of the first batch
        pp.run_private_prediction(texts, labels, model=model, tokenizer=FakeTokenizer(), config=cfg, epsilon=4.0,
                                  delta=1e-6, per_class=2, num_buckets=3, classes=("business", "sport"),
                                  context=ReleaseContext(noise=NoiseSource(5), ledger=ledger))
    (ev,) = ledger.events
    assert ev.step == STEP and 3.9 < ev.epsilon <= 4.0 and ev.delta == 1e-6
    assert [k for k, _ in ledger.log] == ["admit", "charge"]
    assert len(model.seen) == 7 and all(spent == ev.epsilon for spent in model.seen)


def test_private_prediction_left_out_documents_never_reach_the_model() -> None:
    texts, labels = _pp_corpus()
    texts[3] = "the match goal uniqueleftout"
    ledger = RecordingLedger(cap=20.0, deny=["uniqueleftout"])
    tok = FakeTokenizer()
    cfg = pp.PrivatePredictionConfig(batch_size=8, private_tokens=4, max_new_tokens=4, svt_threshold=None,
                                     max_prompt_tokens=64)
    res = pp.run_private_prediction(texts, labels, model=FakeLM(seed=4), tokenizer=tok, config=cfg, epsilon=4.0,
                                    delta=1e-6, per_class=1, num_buckets=1, classes=("business", "sport"),
                                    context=ReleaseContext(noise=NoiseSource(5), ledger=ledger))
    assert ledger.log[0] == ("admit", (round(res.epsilon, 9), 47, 48))
    assert any("the match goal 5" in t for t in tok.seen_texts)  # the admitted ones did
    assert not any("uniqueleftout" in t for t in tok.seen_texts)
    assert res.stats["private_prompts"] == 47


def test_private_prediction_event_names_the_units_and_a_charged_event_is_not_charged_twice() -> None:
    texts, labels = _pp_corpus()
    unit = "add/remove all documents of one person (identified by column 'patient')"
    ledger = RecordingLedger(cap=20.0)
    cfg = pp.PrivatePredictionConfig(batch_size=8, private_tokens=4, max_new_tokens=4, svt_threshold=None)
    res = pp.run_private_prediction(texts, labels, model=FakeLM(seed=4), tokenizer=FakeTokenizer(), config=cfg,
                                    epsilon=4.0, delta=1e-6, per_class=1, num_buckets=2, classes=("business", "sport"),
                                    context=ReleaseContext(noise=NoiseSource(), ledger=ledger),
                                    units=[f"person\x1fp{i % 10}" for i in range(48)],
                                    neighbouring=unit)
    assert ledger.events[0].neighbouring == unit and res.privacy_report()["neighbouring"] == unit
    reserved = reservation_event(cfg, epsilon=5.0, delta=1e-6, documents=2, neighbouring=unit)
    other = RecordingLedger(cap=20.0)
    other.charge(reserved)
    res2 = pp.run_private_prediction(texts, labels, model=FakeLM(seed=4), tokenizer=FakeTokenizer(), config=cfg,
                                     epsilon=4.0, delta=1e-6, per_class=1, num_buckets=2,
                                     classes=("business", "sport"),
                                     context=ReleaseContext(noise=NoiseSource(), ledger=other), charged_event=reserved)
    assert other.events == (reserved,) and res2.event is reserved and res2.epsilon <= reserved.epsilon
    with pytest.raises(Exception, match="more than"):
        pp.run_private_prediction(texts, labels, model=FakeLM(seed=4), tokenizer=FakeTokenizer(), config=cfg,
                                  epsilon=6.0, delta=1e-6, per_class=1, num_buckets=2, classes=("business", "sport"),
                                  charged_event=reserved)


# ---------------------------------------------------------------------------------------------------- DP count

class ExplodingNoise(NoiseSource):
    """A noise source that dies when asked for noise (a crash at the moment the noise is drawn)."""

    def laplace(self, *a, **k):  # noqa: ANN002, ANN003
        raise SimulatedCrash("crash while drawing noise")


def test_dp_count_charges_before_its_noise_and_counts_admitted_persons() -> None:
    ledger = RecordingLedger(cap=5.0)
    with pytest.raises(SimulatedCrash):
        dpcount.release_count(40, epsilon=0.5, context=ReleaseContext(noise=ExplodingNoise(0), ledger=ledger),
                              neighbouring="add/remove all documents of one person")
    (ev,) = ledger.events
    assert ev.epsilon == 0.5 and ev.neighbouring == "add/remove all documents of one person"
    assert "noisy_count" not in ev.params  # frozen before the noise existed
    ledger = RecordingLedger(cap=5.0, deny=["p3"])
    units = [f"person\x1fp{i % 5}" for i in range(20)]  # 5 persons, 4 documents each; p3 exhausted
    counts = [budget.release_unit_count(units, epsilon=1e6,
                                        context=ReleaseContext(noise=NoiseSource(s), ledger=RecordingLedger(
        cap=1e7, deny=["p3"])))[0].value for s in range(3)]
    counts = [round(c, 3) for c in counts]
    assert counts == [4.0, 4.0, 4.0]  # distinct ADMITTED persons (noise ≈ 0 at ε = 10⁶)
    released, left_out = budget.release_unit_count(units, epsilon=1.0,
                                                   context=ReleaseContext(noise=NoiseSource(1), ledger=ledger))
    assert left_out == 4 and [k for k, _ in ledger.log] == ["admit", "charge"]


# ------------------------------------------------------------------------------------------------- compare

TOPICS = {
    "sport": ["match", "goal", "league", "team", "coach", "stadium"],
    "business": ["bank", "market", "shares", "profit", "inflation", "airline"],
}
VOCAB = PublicVocabulary("test", tuple(w for ws in TOPICS.values() for w in ws) + ("story", "river", "city"),
                         "test", "test")


def _corpus(persons: bool = False) -> Corpus:
    texts, labels = [], []
    for c, words in TOPICS.items():
        for i in range(20):
            texts.append(f"zzprivate{c}{i} " + " ".join(words[(i + j) % 6] for j in range(4)) + f" story {i}")
            labels.append(c)
    corpus = Corpus(tuple(texts), tuple(labels), "topics", "tests", public_classes=tuple(TOPICS))
    return corpus.with_persons([f"pid{i // 2}" for i in range(40)], "patient") if persons else corpus


def _settings(methods: Sequence[str], **kw) -> cmp.CompareSettings:
    base = dict(eps_total=8.0, methods=tuple(methods), delta=1e-6, per_class=2, max_tokens=6,
                sampling={"vocab_size": 8, "terms_per_doc": 4, "length": 3, "junk_filter": False,
                          "embedding_model": "hashing-test"},
                private_prediction=pp.PrivatePredictionConfig(batch_size=4, private_tokens=6, public_top_k=None),
                augpe_config=augpe.AugPEConfig(epochs=3, retries=0), class_size_estimate=None, seeds=(0,), seed=3,
                real_baseline=False)
    return cmp.CompareSettings(**{**base, **kw})


@pytest.mark.parametrize("crash", CRASHES)
def test_compare_augpe_crash_in_epoch_two_leaves_its_epsilon_charged_to_the_corpus_ledger(tmp_path: Path, crash) -> None:
    ledger = RecordingLedger(cap=20.0)
    # 2 classes × K = 2: random API 4, epoch-1 rewrites 4, crash on the first epoch-2 rewrite
    backend = CrashingRemoteBackend(probe=lambda: ledger.total_epsilon, crash_at=9, crash=crash)
    with pytest.raises(crash):
        cmp.compare_methods(_corpus(), _settings(["augpe"]), backend=backend, embedder=HashingEmbedder(dim=32),
                            vocabulary=VOCAB, out_dir=tmp_path / "cmp", ledger=ledger)
    steps = [e.step for e in ledger.events]
    assert steps == ["vocabulary", augpe.STEP]
    assert 7.9 < ledger.total_epsilon <= 8.0 + 1e-9  # ε_voc + ε_aug, all charged though the run died
    assert all(spent == ledger.total_epsilon for _, spent in backend.sent)  # before the FIRST prompt
    assert len(backend.sent) >= 9 and not (tmp_path / "cmp").exists()


@pytest.mark.parametrize("crash", CRASHES)
def test_compare_private_prediction_crash_mid_decoding_leaves_the_whole_method_charged(crash) -> None:
    ledger = RecordingLedger(cap=20.0)
    model = CrashingLM(probe=lambda: ledger.total_epsilon, crash_at=5, crash=crash, seed=7)
    with pytest.raises(crash):
        cmp.compare_methods(_corpus(), _settings(["private-prediction"]), backend=CrashingRemoteBackend(),
                            embedder=HashingEmbedder(dim=32), vocabulary=VOCAB, local_lm=(model, FakeTokenizer()),
                            ledger=ledger)
    assert [e.step for e in ledger.events] == ["size", STEP]
    assert ledger.total_epsilon == pytest.approx(8.0) and ledger.total_delta == 1e-6
    assert [k for k, _ in ledger.log] == ["admit", "charge", "charge"]
    assert ledger.log[0][1][0] == pytest.approx(8.0)  # the units admitted once, for the whole method's ε
    assert model.seen and all(spent == pytest.approx(8.0) for spent in model.seen)


def test_compare_joint_cost_refusal_happens_before_anything(tmp_path: Path) -> None:
    ledger = RecordingLedger(cap=10.0)
    backend = CrashingRemoteBackend()
    model = CrashingLM(probe=lambda: None, crash_at=None, seed=7)
    with pytest.raises(PrivacyBudgetError, match="joint cost"):
        cmp.compare_methods(_corpus(), _settings(["private-prediction", "augpe"]), backend=backend,
                            embedder=HashingEmbedder(dim=32), vocabulary=VOCAB, local_lm=(model, FakeTokenizer()),
                            out_dir=tmp_path / "cmp", ledger=ledger)
    assert ledger.log == [] and backend.sent == [] and model.seen == [] and not (tmp_path / "cmp").exists()


def _keys(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


def test_compare_with_a_person_column_names_the_person_unit_and_writes_no_exact_private_count(tmp_path: Path) -> None:
    corpus = _corpus(persons=True)
    messages: list[str] = []
    ledger = RecordingLedger(cap=20.0)
    res = cmp.compare_methods(corpus, _settings(["private-prediction", "augpe"], eps_total=6.0, eps_voc=2.0),
                              backend=CrashingRemoteBackend(), embedder=HashingEmbedder(dim=32), vocabulary=VOCAB,
                              local_lm=(FakeLM(seed=7), FakeTokenizer()), out_dir=tmp_path / "cmp",
                              ledger=ledger, progress=lambda f, m: messages.append(m))
    unit = corpus.privacy_unit
    assert "person" in unit
    pp_events = res.privacy["private-prediction"]["events"]
    assert [e["step"] for e in pp_events] == ["size", STEP]
    assert all(e["neighbouring"] == unit for e in pp_events)  # not "add/remove one document"
    assert "persons" in pp_events[0]["released"]  # one document per person: the count counts persons
    assert res.privacy["private-prediction"]["neighbouring"] == unit
    ag = [e for e in res.privacy["augpe"]["events"] if e["step"] == augpe.STEP]
    assert ag[0]["neighbouring"] == unit and res.privacy["augpe"]["neighbouring"] == unit
    # the DP count is reported as a DP quantity, next to its ε
    assert set(res.privacy["private-prediction"]["dp_training_count"]) == {"noisy_count", "epsilon", "noise_scale"}
    # the releasable files (documents, privacy reports, audit logs) hold no exact private count
    out = tmp_path / "cmp"
    forbidden = {"private_prompts", "batch_sizes", "prompt_tokens", "n_train", "n_test", "left_out",
                 "row_tokens_decoded", "forward_passes"}
    for path in sorted(out.glob("audit_*.jsonl")) + sorted(out.glob("documents_*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            assert not (_keys(json.loads(line)) & forbidden), path.name
    for path in sorted(out.glob("privacy_*.json")):
        assert not (_keys(json.loads(path.read_text(encoding="utf-8"))) & forbidden), path.name
    (entry,) = [json.loads(x) for x in (out / "audit_private-prediction.jsonl").read_text().splitlines()]
    assert set(entry) == {"purpose", "messages"}
    # the private evaluation files badge the split's exact sizes
    assert "private, local" in (out / "compare.md").read_text(encoding="utf-8")
    # progress messages name no exact private size (documents embedded, batch sizes)
    assert not any("prompts)" in m for m in messages)
    assert not any(("embedding" in m and any(ch.isdigit() for ch in m)) for m in messages)


def test_app_compare_job_checks_the_joint_cost_first_and_a_crashed_job_stays_charged(monkeypatch, tmp_path: Path) -> None:
    """The app's comparison job (studio/evaluation_steps.py): the joint cost is checked in the page's thread
    before the job starts; the job charges the corpus's ledger (each method's admission and events go through
    it) before its first prompt, so a job that dies mid-run stays charged."""
    from studio import evaluation_steps as es

    ledger = RecordingLedger(cap=20.0)
    backend = CrashingRemoteBackend(probe=lambda: ledger.total_epsilon, crash_at=9)
    started: dict[str, Any] = {}
    from app_helpers import use_state

    state = use_state(monkeypatch, doc_type="a note", test_fraction=0.2, backend="offline")
    monkeypatch.setattr(es, "corpus", lambda state: _corpus())
    monkeypatch.setattr(es, "ledger", lambda state: ledger)
    monkeypatch.setattr(es, "memo_embedder", lambda state, *a, **k: HashingEmbedder(dim=32))
    big = PublicVocabulary("test-big", VOCAB.terms + tuple(f"filler{i}" for i in range(1000)), "test", "test")
    monkeypatch.setattr(es, "public_vocabulary", lambda state: big)  # the app's default N = 1,000 needs |V| ≥ 1,000
    monkeypatch.setattr(es, "offline_backend", lambda *a, **k: backend)
    monkeypatch.setattr(es, "runs_root", lambda: tmp_path)
    monkeypatch.setattr(es, "start_job", lambda state, name, kind, work: started.setdefault("work", work))
    with pytest.raises(PrivacyBudgetError, match="joint cost"):  # 2 × ε = 24 > 20: refused before any job
        es.start_compare(state, methods=["augpe", "private-prediction"], eps_total=12.0, delta=1e-6, per_class=2,
                         max_tokens=6)
    assert "work" not in started and ledger.log == [] and backend.sent == []
    es.start_compare(state, methods=["augpe"], eps_total=8.0, delta=1e-6, per_class=2, max_tokens=6)

    class FakeJob:
        cancel = threading.Event()

        @staticmethod
        def report(frac: float, message: str) -> None:
            pass

    with pytest.raises(SimulatedCrash):
        started["work"](FakeJob())
    assert [e.step for e in ledger.events] == ["vocabulary", augpe.STEP]
    assert 7.9 < ledger.total_epsilon <= 8.0 + 1e-9
    assert backend.sent and all(spent == ledger.total_epsilon for _, spent in backend.sent)
