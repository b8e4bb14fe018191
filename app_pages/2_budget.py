"""Step 2 — the public vocabulary, S and N, the privacy budget and its split, and "Will this work?"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dpkps_core.embeddings import EMBEDDING_MODELS
from dpkps_core.evaluation import DISCLOSURE_NOTE, forecast_figure
from dpkps_core.risk import epsilon_explainer, risk_sentences
from dpkps_core.method.config import LIMITS
from dpkps_core.method.vocabulary import VOCABULARIES
from studio import (charts, defaults, forecasts, ledger_view, navigation, run_view, session, spend, step_progress,
                    steps, streamed, tenancy, uploads, widgets)
from studio.state import session_state

state = session_state()  # this browser session's typed state (studio.state), passed to every action

navigation.page_header(state, "budget",
                       "Public choices (they cost no privacy): the vocabulary keyphrases come from, how many terms "
                       "each document may contribute, and how the privacy budget ε is split.")
with widgets.guard():
    steps.finish_step_jobs(state)  # a streamed DP forecast that ended since the last run: the session keeps its release
EPS_TOTAL_RANGE = (0.0, 100.0)      # ε = ε_voc + ε_kde: above 0, at most 100 (the app's bound)
EPS_FORECAST_RANGE = (0.0, 2.0)
CAP_RANGE = (0.0, 1000.0)
LARGE_EPSILON = 10.0                 # deployed systems report ε ≈ 5–15 and advocate ε ≤ 10 (the explainer below)


def times(x: float) -> str:
    """A multiplier e^ε for people: 148.4× — or 2.7e43× in scientific notation once it is large."""
    if x < 1e6:
        return f"{x:,.1f}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def checked(name: str, low: float, high: float, what: str, default: float) -> None:
    """on_change of a number box without browser-side bounds (bound to setting ``name``): an out-of-range value is
    said ON the page (not only in a tooltip) and the last valid value is kept."""
    value = getattr(state.settings, name)
    checks = state.range_checks
    if value is None or not (low < float(value) <= high):
        shown = "empty" if value is None else f"{float(value):,.6g}"
        kept = float(checks.last_valid.get(name, default))
        checks.errors[name] = (f"{what} = {shown} is out of range: it must be above {low:g} and at most {high:g}. "
                               f"Kept {what} = {kept:g}; nothing was spent.")
        setattr(state.settings, name, kept)
    else:
        checks.last_valid[name] = float(value)
        checks.errors.pop(name, None)


def range_error(name: str, where) -> None:
    if state.range_checks.errors.get(name):
        where.error(state.range_checks.errors[name], icon=":material/error:")

# ------------------------------------------------------------------------------------------- vocabulary
st.subheader("Public vocabulary")
names = {**{k: k for k in defaults.BUILTIN_VOCABULARIES}, "upload": "upload my own (one term per line)"}
widgets.bound(state, st.selectbox, "Vocabulary V", "vocabulary", options=list(names), format_func=names.get)
if state.settings.vocabulary == "upload":
    up = st.file_uploader("Public vocabulary file (UTF-8, one term per line)", type=["txt", "csv", "tsv"],
                          key="vocab_upload")
    if up is not None:
        uploads.save_vocabulary_upload(state, up.getvalue(), up.name)
    if state.uploads.vocab_upload_name:
        st.caption(f"Using {state.uploads.vocab_upload_name} (public; kept in a session temp folder).")
else:
    meta = VOCABULARIES[state.settings.vocabulary]
    st.caption(f"{meta['description']} Licence: {meta['licence']}")
c1, c2, c3 = st.columns(3)
widgets.bound(state, c1.checkbox, "Remove English stop words", "remove_stopwords")
widgets.bound(state, c2.checkbox, "Drop junk terms", "junk_filter",
              help="Terms without letters, with digits inside words (“66-day”, “x86”), decimals, one-letter terms.")
widgets.bound(state, c3.number_input, "Keep the K most frequent terms of V (0 = all)", "vocab_max_terms", min_value=0,
              help="Frequency-ordered vocabularies only (GloVe, wordfreq): a smaller V lowers the noise floor of the "
                   "private vocabulary. 50,000 was best on both demo corpora (docs/DEFAULTS.md).",
              max_value=1_000_000, step=1000)
vocab = None
with widgets.guard():
    vocab = session.public_vocabulary(state)
    st.caption(f"|V| = {len(vocab):,} public terms ({vocab.multiword_count:,} multi-word).")

c1, c2, c3 = st.columns(3)
widgets.bound(state, c1.number_input, "S — distinct terms counted per document", "terms_per_doc", min_value=1,
              max_value=LIMITS["terms_per_doc"], help="The sensitivity of the vocabulary histogram.")
widgets.bound(state, c2.number_input, "N — private vocabulary size", "vocab_size", min_value=1,
              max_value=LIMITS["vocab_size"], step=100)
widgets.bound(state, c3.selectbox, "How Ṽ is cut from the noisy counts", "selection_rule",
              options=["top-n", "noise-floor"],
              format_func={"top-n": "top N (paper)", "noise-floor": "top N above the noise floor"}.get)
if vocab is not None and int(state.settings.vocab_size) > len(vocab):
    st.error(f"N = {int(state.settings.vocab_size):,} is larger than the public vocabulary (|V| = {len(vocab):,} terms): Ṽ "
             f"cannot have more terms than V. Choose N ≤ {len(vocab):,} — the private vocabulary step refuses this "
             "before anything is spent.", icon=":material/error:")
widgets.bound(state, st.selectbox, "Embedding model (public)", "embedding_model", options=list(EMBEDDING_MODELS),
              format_func=lambda m: f"{m} — {EMBEDDING_MODELS[m]['description']}")

# ------------------------------------------------------------------------------------------- budget
st.subheader("Privacy budget")
c1, c2 = st.columns([1, 2])
widgets.bound(state, c1.number_input, "Total ε = ε_voc + ε_kde", "eps_total", step=0.5,
              on_change=lambda: checked("eps_total", *EPS_TOTAL_RANGE, "Total ε",
                                        defaults.default_settings()["eps_total"]),
              help=f"Above {EPS_TOTAL_RANGE[0]:g} and at most {EPS_TOTAL_RANGE[1]:g}.")
range_error("eps_total", c1)
widgets.bound(state, c2.slider, "Share of ε for the private vocabulary (ε_voc); the rest builds the densities (ε_kde)",
              "eps_voc_share", min_value=0.05, max_value=0.95, step=0.05)
eps_voc, eps_kde = session.eps_split(state)
if eps_voc + eps_kde > LARGE_EPSILON:
    st.warning(f"**ε = {widgets.eps(eps_voc + eps_kde)} is a weak guarantee.** One document can change the odds of any output "
               f"by up to e^{widgets.eps(eps_voc + eps_kde)} ≈ {times(float(np.exp(min(eps_voc + eps_kde, 700))))}×; deployed "
               f"systems report ε ≈ 5–15 and reviews advocate ε ≤ {LARGE_EPSILON:g}.", icon=":material/warning:")
c1, c2, c3 = st.columns(3)
c1.metric("ε_voc (vocabulary)", f"{widgets.eps(eps_voc)}")
c2.metric("ε_kde (densities)", f"{widgets.eps(eps_kde)}")

# ---- the cap: what it covers, in the app's words; raising it asks and is recorded in the ledger's cap history
unit = "person" if session.person_column(state) else "document"
mine = tenancy.current().signed_in  # with login: this account's own ledger (studio.tenancy)
covers = (f"each {unit}'s total ε over every release of this corpus"
          + (" from your account (your own ledger)" if mine else ", in the app and on the command line"))
cap_now = float(state.settings.epsilon_cap) if state.settings.cap_enabled else None


def reset_cap_draft() -> None:
    state.settings.cap_draft_enabled = bool(state.settings.cap_enabled)
    state.settings.cap_draft_value = float(state.settings.epsilon_cap)
    state.range_checks.errors.pop("cap_draft_value", None)


def apply_cap_draft() -> None:
    state.settings.cap_enabled = bool(state.settings.cap_draft_enabled)
    if state.settings.cap_enabled:
        state.settings.epsilon_cap = float(state.settings.cap_draft_value)
    cap = widgets.eps(state.settings.epsilon_cap) if state.settings.cap_enabled else "no cap"
    recorded = " (recorded in the ledger's cap history)." if session.corpus(state) is not None else "."
    session.notice(state, f"Cap changed: {cap} on {covers}{recorded}")


if state.settings.cap_draft_enabled is None or state.settings.cap_draft_value is None:
    reset_cap_draft()
widgets.bound(state, c3.checkbox, "Budget cap", "cap_draft_enabled",
              help=f"A cap on {covers}. A {unit} whose spend plus a step's ε would exceed it is left out of that step; "
                 "a step whose own ε would take this session over it is refused before anything is spent.")
if state.settings.cap_draft_enabled:
    widgets.bound(state, c3.number_input, f"Cap on {covers} (default {defaults.default_settings()['epsilon_cap']:g})",
                  "cap_draft_value", step=1.0,
                  on_change=lambda: checked("cap_draft_value", *CAP_RANGE, "The cap",
                                            float(state.settings.epsilon_cap)),
                    help=f"{unit.capitalize()}s new to the ledger get this cap; changing it while a corpus is loaded "
                         f"sets the cap of that corpus's {unit}s, recorded in the ledger with who and when.")
    range_error("cap_draft_value", c3)
cap_draft = float(state.settings.cap_draft_value) if state.settings.cap_draft_enabled else None
if cap_draft != cap_now:
    fmt = lambda c: "no cap" if c is None else f"{c:g}"  # noqa: E731
    if cap_draft is None or (cap_now is not None and cap_draft > cap_now):
        with st.container(border=True):
            st.warning(f"**Raise the cap from {fmt(cap_now)} to {fmt(cap_draft)}?** The cap bounds {covers}: raising "
                       f"it lets every {unit} of this corpus take part in more releases, so each can lose more "
                       "privacy. The change is recorded in the ledger's cap history (who and when).",
                       icon=":material/warning:")
            k1, k2 = st.columns(2)
            k1.button(f"Raise the cap to {fmt(cap_draft)}", key="confirm_cap_raise", on_click=apply_cap_draft)
            k2.button(f"Keep the cap at {fmt(cap_now)}", key="keep_cap", on_click=reset_cap_draft, type="primary")
    else:  # lowering protects more: applied at once (and recorded)
        apply_cap_draft()
        cap_now = cap_draft
led = ledger_view.ledger(state)
spent = getattr(led, "corpus_epsilon", led.total_epsilon)  # the most-used document's spend, app and CLI (private)
eps_fc = forecasts.eps_forecast(state) if forecasts.dp_forecast_release(state) is None else 0.0  # still to spend, if planned
st.plotly_chart(charts.budget_split_bar(eps_voc, eps_kde, spent, led.cap, eps_forecast=eps_fc), key="chart.budget")
st.caption(f"Plan: " + (f"ε_forecast {widgets.eps(eps_fc)} (DP forecast, below) + " if eps_fc else "")
           + f"ε_voc {widgets.eps(eps_voc)} + ε_kde {widgets.eps(eps_kde)} = **ε = {widgets.eps(eps_fc + eps_voc + eps_kde)}** for this run.")
# what the plan still has to spend: a step this run already released (Ṽ, the densities) is spent, not planned
done_voc = run_view.vocabulary_meta(state) is not None
done_kde = done_voc and run_view.density_meta(state) is not None
eps_fc_left = 0.0 if done_voc else eps_fc  # the forecast chooses settings before Ṽ: moot once Ṽ is released
to_spend = eps_fc_left + (0.0 if done_voc else eps_voc) + (0.0 if done_kde else eps_kde)
if led.cap is not None and to_spend > 0 and not led.can_afford(to_spend):
    steps_left = " + ".join(name for name, left in (("ε_forecast", eps_fc_left > 0), ("ε_voc", not done_voc),
                                                     ("ε_kde", not done_kde)) if left)
    st.warning(f"The rest of this plan ({steps_left}) needs ε = {widgets.eps(to_spend)} but only {widgets.eps(led.remaining)} is left "
               "under the cap: a step that would go over it is refused before anything is spent.",
               icon=":material/warning:")
releases = getattr(led, "corpus_releases", ())
with st.expander(f"Every release that touched this corpus's documents ({len(releases)}) — the persistent ledger"):
    st.caption("The cap is per document (person): it covers everything ever released from each document — this "
               "session, earlier sessions and CLI runs, whatever the file name, order or column names (a document "
               "under another label or with an edited text is another document). The ledger is kept on this "
               "machine, owner-only, and never exported; `python -m dpkps_core ledger --corpus …` shows the same "
               "list. Private, local figures.")
    if mine:
        st.caption(tenancy.scope_note() + " (The command line keeps the machine's own ledger, not your account's.)")
    if releases:
        st.dataframe(pd.DataFrame([{"recorded (UTC)": r.recorded, "ε": r.event.epsilon, "δ": r.event.delta,
                                    "step": r.event.step, "mechanism": r.event.mechanism,
                                    "spent by": r.tool + (f" · {r.run}" if r.run else "")} for r in releases]),
                     hide_index=True)
        st.markdown(f"The most-used document of this corpus has spent **ε = {widgets.eps(spent)}** (private, local); δ of "
                    f"these releases: {sum(r.event.delta for r in releases):g}.")
    else:
        st.caption("Nothing has been released from this corpus yet.")

history = led.view().cap_history if hasattr(led, "view") else ()
if history:
    with st.expander(f"Cap changes of this corpus's {unit}s ({len(history)}) — the ledger's cap history"):
        st.dataframe(pd.DataFrame([{"recorded (UTC)": h.recorded, "cap": "no cap" if h.cap is None else h.cap,
                                    "previous": "" if h.previous_max is None else
                                    (f"{h.previous_min:g}" if h.previous_min == h.previous_max
                                     else f"{h.previous_min:g}–{h.previous_max:g}"),
                                    f"{unit}s of this corpus": h.in_corpus,
                                    "by": h.tool + (f" · {h.run}" if h.run else "")} for h in history]),
                     hide_index=True, key="table.cap_history")

with st.expander("What does ε mean here?", expanded=True):
    cfg = session.current_config(state)
    risk = risk_sentences(eps_voc + eps_kde)
    unit = " — here, for every person's documents together" if session.person_column(state) else ""
    x = epsilon_explainer(eps_voc=eps_voc, eps_kde=eps_kde, terms_per_doc=cfg.terms_per_doc,
                          public_vocabulary_size=len(vocab) if vocab else 2, density_kind=cfg.density_kind,
                          features=cfg.features)
    st.markdown(
        f"""
