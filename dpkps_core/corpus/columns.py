"""Which columns hold the text and the label (docs/DESIGN.md §2.0): chosen from the column NAMES only, never from the values.

A column chosen from the values (e.g. the longest one) would let one added row switch it and change every release,
so a name is compared after :func:`_name_key` (case, accents and separators ignored: "Clinical Notes" →
"clinical_notes") against the tiers below; the first tier with a match decides; two matches in that tier are
ambiguous and the loader asks the user (--text-column / --label-column, or the choice on page 1).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Sequence

from dpkps_core.errors import CorpusError

#: Text column tiers; a name ending in "_text" ("review_text", "note_text") also belongs to the first tier.
TEXT_COLUMN_TIERS: tuple[tuple[str, ...], ...] = (
    ("text", "texts", "document", "documents", "doc", "full_text", "document_text"),
    ("note", "notes", "clinical_note", "clinical_notes", "body", "content", "contents", "review", "reviews",
     "summary", "abstract", "description", "article", "report", "message", "comment", "comments", "narrative",
     "transcript", "transcription", "sentence", "passage", "post", "tweet", "email", "letter", "essay", "story"),
)
#: Label column tiers.
LABEL_COLUMN_TIERS: tuple[tuple[str, ...], ...] = (
    ("label", "labels", "class_label", "label_name", "gold_label"),
    ("class", "class_name", "category", "category_name", "target"),
    ("specialty", "medical_specialty", "topic", "condition", "genre", "sentiment", "intent", "department"),
)
#: Person column tiers: names that say a column identifies the person a row belongs to (issue 33 §5). A suggestion
#: only — the person unit is the user's choice — read from the NAMES, never the values (docs/DESIGN.md §2.0).
PERSON_COLUMN_TIERS: tuple[tuple[str, ...], ...] = (
    ("patient_id", "person_id", "subject_id", "mrn", "medical_record_number", "user_id", "customer_id",
     "employee_id", "member_id", "client_id", "author_id", "participant_id", "respondent_id", "account_id"),
    ("patient", "person", "subject", "user", "customer", "employee", "member", "client", "author", "participant",
     "respondent", "pid", "uid"),
)
TEXT_COLUMN_NAMES = tuple(n for tier in TEXT_COLUMN_TIERS for n in tier)
LABEL_COLUMN_NAMES = tuple(n for tier in LABEL_COLUMN_TIERS for n in tier)


def _name_key(name: str) -> str:
    """A column name compared by the name rule: NFKC, accents dropped, lower-case, separators as one "_"."""
    decomposed = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", str(name)))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch)).lower()
    return re.sub(r"[^0-9a-z]+", "_", plain).strip("_")


def _tier_of(name: str, tiers: Sequence[Sequence[str]], *, text_suffix: bool) -> int | None:
    key = _name_key(name)
    for rank, names in enumerate(tiers):
        if key in names or (rank == 0 and text_suffix and key.endswith("_text")):
            return rank
    return None


def _match_by_name(columns: Sequence[str], tiers: Sequence[Sequence[str]], *, text_suffix: bool,
                   exclude: Sequence[str | None] = ()) -> tuple[str | None, list[str]]:
    """(the column chosen by the name rule, the tied candidates when it is ambiguous).

    Only the column NAMES are read (docs/DESIGN.md §2.0): the first tier with a match decides; one match is the choice,
    several are ambiguous (returned, nothing chosen)."""
    ranked: dict[int, list[str]] = {}
    for c in columns:
        if c in exclude:
            continue
        rank = _tier_of(c, tiers, text_suffix=text_suffix)
        if rank is not None:
            ranked.setdefault(rank, []).append(c)
    if not ranked:
        return None, []
    best = ranked[min(ranked)]
    return (best[0], []) if len(best) == 1 else (None, best)


def guess_columns(columns: Sequence[str], *, person_column: str | None = None
                  ) -> tuple[str | None, str | None]:
    """The (text, label) columns the name rule picks from ``columns`` (either None when no name or several
    names match; see :data:`TEXT_COLUMN_TIERS`, :data:`LABEL_COLUMN_TIERS`). Names only, never values."""
    cols = [str(c) for c in columns]
    text, _ = _match_by_name(cols, TEXT_COLUMN_TIERS, text_suffix=True, exclude=(person_column,))
    label, _ = _match_by_name(cols, LABEL_COLUMN_TIERS, text_suffix=False, exclude=(text, person_column))
    return text, label


def suggest_person_column(columns: Sequence[str], *, exclude: Sequence[str | None] = ()) -> str | None:
    """The column whose NAME says it identifies a person (:data:`PERSON_COLUMN_TIERS`: patient_id, mrn, user…),
    or None when none or several names fit equally. Names only, never values (docs/DESIGN.md §2.0)."""
    person, _ = _match_by_name([str(c) for c in columns], PERSON_COLUMN_TIERS, text_suffix=False, exclude=exclude)
    return person


def columns_of(df: Any) -> list[str]:
    """A table's column names as strings, in file order."""
    return [str(c) for c in df.columns]


