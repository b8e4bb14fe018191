"""Typed privacy events (dpkps_core.dp.events, dpkps_core.dp.baseline_events; docs/DESIGN.md §2, §2.0).

Each family: bad values refused with ParameterError; ``to_dict`` equal, key order and JSON text included, to the
literal dict the mechanism wrote before events were typed (so ledgers, reports and bundles keep their bytes);
``from_dict(to_dict(e)) == e`` with the family's type; literal JSON of older versions (missing, extra or changed
params, unknown mechanisms) read as the generic event without an error; the in-memory and the persistent ledger
give typed events back.
"""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from typing import Any

import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.baselines import augpe, prediction_config
from dpkps_core.dp import count, forecast, histogram, kde, vocabulary
from dpkps_core.dp.baseline_events import AugPEVoteEvent, PrivatePredictionEvent, PrivatePredictionReservationEvent
from dpkps_core.dp.events import (
    EVENT_FAMILIES,
    EVENT_KEYS,
    ForecastStatisticsEvent,
    LaplaceCountEvent,
    PrivacyEvent,
    RFFKDEEvent,
    SmoothedHistogramEvent,
    TypedPrivacyEvent,
    VocabularyHistogramEvent,
)
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.errors import ParameterError

T = "2026-01-02T03:04:05+00:00"
PERSON = "add/remove one person"
SQRT2 = math.sqrt(2.0)


def _common(mechanism: str, step: str, epsilon: float, sensitivity: float, noise_scale: float, released: str,
            **extra: Any) -> dict[str, Any]:
    return dict(mechanism=mechanism, step=step, epsilon=epsilon, sensitivity=sensitivity, noise_scale=noise_scale,
                released=released, timestamp=T, **extra)


# Each case: (the typed event, the literal dict of the layout its mechanism's site wrote when params was a
# free-form dict — the same keys, order, values and JSON text; checked against those sites' output).
CASES: dict[str, tuple[TypedPrivacyEvent, dict[str, Any]]] = {
    "count": (
        LaplaceCountEvent(**_common("laplace_document_count", "size", 0.5, 1.0, 2.0,
                                    "Laplace-noised number of documents in the training part")),
        {"mechanism": "laplace_document_count", "step": "size", "epsilon": 0.5, "sensitivity": 1.0,
         "noise_scale": 2.0, "released": "Laplace-noised number of documents in the training part",
         "neighbouring": "add/remove one document", "delta": 0.0,
         "params": {"noise": "Laplace(1/ε), integer-valued", "charged": "before the noise was drawn"}, "timestamp": T},
    ),
    "vocabulary": (
        VocabularyHistogramEvent(**_common("laplace_vocabulary_histogram", "vocabulary", 2.0, 4.0, 2.0, "top N"),
                                 vocabulary="glove", vocabulary_size=40000, terms_per_doc=4, requested_size=100,
                                 selection_rule="noise-floor", laplace_sampler="numpy"),
        {"mechanism": "laplace_vocabulary_histogram", "step": "vocabulary", "epsilon": 2.0, "sensitivity": 4.0,
         "noise_scale": 2.0, "released": "top N", "neighbouring": "add/remove one document", "delta": 0.0,
         "params": {"vocabulary": "glove", "vocabulary_size": 40000, "terms_per_doc": 4, "requested_size": 100,
                    "selection_rule": "noise-floor", "laplace_sampler": "numpy"}, "timestamp": T},
    ),
    "smoothed_histogram": (
        SmoothedHistogramEvent(**_common("laplace_smoothed_keyphrase_histogram", "kde", 1.5, 1.0, 1 / 1.5, "hist",
                                         neighbouring=PERSON),
                               classes=2, private_vocabulary_size=3, bandwidth=0.3, max_keyphrases_per_doc=None),
        {"mechanism": "laplace_smoothed_keyphrase_histogram", "step": "kde", "epsilon": 1.5, "sensitivity": 1.0,
         "noise_scale": 0.6666666666666666, "released": "hist", "neighbouring": PERSON, "delta": 0.0,
         "params": {"classes": 2, "private_vocabulary_size": 3, "bandwidth": 0.3, "max_keyphrases_per_doc": None},
         "timestamp": T},
    ),
    "rff_kde": (
        RFFKDEEvent(**_common("laplace_rff_dp_kde", "kde", 2.0, SQRT2 * 4 * 3, SQRT2 * 4 / (2.0 / 3), "kde"),
                    kind="iterative-log", features=4, bandwidth=0.7, member_blocks=(1, 2, 4), length=3,
                    max_keyphrases_per_doc=3, classes=2),
        {"mechanism": "laplace_rff_dp_kde", "step": "kde", "epsilon": 2.0, "sensitivity": 16.970562748477143,
         "noise_scale": 8.485281374238571, "released": "kde", "neighbouring": "add/remove one document",
         "delta": 0.0,
         "params": {"kind": "iterative-log", "features": 4, "bandwidth": 0.7, "members": 3, "member_blocks": [1, 2, 4],
                    "length": 3, "max_keyphrases_per_doc": 3, "classes": 2}, "timestamp": T},
    ),
    "forecast": (
        ForecastStatisticsEvent(**_common("laplace_forecast_statistics", "forecast", 0.7, 1.0, 1 / 0.7, "curve"),
                                thresholds=3, terms_per_doc=2, curve_share=0.25, curve_noise_scale=2 / (0.25 * 0.7),
                                class_noise_scale=1.0 / (0.75 * 0.7), classes=2, public_vocabulary_size=5),
        {"mechanism": "laplace_forecast_statistics", "step": "forecast", "epsilon": 0.7, "sensitivity": 1.0,
         "noise_scale": 1.4285714285714286, "released": "curve", "neighbouring": "add/remove one document",
         "delta": 0.0,
         "params": {"thresholds": 3, "terms_per_doc": 2, "curve_share": 0.25, "curve_noise_scale": 11.428571428571429,
                    "class_noise_scale": 1.904761904761905, "classes": 2, "public_vocabulary_size": 5},
         "timestamp": T},
    ),
}