- **Odds bound.** Adding or removing any one {widgets.unit_word(state)} changes the probability of any output by at most a factor
  e^ε: e^{widgets.eps(eps_voc + eps_kde)} ≈ **{times(x['odds_total'])}×** for the whole run (vocabulary e^{widgets.eps(eps_voc)} ≈
  {times(x['odds_voc'])}×, densities e^{widgets.eps(eps_kde)} ≈ {times(x['odds_kde'])}×). Smaller ε → stronger guarantee.
- **As a risk to one {widgets.unit_word(state)}.** Whatever an attacker knows and whatever they see, at ε = {widgets.eps(eps_voc + eps_kde)}
  {risk[0]}; {risk[1]}. (Bayes with the odds bound: posterior ≤ e^ε·p / (e^ε·p + 1 − p) from a prior p; it
  holds for every document{unit}.)
- **Noise per vocabulary count.** Each of the |V| counts gets Laplace noise of scale S/ε_voc = **{x['voc_scale']:.2f}**
  documents (typical size ±{x['voc_mean_abs']:.1f}, sd {x['voc_sd']:.1f}). Among {len(vocab) if vocab else 0:,}
  terms that never occur, the largest noise reaches about **{x['voc_floor']:,.0f}**: real terms need more documents
  than that to be picked reliably.
