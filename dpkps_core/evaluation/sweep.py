"""The ε sweep (docs/DESIGN.md §5, §6): the no-LLM check over an ε_voc × ε_kde grid, methods and seeds, term counts computed once; its summary, figures and files (PRIVATE).

Nothing here logs or prints document text."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence


from dpkps_core.method import pipeline
from dpkps_core.method.config import LIMITS
from dpkps_core.corpus import Corpus
from dpkps_core.dp.ledger import PrivacyLedger
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.dp.validation import check_epsilon, check_positive_int
from dpkps_core.dp.vocabulary import PrivateVocabulary
from dpkps_core.embeddings import Embedder, EmbeddingCache, MemoryEmbeddingCache, embed_terms
from dpkps_core.errors import ParameterError
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.sampling import SAMPLING_METHODS
from dpkps_core.method.split import CorpusSplit, split_documents
from dpkps_core.method.vocabulary import PublicVocabulary
from dpkps_core.progress import Progress
from dpkps_core.evaluation.held_out import DEFAULT_MAX_TEST_DOCUMENTS, held_out_sample
from dpkps_core.evaluation.metrics import PRIVATE_NOTE, Scores, _noop, chance_accuracy
from dpkps_core.evaluation.no_llm import keyphrase_sequences, no_llm_check, noise_term_share, real_keyphrase_baseline, vocabulary_recall

if TYPE_CHECKING:  # heavy imports stay lazy
    import pandas as pd
    import plotly.graph_objects as go


DEFAULT_EPS_VOC_GRID = (0.5, 1.0, 2.0, 5.0)
DEFAULT_EPS_KDE_GRID = (1.0, 2.0, 5.0, 10.0)
DEFAULT_SWEEP_METHODS = ("independent", "iterative-log")
DEFAULT_SWEEP_PER_CLASS = 200
# --------------------------------------------------------------------------------------- no-LLM cells

def _vocabulary_key(config: SamplingConfig) -> tuple:
    return (config.vocabulary, config.remove_stopwords, config.junk_filter, config.effective_vocab_max_terms, config.terms_per_doc)


def _split_key(config: SamplingConfig) -> tuple:
    return (config.test_fraction, config.client_fraction, config.split_seed)


class NoLLMEvaluator:
    """The no-LLM check for many configurations of one corpus and public vocabulary (the ε sweep's engine).

    Prepared once (private, in memory): the split, the training part's term counts over V (independent of ε),
    the true top terms and the test labels — on at most ``max_test_documents`` held-out documents
    (:mod:`~dpkps_core.evaluation.held_out`; :attr:`held_out` says how many of how many). Each :meth:`evaluate` call re-runs only what depends on ε and the
    method, in the same order and with the same noise draws as :func:`pipeline.run_sampling` with that seed:
    noise + top-N selection, keyphrase extraction (memoised per Ṽ), embeddings of Ṽ (in memory only), the DP
    density and sequence sampling; then scores the sequences. Only ``split.train`` reaches a DP step.
    """

    def __init__(self, corpus: Corpus, *, config: SamplingConfig, vocabulary: PublicVocabulary, embedder: Embedder,
                 cache: EmbeddingCache | None = None, split: CorpusSplit | None = None, memo_size: int = 24,
                 max_test_documents: int | None = DEFAULT_MAX_TEST_DOCUMENTS) -> None:
        self.config = dataclasses.replace(config).validate()
        self.vocabulary = vocabulary
        self.embedder = embedder
        # Ṽs drawn here are functions of private counts under seeded noise: embed them in memory only, reading
        # (never writing) the persistent cache (docs/PRIVACY.md).
        self.cache = MemoryEmbeddingCache(read_from=cache)
        if config.classes is not None:
            corpus = corpus.with_classes(config.classes)
        self.classes = tuple(corpus.classes)
        self.split = split or split_documents(corpus, test_fraction=config.test_fraction,
                                              client_fraction=config.client_fraction, seed=config.split_seed,
                                              by_person=bool(config.person_column))
        self.train = corpus.subset(self.split.train).declared_only()
        # evaluation only: at most max_test_documents held-out documents (a public-seed sample; held_out.py)
        self.held_out = held_out_sample(corpus.subset(self.split.test).declared_only(),
                                        max_documents=max_test_documents)
        self.test = self.held_out.corpus
        if len(self.test) == 0:
            raise ParameterError("The no-LLM check needs held-out test documents; set a test fraction above 0.")
        self.groups = self.train.persons if config.person_column else None  # person unit (docs/DESIGN.md §2, person unit)
        self.counts = pipeline.term_counts(self.train.texts, vocabulary, terms_per_doc=config.terms_per_doc,
                                           groups=self.groups)
        self.chance = chance_accuracy(self.test.labels)
        self._memo: OrderedDict[tuple, dict[str, Any]] = OrderedDict()
        self._baselines: dict[tuple, Scores] = {}
        self._memo_size = memo_size

    def _check_compatible(self, config: SamplingConfig) -> None:
        if _vocabulary_key(config) != _vocabulary_key(self.config) or _split_key(config) != _split_key(self.config):
            raise ParameterError("This evaluator was prepared for another vocabulary, S or split; prepare a new one.")
        if config.embedding_model != self.config.embedding_model:
            raise ParameterError("This evaluator was prepared for another embedding model; prepare a new one.")

    def _per_vocabulary(self, pv: PrivateVocabulary, config: SamplingConfig) -> dict[str, Any]:
        max_per_doc = config.max_keyphrases_per_doc or config.length
        key = (pv.terms, max_per_doc, config.length)
        if key in self._memo:
            self._memo.move_to_end(key)
            return self._memo[key]
        train_kp = pipeline.extract_keyphrases(self.train.texts, pv, max_per_doc=max_per_doc)
        # evaluation only: the test documents' own keyphrase sequences (never reach a DP step)
        test_seqs = keyphrase_sequences(self.test.texts, pv, length=config.length)
        embeddings = embed_terms(pv.terms, self.embedder, cache=self.cache)
        entry = {
            "train_keyphrases": train_kp, "test_sequences": test_seqs, "embeddings": embeddings,
            "vocabulary_recall": vocabulary_recall(self.counts, self.vocabulary.terms, pv.terms, top=config.vocab_size),
            "noise_term_share": noise_term_share(self.counts, self.vocabulary, pv.terms),
        }
        self._memo[key] = entry
        while len(self._memo) > self._memo_size:
            self._memo.popitem(last=False)
        return entry

    def real_keyphrase_baseline(self, config: SamplingConfig) -> Scores:
        """:func:`real_keyphrase_baseline` for ``config``'s N and L, computed once (it does not depend on ε)."""
        key = ("real_keyphrase_baseline", config.vocab_size, config.length)
        if key not in self._baselines:
            self._baselines[key] = real_keyphrase_baseline(
                self.train.texts, self.train.labels, self.test.texts, self.test.labels, vocabulary=self.vocabulary,
                counts=self.counts, vocab_size=config.vocab_size, length=config.length)
        return self._baselines[key]

    def evaluate(self, config: SamplingConfig, *, seed: int, per_class: int | None = None) -> dict[str, Any]:
        """One cell: sample with seeded noise ``seed`` (a reproducible local experiment, not for release) and
        score the sequences. Returns a flat row (private)."""
        config = dataclasses.replace(config, seed=int(seed))
        if per_class is not None:
            config = dataclasses.replace(config, per_class=check_positive_int(
                per_class, "sequences per class", maximum=LIMITS["per_class"]))
        config.validate()
        self._check_compatible(config)
        t = time.perf_counter()
        noise = NoiseSource(int(seed))
        ledger = PrivacyLedger()
        pv = pipeline.build_private_vocabulary(
            self.train.texts, self.vocabulary, eps_voc=config.eps_voc, terms_per_doc=config.terms_per_doc,
            vocab_size=config.vocab_size, context=ReleaseContext(noise=noise, ledger=ledger),
            selection_rule=config.selection_rule, counts=self.counts)
        entry = self._per_vocabulary(pv, config)
        density, info = pipeline.build_density(
            entry["train_keyphrases"], self.train.labels, classes=self.classes, embeddings=entry["embeddings"],
            config=config, private_vocabulary=pv, context=ReleaseContext(noise=noise, ledger=ledger),
            groups=self.groups)
        outcome = pipeline.sample_sequences(density, terms=pv.terms, embeddings=entry["embeddings"], config=config,
                                            rng=noise.child())
        scores = no_llm_check(outcome.sequences, self.test.texts, self.test.labels, private_vocabulary=pv,
                              length=config.length, test_sequences=entry["test_sequences"])
        real = self.real_keyphrase_baseline(config)
        return {
            "method": config.method, "density": config.density_kind,
            "bandwidth": float(info.get("bandwidth", float("nan"))),
            "features": info.get("features"), "eps_voc": float(config.eps_voc), "eps_kde": float(config.eps_kde),
            "eps_total": float(config.eps_voc + config.eps_kde), "seed": int(seed), "per_class": config.per_class,
            "no_llm_accuracy": scores.accuracy, "no_llm_macro_f1": scores.macro_f1,
            "real_keyphrase_baseline_accuracy": real.accuracy, "chance_accuracy": self.chance,
            "vocabulary_recall": entry["vocabulary_recall"], "noise_term_share": entry["noise_term_share"],
            "private_vocabulary_size": len(pv),
            "uniform_fallback_share": outcome.uniform_fallbacks / max(outcome.draws, 1),
            "epsilon_spent": ledger.total_epsilon, "seconds": round(time.perf_counter() - t, 3),
        }


def run_sweep(
    corpus: Corpus, *, config: SamplingConfig | None = None, vocabulary: PublicVocabulary, embedder: Embedder,
    cache: EmbeddingCache | None = None, eps_voc_grid: Sequence[float] = DEFAULT_EPS_VOC_GRID,
    eps_kde_grid: Sequence[float] = DEFAULT_EPS_KDE_GRID, methods: Sequence[str] = DEFAULT_SWEEP_METHODS,
    seeds: int | Sequence[int] = 3, per_class: int = DEFAULT_SWEEP_PER_CLASS, progress: Progress | None = None,
    evaluator: NoLLMEvaluator | None = None, cancel: Any = None, rows: list[dict[str, Any]] | None = None,
) -> "pd.DataFrame":
    """ε sweep without the LLM (docs/DESIGN.md §5): one row per (ε_voc, ε_kde, method, seed) with the no-LLM accuracy,
    the real keyphrase baseline, vocabulary recall and the noise share of Ṽ. PRIVATE (``df.attrs``).

    ``config`` gives every other parameter (default :class:`SamplingConfig`); iterative methods use the RFF
    DP-KDE where ``config.density`` is ``"histogram"``. Seeds are demo noise seeds (local experiment).
    ``cancel`` (an event) stops between cells; finished rows are appended to ``rows`` as they come (the app's
    job shows them while it runs and keeps them when cancelled).

    EXACT preview: it reads the true training part and the real held-out part — private, local — NOT covered by
    ε (``df.attrs["covered_by_epsilon"] is False``); choosing ε or a method from it is a use of the data no ledger
    entry accounts for. The DP alternative is :func:`dp_forecast_grid`."""
    import pandas as pd

    base = dataclasses.replace(config) if config is not None else SamplingConfig()
    grid_voc = [check_epsilon(e, "ε_voc") for e in eps_voc_grid]
    grid_kde = [check_epsilon(e, "ε_kde") for e in eps_kde_grid]
    methods = list(methods)
    for m in methods:
        if m not in SAMPLING_METHODS:
            raise ParameterError(f"Unknown method {m!r}; choose from {', '.join(SAMPLING_METHODS)}.")
    seed_list = list(range(check_positive_int(seeds, "seeds", maximum=100))) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not grid_voc or not grid_kde or not methods or not seed_list:
        raise ParameterError("The sweep grid is empty; give at least one ε_voc, ε_kde, method and seed.")
    per_class = check_positive_int(per_class, "sequences per class", maximum=LIMITS["per_class"])
    report = progress or _noop
    report(0.0, "counting terms of the training part (once)")
    ev = evaluator or NoLLMEvaluator(corpus, config=base, vocabulary=vocabulary, embedder=embedder, cache=cache)
    cells = [(s, ev_, ek, m) for s in seed_list for ev_ in grid_voc for ek in grid_kde for m in methods]
    rows = [] if rows is None else rows
    for k, (seed, e_voc, e_kde, method) in enumerate(cells):
        if cancel is not None and cancel.is_set():
            break
        cfg = base.replace(eps_voc=e_voc, eps_kde=e_kde, method=method, epsilon_cap=None)
        rows.append(ev.evaluate(cfg, seed=seed, per_class=per_class))
        report((k + 1) / len(cells), f"cell {k + 1}/{len(cells)}: {method}, ε_voc={e_voc:g}, ε_kde={e_kde:g}, seed {seed}")
    df = pd.DataFrame(list(rows))
    df.attrs.update(private=True, note=PRIVATE_NOTE, corpus=base.corpus, vocabulary=vocabulary.name,
                    chance_accuracy=ev.chance, covered_by_epsilon=False, badge="private, local — not covered by ε",
                    held_out=ev.held_out.note())
    return df


def dp_forecast_grid(stats: Any, config: SamplingConfig, *, eps_voc_grid: Sequence[float] = DEFAULT_EPS_VOC_GRID,
                     eps_kde_grid: Sequence[float] = DEFAULT_EPS_KDE_GRID, methods: Sequence[str] = ("independent",),
                     **options: Any) -> "pd.DataFrame":
    """The DP sweep (default; docs/PRIVACY.md "Previews that steer choices"): the forecast of ``config`` over an
    ε_voc × ε_kde grid and methods, as post-processing of ONE DP forecast release (``dpkps_core.dp.forecast``) — no
    further ε, covered by the ledger. ``options``: the other keyword arguments of
    :func:`~dpkps_core.evaluation.forecast_dp.forecast_from_release` (``reps``, ``seed``…). Unlike :func:`run_sweep`
    (exact, private, local — not covered by ε) it forecasts rather than measures accuracy."""
    import pandas as pd

    from dpkps_core.evaluation.forecast_dp import forecast_from_release

    rows = []
    for method in methods:
        for e_voc in (check_epsilon(e, "ε_voc") for e in eps_voc_grid):
            for e_kde in (check_epsilon(e, "ε_kde") for e in eps_kde_grid):
                f = forecast_from_release(stats, config.replace(eps_voc=e_voc, eps_kde=e_kde, method=method), **options)
                rows.append({"method": method, "eps_voc": e_voc, "eps_kde": e_kde,
                             "expected_real_terms": round(f.expected_real_terms),
                             "expected_noise_share": f.expected_noise_share,
                             "worst_class_snr": min((v["snr"] for v in f.kde.values()), default=0.0),
                             "usable": f.usable})
    df = pd.DataFrame(rows)
    df.attrs.update(private=False, covered_by_epsilon=True, epsilon_forecast=float(stats.epsilon))
    return df


def sweep_summary(df: "pd.DataFrame") -> "pd.DataFrame":
    """Mean and sd over seeds per (method, ε_voc, ε_kde)."""
    keys = ["method", "eps_voc", "eps_kde", "eps_total"]
    cols = ["no_llm_accuracy", "no_llm_macro_f1", "real_keyphrase_baseline_accuracy", "vocabulary_recall",
            "noise_term_share"]
    g = df.groupby(keys, sort=True)[cols]
    out = g.mean().add_suffix("_mean").join(g.std(ddof=1).fillna(0.0).add_suffix("_sd")).reset_index()
    out["seeds"] = df.groupby(keys, sort=True).size().to_numpy()
    out.attrs.update(df.attrs)
    return out


def sweep_figures(df: "pd.DataFrame") -> dict[str, "go.Figure"]:
    """Plotly figures of a sweep: ``heatmap:<method>`` (mean no-LLM accuracy over ε_voc × ε_kde) and
    ``curves`` (accuracy vs ε_total, one line per method and ε_voc, ± sd; baselines dashed)."""
    import plotly.graph_objects as go

    s = sweep_summary(df)
    figs: dict[str, go.Figure] = {}
    for method in sorted(s["method"].unique()):
        sub = s[s["method"] == method]
        piv = sub.pivot(index="eps_voc", columns="eps_kde", values="no_llm_accuracy_mean").sort_index()
        sd = sub.pivot(index="eps_voc", columns="eps_kde", values="no_llm_accuracy_sd").reindex_like(piv)
        seeds = sub.pivot(index="eps_voc", columns="eps_kde", values="seeds").reindex_like(piv)
        # one seed has no spread: "± 0.00" would claim a precision it does not have
        text = [[f"{m:.2f} ± {d:.2f}" if n > 1 else f"{m:.2f}" for m, d, n in zip(r1, r2, r3)]
                for r1, r2, r3 in zip(piv.to_numpy(), sd.to_numpy(), seeds.to_numpy())]
        fig = go.Figure(go.Heatmap(
            z=piv.to_numpy(), x=[f"{v:g}" for v in piv.columns], y=[f"{v:g}" for v in piv.index], text=text,
            texttemplate="%{text}", colorscale="Viridis", zmin=0, zmax=1, colorbar={"title": "accuracy"}))
        fig.update_layout(title=f"No-LLM accuracy, {method} (private — not for release)",
                          xaxis_title="ε_kde", yaxis_title="ε_voc")
        figs[f"heatmap:{method}"] = fig
    fig = go.Figure()
    for method in sorted(s["method"].unique()):
        for e_voc in sorted(s["eps_voc"].unique()):
            sub = s[(s["method"] == method) & (s["eps_voc"] == e_voc)].sort_values("eps_total")
            if sub.empty:
                continue
            fig.add_trace(go.Scatter(
                x=sub["eps_total"], y=sub["no_llm_accuracy_mean"], mode="lines+markers",
                name=f"{method}, ε_voc={e_voc:g}", error_y={"type": "data", "array": sub["no_llm_accuracy_sd"]},
                customdata=sub[["eps_voc", "eps_kde"]].to_numpy(),
                hovertemplate="ε_voc=%{customdata[0]}, ε_kde=%{customdata[1]}: %{y:.3f}<extra></extra>"))
    base = float(df["real_keyphrase_baseline_accuracy"].iloc[0])  # one value: it does not depend on ε (§7)
    fig.add_hline(y=base, line_dash="dash", annotation_text=f"real keyphrase baseline {base:.3g}")
    chance = float(df["chance_accuracy"].iloc[0]) if "chance_accuracy" in df else df.attrs.get("chance_accuracy")
    if chance is not None:
        fig.add_hline(y=chance, line_dash="dot", annotation_text=f"chance {chance:.2f}")
    fig.update_layout(title="No-LLM accuracy vs ε_total = ε_voc + ε_kde (private — not for release)",
                      xaxis_title="ε_total", yaxis_title="accuracy", yaxis_range=[0, 1])
    figs["curves"] = fig
    return figs


def write_sweep_outputs(df: "pd.DataFrame", out_dir: str | Path, *, stem: str = "sweep",
                        include_plotlyjs: bool | str = True) -> dict[str, Path]:
    """Write ``<stem>.csv``, ``<stem>.json`` (metadata: private), ``<stem>.html`` (every figure) and a PNG of the
    curves when kaleido is installed (else a matplotlib PNG when matplotlib is installed, else none)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{stem}.csv", "meta": out / f"{stem}.json", "html": out / f"{stem}.html"}
    df.to_csv(paths["csv"], index=False)
    meta = {"private": True, "note": PRIVATE_NOTE, "rows": len(df),
            **{k: v for k, v in df.attrs.items() if isinstance(v, (str, int, float, bool))}}
    paths["meta"].write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")
    figs = sweep_figures(df)
    html = [f"<html><head><meta charset='utf-8'><title>ε sweep</title></head><body>"
            f"<p><b>PRIVATE — {PRIVATE_NOTE}.</b></p>"]
    for k, (name, fig) in enumerate(figs.items()):
        html.append(fig.to_html(full_html=False, include_plotlyjs=include_plotlyjs if k == 0 else False))
    html.append("</body></html>")
    paths["html"].write_text("\n".join(html), encoding="utf-8")
    png = out / f"{stem}.png"
    if _write_png(figs["curves"], df, png):
        paths["png"] = png
    for p in paths.values():
        try:
            os.chmod(p, 0o600)
        except OSError:
            pass
    return paths


def _write_png(fig: "go.Figure", df: "pd.DataFrame", path: Path) -> bool:
    """PNG via kaleido if installed, else matplotlib if installed; False when neither is available."""
    import importlib.util

    if importlib.util.find_spec("kaleido") is not None:
        try:
            fig.write_image(str(path), width=900, height=550)
            return True
        except Exception:  # noqa: BLE001 - kaleido present but unusable (no browser): fall through
            pass
    if importlib.util.find_spec("matplotlib") is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = sweep_summary(df)
    fig_m, ax = plt.subplots(figsize=(9, 5.5))
    for method in sorted(s["method"].unique()):
        for e_voc in sorted(s["eps_voc"].unique()):
            sub = s[(s["method"] == method) & (s["eps_voc"] == e_voc)].sort_values("eps_total")
            if not sub.empty:
                ax.errorbar(sub["eps_total"], sub["no_llm_accuracy_mean"], yerr=sub["no_llm_accuracy_sd"],
                            marker="o", capsize=3, label=f"{method}, ε_voc={e_voc:g}")
    ax.axhline(float(df["real_keyphrase_baseline_accuracy"].mean()), ls="--", c="k", label="real keyphrase baseline")
    ax.axhline(float(df["chance_accuracy"].iloc[0]), ls=":", c="grey", label="chance")
    ax.set(xlabel="ε_total = ε_voc + ε_kde", ylabel="no-LLM accuracy", ylim=(0, 1))
    ax.legend(fontsize=7)
    fig_m.tight_layout()
    fig_m.savefig(path, dpi=120)
    plt.close(fig_m)
    return True
