"""Repetition control of the local models' decoding: its defaults, its bounds and its one check
(docs/ARCHITECTURE.md, llm/; both engines, :mod:`dpkps_core.llm.ct2` and :mod:`dpkps_core.llm.torch_engine`).

Two standard decoding options, with the meaning CTranslate2's ``generate_batch`` gives them and the torch engine
reproduces: ``no_repeat_ngram`` = n > 0 forbids a reply to write any n-gram of tokens a second time (the
"no-repeat n-gram" block of Paulus et al. 2018, "A Deep Reinforced Model for Abstractive Summarization", §2.5);
``repetition_penalty`` = p > 1 divides the positive logits and multiplies the negative logits of every token the
reply already holds (CTRL, Keskar et al. 2019, §4.1). Both look at the generated tokens only, never the prompt:
the prompt holds the keyphrases the reply is asked to use.

The defaults were chosen by measurement (benchmarks/repetition.py; README "Generation engine"): the setting that
lowered the non-document screen's refusals (:mod:`dpkps_core.llm.quality`) on 48 BBC DP keyphrase sequences
without lowering their keyphrase coverage. Decoding is post-processing of DP outputs (docs/DESIGN.md §2.5): no ε.
"""

from __future__ import annotations

from dpkps_core.errors import ParameterError

# Measured (python -m benchmarks.repetition; 48 BBC DP sequences × 2 sampling seeds = 96 replies per setting, the
# offline model through CTranslate2 int8, 1 thread, batch 16, 200 tokens, temperature 0.7; README "Generation
# engine" has the whole grid): with both off, 34 % of the replies were refused as non-documents and 50 ran to the
# token budget; no_repeat_ngram 4 with repetition_penalty 1.1 cut that to 3 % refused and 12 at the budget, and the
# share of its keyphrases a reply uses rose from 0.11 to 0.17 (replies using ≥ half of them: 0 → 6). The other
# settings that lowered refusals as much (3/1.0, 0/1.1, 3/1.1) left more replies running to the budget; a penalty
# of 1.2 lowered the keyphrase share again (0.14–0.15).
#: No n-gram of this many tokens twice in a reply (0 = off).
DEFAULT_NO_REPEAT_NGRAM = 4
#: CTRL's repetition penalty (1.0 = off).
DEFAULT_REPETITION_PENALTY = 1.1
#: Bounds: an n of 1 would forbid any token twice (no "the" after the first); past 32 the block never fires in a
#: reply of a few hundred tokens. A penalty below 1 rewards repetition; above 2 it bans the reply's own words.
MAX_NO_REPEAT_NGRAM = 32
MAX_REPETITION_PENALTY = 2.0


def check_repetition(no_repeat_ngram: object, repetition_penalty: object) -> None:
    """Raise ParameterError unless ``no_repeat_ngram`` is 0 or an integer from 2 to :data:`MAX_NO_REPEAT_NGRAM` and
    ``repetition_penalty`` a number from 1 to :data:`MAX_REPETITION_PENALTY`."""
    n = no_repeat_ngram
    if not isinstance(n, int) or isinstance(n, bool) or not (n == 0 or 2 <= n <= MAX_NO_REPEAT_NGRAM):
        raise ParameterError(
            f"no_repeat_ngram must be 0 (off) or an integer from 2 to {MAX_NO_REPEAT_NGRAM}, got {n!r} "
            "(1 would forbid every token a second time)."
        )
    p = repetition_penalty
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 1.0 <= p <= MAX_REPETITION_PENALTY:
        raise ParameterError(
            f"repetition_penalty must be a number from 1.0 (off) to {MAX_REPETITION_PENALTY}, got {p!r}."
        )


def repetition_params(no_repeat_ngram: int, repetition_penalty: float) -> dict[str, int | float]:
    """The two settings as the audit log records them (with the other decoding settings)."""
    return {"no_repeat_ngram": int(no_repeat_ngram), "repetition_penalty": float(repetition_penalty)}


def repetition_kwargs(no_repeat_ngram: int, repetition_penalty: float) -> dict[str, int | float]:
    """The keyword arguments that pass a setting on to an engine's ``decode_batch``: none when repetition control is
    off, so that an engine written before these two keywords existed still decodes (llm/local.py, the seam)."""
    if no_repeat_ngram == 0 and repetition_penalty == 1.0:
        return {}
    return repetition_params(no_repeat_ngram, repetition_penalty)
