"""The dossier as ONE self-contained HTML file (issue 34 §1): inline CSS, inline SVG charts, no script, no external
resource — it opens offline and prints cleanly to PDF (``@page`` size and margins, page-break rules, a single column
with no sidebar). The internal edition carries "INTERNAL — NOT FOR RELEASE" in the running header and footer of
every printed page (CSS paged-media margin boxes) and in a banner on screen.

Every value is HTML-escaped; the text comes from the dossier's content (:mod:`dpkps_core.dossier.build`) only.
"""

from __future__ import annotations

from html import escape
from typing import Any, Mapping, Sequence

from dpkps_core.dossier.charts import accuracy_chart, disclosure_chart, epsilon_chart, overlay_chart
from dpkps_core.dossier.labels import format_epsilon, format_value

INTERNAL_MARK = "INTERNAL — NOT FOR RELEASE"
POLICY_LABELS = {"max_epsilon_per_release": "Maximum ε of one release",
                 "max_epsilon_per_unit": "Maximum budget cap per unit (ε)",
                 "required_audit_verdict": "Empirical audit verdict required",
                 "min_utility_ratio": "Minimum synthetic / real accuracy",
                 "required_disclosure_verdict": "Disclosure test verdict required",
                 "allow_seeded_demo": "Seeded demo runs allowed"}
RELEASE_MARK = "Release dossier — DP outputs and public inputs only"

_CSS = """
@page { size: A4; margin: 20mm 16mm 20mm 16mm;
  @top-center { content: "MARK"; font: 600 9pt Helvetica, Arial, sans-serif; color: COLOUR; }
  @bottom-center { content: "MARK  ·  page " counter(page) " of " counter(pages);
                   font: 9pt Helvetica, Arial, sans-serif; color: COLOUR; } }
* { box-sizing: border-box; }
html { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
body { font: 10.5pt/1.45 Helvetica, Arial, sans-serif; color: #1d1d1d; margin: 0 auto; max-width: 190mm;
       padding: 0 4mm 10mm; }
h1 { font-size: 20pt; margin: 4mm 0 1mm; }
h2 { font-size: 13.5pt; margin: 7mm 0 2mm; border-bottom: 1.5px solid #2f6f9f; padding-bottom: 1mm;
     break-after: avoid-page; page-break-after: avoid; }
h3 { font-size: 11pt; margin: 4mm 0 1mm; break-after: avoid-page; }
section { break-inside: auto; }
.keep { break-inside: avoid-page; page-break-inside: avoid; }
.page-break { break-before: page; page-break-before: always; }
table { border-collapse: collapse; width: 100%; margin: 2mm 0 3mm; font-size: 9.5pt; }
thead { display: table-header-group; }
tr { break-inside: avoid-page; page-break-inside: avoid; }
th, td { border: 1px solid #c9c9c9; padding: 1.2mm 2mm; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
td.wrap { overflow-wrap: anywhere; }
th { background: #eef3f7; }
td.num { text-align: right; white-space: nowrap; }
.meta { color: #444; margin: 0 0 3mm; }
.meta span { margin-right: 5mm; display: inline-block; }
.guarantee { font-size: 12.5pt; background: #eef6ee; border-left: 5px solid #3f8a3f; padding: 3mm 4mm; margin: 3mm 0; }
.warn { background: #fff1e6; border-left: 5px solid #c0392b; padding: 3mm 4mm; margin: 3mm 0; font-weight: 600; }
.banner { background: #8b0000; color: #fff; text-align: center; font-weight: 700; letter-spacing: .04em;
          padding: 2mm; margin: 0 -4mm 3mm; }
.decision { border: 2px solid #333; padding: 3mm 4mm; margin: 3mm 0; }
.decision .verdict { font-size: 15pt; font-weight: 700; }
.v-share { color: #1f6b1f; } .v-share-with-restrictions { color: #9a6200; } .v-do-not-share { color: #a01010; }
.doc { border: 1px solid #ddd; background: #fafafa; padding: 2mm 3mm; margin: 2mm 0; font-size: 9.5pt;
       break-inside: avoid-page; }
.doc .tag { color: #555; font-size: 8.5pt; }
pre, code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 8.8pt; }
pre { background: #f4f4f4; padding: 2mm 3mm; white-space: pre-wrap; overflow-wrap: anywhere; }
svg { max-width: 100%; height: auto; }
.small { font-size: 9pt; color: #555; }
@media screen { body { padding-top: 4mm; } .banner { position: sticky; top: 0; } }
"""


