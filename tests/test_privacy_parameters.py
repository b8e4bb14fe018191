"""One check per rule (issue 32 §3): every entry point refuses the same bad ε, δ and cap values the same way.

ε, δ and the cap each have ONE validator (dpkps_core/dp/validation.py: ``check_epsilon``, ``check_delta``,
``check_cap``). A bool or a string is a caller's bug, not ε = 1 or 2, and raises a ``ParameterTypeError`` (a
``TypeError``, as diffprivlib raises, and a ``ParameterError``, so the app and the CLI show its one sentence); zero,
negative and non-finite values raise a ``ParameterError``. The entry points fed below: the config builder (the CLI's
and the app's one path, including the app's total-and-share form), the mechanisms, the frozen event, both ledgers
and the command line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from dpkps_core import ledger_store as ls
from dpkps_core.cli.main import main as cli_main
from dpkps_core.method.config import build_sampling_config
from dpkps_core.dp.count import release_count
from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.vocabulary import noisy_term_histogram
from dpkps_core.dp import accounting
from dpkps_core.errors import ParameterError, ParameterTypeError
from dpkps_core.risk import posterior_bound

BAD_VALUES: list[tuple[Any, type[Exception]]] = [
    (0, ParameterError), (-1.0, ParameterError), (math.inf, ParameterError), (math.nan, ParameterError),
    (True, ParameterTypeError), ("2", ParameterTypeError), ([1.0], ParameterTypeError),
]


def _event(epsilon: Any = 1.0, delta: Any = 0.0) -> PrivacyEvent:
    return PrivacyEvent(mechanism="m", step="s", epsilon=epsilon, delta=delta, sensitivity=1.0, noise_scale=1.0,
                        released="x")


EPSILON_ENTRY_POINTS: dict[str, Callable[[Any], object]] = {
    "config (CLI and app)": lambda e: build_sampling_config(eps_voc=e),
    "config, ε_kde": lambda e: build_sampling_config(eps_kde=e),
    "config, the app's total ε": lambda e: build_sampling_config(eps_total=e, eps_voc_share=0.5),
    "vocabulary mechanism": lambda e: noisy_term_histogram(np.zeros(3), epsilon=e, terms_per_doc=2,
                                                           noise=NoiseSource(seed=0)),
    "count mechanism": lambda e: release_count(5, epsilon=e, context=ReleaseContext(noise=NoiseSource(seed=0))),
    "frozen event": lambda e: _event(epsilon=e),
    "accounting": lambda e: accounting.max_rho_for(e, 1e-6),
    "risk sentence": lambda e: posterior_bound(e, 0.01),
    "persistent ledger": lambda e: ls.open_corpus_ledger(["u1", "u2"], tool="test").admit(["u1"], e),
}

CAP_ENTRY_POINTS: dict[str, Callable[[Any], object]] = {
    "config (CLI and app)": lambda c: build_sampling_config(epsilon_cap=c),
    "run ledger": lambda c: PrivacyLedger(cap=c),
    "run ledger's setter": lambda c: setattr(PrivacyLedger(), "cap", c),
    "persistent ledger": lambda c: ls.open_corpus_ledger(["u1"], tool="test", cap=c),
}

DELTA_ENTRY_POINTS: dict[str, Callable[[Any], object]] = {
    "accounting": lambda d: accounting.max_rho_for(1.0, d),
}


@pytest.mark.parametrize("value,error", BAD_VALUES, ids=repr)
@pytest.mark.parametrize("entry", sorted(EPSILON_ENTRY_POINTS))
def test_every_entry_point_refuses_the_same_bad_epsilons(entry: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"ε.* must be a (finite )?number > 0|ε.* must be a number > 0"):
        EPSILON_ENTRY_POINTS[entry](value)


@pytest.mark.parametrize("value,error", BAD_VALUES, ids=repr)
@pytest.mark.parametrize("entry", sorted(CAP_ENTRY_POINTS))
def test_every_entry_point_refuses_the_same_bad_caps(entry: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^The budget cap must be a finite ε > 0, got "):
        CAP_ENTRY_POINTS[entry](value)


@pytest.mark.parametrize("value,error", [*BAD_VALUES, (1.0, ParameterError), (1.5, ParameterError)], ids=repr)
@pytest.mark.parametrize("entry", sorted(DELTA_ENTRY_POINTS))
def test_every_entry_point_refuses_the_same_bad_deltas(entry: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^δ must be"):
        DELTA_ENTRY_POINTS[entry](value)
    with pytest.raises(error, match=r"^A privacy event's δ must be"):
        _event(delta=value if value != 0 else -1.0)


def test_the_type_errors_are_type_errors_and_parameter_errors() -> None:
    for check in (lambda: build_sampling_config(eps_voc=True), lambda: PrivacyLedger(cap="20"),
                  lambda: accounting.max_rho_for(1.0, "1e-6")):
        with pytest.raises(TypeError) as raised:
            check()
        assert isinstance(raised.value, ParameterError)


@pytest.mark.parametrize("option", ["--eps-voc", "--eps-kde", "--epsilon-cap"])
@pytest.mark.parametrize("text", ["0", "-1", "inf", "nan", "true", "2x"])
def test_the_command_line_refuses_them_in_one_line(option: str, text: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI parses the option (argparse refuses what is not a number) and then builds its config through the
    one builder: an exit status of 2 and one sentence naming ε or the cap, never a traceback, nothing loaded."""
    try:
        status = cli_main(["sample", "--corpus", "demo:bbc", option, text, "--out", str(tmp_path / "out")])
    except SystemExit as exit_:  # argparse's own refusal of a non-number
        status = exit_.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert ("ε" in err or "cap" in err or "invalid float value" in err), err
