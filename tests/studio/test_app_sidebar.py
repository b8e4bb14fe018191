"""The sidebar's ledger never adds ε over different corpora (issue 33 §6): a total over two corpora is nobody's
loss — each document's budget is its own (docs/DESIGN.md §2.0) — so the sidebar names how many other corpora this session
released on, and each corpus's figures are its own."""

from __future__ import annotations

import pytest

from app_helpers import state_of, click, fast_env, goto, new_app, walk  # noqa: F401

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def _sidebar_text(at) -> str:
    return " ".join([m.value for m in at.sidebar.markdown] + [c.value for c in at.sidebar.caption])


def test_the_sidebar_never_sums_epsilon_over_corpora() -> None:
    at = new_app()
    walk(at, "private-vocabulary")                # Ṽ on BBC: ε_voc spent on BBC's documents
    goto(at, "corpus")
    at.selectbox(key="_w.demo_spec").set_value("demo:drugs").run()
    buttons = [b for b in at.button if b.label.startswith("Switch corpus")]
    assert buttons, [b.label for b in at.button]
    buttons[0].click().run()
    assert state_of(at).loaded.corpus_id == "demo:drugs"
    text = _sidebar_text(at)
    assert "in all" not in text
    assert "also released on 1 corpus loaded before" in text
    assert "No release has used this corpus's documents yet." in text