def _e(value: Any) -> str:
    return escape(str(value), quote=True)


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]], *, numeric: Sequence[int] = (),
           widths: Sequence[int] = (), wrap: Sequence[int] = ()) -> str:
    """A table; ``numeric`` columns align right, ``wrap`` columns may break anywhere (hashes, long values)."""
    cols = "<colgroup>" + "".join(f'<col style="width:{w}%">' for w in widths) + "</colgroup>" if widths else ""
    out = [f"<table>{cols}<thead><tr>", *(f"<th>{_e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = "num" if i in numeric else "wrap" if i in wrap else ""
            cells.append(f'<td class="{cls}">{_e(c)}</td>' if cls else f"<td>{_e(c)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(out) + "</tbody></table>"


def _head(c: Mapping[str, Any]) -> str:
    run, internal = c["run"], c["edition"] == "internal"
    title = "Internal dossier" if internal else "Release dossier"
    meta = [("Run", run["id"]), ("Run created", run["created"]), ("Dossier generated", c["generated"]),
            ("Software", f"DP-KPS Studio {run['software_version']}"), ("Method", format_value(run["method"]))]
    if internal:
        meta.insert(1, ("Local run folder", c["internal"]["run_folder"]))
    out = [f'<div class="banner">{_e(INTERNAL_MARK)}</div>' if internal else "",
           f"<h1>{_e(title)}: differentially private synthetic text</h1>",
           '<p class="meta">' + "".join(f"<span><b>{_e(k)}:</b> {_e(v)}</span>" for k, v in meta) + "</p>",
           f"<p><b>Released classes:</b> {_e(', '.join(run['classes']) or '—')}. <b>Source data:</b> "
           f"{_e(run['corpus'])}.</p>"]
    if c["noise"]["seeded"]:
        out.append('<p class="warn">REPRODUCIBLE DEMO — NOT FOR RELEASE: this run used a fixed seed, so its noise is '
                   "predictable and the differential-privacy guarantee below does not hold.</p>")
    return "".join(out)


def _decision(c: Mapping[str, Any]) -> str:
    d = c["decision"]
    cls = "v-" + d["verdict"].replace(" ", "-")
    reasons = "".join(f"<li><b>{_e(r['level'])}</b> ({_e(r['rule'])}): {_e(r['text'])}</li>" for r in d["reasons"])
    return (f'<section class="decision keep"><div>Decision under policy <i>{_e(c["policy"]["source"])}</i>:</div>'
            f'<div class="verdict {cls}">{_e(d["verdict"].upper())}</div><ul>{reasons}</ul></section>')


def _guarantee(c: Mapping[str, Any]) -> str:
    g = c["guarantee"]
    rows = [(s["label"], format_epsilon(s["epsilon"])) for s in g["steps"]]
    rows.append(("Total", format_epsilon(g["epsilon_total"])))
    risk = "".join(f"<li>{_e(s)}</li>" for s in g["risk_sentences"])
    return ("<section><h2>1. The guarantee</h2>"
            f'<p class="guarantee">{_e(g["sentence"])}</p>'
            f"<p><b>Unit of protection:</b> {_e(g['unit'])} — {_e(g['unit_detail'])}.</p>"
            f'<div class="keep"><h3>ε per step</h3>{_table(("Step", "ε"), rows, numeric=(1,))}'
            f"{epsilon_chart(g['steps'], g['epsilon_total'])}</div>"
            f"<p><b>δ = {_e(format_value(g['delta']))}</b>: pure ε-differential privacy, no failure probability.</p>"
            f"<h3>What ε means as risk</h3><ul>{risk}</ul>"
            f"<h3>Budget cap</h3><p>{_e(g['cap_policy'])}</p><p>{_e(g['post_processing'])}</p></section>")


def _mechanisms(c: Mapping[str, Any]) -> str:
    rows = [(m["step"], m["mechanism"], format_epsilon(m["epsilon"]), format_value(m["sensitivity"]),
             format_value(m["noise_scale"]), m["released"]) for m in c["mechanisms"]]
    n = c["noise"]
    return ("<section><h2>2. What each mechanism released</h2>"
            + _table(("Step", "Mechanism", "ε", "Sensitivity", "Noise scale", "Released"), rows, numeric=(2, 3, 4))
            + f"<p><b>Noise sampler:</b> {_e(n['sampler'])}. <b>Seed policy:</b> {_e(n['seed_policy'])}.</p></section>")


def _settings(c: Mapping[str, Any]) -> str:
    rows = [(s["label"], s["value"], s["meaning"]) for s in c["settings"]]
    note = (f'<p class="small">{c["settings_left_out"]} further recorded setting(s) have no public description and '
            "were left out of this edition.</p>" if c["settings_left_out"] else "")
    return ("<section><h2>3. Settings</h2>" + _table(("Setting", "Value", "Meaning"), rows, widths=(36, 24, 40), wrap=(1,))
            + note + "</section>")


def _generation(c: Mapping[str, Any]) -> str:
    g, n = c["generation"], c["counts"]
    counts = _table(("What", "How many"), [
        ("Keyphrase sequences (DP)", format_value(n["sequences"])),
        ("Synthetic documents", format_value(n["documents"])),
        ("Failed generations", format_value(n["failed_generations"])),
        ("Terms of the private vocabulary Ṽ (DP)", format_value(n["private_vocabulary_terms"])),
        ("Terms of the public vocabulary V", format_value(n["public_vocabulary_terms"]))], numeric=(1,))
    if not g:
        llm = "<p>No LLM step is recorded in this run: the keyphrase sequences alone were released.</p>"
    else:
        llm = (f"<p><b>Model:</b> {_e(', '.join(g['models']) or '—')} ({_e(g['backend'])}); "
               f"<b>prompts sent:</b> {g['prompts_sent']:,}; <b>document type:</b> {_e(g['document_type'])}; "
               f"<b>public few-shot examples:</b> {g['few_shot_examples']}; <b>class names in prompts:</b> "
               f"{'yes (marked public)' if g['class_names_in_prompts'] else 'no'}.</p>"
               f"<p><b>Prompt template</b> (public; the DP keyphrases fill <code>{{keyphrases}}</code>):</p>"
               f"<pre>{_e(g['template'])}</pre>")
    return "<section><h2>4. Model, prompt and counts</h2>" + llm + counts + "</section>"


def _samples(c: Mapping[str, Any]) -> str:
    docs = c["sample_documents"]
    if not docs:
        return ""
    body = "".join(f'<div class="doc"><div class="tag">{_e(d["id"])} · class {_e(d["label"])}</div>{_e(d["text"])}'
                   "</div>" for d in docs)
    return ("<section><h2>5. A sample of the synthetic documents</h2><p class=\"small\">Written by the LLM from DP "
            f"keyphrase sequences only (post-processing); {len(docs)} of {c['counts']['documents']:,}.</p>"
            + body + "</section>")


def _inputs_and_nist(c: Mapping[str, Any]) -> str:
    rows = [(r["input"], r["name"], r["licence"], r["sha256"] or "—") for r in c["public_inputs"]]
    nist = [(q["question"], q["answer"]) for q in c["nist_checklist"]]
    inputs = _table(("Input", "Name", "Licence", "SHA-256"), rows, widths=(18, 16, 40, 26), wrap=(1, 3))
    cmds = "\n".join(c["reproduce"]["commands"])
    return ("<section><h2>6. Public inputs and licences</h2>" + inputs
            + '</section><section class="page-break"><h2>7. NIST SP 800-226 checklist, answered for this run</h2>'
            + _table(("Question", "Answer"), nist, widths=(28, 72))
            + "</section><section><h2>8. How to reproduce the DP steps</h2><p>The bundle carries "
            "<code>reproduce_config.json</code> (the public settings) and <code>reproduce.md</code>; the private "
            "corpus appears only as a placeholder.</p>" + f"<pre>{_e(cmds)}</pre></section>")


def _internal(c: Mapping[str, Any]) -> str:
    i = c["internal"]
    fp = i["fingerprint"]
    parts = ['<section class="page-break"><h2>9. Private findings (computed on the private data)</h2>',
             "<h3>Corpus fingerprint</h3>"]
    parts.append(_table(("Fingerprint", "SHA-256"), [(k.replace("_", " "), v) for k, v in fp.items()], wrap=(1,))
                 if fp else "<p>No fingerprint of the corpus is recorded in the run folder.</p>")
    parts.append(_ledger(i.get("ledger")))
    parts.append(_utility(i["utility"]))
    parts.append(_overlay(i.get("overlay")))
    parts.append(_disclosure(i.get("disclosure")))
    a = i["audit"]
    parts.append("<h3>Empirical privacy audit</h3>")
    if a is None:
        parts.append("<p>No audit report in the run folder (<code>python -m dpkps_core audit … --out RUN_FOLDER"
                     "</code> writes one).</p>")
    else:
        parts.append(_table(("Empirical lower bound on ε", "Claimed ε", "Confidence", "Verdict"), [
            (format_value(a["lower_bound"]), format_value(a["claimed_epsilon"]), format_value(a["confidence"]),
             a["verdict_kind"])]) + f"<p>{_e(a['verdict'])}</p>")
    parts.append("<h3>Not in the run folder</h3><ul>" + "".join(f"<li>{_e(t)}</li>" for t in i["not_in_run_folder"])
                 + "</ul>")
    pol = c["policy"]
    parts.append("<h3>Policy applied</h3>" + _table(("Rule", "Value"), [
        (POLICY_LABELS.get(k, k), format_value(v)) for k, v in pol.items() if k != "source"]) + "</section>")
    return "".join(parts)


def _ledger(led: Mapping[str, Any] | None) -> str:
    """The corpus's ε to date per unit and the left-out counts of the run's releases (the persistent ledger)."""
    if led is None:
        return ""
    e = led["epsilon_to_date"]
    lo, hi = led["cap_range"]
    cap = "no cap" if lo is None and hi is None else (format_value(lo) if lo == hi else
                                                      f"{format_value(lo)}–{format_value(hi)}")
    out = ["<h3>The corpus's ε to date per unit (persistent ledger)</h3>",
           _table(("Units of the corpus", "Largest ε to date", "Median ε to date", "Units that spent any ε",
                   "Units with no room for ε = 0.1", "Cap per unit"),
                  [(led["units"], format_value(e["largest"]), format_value(e["median"]), e["units_spent"],
                    e["units_exhausted"], cap)], numeric=(0, 1, 2, 3, 4)),
           f"<p>Every release on this corpus's units counts, app and command line: the guarantee that holds for a "
           f"unit now is its ε to date, not this run's ε alone. Releases after this run: {led['later_releases']}.</p>",
           "<h3>Left out of this run's releases</h3>",
           _table(("Recorded", "Release", "ε", "Units taking part", "Left out (budget spent)"),
                  [(r["recorded"], r["what"], format_value(r["epsilon"]), r["units"], r["left_out"])
                   for r in led["releases"]], numeric=(2, 3, 4)),
           f"<p>In all {led['left_out_total']} unit(s) were left out of this run's releases because their budget "
           "was spent (the individual filter, docs/DESIGN.md §2.0): their documents did not shape this release.</p>"]
    return "".join(out)


def _overlay(o: Mapping[str, Any] | None) -> str:
    if o is None:
        return ("<h3>Overlay of real and synthetic documents</h3><p>No projection in the run folder (draw the "
                "t-SNE / UMAP overlay on the app's Evaluate page).</p>")
    return ("<h3>Overlay of real and synthetic documents</h3>"
            f"<p>{o['real']} real test documents and {o['synthetic']} synthetic documents, embedded together and "
            "projected to two dimensions: synthetic dots that cover the real rings of their class mean the "
            "synthetic documents cover the real ones' topics.</p>"
            f'<div class="keep">{overlay_chart(o["points"], method=o["method"])}</div>')


def _disclosure(d: Mapping[str, Any] | None) -> str:
    head = "<h3>Disclosure test (training vs held-out matches)</h3>"
    if d is None:
        return head + ("<p>No disclosure test in the run folder (run it on the app's Evaluate page, or <code>python -m dpkps_core "
                       "evaluate --disclosure</code>).</p>")
    tiers = d.get("tiers") or {}
    rows = [(name, t.get("train"), t.get("holdout"), format_value(t.get("p_value")),
             format_value(t.get("epsilon_lower_bound"))) for name, t in tiers.items()]
    settings = d.get("settings") or {}
    chart = disclosure_chart(int(d.get("train_matched") or 0), int(d.get("holdout_matched") or 0),
                             int(d.get("reference_per_part") or 0))
    return (head + f"<p><b>{_e(str(d.get('verdict', '')).upper())}.</b> {_e(d.get('sentence', ''))}</p>"
            + f'<div class="keep">{chart}</div>'
            + _table(("Matches", "Training documents", "Held-out documents", "p (one-sided)", "ε lower bound"),
                     rows, numeric=(1, 2, 3, 4))
            + f"<p>A match: a rare phrase of {_e(settings.get('ngram'))} words (in at most "
              f"{_e(settings.get('rare_max_docs'))} reference document(s)), a shared span of "
              f"{_e(settings.get('span_words'))} words, or one of {_e(settings.get('identifiers'))} listed "
              f"identifier(s); {_e(d.get('synthetic_documents'))} synthetic documents against "
              f"{_e(d.get('reference_per_part'))} training and as many held-out documents. The held-out documents "
              "are the control for chance matches; the bound holds per document.</p>")


def _utility(u: Mapping[str, Any] | None) -> str:
    if u is None:
        return "<h3>Utility</h3><p>No local evaluation in the run folder (run the evaluation step first).</p>"
    rows = [(r["label"], format_value(r["mean"]), format_value(r["sd"]),
             f"{format_value(r['low'])}–{format_value(r['high'])}" if r["low"] is not None else "—",
             format_value(r["macro_f1"]), format_value(r["n_train"])) for r in u["accuracies"]]
    out = ["<h3>Downstream accuracy on the held-out real documents</h3>",
           _table(("Classifier", "Accuracy", "sd over seeds", "95 % interval", "Macro-F1", "Training docs"), rows,
                  numeric=(1, 2, 4, 5)),
           f'<div class="keep">{accuracy_chart(u["accuracies"], chance=u["chance_accuracy"])}</div>']
    if u["ratio"] is not None:
        r = u["ratio"]
        ci = f" (95 % {format_value(r['low'])}–{format_value(r['high'])})" if r["low"] is not None else ""
        out.append(f"<p><b>Synthetic / real accuracy:</b> {r['estimate']:.2f}{_e(ci)}.</p>")
    if u["precision"] is not None:
        out.append(f"<p><b>Precision / recall on embeddings</b> (synthetic vs real test documents, k = "
                   f"{_e(u.get('distribution_k'))}): {u['precision']:.3f} / {u['recall'] or 0:.3f}.</p>")
    classes = sorted({k for r in u["accuracies"] for k in r["per_class_recall"]})
    if classes:
        rows = [(r["label"], *(format_value(r["per_class_recall"].get(k)) for k in classes)) for r in u["accuracies"]]
        out.append("<h3>Recall per class</h3>" + _table(("Classifier", *classes), rows))
    return "".join(out)


def render_html(content: Mapping[str, Any]) -> str:
    """The dossier's HTML (one file) from its content."""
    internal = content["edition"] == "internal"
    mark = INTERNAL_MARK if internal else RELEASE_MARK
    css = _CSS.replace("MARK", mark).replace("COLOUR", "#a01010" if internal else "#555")
    body = [_head(content)]
    if internal:
        body.append(_decision(content))
    body += [_guarantee(content), _mechanisms(content), _settings(content), _generation(content), _samples(content),
             _inputs_and_nist(content)]
    if internal:
        body.append(_internal(content))
    title = f"{'INTERNAL ' if internal else ''}DP-KPS dossier — {content['run']['id']}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(title)}</title>"
            f"<style>{css}</style></head><body>" + "".join(body) + "</body></html>\n")
