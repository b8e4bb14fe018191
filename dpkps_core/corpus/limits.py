"""The loader's two size limits — bytes read and documents read — as settings (docs/DESIGN.md §1; docs/ARCHITECTURE.md
"Documented limits").

One owner for both: :class:`LoadLimits`. A limit only protects the machine from an accidental huge input (the
in-memory loader holds every document); it is never a hidden cut. Each has a documented default, can be raised
or removed (``0`` / ``none``), and every refusal names the setting that raises it:

- ``max_bytes`` — the corpus file's size (a folder: all its files together). Default 200 MB (the app's browser
  upload is capped at the same 200 MB by Streamlit's ``server.maxUploadSize``). CLI ``--max-corpus-bytes``;
  deployment (app and CLI default) ``$DPKPS_MAX_CORPUS_BYTES``.
- ``max_documents`` — rows (or .txt files) read. Default 200,000. CLI ``--max-documents``; deployment
  ``$DPKPS_MAX_DOCUMENTS``.

A refusal is local: it happens while reading, before anything is computed, released or charged. Whether the
input is over a limit depends on its size alone, never on which rows it holds (docs/DESIGN.md §2.0: no row is cut).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Final, Mapping

from dpkps_core.errors import CorpusError, ParameterError

DEFAULT_MAX_BYTES: Final = 200 * 1024 * 1024
DEFAULT_MAX_DOCUMENTS: Final = 200_000
ENV_MAX_BYTES: Final = "DPKPS_MAX_CORPUS_BYTES"
ENV_MAX_DOCUMENTS: Final = "DPKPS_MAX_DOCUMENTS"
_NO_LIMIT = ("0", "none", "no", "off", "unlimited")
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}

#: How a user raises each limit, named in every refusal.
SETTING_HINTS: Final = {
    "max_bytes": f"--max-corpus-bytes (CLI; 0 = no limit) or ${ENV_MAX_BYTES} on the server (app and CLI default)",
    "max_documents": f"--max-documents (CLI; 0 = no limit) or ${ENV_MAX_DOCUMENTS} on the server (app and CLI "
                     "default)",
}


class _Default:
    """The sentinel 'use the deployment's default limit' (an argument left out)."""

    def __repr__(self) -> str:
        return "DEFAULT_LIMIT"


#: Pass (or leave) this to use the deployment's default (``$DPKPS_MAX_…``, else the built-in default).
DEFAULT_LIMIT: Final = _Default()


class LimitExceededError(CorpusError):
    """The input is over one of the loader's limits; ``setting`` names it (``max_bytes`` / ``max_documents``)."""

    def __init__(self, message: str, *, setting: str, limit: int, found: int) -> None:
        self.setting, self.limit, self.found = setting, limit, found
        super().__init__(message)


def parse_limit(value: Any, *, name: str, sizes: bool = False) -> int | None:
    """A limit as given by a user: a whole number ≥ 0, or text (``"200000"``, ``"200,000"``; with ``sizes``
    also ``"640MB"``, ``"4 GB"`` — binary units, as the messages print them). ``0``, ``"none"``, ``None``
    mean no limit (None). Anything else is a :class:`ParameterError` naming ``name``."""
    if value is None or isinstance(value, _Default):
        return None
    if isinstance(value, bool):
        raise ParameterError(f"{name} must be a whole number ≥ 0 (0 = no limit), got {value!r}.")
    if isinstance(value, int):
        if value < 0:
            raise ParameterError(f"{name} must be a whole number ≥ 0 (0 = no limit), got {value!r}.")
        return value or None
    if isinstance(value, str):
        text = value.strip().lower().replace("_", "").replace(",", "")
        if text in _NO_LIMIT:
            return None
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text)
        if m and (m.group(2) in _UNITS if sizes else m.group(2) == "") and (sizes or "." not in m.group(1)):
            number = int(float(m.group(1)) * _UNITS[m.group(2)])
            return number or None
        units = " (or a size such as 640MB, 4GB)" if sizes else ""
        raise ParameterError(f"{name} must be a whole number ≥ 0{units}, or 0 / none for no limit; got {value!r}.")
    raise ParameterError(f"{name} must be a whole number ≥ 0 (0 = no limit), got {value!r}.")


