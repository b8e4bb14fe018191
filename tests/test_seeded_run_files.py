"""Behaviour unchanged across refactors: a seeded sampling run writes the same released files, byte for byte.

The expected SHA-256s were computed from the code BEFORE the module splits of docs/ARCHITECTURE.md (no module
over 500 lines, no function over 100 lines): a refactor that changes a released number, an order, a float's
formatting or a key of ``sequences.jsonl`` / ``private_vocabulary.json`` fails here. A deliberate change of
behaviour updates these digests in the same commit and says why.

Why a byte digest is portable here (docs/TESTING.md "Pinned digests"): ``sequences.jsonl`` holds only ids, labels
and terms (no float), and every float of ``private_vocabulary.json`` is a DP-released value or a public setting
written rounded to 2 decimals — far above the last bits in which CPUs' BLAS kernels differ — so both files must be
identical on any machine; :func:`_floats_are_rounded` checks that this stays so.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from dpkps_core.method.config import SamplingConfig
from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.method.pipeline import run_sampling, write_run_files
from dpkps_core.records.runfolder import RunFolder
from dpkps_core.method.vocabulary import PublicVocabulary

_TOPICS = {
    "sport": ("match", "goal", "league", "team", "striker", "coach", "stadium", "cup"),
    "tech": ("software", "browser", "network", "processor", "battery", "console", "fibre", "update"),
    "business": ("bank", "shares", "profits", "rates", "inflation", "airline", "market", "margins"),
}


def _corpus() -> Corpus:
    """48 fixed documents over three declared classes (16 each), built from fixed word lists: no randomness."""
    texts, labels = [], []
    for c, (label, words) in enumerate(_TOPICS.items()):
        for i in range(16):
            picked = [words[(i + 3 * k) % len(words)] for k in range(5)]
            texts.append(f"Report {i} on the {picked[0]} and {picked[1]}: {' '.join(picked[2:])} today {c}.")
            labels.append(label)
    return Corpus(tuple(texts), tuple(labels), "fixed", "tests/test_seeded_run_files.py",
                  public_classes=tuple(_TOPICS))


def _vocabulary() -> PublicVocabulary:
    terms = tuple(w for words in _TOPICS.values() for w in words) + ("report", "today") + tuple(
        f"public{i}" for i in range(40))
    return PublicVocabulary("fixed", terms, "test", "test")


# SHA-256 of (sequences.jsonl, private_vocabulary.json) per sampling method, computed before the refactor.
EXPECTED: dict[str, tuple[str, str]] = {
    "independent": ("1392b3392c613f1a4a6141dd28c6d076311de45561b52193d08e06d5b0646a95",
                    "a9be4feb99815cc25ed46060f211da64005d5507cc4cf3a0aa073bccfa56d2ab"),
    "iterative-linear": ("1400484ab89b1976da6a53492ece703ad921d9ca51591d1155e97c71361b94bf",
                         "a9be4feb99815cc25ed46060f211da64005d5507cc4cf3a0aa073bccfa56d2ab"),
    "iterative-log": ("333cced54e77e69246af954722263172c53019e19c87bad50ccae867b60cac9c",
                      "a9be4feb99815cc25ed46060f211da64005d5507cc4cf3a0aa073bccfa56d2ab"),
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _floats(obj: object) -> list[float]:
    if isinstance(obj, float):
        return [obj]
    if isinstance(obj, dict):
        return [f for v in obj.values() for f in _floats(v)]
    if isinstance(obj, list):
        return [f for v in obj for f in _floats(v)]
    return []


def _floats_are_rounded(folder: RunFolder) -> None:
    """No float in the sequences; every float of Ṽ's file has at most 2 decimals (so the byte digest is portable)."""
    assert not [f for line in folder.sequences.read_text(encoding="utf-8").splitlines()
                for f in _floats(json.loads(line))]
    floats = _floats(json.loads(folder.vocabulary.read_text(encoding="utf-8")))
    assert floats and all(round(f, 2) == f for f in floats), floats


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_a_seeded_run_writes_byte_identical_released_files(method: str, tmp_path: Path) -> None:
    cfg = SamplingConfig(corpus="fixed", eps_voc=2.0, eps_kde=3.0, method=method, vocab_size=12, terms_per_doc=5,
                         per_class=3, length=4, features=64, bandwidth=1.0, seed=11, noise_sampler="numpy",
                         test_fraction=0.25, split_seed=3)
    run = run_sampling(_corpus(), cfg, vocabulary=_vocabulary(), embedder=HashingEmbedder(16),
                       context=ReleaseContext(noise=NoiseSource(11, sampler="numpy"), ledger=PrivacyLedger(10.0)))
    out = write_run_files(tmp_path / "run", config=run.config, split=run.split,
                          private_vocabulary=run.private_vocabulary, outcome=run.outcome, report=run.privacy_report())
    folder = RunFolder(out)
    _floats_are_rounded(folder)
    got = (_digest(folder.sequences), _digest(folder.vocabulary))
    assert got == EXPECTED[method], got
