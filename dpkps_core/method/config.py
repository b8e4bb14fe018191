"""Every public parameter of a sampling run, and the one way to build them (docs/ARCHITECTURE.md "One path for
a setting").

:class:`SamplingConfig` is the one contract the CLI, the app, the comparison and the run folder share
(``run_config.json``). It is frozen and checks itself on construction, so an invalid configuration cannot exist;
:func:`build_sampling_config` is the one builder every entry point calls (the CLI's options, the app's settings,
a comparison's overrides). The density's public choices (σ, members, I) are decided from it in
:mod:`dpkps_core.method.density_plan`; the ε cap is the ledger's business (``dpkps_core.dp.ledger``), and each mechanism
checks its own ε again (docs/DESIGN.md §2).
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from dpkps_core.corpus import Corpus, check_class_names, check_encoding, load_corpus_spec, require_declared
from dpkps_core.dp.accounting import MAX_EPOCHS
from dpkps_core.dp.rng import SAMPLERS
from dpkps_core.dp.validation import check_cap, check_epsilon, check_positive_int
from dpkps_core.embeddings import DEFAULT_MODEL, EMBEDDING_MODELS
from dpkps_core.errors import ParameterError, VocabularyError
from dpkps_core.method.sampling import SAMPLING_METHODS
from dpkps_core.method.vocabulary import VOCABULARIES, PublicVocabulary, load_vocabulary
from dpkps_core.dp.ledger import DEFAULT_EPSILON_CAP  # the ledger's default cap (the settings start from it)

DENSITIES = ("auto", "histogram", "rff")


# Documented limits (docs/ARCHITECTURE.md): keep a user from running the server out of memory by accident. The one place every
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


# The groups the command line shows the options in (and the app's pages follow).
CORPUS = "corpus (private)"
VOCABULARY = "public vocabulary"
PRIVACY = "privacy"
METHOD = "method"
OPTION_GROUPS = (CORPUS, VOCABULARY, PRIVACY, METHOD)


#: How the app holds a setting (:attr:`SettingOption.app`).
APP_PLAIN = "plain"
APP_AUTO = "auto"
APP_ZERO_NONE = "zero-none"
APP_OWN = "own"
APP_NONE = "none"

#: :attr:`SettingOption.option_default` when the option starts from the field's own default.
FIELD_DEFAULT = "<the field's default>"


@dataclasses.dataclass(frozen=True)
class SettingOption:
    """How a :class:`SamplingConfig` field is offered to a user — the ONE description the command line's options
    (``dpkps_core.cli.options``) are generated from, so adding a setting is one edit here (issue 32 §4).

    ``group`` and ``order``: where it stands in ``--help``; ``flag``: its option (default ``--`` + the field name
    with dashes); ``short``: a one-letter alias; ``choices``: the allowed values; ``switch_off``: a boolean field
    offered as a switch that turns it off (``--keep-stopwords`` sets ``remove_stopwords`` to False);
    ``option_default``: what the option starts from when that differs from the field's default (the ε cap: the
    config records None = "not given", the CLI and the app start from :data:`DEFAULT_EPSILON_CAP`).

    ``app``: how the app holds it (``studio.defaults``): :data:`APP_PLAIN` — a session key of the field's name, its
    default the field's; :data:`APP_AUTO` — that key plus ``<name>_auto`` (ticked: None, "choose automatically");
    :data:`APP_ZERO_NONE` — 0 in the app stands for None; :data:`APP_OWN` — the app derives it from choices of its
    own (the corpus, the ε split, the cap switch, the demo seed); :data:`APP_NONE` — a command-line option only."""

    group: str
    order: int
    help: str
    flag: str | None = None
    short: str | None = None
    choices: tuple[str, ...] | None = None
    switch_off: str | None = None
    option_default: Any = FIELD_DEFAULT
    app: str = APP_PLAIN


def _setting(default: Any, *, group: str, order: int, help: str, **option: Any) -> Any:
    """A :class:`SamplingConfig` field with its :class:`SettingOption` (``dataclasses.field`` metadata)."""
    if "choices" in option and option["choices"] is not None:
        option["choices"] = tuple(option["choices"])
    return dataclasses.field(default=default, metadata={"option": SettingOption(group=group, order=order, help=help,
                                                                                 **option)})


def setting_value_type(name: str) -> type:
    """The Python type of a setting's value, from its annotation (``int | None`` is ``int``)."""
    annotation = str({f.name: f.type for f in dataclasses.fields(SamplingConfig)}[name]).replace(" ", "")
    for kind in (bool, int, float, str):
        if kind.__name__ in annotation.split("|"):
            return kind
    raise TypeError(f"SamplingConfig.{name} has no value type for {annotation!r}")


