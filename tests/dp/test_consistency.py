"""Consistency across layers (issue 24 §3): what a release COUNTS, the noise it DRAWS and the event it RECORDS
must all say the same thing (docs/DESIGN.md §2: "a ledger object records every mechanism run (name, ε, sensitivity, noise
scale …)"; docs/PRIVACY.md, mechanism table).

* The S used for counting is the S in the noise: ``pipeline.vocabulary_step`` is driven with a config; removing any
  one document (person) from its input moves the counts it computed by at most the event's sensitivity, and by
  exactly that much for a document with many distinct terms.
* Private prediction's top-k candidates come from the PUBLIC prediction only ([PrivPred] §E.1).
* Every event matches the noise actually drawn: a recording NoiseSource (tests/dp_stats.py) logs the scale and
  size of every noisy release, compared with the event's ``noise_scale``, ``sensitivity / ε`` and the algorithm's
  own count of draws (the sparse vector's threshold is refreshed after every private token: Algorithm 1 line 17).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch

from dp_stats import RecordingNoise
from dpkps_core.method import pipeline
from dpkps_core.baselines import augpe
from dpkps_core.baselines import private_prediction as pp
from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.dp.contributions import class_keyphrase_histograms
from dpkps_core.dp.accounting import calibrate_sigma, gaussian_delta
from dpkps_core.dp.count import release_count
from dpkps_core.dp.histogram import build_smoothed_histogram_density
from dpkps_core.dp.kde import build_rff_density, ensemble_blocks, rff_feature_sums
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rff import SQRT2, RandomFourierFeatures
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.llm.backends import LLMBackend
from dpkps_core.method.vocabulary import PublicVocabulary
from scripted_lm import PUBLIC_KIND, ScriptedLM, ScriptedTokenizer

# ------------------------------------------------------------------------------ S for counting = S in the noise

WORDS = [f"word{i:02d}" for i in range(40)]
VOCABULARY = PublicVocabulary(name="test-words", terms=tuple(WORDS), licence="test", source="tests")
S = 3
TEXTS = [
    " ".join(WORDS[0:12]),            # 12 distinct terms ≥ 2S: counted S, never 2S
    " ".join(WORDS[5:9] * 3),         # repeats: 4 distinct terms
    "word01 word02",                  # fewer than S
    " ".join(WORDS[20:40]),           # 20 distinct terms
    "no vocabulary term here",
    " ".join(WORDS[10:17]),
]
LABELS = ["a", "b", "a", "b", "a", "b"]
PERSONS = ["p1", "p1", "p2", "p3", "p3", "p3"]


def _corpus(indices: list[int], *, persons: bool) -> Corpus:
    return Corpus(texts=tuple(TEXTS[i] for i in indices), labels=tuple(LABELS[i] for i in indices), name="t",
                  source="tests", public_classes=("a", "b"),
                  persons=tuple(PERSONS[i] for i in indices) if persons else None,
                  person_column="person" if persons else None)


def _vocabulary_step(indices: list[int], *, persons: bool) -> tuple[pipeline.VocabularyStep, PrivacyLedger, object]:
    config = SamplingConfig(eps_voc=2.0, terms_per_doc=S, vocab_size=5, seed=0, noise_sampler="numpy",
                            person_column="person" if persons else None)
    ledger, noise = PrivacyLedger(), RecordingNoise(0)
    step = pipeline.vocabulary_step(_corpus(indices, persons=persons), VOCABULARY, config,
                                    context=ReleaseContext(noise=noise, ledger=ledger))
    return step, ledger, noise


@pytest.mark.parametrize("persons", [False, True], ids=["document-unit", "person-unit"])
def test_vocabulary_step_counts_at_most_the_s_its_noise_is_calibrated_for(persons: bool) -> None:
    everyone = list(range(len(TEXTS)))
    full, ledger, noise = _vocabulary_step(everyone, persons=persons)
    (event,) = [e for e in ledger.events if e.step == "vocabulary"]
    assert event.sensitivity == S and event.noise_scale == pytest.approx(S / event.epsilon)
    assert noise.draws == [("laplace", event.noise_scale, len(WORDS))]  # one draw, over ALL of V, at the event's scale
    units = sorted(set(PERSONS)) if persons else everyone
    moves = []
    for unit in units:  # remove one unit: its documents
        rest = [i for i in everyone if (PERSONS[i] != unit if persons else i != unit)]
        moves.append(int(np.abs(full.counts - _vocabulary_step(rest, persons=persons)[0].counts).sum()))
    assert max(moves) == event.sensitivity, f"L1 moves per removed unit {moves} vs the event's sensitivity {S}"


def test_density_contributions_stay_within_the_recorded_sensitivity() -> None:
    keyphrases = [[0, 1, 1, 2], [3], [], [2, 2, 2, 2, 2, 4], [0, 4]]
    labels = ["a", "b", "a", "a", "b"]
    full = class_keyphrase_histograms(keyphrases, labels, ("a", "b"), 5)
    ledger, noise = PrivacyLedger(), RecordingNoise(1)
    build_smoothed_histogram_density(keyphrases, labels, classes=("a", "b"), embeddings=np.eye(5), epsilon=0.7,
                                     bandwidth=0.0, context=ReleaseContext(noise=noise, ledger=ledger))
    (event,) = ledger.events
    moves = [np.abs(full - class_keyphrase_histograms(keyphrases[:i] + keyphrases[i + 1:], labels[:i] + labels[i + 1:],
                                                     ("a", "b"), 5)).sum() for i in range(len(keyphrases))]
    assert max(moves) == pytest.approx(event.sensitivity)
    assert noise.draws == [("laplace", event.noise_scale, 2 * 5)]
    assert event.noise_scale == pytest.approx(event.sensitivity / event.epsilon)


# ------------------------------------------------------------------------------ events match the noise drawn

@pytest.mark.parametrize("kind, length", [("independent", 3), ("iterative-linear", 3), ("iterative-log", 5)])
def test_rff_event_matches_every_member_draw(kind: str, length: int) -> None:
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(6, 4))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    keyphrases = [[0, 1, 2, 3, 4], [5, 4], [1], [2, 3, 0, 1, 5]]
    labels = ["a", "a", "b", "b"]
    ledger, noise = PrivacyLedger(), RecordingNoise(2)
    density = build_rff_density(keyphrases, labels, classes=("a", "b"), embeddings=emb, kind=kind, epsilon=1.5,
                                bandwidth=0.8, features=7, length=length,
                                context=ReleaseContext(noise=noise, ledger=ledger))
    (event,) = ledger.events
    members = len(ensemble_blocks(kind, length))
    assert len(density.members) == members
    assert event.sensitivity == pytest.approx(SQRT2 * 7 * members)
    assert event.noise_scale == pytest.approx(event.sensitivity / event.epsilon)
    assert noise.draws == [("laplace", event.noise_scale, 2 * 7)] * members  # every member, the event's scale
    for m in density.members:
        assert m.noise_scale == event.noise_scale and m.epsilon * members == pytest.approx(event.epsilon)
        # and the statistic under that noise moves by at most √2·I per member when one document is removed
        sums = [rff_feature_sums(k, lab, classes=("a", "b"), embeddings=emb, features=m.features, blocks=m.blocks,
                                 block_scale=m.block_scale, kind=kind, max_per_doc=length)
                for k, lab in [(keyphrases, labels)] + [(keyphrases[:i] + keyphrases[i + 1:], labels[:i] + labels[i + 1:])
                                                        for i in range(len(keyphrases))]]
        assert max(np.abs(sums[0] - s).sum() for s in sums[1:]) <= SQRT2 * 7 + 1e-9


def test_count_event_matches_its_draw() -> None:
    ledger, noise = PrivacyLedger(), RecordingNoise(3)
    released = release_count(17, epsilon=0.25, context=ReleaseContext(noise=noise, ledger=ledger))
    (event,) = ledger.events
    assert event.sensitivity == 1.0 and event.noise_scale == pytest.approx(1 / 0.25) == released.noise_scale
    assert noise.draws == [("laplace", event.noise_scale, 1)]


class _EchoBackend(LLMBackend):
    """A remote-style backend that writes a numbered text for every prompt (no model)."""

    name = "echo"
    model = "echo-model"
    max_concurrency = 1

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[override]
        with self.lock:
            self.calls += 1
            return f"draft {self.calls} about rivers and {messages[-1]['content'][-20:]}"


def test_augpe_event_matches_every_vote_draw() -> None:
    texts = [f"private note {i} on topic {i % 3}" for i in range(9)]
    labels = ["x", "y", "x"] * 3
    config = augpe.AugPEConfig(epochs=3, population=2, words_per_prompt=2)
    ledger, noise = PrivacyLedger(), RecordingNoise(4)
    result = augpe.run_augpe(texts, labels, vocabulary_terms=("river", "bridge", "market", "school"),
                             classes=("x", "y"), config=config, epsilon=3.0, delta=1e-6,
                             embedder=HashingEmbedder(dim=16), backend=_EchoBackend(),
                             context=ReleaseContext(noise=noise, ledger=ledger))
    (event,) = ledger.events
    sigma = calibrate_sigma(epsilon=3.0, delta=1e-6, epochs=3)
    assert event.noise_scale == sigma == result.sigma and event.sensitivity == 1.0
    assert event.params["gdp_mu"] == pytest.approx(math.sqrt(3) / sigma)
    assert gaussian_delta(mu=event.params["gdp_mu"], epsilon=event.epsilon) <= event.delta
    # one Gaussian draw per class and epoch, over the K bins, at the event's σ — and nothing else drawn
    assert noise.draws == [("gaussian", sigma, 2)] * (2 * 3)


# ------------------------------------------------------------------------------------------ private prediction

V = 12
TOP_K = 3
PUBLIC_LOGITS = torch.tensor([4.0, 3.5, 3.0] + [0.0] * (V - 3))  # the public top-3: tokens 0, 1, 2 at every step


def _prediction_model(steps: int = 10) -> ScriptedLM:
    """Private prompts favour tokens 6..11 (never in the public top-k) on even steps — a large SVT distance, so
    a private token — and agree with the public prompt on odd steps (distance 1 < θ: a public token)."""
    g = torch.Generator().manual_seed(0)
    script = {PUBLIC_KIND: PUBLIC_LOGITS[None].repeat(steps, 1)}
    for kind in (10, 11, 12, 13):
        z = torch.randn((steps, V), generator=g) * 2.0
        z[:, 6:] += 8.0
        z[1::2] = PUBLIC_LOGITS
        script[kind] = z
    return ScriptedLM(script)


PP_CONFIG = pp.PrivatePredictionConfig(batch_size=2, private_tokens=4, clip=2.0, temperature=1.3,
                                       public_temperature=0.9, svt_threshold=2.0, svt_noise=0.25, max_new_tokens=8,
                                       examples_per_batch=2, public_top_k=TOP_K, group_by_label=True)


def _run_prediction(noise, ledger) -> pp.PrivatePredictionResult:  # type: ignore[no-untyped-def]
    return pp.run_private_prediction(["ROW10", "ROW11", "ROW12", "ROW13"], ["a", "a", "a", "a"],
                                     model=_prediction_model(), tokenizer=ScriptedTokenizer(), config=PP_CONFIG,
                                     delta=1e-5, per_class=2, num_buckets=1, classes=("a",),
                                     context=ReleaseContext(noise=noise, ledger=ledger))


def test_private_prediction_candidates_come_only_from_the_public_logits(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[float, frozenset[int]]] = []
    original = pp._sample

    def spy(logits, temperature, candidates, rng):  # type: ignore[no-untyped-def]
        calls.append((float(temperature), frozenset(int(c) for c in candidates.tolist())))
        return original(logits, temperature, candidates, rng)

    monkeypatch.setattr(pp, "_sample", spy)
    torch.set_num_threads(1)
    result = _run_prediction(RecordingNoise(5), PrivacyLedger())
    public_top = frozenset(torch.topk(PUBLIC_LOGITS, TOP_K).indices.tolist())
    private = [c for t, c in calls if t == PP_CONFIG.temperature]
    assert private and len(private) == result.stats["private_tokens"]  # the run drew private tokens
    assert all(c == public_top for _, c in calls), f"candidates other than the public top-{TOP_K}: {set(calls)}"


def test_private_prediction_event_matches_the_sparse_vector_draws() -> None:
    torch.set_num_threads(1)
    ledger, noise = PrivacyLedger(), RecordingNoise(6)
    result = _run_prediction(noise, ledger)
    (event,) = ledger.events
    sigma = event.params["svt_noise_sigma"]
    assert sigma == PP_CONFIG.svt_noise and event.noise_scale == PP_CONFIG.temperature
    assert event.params["rho_zcdp"] == pytest.approx(PP_CONFIG.rho())
    assert event.epsilon == pytest.approx(pp.zcdp_to_epsilon(PP_CONFIG.rho(), 1e-5))
    stats = result.stats
    private = stats["private_tokens"]
    queries = private + stats["public_tokens"] - stats["public_tokens_after_budget"]  # tokens decided by the SVT
    assert 0 < private <= PP_CONFIG.private_tokens and queries > private  # both outcomes happened
    assert all(kind == "laplace" and size == 1 for kind, _, size in noise.draws)
    scales = [scale for _, scale, _ in noise.draws]
    # Algorithm 1: a threshold Laplace(σ) at the start of the batch and after EVERY private token (line 17);
    # a query Laplace(2σ) for every token the SVT decides (lines 12–13)
    assert scales.count(sigma) == stats["batches"] + private
    assert scales.count(2 * sigma) == queries
    assert len(scales) == stats["batches"] + private + queries
