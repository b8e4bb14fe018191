"""Best of several drafts, judged on DP outputs only (post-processing: no ε; docs/DESIGN.md §2.5, docs/PRIVACY.md).

With ``drafts = K > 1`` the runner asks the LLM for K drafts of each keyphrase sequence and keeps the one that
best fits its sequence. What judges a draft is built from the **released DP sequences** (``sequences.jsonl``) and
the draft itself, nothing else — never the private corpus, its split or its evaluation:

1. it passes the non-document screen (:func:`dpkps_core.llm.quality.screen`);
2. it is assigned to the sequence's class by a classifier trained ONLY on the DP sequences: the sequences'
   keyphrases (each a term of Ṽ, a DP release) as TF-IDF features, logistic regression on their class labels —
   the no-LLM check's model ([DP-KPS] Table 5; docs/DESIGN.md §5), applied to the terms a draft contains;
3. it uses the most distinct keyphrases of its sequence;
4. the classifier gives its class the highest probability;
5. ties go to the earlier draft (deterministic).

The class assignment comes before the keyphrase count: a draft that reads as another class teaches a downstream
classifier the wrong label, whatever terms it holds.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Sequence

import numpy as np

from dpkps_core.errors import LLMError, ParameterError
from dpkps_core.llm.backends import GenerationCancelled, TransientLLMError
from dpkps_core.llm.quality import NonDocumentReply, screen
from dpkps_core.method.matching import TermMatcher, canonical_term
from dpkps_core.method.sequences import KeyphraseSequence

#: Most characters of a draft matched against the sequences' terms (a draft is at most a few thousand tokens).
MAX_DRAFT_CHARS = 50_000


@dataclasses.dataclass(frozen=True)
class DraftScore:
    """How one draft fits its sequence (every figure from the draft and the DP sequences alone)."""

    draft: int
    problem: str | None          # why the screen refused the draft; None when it reads as a document
    keyphrases_used: int         # distinct keyphrases of its sequence found in the draft
    keyphrases: int              # distinct keyphrases of its sequence
    predicted: str | None        # class the DP-sequence classifier assigns (None: fewer than two classes)
    intended_probability: float  # that classifier's probability of the sequence's class

    def passes(self) -> bool:
        """The draft passed the non-document screen."""
        return self.problem is None

    def assigned(self, label: str) -> bool:
        """The classifier assigns the draft to ``label`` (True when there is no classifier)."""
        return self.predicted is None or self.predicted == label

    def key(self, label: str) -> tuple[bool, bool, int, float, int]:
        """Sort key, larger is better: screen, class, keyphrases used, class probability, earlier draft."""
        return (self.passes(), self.assigned(label), self.keyphrases_used, round(self.intended_probability, 12),
                -self.draft)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready figures for the audit log."""
        return {"draft": self.draft, "problem": self.problem, "keyphrases_used": self.keyphrases_used,
                "keyphrases": self.keyphrases, "predicted_class": self.predicted,
                "class_probability": round(float(self.intended_probability), 4)}


class SequenceClassifier:
    """TF-IDF over the terms of the DP keyphrase sequences + logistic regression on their labels (post-processing
    of the DP release only). A text is featurised by its matches of those terms (greedy longest match, as the
    pipeline matches Ṽ), so a sequence and a draft live in one feature space."""

    def __init__(self, sequences: Sequence[KeyphraseSequence]) -> None:
        if not sequences:
            raise ParameterError("Draft selection needs the run's keyphrase sequences.")
        self.terms: tuple[str, ...] = tuple(dict.fromkeys(
            canonical_term(k) for s in sequences for k in s.keyphrases if canonical_term(k)))
        self._term_index = {t: i for i, t in enumerate(self.terms)}
        self._matcher = TermMatcher(self.terms) if self.terms else None
        labels = [s.label for s in sequences]
        self.classes: tuple[str, ...] = tuple(sorted(set(labels)))
        self._model: Any = None
        self._tfidf: Any = None
        if len(self.classes) >= 2 and self.terms:
            from sklearn.feature_extraction.text import TfidfTransformer
            from sklearn.linear_model import LogisticRegression

            rows = [[self._term_index[canonical_term(k)] for k in s.keyphrases if canonical_term(k)]
                    for s in sequences]
            self._tfidf = TfidfTransformer(sublinear_tf=True)
            x = self._tfidf.fit_transform(self._counts(rows))
            self._model = LogisticRegression(max_iter=2000).fit(x, labels)  # lbfgs: deterministic

    def _counts(self, rows: Sequence[Sequence[int]]) -> Any:
        """Sparse term-count matrix of rows of term indices (vectorised: one COO build)."""
        from scipy.sparse import csr_matrix

        lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
        cols = np.fromiter((i for r in rows for i in r), dtype=np.int64, count=int(lengths.sum()))
        row_ids = np.repeat(np.arange(len(rows)), lengths)
        return csr_matrix((np.ones(cols.size), (row_ids, cols)), shape=(len(rows), len(self.terms)))

    def indices(self, keyphrases: Sequence[str]) -> set[int]:
        """Indices (into :attr:`terms`) of ``keyphrases`` (those the classifier knows)."""
        return {self._term_index[t] for t in (canonical_term(k) for k in keyphrases) if t in self._term_index}

    def matches(self, text: str) -> list[int]:
        """Indices (into :attr:`terms`) of the sequence terms found in ``text``, in text order, repeats kept."""
        if self._matcher is None:
            return []
        return self._matcher.extract(text, max_chars=MAX_DRAFT_CHARS)

    def probabilities(self, matched: Sequence[Sequence[int]]) -> np.ndarray | None:
        """Class probabilities (rows × :attr:`classes`) of texts given as their matches; None without a model."""
        if self._model is None:
            return None
        proba = self._model.predict_proba(self._tfidf.transform(self._counts(matched)))
        order = [list(self._model.classes_).index(c) for c in self.classes]
        return proba[:, order]


