"""The forecast's advice (issue 33 §6, from walk 2): it never suggests the vocabulary already chosen, and a large
ε_voc names the cheaper changes it lists before it ("try the changes above first"), or none when there are none."""

from __future__ import annotations

from dpkps_core.evaluation import forecast_outlook as fo


def _tips(**kw: object) -> list[str]:
    args: dict[str, object] = dict(eps_voc=1.0, suggested_eps=100.0, suggested_terms=None, suggested_n=100,
                                   v_size=400_000, vocab_size=1000)
    args.update(kw)
    return fo._vocabulary_tips(**args)  # type: ignore[arg-type]


def test_the_medical_vocabulary_is_not_suggested_when_it_is_the_one_in_use() -> None:
    glove = _tips(vocabulary="glove")
    assert any("the medical one for clinical text" in t for t in glove)
    medical = _tips(vocabulary="medical")
    assert not any("the medical one for clinical text" in t for t in medical)
    assert any("a smaller public vocabulary of your own (the medical one has 400,000 terms" in t for t in medical)


def test_a_large_epsilon_names_the_changes_it_comes_after() -> None:
    tips = _tips()
    assert tips[-1] == "ε_voc ≥ 100 (a weak guarantee: try the changes above first)"
    one = _tips(suggested_n=None, v_size=1_000)                  # no cheaper change to name
    assert one == ["ε_voc ≥ 100 (a weak guarantee)"]
    single = _tips(suggested_n=None, v_size=1_000, suggested_terms=5_000)
    assert single[-1] == "ε_voc ≥ 100 (a weak guarantee: try the change above first)"
    assert _tips(suggested_eps=8.0)[-1] == "ε_voc ≥ 8"


def test_the_verdict_passes_the_vocabulary_in_use_to_its_advice() -> None:
    vocab = fo.VocabularyOutlook(public_vocabulary_size=400_000, noise_floor=130.0, terms_above_floor=3, nth_count=0.0,
                                 expected_noise_share=0.97, expected_real_terms=30.0, min_real_terms=100,
                                 quality="poor", suggested_n=100, suggested_eps_voc=50.0)
    _, medical = fo.forecast_verdict(vocab, {}, eps_voc=1.0, eps_kde=5.0, vocab_size=1000, suggested_kde=None,
                                     vocabulary="medical")
    _, glove = fo.forecast_verdict(vocab, {}, eps_voc=1.0, eps_kde=5.0, vocab_size=1000, suggested_kde=None,
                                   vocabulary="glove")
    assert "the medical one for clinical text" in glove and "the medical one for clinical text" not in medical
    assert "try the changes above first" in medical