def _prediction_case() -> tuple[TypedPrivacyEvent, dict[str, Any]]:
    cfg = prediction_config.PrivatePredictionConfig(svt_threshold=float("inf"), batch_size=64, private_tokens=20,
                                                    clip=3, svt_noise=0.5, public_top_k=None)
    rho, eps = 0.0445556640625, 1.3829745827787814  # Theorem 1's ρ and its tight conversion at δ = 1e-6
    assert (cfg.rho(), cfg.epsilon(1e-6)) == (rho, eps)
    event = PrivatePredictionEvent(**_common("private_prediction_clipped_logits_svt", "private_prediction", eps,
                                             3 / 64, 2.0, "texts", delta=1e-6),
                                   rho=rho, conversion="tight", batch_size=64, private_tokens=20, clip=3,
                                   temperature=2.0, svt_threshold=float("inf"), svt_noise=0.5, num_buckets=4,
                                   group_by_label=True, public_top_k=None)
    literal = {"mechanism": "private_prediction_clipped_logits_svt", "step": "private_prediction",
               "epsilon": 1.3829745827787814,
               "sensitivity": 0.046875, "noise_scale": 2.0, "released": "texts",
               "neighbouring": "add/remove one document", "delta": 1e-06,
               "params": {"rho_zcdp": 0.0445556640625, "conversion": "tight", "batch_size_s": 64,
                          "private_tokens_r": 20, "clip_c": 3, "temperature_tau": 2.0, "svt": True, "svt_threshold_theta": "inf",
                          "svt_noise_sigma": 0.5, "num_buckets": 4, "group_by_label": True, "public_top_k": None,
                          "composition": "parallel over disjoint hash batches ([PrivPred] Lemma 2)",
                          "sensitivity_note": "L∞ sensitivity c/s of the averaged clipped logits (Lemma 3); SVT "
                                              "query 1/s",
                          "charged": "before the first private prompt reached the model"}, "timestamp": T}
    return event, literal


