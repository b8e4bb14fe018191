"""Statistical tests of the disclosure test itself (issue 34 §2; dpkps_core/evaluation/disclosure.py, [Phantoms],
[OneRun]): it flags documents copied from training rows, it does not flag documents written independently of the
training part even where chance matches abound, and its empirical ε lower bound stays below the ε of a mechanism
that is ε-DP by construction.

Every test has fixed seeds. Where a test counts outcomes over seeds, the false-failure probability of a CORRECT
implementation is stated next to it (each seed's outcome is an independent event of probability ≤ α = 0.05)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.disclosure import (DisclosureSettings, disclosure_test, hypergeometric_p_value,
                                              one_run_epsilon_lower_bound, read_disclosure, write_disclosure)
from dpkps_core.evaluation.memorisation import memorisation_check

SEEDS = range(20)
#: At most this many of the 20 seeds may reject (or exceed) at α = 0.05; a correct implementation fails the test
#: with probability P(Binomial(20, 0.05) ≥ 4) ≈ 0.016.
MAX_FALSE = 3


def _phrase_bank(rng: np.random.Generator, size: int = 1500, words: int = 6) -> list[str]:
    vocab = [f"w{i}" for i in range(400)]
    return [" ".join(rng.choice(vocab, size=words)) for _ in range(size)]


def _doc(rng: np.random.Generator, bank: list[str], phrases: int = 8) -> str:
    """A document of ``phrases`` six-word phrases of a shared bank: documents share phrases by chance, and many
    of a document's phrases occur in no other reference document (rare n-grams matched by chance)."""
    return ". ".join(bank[i] for i in rng.integers(0, len(bank), size=phrases)) + "."


def _corpus(seed: int, n: int = 300) -> tuple[np.random.Generator, list[str], list[str], list[str]]:
    rng = np.random.default_rng(seed)
    bank = _phrase_bank(rng)
    pool = [_doc(rng, bank) for _ in range(2 * n)]
    return rng, bank, pool[:n], pool[n:]


def test_copies_of_training_rows_are_flagged_on_every_seed() -> None:
    for seed in range(5):
        rng, bank, train, hold = _corpus(seed)
        copies = [train[i] for i in rng.choice(len(train), size=30, replace=False)]
        fresh = [_doc(rng, bank) for _ in range(70)]
        result = disclosure_test(copies + fresh, train, hold, claimed_epsilon=1.0)
        assert result.leakage and result.p_value < 1e-6, (seed, result.to_dict())
        assert result.epsilon_lower_bound > 0.5
        assert result.verdict == "leakage beyond the claimed ε"  # 30 verbatim copies cannot be 1-DP
        assert result.by_kind["long_span"]["train"] >= 30 > 10 > result.by_kind["long_span"]["holdout"]


def test_independent_documents_are_not_flagged_though_they_match_by_chance() -> None:
    rejections, chance = 0, 0
    for seed in SEEDS:
        rng, bank, train, hold = _corpus(seed)
        synthetic = [_doc(rng, bank) for _ in range(100)]  # never saw the training part
        result = disclosure_test(synthetic, train, hold, claimed_epsilon=1.0, settings=DisclosureSettings(seed=seed))
        rejections += result.leakage
        chance += result.train_matched
        assert result.epsilon_lower_bound <= 1.0 or result.leakage
    # chance matches abound (a training-only check would flag them) ...
    assert chance > 20 * 20
    naive = memorisation_check(synthetic, train, n=6, flag_words=6)
    assert sum(r.flagged for r in naive) > 50
    # ... yet the held-out control keeps the test at its level: P(fail | correct) ≈ 0.016 (module docstring)
    assert rejections <= MAX_FALSE


