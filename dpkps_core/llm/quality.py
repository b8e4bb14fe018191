"""Is an LLM reply a document? Clean preambles, refuse non-documents and repetition loops (pure functions).

Small models often answer a generation prompt with something that is not the requested document: a request for
input ("I'm ready to help. Please share your article"), a preamble before the text ("Here's a short news
article…"), or a degenerate loop ("walmart-walmart-walmart…"). :func:`clean_reply` strips a leading preamble
line; :func:`document_problem` names what is wrong with what is left (None when it reads as a document);
:func:`screen` does both and raises :class:`NonDocumentReply` — a transient error, so the runner retries the item
and counts it as failed only when every attempt gives a non-document.
"""

from __future__ import annotations

import re
from collections import Counter

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


def document_problem(text: str, *, min_words: int = MIN_WORDS, max_repetition: float = 0.4) -> str | None:
    """Why ``text`` (already cleaned) is not a document, or None when it reads as one."""
    words = _TOKEN.findall(text)
    if len(words) < min_words:
        return f"{NON_DOCUMENT_PREFIX}: the reply has {len(words)} word(s)."
    if _NON_DOCUMENT.search(text[:400]):
        return f"{NON_DOCUMENT_PREFIX}: the reply asks for input or declines instead of writing the document."
    if repetition_share(text) > max_repetition:
        return f"{NON_DOCUMENT_PREFIX}: the reply is a repetition loop."
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
