"""The privacy report as Markdown (dpkps_core/records/report_markdown.py): one helper per section, the bundle's report
byte for byte, and the one renderer that PrivacyReport.to_markdown uses too (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from pathlib import Path

from dpkps_core.dp.events import PrivacyEvent
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import SEED_POLICY_DEMO, NoiseSource
from dpkps_core.records.privacy_report import PrivacyReport
from dpkps_core.records.report_markdown import (
    DEMO_HEADING,
    LATER_RELEASES_NOTE,
    NO_EVENTS_LINE,
    NO_LLM_LINE,
    REPORT_SECTIONS,
    counts_section,
    demo_warning_section,
    events_section,
    guarantee_section,
    llm_section,
    mechanisms_section,
    not_included_section,
    parameters_section,
    public_inputs_section,
    render_report_markdown,
    render_report_summary,
)

ROOT = Path(__file__).resolve().parents[2]

EVENT = {"step": "vocabulary", "mechanism": "laplace_histogram", "epsilon": 1.0, "delta": 0.0, "sensitivity": 1.0,
         "noise_scale": 1 / 3, "released": "noisy counts | top 200"}
GENERATION = {
    "backend": "openai", "model": "gpt-x", "backend_info": {"base_url": "https://api.example"},
    "parameters": {"temperature": 0.7}, "configurations": [{"a": 1}],
    "prompt_config": {"doc_type": "clinical note", "template": "Write a {doc_type} about {keyphrases}",
                      "few_shot_examples": ["public example"], "include_label": False},
    "counts": {"sequences": 4, "documents": 3, "failed": 1, "prompts_sent": 5},
}


# ------------------------------------------------------------------------------------------------ the sections


def test_the_demo_warning_opens_a_seeded_report_only() -> None:
    assert demo_warning_section({"seed_policy": "os-entropy"}) == []
    assert demo_warning_section({}) == []
    lines = demo_warning_section({"seed_policy": SEED_POLICY_DEMO})
    assert lines[0] == DEMO_HEADING and lines[-1] == ""
    assert "the DP guarantee does not hold. Do not release these files." in lines[2]


def test_the_guarantee_states_the_totals_the_cap_and_the_unit() -> None:
    lines = guarantee_section({"epsilon_total": 6, "epsilon_vocabulary": 1.0, "epsilon_kde": 5.0, "epsilon_cap": 10.0})
    assert lines[:2] == ["## Privacy guarantee", ""] and lines[-1] == ""
    assert lines[2] == ("- Total ε: **6** for this run's releases (vocabulary ε_voc = 1, keyphrase density "
                        "ε_kde = 5)")
    assert lines[3] == LATER_RELEASES_NOTE and lines[4] == "- Budget cap: 10"
    assert lines[5] == "- Unit of privacy: one whole document (add/remove one document)."   # the default relation
    person = guarantee_section({"neighbouring": "add/remove all documents of one person", "epsilon_cap": None})
    assert "- Budget cap: —" in person                                                       # no cap: a dash
    assert any(line.startswith("- Unit of privacy: **one person** (add/remove all documents of one person)")
               and "no person identifier is released" in line for line in person)


def test_the_events_table_escapes_cells_and_says_when_nothing_was_released() -> None:
    assert events_section({}) == ["## What each ε bought", "", NO_EVENTS_LINE, ""]
    assert events_section({"events": {"events": []}}) == events_section({})
    lines = events_section({"events": [EVENT, "not an event", {**EVENT, "step": "kde", "released": "a\nb"}]})
    assert lines[2:4] == ["| step | mechanism | ε | δ | sensitivity | noise scale | released |",
                          "|---|---|---|---|---|---|---|"]
    assert lines[4] == "| vocabulary | laplace_histogram | 1 | 0 | 1 | 0.333333 | noisy counts \\| top 200 |"
    assert lines[5].startswith("| kde |") and lines[5].endswith("| a b |")               # one line per event
    assert len(lines) == 7 and lines[-1] == ""                                            # the string is skipped
    ledger_form = events_section({"events": {"events": [{k: v for k, v in EVENT.items() if k != "delta"}]}})
    assert ledger_form[4] == lines[4]                                                     # δ defaults to 0


def test_mechanisms_render_from_a_mapping_a_list_or_one_value() -> None:
    assert mechanisms_section({"mechanisms": {"vocabulary": "Laplace | top-N"}})[2] == \
        "- **vocabulary**: Laplace \\| top-N"
    assert mechanisms_section({"mechanisms": ["laplace", {"kde": 1}]})[2:4] == ["- laplace", '- {"kde": 1}']
    assert mechanisms_section({}) == ["## Mechanisms", "", "- —", ""]


def test_parameters_render_as_a_table_or_a_placeholder() -> None:
    lines = parameters_section({"parameters": {"vocab_size": 200, "bandwidth": 0.5, "classes": ["a", "b"]}})
    assert lines[2:] == ["| parameter | value |", "|---|---|", "| vocab_size | 200 |", "| bandwidth | 0.5 |",
                         '| classes | ["a", "b"] |', ""]
    assert parameters_section({}) == ["## Parameters", "", "—", ""]
    assert parameters_section({"parameters": {}})[2] == "{}"


def test_public_inputs_name_the_vocabulary_the_embedding_model_and_the_seed_policy() -> None:
    lines = public_inputs_section({"vocabulary": "GloVe 6B 400k", "seed_policy": "os-entropy"})
    assert lines == ["## Public inputs", "", "- Vocabulary: GloVe 6B 400k", "- Embedding model: —",
                     "- Seed policy: os-entropy", ""]


def test_the_llm_section_names_the_backend_and_the_public_prompt() -> None:
    assert llm_section({}) == ["## LLM used", "", NO_LLM_LINE, ""]
    assert llm_section({"generation": {"counts": {"documents": 0}}}) == llm_section({})    # no backend: no LLM
    assert llm_section({"generation": "not a section"}) == llm_section({})                 # malformed: no crash
    lines = llm_section({"generation": GENERATION})
    assert "- Backend: openai" in lines and "- Model: gpt-x" in lines
    assert "- Prompt template: `Write a {doc_type} about {keyphrases}`" in lines
    assert '- Public few-shot examples: ["public example"]' in lines
    assert "- Class names in prompts: no" in lines and not any("Several" in line for line in lines)
    public_labels = llm_section({"generation": {**GENERATION, "prompt_config": {"include_label": True},
                                                "configurations": [{"a": 1}, {"a": 2}]}})
    assert "- Class names in prompts: **yes** (class names were marked public)" in public_labels
    assert public_labels[-2] == '- Several configurations were used: [{"a": 1}, {"a": 2}]'
    no_prompt = llm_section({"generation": {**GENERATION, "prompt_config": {}}})
    assert not any(line.startswith(("- Document type", "- Prompt template")) for line in no_prompt)


def test_counts_show_a_dash_for_what_was_not_recorded() -> None:
    assert counts_section({"generation": GENERATION})[2:6] == [
        "- Keyphrase sequences: 4", "- Synthetic documents: 3", "- Failed generations: 1",
        "- Prompts sent (audit log): 5"]
    for report in ({}, {"generation": {"counts": None}}, {"generation": ["x"]}):
        assert counts_section(report)[2:6] == ["- Keyphrase sequences: —", "- Synthetic documents: —",
                                               "- Failed generations: —", "- Prompts sent (audit log): —"]


def test_not_included_names_what_never_leaves_the_private_side() -> None:
    text = "\n".join(not_included_section({}))
    assert text.startswith("## Not included") and "split.json" in text and "evaluation.json" in text
    assert "no API keys are in this bundle" in text
    assert "`manifest.json`" in text


# ------------------------------------------------------------------------------------------------ the reports


def test_every_section_ends_with_a_blank_line_so_blocks_stay_apart() -> None:
    report = {"generation": GENERATION, "events": [EVENT], "mechanisms": ["m"], "parameters": {"n": 1}}
    for section in REPORT_SECTIONS:
        lines = section(report)
        assert lines[0].startswith("## ") and lines[1] == "" and lines[-1] == "", section.__name__


def test_the_release_report_is_the_sections_in_order_byte_for_byte() -> None:
    report = {"epsilon_total": 6.0, "epsilon_vocabulary": 1.0, "epsilon_kde": 5.0, "epsilon_cap": 10.0,
              "events": [EVENT], "mechanisms": {"vocabulary": "Laplace"}, "parameters": {"vocab_size": 200},
              "vocabulary": "GloVe", "embedding_model": "e5", "seed_policy": SEED_POLICY_DEMO,
              "generation": GENERATION}
    expected = "\n".join([
        DEMO_HEADING, "",
        "This run used a fixed random seed so that it can be reproduced. Seeded noise is predictable: **the DP "
        "guarantee does not hold. Do not release these files.** Re-run with OS entropy to release.", "",
        "# DP-KPS release report", "",
        "## Privacy guarantee", "",
        "- Total ε: **6** for this run's releases (vocabulary ε_voc = 1, keyphrase density ε_kde = 5)",
        LATER_RELEASES_NOTE, "- Budget cap: 10", "- Unit of privacy: one whole document (add/remove one document).",
        "- The synthetic documents are post-processing of the DP keyphrase sequences: the LLM never saw private "
        "text, so they carry the same ε.", "",
        "## What each ε bought", "", "| step | mechanism | ε | δ | sensitivity | noise scale | released |",
        "|---|---|---|---|---|---|---|",
        "| vocabulary | laplace_histogram | 1 | 0 | 1 | 0.333333 | noisy counts \\| top 200 |", "",
        "## Mechanisms", "", "- **vocabulary**: Laplace", "",
        "## Parameters", "", "| parameter | value |", "|---|---|", "| vocab_size | 200 |", "",
        "## Public inputs", "", "- Vocabulary: GloVe", "- Embedding model: e5",
        f"- Seed policy: {SEED_POLICY_DEMO}", "",
        "## LLM used", "", "- Backend: openai", "- Model: gpt-x",
        '- Backend settings: {"base_url": "https://api.example"}', '- Generation parameters: {"temperature": 0.7}',
        "- Document type: clinical note", "- Prompt template: `Write a {doc_type} about {keyphrases}`",
        '- Public few-shot examples: ["public example"]', "- Class names in prompts: no", "",
        "## Counts", "", "- Keyphrase sequences: 4", "- Synthetic documents: 3", "- Failed generations: 1",
        "- Prompts sent (audit log): 5", "",
        "## Not included", "",
        "No private text, no held-out split (split.json), no evaluation on real data (evaluation.json) and no API "
        "keys are in this bundle. `manifest.json` lists every file with its SHA-256.", "",
    ])
    assert render_report_markdown(report) == expected
    released = render_report_markdown({**report, "seed_policy": "os-entropy"})
    assert released.startswith("# DP-KPS release report\n") and DEMO_HEADING not in released


def test_privacy_report_to_markdown_uses_the_same_events_table_as_the_bundle() -> None:
    ledger = PrivacyLedger(8.0)
    ledger.charge(PrivacyEvent("laplace_histogram", "vocabulary", 1.0, 1.0, 1 / 3, "noisy counts | top 200"))
    ledger.charge(PrivacyEvent("gaussian", "kde", 4.0, 2.0, 0.123456789, "kde", delta=1e-6))
    report = PrivacyReport.from_context(ReleaseContext(noise=NoiseSource(), ledger=ledger), method="independent",
                                        guarantee="pure ε-DP")
    md = report.to_markdown()
    assert md.startswith("# Privacy report: independent\n\n- Guarantee: pure ε-DP\n")
    assert "- Total ε = 5, δ = 1e-06 (neighbouring: add/remove one document)" in md
    assert "- Budget cap of this run: ε = 8" in md and "- Noise: os-entropy" in md       # the context's seed policy
    table = "\n".join(events_section(report.to_dict()))
    assert table in md and table in render_report_markdown(report.to_dict())               # one table, one renderer
    assert "| kde | gaussian | 4 | 1e-06 | 2 | 0.123457 | kde |" in md
    empty = PrivacyReport(method="", guarantee="g", neighbouring="n", epsilon_total=0, delta_total=0)
    assert empty.to_markdown() == render_report_summary(empty.to_dict())
    assert empty.to_markdown().startswith("# Privacy report: release\n") and NO_EVENTS_LINE in empty.to_markdown()


def test_only_report_markdown_renders_a_report() -> None:
    """One owner for the report as Markdown: no other core module writes the events table's heading."""
    writers = [p.relative_to(ROOT).as_posix() for p in (ROOT / "dpkps_core").rglob("*.py")
               if "What each ε bought" in p.read_text(encoding="utf-8")]
    assert writers == ["dpkps_core/records/report_markdown.py"]