def setting_options() -> dict[str, SettingOption]:
    """Every :class:`SamplingConfig` field a user sets through an option, by field name, in group and help order."""
    found = {f.name: f.metadata["option"] for f in dataclasses.fields(SamplingConfig) if "option" in f.metadata}
    return dict(sorted(found.items(), key=lambda kv: (OPTION_GROUPS.index(kv[1].group), kv[1].order)))


@dataclasses.dataclass(frozen=True)
class SamplingConfig:
    """Every parameter of a sampling run (public; saved as ``run_config.json`` and re-runnable).

    Frozen and self-checking: every field is checked in ``__post_init__`` (an invalid configuration raises
    :class:`~dpkps_core.errors.ParameterError` and is never built); a variant is :meth:`replace` (or
    ``dataclasses.replace``, checked the same way). ``epsilon_cap`` is recorded for the run folder; the ledger
    enforces it (docs/DESIGN.md §2.0)."""

    corpus: str = _setting("demo:bbc", group=CORPUS, order=0, app=APP_OWN, help="demo:bbc (default), demo:drugs, demo:drugs-rating, "
                           "or a path to CSV/TSV/JSONL/Parquet/ZIP of .txt/folder of class sub-folders")
    text_column: str | None = None
    label_column: str | None = None
    vocabulary: str = _setting("glove", group=VOCABULARY, order=0, app=APP_OWN, help="glove (default), wordfreq, medical, or a path to "
                               "a UTF-8 file with one term per line")
    remove_stopwords: bool = _setting(True, group=VOCABULARY, order=1, switch_off="--keep-stopwords",
                                      help="do not remove English stop words from V")
    junk_filter: bool = _setting(True, group=VOCABULARY, order=2, switch_off="--no-junk-filter",
                                 help="keep terms without letters or with digits inside")
    vocab_max_terms: int | None = _setting(  # frequency-ordered vocabularies only (see effective_max_terms)
        50_000, group=VOCABULARY, order=3, app=APP_ZERO_NONE, help="keep only the K most frequent terms of a frequency-ordered V (glove, "
        "wordfreq); 0 = all (default %(default)s, chosen by measurement: docs/DEFAULTS.md)")
    eps_voc: float = _setting(5.0, group=PRIVACY, order=0, app=APP_OWN, help="ε for the private vocabulary (default %(default)s)")
    eps_kde: float = _setting(5.0, group=PRIVACY, order=1, app=APP_OWN, help="ε for the per-class densities (default %(default)s)")
    method: str = _setting("independent", group=METHOD, order=0, choices=SAMPLING_METHODS,
                           help="sequence sampler (default %(default)s)")
    density: str = _setting("auto", group=METHOD, order=1, choices=DENSITIES, help="auto: exact smoothed DP histogram "
                            "for independent, RFF DP-KDE for iterative; rff: the paper's RFF DP-KDE")
    length: int = _setting(10, group=METHOD, order=3, short="-L", help="keyphrases per sequence L (default %(default)s)")
    per_class: int = _setting(50, group=METHOD, order=4, short="-K", help="sequences per class (default %(default)s)")
    vocab_size: int = _setting(1000, group=METHOD, order=5, short="-N",
                               help="private vocabulary size N (default %(default)s)")
    terms_per_doc: int = _setting(10, group=METHOD, order=6, short="-S", help="distinct terms counted per document S = "
                                  "sensitivity of the vocabulary histogram (default %(default)s)")
    selection_rule: str = _setting("top-n", group=METHOD, order=7, choices=("top-n", "noise-floor"),
                                   help="how Ṽ is cut from the noisy counts (default %(default)s)")
    features: int | None = _setting(None, group=METHOD, order=8, short="-I", app=APP_AUTO,
                                    help="random features I (RFF only; default: auto ≈ n_c·ε/2)")
    bandwidth: float | None = _setting(None, group=METHOD, order=9, app=APP_AUTO,
                                       help="kernel bandwidth σ (default: auto from Ṽ's embeddings)")
    temperature: float = _setting(1.0, group=METHOD, order=10, help="sampling temperature T (0 = argmax)")
    max_keyphrases_per_doc: int | None = _setting(None, group=METHOD, order=11, flag="--max-keyphrases", app=APP_NONE,
                                                  help="keyphrases kept per document M (default L)")
    class_size_estimate: float | None = _setting(None, group=METHOD, order=12, app=APP_NONE, help="your estimate of documents per "
                                                 "class, used to choose I (default: DP estimate)")
    embedding_model: str = _setting(DEFAULT_MODEL, group=METHOD, order=13, choices=tuple(EMBEDDING_MODELS),
                                    help="public embedding model (default %(default)s)")
    seed: int | None = _setting(None, group=PRIVACY, order=3, app=APP_OWN, help="REPRODUCIBLE DEMO ONLY: seed all noise (not for "
                                "release); default: OS entropy")
    noise_sampler: str = _setting(  # "opendp" (vetted, default) or "numpy" (fast); a seed means NumPy
        "opendp", group=PRIVACY, order=4, choices=SAMPLERS, help="opendp: OpenDP's vetted samplers for every noisy "
        "release (default); numpy: NumPy's faster floating-point samplers. A --seed always uses NumPy (OpenDP cannot "
        "be seeded)")
    test_fraction: float = _setting(0.2, group=CORPUS, order=2, help="share of documents held out for evaluation (each "
                                    "assigned on its own by a keyed hash of its text; never touched by a DP step) "
                                    "(default %(default)s)")
    client_fraction: float = _setting(0.0, group=CORPUS, order=3, app=APP_NONE, help="share of the held-out part set aside as "
                                      "unlabelled client data for Deep CORAL (default %(default)s)")
    split_seed: int = _setting(0, group=CORPUS, order=4, app=APP_NONE, help="public seed of the hash split (default %(default)s)")
    epsilon_cap: float | None = _setting(
        None, group=PRIVACY, order=2, option_default=DEFAULT_EPSILON_CAP, app=APP_OWN,
        help="cap on the total ε any one document (person) may spend over ALL releases, app and CLI (default "
             "%(default)s, the app's too): documents new to the persistent ledger get it, and a run whose own ε would "
             "exceed it is refused; documents already in the ledger keep their cap (change it with `ledger --corpus "
             "… --epsilon-cap`)")
    classes: tuple[str, ...] | None = None  # declared PUBLIC class names (demo corpora carry their own)
    person_column: str | None = _setting(  # unit of privacy: one person (this column's ids stay private), else a document
        None, group=CORPUS, order=1, app=APP_OWN, help="unit of privacy = one PERSON: the column identifying whom each document is "
        "about (ids stay private; every mechanism bounds each person's total contribution; the split keeps a person's "
        "documents together). demo:drugs has 'drug' as a documented synthetic person")
    # a user vocabulary FILE as the run folder names it: ``vocabulary`` is then its file name, and this its SHA-256
    # (see to_run_dict; load_vocabulary_for finds and checks the file by them)
    vocabulary_sha256: str | None = None
    # how a corpus FILE's text is decoded (public user input: utf-8, latin-1 or cp1252; see corpus.load_corpus)
    encoding: str = "utf-8"
    # the loader's size limits (corpus.limits.LoadLimits; public settings): None = the deployment's default
    # ($DPKPS_MAX_CORPUS_BYTES / $DPKPS_MAX_DOCUMENTS, else 200 MB / 200,000), 0 = no limit
    max_corpus_bytes: int | None = None
    max_documents: int | None = None

    def __post_init__(self) -> None:
        """Check and normalise every field (docs/DESIGN.md §2; the bounds are :data:`LIMITS`)."""
        object.__setattr__(self, "encoding", check_encoding(self.encoding))
        for name in ("max_corpus_bytes", "max_documents"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ParameterError(f"{name} must be a whole number ≥ 0 (0 = no limit), got {value!r}.")
        if self.classes is not None:
            names = (self.classes,) if isinstance(self.classes, str) else tuple(self.classes)
            object.__setattr__(self, "classes", check_class_names(names))
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
        if self.max_keyphrases_per_doc is not None:
            check_positive_int(self.max_keyphrases_per_doc, "M (keyphrases per document)")
        if self.bandwidth is not None and (not np.isfinite(self.bandwidth) or self.bandwidth < 0):
            raise ParameterError(f"σ (bandwidth) must be ≥ 0, got {self.bandwidth!r}.")
        if self.noise_sampler not in SAMPLERS:
            raise ParameterError(f"Unknown noise sampler {self.noise_sampler!r}; choose one of {', '.join(SAMPLERS)}.")
        if self.temperature < 0:
            raise ParameterError(f"The temperature must be ≥ 0, got {self.temperature!r}.")
        check_cap(self.epsilon_cap)

    def replace(self, **changes: Any) -> "SamplingConfig":
        """A variant with ``changes`` (an iterative method never keeps the histogram density, which only serves
        independent sampling: it falls back to ``auto``)."""
        method, density = changes.get("method", self.method), changes.get("density", self.density)
        if method != "independent" and density == "histogram":
            changes = {**changes, "density": "auto"}
        return dataclasses.replace(self, **changes)

    def validate(self) -> "SamplingConfig":
        """The config itself: it was checked when it was built (kept for callers that chain it)."""
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


SETTING_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SamplingConfig))
"""Every setting :func:`build_sampling_config` accepts by name (the fields of :class:`SamplingConfig`)."""