class ColumnChoiceError(CorpusError):
    """The loader cannot choose a column from the names and asks the user to (docs/DESIGN.md §2.0). Worded for the command
    line (``--text-column NAME``) by default; :meth:`in_app` words the same request for page 1's pickers, so
    neither interface names the other's controls."""

    #: Where the template says how to choose (a sentinel: column names may hold braces).
    SLOT = "\x00how\x00"
    #: How to choose each column, per interface.
    HOW = {"text": ("with --text-column NAME", "with the “Text column” choice above"),
           "label": ("with --label-column NAME", "with the “Label column” choice above")}

    def __init__(self, template: str, which: str, *, app: bool = False) -> None:
        self.template, self.which, self.app = template, which, app
        super().__init__(template.replace(self.SLOT, self.HOW[which][1 if app else 0]))

    def in_app(self) -> "ColumnChoiceError":
        """The same error worded for the app's page 1."""
        return ColumnChoiceError(self.template, self.which, app=True)


def select_columns(
    df: Any, text_column: str | None, label_column: str | None, person_column: str | None = None
) -> tuple[list[Any], list[Any], str, str]:
    """Resolve the text and label columns of a DataFrame (:func:`choose_columns`) and return their values."""
    text_column, label_column = choose_columns(columns_of(df), text_column, label_column, person_column)
    df = df.loc[:, ~df.columns.duplicated()]
    return df[text_column].tolist(), df[label_column].tolist(), text_column, label_column


def choose_columns(
    columns: Sequence[str], text_column: str | None, label_column: str | None, person_column: str | None = None
) -> tuple[str, str]:
    """Resolve the (text, label) columns: given, or chosen from the column NAMES alone.

    A column chosen from the values (e.g. the longest one) would let one added row switch it and change every
    release (docs/DESIGN.md §2.0), so when no name or several names match, the user is asked instead."""
    cols = [str(c) for c in columns]
    if not cols:
        raise CorpusError("The file has no columns; check that it has a header row.")
    listed = ", ".join(cols)
    if text_column is None:
        text_column, tied = _match_by_name(cols, TEXT_COLUMN_TIERS, text_suffix=True, exclude=(person_column,))
        if tied:
            raise ColumnChoiceError(
                f"Several columns could hold the document text ({', '.join(tied)}); choose the text column "
                f"{ColumnChoiceError.SLOT} from: {listed}.", "text")
        if text_column is None:
            raise ColumnChoiceError(
                "No text column was found (the column is chosen from its name, e.g. text, document, notes, body, "
                f"content, review, summary); choose the text column {ColumnChoiceError.SLOT} from: {listed}.",
                "text")
    elif text_column not in cols:
        raise CorpusError(f"Column '{text_column}' was not found; available columns: {listed}.")
    if label_column is None:
        label_column, tied = _match_by_name(cols, LABEL_COLUMN_TIERS, text_suffix=False,
                                            exclude=(text_column, person_column))
        if tied:
            raise ColumnChoiceError(
                f"Several columns could hold the class label ({', '.join(tied)}); choose the label column "
                f"{ColumnChoiceError.SLOT} from: {listed}.", "label")
        if label_column is None:
            raise ColumnChoiceError(
                "No label column was found (looked for names such as label, class, category, target, specialty, "
                f"topic); choose the label column {ColumnChoiceError.SLOT} from: {listed}.", "label")
    elif label_column not in cols:
        raise CorpusError(f"Column '{label_column}' was not found; available columns: {listed}.")
    if label_column == text_column:
        raise CorpusError("The text column and the label column must be different columns.")
    return text_column, label_column

