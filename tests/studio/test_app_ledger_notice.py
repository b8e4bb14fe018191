"""AppTest and unit tests: a new ledger says so; the sidebar's ε and step names are human; progress messages of jobs
that read private data are badged (issue 35 part 7; issue 33 §6).

* A new ``$DPKPS_LEDGER_DIR`` (every test has its own) starts an empty ledger: the app says on first use that a new
  ledger was created, with its id and never its path; a second session on the same ledger does not.
* ε shows through one formatter (``17.7 / 20``, never ``17.6999``), and the sidebar names steps as the dossier does
  (``dpkps_core.dossier.labels``), never ``size``, ``private_prediction`` or ``eps_voc``.
"""

from __future__ import annotations

import pytest

from app_helpers import state_of, click, fast_env, goto, new_app  # noqa: F401
from dpkps_core.ledger_store import LedgerStore, ledger_root
from studio import widgets


def test_one_epsilon_formatter_and_human_step_names() -> None:
    assert widgets.eps(17.69999999) == "17.7" and widgets.eps(1.4999000001) == "1.5"
    assert widgets.eps(0.2) == "0.2" and widgets.eps(10.25) == "10.25" and widgets.eps(20) == "20"
    for raw in ("size", "private_prediction", "eps_voc", "kde"):
        assert widgets.step_name(raw) != raw and raw not in widgets.step_name(raw).split()
    assert widgets.step_name("size") == "Class-size estimate (ε_count)"


def test_progress_of_a_job_that_reads_private_data_is_badged() -> None:
    assert widgets.progress_text("memorisation", "Comparing 1,234 real documents") \
        == "Comparing 1,234 real documents — private, local"
    assert widgets.progress_text("evaluation", "x").endswith("private, local")
    assert widgets.progress_text("generation", "Writing 3 of 8") == "Writing 3 of 8"


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.slow
@pytest.mark.usefixtures("fast_env")
def test_a_new_ledger_says_so_once_with_its_id_and_never_its_path() -> None:
    at = new_app()                                    # the demo corpus loads: the sidebar opens the ledger
    goto(at, "budget")
    said = [n for n in state_of(at).notices] + [str(i.value) for i in at.info] + \
        [str(c.value) for c in at.caption] + [str(m.value) for m in at.markdown]
    shown = "\n".join(said)
    ledger_id = LedgerStore().ledger_id
    assert "A new, empty privacy ledger was created" in shown and ledger_id in shown
    assert str(ledger_root()) not in shown
    other = new_app()                                 # the ledger exists now: no notice
    goto(other, "budget")
    later = "\n".join([str(i.value) for i in other.info] + [str(m.value) for m in other.markdown])
    assert "A new, empty privacy ledger was created" not in later


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.slow
@pytest.mark.usefixtures("fast_env")
def test_the_sidebar_names_steps_and_formats_epsilon_once() -> None:
    at = new_app()
    goto(at, "private-vocabulary")
    click(at, "Build Ṽ")
    side = "\n".join(str(m.value) for m in at.sidebar.markdown)
    assert "Private vocabulary Ṽ (ε_voc): **5**" in side
    assert "vocabulary (ε_voc)" not in side.replace("Private vocabulary Ṽ (ε_voc)", "")


def test_settings_are_named_as_a_reader_knows_them() -> None:
    assert widgets.setting_name("eps_voc") == "ε of the private vocabulary (ε_voc)"
    assert widgets.setting_name("vocabulary_spec") == "Public vocabulary V"


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.slow
@pytest.mark.usefixtures("fast_env")
def test_a_stale_vocabulary_names_the_changed_setting_not_its_key() -> None:
    at = new_app()
    goto(at, "private-vocabulary")
    click(at, "Build Ṽ")
    state_of(at).settings.eps_total = 12.0          # ε_voc moves with the total
    at.run()
    warned = " ".join(str(w.value) for w in at.warning)
    assert "Settings changed since Ṽ was built (ε of the private vocabulary (ε_voc))" in warned
    assert "eps_voc" not in warned
