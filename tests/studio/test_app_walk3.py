"""Findings of the third walk (issue 33 §6) that need the app: each test fails on the code before its fix."""

from __future__ import annotations

import pytest

from app_helpers import fast_env, goto, new_app  # noqa: F401

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def test_a_vocabulary_under_ten_terms_can_be_used_with_the_n_the_page_advises() -> None:
    at = new_app()
    goto(at, 1)
    at.selectbox(key="_w.vocabulary").set_value("upload").run()
    terms = "\n".join("football goal league software bank".split()).encode()      # |V| = 5 public terms
    at.file_uploader(key="vocab_upload").set_value(("five.txt", terms, "text/plain")).run()
    advice = [e.value for e in at.error if "larger than the public vocabulary" in e.value]
    assert advice and "Choose N ≤ 5" in advice[0]
    at.number_input(key="_w.vocab_size").set_value(5).run()              # the advice can be followed (min was 10)
    assert at.session_state["vocab_size"] == 5
    assert not [e.value for e in at.error if "larger than the public vocabulary" in e.value]