def split_epsilon(eps_total: float, eps_voc_share: float) -> tuple[float, float]:
    """(ε_voc, ε_kde) of a total ε and the vocabulary's share of it, as the app's budget page sets them
    (docs/DESIGN.md §2: total ε = ε_voc + ε_kde), rounded to 4 decimals so that the two always add up to the total."""
    total = check_epsilon(eps_total, "ε (total)")
    share = float(eps_voc_share)
    if not 0.0 < share < 1.0:
        raise ParameterError(f"The vocabulary's share of ε must be between 0 and 1, got {eps_voc_share!r}.")
    voc = round(total * share, 4)
    return voc, round(total - voc, 4)


def build_sampling_config(base: SamplingConfig | Mapping[str, Any] | None = None, *, paper_settings: bool = False,
                          eps_total: float | None = None, eps_voc_share: float | None = None,
                          **settings: Any) -> SamplingConfig:
    """THE builder of a :class:`SamplingConfig` (docs/ARCHITECTURE.md "One path for a setting"): the CLI's
    options, the app's settings and a comparison's overrides all come through here.

    ``base``: a config, or a mapping of settings (a comparison's overrides, a ``run_config.json`` read back), to
    start from (default: the defaults). ``settings``: fields of :class:`SamplingConfig` by name; an unknown name is a
    :class:`~dpkps_core.errors.ParameterError`. The ε split may be given as ``eps_total`` and ``eps_voc_share``
    (:func:`split_epsilon`, the app's form) instead of ``eps_voc`` and ``eps_kde``. ``paper_settings``: the DP-KPS
    paper's configuration (:data:`PAPER_SETTINGS`) over the rest. The config is checked once, when it is built."""
    if isinstance(base, SamplingConfig):
        merged: dict[str, Any] = base.to_dict()
    else:
        merged = {k: v for k, v in dict(base or {}).items() if k in SETTING_NAMES}
    unknown = sorted(set(settings) - set(SETTING_NAMES))
    if unknown:
        raise ParameterError(f"Unknown sampling setting(s) {', '.join(unknown)}; see SamplingConfig.")
    if eps_total is not None or eps_voc_share is not None:
        if eps_total is None or eps_voc_share is None or {"eps_voc", "eps_kde"} & set(settings):
            raise ParameterError("Give the ε split either as eps_total and eps_voc_share, or as eps_voc and eps_kde.")
        settings["eps_voc"], settings["eps_kde"] = split_epsilon(eps_total, eps_voc_share)
    merged.update(settings)
    if paper_settings:
        merged.update(PAPER_SETTINGS)
    return SamplingConfig(**merged)


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
    keeping their first K terms keeps the K most frequent English words (docs/DESIGN.md §6; chosen by measurement in
    docs/DEFAULTS.md). For the medical glossary and user files the order carries no frequency, so no cut."""
    if not max_terms or vocabulary not in FREQUENCY_ORDERED_VOCABULARIES:
        return None
    return int(max_terms)


PAPER_SETTINGS = dict(
    remove_stopwords=True, junk_filter=False, vocab_max_terms=None, density="rff", bandwidth=1.0,
    features=2000, selection_rule="top-n", vocab_size=1000, terms_per_doc=10,
)
"""The DP-KPS paper's configuration (RFF DP-KDE, σ = 1, fixed I, full GloVe), kept for comparisons."""


