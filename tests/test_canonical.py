"""The canonical form behind every pinned digest (tests/canonical.py; docs/TESTING.md "Pinned digests")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from canonical import (UPDATE_ENV, assert_matches_snapshot, canonical, canonical_digest, canonical_float,
                       canonical_lines_digest)


def test_last_bit_differences_hash_the_same_and_a_ninth_digit_does_not() -> None:
    value = 0.03527255012192827
    close = float(np.nextafter(np.nextafter(value, 1.0), 1.0))  # two ulps away, as another CPU's BLAS might give
    assert close != value
    assert canonical_digest({"spread": value}) == canonical_digest({"spread": close})
    assert canonical_digest({"spread": value}) != canonical_digest({"spread": value * (1 + 1e-8)})


def test_integers_texts_order_and_types_stay_exact() -> None:
    assert canonical_digest({"n": 123456789123}) != canonical_digest({"n": 123456789124})
    assert canonical_digest({"n": 1}) != canonical_digest({"n": 1.0})  # an int that became a float is a change
    assert canonical_digest(["a", "b"]) != canonical_digest(["b", "a"])
    assert canonical_digest({"b": 1, "a": 2}) == canonical_digest({"a": 2, "b": 1})  # key order is not content
    assert canonical({"t": ("x", True, None)}) == {"t": ["x", True, None]}
    # DP-released values are stored with 2 decimals: the canonical form keeps them exactly
    assert canonical_float(1234567.89) == 1234567.89 and canonical_float(26.02) == 26.02


def test_special_floats_and_numpy_values() -> None:
    assert canonical([-0.0, math.nan, math.inf, -math.inf]) == [0.0, "nan", "inf", "-inf"]
    assert canonical(np.array([1.5, 2.25])) == [1.5, 2.25] and canonical(np.int64(7)) == 7
    with pytest.raises(TypeError, match="set"):
        canonical({1, 2})


def test_lines_digest_depends_on_each_record_and_their_order() -> None:
    a, b = {"id": "d1", "text": "x"}, {"id": "d2", "text": "y"}
    assert canonical_lines_digest([a, b]) != canonical_lines_digest([b, a])
    assert canonical_lines_digest([a, b]) == canonical_lines_digest([dict(a), dict(b)])


def test_snapshot_tolerates_float_noise_and_catches_real_changes(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "snap.json"
    obj = {"spread": 0.029567709676947506, "documents": 24, "verdict": "usable"}
    monkeypatch.setenv(UPDATE_ENV, "1")
    assert_matches_snapshot(obj, file=file, name="case")
    assert json.loads(file.read_text(encoding="utf-8"))["case"]["documents"] == 24
    monkeypatch.delenv(UPDATE_ENV)
    assert_matches_snapshot({**obj, "spread": 0.029567709484569035}, file=file, name="case")  # 1e-8 relative
    for changed in ({**obj, "spread": 0.0296}, {**obj, "documents": 25}, {**obj, "verdict": "poor"},
                    {**obj, "documents": 24.0}, {k: v for k, v in obj.items() if k != "verdict"}):
        with pytest.raises(AssertionError, match="differs from the snapshot"):
            assert_matches_snapshot(changed, file=file, name="case")
    with pytest.raises(AssertionError, match="no snapshot 'other'"):
        assert_matches_snapshot(obj, file=file, name="other")
