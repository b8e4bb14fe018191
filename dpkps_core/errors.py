"""User-facing errors of DP-KPS Studio.

Every failure a user can cause (bad file, bad parameter, budget exhausted…) raises a subclass of
:class:`DPKPSError` whose message is one plain sentence saying what is wrong and what to do. Messages never
quote private document text: at most a line number and a column name.
"""

from __future__ import annotations


class DPKPSError(ValueError):
    """Base class of every error meant to be shown to a user (CLI one-liner, ``st.error`` in the app)."""


class CorpusError(DPKPSError):
    """The private corpus could not be read or does not pass validation."""


class VocabularyError(DPKPSError):
    """The public vocabulary could not be loaded, or it matches nothing usable."""


class ParameterError(DPKPSError):
    """A parameter is out of its allowed range (ε ≤ 0, L < 1, …) or over a documented limit."""


class ParameterTypeError(ParameterError, TypeError):
    """A privacy parameter (ε, δ, the cap) is not a real number: a bool, a string, None… (diffprivlib raises
    TypeError for these too). Still a :class:`ParameterError`, so the app and the CLI show its one sentence."""


class PrivacyBudgetError(DPKPSError):
    """A step would spend more ε than the budget cap allows; nothing was spent."""


class EmbeddingError(DPKPSError):
    """The embedding model could not be loaded or used."""


class LLMError(DPKPSError):
    """The LLM backend could not be reached or configured."""


class ExportError(DPKPSError):
    """The release bundle could not be written, or would contain something it must not."""
