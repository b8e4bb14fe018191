"""Findings of the third walk (issue 33 §6) that need the app: each test fails on the code before its fix."""

from __future__ import annotations

import pytest

from app_helpers import state_of, fast_env, goto, new_app  # noqa: F401

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]


def test_a_vocabulary_under_ten_terms_can_be_used_with_the_n_the_page_advises() -> None:
    at = new_app()
    goto(at, "budget")
    at.selectbox(key="_w.vocabulary").set_value("upload").run()
    terms = "\n".join("football goal league software bank".split()).encode()      # |V| = 5 public terms
    at.file_uploader(key="vocab_upload").set_value(("five.txt", terms, "text/plain")).run()
    advice = [e.value for e in at.error if "larger than the public vocabulary" in e.value]
    assert advice and "Choose N ≤ 5" in advice[0]
    at.number_input(key="_w.vocab_size").set_value(5).run()              # the advice can be followed (min was 10)
    assert state_of(at).settings.vocab_size == 5
    assert not [e.value for e in at.error if "larger than the public vocabulary" in e.value]


def test_the_plan_warning_counts_only_what_the_run_still_has_to_spend() -> None:
    from app_helpers import click

    at = new_app(epsilon_cap=8.0, cap_enabled=True, eps_total=8.0, eps_voc_share=0.5)
    goto(at, "budget")
    warnings = lambda: [w.value for w in at.warning if "needs ε" in w.value]  # noqa: E731
    goto(at, "private-vocabulary")
    click(at, "Build Ṽ")                                  # ε_voc = 4 spent: 4 left under the cap of 8
    goto(at, "budget")
    assert state_of(at).settings.epsilon_cap == 8.0
    assert not warnings(), warnings()                     # the rest of the plan (ε_kde = 4) fits
    state_of(at).settings.eps_voc_share = 0.25              # ε_kde = 6 > the 4 left: said, with what is counted
    at.run()
    assert any("The rest of this plan (ε_kde) needs ε = 6" in w for w in warnings()), warnings()


def test_an_id_like_column_is_suggested_as_the_person_and_kept_for_a_corrected_file() -> None:
    from app_helpers import click, declare_classes, toy_csv

    rows = toy_csv(20).decode().splitlines()
    with_ids = "\n".join([rows[0] + ",patient_id"] + [f"{r},p{i % 7}" for i, r in enumerate(rows[1:])]).encode()
    at = new_app()
    goto(at, "corpus")
    at.radio(key="_w.corpus_source").set_value("upload").run()
    at.file_uploader(key="corpus_upload").set_value(("notes.csv", with_ids, "text/csv")).run()
    assert at.selectbox(key="upload_person_col").value == "patient_id"          # suggested from its name
    assert any("suggested from its name" in c.value for c in at.caption)
    click(at, "Load this corpus", clean=False)
    declare_classes(at)
    assert state_of(at).loaded.corpus.person_column == "patient_id"
    # a corrected file with the same columns keeps the unit of privacy
    fixed = with_ids.replace(b"p6", b"p5")
    at.file_uploader(key="corpus_upload").set_value(("notes-fixed.csv", fixed, "text/csv")).run()
    assert at.selectbox(key="upload_person_col").value == "patient_id"
    assert not [i.value for i in at.info if "changes the unit of privacy" in i.value]
    # a file without that column: the unit would change, and the page says so before loading
    at.file_uploader(key="corpus_upload").set_value(("plain.csv", toy_csv(20), "text/csv")).run()
    assert at.selectbox(key="upload_person_col").value is None
    assert any("changes the unit of privacy from **one person** (column “patient_id”) to **one document**" in i.value
               for i in at.info), [i.value for i in at.info]


def test_page1_loads_a_corpus_from_the_servers_data_folder(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31 §2: a corpus too large for a browser upload is read from the deployment's data folder — listed on
    page 1 by name (a folder of Parquet parts too), loaded under the deployment's limits, never a path."""
    import pandas as pd
    from app_helpers import click, declare_classes, toy_records, walk

    root = tmp_path / "data"
    (root / "export").mkdir(parents=True)
    recs = toy_records(20)
    for i in range(2):
        pd.DataFrame(recs[i * 30:(i + 1) * 30]).to_parquet(root / "export" / f"part-{i}.parquet")
    monkeypatch.setenv("DPKPS_DATA_DIR", str(root))
    at = new_app()
    at.radio(key="_w.corpus_source").set_value("server").run()
    box = at.selectbox(key="server_entry")
    assert len(box.options) == 1 and box.options[0].startswith("export (folder of 2 parts, ")
    box.set_value("export").run()
    assert at.selectbox(key="upload_text_col").value == "text"
    click(at, "Load this corpus", clean=False)
    declare_classes(at)
    c = state_of(at).loaded.corpus
    assert len(c) == 60 and str(state_of(at).loaded.corpus_id).startswith("server:")
    walk(at, "private-vocabulary")                            # the DP steps run on it like on an upload
    assert state_of(at).run.run_dir
    monkeypatch.delenv("DPKPS_DATA_DIR")                     # no data folder: no such choice
    without = new_app()
    assert "server" not in without.radio(key="_w.corpus_source").options
