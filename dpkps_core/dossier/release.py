"""The release edition's content, read from a run folder: DP outputs and public inputs ONLY (issue 34 §1).

Everything here comes from the run folder's releasable files (``privacy_report.json``, ``run_config.json``,
``private_vocabulary.json``, ``sequences.jsonl``, ``documents.jsonl``, ``audit_log.jsonl``) through an ALLOWLIST of
fields: parameters by their human labels (:mod:`dpkps_core.dossier.labels`; a key without a label is left out), the
unit of protection in fixed words (the report's neighbouring sentence names the person COLUMN, which is private, so
it is never copied), the corpus as "a private corpus" unless it is a bundled public demo. Synthetic documents are
DP post-processing (docs/DESIGN.md §1) and may be shown. NIST SP 800-226 (Near, Darais et al., 2025), §2 and §5 "Privacy
hazards": a release is described by its unit of privacy, ε and δ, what was released, how many times, by which
mechanism, the noise sampler and the seed policy — :func:`nist_checklist` answers exactly those questions.
"""

from __future__ import annotations

import hashlib
import math
import time
from pathlib import Path
from typing import Any, Mapping

from dpkps_core.records import runfolder
from dpkps_core.dossier.labels import (DEMO_CORPUS_LICENCES, PARAMETER_LABELS, PRIVATE_PARAMETER_KEYS,
                                       SAMPLER_LABELS, SEED_POLICY_LABELS, format_epsilon, format_value,
                                       mechanism_label, parameter_label, step_label)
from dpkps_core.risk import posterior_bound, risk_sentences

#: How many synthetic documents the dossier shows (and how many characters of each).
SAMPLE_DOCUMENTS = 5
SAMPLE_CHARS = 600
_SEED_DEMO = "seeded-demo-not-for-release"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(float(value)) else None


def events(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The report's ledger events (a list, or a ledger's ``to_dict()`` — ``{"events": [...]}`` — in its place)."""
    found = report.get("events") or []
    if isinstance(found, Mapping):
        found = found.get("events") or []
    return [e for e in found if isinstance(e, Mapping)] if isinstance(found, list) else []


def is_person_unit(report: Mapping[str, Any]) -> bool:
    """Whether the run's unit of privacy is one person (docs/DESIGN.md §2, optional person unit)."""
    return "person" in str(report.get("neighbouring") or "")


def unit_words(report: Mapping[str, Any]) -> dict[str, str]:
    """The unit of protection in fixed words — never the report's own sentence, which names the person column."""
    if is_person_unit(report):
        return {"unit": "one person", "short": "any one person's documents",
                "detail": "all documents of one person (the person is identified by a column of the private file; "
                          "the ids are never released): each person's documents together contribute what one "
                          "document would"}
    return {"unit": "one document", "short": "any one document",
            "detail": "one whole document (one row of the private file, after identical rows were merged)"}


