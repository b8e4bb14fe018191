"""A disclosure test that knows chance from leakage (issue 34 §2; docs/PRIVACY.md "Disclosure test") — PRIVATE, local.

:mod:`dpkps_core.evaluation.memorisation` compares the synthetic documents with the training documents only, so an ordinary
phrase shared by many documents looks like a hit. Here the held-out documents are the control ([Phantoms]): the
training part and the held-out part are drawn from the same corpus by a keyed hash of each document
(:mod:`dpkps_core.method.split`, docs/DESIGN.md §1), so a synthetic document that matches them *by chance* matches both
alike, while one that reproduces what it was built from matches the training part more often.

The design, for ``m`` = min(training, held-out) documents of each part (a seeded subsample of the larger one):

* **Matches.** A reference document is *matched* by a synthetic document when the two share (a) a *rare n-gram*
  (``ngram`` words that at most ``rare_max_docs`` of the 2m reference documents contain — rarity is decided on the
  pooled reference, the same for both parts), (b) a *long span* of at least ``span_words`` consecutive words, or
  (c) a string of the user's identifier list (names, MRNs), found as whole words in both.
* **Counts.** How many synthetic documents match a training document, how many a held-out document; how many
  training documents and how many held-out documents are matched by some synthetic document.
* **The test.** Of the ``r`` matched reference documents, ``W`` are training documents. Under "no leakage" (the
  synthetic documents independent of which reference documents were trained on), the m training documents are a
  uniformly random half of the pooled 2m, so ``W`` is hypergeometric (2m, m, r): the one-sided p-value is
  P(W' ≥ W). It is exact: on documents written without the training data it falls below α with probability ≤ α.
  It is computed on two tiers — every match, and the strong ones only (a long span or an identifier), where a
  copy stands out even when ordinary rare phrases match by chance everywhere — and Bonferroni-combined
  (p = 2 · the smaller p; each tier's bound at α/2), since neither tier is chosen by looking at the parts.
* **The empirical ε lower bound** of one run ([OneRun] Theorem 3.1, δ = 0): guess "member" for every matched
  reference document; if the release is ε-DP per document and each reference document's membership was a fair
  coin, the number of correct guesses is dominated by Binomial(r, e^ε / (1 + e^ε)). So with confidence
  1 − α, ε ≥ logit(CP_lower(W, r)) with the one-sided Clopper–Pearson lower bound — reported beside the claimed ε,
  floored at 0. The split is a keyed hash of each document (a fixed-size held-out part, close to but not exactly the
  theorem's independent coins) and the unit is one document (under the person unit a person's documents share
  one coin, so the bound is per document: a group of them may show up to their number × ε).

Pure Python + NumPy/SciPy; the documents and everything derived from them stay in memory, the result carries
counts, rates, a p-value and a bound — and, for the data owner only, the matched spans (never written by default).
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.errors import ParameterError
from dpkps_core.evaluation.memorisation import DEFAULT_FLAG_WORDS, tokens

#: Words in a rare n-gram (shorter runs are ordinary shared phrasing even when rare).
DEFAULT_NGRAM = 6
#: An n-gram is rare when at most this many of the pooled reference documents contain it.
DEFAULT_RARE_MAX_DOCS = 1
#: Default confidence of the test and of the ε lower bound.
DEFAULT_CONFIDENCE = 0.95
#: Reference documents per part, at most (a seeded subsample beyond it: the test stays fast on large corpora).
DEFAULT_MAX_REFERENCE = 5000
#: What the disclosure file of a run folder is called (written by page 7 and ``dpkps evaluate --disclosure``;
#: PRIVATE: not on the export allowlist, so the export never copies it).
DISCLOSURE_FILE = "disclosure.json"
#: The kinds of match, in the order reported.
MATCH_KINDS = ("rare_ngram", "long_span", "identifier")


@dataclasses.dataclass(frozen=True)
class DisclosureSettings:
    """The disclosure test's public settings (issue 34 §2): what counts as a match, the confidence, the sizes."""

    ngram: int = DEFAULT_NGRAM
    rare_max_docs: int = DEFAULT_RARE_MAX_DOCS
    span_words: int = DEFAULT_FLAG_WORDS
    identifiers: tuple[str, ...] = ()
    confidence: float = DEFAULT_CONFIDENCE
    max_reference: int = DEFAULT_MAX_REFERENCE
    seed: int = 0

    def __post_init__(self) -> None:
        for name, low in (("ngram", 2), ("rare_max_docs", 1), ("span_words", 2), ("max_reference", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(f"The disclosure test's {name.replace('_', ' ')} must be a whole number of at "
                                     f"least {low}.")
        if self.span_words < self.ngram:
            raise ParameterError(f"The long-span length ({self.span_words} words) must be at least the n-gram length "
                                 f"({self.ngram}).")
        if not (isinstance(self.confidence, (int, float)) and 0.5 <= float(self.confidence) < 1.0):
            raise ParameterError("The disclosure test's confidence must be at least 0.5 and below 1.")
        ids = tuple(str(i).strip() for i in self.identifiers if str(i).strip())
        object.__setattr__(self, "identifiers", tuple(dict.fromkeys(ids)))

    @property
    def alpha(self) -> float:
        return 1.0 - float(self.confidence)

    def to_dict(self) -> dict[str, Any]:
        """The settings as recorded (the identifiers by their number only: they are private strings)."""
        return {"ngram": self.ngram, "rare_max_docs": self.rare_max_docs, "span_words": self.span_words,
                "identifiers": len(self.identifiers), "confidence": float(self.confidence),
                "max_reference": self.max_reference, "seed": self.seed}


@dataclasses.dataclass(frozen=True)
class DisclosureResult:
    """The disclosure test's result (PRIVATE, local: counts on the private corpus).

    ``synthetic_matching_train`` / ``_holdout``: synthetic documents matching at least one training / held-out
    reference document; ``train_matched`` / ``holdout_matched``: reference documents of each part matched by at
    least one synthetic document (of ``reference_per_part`` each); ``by_kind``: the same reference counts per kind
    of match; ``p_value``: the one-sided hypergeometric test that the training part is matched more often than the
    held-out part; ``epsilon_lower_bound``: the one-run empirical bound at ``settings.confidence``."""

    settings: DisclosureSettings
    synthetic_documents: int
    reference_per_part: int
    synthetic_matching_train: int
    synthetic_matching_holdout: int
    train_matched: int
    holdout_matched: int
    by_kind: Mapping[str, Mapping[str, int]]
    p_value: float
    epsilon_lower_bound: float
    claimed_epsilon: float | None = None
    examples: tuple[str, ...] = ()
    tiers: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)

    @property
    def leakage(self) -> bool:
        """True when the training part is matched significantly more often than the held-out part (p < α)."""
        return self.p_value < self.settings.alpha

    @property
    def exceeds_claim(self) -> bool:
        """True when the empirical bound is above the claimed ε: the implementation or the claim is wrong."""
        return self.claimed_epsilon is not None and self.epsilon_lower_bound > self.claimed_epsilon + 1e-9

    @property
    def verdict(self) -> str:
        """"leakage beyond the claimed ε" (the bound is above the claim), "leakage" (the training part is matched
        significantly more often than the held-out control, p < α), or "no evidence of leakage"."""
        if self.exceeds_claim:
            return "leakage beyond the claimed ε"
        return "leakage" if self.leakage else "no evidence of leakage"

    def sentence(self) -> str:
        """The result in plain words, as the app and the internal dossier say it."""
        conf = f"{float(self.settings.confidence):.0%}"
        head = (f"{self.train_matched} of {self.reference_per_part} training documents and {self.holdout_matched} of "
                f"{self.reference_per_part} held-out documents share a rare phrase, a long span or an identifier "
                f"with a synthetic document (one-sided p = {self.p_value:.3g}).")
        bound = f"Empirical ε lower bound per document: {self.epsilon_lower_bound:.3g} ({conf} confidence)"
        if self.claimed_epsilon is not None:
            bound += f" beside the claimed ε = {self.claimed_epsilon:g}"
        verdict = {
            "leakage beyond the claimed ε": ". LEAKAGE beyond the claimed ε: the synthetic documents reproduce "
                                            "training documents more than the guarantee allows — do not share.",
            "leakage": ". LEAKAGE: the synthetic documents match the training documents more often than the "
                       "held-out control, beyond chance.",
            "no evidence of leakage": ". No evidence of leakage: the training documents are matched no more often "
                                      "than the held-out control.",
        }[self.verdict]
        return f"{head} {bound}{verdict}"

    def to_dict(self) -> dict[str, Any]:
        """The result as ``disclosure.json`` holds it (PRIVATE; no document text unless ``examples`` were kept)."""
        return {"private": True, "settings": self.settings.to_dict(), "synthetic_documents": self.synthetic_documents,
                "reference_per_part": self.reference_per_part,
                "synthetic_matching_train": self.synthetic_matching_train,
                "synthetic_matching_holdout": self.synthetic_matching_holdout,
                "train_matched": self.train_matched, "holdout_matched": self.holdout_matched,
                "by_kind": {k: dict(v) for k, v in self.by_kind.items()},
                "tiers": {k: dict(v) for k, v in self.tiers.items()}, "p_value": self.p_value,
                "epsilon_lower_bound": self.epsilon_lower_bound, "claimed_epsilon": self.claimed_epsilon,
                "leakage": self.leakage, "verdict": self.verdict, "sentence": self.sentence()}


# ------------------------------------------------------------------------------------------- statistics

def hypergeometric_p_value(train_hits: int, matched: int, per_part: int) -> float:
    """P(W ≥ ``train_hits``) for W ~ Hypergeometric(2·``per_part`` documents, ``per_part`` training, ``matched``
    drawn): the chance of at least this many training documents among the matched ones if the matches ignored
    which part a document is in (1.0 when nothing matched)."""
    from scipy.stats import hypergeom

    if matched <= 0:
        return 1.0
    return float(min(1.0, max(0.0, hypergeom.sf(train_hits - 1, 2 * per_part, per_part, matched))))


def one_run_epsilon_lower_bound(correct: int, guesses: int, alpha: float) -> float:
    """The empirical ε lower bound of [OneRun] Theorem 3.1 for pure ε-DP: with ``correct`` of ``guesses`` membership
    guesses right, ε ≥ logit(CP_lower) with probability ≥ 1 − ``alpha`` (0 when the lower bound is at most ½)."""
    from dpkps_core.audit.statistics import clopper_pearson

    if guesses <= 0 or correct <= 0:
        return 0.0
    lower, _ = clopper_pearson(int(correct), int(guesses), float(alpha))
    if lower <= 0.5:
        return 0.0
    if lower >= 1.0:
        return math.inf
    return float(math.log(lower / (1.0 - lower)))


# ------------------------------------------------------------------------------------------- matching

def _grams(toks: Sequence[str], n: int) -> set[int]:
    """The document's distinct ``n``-word n-grams, each kept as its 64-bit hash (memory: a reference of 10,000
    documents holds millions of n-grams; a collision between two distinct n-grams within one test is negligible)."""
    return {hash(tuple(toks[i:i + n])) for i in range(len(toks) - n + 1)}


def _identifier_patterns(identifiers: Sequence[str]) -> list[re.Pattern[str]]:
    return [re.compile(r"(?<!\w)" + r"\s+".join(re.escape(p) for p in ident.split()) + r"(?!\w)", re.IGNORECASE)
            for ident in identifiers]


_TOO_MANY = object()  # an n-gram in more reference documents than the rarity limit


def _index(ref_tokens: Sequence[Sequence[str]], n: int, limit: int | None) -> dict[int, Any]:
    """n-gram hash → the reference document holding it (an int), or the documents (a tuple), or ``_TOO_MANY``
    beyond ``limit`` documents (None: no limit). Compact: most n-grams are in one document."""
    idx: dict[int, Any] = {}
    for k, toks in enumerate(ref_tokens):
        for g in _grams(toks, n):
            cur = idx.get(g)
            if cur is None:
                idx[g] = k
            elif cur is _TOO_MANY:
                continue
            else:
                docs = (cur,) if isinstance(cur, int) else cur
                idx[g] = docs + (k,) if limit is None or len(docs) < limit else _TOO_MANY
    return idx


def _docs(value: Any) -> tuple[int, ...]:
    if value is None or value is _TOO_MANY:
        return ()
    return (value,) if isinstance(value, int) else value


def match_matrix(synthetic: Sequence[str], reference: Sequence[str], settings: DisclosureSettings
                 ) -> dict[str, list[set[int]]]:
    """For each kind of match, for each synthetic document, the indices of the ``reference`` documents it matches
    (rarity of an n-gram is counted over ``reference`` — pass the pooled training + held-out documents)."""
    ref_tokens = [tokens(t) for t in reference]
    rare = _index(ref_tokens, settings.ngram, settings.rare_max_docs)
    spans = _index(ref_tokens, settings.span_words, None)
    del ref_tokens
    patterns = _identifier_patterns(settings.identifiers)
    ident_docs = [{k for k, text in enumerate(reference) if p.search(text)} for p in patterns]
    out: dict[str, list[set[int]]] = {kind: [] for kind in MATCH_KINDS}
    for text in synthetic:
        toks = tokens(text)
        hit_rare = {k for g in _grams(toks, settings.ngram) for k in _docs(rare.get(g))}
        hit_span = {k for g in _grams(toks, settings.span_words) for k in _docs(spans.get(g))}
        hit_id: set[int] = set()
        for p, docs in zip(patterns, ident_docs):
            if docs and p.search(text):
                hit_id |= docs
        out["rare_ngram"].append(hit_rare)
        out["long_span"].append(hit_span)
        out["identifier"].append(hit_id)
    return out


def _subsample(n: int, k: int, rng: np.random.Generator) -> list[int]:
    return list(range(n)) if n <= k else sorted(rng.choice(n, size=k, replace=False).tolist())


def disclosure_test(synthetic: Sequence[str], training: Sequence[str], holdout: Sequence[str], *,
                    settings: DisclosureSettings | None = None, claimed_epsilon: float | None = None,
                    keep_examples: int = 0) -> DisclosureResult:
    """Count the synthetic documents' matches against as many training as held-out documents, test whether the
    training part is matched more often (one-sided, exact under no leakage) and bound ε from below (module
    docstring; [Phantoms], [OneRun]). ``keep_examples`` > 0 keeps that many matched training spans for the data
    owner's eyes (PRIVATE; not in :meth:`DisclosureResult.to_dict`)."""
    settings = settings or DisclosureSettings()
    synthetic = [str(t) for t in synthetic]
    if not synthetic:
        raise ParameterError("The disclosure test needs at least one synthetic document.")
    if not training or not holdout:
        raise ParameterError("The disclosure test needs held-out documents as its control; set a test fraction "
                             "above 0 when loading the corpus.")
    rng = np.random.default_rng(settings.seed)
    m = min(len(training), len(holdout), settings.max_reference)
    train_idx = _subsample(len(training), m, rng)
    hold_idx = _subsample(len(holdout), m, rng)
    reference = [training[i] for i in train_idx] + [holdout[i] for i in hold_idx]
    hits = match_matrix(synthetic, reference, settings)
    any_hits = [a | b | c for a, b, c in zip(hits["rare_ngram"], hits["long_span"], hits["identifier"])]
    matched = set().union(*any_hits) if any_hits else set()
    train_matched = sum(1 for k in matched if k < m)
    holdout_matched = len(matched) - train_matched
    strong = set().union(*hits["long_span"], *hits["identifier"]) if synthetic else set()
    tiers = {}
    for tier, docs in (("any match", matched), ("long span or identifier", strong)):
        w = sum(1 for k in docs if k < m)
        # two tiers, each at α/2 (Bonferroni): the guesses never look at which part a document is in
        tiers[tier] = {"train": w, "holdout": len(docs) - w, "p_value": hypergeometric_p_value(w, len(docs), m),
                       "epsilon_lower_bound": one_run_epsilon_lower_bound(w, len(docs), settings.alpha / 2)}
    by_kind = {}
    for kind in MATCH_KINDS:
        docs = set().union(*hits[kind]) if hits[kind] else set()
        by_kind[kind] = {"train": sum(1 for k in docs if k < m), "holdout": sum(1 for k in docs if k >= m)}
    examples: list[str] = []
    if keep_examples > 0:
        for s, docs in zip(synthetic, any_hits):
            if any(k < m for k in docs):
                examples.append(s[:300])
            if len(examples) >= keep_examples:
                break
    return DisclosureResult(
        settings=settings, synthetic_documents=len(synthetic), reference_per_part=m,
        synthetic_matching_train=sum(1 for d in any_hits if any(k < m for k in d)),
        synthetic_matching_holdout=sum(1 for d in any_hits if any(k >= m for k in d)),
        train_matched=train_matched, holdout_matched=holdout_matched, by_kind=by_kind,
        p_value=min(1.0, 2 * min(t["p_value"] for t in tiers.values())),
        epsilon_lower_bound=max(t["epsilon_lower_bound"] for t in tiers.values()), tiers=tiers,
        claimed_epsilon=None if claimed_epsilon is None else float(claimed_epsilon), examples=tuple(examples))


def disclosure_for_run(run: Any, *, settings: DisclosureSettings | None = None) -> DisclosureResult:
    """The disclosure test of a loaded run (:func:`dpkps_core.evaluation.run.load_run`): its synthetic documents
    against its training part and its held-out (test) part, the claimed ε from its privacy report."""
    from dpkps_core.records import runfolder

    docs = [d["text"] for d in run.documents]
    if not docs:
        raise ParameterError("The run holds no synthetic documents yet; write them on the app's “Write with an LLM” page (or dpkps generate).")
    claimed = None
    report_path = runfolder.RunFolder(run.run_dir).privacy_report
    if report_path.is_file():
        report = runfolder.read_json(report_path)
        if isinstance(report, Mapping) and isinstance(report.get("epsilon_total"), (int, float)):
            claimed = float(report["epsilon_total"])
    return disclosure_test(docs, list(run.train.texts), list(run.test.texts), settings=settings,
                           claimed_epsilon=claimed)


def write_disclosure(result: DisclosureResult, run_dir: Any) -> Any:
    """Write ``disclosure.json`` into the run folder, owner-only (PRIVATE: the export's allowlist leaves it out)."""
    import json
    import os
    from pathlib import Path

    path = Path(run_dir) / DISCLOSURE_FILE
    tmp = path.with_name(f".{DISCLOSURE_FILE}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # owner-only from its first byte
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def read_disclosure(run_dir: Any) -> dict[str, Any] | None:
    """``disclosure.json`` of a run folder as written by :func:`write_disclosure` (None when absent or unreadable)."""
    import json
    from pathlib import Path

    path = Path(run_dir) / DISCLOSURE_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() and not path.is_symlink() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None
