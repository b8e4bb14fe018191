"""The audit's canaries (docs/PRIVACY.md "Empirical audit"): rare public terms planted as new units of D⁺ and D+k,
optionally behind an in-distribution prefix ([Canary]: a prefix drawn from a training document of the canary's
class, the rare terms as its suffix). PRIVATE: the prefixes live in the neighbours' rows only, never in an output.
"""

from __future__ import annotations

from typing import Any, Sequence

from dpkps_core.audit.neighbours import _CanaryMaker, canary_rows, document_keys
from dpkps_core.audit.raw import CANARY_PERSON
from dpkps_core.audit.trials import _Neighbour
from dpkps_core.method.config import LIMITS
from dpkps_core.corpus import Corpus

#: The audit's context (:class:`dpkps_core.audit.stages.AuditContext`: settings, config, raw rows, vocabulary, rng,
#: classes, the release runner); typed loosely here, since the stages import this module.
AuditContext = Any

#: Draws of a canary before the split keeps it in the training part (each draw is a valid trial).
_CANARY_ATTEMPTS = 6


def _prefix_size(ctx: AuditContext) -> int:
    """Rare public terms per exposure canary when it has an in-distribution prefix: the setting, else half of S
    (at least 1), so that the prefix's own terms leave room for the suffix among the S a document contributes."""
    return ctx.settings.canary_terms or max(1, ctx.config.terms_per_doc // 2)


def canary_prefixes(ctx: AuditContext, train: Corpus, k: int) -> list[str]:
    """One in-distribution prefix per exposure canary ([Canary]): the first ``canary_prefix_words`` words of a
    randomly drawn training document of the canary's class (its first class, as :func:`plant_canaries` rotates them),
    shortened word by word until at most S − (the suffix's terms) distinct vocabulary terms match in it. PRIVATE:
    the prefixes live in the neighbours' rows only, never in the audit's outputs."""
    words, S = ctx.settings.canary_prefix_words, ctx.config.terms_per_doc
    room = max(0, S - _prefix_size(ctx))
    out = []
    for j in range(k):
        cls = ctx.classes[j % len(ctx.classes)]
        pool = [t for t, y in zip(train.texts, train.labels) if y == cls] or list(train.texts)
        if not pool:
            out.append("")
            continue
        toks = pool[int(ctx.rng.integers(len(pool)))].split()[:words]
        while toks and len(ctx.vocabulary.matcher.first_distinct([" ".join(toks)], S,
                                                                  max_chars=LIMITS["max_chars_per_doc"])[0]) > room:
            toks = toks[:-1]
        out.append(" ".join(toks))
    return out


def _with_prefix(ctx: AuditContext, prefix: str, docs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The canary's rows with ``prefix`` before each text, when the matcher still reads every suffix term among
    the S a document contributes (else, e.g. a prefix word joining a suffix term into a longer term, unchanged)."""
    if not prefix:
        return docs
    S, matcher, cap = ctx.config.terms_per_doc, ctx.vocabulary.matcher, LIMITS["max_chars_per_doc"]
    out = []
    for text, label in docs:
        joined = f"{prefix} {text}"
        own = set(matcher.first_distinct([text], S, max_chars=cap)[0])  # the suffix's terms
        if not own <= set(matcher.first_distinct([joined], S, max_chars=cap)[0]):
            return docs
        out.append((joined, label))
    return out


def plant_canaries(ctx: AuditContext, maker: _CanaryMaker, name: str, k: int, rows_per_unit: int,
           prefixes: Sequence[str] | None = None) -> tuple[_Neighbour, list[list[str]], list[bool], set[Any]]:
    """Append k canary units as raw rows and load them, redrawing those the split holds out (a few attempts;
    each is a valid trial). ``prefixes`` (one per canary, D+k only): in-distribution prefixes before the rare
    public terms ([Canary]). Returns the neighbour, the canaries' terms, whether each is in the training part,
    and the keys of the canaries' loaded documents."""
    raw, classes = ctx.raw, ctx.classes
    canary_size = _prefix_size(ctx) if prefixes else (ctx.settings.canary_terms or ctx.config.terms_per_doc)
    canaries = [maker.draw(canary_size) for _ in range(k)]
    for attempt in range(_CANARY_ATTEMPTS):
        rows, unit_keys, prefixed = [], [], 0
        for j, terms in enumerate(canaries):
            who = f"{CANARY_PERSON}-{name}-{j}-{attempt}" if raw.person_column else None
            rotated = list(classes[j % len(classes):]) + list(classes[:j % len(classes)])
            docs = canary_rows(terms, rotated, rows=rows_per_unit, min_chars=maker.min_chars)
            if prefixes:
                plain, docs = docs, _with_prefix(ctx, prefixes[j], docs)
                prefixed += docs != plain
            rows += [raw.row(text, label, who) for text, label in docs]
            unit_keys.append({(text, label, who) for text, label in docs})
        nb_raw = raw.plus(rows)
        nb = _Neighbour(name, nb_raw.load_corpus(), raw=nb_raw, prefixed=prefixed)
        ctx.release(nb)
        train_keys = set(document_keys(nb.train_corpus))
        planted = [bool(u) and u <= train_keys for u in unit_keys]
        if all(planted) or attempt == _CANARY_ATTEMPTS - 1 or ctx.stopped():
            return nb, canaries, planted, set().union(*unit_keys)
        canaries = [c if ok else maker.draw(canary_size) for c, ok in zip(canaries, planted)]
    raise AssertionError("unreachable")
