"""A bounded sample of the held-out part for the local evaluation (issue 31 §4; docs/DESIGN.md §5).

The held-out part of a corpus of a million rows holds hundreds of thousands of documents; the local evaluation
(the no-LLM check, the real baselines, the embeddings of the test documents, Deep CORAL's client part) scores on
a uniform random sample of at most ``max_documents`` of them instead, and says so in its output. The sample is
drawn with a fixed public seed from the held-out part only: it never touches the split, the training part or any
DP step (it reads no training document), so it changes no release — only how precisely the local accuracies are
measured. At the default of :data:`DEFAULT_MAX_TEST_DOCUMENTS` documents an accuracy's 95 % binomial interval is at
most ±1.4 points wide (1.96·√(0.25/5000)), below the differences the evaluation is read for, while embedding the
test documents stays a bounded cost (minutes on a CPU, whatever the corpus size). A held-out part at most that
large is used whole, so small corpora give exactly the numbers they always did.

Local and PRIVATE: the sample's documents are real held-out documents (nothing here logs or prints text).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpkps_core.corpus import Corpus
from dpkps_core.dp.validation import check_positive_int

#: Held-out documents the local evaluation scores on at most (``None`` / 0 on the CLI: all of them).
DEFAULT_MAX_TEST_DOCUMENTS = 5_000
#: The public seed of the sample (fixed, so that a run's evaluation is the same every time it is computed).
HELD_OUT_SAMPLE_SEED = 0


@dataclasses.dataclass(frozen=True)
class HeldOutSample:
    """The held-out documents the evaluation scores on, how many the held-out part has (a PRIVATE, local count),
    and the bound and seed they were drawn with."""

    corpus: Corpus
    held_out: int
    max_documents: int | None
    seed: int

    @property
    def sampled(self) -> bool:
        """Whether the evaluation scores on a sample rather than the whole held-out part."""
        return len(self.corpus) < self.held_out

    def note(self) -> str:
        """What the evaluation's output says about the documents it scored on (local, private)."""
        if not self.sampled:
            return (f"all {self.held_out:,} held-out documents (the bound is "
                    f"{'none' if self.max_documents is None else f'{self.max_documents:,}'})")
        return (f"a uniform random sample of {len(self.corpus):,} of the {self.held_out:,} held-out documents "
                f"(at most {self.max_documents:,}, public seed {self.seed}); the split, the training part and every "
                "DP step are untouched — only the precision of the local accuracies depends on it")


def held_out_sample(part: Corpus, *, max_documents: int | None = DEFAULT_MAX_TEST_DOCUMENTS,
                    seed: int = HELD_OUT_SAMPLE_SEED) -> HeldOutSample:
    """At most ``max_documents`` documents of the held-out ``part`` (a uniform sample without replacement, in
    corpus order, drawn with the public ``seed``); all of them when ``max_documents`` is ``None`` or the part is
    no larger."""
    if max_documents is not None:
        max_documents = check_positive_int(max_documents, "held-out documents to evaluate on")
    n = len(part)
    if max_documents is None or n <= max_documents:
        return HeldOutSample(part, n, max_documents, int(seed))
    index = np.sort(np.random.default_rng(int(seed)).choice(n, size=max_documents, replace=False))
    return HeldOutSample(part.subset(index.tolist()), n, max_documents, int(seed))
