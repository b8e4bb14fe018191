"""Is an LLM reply a document? Clean preambles, refuse non-documents and repetition loops (pure functions).

Small models often answer a generation prompt with something that is not the requested document: a request for
input ("I'm ready to help. Please share your article"), a preamble before the text ("Here's a short news
article…"), a degenerate loop ("walmart-walmart-walmart…", "St. Regina, St. Regina, St. Regina, Adreno, Adreno…")
or a bare list of names or terms ("Adreno, Qualcomm, St. Regina, Samsung, Nokia, …"). :func:`clean_reply` strips a
leading preamble line; :func:`document_problem` names what is wrong with what is left (None when it reads as a
document);
:func:`screen` does both and raises :class:`NonDocumentReply` — a transient error, so the runner retries the item
and counts it as failed only when every attempt gives a non-document.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from dpkps_core.llm.backends import TransientLLMError

#: Prefix of every failure message this module produces (the app counts failures by it).
NON_DOCUMENT_PREFIX = "Not a document"

#: Fewest words a reply must keep after cleaning.
MIN_WORDS = 5

_PREAMBLE = re.compile(
    r"""^\s*(?:
        (?:sure|certainly|of\ course|okay|ok|absolutely|great)\b[^\n]{0,80}?(?:[:.!]|\n)   # "Sure! ...:" / "Sure."
      | (?:here(?:'s|’s|\ is|\ are)|below\ is|this\ is)\b[^\n]{0,120}?(?::|\n|\.\s*\n)   # "Here's a short news article:"
    )\s*""",
    re.IGNORECASE | re.VERBOSE,
)
_TITLE_LINE = re.compile(r"^\s*(?:title|headline)\s*:\s*[^\n]*\n", re.IGNORECASE)
_WRAPPING_QUOTES = re.compile(r'^\s*["“](.*)["”]\s*$', re.DOTALL)

_NON_DOCUMENT = re.compile(
    r"""(?:
        \b(?:please|kindly)\s+(?:share|provide|send|paste|give|upload)\b
      | \b(?:i'?m|i\ am)\s+(?:ready|happy|glad)\s+to\s+help\b
      | ^\s*(?:i'?m|i\ am)\s+here\s+to\s+(?:help|provide|assist|write)\b
      | \bwhat\s+would\s+you\s+like\s+me\s+to\b
      | \b(?:i\ can(?:'|no)t|i\ cannot|i'?m\ unable\ to|i\ am\ unable\ to|i\ won'?t)\s+(?:help|write|assist|comply|create|provide)\b
      | \bas\ an\ ai\b
      | \bcould\ you\ (?:please\ )?(?:share|provide|clarify)\b
    )""",
    re.IGNORECASE | re.VERBOSE | re.MULTILINE,
)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
#: A reply that speaks ABOUT the document instead of being one ("The article is about politics."): such an opening
#: in a reply of fewer than :data:`MAX_META_WORDS` words is a one-line summary, not the document asked for.
_META = re.compile(
    r"""^\s*(?:the|this|that|my)\s+(?:news\s+)?(?:article|document|text|review|story|passage|piece|post|note|report
        |essay|summary|email|letter|message)\s+(?:is\s+about|was\s+about|is\s+on|discusses|describes|talks\s+about
        |covers|focuses\s+on|deals\s+with|is\s+a\s+(?:summary|review)\s+of|would\s+be\s+about|will\s+(?:discuss|cover))\b""",
    re.IGNORECASE | re.VERBOSE,
)
#: Fewest words a reply opening like a description of the document needs to count as the document itself.
MAX_META_WORDS = 25

#: A unit of 1 word repeated this many times in a row is a loop ("Adreno" ×6). Real prose has "very very very very
#: very" and "no no no no no" (BBC demo corpus), so one word needs more repeats than a phrase.
MIN_REPEATS_ONE_WORD = 6
#: A unit of 2 to :data:`MAX_LOOP_UNIT` words repeated this many times in a row is a loop ("St. Regina" ×3).
MIN_REPEATS_PHRASE = 3
MAX_LOOP_UNIT = 6
#: Share of the words inside immediate repeats (any unit up to MAX_LOOP_UNIT words) that makes a reply a loop
#: even when no single unit repeats often ("St. Regina, St. Regina, Adreno, Adreno, Nokia, Nokia, …").
MAX_STUTTER_SHARE = 0.3
#: A list reply: at least this many comma/semicolon/line-separated items…
MIN_LIST_ITEMS = 5
#: …of at most this many words each on average…
MAX_LIST_ITEM_WORDS = 3.0
#: …and at most this share of function words among all its words (English prose has about 40 %, a list ~0 %).
MAX_LIST_FUNCTION_SHARE = 0.12
#: Share of capitalised words above which a list is called a list of names.
MIN_NAME_CAPITALS = 0.6
#: Common English function words and auxiliary verbs (a fixed public list): what a list of names lacks.
FUNCTION_WORDS = frozenset("""
a an the and or but nor so yet if then than that this these those there here which who whom whose what when where why
how of in on at to for from by with about into onto over under after before between through during without within
against among around up down out off as is are was were be been being am has have had having do does did done will
would shall should can could may might must not no it its he him his she her they them their we us our you your i me
my mine also very just more most such only own same too said says say
""".split())
_LIST_SPLIT = re.compile(r"\s*(?:[,;•|]|\n+|\s-\s)\s*")


class NonDocumentReply(TransientLLMError):
    """The model answered, but not with a document (retried like any transient failure)."""


def clean_reply(text: str) -> str:
    """The reply without a leading preamble line ("Here's a short news article:"), a "Title:" line or wrapping
    quotes. Text that is only a preamble is returned empty."""
    out = text.strip()
    for _ in range(2):  # "Sure! Here's the article:" is two preambles
        m = _PREAMBLE.match(out)
        if not m:
            break
        out = out[m.end():].lstrip()
    out = _TITLE_LINE.sub("", out, count=1).strip()
    m = _WRAPPING_QUOTES.match(out)
    if m and '"' not in m.group(1) and "“" not in m.group(1):
        out = m.group(1).strip()
    return out


def repetition_share(text: str, *, n: int = 4) -> float:
    """Share of the reply's word n-grams that repeat an earlier one (0 for short texts). A loop such as
    "walmart-walmart-walmart…" or one sentence over and over scores near 1; ordinary prose near 0."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    if len(tokens) < 2 * n + 2:
        return 0.0
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams)


def _token_ids(tokens: list[str]) -> np.ndarray:
    """Lower-cased tokens as integer ids (equal words, equal ids), for vectorised comparisons."""
    ids: dict[str, int] = {}
    return np.fromiter((ids.setdefault(t.lower(), len(ids)) for t in tokens), dtype=np.int64, count=len(tokens))


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start indices and lengths of the runs of True in a boolean array."""
    padded = np.concatenate(([False], mask, [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return edges[::2], edges[1::2] - edges[::2]


@dataclasses.dataclass(frozen=True)
class Repeats:
    """Immediate repeats in a reply (see :func:`immediate_repeats`)."""

    word: int        # most occurrences in a row of a one-word unit
    phrase: int      # most occurrences in a row of a 2…MAX_LOOP_UNIT-word unit
    share: float     # share of the words that repeat the unit just before them
    at_end: bool     # the reply ends inside a unit said at least MIN_REPEATS_PHRASE times in a row


def immediate_repeats(text: str, *, max_unit: int = MAX_LOOP_UNIT) -> Repeats:
    """Loops of a short unit said again right after itself, over word tokens (case-folded, punctuation ignored).

    "St. Regina, St. Regina, St. Regina" is the 2-word unit ``st regina``
    three times; "Adreno, Adreno, Adreno, Adreno" the 1-word unit four times. For a unit of u words, a position i
    with token[i] = token[i + u] continues a repeat; a run of r·u such positions is r + 1 occurrences in a row.
    """
    ids = _token_ids(_TOKEN.findall(text))
    n = ids.size
    best_word = best_phrase = 1
    at_end = False
    covered = np.zeros(n, dtype=bool)
    for u in range(1, max_unit + 1):
        if n < 2 * u:
            break
        same = ids[:-u] == ids[u:]
        starts, lengths = _runs(same)
        if lengths.size == 0:
            continue
        repeats = lengths // u + 1
        last = starts + u + lengths == n  # a run whose repeat reaches the last word (a loop cut by the budget)
        at_end = at_end or bool(np.any(last & (lengths >= (MIN_REPEATS_PHRASE - 1) * u)))
        if u == 1:
            best_word = max(best_word, int(repeats.max()))
        else:
            best_phrase = max(best_phrase, int(repeats.max()))
        for st, ln in zip(starts[lengths >= u], lengths[lengths >= u]):  # a whole unit repeated at least once
            covered[st + u: st + u + ln] = True
    return Repeats(best_word, best_phrase, float(covered.mean()) if n else 0.0, at_end)


def list_reply(text: str) -> str | None:
    """"names" or "terms" when ``text`` is a bare list — at least :data:`MIN_LIST_ITEMS` items separated by
    commas, semicolons, bullets or line breaks, :data:`MAX_LIST_ITEM_WORDS` words an item or fewer on average, and
    almost no function words (at most :data:`MAX_LIST_FUNCTION_SHARE`) — else None. "names" when most of its
    words are capitalised."""
    items = [it for it in _LIST_SPLIT.split(text.strip().rstrip(".…!")) if _TOKEN.search(it)]
    if len(items) < MIN_LIST_ITEMS:
        return None
    words = _TOKEN.findall(text)
    if not words or len(words) / len(items) > MAX_LIST_ITEM_WORDS:
        return None
    function_share = sum(1 for w in words if w.lower() in FUNCTION_WORDS) / len(words)
    if function_share > MAX_LIST_FUNCTION_SHARE:
        return None
    letters = [w for w in words if w[0].isalpha()]
    capitals = sum(1 for w in letters if w[0].isupper()) / max(len(letters), 1)
    return "names" if capitals >= MIN_NAME_CAPITALS else "terms"


def document_problem(text: str, *, min_words: int = MIN_WORDS, max_repetition: float = 0.4) -> str | None:
    """Why ``text`` (already cleaned) is not a document, or None when it reads as one.

    Refused: fewer than ``min_words`` words; a request for input or a refusal; a short reply that describes the
    document instead of being one ("The article is about politics.", under :data:`MAX_META_WORDS` words); a
    repetition loop — many repeated
    4-grams (:func:`repetition_share`), a word said :data:`MIN_REPEATS_ONE_WORD` times in a row, a 2–6-word unit
    :data:`MIN_REPEATS_PHRASE` times in a row, a reply that ends inside a unit said that often (a loop the token
    budget cut off), or more than :data:`MAX_STUTTER_SHARE` of the words repeating the unit just before them
    (:func:`immediate_repeats`); a bare list of names or terms (:func:`list_reply`)."""
    words = _TOKEN.findall(text)
    if len(words) < min_words:
        return f"{NON_DOCUMENT_PREFIX}: the reply has {len(words)} word(s)."
    if _NON_DOCUMENT.search(text[:400]):
        return f"{NON_DOCUMENT_PREFIX}: the reply asks for input or declines instead of writing the document."
    if len(words) < MAX_META_WORDS and _META.match(text):
        return f"{NON_DOCUMENT_PREFIX}: the reply describes the document in one line instead of writing it."
    if repetition_share(text) > max_repetition:
        return f"{NON_DOCUMENT_PREFIX}: the reply is a repetition loop."
    rep = immediate_repeats(text)
    if (rep.word >= MIN_REPEATS_ONE_WORD or rep.phrase >= MIN_REPEATS_PHRASE or rep.at_end
            or rep.share > MAX_STUTTER_SHARE):
        return f"{NON_DOCUMENT_PREFIX}: the reply is a repetition loop (words repeated right after themselves)."
    kind = list_reply(text)
    if kind is not None:
        return f"{NON_DOCUMENT_PREFIX}: the reply is a list of {kind}, not prose."
    return None


def screen(text: str) -> str:
    """The cleaned reply, or :class:`NonDocumentReply` when what is left is not a document."""
    cleaned = clean_reply(text)
    problem = document_problem(cleaned)
    if problem is not None:
        raise NonDocumentReply(problem)
    return cleaned


def is_non_document_failure(message: str) -> bool:
    """True for a failure message written by :func:`screen` (the model answered, but never with a document)."""
    return str(message).startswith(NON_DOCUMENT_PREFIX)
