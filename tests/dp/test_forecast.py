"""The DP forecast (ε_forecast; dpkps_core.dp.forecast, evaluation.forecast_dp.dp_forecast): its guarantee, tested
statistically through the real release path with its own seeded noise; charge-first order; the exact preview only
on request; Ṽ's noise share from DP quantities only (docs/PRIVACY.md "Previews that steer choices").

Exact behaviour pinned (mutation testing) for dpkps_core.dp.count and dpkps_core.dp.forecast (docs/TESTING.md "Mutation testing").

The DP count's frozen event and its unit count (docs/DESIGN.md §2.0: admit, count the admitted units, charge, then draw),
and the forecast's post-processing (pool-adjacent-violators fit, clamping to [0, |V|] and to the noisy number of
units, docs/DESIGN.md §6) and its serialised form.

Exact behaviour pinned (mutation testing) for dpkps_core.dp.forecast's release side (docs/TESTING.md "Mutation testing").

The DP forecast release (docs/DESIGN.md §2, §6; module docstring of dp/forecast.py): the public thresholds' checks, the
count curve G and the class sizes n it noises (undeclared labels count nowhere, every declared class has an entry,
a person's documents weigh 1 in total), the noise scales S/(a·ε) and 1/((1 − a)·ε), the one event charged before
the noise, the released record's public fields, the refusals naming their parameter, and the sampler: integer
statistics (the curve; document-unit class sizes) go through OpenDP's discrete Laplace, so they stay whole.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from tests.dp_stats import assert_ratio_within

from dp_stats import PassThroughNoise
from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.dp import count as cnt, forecast as dp_forecast_module, forecast as fc
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.forecast import (DEFAULT_THRESHOLDS, ForecastStatistics, class_sizes, count_curve,
                                    monotone_non_increasing, release_forecast_statistics)
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.errors import ParameterError, PrivacyBudgetError
from dpkps_core.evaluation.forecast_dp import (dp_forecast, forecast_from_release, forecast_preview,
                                               reconstructed_counts, release_forecast)
from dpkps_core.evaluation.forecast_outlook import vocabulary_noise_share
from dpkps_core.method.vocabulary import PublicVocabulary


TERMS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")


VOCAB = PublicVocabulary("v", TERMS, "test", "test")


S = 2


def _corpus(texts: list[str], labels: list[str], persons: list[str] | None = None) -> Corpus:
    return Corpus(tuple(texts), tuple(labels), "toy", "tests", public_classes=("a", "b"),
                  persons=None if persons is None else tuple(persons), person_column="p" if persons else None)


# D: alpha and beta each in exactly one document (count 1, just below the threshold c = 2); D' adds one document of
# class a whose first S = 2 distinct terms are alpha and beta: G(2) rises by 2 = S and n_a by 1 — the full
# sensitivity of both parts (rescaled: a·S/S + (1 − a)·1 = 1).
BASE_TEXTS = ["alpha gamma words here", "beta delta words here", "gamma delta words here", "epsilon zeta words here"]


BASE_LABELS = ["a", "b", "a", "b"]


D = _corpus(BASE_TEXTS, BASE_LABELS)


D_PLUS = _corpus(BASE_TEXTS + ["alpha beta more words"], BASE_LABELS + ["a"])


G2 = DEFAULT_THRESHOLDS.index(2)


CFG = SamplingConfig(eps_voc=1.0, eps_kde=1.0, vocab_size=4, terms_per_doc=S)


def _hits(corpus: Corpus, *, epsilon: float, trials: int, seed: int) -> int:
    """Trials of the real release path (admission, counting, charge, noise) in which both moved coordinates land at
    or above D⁺'s true values: the event where the privacy loss is largest (P_D⁺ = 1/4, P_D = e^{−ε}/4)."""
    noise = NoiseSource(seed)
    hits = 0
    for _ in range(trials):
        stats = release_forecast(corpus, VOCAB, context=ReleaseContext(noise=noise, ledger=PrivacyLedger()),
                                 epsilon=epsilon,
                                 terms_per_doc=S)
        hits += int(stats.curve[G2] >= 4 and stats.class_counts[0] >= 3)
    return hits


def _true(corpus: Corpus) -> tuple[int, float]:
    from dpkps_core.method import pipeline

    counts = pipeline.term_counts(corpus.texts, VOCAB, terms_per_doc=S)
    return int(count_curve(counts, DEFAULT_THRESHOLDS)[G2]), float(class_sizes(corpus.labels, ("a", "b"))[0])


