"""Per-unit budgets at release time: which documents take part in a release (docs/DESIGN.md §2.0).

The ledger is an individual privacy filter (Feldman & Zrnic, NeurIPS 2021): every release first asks the ledger
which rows of its input still have budget for its ε (:func:`admit`, which charges them at once and returns the
release's :class:`~dpkps_core.dp.ledger.AdmissionTicket`), then computes the release on the admitted rows only,
charges its event through the ticket, and only then draws noise. :func:`admit` is the one entry for that order.

The unit strings (:mod:`dpkps_core.ledger_store.units`) never leave the process: the persistent ledger stores only keyed HMACs of them. Each
row's string names every key the release may charge (the unit rules, :mod:`dpkps_core.ledger_store.rules`):

* its **document key** — the text as :func:`~dpkps_core.corpus.cleaning.normalise_document_text` reads it, and
  nothing else: the label is not part of it (a relabelled text must not open a fresh budget), and rows that share a
  text share the key, charged once per row (group privacy);
* its **person key** when the corpus has a person column: in a person-unit release the person is the unit; in a
  document-unit release the person is *known*, so the release counts toward the person's loss (k rows → kε).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np

from dpkps_core.corpus import Corpus
from dpkps_core.dp import count as dp_count
from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT
from dpkps_core.dp.ledger import MAX_ROW_FACTOR, AdmissionTicket, PrivacyLedger
from dpkps_core.dp.release import ReleaseContext, admit_units, release
from dpkps_core.dp.validation import check_epsilon
from dpkps_core.ledger_store.rules import is_key_source
from dpkps_core.ledger_store.unit_keys import KeySource
from dpkps_core.ledger_store.units import release_unit, unit_strings


@dataclasses.dataclass(frozen=True)
class Admission:
    """A release's admitted input: the documents whose keys had budget left (and were charged for it), how many
    documents were left out (a PRIVATE, local count: show it to the data owner, never release it), and the
    release's ticket — pass ``ticket`` as the ``ledger`` of the mechanism that computes the release, so that its
    event is charged to this admission and no other."""

    corpus: Corpus
    left_out: int
    ticket: AdmissionTicket


def _ticket(ledger: PrivacyLedger, units: Any, epsilon: float, *, what: str,
            row_factor: float) -> AdmissionTicket:
    if not isinstance(ledger, PrivacyLedger):
        raise ValueError("A release is admitted through a PrivacyLedger.")
    ticket = ledger.admission(units, float(epsilon), what=what, row_factor=row_factor)
    if np.shape(ticket.mask) != (len(units),):
        raise ValueError("The ledger's admission mask does not match the release's input.")
    return ticket


def admit(corpus: Corpus, ledger: PrivacyLedger, epsilon: float, *, by_person: bool,
          what: str = "this release", row_factor: float = MAX_ROW_FACTOR) -> Admission:
    """Charge-first admission of ``corpus``'s rows to a release of ``epsilon`` (see the module docstring).

    Call it before computing any statistic of ``corpus`` for the release and before drawing noise; then compute
    the release from ``Admission.corpus`` only and charge its event through ``Admission.ticket`` (before the
    noise). ``row_factor``: what the release costs one row of a person, per ε, under the person unit (≤ 2; derived
    per mechanism in docs/PRIVACY.md "Units and group privacy")."""
    ticket = _ticket(ledger, unit_strings(corpus, by_person=by_person), epsilon, what=what, row_factor=row_factor)
    mask = ticket.mask
    if mask.all():
        return Admission(corpus, 0, ticket)
    return Admission(corpus.subset(np.flatnonzero(mask).tolist()), int((~mask).sum()), ticket)


def admitted_indices(units: Sequence[str] | KeySource, ledger: PrivacyLedger, epsilon: float, *,
                     what: str = "this release", row_factor: float = MAX_ROW_FACTOR) -> tuple[np.ndarray, AdmissionTicket]:
    """The admitted positions of ``units`` (for inputs that are not a :class:`Corpus`) and the release's ticket
    (charge the release's event through it). ``units``: one unit string per row (:func:`unit_strings`), or their
    precomputed keys (a :class:`~dpkps_core.ledger_store.unit_keys.KeySource`, as a streamed corpus admits its
    documents: 32 bytes per row instead of the strings; issue 31) — the same rows admitted, the same keys charged."""
    ticket = _ticket(ledger, units if is_key_source(units) else list(units), epsilon, what=what,
                     row_factor=row_factor)
    return np.flatnonzero(ticket.mask), ticket


def release_unit_count(
    units: Sequence[str], *, epsilon: float, context: ReleaseContext, what: str = "documents in the training part",
    step: str = "size", neighbouring: str = ADD_REMOVE_ONE_DOCUMENT,
) -> tuple[dp_count.NoisyCount, int]:
    """A DP count of the distinct units in ``units`` (one string per document, see
    :func:`unit_strings`; a person's documents share one string, so persons are counted).

    ``context``: the release's ledger and noise source (:class:`~dpkps_core.dp.release.ReleaseContext`). With a
    ledger: the units are admitted first (individual privacy filter, docs/DESIGN.md §2.0; the admitted ones are
    charged at once), only the admitted ones are counted, then the event is charged through the admission's ticket,
    then the noise is drawn. Distinct units are counted by what each row stands for in its release
    (:func:`release_unit`: its person, or its document). Under the person unit one row of a person
    moves the count by at most 1 (only a person's only row adds or removes them), so each row is charged 1 × ε
    (docs/PRIVACY.md "Units and group privacy"). Returns the released count and how many documents were left out
    (a PRIVATE, local figure)."""
    epsilon = check_epsilon(epsilon, "ε (count)")
    units = list(units)
    done = release(  # admit → count the admitted → charge → noise (dpkps_core.dp.release owns the order)
        lambda: admit_units(context.ledger, units, epsilon=epsilon, what=f"the DP count of {what}", row_factor=1.0),
        statistic=lambda admitted: len({release_unit(u) for u in admitted.take(units)}),
        event=dp_count.count_event(epsilon=epsilon, what=what, step=step, neighbouring=neighbouring),
        draw=lambda _, n: dp_count.release_count(n, epsilon=epsilon, context=context.for_draw(), what=what,
                                                 step=step, neighbouring=neighbouring))
    return done.value, done.admitted.left_out
