"""The privacy report as Markdown: the one renderer of a report for a reader (docs/ARCHITECTURE.md).

:func:`render_report_markdown` writes the release bundle's ``privacy_report.md`` from the released privacy report
(with the bundle's ``generation`` section); :func:`render_report_summary` writes the short view that
:meth:`dpkps_core.records.privacy_report.PrivacyReport.to_markdown` returns. Both read a plain mapping (the report's JSON,
or a :class:`~dpkps_core.records.privacy_report.PrivacyReport`, which is one) and share the section helpers below, one per
section of the report. Only public inputs and DP outputs reach them (docs/DESIGN.md §2: what the bundle holds is the
ledger's releases and public settings); no private figure is rendered here.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from dpkps_core.dp.rng import SEED_POLICY_DEMO

#: The first line of a seeded demo's report (docs/DESIGN.md §2: seeded noise is predictable, so the bundle says so).
DEMO_HEADING = "# ⚠ REPRODUCIBLE DEMO — NOT FOR RELEASE ⚠"
#: The bundle's only word on releases after this run (docs/DESIGN.md §2.0): the documents' totals to date are private,
#: local figures of the owner's ledger, never exported.
LATER_RELEASES_NOTE = ("- Later releases on the same documents may exist (other runs, re-runs, the command line): see "
                       "your ledger for each document's total to date.")
#: What the events section says when the ledger recorded no release.
NO_EVENTS_LINE = "No privacy events were recorded."
#: What the LLM section says when the run sent no prompt (the sequences alone were released).
NO_LLM_LINE = "- No LLM generation recorded in this run."
_EVENT_TABLE_HEAD = ("| step | mechanism | ε | δ | sensitivity | noise scale | released |",
                     "|---|---|---|---|---|---|---|")


# --------------------------------------------------------------------------------------------------------------
# Cells


def _md(value: Any) -> str:
    """One Markdown table cell or list item: floats as ``%g``, containers as JSON, None as a dash, on one line
    with ``|`` escaped (a released description must not break the table)."""
    if isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, (dict, list)):
        text = json.dumps(value, ensure_ascii=False)
    elif value is None:
        text = "—"
    else:
        text = str(value)
    return " ".join(text.replace("|", "\\|").split())


def _eps(value: Any) -> str:
    """A privacy figure (ε, δ, sensitivity, noise scale): a number as ``%g``, anything else as :func:`_md`."""
    return f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else _md(value)


def _unit_line(neighbouring: str) -> str:
    """The report's unit-of-privacy line, from the privacy report's neighbouring relation (docs/DESIGN.md §2, person unit)."""
    if "person" in neighbouring:
        return (f"- Unit of privacy: **one person** ({neighbouring}); each person's documents together contribute "
                "what one document would, and no person identifier is released.")
    return f"- Unit of privacy: one whole document ({neighbouring})."


def _events(report: Mapping[str, Any]) -> Sequence[Any]:
    """The report's ledger events: a list, or a ledger's ``to_dict()`` (``{"events": [...]}``) in its place."""
    events = report.get("events") or []
    if isinstance(events, Mapping):
        events = events.get("events", [])
    return events


def _generation(report: Mapping[str, Any]) -> Mapping[str, Any]:
    """The bundle's ``generation`` section of the report ({} when absent or not a mapping)."""
    gen = report.get("generation") or {}
    return gen if isinstance(gen, Mapping) else {}


# --------------------------------------------------------------------------------------------------------------
# Sections (each returns its lines, ending with a blank line)


def demo_warning_section(report: Mapping[str, Any]) -> list[str]:
    """The warning that opens a seeded demo's report (docs/DESIGN.md §2: "the bundle says which"); nothing otherwise."""
    if report.get("seed_policy") != SEED_POLICY_DEMO:
        return []
    return [
        DEMO_HEADING,
        "",
        "This run used a fixed random seed so that it can be reproduced. Seeded noise is predictable: "
        "**the DP guarantee does not hold. Do not release these files.** Re-run with OS entropy to release.",
        "",
    ]


def guarantee_section(report: Mapping[str, Any]) -> list[str]:
    """Total ε = ε_voc + ε_kde, the cap and the unit of privacy (docs/DESIGN.md §2); the documents carry the same ε
    (post-processing, docs/DESIGN.md §1)."""
    return [
        "## Privacy guarantee",
        "",
        f"- Total ε: **{_eps(report.get('epsilon_total'))}** for this run's releases "
        f"(vocabulary ε_voc = {_eps(report.get('epsilon_vocabulary'))}, "
        f"keyphrase density ε_kde = {_eps(report.get('epsilon_kde'))})",
        LATER_RELEASES_NOTE,
        f"- Budget cap: {_eps(report.get('epsilon_cap'))}",
        _unit_line(str(report.get("neighbouring") or "add/remove one document")),
        "- The synthetic documents are post-processing of the DP keyphrase sequences: the LLM never saw private "
        "text, so they carry the same ε.",
        "",
    ]


def events_section(report: Mapping[str, Any]) -> list[str]:
    """One table row per ledger event — mechanism, ε, δ, sensitivity, noise scale, what it released (docs/DESIGN.md §2:
    "a ledger object records every mechanism run"); :data:`NO_EVENTS_LINE` when there is none."""
    events = _events(report)
    lines = ["## What each ε bought", ""]
    if not events:
        return lines + [NO_EVENTS_LINE, ""]
    lines += list(_EVENT_TABLE_HEAD)
    for e in events:
        if isinstance(e, Mapping):
            lines.append(
                f"| {_md(e.get('step'))} | {_md(e.get('mechanism'))} | {_eps(e.get('epsilon'))} | "
                f"{_eps(e.get('delta', 0))} | {_eps(e.get('sensitivity'))} | {_eps(e.get('noise_scale'))} | "
                f"{_md(e.get('released'))} |"
            )
    return lines + [""]


