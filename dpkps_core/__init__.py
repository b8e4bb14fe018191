"""DP-KPS Studio core: differentially private synthetic text by seeding LLM prompts with DP keyphrases.

The public API mirrors the CLI (``python -m dpkps_core``), one function per step of [DP-KPS] §2:

>>> from dpkps_core import *
>>> corpus = load_demo_corpus("bbc")
>>> vocab = load_vocabulary("glove")
>>> config = SamplingConfig(eps_voc=5, eps_kde=5, method="independent", per_class=10)
>>> run = run_sampling(corpus, config, vocabulary=vocab, embedder=get_embedder(), cache=EmbeddingCache())
>>> write_run_folder(run, "runs/demo")

Steps: :func:`load_corpus` / :func:`load_demo_corpus` → :func:`split_corpus` → :func:`build_private_vocabulary`
(ε_voc) → :func:`extract_keyphrases` → :func:`embed_terms` → :func:`build_density` (ε_kde) →
:func:`sample_sequences`; :class:`PrivacyLedger` records every release.
"""

from dpkps_core.corpus import Corpus, load_corpus, load_demo_corpus
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import PrivateVocabulary, privatize_vocabulary
from dpkps_core.embeddings import EmbeddingCache, embed_terms, embed_texts, get_embedder
from dpkps_core.errors import DPKPSError
from dpkps_core.method.config import PAPER_SETTINGS, SamplingConfig
from dpkps_core.method.density_plan import default_bandwidth
from dpkps_core.method.pipeline import (
    SamplingRun,
    build_density,
    build_private_vocabulary,
    extract_keyphrases,
    run_sampling,
    sample_sequences,
    term_counts,
    write_run_folder,
)
from dpkps_core.method.split import CorpusSplit, split_corpus
from dpkps_core.method.matching import TermMatcher
from dpkps_core.method.vocabulary import PublicVocabulary, load_vocabulary

__all__ = [
    "Corpus", "load_corpus", "load_demo_corpus", "PrivacyEvent", "PrivacyLedger", "NoiseSource",
    "PrivateVocabulary", "privatize_vocabulary", "EmbeddingCache", "embed_terms", "embed_texts", "get_embedder",
    "DPKPSError", "PAPER_SETTINGS", "SamplingConfig", "SamplingRun", "build_density", "build_private_vocabulary",
    "default_bandwidth", "extract_keyphrases", "run_sampling", "sample_sequences", "term_counts",
    "write_run_folder", "CorpusSplit", "split_corpus", "PublicVocabulary", "TermMatcher", "load_vocabulary",
]
