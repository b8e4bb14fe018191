"""ε_voc mechanism (docs/DESIGN.md §2.1): statistical DP test, noise scale, zero-count terms, sensitivity S."""

import math

import numpy as np
import pytest

from dp_stats import assert_ratio_within, tail_event
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import noise_floor, noisy_term_histogram, privatize_vocabulary, select_top_terms
from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.matching import TermMatcher

TERMS = ["goal", "match", "bank", "shares", "phone", "chip", "rain", "snow"]
BASE_DOCS = ["goal match goal", "bank shares", "phone chip phone", "goal bank", "match"]
EXTRA_DOC = "rain snow goal"  # the neighbouring document: S = 3 distinct terms


def _counts(docs, s=3):
    return TermMatcher(TERMS).counts_first_distinct(docs, s)


def test_empirical_privacy_ratio_on_neighbouring_corpora():
    eps, s, trials = 1.0, 3, 200_000
    c_d = _counts(BASE_DOCS, s).astype(float)
    c_d2 = _counts(BASE_DOCS + [EXTRA_DOC], s).astype(float)
    changed = np.flatnonzero(c_d2 != c_d)
    assert changed.size == 3 and np.abs(c_d2 - c_d).sum() == 3
    noise = NoiseSource(seed=123)
    out_d = noisy_term_histogram(np.broadcast_to(c_d, (trials, len(TERMS))), epsilon=eps, terms_per_doc=s, noise=noise)
    out_d2 = noisy_term_histogram(np.broadcast_to(c_d2, (trials, len(TERMS))), epsilon=eps, terms_per_doc=s, noise=noise)
    # The tightest event for Laplace: every changed coordinate above its larger value (ratio e^{ε/S} each).
    thresholds = c_d2[changed]
    hits_d = tail_event(out_d, changed, thresholds).sum()
    hits_d2 = tail_event(out_d2, changed, thresholds).sum()
    ratio = assert_ratio_within(hits_d2, hits_d, trials, eps)
    # ... and the bound is tight: the noise is not larger than stated (ratio ≈ e^ε).
    assert ratio == pytest.approx(math.e ** eps, rel=0.1)


def test_noise_scale_matches_formula():
    eps, s = 2.0, 10
    noisy = noisy_term_histogram(np.zeros(400_000), epsilon=eps, terms_per_doc=s, noise=NoiseSource(seed=1))
    b = s / eps
    assert noisy.var() == pytest.approx(2 * b * b, rel=0.02)
    assert np.mean(np.abs(noisy)) == pytest.approx(b, rel=0.02)


def test_zero_count_terms_can_enter_private_vocabulary():
    terms = [f"t{i}" for i in range(2000)]
    counts = np.zeros(len(terms), dtype=int)
    counts[:5] = 3  # only 5 terms occur
    pv = privatize_vocabulary(counts, terms, epsilon=0.5, terms_per_doc=10, size=50, noise=NoiseSource(seed=0))
    assert len(pv) == 50
    assert sum(t not in {"t0", "t1", "t2", "t3", "t4"} for t in pv.terms) >= 40


def test_repeated_term_moves_histogram_by_at_most_s():
    s = 3
    spam = " ".join(["goal"] * 1000) + " rain snow bank phone chip"
    diff = _counts(BASE_DOCS + [spam], s) - _counts(BASE_DOCS, s)
    assert diff.min() >= 0 and diff.sum() <= s and diff[TERMS.index("goal")] == 1


def test_records_frozen_ledger_event_and_respects_cap():
    counts = _counts(BASE_DOCS)
    ledger = PrivacyLedger(cap=1.5)
    pv = privatize_vocabulary(counts, TERMS, epsilon=1.0, terms_per_doc=3, size=4, noise=NoiseSource(seed=0), ledger=ledger)
    (event,) = ledger.events
    assert event.step == "vocabulary" and event.sensitivity == 3 and event.noise_scale == pytest.approx(3.0)
    assert event.neighbouring == "add/remove one document" and len(pv) == 4
    with pytest.raises(PrivacyBudgetError):
        privatize_vocabulary(counts, TERMS, epsilon=1.0, terms_per_doc=3, size=4, noise=NoiseSource(seed=0), ledger=ledger)
    assert ledger.total_epsilon == 1.0


@pytest.mark.parametrize("eps", [0, -2, float("nan")])
def test_rejects_bad_epsilon(eps):
    with pytest.raises(ParameterError, match="ε_voc"):
        privatize_vocabulary(np.ones(3), ["a", "b", "c"], epsilon=eps, noise=NoiseSource())


def test_noise_floor_rule_uses_only_noisy_counts_and_public_inputs():
    rng = np.random.default_rng(0)
    noisy = rng.laplace(0, 10, 5000)
    noisy[:20] += 500
    floor = noise_floor(epsilon=1, terms_per_doc=10, vocabulary_size=5000)
    kept = select_top_terms(noisy, size=100, rule="noise-floor", floor=floor)
    assert set(kept.tolist()) >= set(range(20)) and len(kept) < 100
    assert (noisy[kept] >= floor).all()


def test_os_entropy_by_default_and_seed_policy():
    a = NoiseSource().laplace(1.0, 5)
    b = NoiseSource().laplace(1.0, 5)
    assert not np.allclose(a, b)
    assert NoiseSource().policy == "os-entropy"
    assert NoiseSource(seed=3).policy == "seeded-demo-not-for-release"
    assert np.allclose(NoiseSource(seed=3).laplace(1.0, 5), NoiseSource(seed=3).laplace(1.0, 5))


def test_opendp_sampler_has_the_stated_scale():
    noisy = NoiseSource(sampler="opendp").laplace(4.0, 20_000, integer_valued=True)
    assert np.all(noisy == np.round(noisy))
    assert noisy.var() == pytest.approx(2 * 16, rel=0.08)


from hypothesis import given, settings
from hypothesis import strategies as st


@settings(max_examples=60, deadline=None)
@given(
    counts_a=st.lists(st.integers(0, 500), min_size=30, max_size=30),
    counts_b=st.lists(st.integers(0, 500), min_size=30, max_size=30),
    size=st.integers(1, 30),
    rule=st.sampled_from(["top-n", "noise-floor"]),
    eps=st.floats(0.1, 20),
)
def test_kept_set_depends_only_on_noisy_counts_and_public_inputs(counts_a, counts_b, size, rule, eps):
    """Property (issue 8): whatever the private counts, the same noisy release gives the same Ṽ under every rule."""
    import dpkps_core.dp.vocabulary as vocab_mod

    terms = [f"w{i}" for i in range(30)]
    noisy = np.random.default_rng(size).laplace(0, 10, 30) + np.arange(30)
    original = vocab_mod.noisy_term_histogram
    vocab_mod.noisy_term_histogram = lambda counts, **kw: noisy.copy()
    try:
        picks = []
        for counts in (counts_a, counts_b):
            try:
                pv = privatize_vocabulary(np.array(counts), terms, epsilon=eps, terms_per_doc=5, size=size,
                                          noise=NoiseSource(seed=0), selection_rule=rule, floor_fraction=0.01)
                picks.append(pv.terms)
            except Exception as exc:  # noqa: BLE001 - an empty selection must then be empty for both
                picks.append(type(exc).__name__)
    finally:
        vocab_mod.noisy_term_histogram = original
    assert picks[0] == picks[1]
