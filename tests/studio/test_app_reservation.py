"""AppTest: two sessions whose runs interleave on the same documents (docs/DESIGN.md §2.0; issue 35 parts 5 and 8).

* Without a reservation, the second session's Ṽ takes the room the first run's densities need: page 4 says before
  the spend that all training documents would be left out, and after it that the densities are noise (no ✓ "safe to
  release" badge); the sidebar counts what was charged, not a release that charged no one.
* With the reservation (page 3's switch), the first run's Ṽ reserves ε_voc + ε_kde for its documents: the second
  session is told at its first step (its Ṽ is noise and says so), and the first run's densities keep every document.
"""

from __future__ import annotations

import pytest

from app_helpers import click, fast_env, goto, new_app  # noqa: F401

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]

CAP = 12.0  # ε_voc 5 + ε_kde 5 fit once; two Ṽ and one density release do not


def texts(at) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success")
             for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def two_runs(reserve: bool):
    a = new_app(reserve_plan=reserve, epsilon_cap=CAP)
    b = new_app(reserve_plan=reserve, epsilon_cap=CAP)
    goto(a, "private-vocabulary")
    click(a, "Build Ṽ")                             # run A's first release
    goto(b, "private-vocabulary")
    click(b, "Build Ṽ")                             # another session's run, meanwhile
    goto(a, "densities")
    return a, b


def test_without_a_reservation_the_later_step_is_starved_and_said_to_be_noise() -> None:
    a, b = two_runs(reserve=False)
    assert "This Ṽ is noise" not in texts(b)
    assert "would leave out" in texts(a) and "noise that carries nothing of the corpus" in texts(a)  # before
    click(a, "Build densities")
    shown = texts(a)
    assert "This density release is noise" in shown and "DP output — safe to release" not in shown     # after
    assert "Not counted: ε = 5" in shown          # the sidebar counts what was charged (ε_voc 5 only)
    assert "This session, on this corpus: ε = **5** charged" in shown


def test_a_reservation_keeps_the_first_runs_densities_and_tells_the_second_run_at_once() -> None:
    a, b = two_runs(reserve=True)
    assert "This Ṽ is noise" in texts(b)            # B learns at its first step, not half-way
    assert "DP output — safe to release" not in texts(b)
    side_b = "\n".join([str(m.value) for m in b.sidebar.markdown] + [str(c.value) for c in b.sidebar.caption])
    assert "charged no document: every document was left out" in side_b and "Not counted: ε = 5" in side_b
    assert "would leave out" not in texts(a)        # A's densities draw on its reservation
    assert "reserved for this run's densities" in texts(a)
    click(a, "Build densities")
    shown = texts(a)
    assert "is noise" not in shown and "DP output — safe to release" in shown
    assert "This session, on this corpus: ε = **10** charged" in shown
    assert "released nothing" not in shown and "Not counted" not in shown
