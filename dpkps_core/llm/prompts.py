"""Prompt templates for the LLM writing step (docs/DESIGN.md §2.5, DP-KPS paper §2 "Prompting the LLM").

The LLM call is post-processing of the DP keyphrase sequences, so a prompt may contain ONLY the public
template, the document type, the DP sequence, public few-shot examples and the sequence's label — the class names
are public input, declared by the user and released with the data (docs/DESIGN.md §2), so they are in the prompt by
default (:data:`DEFAULT_INCLUDE_LABEL`; the user may leave them out). Nothing here reads the private corpus from disk; the few-shot loader
refuses a file that is the private corpus itself, and :class:`PrivateSpanIndex` (given the private texts by the
caller) refuses examples that contain a private document or share a long span with one (docs/DESIGN.md §2.5).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import string
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from dpkps_core.method.matching import tokenize
from dpkps_core.method.sequences import KeyphraseSequence
from dpkps_core.errors import ParameterError

ChatMessage = dict[str, str]

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant who writes realistic documents."
DEFAULT_TEMPLATE = (
    "Write {doc_type} that contains the following terms: {keyphrases}.\n"
    "Write only the document itself, with no title, preamble or explanation."
)
LABEL_SENTENCE = "The document is about: {label}."
FEW_SHOT_HEADER = "Here are examples of the desired style and format:"
#: Class names in the prompt by default: they are declared PUBLIC (page 1, ``--classes``) and released with the
#: synthetic data, and they are what makes a small model write on topic (issue-22 measurements in README).
DEFAULT_INCLUDE_LABEL = True
ALLOWED_FIELDS = frozenset({"doc_type", "keyphrases", "label"})
MAX_DOC_TYPE_CHARS = 200
MAX_TEMPLATE_CHARS = 4000
MAX_FEW_SHOT = 20
MAX_FEW_SHOT_CHARS = 4000
FEW_SHOT_SUFFIXES = (".csv", ".jsonl", ".txt")
#: A few-shot example sharing a run of this many tokens (after the project's normalisation) with a private
#: document is refused (docs/DESIGN.md §2.5: few-shot examples come from a PUBLIC set, never the private corpus).
FEW_SHOT_SPAN = 8


def read_sequences(path: str | os.PathLike[str]) -> list[KeyphraseSequence]:
    """Read ``sequences.jsonl`` (one object per line); ids must be unique."""
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"Sequences file {p} does not exist; run the sampling step first.")
    out: list[KeyphraseSequence] = []
    seen: set[str] = set()
    with p.open("r", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise ParameterError(f"{p.name} line {lineno} is not valid JSON.") from None
            seq = KeyphraseSequence.from_mapping(obj, where=f"{p.name} line {lineno}")
            if seq.id in seen:
                raise ParameterError(f"{p.name} line {lineno} repeats id {seq.id!r}; ids must be unique.")
            seen.add(seq.id)
            out.append(seq)
    if not out:
        raise ParameterError(f"Sequences file {p.name} holds no sequences.")
    return out


def as_sequence(sequence: KeyphraseSequence | Mapping[str, Any]) -> KeyphraseSequence:
    """Accept a :class:`KeyphraseSequence` or its dict form."""
    return sequence if isinstance(sequence, KeyphraseSequence) else KeyphraseSequence.from_mapping(sequence)


@dataclasses.dataclass(frozen=True)
class FewShotExample:
    """A PUBLIC example document (client-provided), optionally with its keyphrases."""

    text: str
    keyphrases: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class PromptConfig:
    """Public prompt settings.

    Attributes:
        doc_type: document type in words, with its article ("a medical record", "a news article").
        template: user-message template with ``{doc_type}``, ``{keyphrases}`` and optionally ``{label}``.
        system_prompt: system message ("" for none).
        few_shot: public examples shown before the request.
        include_label: put the sequence's (public, declared) class name in the prompt; default
            :data:`DEFAULT_INCLUDE_LABEL` (on), False leaves class names out.
        separator: how keyphrases are joined.
    """

    doc_type: str = "a document"
    template: str = DEFAULT_TEMPLATE
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    few_shot: tuple[FewShotExample, ...] = ()
    include_label: bool = DEFAULT_INCLUDE_LABEL
    separator: str = ", "

    def __post_init__(self) -> None:
        doc_type = (self.doc_type or "").strip()
        if not doc_type:
            raise ParameterError("The document type is empty; say what to write, e.g. 'a medical record'.")
        if len(doc_type) > MAX_DOC_TYPE_CHARS:
            raise ParameterError(f"The document type is longer than {MAX_DOC_TYPE_CHARS} characters.")
        object.__setattr__(self, "doc_type", doc_type)
        if len(self.template) > MAX_TEMPLATE_CHARS:
            raise ParameterError(f"The prompt template is longer than {MAX_TEMPLATE_CHARS} characters.")
        fields = _template_fields(self.template)
        if "keyphrases" not in fields:
            raise ParameterError("The prompt template must contain {keyphrases}.")
        unknown = fields - ALLOWED_FIELDS
        if unknown:
            raise ParameterError(
                f"The prompt template uses unknown field(s) {sorted(unknown)}; allowed: {sorted(ALLOWED_FIELDS)}."
            )
        if "label" in fields and not self.include_label:
            raise ParameterError(
                "The prompt template uses {label} but class names are left out of the prompt; include them or "
                "remove {label} from the template."
            )
        object.__setattr__(self, "few_shot", tuple(self.few_shot))
        if len(self.few_shot) > MAX_FEW_SHOT:
            raise ParameterError(f"At most {MAX_FEW_SHOT} few-shot examples are allowed.")
        if not isinstance(self.include_label, bool):
            raise ParameterError("include_label must be True or False.")

    def to_dict(self) -> dict[str, Any]:
        """Public, JSON-ready description (few-shot examples counted, not copied)."""
        return {
            "doc_type": self.doc_type,
            "template": self.template,
            "system_prompt": self.system_prompt,
            "few_shot_examples": len(self.few_shot),
            "include_label": self.include_label,
            "separator": self.separator,
        }


def _template_fields(template: str) -> set[str]:
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError:
        raise ParameterError("The prompt template has unbalanced braces; write {{ and }} for literal braces.") from None
    fields: set[str] = set()
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if not name or spec or conv:
            raise ParameterError("Template fields must be plain names like {keyphrases}.")
        fields.add(name)
    return fields


def render_prompt(sequence: KeyphraseSequence | Mapping[str, Any], config: PromptConfig) -> list[ChatMessage]:
    """The exact chat messages sent for one sequence (system, then user)."""
    seq = as_sequence(sequence)
    values = {"doc_type": config.doc_type, "keyphrases": config.separator.join(seq.keyphrases)}
    if config.include_label:
        values["label"] = seq.label
    user = config.template.format(**values)
    if config.include_label and "{label}" not in config.template and seq.label:
        user = f"{user}\n{LABEL_SENTENCE.format(label=seq.label)}"
    if config.few_shot:
        blocks = [FEW_SHOT_HEADER]
        for i, ex in enumerate(config.few_shot, start=1):
            head = f"Example {i}"
            if ex.keyphrases:
                head += f" (terms: {config.separator.join(ex.keyphrases)})"
            blocks.append(f"{head}:\n{ex.text}")
        user = "\n\n".join(blocks) + "\n\nNow the new document.\n" + user
    messages: list[ChatMessage] = []
    if config.system_prompt.strip():
        messages.append({"role": "system", "content": config.system_prompt})
    messages.append({"role": "user", "content": user})
    return messages


def format_messages(messages: Sequence[Mapping[str, str]]) -> str:
    """Readable text form of chat messages."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def preview(sequence: KeyphraseSequence | Mapping[str, Any], config: PromptConfig) -> str:
    """The exact prompt for ``sequence`` as text, for showing before any call."""
    return format_messages(render_prompt(sequence, config))