- **Noise per density feature.** """ + (
            f"Each class's keyphrase histogram over Ṽ gets Laplace(1/ε_kde) per term: sd **{x['kde_sd']:.2f}** "
            "(a document contributes weight 1 in total)." if cfg.density_kind == "histogram" else
            f"Each of the I = {x.get('kde_features', 0):,.0f} random features gets Laplace(√2·I/ε_kde) = scale "
            f"**{x['kde_scale']:,.0f}** (sd {x['kde_sd']:,.0f}) on a sum of up to n_c values in [−√2, √2].") + """
- **Common ranges.** ε ≤ 1 is a strong guarantee; reviews of deployed DP systems and DP-trained models report ε
  between about 5 and 15 and advocate ε ≤ 10 for real deployments (the DP-KPS paper uses totals of 6–15).
- The guarantee covers the sequences and, by post-processing, every text the LLM writes from them.
""")

# ------------------------------------------------------------------------------------------- presets
st.subheader("Presets and noise source")
widgets.bound(state, st.toggle, "Paper settings (RFF DP-KDE, σ = 1, I = 2000, no junk filter) instead of the defaults",
              "paper_settings", on_change=lambda: defaults.apply_paper_settings(state.settings,
                                                                                bool(state.settings.paper_settings)))
widgets.bound(state, st.checkbox, "Reproducible demo (seeded noise, NOT FOR RELEASE)", "seeded_demo",
              help="Unticked (default): noise comes from the operating system's entropy. Ticked: a fixed seed, so "
                   "the same clicks give the same output; the report and bundle then say NOT FOR RELEASE.")
if state.settings.seeded_demo:
    widgets.bound(state, st.number_input, "Demo seed", "demo_seed", min_value=0, max_value=2**31 - 1)
    st.warning("Seeded noise is predictable: outputs of this mode are a demo, NOT FOR RELEASE.",
               icon=":material/warning:")
with st.expander("Advanced: noise sampler"):
    sampler_labels = {"opendp": "OpenDP (vetted samplers, default)", "numpy": "NumPy (faster, floating-point)"}
    widgets.bound(state, st.radio, "Sampler of the Laplace / Gaussian noise", "noise_sampler",
                  options=tuple(sampler_labels),
                  format_func=sampler_labels.__getitem__,
                  help="OpenDP: discrete Laplace for integer counts, OpenDP's float Laplace / Gaussian elsewhere "
                       "(about 0.5 s per 50,000 vocabulary terms). NumPy: faster floating-point samplers. A "
                       "reproducible demo seed always uses NumPy, since OpenDP's samplers cannot be seeded. The "
                       "privacy report records the sampler of every release.")
    if state.settings.seeded_demo and state.settings.noise_sampler == "opendp":
        st.caption("With the demo seed ticked, the seeded NumPy sampler is used (OpenDP cannot be seeded).")

# ------------------------------------------------------------------------------------------- forecast
# docs/PRIVACY.md "Previews that steer choices": the default forecast reads the corpus only through a small,
# charged DP release; the exact forecast on true counts is behind the badged switch (not covered by ε).


def show_forecast(f, key: str) -> None:
    widgets.stale_note("This forecast", forecasts.forecast_changes(state, f))  # never a verdict for other settings
    (st.success if f.usable else st.warning)(f.verdict)
    m = st.columns(4)
    m[0].metric("Expected noise share of Ṽ", f"{f.expected_noise_share:.0%}")
    m[1].metric("Real terms expected in Ṽ", f"{f.expected_real_terms:,.0f}")
    m[2].metric("Noise floor (documents)", f"{f.noise_floor:,.0f}")
    m[3].metric("Terms of V in the corpus", f"{f.terms_in_corpus:,}")
    st.plotly_chart(charts.tidy(forecast_figure(f), width=90), key=key)  # title below the toolbar, wrapped


st.subheader("Will this work?")
st.markdown(widgets.DP_BADGE)
st.caption("The DP forecast releases, with a small ε_forecast charged to this corpus's ledger before any noise, how "
           "many terms of V occur in how many documents and how many documents each class has; everything below is "
           "computed from that release alone. Choosing ε, N or a method from it stays inside ε; changing ε, N or the "
           "method re-forecasts for free (a new S or vocabulary needs a new release).")
c1, c2 = st.columns([1, 2])
widgets.bound(state, c1.number_input, "ε_forecast", "eps_forecast", step=0.05,
              on_change=lambda: checked("eps_forecast", *EPS_FORECAST_RANGE, "ε_forecast",
                                        defaults.default_settings()["eps_forecast"]),
              help="Spent once per corpus, S and vocabulary; shown in the plan above.")
range_error("eps_forecast", c1)
stats = forecasts.dp_forecast_release(state)
# documents without budget left (private, local)
widgets.before_spend_note(state, forecasts.eps_forecast(state), "forecast")
is_streamed = streamed.is_streamed(state)
stepping = step_progress.step_running(state)  # one DP release at a time on a streamed corpus
with c2:
    go = spend.button(state, "forecast",
                      label=f"DP forecast (spends ε_forecast = {widgets.eps(forecasts.eps_forecast(state))})",
                      epsilon=forecasts.eps_forecast(state), done=stats is not None, what="ε_forecast",
                      again="Forecast again with a new release", icon=":material/query_stats:", disabled=stepping)
if is_streamed:
    st.caption("This corpus is streamed: the forecast's release reads the file chunk by chunk in the background, "
               "with its progress and a Cancel below (the ε it admitted stays charged if cancelled).")
if go:
    where = "read from the file chunk by chunk" if is_streamed else "in memory"
    with widgets.guard(), spend.releasing(state, "forecast"), \
            st.spinner(f"Counting terms of the training part ({where}) and releasing the DP forecast…"):
        steps.ensure_corpus(state)
        steps.require_selected_corpus(state)
        session.train_part(state), session.public_vocabulary(state)  # read before the release (cached): no stop inside it
        spend.started(state)
        forecasts.run_dp_forecast(state)  # a streamed corpus: a background job, its progress just below
        st.rerun()
step_progress.step_monitor(state, "forecast")
with widgets.guard():
    f_dp = forecasts.dp_forecast(state)
    if f_dp is not None:
        st.caption(f"From the DP release of ε_forecast = {widgets.eps(f_dp.epsilon_forecast)} (on the ledger). {f_dp.note}")
        show_forecast(f_dp, "chart.forecast_dp")

with st.expander("Exact previews (private, local — not covered by ε)", expanded=widgets.exact_previews_on(state)):
    if is_streamed:
        st.caption(f"Not available for this corpus. {streamed.STREAMED_NOTE}")
    elif widgets.exact_previews_switch(state, "budget"):
        st.caption(DISCLOSURE_NOTE)
        if st.button("Exact forecast on the true counts (charges nothing, not covered by ε)",
                     icon=":material/lock_open:"):
            with widgets.guard(), st.spinner("Counting terms of the training part (private, once) and simulating…"):
                steps.ensure_corpus(state)
                forecasts.run_exact_forecast(state)
        f = state.results.forecast
        if f is not None:
            show_forecast(f, "chart.forecast")

navigation.next_button("budget")