@dataclasses.dataclass(frozen=True)
class DraftChoice:
    """The kept draft (cleaned by the screen) and every draft's figures, for the audit log."""

    text: str
    kept: int
    scores: tuple[DraftScore, ...]
    drafts: tuple[str | None, ...]  # the raw text of each draft (None when its call failed)

    def audit_record(self) -> dict[str, Any]:
        """What the audit log keeps of the choice: the figures of every draft and the text of the drafts that
        were not kept (the kept one is the document)."""
        return {"event": "drafts", "kept": self.kept, "drafts": [
            {**s.to_dict(), **({"text": self.drafts[s.draft]} if s.draft != self.kept else {})}
            for s in self.scores]}


class DraftSelector:
    """Chooses the best of K drafts of a sequence (module docstring), from the DP sequences only."""

    def __init__(self, sequences: Sequence[KeyphraseSequence]) -> None:
        self.classifier = SequenceClassifier(sequences)

    def score(self, seq: KeyphraseSequence, drafts: Sequence[str | BaseException]) -> list[tuple[str | None,
                                                                                                  DraftScore]]:
        """Each draft's cleaned text (None when refused or failed) and its :class:`DraftScore`."""
        clf = self.classifier
        wanted = clf.indices(seq.keyphrases)
        cleaned: list[str | None] = []
        problems: list[str | None] = []
        for d in drafts:
            if isinstance(d, BaseException) or not isinstance(d, str) or not d.strip():
                cleaned.append(None)
                problems.append(str(d) if isinstance(d, BaseException) else "The backend returned an empty reply.")
                continue
            try:
                cleaned.append(screen(d))
                problems.append(None)
            except TransientLLMError as exc:
                cleaned.append(None)
                problems.append(str(exc))
        matched = [clf.matches(t) if t is not None else [] for t in cleaned]
        proba = clf.probabilities(matched)
        col = clf.classes.index(seq.label) if proba is not None and seq.label in clf.classes else None
        out = []
        for j, (text, problem, m) in enumerate(zip(cleaned, problems, matched)):
            predicted = clf.classes[int(np.argmax(proba[j]))] if proba is not None else None
            p = float(proba[j, col]) if proba is not None and col is not None else 0.0
            out.append((text, DraftScore(j, problem, len(wanted & set(m)), len(wanted), predicted, p)))
        return out

    def choose_or_error(self, seq: KeyphraseSequence, results: Sequence[Any]) -> DraftChoice | BaseException:
        """:meth:`choose` over a batched call's results for one item, or the error the drafts ended with (to be
        handled like one reply: retried or a failure)."""
        try:
            return self.choose(seq, as_drafts(results))
        except Exception as exc:  # noqa: BLE001 - what the drafts ended with, handled as one result
            return exc

    def choose(self, seq: KeyphraseSequence, drafts: Sequence[str | BaseException]) -> DraftChoice:
        """The best draft that passes the screen, or raise what the drafts ended with when none does: the first
        non-transient error (a failure), else the first transient backend error (retried, honouring its
        Retry-After), else :class:`NonDocumentReply` with the first draft's problem (retried)."""
        for d in drafts:
            if isinstance(d, GenerationCancelled):
                raise d
        scored = self.score(seq, drafts)
        passing = [(text, s) for text, s in scored if text is not None]
        if not passing:
            errors = [d for d in drafts if isinstance(d, BaseException)]
            fatal = [e for e in errors if isinstance(e, LLMError) and not isinstance(e, TransientLLMError)]
            if fatal:
                raise fatal[0]
            transient = [e for e in errors if isinstance(e, TransientLLMError)]
            if transient:
                raise transient[0]
            if errors:
                raise errors[0]
            raise NonDocumentReply(scored[0][1].problem or "Not a document.")
        text, best = max(passing, key=lambda ts: ts[1].key(seq.label))
        raw = tuple(d if isinstance(d, str) else None for d in drafts)
        return DraftChoice(text, best.draft, tuple(s for _, s in scored), raw)


def request_drafts(generate: Callable[[], str], k: int, cancel: threading.Event,
                   before: Callable[[int], None]) -> list[str | BaseException]:
    """K drafts from ``generate`` (one request after another; ``before(j)`` logs draft j's prompt first): each
    draft's text or the :class:`LLMError` it ended with. Cancellation stops at once."""
    drafts: list[str | BaseException] = []
    for j in range(k):
        if cancel.is_set():
            raise GenerationCancelled("Generation was cancelled.")
        before(j)
        try:
            drafts.append(generate())
        except GenerationCancelled:
            raise
        except LLMError as exc:
            drafts.append(exc)
    return drafts


def as_drafts(results: Sequence[Any]) -> list[str | BaseException]:
    """A batched call's results for one item as drafts (anything but text or an error counts as a failed call)."""
    return [r if isinstance(r, (str, BaseException)) else LLMError("The backend returned no text.") for r in results]
