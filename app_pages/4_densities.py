"""Step 4 — per-class DP keyphrase densities over Ṽ (ε_kde), for the chosen sampling method."""

from __future__ import annotations

import streamlit as st

from dpkps_core.pipeline import LIMITS
from studio import charts, state, widgets

METHODS = {
    "independent": "independent — L terms drawn i.i.d. from each class's density (fast, robust)",
    "iterative-linear": "iterative, linear ensemble — one DP-KDE per prefix length (ε_kde / L each)",
    "iterative-log": "iterative, log ensemble — ⌈log₂L⌉+1 DP-KDEs (paper appendix B)",
}
DENSITIES = {"auto": "auto (histogram for independent, RFF for iterative)",
             "histogram": "exact smoothed DP histogram (independent only)", "rff": "RFF DP-KDE (the paper's)"}

widgets.page_header(3, "Each class gets a DP density over Ṽ built from its training documents' keyphrases (their "
                       "matches of Ṽ). Classes use disjoint documents, so ε_kde is spent once, not per class.")
s = st.session_state

if s.get("pv") is None:
    st.info("Build the private vocabulary first.")
    widgets.go_to(2)
else:
    st.subheader("Sampling method (chosen now: the density depends on it)")
    widgets.bound(st.selectbox, "Method", "method", options=list(METHODS), format_func=METHODS.get)
    c1, c2 = st.columns(2)
    widgets.bound(c1.number_input, "L — keyphrases per sequence", "length", min_value=1, max_value=LIMITS["length"])
    widgets.bound(c2.selectbox, "Density", "density", options=list(DENSITIES), format_func=DENSITIES.get)
    c1, c2 = st.columns(2)
    widgets.bound(c1.checkbox, "Bandwidth σ: automatic (¼ × median distance among Ṽ's embeddings)", "bandwidth_auto")
    if not s["bandwidth_auto"]:
        widgets.bound(c1.number_input, "σ", "bandwidth", min_value=0.0, max_value=10.0, step=0.05)
    cfg = state.current_config()
    if cfg.density_kind == "rff":
        widgets.bound(c2.checkbox, "Random features I: automatic (≈ n_c·ε/2)", "features_auto")
        if not s["features_auto"]:
            widgets.bound(c2.number_input, "I", "features", min_value=16, max_value=LIMITS["features"], step=100)

    with widgets.guard():
        prev = state.density_preview()
        if prev["density"] == "histogram":
            st.caption(f"Exact smoothed DP histogram: Laplace(1/ε_kde) on every term of Ṽ per class — expected "
                       f"noise sd per term {prev['noise_sd_per_term']:.3f} (a document weighs 1 in total).")
        else:
            st.caption(f"RFF DP-KDE with {prev['members']} ensemble member(s), I = {prev['features']:,} features; "
                       f"per-class size estimate {prev['class_size_estimate']:,.0f} ({prev['class_size_source']}). "
                       f"Expected error: RFF {prev['rff_error']:.3f} + DP noise {prev['noise_error']:.3f} = "
                       f"{prev['total_error']:.3f}.")

    _, eps_kde = state.eps_split()
    built = s.get("dp_density") is not None
    st.markdown(f"Building spends **ε_kde = {eps_kde:g}**" + (" **again** (re-running charges the ledger a second "
                "time; changing the method or L needs a rebuild)." if built else "."))
    label = f"Rebuild (spends ε_kde = {eps_kde:g} again)" if built else f"Build densities (spends ε_kde = {eps_kde:g})"
    if st.button(label, type="secondary" if built else "primary", icon=":material/blur_on:"):
        with widgets.guard(), st.status("Building the per-class DP densities…", expanded=True) as status:
            st.write("Extracting each training document's keyphrases (private, in memory)…")
            st.write("Embedding Ṽ with the public model (cached on disk: Ṽ is a DP output)…")
            state.run_density()
            status.update(label="Densities built", state="complete")
            st.rerun()

    if s.get("dp_density") is not None:
        meta, info = s["density_meta"], s["density_info"]
        if (meta["method"], meta["length"], meta["density"]) != (s["method"], int(s["length"]), s["density"]):
            st.warning("The method, L or density changed since the densities were built; rebuild to apply "
                       f"(spends ε_kde again). Built with: {meta['method']}, L = {meta['length']}.",
                       icon=":material/sync_problem:")
        st.subheader("Densities")
        st.markdown(widgets.DP_BADGE)
        m = st.columns(4)
        m[0].metric("Density", info["density"])
        m[1].metric("Bandwidth σ", f"{info['bandwidth']:.3g}", help=info.get("bandwidth_source"))
        if info["density"] == "histogram":
            m[2].metric("Noise sd per term", f"{info['expected_noise_per_term']:.3f}")
        else:
            m[2].metric("Random features I", f"{info['features']:,}", help=info.get("features_source"))
            m[3].metric("Expected error", f"{info['total_error']:.3f}",
                        help=f"RFF {info['rff_error']:.3f} + DP noise {info['noise_error']:.3f}")
        if meta["documents_without_keyphrases"]:
            st.caption(f"{widgets.PRIVATE_BADGE} {meta['documents_without_keyphrases']:,} training documents "
                       "contain no term of Ṽ and contribute nothing (an exact count of the private corpus: not a "
                       "DP output, never exported).")
        c = state.corpus()
        scores = state.density_scores()
        st.plotly_chart(charts.density_bars(c.classes, s["pv"].terms, scores, top=10), key="chart.density_bars")

        st.subheader("Map of Ṽ coloured by each class's density")
        if s.get("umap_map") is None:
            if st.button("Draw the UMAP map", icon=":material/scatter_plot:"):
                with widgets.guard(), st.spinner("UMAP of Ṽ's embeddings (first time in a server: ~20 s)…"):
                    state.umap_map()
                    st.rerun()
        else:
            cls = st.selectbox("Colour by the density of class", c.classes, key="umap_class")
            i = c.classes.index(cls)
            st.plotly_chart(charts.umap_density_map(s["umap_map"], s["pv"].terms, scores[i], cls), key="chart.umap")
        widgets.next_button(3)