def fmt_size(n: int) -> str:
    """A byte count as the messages print it (binary units: 1 MB = 1,048,576 bytes)."""
    if n >= 1024 * 1024 * 1024:
        return f"{n / 1024**3:,.1f} GB".replace(".0 GB", " GB")
    if n >= 1024 * 1024:
        return f"{n / 1024 / 1024:,.1f} MB".replace(".0 MB", " MB")
    if n >= 1024:
        return f"{n / 1024:,.1f} KB".replace(".0 KB", " KB")
    return f"{n:,} bytes"


@dataclasses.dataclass(frozen=True)
class LoadLimits:
    """The loader's limits (None = no limit). Build it with :meth:`resolve` to apply the deployment's defaults."""

    max_bytes: int | None = DEFAULT_MAX_BYTES
    max_documents: int | None = DEFAULT_MAX_DOCUMENTS

    def __post_init__(self) -> None:
        object.__setattr__(self, "max_bytes", parse_limit(self.max_bytes, name="max_bytes", sizes=True))
        object.__setattr__(self, "max_documents", parse_limit(self.max_documents, name="max_documents"))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "LoadLimits":
        """The deployment's defaults: ``$DPKPS_MAX_CORPUS_BYTES`` and ``$DPKPS_MAX_DOCUMENTS`` where set (a bad
        value is a clear error naming the variable), else :data:`DEFAULT_MAX_BYTES` / :data:`DEFAULT_MAX_DOCUMENTS`."""
        env = os.environ if environ is None else environ
        max_bytes: int | None = DEFAULT_MAX_BYTES
        max_documents: int | None = DEFAULT_MAX_DOCUMENTS
        if env.get(ENV_MAX_BYTES, "").strip():
            max_bytes = parse_limit(env[ENV_MAX_BYTES], name=f"${ENV_MAX_BYTES}", sizes=True)
        if env.get(ENV_MAX_DOCUMENTS, "").strip():
            max_documents = parse_limit(env[ENV_MAX_DOCUMENTS], name=f"${ENV_MAX_DOCUMENTS}")
        return cls(max_bytes=max_bytes, max_documents=max_documents)

    @classmethod
    def resolve(cls, *, max_bytes: Any = DEFAULT_LIMIT, max_documents: Any = DEFAULT_LIMIT) -> "LoadLimits":
        """The limits of one load: each one given (a number, ``0`` / ``None`` = no limit) or, left at
        :data:`DEFAULT_LIMIT`, the deployment's default (:meth:`from_env`)."""
        base = cls.from_env() if isinstance(max_bytes, _Default) or isinstance(max_documents, _Default) else None
        return cls(
            max_bytes=base.max_bytes if base is not None and isinstance(max_bytes, _Default)
            else parse_limit(max_bytes, name="max_bytes", sizes=True),
            max_documents=base.max_documents if base is not None and isinstance(max_documents, _Default)
            else parse_limit(max_documents, name="max_documents"),
        )

    def check_bytes(self, size: int, what: str = "file") -> None:
        """Refuse an input of ``size`` bytes over ``max_bytes`` (``what``: "file", "folder", …)."""
        if self.max_bytes is not None and size > self.max_bytes:
            raise LimitExceededError(
                f"The {what} is {fmt_size(size)}, over the {fmt_size(self.max_bytes)} limit set by max_bytes; "
                f"raise it with {SETTING_HINTS['max_bytes']}.",
                setting="max_bytes", limit=self.max_bytes, found=size)

    def over_documents(self, n: int) -> bool:
        """Whether ``n`` rows are over ``max_documents``."""
        return self.max_documents is not None and n > self.max_documents

    def check_documents(self, n: int) -> None:
        """Refuse ``n`` rows (or .txt files) over ``max_documents``."""
        if self.max_documents is not None and n > self.max_documents:
            raise LimitExceededError(
                f"The input has {n:,} documents, over the limit of {self.max_documents:,} set by max_documents; "
                f"raise it with {SETTING_HINTS['max_documents']}.",
                setting="max_documents", limit=self.max_documents, found=n)

    def describe(self) -> str:
        """The limits in words (for help texts and reports)."""
        b = "no limit" if self.max_bytes is None else fmt_size(self.max_bytes)
        d = "no limit" if self.max_documents is None else f"{self.max_documents:,}"
        return f"corpus size: {b}; documents: {d}"
