"""Local utility evaluation of DP-KPS outputs and the ε trade-off explorer (docs/DESIGN.md §5, §6).

Everything here reads the REAL corpus and therefore runs locally for the data owner only: accuracies, recalls,
forecasts and projections of real documents are *private, not for release* (every result carries
``private = True`` and :data:`PRIVATE_NOTE`; ``evaluation.json`` is never put in a release bundle).

* Held-out split (:mod:`dpkps_core.method.split`): only ``split.train`` feeds a DP step; ``split.test`` is used for
  evaluation only; ``split.client`` (unlabelled) only for Deep CORAL.
* Downstream accuracy (docs/DESIGN.md §5): logistic regression (default) or a small torch MLP head on sentence
  embeddings, trained on synthetic documents and tested on the real test part; baseline: the same classifier on
  the same number of real training documents per class, re-sampled per seed.
* No-LLM check ([DP-KPS] Table 5): TF-IDF over keyphrase uni- and bigrams (each keyphrase one token) + logistic
  regression, trained on the DP keyphrase sequences, tested on the test documents' own keyphrase sequences (their
  matches of Ṽ in text order, repeats kept, first L). Upper bound: the same classifier trained on the real
  training documents' keyphrase sequences ("real keyphrase baseline").
* Deep CORAL ([DP-KPS] Appendix C.1.2; Sun & Saenko 2016): cross-entropy + λ·‖C_syn − C_client‖²_F / (4d²).
* Projections: t-SNE / UMAP of real vs synthetic embeddings, as a DataFrame for overlays.
* ε sweep (docs/DESIGN.md §5, §6): no-LLM accuracy and vocabulary recall over an ε_voc × ε_kde grid, methods and seeds;
  term counts are computed once per corpus, each cell re-runs only noise + selection and what follows.
* Disclosure test (issue 34 §2, [Phantoms], [OneRun]): the synthetic documents' rare-phrase, long-span and
  identifier matches against the training part vs as many held-out documents, a one-sided exact test and an
  empirical ε lower bound per document beside the claimed ε (``disclosure.json``, PRIVATE).
* Forecast ("Will this work?", docs/DESIGN.md §6): vocabulary noise floor against the true term counts, the expected
  share of Ṽ that is pure noise, the expected density error against the spread of scores, and a verdict.

Nothing here logs or prints document text. Modules: metrics · classifiers (heads, Deep CORAL) · no_llm (the ONE
no-LLM check and the ONE real keyphrase baseline) · projections · run (a run folder's evaluation) · sweep ·
forecast_outlook (what both forecasts share: Forecast, the verdict, the chart) · forecast_exact (the exact,
private preview) · forecast_dp (the default DP forecast and its release) · disclosure (the disclosure test).
Every name is importable from ``dpkps_core.evaluation``.
"""

# ruff: noqa: F401 - the package's public names (and the helpers other modules use)
from dpkps_core.evaluation.metrics import (
    PRIVATE_NOTE,
    DISCLOSURE_NOTE,
    _noop,
    Scores,
    classification_scores,
    chance_accuracy,
    _mean_sd,
    MetricSummary,
    Interval,
    accuracy_interval,
    ratio_interval,
)
from dpkps_core.evaluation.classifiers import (
    CLASSIFIERS,
    coral_loss,
    TorchHead,
    make_classifier,
    embedding_accuracy,
    matched_real_sample,
    real_baseline_accuracy,
)
from dpkps_core.evaluation.no_llm import (
    KEYPHRASE_SEPARATOR,
    keyphrase_analyzer,
    join_keyphrases,
    keyphrase_sequences,
    keyphrase_classifier_scores,
    no_llm_check,
    real_keyphrase_baseline,
    vocabulary_recall,
    noise_term_share,
)
from dpkps_core.evaluation.projections import (
    PROJECTIONS,
    projection_frame,
    projection_figure,
    subsample,
    term_map,
)
from dpkps_core.evaluation.run import (
    RunData,
    load_run,
    projection_for_run,
    EvaluationResult,
    evaluate_run,
    read_evaluation,
    write_evaluation,
)
from dpkps_core.evaluation.sweep import (
    DEFAULT_EPS_VOC_GRID,
    DEFAULT_EPS_KDE_GRID,
    DEFAULT_SWEEP_METHODS,
    DEFAULT_SWEEP_PER_CLASS,
    _vocabulary_key,
    _split_key,
    NoLLMEvaluator,
    run_sweep,
    sweep_summary,
    sweep_figures,
    write_sweep_outputs,
    _write_png,
)
from dpkps_core.evaluation.forecast_outlook import (
    Forecast,
    expected_noise_share,
    suggest_smaller_n,
    vocabulary_outlook,
    forecast_verdict,
    vocabulary_noise_share,
    _num,
    forecast_figure,
)
from dpkps_core.evaluation.forecast_exact import (
    _count_curve,
    forecast,
)
from dpkps_core.evaluation.forecast_dp import (
    DP_FORECAST_NOTE,
    EXACT_PREVIEW_NOTE,
    release_forecast,
    dp_forecast,
    reconstructed_counts,
    forecast_from_release,
    forecast_preview,
)
from dpkps_core.evaluation.disclosure import (
    DISCLOSURE_FILE,
    DisclosureResult,
    DisclosureSettings,
    disclosure_for_run,
    disclosure_test,
    read_disclosure,
    write_disclosure,
)