CASES["private_prediction"] = _prediction_case()
CASES["reservation"] = (
    PrivatePredictionReservationEvent(**_common("private_prediction_clipped_logits_svt", "private_prediction", 3.0,
                                                0.2, 2.0, "texts", delta=1e-6),
                                      conversion="tight", batch_size=64, private_tokens=20, temperature=2.0,
                                      svt_threshold=None, svt_noise=None, group_by_label=False, public_top_k=50),
    {"mechanism": "private_prediction_clipped_logits_svt", "step": "private_prediction", "epsilon": 3.0,
     "sensitivity": 0.2, "noise_scale": 2.0, "released": "texts", "neighbouring": "add/remove one document",
     "delta": 1e-06,
     "params": {"reserved": True, "conversion": "tight", "batch_size_s": 64, "temperature_tau": 2.0, "svt": False,
                "svt_threshold_theta": None, "svt_noise_sigma": None, "group_by_label": False, "public_top_k": 50,
                "composition": "parallel over disjoint hash batches ([PrivPred] Lemma 2)",
                "calibration": "c calibrated to ε ≤ the reserved ε once the hash buckets are known (the run's "
                               "privacy report holds the calibrated c, r and ρ)",
                "sensitivity_note": "upper bound c/s with r = 20; a larger r after the DP count lowers c",
                "charged": "before any noise was drawn and before the first private prompt reached the model"},
     "timestamp": T},
)
CASES["augpe"] = (
    AugPEVoteEvent(**_common("augpe_gaussian_nn_vote_histogram", "augpe", 1.25, 1.0, 4.0, "votes", delta=1e-6),
                   epochs=3, population=5, gdp_mu=math.sqrt(3) / 4.0, rho=3 / (2 * 4.0 ** 2), vote_threshold=2),
    {"mechanism": "augpe_gaussian_nn_vote_histogram", "step": "augpe", "epsilon": 1.25, "sensitivity": 1.0,
     "noise_scale": 4.0, "released": "votes", "neighbouring": "add/remove one document", "delta": 1e-06,
     "params": {"epochs_T": 3, "population_K": 5, "sensitivity_norm": "L2 (one vote per document per epoch)",
                "gdp_mu": 0.4330127018922193, "rho_zcdp": 0.09375,
                "accounting": "exact Gaussian-DP composition of T Gaussian mechanisms (μ = √T/σ), Balle–Wang δ(ε)",
                "composition": "parallel across classes (disjoint documents)", "vote_threshold_H": 2,
                "budget_split": "Ṽ (ε_voc, pure DP) is a separate event; total = ε_voc + ε_aug with this δ",
                "charged": "all T epochs, before the first prompt was sent"}, "timestamp": T},
)


# ------------------------------------------------------------------------------------- layout and round trip