# --------------------------------------------------------------------------------------------------------------
# Public few-shot examples


def file_fingerprint(path: str | os.PathLike[str]) -> str:
    """SHA-256 hex digest of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_not_private(
    path: str | os.PathLike[str],
    *,
    private_corpus_path: str | os.PathLike[str] | None = None,
    private_fingerprints: Iterable[str] = (),
) -> None:
    """Refuse (ParameterError) a few-shot file that is the private corpus (same path or same content)."""
    p = Path(path)
    fingerprints = {f.lower() for f in private_fingerprints if f}
    if private_corpus_path is not None:
        q = Path(private_corpus_path)
        if q.exists():
            if p.resolve() == q.resolve() or (q.is_file() and p.exists() and os.path.samefile(p, q)):
                raise ParameterError(
                    "The few-shot file is the private corpus; few-shot examples must come from a separate PUBLIC file."
                )
            if q.is_dir() and q.resolve() in p.resolve().parents:
                raise ParameterError(
                    "The few-shot file lies inside the private corpus folder; use a separate PUBLIC examples file."
                )
            if q.is_file():
                fingerprints.add(file_fingerprint(q))
    if fingerprints and file_fingerprint(p) in fingerprints:
        raise ParameterError(
            "The few-shot file has the same content as the private corpus; use a separate PUBLIC examples file."
        )


_HASH_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd 64-bit constant (golden ratio): polynomial hash base


def _window_hashes(ids: np.ndarray, span: int, powers: np.ndarray) -> np.ndarray:
    """64-bit polynomial hashes of every ``span``-token window of ``ids`` (wrapping arithmetic, vectorised)."""
    if ids.size < span:
        return np.zeros(0, dtype=np.uint64)
    windows = np.lib.stride_tricks.sliding_window_view(ids, span)
    with np.errstate(over="ignore"):
        return (windows * powers).sum(axis=1, dtype=np.uint64)


class PrivateSpanIndex:
    """The private corpus's ``span``-token shingles (tokens of :func:`dpkps_core.method.matching.tokenize`: NFKC,
    lower-case), hashed into a sorted array ONCE, so that few-shot examples can be checked against every private
    document cheaply (docs/DESIGN.md §2.5). Local and in memory only; its errors never quote private text.

    An example is refused when it shares a run of ≥ ``span`` tokens with a private document, or contains a whole
    private document shorter than ``span`` tokens. (A 64-bit hash collision could refuse an innocent example —
    about 2⁻⁶⁴ per pair of windows — never accept a copy.)"""

    def __init__(self, texts: Iterable[str], *, span: int = FEW_SHOT_SPAN) -> None:
        if not isinstance(span, int) or span < 2:
            raise ParameterError("The few-shot overlap span must be an integer of at least 2 tokens.")
        self.span = span
        self._ids: dict[str, int] = {}
        self._powers = _HASH_MULTIPLIER ** np.arange(span, dtype=np.uint64)
        self._short: dict[int, set[tuple[int, ...]]] = {}
        chunks: list[np.ndarray] = []
        lengths: list[int] = []
        for text in texts:
            toks = tokenize(str(text))
            ids = np.fromiter((self._ids.setdefault(t, len(self._ids) + 1) for t in toks), dtype=np.uint64,
                              count=len(toks))
            if ids.size >= span:
                chunks.append(ids)
                lengths.append(ids.size)
            elif ids.size:
                self._short.setdefault(int(ids.size), set()).add(tuple(int(i) for i in ids))
        if chunks:  # one pass over the concatenation; windows that cross a document boundary are dropped
            flat = np.concatenate(chunks)
            ends = np.cumsum(lengths)
            starts = np.arange(flat.size - span + 1)
            doc_end = ends[np.searchsorted(ends, starts, side="right")]
            self._hashes = np.unique(_window_hashes(flat, span, self._powers)[starts + span <= doc_end])
        else:
            self._hashes = np.zeros(0, dtype=np.uint64)

    def _encode(self, text: str) -> np.ndarray:
        toks = tokenize(str(text))  # tokens the corpus never uses get 0: no private window can match them
        return np.fromiter((self._ids.get(t, 0) for t in toks), dtype=np.uint64, count=len(toks))

    def problem(self, text: str) -> str | None:
        """Why ``text`` may not be a few-shot example (without quoting anything), or None."""
        ids = self._encode(text)
        h = _window_hashes(ids, self.span, self._powers)
        if h.size and self._hashes.size:
            pos = np.searchsorted(self._hashes, h)
            pos[pos >= self._hashes.size] = 0
            if np.any(self._hashes[pos] == h):
                return f"shares a run of {self.span} or more words with a document of the private corpus"
        for n, docs in self._short.items():
            if ids.size >= n:
                windows = np.lib.stride_tricks.sliding_window_view(ids, n)
                if any(tuple(int(i) for i in w) in docs for w in windows):
                    return "contains a whole document of the private corpus"
        return None

    def check(self, examples: Iterable[str | FewShotExample]) -> None:
        """Raise :class:`ParameterError` for the first example that contains a private document or shares a long
        span with one; the message names the example's position only."""
        for i, ex in enumerate(examples, start=1):
            why = self.problem(ex.text if isinstance(ex, FewShotExample) else str(ex))
            if why:
                raise ParameterError(
                    f"Few-shot example {i} {why} (checked on this machine; the text is not shown). Few-shot examples "
                    "must come from a separate PUBLIC set: remove or replace it.")