def epsilon_by_step(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """ε per ledger step, in the order the steps first charged (events), else from the report's totals."""
    steps: dict[str, float] = {}
    for event in events(report):
        if _number(event.get("epsilon")) is not None:
            key = str(event.get("step") or "release")
            steps[key] = steps.get(key, 0.0) + float(event["epsilon"])
    if not steps:
        for key, name in (("vocabulary", "epsilon_vocabulary"), ("kde", "epsilon_kde"),
                          ("class_counts", "epsilon_class_counts")):
            if (_number(report.get(name)) or 0.0) > 0:
                steps[key] = float(report[name])
    return [{"step": k, "label": step_label(k), "epsilon": v} for k, v in steps.items()]


def _total(report: Mapping[str, Any], steps: list[dict[str, Any]]) -> float:
    found = _number(report.get("epsilon_total"))
    return found if found is not None else float(sum(s["epsilon"] for s in steps))


def guarantee(report: Mapping[str, Any]) -> dict[str, Any]:
    """The guarantee in one plain sentence, the unit, ε per step and in total, δ (pure ε-DP: δ = 0)."""
    steps = epsilon_by_step(report)
    total = _total(report, steps)
    delta = _number(report.get("delta_total")) or 0.0
    unit = unit_words(report)
    factor = math.exp(total) if total < 700 else math.inf
    factor_text = f"{factor:.3g}" if factor < 100 else f"{factor:,.0f}" if factor < 1e9 else f"{factor:.3g}"
    sentence = (f"Adding or removing {unit['short']} changes the probability of any output of this release by at "
                f"most a factor e^ε = e^{format_epsilon(total)} ≈ {factor_text}"
                + (" (pure ε-differential privacy, δ = 0)." if delta == 0
                   else f", except with probability δ = {delta:g}."))
    person = is_person_unit(report)
    risk = [s.replace("a given document was", "a given person's documents were") if person else s
            for s in risk_sentences(total)] if total > 0 else []
    cap = _number(report.get("epsilon_cap"))
    return {"sentence": sentence, "unit": unit["unit"], "unit_detail": unit["detail"], "epsilon_total": total,
            "delta": delta, "odds_factor": factor if math.isfinite(factor) else None, "steps": steps,
            "risk_sentences": [s[:1].upper() + s[1:] + "." for s in risk],
            "posterior_from_1_percent": posterior_bound(total, 0.01) if total > 0 else None,
            "cap": cap, "cap_policy": cap_policy(cap, unit["unit"]),
            "post_processing": "The keyphrase sequences and the documents written from them are post-processing of "
                               "the DP releases: the LLM never saw private text, so they carry the same ε."}


def cap_policy(cap: float | None, unit: str) -> str:
    """The budget cap in words (docs/DESIGN.md §2.0: an individual privacy filter, Feldman & Zrnic 2021)."""
    if cap is None:
        return "No budget cap was set for this run."
    return (f"Each {unit.split()[-1]} may spend at most ε = {format_epsilon(cap)} over ALL releases made on this "
            f"machine (app and command line). Before each release, any {unit.split()[-1]} whose spent ε plus this "
            "release's ε would exceed the cap is left out of it, so no one's total loss ever exceeds the cap; how "
            "many were left out is a private, local figure and is not part of this release.")


def mechanisms(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What each mechanism released (one row per ledger event), in human words."""
    out = []
    for event in events(report):
        out.append({"step": step_label(str(event.get("step") or "")),
                    "mechanism": mechanism_label(str(event.get("mechanism") or "")),
                    "epsilon": _number(event.get("epsilon")), "delta": _number(event.get("delta")) or 0.0,
                    "sensitivity": _number(event.get("sensitivity")), "noise_scale": _number(event.get("noise_scale")),
                    "released": " ".join(str(event.get("released") or "—").split())})
    return out


def settings(report: Mapping[str, Any], config: Mapping[str, Any]) -> tuple[list[dict[str, str]], int]:
    """The run's public settings as (label, value, meaning) rows — the report's parameters, else the run config —
    and how many keys were left out for want of a human label (fail closed)."""
    params = dict(_mapping(report.get("parameters"))) or dict(config)
    rows, left_out = [], 0
    for key, value in params.items():
        if key in PRIVATE_PARAMETER_KEYS:
            continue
        label = parameter_label(key)
        if label is None:
            left_out += 1
            continue
        rows.append({"label": label, "value": format_value(value), "meaning": PARAMETER_LABELS[key][1]})
    return rows, left_out


def corpus_words(config: Mapping[str, Any], state: Mapping[str, Any]) -> str:
    """The corpus as the release names it: a bundled public demo by name, anything else as "a private corpus"."""
    spec = str(config.get("corpus") or state.get("corpus_spec") or "")
    if spec.startswith("demo:"):
        return f"the public demo corpus {spec}"
    return "a private corpus (its file name, columns and fingerprint stay on the data owner's machine)"


def generation(run_dir: Path) -> dict[str, Any]:
    """The LLM and the public prompt used (from the prompts sent, ``audit_log.jsonl``), or {} without an LLM step."""
    last: Mapping[str, Any] = {}
    models: list[str] = []
    prompts = 0
    for entry in runfolder.iter_jsonl(run_dir / runfolder.AUDIT_FILE):
        if entry.get("event") == "drafts":
            continue
        prompts += 1
        last = entry
        model = str(entry.get("model") or "")
        if model and model not in models:
            models.append(model)
    if not last:
        return {}
    prompt = _mapping(last.get("prompt_config"))
    few = prompt.get("few_shot_examples")
    info = _mapping(last.get("backend_info"))
    params = {k: v for k, v in _mapping(last.get("parameters")).items()
              if k in ("max_tokens", "temperature", "no_repeat_ngram", "repetition_penalty", "drafts", "batch_size")}
    return {"backend": str(last.get("backend") or "—"), "models": models, "prompts_sent": prompts,
            "parameters": params, "base_url": str(info.get("base_url") or ""),
            "document_type": str(prompt.get("doc_type") or "—"), "template": str(prompt.get("template") or "—"),
            "system_prompt": str(prompt.get("system_prompt") or ""),
            "few_shot_examples": len(few) if isinstance(few, list) else int(few) if isinstance(few, int) else 0,
            "class_names_in_prompts": bool(prompt.get("include_label"))}


def sample_documents(run_dir: Path, *, limit: int = SAMPLE_DOCUMENTS) -> tuple[list[dict[str, str]], int]:
    """A few synthetic documents (id, class, text cut to :data:`SAMPLE_CHARS`) — one per class first — and the
    number of documents in all. They are DP post-processing (docs/DESIGN.md §1)."""
    docs = runfolder.read_documents(run_dir)
    picked: list[dict[str, Any]] = []
    seen: set[str] = set()
    for d in docs:
        if str(d.get("label")) not in seen and len(picked) < limit:
            picked.append(d)
            seen.add(str(d.get("label")))
    for d in docs:
        if len(picked) >= limit:
            break
        if d not in picked:
            picked.append(d)
    out = []
    for d in picked:
        text = " ".join(str(d.get("text") or "").split())
        out.append({"id": str(d.get("id") or ""), "label": str(d.get("label") or ""),
                    "text": text if len(text) <= SAMPLE_CHARS else text[:SAMPLE_CHARS].rstrip() + " …"})
    return out, len(docs)


def public_inputs(report: Mapping[str, Any], config: Mapping[str, Any]) -> list[dict[str, str]]:
    """The public inputs with their licences (assets/LICENSES.md): the vocabulary, the embedding model, a demo
    corpus when one was used."""
    from dpkps_core.embeddings import EMBEDDING_MODELS
    from dpkps_core.method.vocabulary import VOCABULARIES

    vocab = str(config.get("vocabulary") or _mapping(report.get("vocabulary")).get("name")
                or report.get("vocabulary") or "—")
    if vocab in VOCABULARIES:
        v_licence = VOCABULARIES[vocab]["licence"]
    else:
        v_licence = "User-supplied public vocabulary: its licence is the supplier's (check that you may use it)."
    digest = config.get("vocabulary_sha256")
    rows = [{"input": "Public vocabulary V", "name": vocab, "licence": v_licence,
             "sha256": digest if isinstance(digest, str) else ""}]
    model = str(report.get("embedding_model") or config.get("embedding_model") or "—")
    rows.append({"input": "Embedding model", "name": model,
                 "licence": str(EMBEDDING_MODELS.get(model, {}).get("licence") or "—"), "sha256": ""})
    spec = str(config.get("corpus") or "")
    if spec.startswith("demo:"):
        name = spec.split(":", 1)[1]
        rows.append({"input": "Demo corpus (public, standing in for a private one)", "name": spec,
                     "licence": DEMO_CORPUS_LICENCES.get(name, "see assets/LICENSES.md"), "sha256": ""})
    return rows


def noise_words(report: Mapping[str, Any]) -> dict[str, str]:
    """The noise sampler and the seed policy in words (docs/DESIGN.md §2: "the bundle says which")."""
    noise = _mapping(report.get("noise"))
    policy = str(report.get("seed_policy") or noise.get("seed_policy") or "—")
    sampler = str(noise.get("sampler") or _mapping(report.get("parameters")).get("noise_sampler") or "—")
    return {"seed_policy": SEED_POLICY_LABELS.get(policy, policy), "seeded": policy == _SEED_DEMO,
            "sampler": SAMPLER_LABELS.get(sampler, sampler),
            "samplers": "; ".join(f"{k.replace('_', ' ')}: {v}" for k, v in _mapping(noise.get("samplers")).items())}


def nist_checklist(g: Mapping[str, Any], mech: list[dict[str, Any]], noise: Mapping[str, Any],
                   counts: Mapping[str, Any]) -> list[dict[str, str]]:
    """NIST SP 800-226's questions of a DP release, answered for this run."""
    releases = "; ".join(f"{m['step']}: {m['released']}" for m in mech) or "no DP release was recorded"
    by = "; ".join(f"{m['step']}: {m['mechanism']} (ε = {format_epsilon(m['epsilon'])}, sensitivity "
                   f"{format_value(m['sensitivity'])}, noise scale {format_value(m['noise_scale'])})" for m in mech)
    return [
        {"question": "Unit of privacy (who is protected)", "answer": f"{g['unit']}: {g['unit_detail']}."},
        {"question": "Privacy loss ε and δ", "answer": f"ε = {format_epsilon(g['epsilon_total'])} in total ("
         + ", ".join(f"{s['label']} {format_epsilon(s['epsilon'])}" for s in g["steps"])
         + f"); δ = {g['delta']:g} (pure ε-DP); composition: sequential over the steps, parallel over classes."},
        {"question": "What was released", "answer": releases + f"; then {counts.get('sequences', 0):,} keyphrase "
         f"sequences and {counts.get('documents', 0):,} synthetic documents (post-processing)."},
        {"question": "How many times", "answer": f"{len(mech)} DP release(s) in this run, each once. Later releases "
         "on the same data (other runs) are counted by the data owner's ledger against the cap."},
        {"question": "By which mechanism", "answer": by or "—"},
        {"question": "Noise sampler",
         "answer": noise["sampler"] + (f" ({noise['samplers']})" if noise["samplers"] else "")},
        {"question": "Seed policy", "answer": noise["seed_policy"]},
        {"question": "Budget cap and accounting", "answer": g["cap_policy"]},
        {"question": "Trust model", "answer": "Central DP on the data owner's machine; the LLM and anyone receiving "
         "this bundle see only DP outputs and public inputs."},
    ]


_RUN_NAME = runfolder.RUN_NAME


def run_created(run_dir: Path) -> str:
    """The run's creation time (UTC) from its folder name, else from the folder's modification time."""
    m = _RUN_NAME.match(run_dir.name)
    if m:
        d, t = m["date"], m["time"]
        return f"{d[:4]}-{d[4:6]}-{d[6:]} {t[:2]}:{t[2:4]}:{t[4:]} UTC"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(run_dir.stat().st_mtime))


def safe_run_id(run_dir: Path) -> str:
    """The run id as released: the folder name when :func:`runfolder.create_run_dir` made it (it holds no corpus
    name), else ``run-`` + the first 12 hex digits of the SHA-256 of its ``privacy_report.json`` (a DP output) — a
    folder a user named by hand might carry a private file's name."""
    if _RUN_NAME.match(run_dir.name):
        return run_dir.name
    report = run_dir / runfolder.PRIVACY_REPORT_FILE
    data = report.read_bytes() if report.is_file() else b""
    return f"run-{hashlib.sha256(data).hexdigest()[:12]}"
