"""What ε means as risk, in numbers a reader can check (pure functions).

Pure ε-DP bounds the odds of any output between neighbouring corpora by e^ε. For an attacker who believes with
prior probability p that a given document (or person) was in the corpus, Bayes' rule then caps the posterior at
e^ε·p / (e^ε·p + 1 − p), whatever the attacker knows and whatever output they see.
"""

from __future__ import annotations

import math

import numpy as np

from dpkps_core.dp.validation import check_epsilon
from dpkps_core.errors import ParameterError


def posterior_bound(epsilon: float, prior: float) -> float:
    """Largest posterior belief that one document was in the corpus, from ``prior``, after any ε-DP output."""
    eps = check_epsilon(epsilon, "ε")
    if not 0.0 <= float(prior) <= 1.0:
        raise ParameterError(f"A prior belief is a probability between 0 and 1, got {prior!r}.")
    p = float(prior)
    if p in (0.0, 1.0):
        return p
    if eps > 700:  # e^ε overflows; the bound is 1 to machine precision
        return 1.0
    odds = math.exp(eps) * p
    return odds / (odds + 1.0 - p)


def risk_sentences(epsilon: float, priors: tuple[float, ...] = (0.01, 0.5)) -> list[str]:
    """One plain sentence per prior: how far an attacker's belief can rise at this ε."""
    out = []
    for p in priors:
        q = posterior_bound(epsilon, p)
        start = f"an attacker {p:.0%} sure beforehand that a given document was in the corpus"
        out.append(f"{start} can become more than 99.9 % sure afterwards: little protection against this inference"
                   if q >= 0.9995 else f"{start} can be at most {format_probability(q)} sure afterwards")
    return out


def format_probability(q: float) -> str:
    """A probability as a percentage that never rounds a near-certainty up to 100 %."""
    if q >= 0.9995:
        return "more than 99.9 %"
    if q < 0.1 or q >= 0.99:
        return f"{100 * q:.1f} %"
    return f"{100 * q:.0f} %"


def epsilon_explainer(*, eps_voc: float, eps_kde: float, terms_per_doc: int, public_vocabulary_size: int,
                      density_kind: str, features: int | None = None) -> dict[str, float]:
    """Plain numbers for the ε explainer: odds bounds e^ε, Laplace scales and typical noise (public formulas)."""
    from dpkps_core.dp.vocabulary import noise_floor

    voc_scale = terms_per_doc / eps_voc
    out = {
        "odds_total": float(np.exp(eps_voc + eps_kde)),
        "odds_voc": float(np.exp(eps_voc)),
        "odds_kde": float(np.exp(eps_kde)),
        "voc_scale": voc_scale,
        "voc_mean_abs": voc_scale,                    # E|Laplace(b)| = b
        "voc_sd": float(np.sqrt(2) * voc_scale),
        "voc_floor": noise_floor(epsilon=eps_voc, terms_per_doc=terms_per_doc,
                                 vocabulary_size=max(public_vocabulary_size, 2)),
    }
    if density_kind == "histogram":
        out["kde_scale"] = 1.0 / eps_kde
        out["kde_sd"] = float(np.sqrt(2) / eps_kde)
    else:
        i = features or 2000
        out["kde_scale"] = float(np.sqrt(2) * i / eps_kde)
        out["kde_sd"] = float(2 * i / eps_kde)
        out["kde_features"] = float(i)
    return out
