"""Shared pytest fixtures: small in-memory corpora built by the tests themselves (no private data)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from dpkps_core.corpus import Corpus

_SPORT = [
    "The striker scored twice as the home team won the league match on Saturday afternoon.",
    "A late goal from the captain sealed the cup final and the fans celebrated in the stadium.",
    "The coach praised his defence after a narrow win against the champions in the derby.",
    "Injury worries mount for the national team ahead of the qualifying match next week.",
]
_TECH = [
    "The new smartphone ships with a faster processor and a larger battery than last year's model.",
    "Software developers released a security update for the popular web browser on Tuesday.",
    "Broadband speeds rose sharply as the network operator upgraded its fibre infrastructure.",
    "The games console sold out within hours as online retailers struggled with demand.",
]
_BUSINESS = [
    "Shares in the bank fell after profits dropped for the third quarter in a row.",
    "The central bank held interest rates steady amid concerns about rising inflation.",
    "The airline announced job cuts as fuel prices squeezed its operating margins.",
]


@pytest.fixture(autouse=True, scope="session")
def _isolated_user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite's own user cache ($DPKPS_CACHE_DIR): embedding caches and anything else the code caches go to a
    temporary folder, never the home folder. Only ``models/`` — public model weights converted from the packaged
    models (float32 SmolLM2, its CTranslate2 int8 copy), minutes to rebuild — is shared with the user's cache
    through a link; tests of the conversion itself set their own cache folder."""
    real = Path(os.environ.get("DPKPS_CACHE_DIR") or Path.home() / ".cache" / "dpkps")
    cache = tmp_path_factory.mktemp("user-cache")
    try:
        (real / "models").mkdir(parents=True, exist_ok=True)
        (cache / "models").symlink_to(real / "models", target_is_directory=True)
    except OSError:  # an unusable home: the models are converted into the temporary cache instead
        pass
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPKPS_CACHE_DIR", str(cache))
        yield


@pytest.fixture(autouse=True)
def _isolated_ledger_store(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test gets its own persistent-ledger folder ($DPKPS_LEDGER_DIR): no test writes into the home folder,
    and no test sees ε another test spent."""
    monkeypatch.setenv("DPKPS_LEDGER_DIR", str(tmp_path_factory.mktemp("ledgers")))


@pytest.fixture
def toy_corpus() -> Corpus:
    """A small labelled corpus (11 documents, 3 classes: business, sport, tech), built in memory."""
    texts = _SPORT + _TECH + _BUSINESS
    labels = ["sport"] * len(_SPORT) + ["tech"] * len(_TECH) + ["business"] * len(_BUSINESS)
    return Corpus(texts=tuple(texts), labels=tuple(labels), name="toy", source="tests/conftest.py",
                  public_classes=("business", "sport", "tech"))


@pytest.fixture
def toy_records(toy_corpus: Corpus) -> list[dict[str, str]]:
    """The toy corpus as a list of ``{"text": ..., "label": ...}`` records (for writing test files)."""
    return [{"text": t, "label": y} for t, y in zip(toy_corpus.texts, toy_corpus.labels)]