def check_examples_not_private(examples: Iterable[str | FewShotExample],
                               private: "PrivateSpanIndex | Iterable[str] | None", *,
                               span: int = FEW_SHOT_SPAN) -> None:
    """Refuse few-shot ``examples`` that contain a private document or share ≥ ``span`` tokens with one
    (``private``: the private texts, or an index built from them once). No-op when ``private`` is None."""
    if private is None:
        return
    index = private if isinstance(private, PrivateSpanIndex) else PrivateSpanIndex(private, span=span)
    index.check(examples)


def _split_keyphrases(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(str(v).strip() for v in value if str(v).strip())
    text = str(value).strip()
    if not text:
        return ()
    if text.startswith("["):
        try:
            loaded = json.loads(text)
            if isinstance(loaded, list):
                return tuple(str(v).strip() for v in loaded if str(v).strip())
        except json.JSONDecodeError:
            pass
    sep = ";" if ";" in text else ("|" if "|" in text else ",")
    return tuple(part.strip() for part in text.split(sep) if part.strip())


def load_few_shot(
    path: str | os.PathLike[str],
    *,
    text_column: str = "text",
    keyphrases_column: str = "keyphrases",
    private_corpus_path: str | os.PathLike[str] | None = None,
    private_fingerprints: Iterable[str] = (),
    max_examples: int = 6,
    private_texts: "PrivateSpanIndex | Iterable[str] | None" = None,
) -> tuple[FewShotExample, ...]:
    """Load PUBLIC few-shot examples from CSV/JSONL (text column, optional keyphrases) or .txt (blank-line separated).

    Refuses the private corpus file (same resolved path or same content hash, see :func:`check_not_private`) and,
    given ``private_texts``, every example that contains a private document or shares a long span with one
    (:func:`check_examples_not_private`).
    """
    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"Few-shot file {p} does not exist.")
    check_not_private(p, private_corpus_path=private_corpus_path, private_fingerprints=private_fingerprints)
    return parse_few_shot(
        p.read_bytes(),
        filename=p.name,
        text_column=text_column,
        keyphrases_column=keyphrases_column,
        max_examples=max_examples,
        private_texts=private_texts,
    )


