"""The privacy report of one release: ONE typed, frozen object that every generation method produces (docs/DESIGN.md §2:
"a ledger object records every mechanism run … and is exported with the bundle"; docs/PRIVACY.md).

:class:`PrivacyReport` is built from the ledger (what was actually charged) and public settings only. Its JSON is
the run folder's ``privacy_report.json`` and a comparison's ``privacy_<method>.json``; the layout (which keys, in
which order) is kept with the report, so a report read back with :meth:`PrivacyReport.from_dict` writes exactly
the JSON it was read from, and DP-KPS keeps writing the keys readers know. The report is a read-only mapping
over that JSON (``report["epsilon_total"]``), so code written for the former dictionaries keeps working.
"""

from __future__ import annotations

import dataclasses
import json
from types import MappingProxyType
from typing import Any, Iterator, Mapping, Sequence

from dpkps_core.dp.events import ADD_REMOVE_ONE_DOCUMENT, PrivacyEvent
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.errors import ParameterError
from dpkps_core.records.report_markdown import render_report_summary

#: The keys of the typed fields, as the JSON names them.
CORE_KEYS = ("method", "guarantee", "neighbouring", "epsilon_total", "delta_total", "epsilon_cap", "epsilon_by_step",
             "events", "seed_policy", "parameters")

#: DP-KPS's ``privacy_report.json`` layout (docs/ARCHITECTURE.md "Run folder"), in the order it has always been
#: written; entries that are not typed fields come from :attr:`PrivacyReport.details`.
DPKPS_KEYS = ("epsilon_total", "epsilon_vocabulary", "epsilon_kde", "epsilon_class_counts", "delta_total",
              "epsilon_cap", "neighbouring", "guarantee", "events", "seed_policy", "noise", "mechanisms", "vocabulary",
              "embedding_model", "method", "classes", "parameters", "sequences", "uniform_fallback_draws",
              "corpus_to_date")

