"""AugPE+Ṽ ([DP-KPS] §3, App. C.1.3): exact Gaussian-DP calibration, nearest-neighbour vote sensitivity,
selection, and prompts that hold only Ṽ words and synthetic texts — never class names or private text."""

from __future__ import annotations

import math
import re
import threading

import numpy as np
import pytest

from dpkps_core.baselines import augpe
from dpkps_core.dp.accounting import max_rho_for
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.llm.backends import LLMBackend, TransientLLMError


@pytest.mark.parametrize("target", [0.5, 1.0, 3.0, 5.0, 10.0])
@pytest.mark.parametrize("epochs", [1, 10])
def test_sigma_calibration_keeps_the_total_epsilon_at_or_below_target(target: float, epochs: int) -> None:
    sigma = augpe.calibrate_sigma(epsilon=target, delta=1e-6, epochs=epochs)
    eps = augpe.gaussian_epsilon(sigma=sigma, epochs=epochs, delta=1e-6)
    assert eps <= target and eps > 0.99 * target
    assert augpe.gaussian_epsilon(sigma=sigma * 0.99, epochs=epochs, delta=1e-6) > target  # not wasteful
    # exact Gaussian-DP composition is never looser than the zCDP route (ρ = T/(2σ²))
    rho_max = max_rho_for(target, 1e-6)
    assert sigma <= math.sqrt(epochs / (2 * rho_max)) * 1.001


def test_nn_vote_histogram_has_sensitivity_one_per_epoch() -> None:
    rng = np.random.default_rng(0)
    syn = rng.normal(size=(6, 16))
    syn /= np.linalg.norm(syn, axis=1, keepdims=True)
    priv = rng.normal(size=(40, 16))
    priv /= np.linalg.norm(priv, axis=1, keepdims=True)
    base = augpe.nn_votes(priv, syn)
    assert base.sum() == 40 and base.dtype.kind == "i"
    for i in range(40):  # remove any one document: exactly one bin drops by one
        diff = base - augpe.nn_votes(np.delete(priv, i, axis=0), syn)
        assert np.abs(diff).sum() == 1 and np.sqrt((diff ** 2).sum()) == 1
    extra = rng.normal(size=(1, 16))
    diff = augpe.nn_votes(np.vstack([priv, extra]), syn) - base
    assert diff.min() == 0 and diff.max() == 1 and diff.sum() == 1
    # a document equal to synthetic text j votes for j
    assert augpe.nn_votes(syn[[3]], syn).tolist() == [0, 0, 0, 1, 0, 0]
    assert augpe.nn_votes(priv[:0], syn).tolist() == [0] * 6


def test_selection_follows_noisy_votes_and_falls_back_to_uniform() -> None:
    rng = np.random.default_rng(1)
    idx, fb = augpe.select(np.array([-3.0, 10.0, 0.5]), k=200, threshold=1.0, rng=rng)
    assert not fb and set(idx.tolist()) == {1}
    idx, fb = augpe.select(np.array([-3.0, -1.0]), k=50, threshold=0.0, rng=rng)
    assert fb and set(idx.tolist()) == {0, 1}
    noisy = augpe.noisy_votes(np.zeros(20000), sigma=2.0, noise=NoiseSource(seed=1))
    assert noisy.std() == pytest.approx(2.0, rel=0.05)


class RecordingBackend(LLMBackend):
    """Records every prompt; replies with a numbered synthetic text; one transient failure to exercise retries."""

    name = "recording"
    model = "recording-model"
    max_concurrency = 3

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, str]]] = []
        self.replies: list[str] = []
        self.lock = threading.Lock()
        self.failed_once = False

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[override]
        with self.lock:
            self.prompts.append([dict(m) for m in messages])
            if not self.failed_once:
                self.failed_once = True
                raise TransientLLMError("flaky (fake)")
            text = f"synthetic draft {len(self.replies)} about weather and travel"
            self.replies.append(text)
            return text


def _private_corpus() -> tuple[list[str], list[str]]:
    texts = [f"zyxsecret patient {i} has a fever and a cough" for i in range(12)]
    texts += [f"qwvprivate invoice {i} shows a large payment" for i in range(10)]
    return texts, ["medicine"] * 12 + ["finance"] * 10