def parse_few_shot(
    data: bytes,
    *,
    filename: str,
    text_column: str = "text",
    keyphrases_column: str = "keyphrases",
    private_fingerprints: Iterable[str] = (),
    max_examples: int = 6,
    private_texts: "PrivateSpanIndex | Iterable[str] | None" = None,
) -> tuple[FewShotExample, ...]:
    """Parse an uploaded few-shot file's bytes (the app's uploader); ``filename`` gives the format. Given
    ``private_texts``, refuses examples that contain a private document or share a long span with one."""
    if not isinstance(max_examples, int) or not 1 <= max_examples <= MAX_FEW_SHOT:
        raise ParameterError(f"max_examples must be an integer from 1 to {MAX_FEW_SHOT}.")
    suffix = Path(filename).suffix.lower()
    if suffix not in FEW_SHOT_SUFFIXES:
        raise ParameterError(f"Few-shot file must be {', '.join(FEW_SHOT_SUFFIXES)}; got {suffix or 'no suffix'}.")
    fingerprints = {f.lower() for f in private_fingerprints if f}
    if fingerprints and hashlib.sha256(data).hexdigest() in fingerprints:
        raise ParameterError(
            "The few-shot file has the same content as the private corpus; use a separate PUBLIC examples file."
        )
    name = Path(filename).name
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ParameterError(f"Few-shot file {name} is not UTF-8 text.") from None
    rows: list[tuple[Any, Any]] = []
    if suffix == ".txt":
        rows = [(block, None) for block in _blank_line_blocks(raw)]
    elif suffix == ".jsonl":
        for lineno, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                raise ParameterError(f"{name} line {lineno} is not valid JSON.") from None
            if not isinstance(obj, dict) or text_column not in obj:
                raise ParameterError(f"{name} line {lineno} has no '{text_column}' field.")
            rows.append((obj[text_column], obj.get(keyphrases_column)))
    else:
        reader = csv.DictReader(io.StringIO(raw))
        if not reader.fieldnames or text_column not in reader.fieldnames:
            raise ParameterError(f"{name} has no '{text_column}' column.")
        for row in reader:
            rows.append((row.get(text_column), row.get(keyphrases_column)))
    examples: list[FewShotExample] = []
    for text, kps in rows:
        text = str(text or "").strip()
        if not text:
            continue
        examples.append(FewShotExample(text=text[:MAX_FEW_SHOT_CHARS], keyphrases=_split_keyphrases(kps)))
        if len(examples) >= max_examples:
            break
    if not examples:
        raise ParameterError(f"Few-shot file {name} holds no examples.")
    check_examples_not_private(examples, private_texts)
    return tuple(examples)


def _blank_line_blocks(raw: str) -> list[str]:
    blocks, current = [], []
    for line in raw.splitlines():
        if line.strip():
            current.append(line.rstrip())
        elif current:
            blocks.append("\n".join(current))
            current = []
    if current:
        blocks.append("\n".join(current))
    return blocks
