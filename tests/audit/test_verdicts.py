"""The audit never passes a test it could not fail (docs/PRIVACY.md "Empirical audit"; issue 33 §2): when the
trials' largest possible lower bound is at most the claimed ε, the verdict is INCONCLUSIVE and says how many
evaluation trials a violation of the claim would need; the output says which noise sampler the trials drew."""

from __future__ import annotations

import math

import pytest
from test_audit import settings, synthetic

from dpkps_core import audit
from dpkps_core.audit.statistics import max_certifiable_epsilon, trials_to_certify
from dpkps_core.embeddings import HashingEmbedder


@pytest.mark.parametrize("epsilon, alpha", [(0.5, 0.01), (1.43, 0.05 / 8), (5.0, 1e-3), (10.0, 0.05 / 8)])
def test_trials_to_certify_is_the_fewest_that_could_show_the_claim(epsilon: float, alpha: float) -> None:
    n = trials_to_certify(epsilon, alpha)
    assert max_certifiable_epsilon(n, alpha) > epsilon >= max_certifiable_epsilon(n - 1, alpha)
    assert n == pytest.approx(math.log(1 / alpha) / math.log1p(math.exp(-epsilon)), rel=0.01, abs=2)


def test_ten_needs_about_a_hundred_thousand_trials() -> None:
    # the walk's BBC audit: claimed ε = 10, the trials could certify ≈ 1.43
    assert 100_000 < trials_to_certify(10.0, 0.05 / 8) < 120_000
    with pytest.raises(ValueError):
        trials_to_certify(-1.0, 0.01)


def test_verdicts_for_each_case() -> None:
    kind = audit.verdict_kind
    assert kind(11.0, 10.0, 12.0) == audit.VIOLATION
    assert kind(0.0, 10.0, 1.43) == audit.INCONCLUSIVE and kind(0.0, 10.0, 10.0) == audit.INCONCLUSIVE
    assert kind(0.4, 0.6, 3.2) == audit.CONSISTENT
    violation, text = audit.verdict_for(0.0, 10.0, 0.95, 1.43, alpha=0.05 / 8)
    assert not violation and text.startswith("INCONCLUSIVE for ε = 10")
    assert "can certify at most ε ≈ 1.43" in text and f"{trials_to_certify(10.0, 0.05 / 8):,} evaluation" in text
    assert "consistent" not in text
    violation, text = audit.verdict_for(0.4, 0.6, 0.95, 3.2)
    assert not violation and text.startswith("consistent with ε = 0.6") and "would have shown" in text


def test_an_audit_whose_trials_cannot_reach_the_claim_is_inconclusive_not_a_pass() -> None:
    corpus, vocab, config = synthetic(120, eps_voc=5.0, eps_kde=5.0)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                             settings=settings(trials=12, vocabulary_trials=200, density_trials=20))
    r = result.to_dict()
    assert r["max_certifiable_epsilon"] < 10.0
    assert not result.violation and result.kind == audit.INCONCLUSIVE and r["verdict_kind"] == "inconclusive"
    assert result.verdict.startswith("INCONCLUSIVE for ε = 10")
    # and says which sampler the trials drew, against the release's (OpenDP by default)
    assert "NumPy's Laplace, not the release's OpenDP samplers" in r["noise_sampler_note"]
    assert "--audit-sampler release" in r["noise_sampler_note"]
    assert r["noise_sampler_note"] in audit.render_markdown(result)


def test_a_small_claim_within_reach_is_still_consistent() -> None:
    corpus, vocab, config = synthetic(120)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                             settings=settings(canary_documents=2))
    assert result.kind == audit.CONSISTENT and result.to_dict()["max_certifiable_epsilon"] > 0.6


def test_the_release_sampler_is_named_when_the_trials_use_it() -> None:
    assert audit.sampler_note("opendp", "opendp") == "The trials drew the release's own sampler (opendp)."
