"""Pinned digests that hold on any machine (docs/TESTING.md "Pinned digests").

A float computed through BLAS (NumPy's OpenBLAS, torch's MKL/oneDNN) can differ in its last bits from one CPU to
another: OpenBLAS and MKL pick their kernels (SSE, AVX2, AVX-512) per CPU and sum in a different order, and a
libm may take an FMA path. A SHA-256 of such a float's ``repr`` then fails on the next machine although every
value agrees to 15 digits. So a pinned digest hashes a *canonical form*:

* every ``float`` rounded to :data:`SIGNIFICANT_DIGITS` significant digits (``-0.0`` becomes ``0.0``; NaN and ±∞
  become the strings ``"nan"``, ``"inf"``, ``"-inf"``);
* integers, booleans, strings (texts, ids, term lists) and ``None`` exactly as they are;
* mappings with their keys sorted, sequences in their order (an order change is a change);
* then compact JSON (``sort_keys``, no spaces, UTF-8) and its SHA-256.

What stays exact: the DP-released values the run folder and the bundle store are written rounded to a few
decimals (noisy counts to 2), far fewer digits than :data:`SIGNIFICANT_DIGITS`, so the canonical form keeps them
exactly; so are every text, id and integer. Two values that differ only beyond the 9th significant digit hash the
same; a value whose two machines' results straddle a rounding boundary of the 9th digit would not, with a
probability of about (relative difference) × 10⁹ per value — below 10⁻⁴ for the last-bit differences (≈ 10⁻¹⁵
relative, ≈ 10⁻¹³ after a few dozen operations) these digests meet.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

#: Significant digits a float keeps in the canonical form of a pinned digest.
SIGNIFICANT_DIGITS = 9


def canonical_float(value: float, *, digits: int = SIGNIFICANT_DIGITS) -> float | str:
    """``value`` rounded to ``digits`` significant digits (``-0.0`` → ``0.0``; NaN/±∞ as strings)."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0.0:
        return 0.0
    return float(f"{value:.{digits - 1}e}")


def canonical(obj: Any, *, digits: int = SIGNIFICANT_DIGITS) -> Any:
    """The canonical, JSON-ready form of ``obj`` (module docstring): floats rounded, everything else exact."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return canonical_float(obj, digits=digits)
    if hasattr(obj, "dtype") and hasattr(obj, "tolist"):  # NumPy scalars and arrays
        return canonical(obj.tolist(), digits=digits)
    if isinstance(obj, Mapping):
        return {str(k): canonical(v, digits=digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [canonical(v, digits=digits) for v in obj]
    raise TypeError(f"canonical() does not know how to pin a {type(obj).__name__}.")


def canonical_json(obj: Any, *, digits: int = SIGNIFICANT_DIGITS) -> str:
    """Compact JSON of :func:`canonical` (keys sorted, no spaces, non-ASCII kept)."""
    return json.dumps(canonical(obj, digits=digits), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_digest(obj: Any, *, digits: int = SIGNIFICANT_DIGITS) -> str:
    """SHA-256 (hex) of :func:`canonical_json` — the digest a test pins."""
    return hashlib.sha256(canonical_json(obj, digits=digits).encode("utf-8")).hexdigest()


def canonical_lines_digest(objects: Iterable[Any], *, digits: int = SIGNIFICANT_DIGITS) -> str:
    """SHA-256 (hex) of a sequence of records (e.g. the lines of a JSONL file), each in canonical form, in order."""
    h = hashlib.sha256()
    for obj in objects:
        h.update(canonical_json(obj, digits=digits).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def jsonl_records(path: Path) -> list[Any]:
    """The records of a JSONL file, in order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------ snapshots with a tolerance

#: Set to 1 to (re)write the snapshot entries a test asks for — a deliberate change of behaviour, said in the commit.
UPDATE_ENV = "DPKPS_UPDATE_SNAPSHOTS"


def _differences(got: Any, want: Any, *, rel: float, abs_tol: float, path: str) -> list[str]:
    """Where ``got`` and ``want`` (both canonical) differ: floats beyond the tolerance, anything else at all."""
    if isinstance(want, float) and isinstance(got, float) and not isinstance(got, bool):
        return [] if math.isclose(got, want, rel_tol=rel, abs_tol=abs_tol) else [f"{path}: {got!r} != {want!r}"]
    if isinstance(want, dict) and isinstance(got, dict):
        if sorted(got) != sorted(want):
            return [f"{path}: keys {sorted(got)} != {sorted(want)}"]
        return [d for k in want for d in _differences(got[k], want[k], rel=rel, abs_tol=abs_tol, path=f"{path}.{k}")]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: length {len(got)} != {len(want)}"]
        return [d for i, (g, w) in enumerate(zip(got, want))
                for d in _differences(g, w, rel=rel, abs_tol=abs_tol, path=f"{path}[{i}]")]
    return [] if (type(got) is type(want) and got == want) else [f"{path}: {got!r} != {want!r}"]


def snapshot(file: Path, name: str) -> Any:
    """The stored snapshot ``name`` of ``file`` (for a test that judges part of it itself)."""
    return json.loads(file.read_text(encoding="utf-8"))[name]


def assert_matches_snapshot(obj: Any, *, file: Path, name: str, rel: float = 1e-6, abs_tol: float = 1e-12,
                            ignore: tuple[str, ...] = ()) -> None:
    """``obj`` equals the snapshot ``name`` stored in ``file`` (JSON): every integer, text, key, order and length
    exactly, every float within ``rel`` (relative) or ``abs_tol`` — for results computed in float32 (embeddings and
    their kernels), whose BLAS differences reach 10⁻⁸ relative: more than a rounded digest can absorb.

    ``ignore``: top-level keys of a mapping left out of the comparison (fields added since the snapshot was taken,
    or judged by the test itself). With ``$DPKPS_UPDATE_SNAPSHOTS=1`` the entry is (re)written instead (a
    deliberate change of behaviour)."""
    got = json.loads(canonical_json(obj, digits=17))
    if ignore and isinstance(got, dict):
        got = {k: v for k, v in got.items() if k not in ignore}
    stored = json.loads(file.read_text(encoding="utf-8")) if file.exists() else {}
    if os.environ.get(UPDATE_ENV) == "1":
        stored[name] = got
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps(stored, sort_keys=True, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return
    assert name in stored, f"no snapshot {name!r} in {file.name}: run once with {UPDATE_ENV}=1"
    want = stored[name]
    if ignore and isinstance(want, dict):
        want = {k: v for k, v in want.items() if k not in ignore}
    diffs = _differences(got, want, rel=rel, abs_tol=abs_tol, path=name)
    assert not diffs, "differs from the snapshot:\n" + "\n".join(diffs[:20])