@pytest.mark.parametrize("name", sorted(CASES))
def test_to_dict_is_the_literal_layout_byte_for_byte(name: str) -> None:
    event, literal = CASES[name]
    out = event.to_dict()
    assert out == literal and tuple(out) == EVENT_KEYS and list(out["params"]) == list(literal["params"])
    assert type(out["params"]) is dict  # noqa: E721 - a plain dict, as before
    assert json.dumps(out, ensure_ascii=False) == json.dumps(literal, ensure_ascii=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_round_trip_gives_the_family_back(name: str) -> None:
    event, literal = CASES[name]
    for data in (event.to_dict(), json.loads(json.dumps(literal))):  # in memory and through a JSON file
        again = PrivacyEvent.from_dict(data)
        assert type(again) is type(event) and again == event and again.to_dict() == literal
    assert type(type(event).from_dict(event.to_dict())) is type(event)  # whichever class it is called on


@pytest.mark.parametrize("name", sorted(CASES))
def test_params_is_a_read_only_view_of_the_typed_fields(name: str) -> None:
    event, literal = CASES[name]
    assert dict(event.params) == literal["params"]
    with pytest.raises(TypeError):
        event.params["x"] = 1  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.epsilon = 9.0  # type: ignore[misc]
    fields = {f.name: getattr(event, f.name) for f in dataclasses.fields(event) if f.init}
    assert type(event)(**fields) == event
    with pytest.raises(TypeError):  # a typed family takes typed fields, never a free-form params
        type(event)(**fields, params={"x": 1})


def test_typed_fields_are_read_as_their_types() -> None:
    kde_event = CASES["rff_kde"][0]
    assert isinstance(kde_event, RFFKDEEvent)
    assert kde_event.member_blocks == (1, 2, 4) and kde_event.members == 3
    assert kde_event.epsilon_per_member == pytest.approx(2.0 / 3)
    pp = PrivacyEvent.from_dict(json.loads(json.dumps(CASES["private_prediction"][1])))
    assert isinstance(pp, PrivatePredictionEvent) and pp.svt_threshold == math.inf and pp.svt
    reserved = PrivacyEvent.from_dict(CASES["reservation"][1])
    assert isinstance(reserved, PrivatePredictionReservationEvent) and reserved.private_tokens == 20
    assert not reserved.svt


# ----------------------------------------------------------------------------------------------- validation

def _with(name: str, **changes: Any) -> None:
    event, _ = CASES[name]
    dataclasses.replace(event, **changes)


BAD = [
    ("count", {"mechanism": "laplace_vocabulary_histogram"}),   # a family records its own mechanism only
    ("count", {"sensitivity": 2.0}),                            # a count moves by one
    ("count", {"noise_scale": 1.0}),                            # b ≠ Δ/ε: the recorded ε would be wrong
    ("count", {"noise_scale": -2.0}),
    ("vocabulary", {"sensitivity": 3.0}),                       # Δ = S
    ("vocabulary", {"terms_per_doc": 0}),
    ("vocabulary", {"terms_per_doc": 4.0}),                     # typed: no float for a whole number
    ("vocabulary", {"requested_size": 40001}),                  # N > |V|
    ("vocabulary", {"laplace_sampler": "gpu"}),
    ("vocabulary", {"vocabulary": ""}),
    ("smoothed_histogram", {"bandwidth": -0.1}),
    ("smoothed_histogram", {"max_keyphrases_per_doc": 0}),
    ("smoothed_histogram", {"noise_scale": 1.0}),
    ("rff_kde", {"features": 5}),                               # Δ = √2·I·J no longer holds
    ("rff_kde", {"member_blocks": ()}),
    ("rff_kde", {"member_blocks": (1, 2)}),                     # J changes Δ
    ("rff_kde", {"bandwidth": 0.0}),
    ("rff_kde", {"kind": ""}),
    ("forecast", {"curve_share": 1.0}),
    ("forecast", {"curve_share": 0.0}),
    ("forecast", {"classes": 0}),
    ("forecast", {"class_noise_scale": float("nan")}),
    ("private_prediction", {"epsilon": 2.0}),                   # ε is the conversion of ρ at δ
    ("private_prediction", {"rho": 0.5}),                       # ρ is Theorem 1's
    ("private_prediction", {"sensitivity": 1.0}),               # Δ = c/s
    ("private_prediction", {"noise_scale": 1.0}),               # the scale is τ
    ("private_prediction", {"conversion": "loose"}),
    ("private_prediction", {"svt_noise": None}),                # the SVT runs, so it has a σ
    ("private_prediction", {"delta": 0.0}),                     # (ε, δ) needs δ > 0
    ("reservation", {"svt_noise": 0.5}),                        # no SVT, no σ
    ("reservation", {"group_by_label": 1}),
    ("reservation", {"public_top_k": 0}),
    ("augpe", {"gdp_mu": 1.0}),                                 # μ = √T/σ
    ("augpe", {"rho": 1.0}),                                    # ρ = T/(2σ²)
    ("augpe", {"sensitivity": 2.0}),
    ("augpe", {"epochs": 0}),
    ("augpe", {"vote_threshold": -1.0}),
    ("augpe", {"delta": 0.0}),
]


@pytest.mark.parametrize(("name", "changes"), BAD, ids=[f"{n}-{'-'.join(c)}" for n, c in BAD])
def test_bad_values_are_refused(name: str, changes: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        _with(name, **changes)


def test_the_common_refusals_still_hold_for_every_family() -> None:
    for name in CASES:
        with pytest.raises(ParameterError, match=r"^A privacy event's ε must be a finite number > 0"):
            _with(name, epsilon=0.0)


# -------------------------------------------------------------------------------------- older files (literal)

OLD_EVENTS = [
    # a vocabulary event written before the sampler was recorded: no "laplace_sampler"
    {"mechanism": "laplace_vocabulary_histogram", "step": "vocabulary", "epsilon": 2.0, "sensitivity": 10.0,
     "noise_scale": 5.0, "released": "the top N = 1,000 terms of a Laplace-noised histogram",
     "neighbouring": "add/remove one document", "delta": 0.0,
     "params": {"vocabulary": "glove", "vocabulary_size": 400000, "terms_per_doc": 10, "requested_size": 1000,
                "selection_rule": "top-n"}, "timestamp": "2025-03-01T10:00:00+00:00"},
    # an RFF DP-KDE event with a key no longer written and without the ensemble's blocks
    {"mechanism": "laplace_rff_dp_kde", "step": "kde", "epsilon": 5.0, "sensitivity": 2828.4271247461903,
     "noise_scale": 565.685424949238, "released": "sums", "neighbouring": "add/remove one document", "delta": 0.0,
     "params": {"kind": "independent", "features": 2000, "bandwidth": 1.0, "members": 1, "length": 10,
                "private_vocabulary_size": 1000, "classes": 5}, "timestamp": "2025-03-01T10:00:01+00:00"},
    # a count whose params say something this version does not (another noise)
    {"mechanism": "laplace_document_count", "step": "size", "epsilon": 0.1, "sensitivity": 1.0, "noise_scale": 10.0,
     "released": "count", "neighbouring": "add/remove one document", "delta": 0.0,
     "params": {"noise": "Laplace(1/ε)"}, "timestamp": "2025-03-01T10:00:02+00:00"},
    # a mechanism this version has no family for, and a top-level key it does not know
    {"mechanism": "laplace_class_counts", "step": "class_counts", "epsilon": 0.5, "sensitivity": 1.0,
     "noise_scale": 2.0, "released": "per-class counts", "neighbouring": "add/remove one document", "delta": 0.0,
     "params": {"classes": 4}, "timestamp": "2025-03-01T10:00:03+00:00", "version": 1},
    # the same keys as the family writes, but values that break its accounting (μ ≠ √T/σ)
    {"mechanism": "augpe_gaussian_nn_vote_histogram", "step": "augpe", "epsilon": 1.25, "sensitivity": 1.0,
     "noise_scale": 4.0, "released": "votes", "neighbouring": "add/remove one document", "delta": 1e-06,
     "params": {"epochs_T": 3, "population_K": 5, "sensitivity_norm": "L2 (one vote per document per epoch)",
                "gdp_mu": 0.5, "rho_zcdp": 0.09375,
                "accounting": "exact Gaussian-DP composition of T Gaussian mechanisms (μ = √T/σ), Balle–Wang δ(ε)",
                "composition": "parallel across classes (disjoint documents)", "vote_threshold_H": 0.0,
                "budget_split": "Ṽ (ε_voc, pure DP) is a separate event; total = ε_voc + ε_aug with this δ",
                "charged": "all T epochs, before the first prompt was sent"}, "timestamp": "2025-03-01T10:00:04+00:00"},
    # no params at all, and no timestamp: the oldest layout
    {"mechanism": "laplace_document_count", "step": "size", "epsilon": 1.0, "sensitivity": 1.0, "noise_scale": 1.0,
     "released": "count"},
]


@pytest.mark.parametrize("data", OLD_EVENTS, ids=[f"old-{i}" for i in range(len(OLD_EVENTS))])
def test_older_json_reads_as_the_generic_event_with_its_params_kept(data: dict[str, Any]) -> None:
    event = PrivacyEvent.from_dict(json.loads(json.dumps(data)))
    assert type(event) is PrivacyEvent and not isinstance(event, TypedPrivacyEvent)
    assert dict(event.params) == data.get("params", {})
    expected = {"neighbouring": "add/remove one document", "delta": 0.0, "params": {}}
    expected |= {k: data[k] for k in EVENT_KEYS if k in data}
    out = event.to_dict()
    assert tuple(out) == EVENT_KEYS and {k: out[k] for k in expected} == expected  # every known key kept as read


def test_params_in_another_key_order_keep_their_order_through_the_generic_event() -> None:
    _, literal = CASES["vocabulary"]
    data = {**literal, "params": dict(reversed(list(literal["params"].items())))}
    event = PrivacyEvent.from_dict(data)
    assert type(event) is PrivacyEvent and event.to_dict() == data
    assert list(event.to_dict()["params"]) == list(data["params"])


def test_an_invalid_common_field_is_still_an_error() -> None:
    with pytest.raises(ParameterError):
        PrivacyEvent.from_dict({**CASES["count"][1], "epsilon": 0})


# ------------------------------------------------------------------------------------------ the sites and ledgers

@pytest.mark.parametrize(("module", "family"), [
    (count, LaplaceCountEvent), (vocabulary, VocabularyHistogramEvent), (histogram, SmoothedHistogramEvent),
    (kde, RFFKDEEvent), (forecast, ForecastStatisticsEvent), (augpe, AugPEVoteEvent),
    (prediction_config, PrivatePredictionEvent), (prediction_config, PrivatePredictionReservationEvent),
])
def test_every_site_mechanism_has_its_family_registered(module: Any, family: type[TypedPrivacyEvent]) -> None:
    assert family.MECHANISM == module.MECHANISM and family in EVENT_FAMILIES[module.MECHANISM]


def test_the_sites_build_their_family() -> None:
    assert type(count.count_event(epsilon=0.5)) is LaplaceCountEvent
    assert type(vocabulary.vocabulary_event(epsilon=1.0, terms_per_doc=2, size=3, vocabulary_name="v",
                                            vocabulary_size=10, selection_rule="top-n", sampler="opendp")) \
        is VocabularyHistogramEvent
    cfg = augpe.AugPEConfig(epochs=2, population=3)
    assert type(augpe.augpe_event(cfg, sigma=3.0, delta=1e-6)) is AugPEVoteEvent
    pcfg = prediction_config.PrivatePredictionConfig()
    assert type(prediction_config.prediction_event(pcfg, delta=1e-6, num_buckets=2, batches=2, documents=2)) \
        is PrivatePredictionEvent


def test_every_family_is_registered_whichever_module_a_reader_imports() -> None:
    """A reader that imports only dp.events still reads the baselines' events typed (the package registers them)."""
    code = ("import json, sys; from dpkps_core.dp.events import PrivacyEvent; "
            "print(type(PrivacyEvent.from_dict(json.loads(sys.stdin.read()))).__name__)")
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(CASES["augpe"][1]), capture_output=True,
                          text=True, check=True, timeout=120)
    assert done.stdout.strip() == "AugPEVoteEvent"


def test_ledger_round_trip_keeps_the_families() -> None:
    ledger = PrivacyLedger(cap=100.0)
    for event, _ in CASES.values():
        ledger.charge(event)
    generic = PrivacyLedger.from_dict({"epsilon_cap": None, "events": [OLD_EVENTS[3]]}).events[0]
    ledger.charge(generic)
    data = json.loads(json.dumps(ledger.to_dict()))
    again = PrivacyLedger.from_dict(data)
    assert [type(e) for e in again.events] == [type(e) for e in ledger.events]
    assert list(again.events) == list(ledger.events[:-1]) + [again.events[-1]]
    assert again.to_dict() == data and again.total_epsilon == pytest.approx(ledger.total_epsilon)


def test_the_persistent_ledger_reads_its_events_back_typed() -> None:
    units = [f"document\x1fdoc {i}\x1fx" for i in range(4)]
    led = ls.open_corpus_ledger(units, tool="test", run="r1", cap=50.0)
    typed = [CASES[name][0] for name in ("vocabulary", "rff_kde", "augpe")]
    for event in typed:
        led.charge_every_unit(event)
    led.charge_every_unit(PrivacyEvent.from_dict(OLD_EVENTS[3]))
    fresh = ls.open_corpus_ledger(units, tool="test", run="r2", cap=50.0)  # reads the store again
    read = [r.event for r in fresh.corpus_releases]
    assert [type(e) for e in read] == [VocabularyHistogramEvent, RFFKDEEvent, AugPEVoteEvent, PrivacyEvent]
    assert read[:3] == typed and read[3].to_dict() == PrivacyEvent.from_dict(OLD_EVENTS[3]).to_dict()