def mechanisms_section(report: Mapping[str, Any]) -> list[str]:
    """The mechanisms used: ``name: description`` from a mapping, one item per entry of a list, else one item."""
    mechanisms = report.get("mechanisms")
    lines = ["## Mechanisms", ""]
    if isinstance(mechanisms, Mapping):
        lines += [f"- **{_md(k)}**: {_md(v)}" for k, v in mechanisms.items()]
    elif isinstance(mechanisms, (list, tuple)):
        lines += [f"- {_md(m)}" for m in mechanisms]
    else:
        lines.append(f"- {_md(mechanisms)}")
    return lines + [""]


def parameters_section(report: Mapping[str, Any]) -> list[str]:
    """The run's public parameters as a table (the private file's column names are already left out, see
    :func:`dpkps_core.dossier.export.without_column_names`); a dash when there are none."""
    params = report.get("parameters")
    lines = ["## Parameters", ""]
    if isinstance(params, Mapping) and params:
        lines += ["| parameter | value |", "|---|---|"] + [f"| {_md(k)} | {_md(v)} |" for k, v in params.items()]
    else:
        lines.append(_md(params))
    return lines + [""]


def public_inputs_section(report: Mapping[str, Any]) -> list[str]:
    """The public inputs (vocabulary V, embedding model E) and the seed policy (docs/DESIGN.md §1, §2)."""
    return [
        "## Public inputs",
        "",
        f"- Vocabulary: {_md(report.get('vocabulary'))}",
        f"- Embedding model: {_md(report.get('embedding_model'))}",
        f"- Seed policy: {_md(report.get('seed_policy'))}",
        "",
    ]


def llm_section(report: Mapping[str, Any]) -> list[str]:
    """The LLM that wrote the documents, its settings and the public prompt (docs/DESIGN.md §1: public template + sequence
    + public few-shot examples); :data:`NO_LLM_LINE` when no prompt was sent."""
    gen = _generation(report)
    lines = ["## LLM used", ""]
    if not gen.get("backend"):
        return lines + [NO_LLM_LINE, ""]
    lines += [
        f"- Backend: {_md(gen.get('backend'))}",
        f"- Model: {_md(gen.get('model'))}",
        f"- Backend settings: {_md(gen.get('backend_info'))}",
        f"- Generation parameters: {_md(gen.get('parameters'))}",
    ]
    prompt = gen.get("prompt_config") or {}
    if prompt:
        lines += [
            f"- Document type: {_md(prompt.get('doc_type'))}",
            f"- Prompt template: `{_md(prompt.get('template'))}`",
            f"- Public few-shot examples: {_md(prompt.get('few_shot_examples'))}",
            "- Class names in prompts: "
            + ("**yes** (class names were marked public)" if prompt.get("include_label") else "no"),
        ]
    if len(gen.get("configurations", [])) > 1:
        lines.append(f"- Several configurations were used: {_md(gen.get('configurations'))}")
    return lines + [""]


def counts_section(report: Mapping[str, Any]) -> list[str]:
    """How many sequences, documents, failures and prompts the bundle holds (a dash for a count not recorded)."""
    counts = _generation(report).get("counts") or {}
    return [
        "## Counts",
        "",
        f"- Keyphrase sequences: {_md(counts.get('sequences'))}",
        f"- Synthetic documents: {_md(counts.get('documents'))}",
        f"- Failed generations: {_md(counts.get('failed'))}",
        f"- Prompts sent (audit log): {_md(counts.get('prompts_sent'))}",
        "",
    ]


def not_included_section(report: Mapping[str, Any]) -> list[str]:
    """What the bundle never holds (docs/PRIVACY.md, "What never leaves the private side")."""
    return [
        "## Not included",
        "",
        "No private text, no held-out split (split.json), no evaluation on real data (evaluation.json) and no API "
        "keys are in this bundle. `manifest.json` lists every file with its SHA-256.",
        "",
    ]


#: The release report's sections, in order (after the demo warning and the title).
REPORT_SECTIONS = (guarantee_section, events_section, mechanisms_section, parameters_section, public_inputs_section,
                   llm_section, counts_section, not_included_section)


# --------------------------------------------------------------------------------------------------------------
# Reports


def render_report_markdown(report: Mapping[str, Any]) -> str:
    """The bundle's human-readable privacy report (Markdown) from a privacy report with its ``generation``
    section: the demo warning when seeded, then one block per entry of :data:`REPORT_SECTIONS`."""
    lines = demo_warning_section(report) + ["# DP-KPS release report", ""]
    for section in REPORT_SECTIONS:
        lines += section(report)
    return "\n".join(lines)


def render_report_summary(report: Mapping[str, Any]) -> str:
    """The short view of one method's report: its guarantee, the totals, the cap, the noise, and what each ε
    bought (the release report's events table, :func:`events_section`)."""
    cap = report.get("epsilon_cap")
    lines = [f"# Privacy report: {report.get('method') or 'release'}", "",
             f"- Guarantee: {report.get('guarantee', '')}",
             f"- Total ε = {_eps(report.get('epsilon_total') or 0.0)}, δ = {_eps(report.get('delta_total') or 0.0)} "
             f"(neighbouring: {report.get('neighbouring', '')})"]
    if cap is not None:
        lines.append(f"- Budget cap of this run: ε = {_eps(cap)}")
    if report.get("seed_policy"):
        lines.append(f"- Noise: {report.get('seed_policy')}")
    return "\n".join(lines + [""] + events_section(report))
