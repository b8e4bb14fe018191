"""One trial of the audit: the release path re-run on a neighbour with fresh noise and a throwaway ledger, what it
released reduced to what the statistics read, the in-memory embeddings, and the canaries' exposure across trials."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

from dpkps_core.method import pipeline
from dpkps_core.audit.settings import AuditSettings
from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import MemoEmbedder
from dpkps_core.method.vocabulary import PublicVocabulary


@dataclasses.dataclass(frozen=True)
class _Release:
    """What one run released (Ṽ with noisy counts, sequences), reduced to what the statistics read."""

    vocab: Mapping[str, float]
    floor: float
    frequency: Counter
    sequence_terms: tuple[frozenset[str], ...]
    keyphrases: int

    @classmethod
    def of(cls, run: Any) -> "_Release":
        pv = run.private_vocabulary
        counts = np.asarray(pv.noisy_counts, dtype=np.float64)
        vocab = dict(zip(pv.terms, counts.tolist()))
        seqs = [s.keyphrases for s in run.outcome.sequences]
        freq: Counter = Counter(k for s in seqs for k in s)
        return cls(vocab, float(counts.min()) if counts.size else 0.0, freq,
                   tuple(frozenset(s) for s in seqs), sum(len(s) for s in seqs))

    @classmethod
    def of_vocabulary(cls, pv: Any) -> "_Release":
        """The vocabulary stage's release: Ṽ with its noisy counts only."""
        counts = np.asarray(pv.noisy_counts, dtype=np.float64)
        return cls(dict(zip(pv.terms, counts.tolist())), float(counts.min()) if counts.size else 0.0, Counter(), (), 0)

    def statistics(self, weights: Mapping[str, float]) -> dict[str, float]:
        score = members = sampled = 0.0
        for term, w in weights.items():
            x = self.vocab.get(term)
            score += w * (self.floor if x is None else x)
            members += w * (x is not None)
            sampled += w * self.frequency.get(term, 0)
        return {"vocabulary_score": score, "vocabulary_members": members, "sampled_frequency": sampled}

    def exposure(self, canaries: Sequence[Sequence[str]]) -> dict[str, Any]:
        in_vocab, occ, pairs = [], [], []
        for terms in canaries:
            ts = set(terms)
            in_vocab.append(sum(t in self.vocab for t in ts))
            occ.append(sum(self.frequency.get(t, 0) for t in ts))
            pairs.append(sum(len(ts & s) >= 2 for s in self.sequence_terms))
        return {"in_vocabulary": in_vocab, "occurrences": occ, "pair_sequences": pairs,
                "keyphrases": self.keyphrases, "sequences": len(self.sequence_terms)}


@dataclasses.dataclass
class _Neighbour:
    """One neighbouring corpus: its raw rows, the corpus the loader made of them, the split and training part of
    its first release-path run, and what each run released."""

    name: str
    corpus: Corpus
    raw: Any = None
    releases: list[_Release] = dataclasses.field(default_factory=list)
    split: Any = None
    train_corpus: Corpus | None = None
    #: canaries of this neighbour planted with an in-distribution prefix (D+k with ``canary_prefix_words``)
    prefixed: int = 0


class _Runner:
    """Runs the release path on one neighbour with fresh noise and a throwaway ledger per trial."""

    last_vocabulary: Any = None

    def __init__(self, config: SamplingConfig, vocabulary: PublicVocabulary, embedder: MemoEmbedder,
                 settings: AuditSettings) -> None:
        self.config, self.vocabulary, self.embedder, self.settings = config, vocabulary, embedder, settings
        self.sampler = (getattr(config, "noise_sampler", "numpy") if settings.noise_sampler == "release"
                        else settings.noise_sampler)
        self._seeds = np.random.SeedSequence(settings.seed) if settings.seed is not None else None
        self.runs = 0

    def noise(self) -> NoiseSource:
        seed = None if self._seeds is None else int(self._seeds.spawn(1)[0].generate_state(1)[0])
        return NoiseSource(seed, sampler=self.sampler)

    def run(self, corpus: Corpus) -> tuple[_Release, Any]:
        run = pipeline.run_sampling(corpus, self.config, vocabulary=self.vocabulary, embedder=self.embedder,
                                    cache=None, context=ReleaseContext(noise=self.noise(), ledger=PrivacyLedger()))
        self.runs += 1
        self.last_vocabulary = run.private_vocabulary
        return _Release.of(run), run.split


def _exposure_summary(canaries: Sequence[Sequence[str]], planted: Sequence[bool], *,
                      with_vocabulary: Sequence[_Release], without_vocabulary: Sequence[_Release],
                      with_sequences: Sequence[dict[str, Any]], without_sequences: Sequence[dict[str, Any]]
                      ) -> dict[str, Any]:
    """Canary exposure (Canary's Echo): how often the canaries' terms enter Ṽ (vocabulary-stage trials) and how
    often their terms and pairs appear in the sampled sequences (density-stage trials, their terms in Ṽ), with
    the canaries planted vs without them."""
    vw = [r.exposure(canaries) for r in with_vocabulary]
    vo = [r.exposure(canaries) for r in without_vocabulary]

    def side(v: Sequence[dict[str, Any]], q: Sequence[dict[str, Any]]) -> dict[str, float]:
        kp = sum(e["keyphrases"] for e in q) or 1
        return {"canary_terms_in_vocabulary_per_trial": sum(sum(e["in_vocabulary"]) for e in v) / max(len(v), 1),
                "canary_occurrences_per_1000_keyphrases": 1000.0 * sum(sum(e["occurrences"]) for e in q) / kp,
                "canary_pair_sequences_per_trial": sum(sum(e["pair_sequences"]) for e in q) / max(len(q), 1)}

    def mean(ex: Sequence[dict[str, Any]], key: str, j: int) -> float:
        return sum(e[key][j] for e in ex) / max(len(ex), 1)

    w, o = side(vw, with_sequences), side(vo, without_sequences)
    per = [{"terms": list(terms), "in_training_part": bool(planted[j]),
            "in_vocabulary_with": mean(vw, "in_vocabulary", j), "in_vocabulary_without": mean(vo, "in_vocabulary", j),
            "occurrences_with": mean(with_sequences, "occurrences", j),
            "occurrences_without": mean(without_sequences, "occurrences", j),
            "pair_sequences_with": mean(with_sequences, "pair_sequences", j),
            "pair_sequences_without": mean(without_sequences, "pair_sequences", j)}
           for j, terms in enumerate(canaries)]
    occ_w, occ_o = w["canary_occurrences_per_1000_keyphrases"], o["canary_occurrences_per_1000_keyphrases"]
    return {"canaries": len(canaries), "planted_in_training_part": int(sum(planted)),
            "terms_per_canary": len(canaries[0]) if canaries else 0,
            "vocabulary_trials": len(vw), "sequence_trials": len(with_sequences),
            "with_canaries": w, "without_canaries": o,
            "occurrence_ratio": (occ_w + 1e-9) / (occ_o + 1e-9) if (occ_w or occ_o) else 1.0,
            "per_canary": per,
            "reading": "Ṽ membership from the vocabulary-stage trials; sequences from the density-stage trials, in "
                       "which the canaries' terms are in Ṽ. Under ε-DP, adding k documents can change the "
                       "probability of any event about the release by at most a factor e^(kε) (group privacy): at "
                       "small ε the canaries' echo must stay close to the runs without them; at large ε a visible "
                       "echo is allowed and expected."}
