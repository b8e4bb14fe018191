"""``python -m dpkps_core compare``: DP-KPS, private prediction and AugPE+Ṽ at equal ε on the same split.

Writes ``compare.csv`` and ``compare.md`` (PRIVATE: accuracies on real data) plus each method's synthetic
documents, privacy report and public-prompt audit log into ``--out``.
"""

from __future__ import annotations

import argparse
import math
import sys

from dpkps_core.baselines.compare_settings import GENERATION_METHODS
from dpkps_core.device import DEVICE_CHOICES, default_device_setting
from dpkps_core.llm.factory import DEFAULT_BACKEND, backend_help, backend_kinds, backend_spec, make_backend
from dpkps_core.method.sampling import SAMPLING_METHODS
from dpkps_core.cli.common import add_file_arguments
from dpkps_core.dp.ledger import DEFAULT_EPSILON_CAP

PP_WARNING_CLI = (
    "WARNING: private prediction puts PRIVATE documents into the prompt of the LOCAL offline model (it needs "
    "token logits); it never sends them to a remote API."
)


def _methods(value: str) -> list[str]:
    out = [m.strip() for m in value.split(",") if m.strip()]
    bad = [m for m in out if m not in GENERATION_METHODS]
    if bad or not out:
        raise argparse.ArgumentTypeError(f"unknown method(s) {', '.join(bad) or '(none)'}; choose from {', '.join(GENERATION_METHODS)}")
    return out