def _randomised_response(seed: int, epsilon: float, n: int = 600) -> tuple[list[str], list[str], list[str]]:
    """A mechanism that is ε-DP per document by construction: over a public universe of ``n`` documents, each one
    is a member of the training part by a fair coin, and each is copied into the output with probability
    e^ε/(1+e^ε) if it is a member, 1/(1+e^ε) if not (randomised response on membership)."""
    rng = np.random.default_rng(10_000 + seed)
    bank = _phrase_bank(rng)
    universe = [_doc(rng, bank, phrases=4) + f" doc{seed}x{i}" for i in range(n)]
    member = rng.random(n) < 0.5
    q1 = math.exp(epsilon) / (1 + math.exp(epsilon))
    keep = rng.random(n) < np.where(member, q1, 1 - q1)
    out = [u for u, k in zip(universe, keep) if k]
    return out, [u for u, m in zip(universe, member) if m], [u for u, m in zip(universe, member) if not m]


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_the_bound_never_exceeds_the_epsilon_of_an_epsilon_dp_mechanism(epsilon: float) -> None:
    exceed, bounds = 0, []
    for seed in SEEDS:
        synthetic, train, hold = _randomised_response(seed, epsilon)
        result = disclosure_test(synthetic, train, hold, claimed_epsilon=epsilon,
                                 settings=DisclosureSettings(seed=seed))
        exceed += result.exceeds_claim
        bounds.append(result.epsilon_lower_bound)
    # validity: at confidence 0.95 each seed exceeds with probability ≤ 0.05 → P(fail | correct) ≈ 0.016
    assert exceed <= MAX_FALSE, bounds
    # and the bound is informative: it finds most of the ε a mechanism really spends
    assert float(np.median(bounds)) > 0.5 * epsilon, bounds


def test_the_statistics_are_the_stated_ones() -> None:
    # hypergeometric: 10 matched, all 10 training, 50 per part
    assert hypergeometric_p_value(10, 10, 50) == pytest.approx(math.comb(50, 10) / math.comb(100, 10))
    assert hypergeometric_p_value(0, 10, 50) == pytest.approx(1.0)
    assert hypergeometric_p_value(0, 0, 50) == 1.0
    # one-run bound: logit of the Clopper-Pearson lower bound, 0 at or below one half
    assert one_run_epsilon_lower_bound(5, 10, 0.05) == 0.0
    lo = 0.05 ** (1 / 40)  # CP lower bound of 40/40 at α = 0.05
    assert one_run_epsilon_lower_bound(40, 40, 0.05) == pytest.approx(math.log(lo / (1 - lo)))
    # exactness of the test under the null: P(p ≤ α) ≤ α for the hypergeometric tail
    per_part, matched = 40, 12
    ps = [hypergeometric_p_value(w, matched, per_part) for w in range(matched + 1)]
    from scipy.stats import hypergeom
    size = sum(hypergeom.pmf(w, 2 * per_part, per_part, matched) for w, p in enumerate(ps) if p <= 0.05)
    assert size <= 0.05
    assert binom.sf(MAX_FALSE, 20, 0.05) < 0.02


def test_identifiers_and_settings(tmp_path) -> None:
    train = ["The patient MRN 443-21 was seen on Monday.", "Nothing rare in this one at all today."]
    hold = ["A different patient was seen on Tuesday.", "Another ordinary note for the clinic."]
    result = disclosure_test(["Follow-up for mrn 443-21 booked."], train, hold,
                             settings=DisclosureSettings(identifiers=("MRN 443-21", "  ", "MRN 443-21")))
    assert result.by_kind["identifier"] == {"train": 1, "holdout": 0}
    assert result.settings.identifiers == ("MRN 443-21",)
    assert result.to_dict()["settings"]["identifiers"] == 1  # the identifiers themselves are not written
    path = write_disclosure(result, tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert "443" not in path.read_text(encoding="utf-8")
    assert read_disclosure(tmp_path)["train_matched"] == 1
    with pytest.raises(ParameterError, match="held-out"):
        disclosure_test(["x"], train, [])
    with pytest.raises(ParameterError):
        DisclosureSettings(ngram=8, span_words=6)
    with pytest.raises(ParameterError):
        DisclosureSettings(confidence=1.0)
