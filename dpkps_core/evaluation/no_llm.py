"""The no-LLM check ([DP-KPS] Table 5) — ONE implementation — and the ONE real keyphrase baseline; vocabulary recall and noise share of Ṽ.

Nothing here logs or prints document text."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.method import pipeline
from dpkps_core.method.config import LIMITS
from dpkps_core.dp.validation import check_positive_int
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.errors import ParameterError
from dpkps_core.method.matching import TermMatcher
from dpkps_core.method.vocabulary import PublicVocabulary
from dpkps_core.evaluation.metrics import Scores, classification_scores



KEYPHRASE_SEPARATOR = "\x1f"  # joins keyphrases so multi-word terms stay one token


# ------------------------------------------------------------------------------ no-LLM (keyphrases)

def keyphrase_analyzer(document: str) -> list[str]:
    """Analyzer for TF-IDF over keyphrases: each keyphrase (multi-word terms whole) is one token; features are
    keyphrase unigrams and bigrams. ``document`` is keyphrases joined by :data:`KEYPHRASE_SEPARATOR`."""
    terms = [t for t in document.split(KEYPHRASE_SEPARATOR) if t]
    return terms + [a + KEYPHRASE_SEPARATOR + b for a, b in zip(terms, terms[1:])]


def join_keyphrases(keyphrases: Sequence[str]) -> str:
    return KEYPHRASE_SEPARATOR.join(keyphrases)


def keyphrase_sequences(texts: Sequence[str], private_vocabulary: PrivateVocabulary, *, length: int) -> list[list[str]]:
    """Each document turned into its (non-private, local) keyphrase sequence: its matches of Ṽ in text order,
    repeats kept, first ``length`` ([DP-KPS] Table 5)."""
    length = check_positive_int(length, "L (sequence length)")
    idx = pipeline.extract_keyphrases(texts, private_vocabulary, max_per_doc=length)
    terms = private_vocabulary.terms
    return [[terms[i] for i in row] for row in idx]


def keyphrase_classifier_scores(
    train_sequences: Sequence[Sequence[str]], train_labels: Sequence[str],
    test_sequences: Sequence[Sequence[str]], test_labels: Sequence[str], *, C: float = 1.0,
) -> Scores:
    """TF-IDF (keyphrase uni+bigrams) + logistic regression, trained on sequences, scored on test sequences.

    Test documents without any keyphrase stay in the test set (the classifier then predicts from its intercept).
    Deterministic (no seed)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    if len(set(train_labels)) < 2:
        raise ParameterError("The no-LLM check needs keyphrase sequences of at least two classes.")
    vec = TfidfVectorizer(analyzer=keyphrase_analyzer, sublinear_tf=True)
    try:
        x_train = vec.fit_transform([join_keyphrases(s) for s in train_sequences])
    except ValueError:
        raise ParameterError("The keyphrase sequences are all empty; nothing to train the no-LLM check on.") from None
    x_test = vec.transform([join_keyphrases(s) for s in test_sequences])
    model = LogisticRegression(max_iter=2000, C=C)
    model.fit(x_train, list(train_labels))
    return classification_scores(test_labels, model.predict(x_test), classes=sorted(set(map(str, test_labels))))


def no_llm_check(
    sequences: Sequence[Any], test_texts: Sequence[str], test_labels: Sequence[str], *,
    private_vocabulary: PrivateVocabulary, length: int, test_sequences: Sequence[Sequence[str]] | None = None,
) -> Scores:
    """THE no-LLM check ([DP-KPS] Table 5; docs/DESIGN.md §5) — one implementation for the CLI, the app and the sweep.

    A classifier trained on the DP keyphrase ``sequences`` (``KeyphraseSequence`` objects or their dicts) and
    scored on the held-out documents turned into their own keyphrase sequences over Ṽ (first ``length``
    matches; pass ``test_sequences`` when already computed). Local and PRIVATE (it reads real test documents)."""
    syn = [s if isinstance(s, Mapping) else s.to_dict() for s in sequences]
    test_seqs = (list(test_sequences) if test_sequences is not None
                 else keyphrase_sequences(test_texts, private_vocabulary, length=length))
    return keyphrase_classifier_scores([list(s.get("keyphrases", [])) for s in syn], [str(s.get("label")) for s in syn],
                                       test_seqs, list(test_labels))


def real_keyphrase_baseline(
    train_texts: Sequence[str], train_labels: Sequence[str], test_texts: Sequence[str], test_labels: Sequence[str], *,
    vocabulary: PublicVocabulary, counts: np.ndarray, vocab_size: int, length: int,
) -> Scores:
    """THE real keyphrase baseline — one definition for the app, the CLI, the sweep and every page (docs/ARCHITECTURE.md).

    The no-LLM check's classifier trained on the REAL training documents' keyphrase sequences and scored on the
    held-out documents' sequences, both over the noise-free vocabulary: the true top-``vocab_size`` terms of V by
    training count (count > 0), first ``length`` matches. It does not depend on ε or on any noisy Ṽ, so it is the
    same number wherever it is shown: the upper bound a DP run's no-LLM accuracy is read against (local, PRIVATE)."""
    counts = np.asarray(counts)
    order = np.argsort(-counts, kind="stable")[:check_positive_int(vocab_size, "N (private vocabulary size)")]
    terms = [vocabulary.terms[i] for i in order if counts[i] > 0]
    if not terms:
        raise ParameterError("No term of the public vocabulary occurs in the training documents, so there is no "
                             "real keyphrase baseline; choose a vocabulary that fits the corpus (the app's “Vocabulary & budget” page, or --vocabulary).")
    matcher = TermMatcher(terms)
    length = check_positive_int(length, "L (sequence length)")
    limit = LIMITS["max_chars_per_doc"]
    train = [[terms[i] for i in row] for row in matcher.occurrences(train_texts, length, max_chars=limit)]
    test = [[terms[i] for i in row] for row in matcher.occurrences(test_texts, length, max_chars=limit)]
    return keyphrase_classifier_scores(train, train_labels, test, test_labels)


def vocabulary_recall(counts: np.ndarray, vocabulary_terms: Sequence[str], private_terms: Sequence[str], *, top: int) -> float:
    """Share of the NON-private top-``top`` terms by true count (count > 0) that are in Ṽ (local, private)."""
    counts = np.asarray(counts)
    nonzero = int((counts > 0).sum())
    k = min(int(top), nonzero)
    if k == 0:
        return 0.0
    best = np.argsort(-counts, kind="stable")[:k]
    chosen = set(private_terms)
    return float(sum(1 for i in best if vocabulary_terms[i] in chosen) / k)


def noise_term_share(counts: np.ndarray, vocabulary: PublicVocabulary, private_terms: Sequence[str]) -> float:
    """Share of Ṽ whose true (first-S-distinct) count is 0: terms selected by noise alone (local, private)."""
    if not private_terms:
        return 0.0
    index = vocabulary.index
    return float(np.mean([counts[index[t]] == 0 for t in private_terms]))