def test_run_augpe_prompts_hold_only_vocabulary_words_and_synthetic_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("dpkps_core.llm.retry.backoff_delay", lambda *a, **k: 0.0)
    texts, labels = _private_corpus()
    vocab = ("fever", "payment", "weather", "travel", "medicine", "Finance", "city", "report", "river", "school")
    backend = RecordingBackend()
    ledger = PrivacyLedger(cap=10.0)
    cfg = augpe.AugPEConfig(epochs=3, population=2, words_per_prompt=4, doc_type="a short note")
    res = augpe.run_augpe(texts, labels, vocabulary_terms=vocab, classes=("finance", "medicine"), config=cfg,
                          epsilon=4.0, delta=1e-6,
                          embedder=HashingEmbedder(dim=32), backend=backend,
                          context=ReleaseContext(noise=NoiseSource(3), ledger=ledger))
    # budget: C·K·T prompts (+1 retried call), T per document
    assert len(res.documents) == 4 and {d["label"] for d in res.documents} == {"medicine", "finance"}
    assert res.stats["prompts"] == 2 * 2 * 3 and res.stats["llm_calls"] == 2 * 2 * 3 + 1
    assert res.stats["prompt_budget"]["prompts_per_document"] == 3 and len(res.audit) == 12
    allowed = {"fever", "payment", "weather", "travel", "city", "report", "river", "school"}
    for messages in backend.prompts:
        blob = " ".join(m["content"] for m in messages).lower()
        assert "medicine" not in blob and "finance" not in blob  # class names never (Ṽ terms equal to one dropped)
        assert "zyxsecret" not in blob and "qwvprivate" not in blob and "patient" not in blob and "invoice" not in blob
        user = messages[-1]["content"]
        m = re.search(r"following words: (.*)\.\n", user)
        if m:  # random API: only Ṽ words
            assert set(m.group(1).split(", ")) <= allowed
        else:  # variation: exactly one earlier synthetic text inside the public template
            assert "Rewrite the following text" in user
            assert any(r in user for r in backend.replies)
    # one ledger event with δ, calibrated to the target
    (ev,) = ledger.events
    assert ev.mechanism == augpe.MECHANISM and ev.delta == 1e-6 and ev.epsilon <= 4.0 and ev.sensitivity == 1.0
    assert ev.noise_scale == res.sigma and ev.params["epochs_T"] == 3
    assert res.privacy_report()["delta"] == 1e-6
    with pytest.raises(PrivacyBudgetError):
        augpe.run_augpe(texts, labels, vocabulary_terms=vocab, classes=("finance", "medicine"), config=cfg,
                        epsilon=20.0, delta=1e-6,
                        embedder=HashingEmbedder(dim=32), backend=backend,
                        context=ReleaseContext(noise=NoiseSource(), ledger=PrivacyLedger(cap=10.0)))


def test_config_validation_and_prompt_budget() -> None:
    with pytest.raises(ParameterError):
        augpe.AugPEConfig(epochs=0).validate()
    with pytest.raises(ParameterError):
        augpe.AugPEConfig(doc_type=" ").validate()
    budget = augpe.prompt_budget(classes=5, population=2, epochs=10)
    assert budget == {"prompts": 100, "documents": 10, "prompts_per_document": 10,
                      "dpkps_prompts_for_same_documents": 10}
    with pytest.raises(ParameterError):
        augpe.run_augpe(["a"], ["x"], vocabulary_terms=("x",), classes=("x",), config=augpe.AugPEConfig(), epsilon=1.0, delta=1e-6,
                        embedder=HashingEmbedder(), backend=RecordingBackend())  # Ṽ minus class names is empty


@pytest.mark.model
def test_offline_batched_generation_writes_one_reply_per_prompt() -> None:
    from dpkps_core.llm.local import OfflineBackend

    cfg = augpe.AugPEConfig(doc_type="a news article")
    msgs = [augpe.random_api_messages(["football", "goal"], cfg), augpe.random_api_messages(["bank", "rates", "euro"], cfg)]
    audit: list[dict] = []
    texts, st = augpe.generate_texts(msgs, backend=OfflineBackend(threads=1), max_tokens=6, temperature=0.7,
                                     audit=audit, purpose="test")
    assert len(texts) == 2 and all(isinstance(t, str) and t for t in texts)
    assert st.calls == 2 and 0 < st.completion_tokens <= 12 and st.prompt_tokens > 40 and len(audit) == 2
