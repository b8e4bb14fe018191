"""Streamlit-side helpers of DP-KPS Studio: the session (``session``), the actions that call the core (``steps``,
``generation_steps``, ``evaluation_steps``), cached public resources, background jobs, widgets and charts.

``dpkps_core`` never imports Streamlit; everything that does lives here or in ``app.py`` / ``app_pages/``.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class PageSpec:
    """One step of the guided flow (``path`` is relative to the app's folder)."""

    path: str
    title: str
    icon: str
    url_path: str


PAGES: tuple[PageSpec, ...] = (
    PageSpec("app_pages/1_corpus.py", "1 · Corpus", ":material/description:", "corpus"),
    PageSpec("app_pages/2_budget.py", "2 · Vocabulary & budget", ":material/balance:", "budget"),
    PageSpec("app_pages/3_private_vocabulary.py", "3 · Private vocabulary", ":material/spellcheck:", "private-vocabulary"),
    PageSpec("app_pages/4_densities.py", "4 · Keyphrase densities", ":material/bar_chart:", "densities"),
    PageSpec("app_pages/5_sequences.py", "5 · Sequences", ":material/format_list_numbered:", "sequences"),
    PageSpec("app_pages/6_generate.py", "6 · Write with an LLM", ":material/edit_note:", "generate"),
    PageSpec("app_pages/7_evaluate.py", "7 · Evaluate", ":material/analytics:", "evaluate"),
    PageSpec("app_pages/8_export.py", "8 · Export", ":material/inventory_2:", "export"),
    PageSpec("app_pages/9_audit.py", "9 · Privacy audit", ":material/policy:", "audit"),
)


def fast_mode() -> bool:
    """Test-only fast mode (``DPKPS_TEST_FAST=1``): small defaults so a whole walk takes seconds."""
    return os.environ.get("DPKPS_TEST_FAST", "") == "1"