def load_config_corpus(config: SamplingConfig) -> Corpus:
    """The corpus a sampling configuration names, with its declared public classes and person column; refuses
    (locally, before anything is spent) a corpus whose public classes were not declared."""
    return require_declared(load_corpus_spec(config.corpus, text_column=config.text_column,
                                             label_column=config.label_column, classes=config.classes,
                                             person_column=config.person_column, encoding=config.encoding,
                                             **load_limits_of(config)))


def load_limits_of(config: SamplingConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The loader's limit arguments a configuration (or a ``run_config.json`` read back) sets (``max_bytes`` /
    ``max_documents`` for :func:`~dpkps_core.corpus.load_corpus`): only those it sets; a limit left at None keeps
    the deployment's default (:class:`~dpkps_core.corpus.limits.LoadLimits`), 0 removes it."""
    get = config.get if isinstance(config, Mapping) else (lambda name: getattr(config, name))
    out: dict[str, Any] = {}
    for setting, argument in (("max_corpus_bytes", "max_bytes"), ("max_documents", "max_documents")):
        value = get(setting)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ParameterError(f"{setting} must be a whole number ≥ 0 (0 = no limit), got {value!r}.")
            out[argument] = value
    return out


def load_vocabulary_for(config: SamplingConfig) -> PublicVocabulary:
    """The public vocabulary V a configuration names, cleaned and frequency-limited as it says."""
    return load_vocabulary(vocabulary_spec_for(config), remove_stopwords=config.remove_stopwords,
                           junk_filter=config.junk_filter, max_terms=config.effective_vocab_max_terms)
