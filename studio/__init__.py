"""Streamlit-side helpers of DP-KPS Studio: the session's typed state (``state``) and what derives from it
(``session``), each page's actions that call the core (``steps``, ``forecasts``, ``generation_steps``,
``evaluation_steps``, ``runs``, ``audit_view``), cached public resources, background jobs, widgets and charts.

``dpkps_core`` never imports Streamlit; everything that does lives here or in ``app.py`` / ``app_pages/``.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class PageSpec:
    """One step of the guided flow, addressed in code by its stable ``name`` (never by its position).

    ``number`` is the 1-based step number users read in titles and messages; it is the page's place in
    :data:`PAGES`, so renumbering the flow is one edit there (plus the file's name). ``path`` is relative to the
    app's folder; ``name`` is also the page's URL path.
    """

    name: str
    number: int
    label: str
    icon: str
    path: str

    @property
    def title(self) -> str:
        """The navigation and heading title, e.g. ``"4 · Keyphrase densities"``."""
        return f"{self.number} · {self.label}"

    @property
    def url_path(self) -> str:
        """The page's URL path (``/densities``): its name, so links survive a renumbering."""
        return self.name


#: The flow in order: (name, label, icon, file). The order gives each page its number.
_FLOW: tuple[tuple[str, str, str, str], ...] = (
    ("corpus", "Corpus", ":material/description:", "app_pages/1_corpus.py"),
    ("budget", "Vocabulary & budget", ":material/balance:", "app_pages/2_budget.py"),
    ("private-vocabulary", "Private vocabulary", ":material/spellcheck:", "app_pages/3_private_vocabulary.py"),
    ("densities", "Keyphrase densities", ":material/bar_chart:", "app_pages/4_densities.py"),
    ("sequences", "Sequences", ":material/format_list_numbered:", "app_pages/5_sequences.py"),
    ("generate", "Write with an LLM", ":material/edit_note:", "app_pages/6_generate.py"),
    ("evaluate", "Evaluate", ":material/analytics:", "app_pages/7_evaluate.py"),
    ("export", "Export", ":material/inventory_2:", "app_pages/8_export.py"),
    ("audit", "Privacy audit", ":material/policy:", "app_pages/9_audit.py"),
)

PAGES: tuple[PageSpec, ...] = tuple(PageSpec(name, number, label, icon, path)
                                    for number, (name, label, icon, path) in enumerate(_FLOW, start=1))

_BY_NAME: dict[str, PageSpec] = {p.name: p for p in PAGES}


def page(name: str) -> PageSpec:
    """The page called ``name`` (e.g. ``"densities"``); a ``LookupError`` naming the known pages for any other name."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise LookupError(f"No app page is named {name!r}; the pages are: {', '.join(_BY_NAME)}.") from None


def next_page(name: str) -> PageSpec | None:
    """The page after ``name`` in the flow, or None after the last one."""
    number = page(name).number
    return PAGES[number] if number < len(PAGES) else None


def page_ref(name: str, *, titled: bool = False) -> str:
    """How a message points users at a page: ``"page 4"``, or with ``titled`` ``"page 4 (Keyphrase densities)"``
    where the sentence does not already say what the page does. Every "page N" the app shows is built here, so
    that renumbering the flow (:data:`PAGES`) updates every message."""
    spec = page(name)
    return f"page {spec.number} ({spec.label})" if titled else f"page {spec.number}"


def pages_ref(first: str, last: str) -> str:
    """A range of pages for messages: ``"pages 2–5"`` (``first`` must come before ``last`` in the flow)."""
    a, b = page(first).number, page(last).number
    if a >= b:
        raise ValueError(f"pages_ref: {first!r} (page {a}) does not come before {last!r} (page {b}).")
    return f"pages {a}–{b}"


def fast_mode() -> bool:
    """Test-only fast mode (``DPKPS_TEST_FAST=1``): small defaults so a whole walk takes seconds."""
    return os.environ.get("DPKPS_TEST_FAST", "") == "1"