def test_neighbours_move_the_statistic_by_the_full_sensitivity() -> None:
    assert _true(D) == (2, 2.0)
    assert _true(D_PLUS) == (4, 3.0)


@pytest.mark.parametrize("epsilon", [1.0])
def test_dp_forecast_is_epsilon_dp_statistically(epsilon: float) -> None:
    trials = 3000
    hits_d, hits_plus = _hits(D, epsilon=epsilon, trials=trials, seed=11), _hits(D_PLUS, epsilon=epsilon, trials=trials,
                                                                                   seed=12)
    # power: the event's true ratio IS e^ε, so it sits at the bound
    assert abs(hits_plus / trials - 0.25) < 0.04
    assert abs(hits_d / trials - 0.25 * math.exp(-epsilon)) < 0.03
    assert_ratio_within(hits_d, hits_plus, trials, epsilon)


def test_the_statistical_test_fails_when_the_noise_is_halved(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dp_forecast_module.noise_scales
    monkeypatch.setattr(dp_forecast_module, "noise_scales",
                        lambda e, s, a: tuple(x / 2 for x in real(e, s, a)))
    trials = 3000
    hits_d, hits_plus = _hits(D, epsilon=1.0, trials=trials, seed=11), _hits(D_PLUS, epsilon=1.0, trials=trials, seed=12)
    with pytest.raises(AssertionError):
        assert_ratio_within(hits_d, hits_plus, trials, 1.0)


def test_person_unit_sensitivity_holds_for_a_removed_person() -> None:
    """One person with documents in both classes moves the stacked class sizes by 1 and the curve by ≤ S."""
    from dpkps_core.method import pipeline

    texts = BASE_TEXTS + ["alpha beta gamma x", "delta epsilon zeta y"]
    labels = BASE_LABELS + ["a", "b"]
    persons = ["p1", "p2", "p3", "p4", "q", "q"]
    with_q = _corpus(texts, labels, persons)
    without_q = _corpus(texts[:4], labels[:4], persons[:4])
    curves, sizes = [], []
    for c in (with_q, without_q):
        counts = pipeline.term_counts(c.texts, VOCAB, terms_per_doc=S, groups=c.persons)
        curves.append(count_curve(counts, DEFAULT_THRESHOLDS))
        sizes.append(class_sizes(c.labels, ("a", "b"), c.persons))
    assert np.abs(curves[0] - curves[1]).sum() <= S
    assert np.abs(sizes[0] - sizes[1]).sum() == pytest.approx(1.0)


class OrderLedger(PrivacyLedger):
    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.log = log

    def admit(self, units, epsilon, *, what="this release"):  # type: ignore[override]
        self.log.append("admit")
        return super().admit(units, epsilon, what=what)

    def charge(self, event):  # type: ignore[override]
        self.log.append(f"charge:{event.step}")
        return super().charge(event)


class OrderNoise(NoiseSource):
    def __init__(self, log: list[str]) -> None:
        super().__init__(0)
        self.log = log

    def add_laplace(self, values, *, scale, integer_valued=False):  # type: ignore[override]
        self.log.append("noise")
        return super().add_laplace(values, scale=scale, integer_valued=integer_valued)


def test_forecast_admits_then_charges_before_any_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpkps_core.method import pipeline

    log: list[str] = []
    real_counts = pipeline.term_counts
    monkeypatch.setattr(pipeline, "term_counts", lambda *a, **k: (log.append("count"), real_counts(*a, **k))[1])
    led = OrderLedger(log)
    dp_forecast(D, VOCAB, CFG, context=ReleaseContext(noise=OrderNoise(log), ledger=led), epsilon=0.3, reps=1)
    assert log == ["admit", "count", "charge:forecast", "noise", "noise"]
    (event,) = led.events
    assert event.step == "forecast" and event.epsilon == pytest.approx(0.3)
    assert event.sensitivity == 1.0 and event.noise_scale == pytest.approx(1 / 0.3)
    assert event.params["curve_noise_scale"] == pytest.approx(S / (0.5 * 0.3))


def test_a_refused_budget_spends_nothing_and_draws_no_noise() -> None:
    log: list[str] = []
    led = OrderLedger(log)
    led.cap = 0.1
    with pytest.raises(Exception):
        dp_forecast(D, VOCAB, CFG, context=ReleaseContext(noise=OrderNoise(log), ledger=led), epsilon=0.3)
    assert "noise" not in log and led.total_epsilon == 0


def test_exact_preview_only_on_request() -> None:
    with pytest.raises(ParameterError, match="charges ε_forecast"):
        forecast_preview(D, VOCAB, CFG)
    led = PrivacyLedger()
    f = forecast_preview(D, VOCAB, CFG, context=ReleaseContext(noise=NoiseSource(1), ledger=led), epsilon_forecast=0.25,
                         reps=1)
    assert f.dp and f.covered_by_epsilon and not f.private and led.total_epsilon == pytest.approx(0.25)
    exact = forecast_preview(D, VOCAB, CFG, exact=True, context=ReleaseContext(noise=NoiseSource(), ledger=led), reps=1)
    assert not exact.dp and not exact.covered_by_epsilon and exact.private
    assert led.total_epsilon == pytest.approx(0.25)  # the exact preview charged nothing
    assert "not covered by ε" in exact.to_dict()["disclosure_note"] or exact.to_dict()["covered_by_epsilon"] is False


def test_forecast_from_release_is_post_processing_and_close_to_the_truth() -> None:
    """A noise-free release reproduces the exact vocabulary forecast; a release for another S is refused."""
    from dpkps_core.method.config import LIMITS
    from dpkps_core.evaluation.forecast_exact import forecast

    rng = np.random.default_rng(0)
    counts = np.concatenate([rng.integers(1, 400, 300), np.zeros(20_000, dtype=np.int64)])
    stats = ForecastStatistics(thresholds=DEFAULT_THRESHOLDS, curve=count_curve(counts, DEFAULT_THRESHOLDS).astype(float),
                               classes=("a", "b"), class_counts=np.array([600.0, 400.0]), public_vocabulary="v",
                               public_vocabulary_size=counts.size, terms_per_doc=10, epsilon=1.0, curve_share=0.5,
                               curve_noise_scale=20.0, class_noise_scale=2.0)
    assert np.array_equal(np.sort(reconstructed_counts(stats))[::-1], np.sort(counts)[::-1].astype(float))
    f = forecast_from_release(stats, SamplingConfig(eps_voc=1.0, eps_kde=5.0, vocab_size=200), reps=3)
    assert f.dp and f.n_documents == 1000 and f.class_sizes == {"a": 600, "b": 400}
    assert f.terms_in_corpus == 300
    with pytest.raises(ParameterError, match="needs a new release"):
        forecast_from_release(stats, SamplingConfig(eps_voc=1.0, eps_kde=5.0, terms_per_doc=5))
    assert LIMITS  # the same limits as the exact forecast
    assert forecast  # exact forecast still importable under its name


def test_monotone_fit() -> None:
    assert monotone_non_increasing(np.array([5.0, 6.0, 3.0, 4.0, 0.0])).tolist() == [5.5, 5.5, 3.5, 3.5, 0.0]


def test_vocabulary_noise_share_from_dp_quantities_matches_simulation() -> None:
    """The share of Ṽ that is pure noise, estimated from Ṽ's noisy counts alone, tracks the real share."""
    rng = np.random.default_rng(3)
    true = np.concatenate([rng.integers(30, 300, 200), np.zeros(50_000, dtype=np.int64)]).astype(float)
    b = 10.0
    shares, estimates = [], []
    for _ in range(20):
        noisy = true + rng.laplace(0, b, true.size)
        top = np.argsort(-noisy)[:300]
        pv = PrivateVocabulary(terms=tuple(str(i) for i in top), noisy_counts=noisy[top], public_vocabulary="v",
                               public_vocabulary_size=true.size, epsilon=1.0, terms_per_doc=10, requested_size=300,
                               noise_scale=b)
        shares.append(float(np.mean(true[top] == 0)))
        estimates.append(vocabulary_noise_share(pv)["expected_noise_share"])
    assert abs(np.mean(estimates) - np.mean(shares)) < 0.1
    # the estimate reads only Ṽ (a DP output): the same Ṽ gives the same number whatever the corpus was
    assert vocabulary_noise_share(pv) == vocabulary_noise_share(pv)


def test_release_refuses_bad_settings() -> None:
    with pytest.raises(ParameterError):
        release_forecast_statistics(np.zeros(3), ["a"], classes=("a",), epsilon=1.0, terms_per_doc=1,
                                    context=ReleaseContext(noise=NoiseSource(0), ledger=PrivacyLedger()),
                                    curve_share=1.0)
    with pytest.raises(ParameterError):
        count_curve(np.zeros(3), [2, 1])


@pytest.mark.parametrize("values,fit", [
    ([1.0, 3.0, 5.0], [3.0, 3.0, 3.0]),
    ([1.0, 0.0, 4.0], [5 / 3] * 3),
    ([5.0, 4.0, 4.0, 1.0], [5.0, 4.0, 4.0, 1.0]),
    ([3, 1, 2], [3.0, 1.5, 1.5]),
    ([], []),
])
def test_monotone_fit_is_the_weighted_pool_of_violators(values: list[float], fit: list[float]) -> None:
    got = fc.monotone_non_increasing(np.asarray(values))
    assert got.shape == (len(values),)
    np.testing.assert_allclose(got, fit)


def _stats(curve: list[float], thresholds: list[int], class_counts: list[float], v: int = 10) -> fc.ForecastStatistics:
    return fc.ForecastStatistics(thresholds=tuple(thresholds), curve=np.asarray(curve, dtype=float), classes=("a", "b"),
                                 class_counts=np.asarray(class_counts, dtype=float), public_vocabulary="g",
                                 public_vocabulary_size=v, terms_per_doc=3, epsilon=0.2, curve_share=0.5,
                                 curve_noise_scale=30.0, class_noise_scale=10.0)


def test_smoothed_curve_is_clamped_to_the_vocabulary_and_the_noisy_units() -> None:
    # 5 noisy units: thresholds above 5 are zeroed, a threshold equal to 5 is kept
    np.testing.assert_allclose(_stats([12.0, 6.0, 4.0, 3.0], [1, 5, 6, 9], [2.0, 3.0]).smoothed_curve(),
                               [10.0, 6.0, 0.0, 0.0])
    np.testing.assert_allclose(_stats([3.0, -2.0], [1, 2], [0.0, -4.0]).smoothed_curve(), [3.0, 0.0])
    np.testing.assert_allclose(_stats([3.0, -2.0], [1, 2], [5.0, 0.0]).smoothed_curve(), [3.0, 0.0])
    np.testing.assert_allclose(_stats([3.0, 2.0], [1, 2], [0.0, 0.5]).smoothed_curve(), [3.0, 0.0])


def test_class_sizes_are_clamped_at_zero_only() -> None:
    assert _stats([1.0], [1], [-2.0, 0.5]).class_sizes() == {"a": 0.0, "b": 0.5}


def test_forecast_statistics_serialise_rounded() -> None:
    d = _stats([1.234, 0.5], [1, 2], [3.456, 7.0]).to_dict()
    assert d == {"thresholds": [1, 2], "curve": [1.23, 0.5], "classes": ["a", "b"], "class_counts": [3.46, 7.0],
                 "public_vocabulary": "g", "public_vocabulary_size": 10, "terms_per_doc": 3, "epsilon": 0.2,
                 "curve_share": 0.5, "curve_noise_scale": 30.0, "class_noise_scale": 10.0,
                 "neighbouring": ADD_REMOVE_ONE_DOCUMENT}


def test_count_noise_is_integer_valued_with_opendp() -> None:
    """The event says "Laplace(1/ε), integer-valued": OpenDP's discrete Laplace keeps the released count whole."""
    values = [cnt.release_count(10, epsilon=1.0, context=ReleaseContext(noise=NoiseSource())).value for _ in range(5)]
    assert all(float(v).is_integer() for v in values)


PERSON = "add/remove one person"


THRESHOLD_MESSAGE = r"^The forecast thresholds must be strictly increasing integers starting at 1 or more\.$"


def test_thresholds_are_returned_as_int64() -> None:
    t = fc.check_thresholds([1.0, 2.0, 5.0])
    assert t.dtype == np.int64 and t.tolist() == [1, 2, 5]
    assert fc.check_thresholds((7,)).tolist() == [7]  # a single public threshold is a valid curve


@pytest.mark.parametrize("thresholds", [[], [0, 1], [1, 1, 2], [3, 2], [[1]], [[1, 2]]])
def test_bad_thresholds_are_refused(thresholds: list) -> None:
    with pytest.raises(ParameterError, match=THRESHOLD_MESSAGE):
        fc.check_thresholds(thresholds)


def test_count_curve_counts_entries_at_or_above_each_threshold() -> None:
    g = fc.count_curve(np.array([0, 1, 3, 3, 9]), [1, 2, 3, 4, 10])
    assert g.dtype == np.int64 and g.tolist() == [4, 3, 3, 1, 0]


def test_class_sizes_skip_undeclared_labels_and_keep_empty_classes() -> None:
    sizes = fc.class_sizes(["a", "zz", "a", "b"], ["a", "b", "c"])
    assert sizes.dtype == np.float64 and sizes.tolist() == [2.0, 1.0, 0.0]
    assert fc.class_sizes(["zz"], ["a", "b"]).tolist() == [0.0, 0.0]


def test_class_sizes_weigh_a_persons_documents_to_one() -> None:
    sizes = fc.class_sizes(["a", "b", "a", "zz"], ["a", "b"], groups=["p", "p", "q", "r"])
    np.testing.assert_allclose(sizes, [1.5, 0.5])
    with pytest.raises(ParameterError, match=r"^Give one person per document\.$"):
        fc.class_sizes(["a", "b"], ["a", "b"], groups=["p"])


def test_noise_scales_split_epsilon_between_curve_and_classes() -> None:
    assert fc.noise_scales(0.2, 3, 0.5) == pytest.approx((30.0, 10.0))
    assert fc.noise_scales(2.0, 4, 0.25) == pytest.approx((8.0, 1.0 / 1.5))


def test_release_charges_its_event_and_returns_the_public_record() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    counts = np.array([0, 1, 3, 5, 5, 2])
    stats = fc.release_forecast_statistics(counts, ["a", "b", "a", "zz"], classes=["a", "b", "c"], epsilon=0.5,
                                           terms_per_doc=2, context=ReleaseContext(noise=noise, ledger=ledger),
                                           public_vocabulary="glove",
                                           thresholds=[1, 3, 6], curve_share=0.25)
    b_curve, b_class = 2 / (0.25 * 0.5), 1 / (0.75 * 0.5)
    (event,) = ledger.events
    d = event.to_dict()
    assert (d["mechanism"], d["step"], d["epsilon"], d["sensitivity"], d["noise_scale"], d["neighbouring"]) == (
        fc.MECHANISM, fc.STEP, 0.5, 1.0, 2.0, ADD_REMOVE_ONE_DOCUMENT)
    assert d["released"] == ("Laplace-noised count curve of V's term counts at 3 public thresholds (sensitivity S = 2, "
                             "share 0.25 of ε) and per-class document counts (sensitivity 1), as one vector of L1 "
                             "sensitivity 1")
    assert d["params"] == pytest.approx({"thresholds": 3, "terms_per_doc": 2, "curve_share": 0.25,
                                         "curve_noise_scale": b_curve, "class_noise_scale": b_class, "classes": 3,
                                         "public_vocabulary_size": 6})
    assert [c[0].tolist() for c in noise.calls] == [[5.0, 3.0, 0.0], [2.0, 1.0, 0.0]]
    assert [c[1] for c in noise.calls] == pytest.approx([b_curve, b_class])
    assert (stats.thresholds, stats.classes, stats.public_vocabulary, stats.public_vocabulary_size) == (
        (1, 3, 6), ("a", "b", "c"), "glove", 6)
    assert (stats.terms_per_doc, stats.epsilon, stats.curve_share, stats.neighbouring) == (
        2, 0.5, 0.25, ADD_REMOVE_ONE_DOCUMENT)
    assert (stats.curve_noise_scale, stats.class_noise_scale) == pytest.approx((b_curve, b_class))
    assert stats.curve.tolist() == [5.0, 3.0, 0.0] and stats.class_counts.tolist() == [2.0, 1.0, 0.0]


def test_release_defaults_and_the_person_unit() -> None:
    ledger, noise = PrivacyLedger(), PassThroughNoise()
    stats = fc.release_forecast_statistics(np.array([2, 1]), ["a", "a", "a"], classes=["a"], epsilon=1.0,
                                           terms_per_doc=1, context=ReleaseContext(noise=noise, ledger=ledger),
                                           thresholds=[1, 2],
                                           groups=["p", "p", "q"], neighbouring=PERSON)
    assert stats.public_vocabulary == "" and stats.classes == ("a",)  # one declared class is enough
    assert stats.neighbouring == PERSON and ledger.events[0].neighbouring == PERSON
    assert noise.calls[1][0].tolist() == [2.0]  # persons p (2 documents) and q (1 document), one each


@pytest.mark.parametrize("kwargs,message", [
    (dict(epsilon=0.0), r"^ε_forecast must be a finite number > 0"),
    (dict(terms_per_doc=0), r"^S \(terms per document\) must be ≥ 1, got 0\.$"),
    (dict(curve_share=0.0), r"^The forecast's curve share must lie strictly between 0 and 1\.$"),
    (dict(curve_share=1.0), r"^The forecast's curve share must lie strictly between 0 and 1\.$"),
    (dict(classes=[]), r"^The forecast needs the declared class names\.$"),
])
def test_release_refusals_name_their_parameter(kwargs: dict[str, object], message: str) -> None:
    settings: dict[str, object] = dict(classes=["a"], epsilon=1.0, terms_per_doc=2, curve_share=0.5)
    settings.update(kwargs)
    ledger = PrivacyLedger()
    with pytest.raises(ParameterError, match=message):
        fc.release_forecast_statistics(np.array([1]), ["a"],
                                       context=ReleaseContext(noise=PassThroughNoise(), ledger=ledger),
                                       thresholds=[1], **settings)  # type: ignore[arg-type]
    assert len(ledger) == 0  # refused before anything is charged


def test_opendp_release_keeps_integer_statistics_whole() -> None:
    """The curve and the document-unit class sizes are counts: OpenDP's discrete Laplace (integer_valued) keeps
    them whole; person-unit sizes (Σ 1/k) are fractional and take the float Laplace."""
    docs = fc.release_forecast_statistics(np.arange(40), ["a", "b"] * 5, classes=["a", "b"], epsilon=1.0,
                                          terms_per_doc=2,
                                          context=ReleaseContext(noise=NoiseSource(), ledger=PrivacyLedger()),
                                          thresholds=range(1, 30))
    assert all(float(v).is_integer() for v in docs.curve) and docs.curve.dtype == np.float64
    assert all(float(v).is_integer() for v in docs.class_counts) and docs.class_counts.dtype == np.float64
    persons = fc.release_forecast_statistics(np.arange(4), ["a", "b", "a"], classes=["a", "b"], epsilon=1.0,
                                             terms_per_doc=1,
                                             context=ReleaseContext(noise=NoiseSource(), ledger=PrivacyLedger()),
                                             thresholds=[1, 2], groups=["p", "p", "q"], neighbouring=PERSON)
    assert persons.class_counts.shape == (2,) and np.isfinite(persons.class_counts).all()
    assert all(float(v).is_integer() for v in persons.curve)


def test_the_exact_preview_reads_the_corpus_in_chunks_and_says_what_it_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31 §4: the exact preview's keyphrase histograms are read a chunk at a time (memory: one chunk), with
    the same result as one pass (float sums within 1e-9); both forecasts say what they read. The DP forecast's
    statement names no private count (it is shown as a DP output)."""
    rng = np.random.default_rng(2)
    texts = [" ".join(rng.choice(list(TERMS) + ["word"] * 4, size=int(rng.integers(2, 9)))) for _ in range(60)]
    corpus = _corpus(texts, ["a" if i % 3 else "b" for i in range(60)])
    cfg = SamplingConfig(eps_voc=5.0, eps_kde=5.0, vocab_size=6, terms_per_doc=S, length=3)
    monkeypatch.delenv("DPKPS_CHUNK_ROWS", raising=False)
    whole = forecast_preview(corpus, VOCAB, cfg, exact=True, reps=1)
    monkeypatch.setenv("DPKPS_CHUNK_ROWS", "7")
    chunked = forecast_preview(corpus, VOCAB, cfg, exact=True, reps=1)
    assert chunked.kde.keys() == whole.kde.keys() and chunked.class_sizes == whole.class_sizes
    for c in whole.kde:
        for key, value in whole.kde[c].items():
            assert chunked.kde[c][key] == pytest.approx(value, rel=1e-9, abs=1e-12), (c, key)
    assert chunked.verdict == whole.verdict and chunked.count_curve == whole.count_curve
    assert "every training document (60), read 7 at a time" in chunked.computed_over
    assert "every training document (60), read 20,000 at a time" in whole.computed_over
    dp = forecast_preview(corpus, VOCAB, cfg, context=ReleaseContext(noise=NoiseSource(3), ledger=PrivacyLedger()),
                          reps=1)
    assert dp.computed_over.startswith("post-processing of the ε_forecast release") and "60" not in dp.computed_over
