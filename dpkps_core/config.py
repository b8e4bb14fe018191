"""Every public parameter of a sampling run, and the density plan decided from them (issue 12).

:class:`SamplingConfig` is the one contract the CLI, the app and the run folder share (``run_config.json``);
:func:`density_plan` is the ONE place where the density's public choices are made — σ, the ensemble members,
ε per member, the number of random features I and the expected error — from public inputs and DP releases only
(Ṽ's embeddings, the DP size estimate; paper 001 §2, DESIGN §2.2, §6).
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from dpkps_core.corpus import Corpus, check_class_names, load_corpus_spec, require_declared
from dpkps_core.dp.accounting import MAX_EPOCHS
from dpkps_core.dp.kde import ensemble_blocks
from dpkps_core.dp.rff import optimal_features, rff_expected_error
from dpkps_core.dp.rng import SAMPLERS
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.dp.vocabulary import PrivateVocabulary, estimate_documents_from_noisy_total
from dpkps_core.embeddings import DEFAULT_MODEL
from dpkps_core.errors import ParameterError, VocabularyError
from dpkps_core.sampling import SAMPLING_METHODS
from dpkps_core.vocabulary import VOCABULARIES, PublicVocabulary, load_vocabulary

DENSITIES = ("auto", "histogram", "rff")

#: The one default cap on the ε any one document (or person, with a person column) may spend over all releases, app
#: and CLI (DESIGN §2.0: the persistent ledger is an individual privacy filter). The app's cap field and the CLI's
#: --epsilon-cap start from it; 20 covers a few runs at the paper's totals of 6–15 (docs/PRIVACY.md "Per-document
#: budgets").
DEFAULT_EPSILON_CAP = 20.0

# Documented limits (issue 7): keep a user from running the server out of memory by accident. The one place every
# parameter bound lives: DP-KPS sampling (LIMITS), private prediction and AugPE (their config classes validate
# against these).
LIMITS = {
    "vocab_size": 20_000,        # N
    "terms_per_doc": 200,        # S
    "length": 64,                # L
    "per_class": 100_000,        # sequences per class
    "features": 20_000,          # I
    "max_chars_per_doc": 100_000,  # longer documents are truncated for term extraction
}
PRIVATE_PREDICTION_LIMITS = {
    "batch_size": 4096,          # s (expected batch size)
    "private_tokens": 4096,      # r (private tokens per batch)
    "max_new_tokens": 2048,
    "examples_per_batch": 1000,
    "num_buckets": 1_000_000,
    "max_prompt_tokens": 8192,
}
AUGPE_LIMITS = {
    "epochs": MAX_EPOCHS,        # T (the calibration in dp/accounting.py searches up to it)
    "population": 10_000,        # K per class
    "words_per_prompt": 100,
    "max_tokens": 8192,
}


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """Every parameter of a sampling run (public; saved as ``run_config.json`` and re-runnable).

    Frozen: a variant is ``dataclasses.replace(config, …)`` (or :meth:`replace`), never a patched copy.
    :meth:`validate` checks every field and the ε cap, and returns the config (normalised) for chaining."""

    corpus: str = "demo:bbc"
    text_column: str | None = None
    label_column: str | None = None
    vocabulary: str = "glove"
    remove_stopwords: bool = True
    junk_filter: bool = True
    vocab_max_terms: int | None = 50_000  # frequency-ordered vocabularies only (see effective_max_terms)
    eps_voc: float = 5.0
    eps_kde: float = 5.0
    method: str = "independent"
    density: str = "auto"
    length: int = 10
    per_class: int = 50
    vocab_size: int = 1000
    terms_per_doc: int = 10
    selection_rule: str = "top-n"
    features: int | None = None
    bandwidth: float | None = None
    temperature: float = 1.0
    max_keyphrases_per_doc: int | None = None
    class_size_estimate: float | None = None
    embedding_model: str = DEFAULT_MODEL
    seed: int | None = None
    noise_sampler: str = "opendp"  # "opendp" (vetted, default) or "numpy" (fast); a seed means NumPy
    test_fraction: float = 0.2
    client_fraction: float = 0.0
    split_seed: int = 0
    epsilon_cap: float | None = None
    classes: tuple[str, ...] | None = None  # declared PUBLIC class names (demo corpora carry their own)
    person_column: str | None = None  # unit of privacy: one person (this column's ids stay private), else a document
    # a user vocabulary FILE as the run folder names it: ``vocabulary`` is then its file name, and this its SHA-256
    # (see to_run_dict; load_vocabulary_for finds and checks the file by them)
    vocabulary_sha256: str | None = None

    def __post_init__(self) -> None:
        if self.classes is not None and not isinstance(self.classes, tuple):
            value = tuple(self.classes) if not isinstance(self.classes, str) else (self.classes,)
            object.__setattr__(self, "classes", value)

    def replace(self, **changes: Any) -> "SamplingConfig":
        """A variant with ``changes`` (an iterative method never keeps the histogram density, which only serves
        independent sampling: it falls back to ``auto``)."""
        out = dataclasses.replace(self, **changes)
        if out.method != "independent" and out.density == "histogram":
            out = dataclasses.replace(out, density="auto")
        return out

    def validate(self) -> "SamplingConfig":
        check_epsilon(self.eps_voc, "ε_voc")
        check_epsilon(self.eps_kde, "ε_kde")
        if self.method not in SAMPLING_METHODS:
            raise ParameterError(f"Unknown method {self.method!r}; choose one of {', '.join(SAMPLING_METHODS)}.")
        if self.density not in DENSITIES:
            raise ParameterError(f"Unknown density {self.density!r}; choose one of {', '.join(DENSITIES)}.")
        if self.method != "independent" and self.density == "histogram":
            raise ParameterError("The smoothed histogram only serves independent sampling; iterative methods use the RFF DP-KDE.")
        check_positive_int(self.length, "L (sequence length)", maximum=LIMITS["length"])
        check_positive_int(self.per_class, "sequences per class", maximum=LIMITS["per_class"])
        check_positive_int(self.vocab_size, "N (private vocabulary size)", maximum=LIMITS["vocab_size"])
        check_positive_int(self.terms_per_doc, "S (terms per document)", maximum=LIMITS["terms_per_doc"])
        if self.features is not None:
            check_positive_int(self.features, "I (random features)", maximum=LIMITS["features"])
        if self.bandwidth is not None and (not np.isfinite(self.bandwidth) or self.bandwidth < 0):
            raise ParameterError(f"σ (bandwidth) must be ≥ 0, got {self.bandwidth!r}.")
        if self.noise_sampler not in SAMPLERS:
            raise ParameterError(f"Unknown noise sampler {self.noise_sampler!r}; choose one of {', '.join(SAMPLERS)}.")
        if self.temperature < 0:
            raise ParameterError(f"The temperature must be ≥ 0, got {self.temperature!r}.")
        if self.classes is not None:
            object.__setattr__(self, "classes", check_class_names(self.classes))
        total = self.eps_voc + self.eps_kde
        if self.epsilon_cap is not None and total > self.epsilon_cap + 1e-9:
            raise ParameterError(f"ε_voc + ε_kde = {total:g} is over the budget cap of {self.epsilon_cap:g}.")
        return self

    @property
    def effective_vocab_max_terms(self) -> int | None:
        return effective_max_terms(self.vocabulary, self.vocab_max_terms)

    @property
    def density_kind(self) -> str:
        if self.density == "auto":
            return "histogram" if self.method == "independent" else "rff"
        return self.density

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_run_dict(self) -> dict[str, Any]:
        """The config as the run folder (``run_config.json``) and the privacy report hold it: like
        :meth:`to_dict`, but a user vocabulary FILE is named by its file name and SHA-256, never by its local path
        (docs/PRIVACY.md). :meth:`from_dict` reads it back; :func:`load_vocabulary_for` finds the file again."""
        out = self.to_dict()
        name, digest = vocabulary_reference(self.vocabulary)
        out["vocabulary"] = name
        out["vocabulary_sha256"] = digest or self.vocabulary_sha256
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SamplingConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


FREQUENCY_ORDERED_VOCABULARIES = ("glove", "wordfreq")


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def vocabulary_reference(spec: str) -> tuple[str, str | None]:
    """(name, SHA-256 or None) of a vocabulary spec for the run folder and the privacy report: a built-in name
    (or the app's ``upload:<file name>``) as it is; an existing file by its file name and the SHA-256 of its
    bytes, so that no local path is written (docs/PRIVACY.md) while the exact public vocabulary stays identifiable."""
    spec = str(spec)
    if spec in VOCABULARIES or spec.startswith("upload:"):
        return spec, None
    path = Path(spec).expanduser()
    if not path.is_file():
        return path.name or spec, None
    return path.name, _sha256_of(path)


def vocabulary_spec_for(config: SamplingConfig) -> str:
    """The vocabulary spec to load for ``config``. A config read back from a run folder names a user vocabulary
    file by its file name and SHA-256 only (:meth:`SamplingConfig.to_run_dict`): the file is looked for in the
    working folder and beside the corpus file, and must have that SHA-256 (a file of the same name with other
    content is refused rather than used in its place)."""
    spec = str(config.vocabulary)
    if not config.vocabulary_sha256 or spec in VOCABULARIES or spec.startswith("upload:"):
        return spec
    candidates = [Path(spec).expanduser()]
    corpus = Path(str(config.corpus)).expanduser()
    if not str(config.corpus).startswith("demo:") and corpus.is_file():
        candidates.append(corpus.parent / Path(spec).name)
    mismatched = False
    for candidate in candidates:
        if candidate.is_file():
            if _sha256_of(candidate) == config.vocabulary_sha256:
                return str(candidate)
            mismatched = True
    what = "has other content than" if mismatched else "was not found in the working folder or beside the corpus for"
    raise VocabularyError(f"The vocabulary file '{Path(spec).name}' {what} the run's (SHA-256 "
                          f"{config.vocabulary_sha256[:12]}…); put the run's vocabulary file there.")


def effective_max_terms(vocabulary: str, max_terms: int | None) -> int | None:
    """The frequency limit K actually applied to V: only GloVe and wordfreq are in public frequency order, so
    keeping their first K terms keeps the K most frequent English words (issue 8 §2; chosen by measurement in
    docs/DEFAULTS.md). For the medical glossary and user files the order carries no frequency, so no cut."""
    if not max_terms or vocabulary not in FREQUENCY_ORDERED_VOCABULARIES:
        return None
    return int(max_terms)


PAPER_SETTINGS = dict(
    remove_stopwords=True, junk_filter=False, vocab_max_terms=None, density="rff", bandwidth=1.0,
    features=2000, selection_rule="top-n", vocab_size=1000, terms_per_doc=10,
)
"""The DP-KPS paper's configuration (RFF DP-KDE, σ = 1, fixed I, full GloVe), kept for comparisons."""


def default_bandwidth(embeddings: np.ndarray, *, factor: float = 0.25, max_points: int = 2000, seed: int = 0) -> float:
    """Data-free σ: ``factor`` × median pairwise distance among Ṽ's embeddings (Ṽ is DP, the model public).

    With MiniLM the median distance between vocabulary words is ≈ 1.2, giving σ ≈ 0.3, the range that
    worked best in DESIGN §6 (σ = 1 samples almost uniformly).
    """
    e = np.asarray(embeddings, dtype=np.float64)
    if e.shape[0] < 2:
        return 0.3
    if e.shape[0] > max_points:
        e = e[np.random.default_rng(seed).choice(e.shape[0], max_points, replace=False)]
    sq = np.maximum((e * e).sum(1)[:, None] + (e * e).sum(1)[None, :] - 2 * e @ e.T, 0.0)
    dist = np.sqrt(sq[np.triu_indices(e.shape[0], 1)])
    return float(round(factor * np.median(dist), 4))


def estimate_class_size(
    private_vocabulary: PrivateVocabulary, n_classes: int, *, user_estimate: float | None = None
) -> tuple[float, str]:
    """Per-class size estimate for choosing I, without touching private counts (issue 8 §3).

    A user-supplied estimate wins; otherwise the free DP estimate Σ(noisy counts over V)/S divided by the
    number of classes (post-processing of the ε_voc release)."""
    if user_estimate is not None:
        return float(user_estimate), "user estimate"
    n = estimate_documents_from_noisy_total(private_vocabulary.noisy_total, terms_per_doc=private_vocabulary.terms_per_doc)
    return max(n / max(n_classes, 1), 1.0), "DP estimate from the vocabulary release"


@dataclasses.dataclass(frozen=True)
class DensityPlan:
    """The public choices of the density step (DESIGN §2.2, §2.4): decided before ε_kde is spent.

    ``features``, ``members`` and the errors apply to the RFF DP-KDE; the smoothed histogram has one member and
    a Laplace(1/ε_kde) noise per term of Ṽ (sd √2/ε_kde)."""

    density: str                       # "histogram" or "rff"
    kind: str                          # "independent", "iterative-linear" or "iterative-log"
    bandwidth: float | None            # σ (None: not yet known — auto σ needs Ṽ's embeddings)
    bandwidth_source: str
    members: int                       # ensemble members J (each gets ε_kde / J)
    eps_member: float
    max_keyphrases_per_doc: int        # M
    features: int | None = None        # I (RFF only)
    features_source: str = ""
    class_size_estimate: float | None = None
    class_size_source: str = ""
    expected_noise_per_term: float | None = None   # histogram: sd of the Laplace noise per term
    rff_error: float | None = None
    noise_error: float | None = None
    total_error: float | None = None

    def info(self) -> dict[str, Any]:
        """The plan as the flat dict the run reports under ``density_*`` (only the entries that apply)."""
        out: dict[str, Any] = {"bandwidth": self.bandwidth, "bandwidth_source": self.bandwidth_source,
                               "density": self.density, "max_keyphrases_per_doc": self.max_keyphrases_per_doc}
        if self.density == "histogram":
            out["expected_noise_per_term"] = self.expected_noise_per_term
            return out
        out.update({"features": self.features, "features_source": self.features_source,
                    "class_size_estimate": None if self.class_size_estimate is None else round(self.class_size_estimate, 1),
                    "ensemble_members": self.members, "rff_error": self.rff_error, "noise_error": self.noise_error,
                    "total_error": self.total_error})
        return out


def density_plan(
    config: SamplingConfig, *, n_classes: int, private_vocabulary: PrivateVocabulary | None = None,
    embeddings: np.ndarray | None = None,
) -> DensityPlan:
    """Decide σ, the ensemble members, ε per member and I for ``config`` (paper 001 §2 Step 3; DESIGN §2.2, §6).

    σ: the user's, else 0.25 × the median distance among Ṽ's embeddings (``embeddings``; ``None`` leaves it open).
    I: the user's, else ≈ n_c·ε_member/2 with n_c the user's class-size estimate or the free DP estimate from the
    vocabulary release (Σ noisy counts / S / classes). Everything here is public or post-processing of DP output."""
    kind = "independent" if config.method == "independent" else config.method
    max_per_doc = config.max_keyphrases_per_doc or config.length
    if config.bandwidth is not None:
        bandwidth, bw_source = float(config.bandwidth), "user"
    elif embeddings is not None:
        bandwidth, bw_source = default_bandwidth(embeddings), "auto (0.25 × median distance in Ṽ)"
    else:
        bandwidth, bw_source = None, "auto (0.25 × median distance in Ṽ; decided when Ṽ is embedded)"
    if config.density_kind == "histogram":
        return DensityPlan("histogram", kind, bandwidth, bw_source, 1, config.eps_kde, max_per_doc,
                           expected_noise_per_term=float(np.sqrt(2) / config.eps_kde))
    members = len(ensemble_blocks(kind, config.length))
    eps_member = config.eps_kde / members
    if config.class_size_estimate is not None:
        n_est, n_source = float(config.class_size_estimate), "user estimate"
    elif private_vocabulary is not None:
        n_est, n_source = estimate_class_size(private_vocabulary, n_classes)
    else:
        n_est, n_source = None, "DP estimate from the vocabulary release (not built yet)"
    if config.features:
        features, f_source = int(config.features), "user"
    elif n_est is not None:
        features = optimal_features(n_documents=n_est, epsilon=eps_member, maximum=LIMITS["features"])
        f_source = f"auto (n_c·ε/2, n_c from {n_source})"
    else:
        features, f_source = None, "auto (n_c·ε/2; needs the class-size estimate)"
    errors = (rff_expected_error(n_documents=n_est, epsilon=eps_member, features=features)
              if features is not None and n_est is not None else {})
    return DensityPlan("rff", kind, bandwidth, bw_source, members, eps_member, max_per_doc, features, f_source,
                       n_est, n_source, rff_error=errors.get("rff_error"), noise_error=errors.get("noise_error"),
                       total_error=errors.get("total_error"))


def load_config_corpus(config: SamplingConfig) -> Corpus:
    """The corpus a sampling configuration names, with its declared public classes and person column; refuses
    (locally, before anything is spent) a corpus whose public classes were not declared."""
    return require_declared(load_corpus_spec(config.corpus, text_column=config.text_column,
                                             label_column=config.label_column, classes=config.classes,
                                             person_column=config.person_column))


def load_vocabulary_for(config: SamplingConfig) -> PublicVocabulary:
    """The public vocabulary V a configuration names, cleaned and frequency-limited as it says."""
    return load_vocabulary(vocabulary_spec_for(config), remove_stopwords=config.remove_stopwords,
                           junk_filter=config.junk_filter, max_terms=config.effective_vocab_max_terms)