def _theta(value: str) -> float | None:
    v = value.strip().lower()
    if v in ("none", "off", "-inf"):
        return None
    try:
        return math.inf if v in ("inf", "+inf") else float(v)
    except ValueError:
        raise argparse.ArgumentTypeError("θ must be a number, 'inf' or 'off'") from None


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare", help="compare DP-KPS, private prediction and AugPE+Ṽ at equal ε",
        description=(
            "Run the selected methods at the same privacy level on the same held-out split and report downstream "
            "accuracy (logistic regression on sentence embeddings, tested on real held-out documents), LLM calls, "
            "tokens and wall time in one table. DP-KPS is pure ε-DP; private prediction and AugPE+Ṽ are (ε, δ)-DP. "
            "Private prediction runs on the local offline model only and puts PRIVATE text into its prompts. "
            "Results are PRIVATE (accuracies on real data): do not release compare.csv / compare.md."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("corpus (private)")
    g.add_argument("--corpus", default="demo:bbc", help="demo:bbc, demo:drugs, demo:drugs-rating or a file/folder")
    add_file_arguments(g)
    g.add_argument("--person-column", help="unit of privacy = one person (ids stay private): DP-KPS bounds each "
                   "person's total contribution; private prediction and AugPE+Ṽ keep one document per person")
    g.add_argument("--test-fraction", type=float, default=0.2,
                   help="held-out share (each document assigned on its own by a keyed hash of its text)")
    g.add_argument("--split-seed", type=int, default=0, help="public seed of the hash split")
    g = p.add_argument_group("privacy")
    g.add_argument("--eps", type=float, required=True, help="total ε spent by EVERY method")
    g.add_argument("--delta", type=float, default=1e-6, help="δ of the (ε, δ) methods (DP-KPS needs none)")
    g.add_argument("--eps-voc", type=float, default=None,
                   help="ε of the private vocabulary Ṽ shared by DP-KPS and AugPE+Ṽ (default: ε/2)")
    g.add_argument("--seed", type=int, default=None, help="REPRODUCIBLE DEMO ONLY: seed all noise (not for release)")
    g.add_argument("--epsilon-cap", type=float, default=DEFAULT_EPSILON_CAP,
                   help="cap on the total ε any one document (person) may spend over ALL releases (the app's default "
                        "too); the comparison's joint cost (every method's ε summed) must fit it before anything runs")
    g = p.add_argument_group("what to run")
    g.add_argument("--methods", type=_methods, default=list(GENERATION_METHODS),
                   help=f"comma-separated subset of {','.join(GENERATION_METHODS)}")
    g.add_argument("--per-class", "-K", type=int, default=2, help="synthetic documents per class (every method)")
    g.add_argument("--max-tokens", type=int, default=48, help="most tokens per synthetic document")
    g.add_argument("--doc-type", default="a document", help='document type with its article, e.g. "a news article"')
    g.add_argument("--temperature", type=float, default=0.7, help="LLM temperature (DP-KPS, AugPE+Ṽ)")
    g.add_argument("--seeds", type=int, default=3, help="classifier seeds of the evaluation")
    g.add_argument("--no-real-baseline", action="store_true", help="skip the real-documents row")
    g = p.add_argument_group("LLM (DP-KPS and AugPE+Ṽ; private prediction uses the local model: offline, or "
                             "--backend local)")
    g.add_argument("--backend", choices=backend_kinds(), default=DEFAULT_BACKEND, help=backend_help())
    g.add_argument("--model-path", metavar="DIR", default=None,
                   help="Hugging Face model folder on disk for --backend local (loaded offline)")
    g.add_argument("--device", choices=DEVICE_CHOICES, default=default_device_setting(),
                   help="where the offline/local model runs: auto = CUDA when torch sees a GPU, else the CPU")
    g.add_argument("--base-url", default=None, help="server base URL for --backend openai")
    g.add_argument("--model", default=None, help="model name for --backend openai")
    g.add_argument("--api-key-env", default=None,
                   help="environment variable holding the API key; None = the backend's own")
    g.add_argument("--concurrency", type=int, default=4, help="requests in flight (openai backend)")
    g.add_argument("--threads", type=int, default=1,
                   help="CPU threads of the offline model (more helps only on an otherwise idle machine; "
                        "oversubscribed cores make torch much slower)")
    g = p.add_argument_group("DP-KPS")
    g.add_argument("--vocabulary", default="glove", help="public vocabulary V (glove, wordfreq, medical or a file)")
    g.add_argument("--sampling-method", choices=SAMPLING_METHODS, default="independent", help="DP-KPS sequence sampler")
    g.add_argument("--length", "-L", type=int, default=10, help="keyphrases per sequence")
    g = p.add_argument_group("private prediction ([PrivPred])")
    g.add_argument("--pp-batch-size", type=int, default=16,
                   help="expected batch size s (prompts per batch; compute per document grows with s)")
    g.add_argument("--pp-private-tokens", type=int, default=None, help="r, private tokens per batch (default: max tokens)")
    g.add_argument("--pp-temperature", type=float, default=2.0, help="τ (the clip c is calibrated to ε)")
    g.add_argument("--pp-svt-threshold", type=_theta, default=None, help="θ of the sparse vector ('off' = every token private)")
    g.add_argument("--pp-svt-noise", type=float, default=0.2, help="σ of the sparse vector")
    g.add_argument("--pp-top-k", type=int, default=20, help="sample among the public prediction's top-k tokens (0 = all)")
    g.add_argument("--pp-prompt-tokens", type=int, default=96, help="private documents are cut to this many tokens")
    g.add_argument("--class-size-estimate", type=float, default=None,
                   help="PUBLIC estimate of documents per class for the hash buckets (default: a DP count of the "
                        "training part, charged to private prediction's ε: min(0.1, 5 %% of ε))")
    g = p.add_argument_group("AugPE+Ṽ ([DP-KPS] §3)")
    g.add_argument("--augpe-epochs", type=int, default=10, help="vote/variation epochs T (T prompts per document)")
    g.add_argument("--augpe-words", type=int, default=10, help="random Ṽ words per first prompt")
    p.add_argument("--embedding-model", default=None, help="public sentence embedder (default all-MiniLM-L6-v2)")
    p.add_argument("--out", required=True, help="folder for compare.csv, compare.md and per-method files")
    p.set_defaults(func=_cmd_compare)


def _cmd_compare(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from dpkps_core.baselines.augpe import AugPEConfig
    from dpkps_core.cli.common import check_output_dir, limits_from_args, parse_classes
    from dpkps_core.corpus import load_corpus_spec, require_declared
    from dpkps_core.cli.ledger import corpus_ledger, ledger_summary
    from dpkps_core.baselines.compare import compare_methods
    from dpkps_core.baselines.compare_settings import CompareSettings
    from dpkps_core.embeddings import DEFAULT_MODEL, get_embedder
    from dpkps_core.baselines.prediction_config import PrivatePredictionConfig

    check_output_dir(args.out, "--out")  # before the corpus, the models or any ε
    corpus = require_declared(load_corpus_spec(args.corpus, text_column=args.text_column, label_column=args.label_column,
                                               classes=parse_classes(args.classes, args.classes_file),
                                               person_column=args.person_column, encoding=args.encoding,
                                               **limits_from_args(args)))
    ledger = corpus_ledger(corpus, tool="cli compare", out=args.out, cap=args.epsilon_cap)
    pp_cfg = PrivatePredictionConfig(
        batch_size=args.pp_batch_size, private_tokens=args.pp_private_tokens or args.max_tokens,
        temperature=args.pp_temperature, svt_threshold=args.pp_svt_threshold, svt_noise=args.pp_svt_noise,
        public_top_k=args.pp_top_k or None, max_prompt_tokens=args.pp_prompt_tokens,
    )
    model_name = args.embedding_model or DEFAULT_MODEL
    settings = CompareSettings(
        eps_total=args.eps, methods=tuple(args.methods), delta=args.delta, per_class=args.per_class,
        eps_voc=args.eps_voc, max_tokens=args.max_tokens, doc_type=args.doc_type, temperature=args.temperature,
        sampling={"vocabulary": args.vocabulary, "method": args.sampling_method, "length": args.length,
                  "embedding_model": model_name},
        private_prediction=pp_cfg,
        augpe_config=AugPEConfig(epochs=args.augpe_epochs, words_per_prompt=args.augpe_words),
        class_size_estimate=args.class_size_estimate, seeds=tuple(range(max(1, args.seeds))), seed=args.seed,
        test_fraction=args.test_fraction, split_seed=args.split_seed, real_baseline=not args.no_real_baseline,
        threads=args.threads)
    joint_eps, joint_delta = settings.joint_cost()
    ledger.require(joint_eps, f"this comparison of {len(args.methods)} method(s) on the same data (joint cost)")
    if "private-prediction" in args.methods:
        print(PP_WARNING_CLI, file=sys.stderr)
    if args.seed is not None:
        print("WARNING: seeded noise — reproducible demo, NOT FOR RELEASE.", file=sys.stderr)
    here = backend_spec(args.backend).runs_here  # the registry (llm/factory.py): each factory takes what it uses
    backend = make_backend(args.backend, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
                           concurrency=args.concurrency, threads=args.threads, device=args.device if here else None,
                           model_path=args.model_path)
    embedder = get_embedder(model_name)
    with tqdm(total=100, unit="%", desc="compare", leave=False) as bar:
        def progress(frac: float, message: str) -> None:
            bar.n = int(100 * min(max(frac, 0.0), 1.0))
            bar.set_postfix_str(message[:60])
            bar.refresh()

        result = compare_methods(corpus, settings, backend=backend, embedder=embedder, out_dir=args.out,
                                 progress=progress, ledger=ledger)
    print(result.to_markdown())
    print(f"wrote compare.csv and compare.md (PRIVATE: accuracies on real data) to {args.out}")
    joint = result.info.get("joint") or {}
    print(f"joint cost of this comparison: ε = {joint.get('epsilon', joint_eps):.4g}, "
          f"δ = {joint.get('delta', joint_delta):g} (every method's ε and δ summed; a shared Ṽ counted once)")
    print(ledger_summary(ledger))
    return 0