DPKPS_GUARANTEE = ("pure ε-differential privacy of the sequences (and, by post-processing, of any text generated "
                   "from them)")


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclasses.dataclass(frozen=True, eq=False)
class PrivacyReport(Mapping[str, Any]):
    """The public privacy report of one method's release (DP outputs and public parameters only).

    Attributes:
        method: the generation method (``"independent"``… for DP-KPS, ``"private-prediction"``, ``"augpe"``).
        guarantee: the guarantee, in words.
        neighbouring: the neighbouring relation (one document, or one person).
        epsilon_total, delta_total: what the ledger charged for this release.
        events: the ledger's frozen events of this release.
        epsilon_cap: this run's cap setting (public), or None.
        epsilon_by_step: ε per pipeline step.
        seed_policy: ``"os-entropy"`` or ``"seeded-demo-not-for-release"`` (docs/DESIGN.md §2).
        parameters: the public parameters of the run.
        details: the method's further public entries (Ṽ's sizes, classes, the DP count…), in JSON order.
        layout: the JSON keys, in order, that :meth:`to_dict` writes (the typed fields and ``details``).
    """

    method: str
    guarantee: str
    neighbouring: str
    epsilon_total: float
    delta_total: float
    events: tuple[PrivacyEvent, ...] = ()
    epsilon_cap: float | None = None
    epsilon_by_step: Mapping[str, float] = dataclasses.field(default_factory=dict)
    seed_policy: str | None = None
    parameters: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    details: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    layout: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "events", tuple(self.events))
        if not all(isinstance(e, PrivacyEvent) for e in self.events):
            raise ParameterError("A privacy report's events must be PrivacyEvents (read old ones with from_dict).")
        for name in ("epsilon_by_step", "parameters", "details"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        clash = set(self.details) & set(CORE_KEYS)
        if clash:
            raise ParameterError(f"A privacy report's details repeat its typed fields: {sorted(clash)}.")
        layout = tuple(self.layout) or CORE_KEYS + tuple(self.details)
        missing = [k for k in self.details if k not in layout]
        object.__setattr__(self, "layout", layout + tuple(missing))

    # ---- construction
    @classmethod
    def from_context(cls, context: ReleaseContext, *, method: str, guarantee: str,
                     neighbouring: str = ADD_REMOVE_ONE_DOCUMENT, parameters: Mapping[str, Any] | None = None,
                     details: Mapping[str, Any] | None = None, layout: Sequence[str] = ()) -> "PrivacyReport":
        """The report of the releases made in ``context`` (:class:`~dpkps_core.dp.release.ReleaseContext`): what
        its ledger charged (this run's events, totals and cap; the ledger is required) and its noise source's seed
        policy (docs/DESIGN.md §2), with public settings."""
        ledger = context.require_ledger("A privacy report")
        return cls(method=method, guarantee=guarantee, neighbouring=neighbouring,
                   epsilon_total=ledger.total_epsilon, delta_total=ledger.total_delta, events=ledger.events,
                   epsilon_cap=ledger.cap, epsilon_by_step=ledger.by_step(), seed_policy=context.noise.policy,
                   parameters=parameters or {}, details=details or {}, layout=tuple(layout))

    def with_context(self, context: ReleaseContext) -> "PrivacyReport":
        """This report with what ``context``'s ledger actually recorded (a comparison's method ledger; required) and
        its noise source's seed policy; the totals, ε per step, events and seed policy are written after the method's
        own entries."""
        ledger = context.require_ledger("A privacy report")
        recorded = ("epsilon_total", "delta_total", "epsilon_by_step", "events", "seed_policy")
        layout = tuple(self.layout) + tuple(k for k in recorded if k not in self.layout)
        return dataclasses.replace(self, epsilon_total=ledger.total_epsilon, delta_total=ledger.total_delta,
                                   epsilon_by_step=ledger.by_step(), events=ledger.events,
                                   seed_policy=context.noise.policy,
                                   layout=layout)

    def with_details(self, **entries: Any) -> "PrivacyReport":
        """This report with further (public) entries, or typed fields, set."""
        typed = {k: v for k, v in entries.items() if k in CORE_KEYS}
        details = {**self.details, **{k: v for k, v in entries.items() if k not in CORE_KEYS}}
        layout = tuple(self.layout) + tuple(k for k in entries if k not in self.layout)
        return dataclasses.replace(self, **typed, details=details, layout=layout)

    # ---- JSON
    def _value(self, key: str) -> Any:
        if key == "events":
            return [e.to_dict() for e in self.events]
        if key in ("epsilon_by_step", "parameters"):
            return dict(getattr(self, key))
        if key in CORE_KEYS:
            return getattr(self, key)
        return self.details[key]

    def to_dict(self) -> dict[str, Any]:
        """The report's JSON object, keys in :attr:`layout` order."""
        return {k: self._value(k) for k in self.layout if k in CORE_KEYS or k in self.details}

    def to_json(self) -> str:
        """The report as the run folder writes it (2-space indent, UTF-8 text)."""
        from dpkps_core.records.runfolder import json_default

        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False, default=json_default)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "PrivacyReport":
        """A report read back from its JSON (any method, old files included): typed fields where present, every
        other entry kept in ``details``, the key order kept in ``layout``."""
        events = data.get("events") or []
        if isinstance(events, Mapping):  # a ledger's to_dict() in place of its events
            events = events.get("events", [])
        return cls(
            method=str(data.get("method", "")), guarantee=str(data.get("guarantee", "")),
            neighbouring=str(data.get("neighbouring") or ADD_REMOVE_ONE_DOCUMENT),
            epsilon_total=float(data.get("epsilon_total") or 0.0), delta_total=float(data.get("delta_total") or 0.0),
            events=tuple(PrivacyEvent.from_dict(e) for e in events), epsilon_cap=data.get("epsilon_cap"),
            epsilon_by_step=data.get("epsilon_by_step") or {}, seed_policy=data.get("seed_policy"),
            parameters=data.get("parameters") or {},
            details={k: v for k, v in data.items() if k not in CORE_KEYS}, layout=tuple(data))

    # ---- Markdown
    def to_markdown(self) -> str:
        """The report for a reader: the guarantee, the totals, and what each ε bought (one line per event), rendered
        by :func:`dpkps_core.records.report_markdown.render_report_summary` (the one Markdown renderer of a report)."""
        return render_report_summary({k: self._value(k) for k in CORE_KEYS})

    # ---- the read-only mapping over the JSON (code written for the former dictionaries)
    def __getitem__(self, key: str) -> Any:
        if key in self.layout and (key in CORE_KEYS or key in self.details):
            return self._value(key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PrivacyReport):
            return self.to_dict() == other.to_dict()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]
