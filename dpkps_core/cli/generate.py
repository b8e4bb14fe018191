"""CLI commands ``generate`` (LLM writing step) and ``export`` (release bundle).

``python -m dpkps_core generate --sequences RUN/sequences.jsonl --doc-type "a news article"`` writes
``documents.jsonl`` next to the sequences (resuming a previous run), with a progress bar;
``python -m dpkps_core export --run RUN --zip bundle.zip`` packages the release bundle.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable

from dpkps_core.cli.common import check_input_path, check_output_dir, check_output_file
from dpkps_core.device import DEVICE_CHOICES, default_device_setting
from dpkps_core.errors import ParameterError
from dpkps_core.llm.ct2_convert import ENGINE_CHOICES
from dpkps_core.llm.factory import DEFAULT_BACKEND, api_key_envs, backend_help, backend_kinds, backend_spec
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE, THREADS_ENV, default_threads
from dpkps_core.llm.repetition import (
    DEFAULT_NO_REPEAT_NGRAM,
    DEFAULT_REPETITION_PENALTY,
    MAX_NO_REPEAT_NGRAM,
    MAX_REPETITION_PENALTY,
)
from dpkps_core.llm.settings import DEFAULT_DRAFTS
from dpkps_core.progress import format_duration
from dpkps_core.records.runfolder import RunFolder


def _key_envs() -> str:
    """The registered backends' API-key variables, for the help ("OPENAI_API_KEY for openai")."""
    specs = [backend_spec(k) for k in backend_kinds()]
    return ", ".join(f"{s.api_key_env} for {s.name}" for s in specs if s.api_key_env) or "none"


def _add_decoding_args(g: argparse.ArgumentParser) -> None:
    """How the model writes: token budget, temperature, threads and repetition control (llm/repetition.py)."""
    g.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="most tokens per document (default 256 offline, 512 remote)")
    g.add_argument("--temperature", type=float, default=0.7, metavar="T", help="sampling temperature (0 = greedy)")
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help=f"CPU threads for the offline/local model (default ${THREADS_ENV}, else the usable CPUs up to 2)")
    g.add_argument("--no-repeat-ngram", type=int, default=DEFAULT_NO_REPEAT_NGRAM, metavar="N",
                   help=f"offline/local model: never write the same N tokens twice in a document (0 = off; 2 to "
                        f"{MAX_NO_REPEAT_NGRAM}), against repetition loops; the prompt's keyphrases stay free to "
                        "appear. Default measured (benchmarks/repetition.py); remote backends ignore it")
    g.add_argument("--repetition-penalty", type=float, default=DEFAULT_REPETITION_PENALTY, metavar="P",
                   help=f"offline/local model: lower the chance of every token the document already holds (1.0 = "
                        f"off, up to {MAX_REPETITION_PENALTY}). Default measured (benchmarks/repetition.py); "
                        "remote backends ignore it")


def register(subparsers: Any) -> None:
    """Add the ``generate`` and ``export`` sub-commands."""
    g = subparsers.add_parser(
        "generate",
        help="write synthetic documents from DP keyphrase sequences with an LLM",
        description=(
            "Prompt an LLM once per DP keyphrase sequence and append each finished document to documents.jsonl "
            "in the output folder. Re-running the same command resumes: finished documents are kept and skipped. "
            "Prompts hold only the public template, the document type, the DP sequence and PUBLIC few-shot "
            "examples, so this step is DP post-processing (no privacy cost). Every prompt sent is recorded in "
            "audit_log.jsonl; failures in generation_failures.jsonl."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g.add_argument("--sequences", required=True, metavar="FILE", help="sequences.jsonl written by the sampling step")
    g.add_argument("--backend", choices=backend_kinds(), default=DEFAULT_BACKEND,  # the registry (llm/factory.py)
                   help=backend_help())
    g.add_argument("--model-path", metavar="DIR", default=None,
                   help="folder of a Hugging Face causal language model (config.json, safetensors weights, tokenizer) "
                        "for --backend local; nothing is downloaded")
    g.add_argument("--device", choices=DEVICE_CHOICES, default=default_device_setting(),
                   help="where the offline/local model runs: auto = CUDA when torch sees a GPU, else the CPU "
                        "(bf16/fp16 on CUDA, float32 on the CPU); default from $DPKPS_DEVICE")
    g.add_argument("--engine", choices=ENGINE_CHOICES, default=None,
                   help="what writes with the offline/local model: ct2 = CTranslate2, converted once into the user "
                        "cache (int8 on the CPU, float16 on CUDA; several times faster), torch = transformers' "
                        "generate; default ct2 (or $DPKPS_ENGINE), torch with a one-line note when ct2 cannot run "
                        "the model")
    g.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, metavar="N",
                   help="prompts written together in one batched call by the offline/local model (1 = one at a time; "
                        "each finished document is still saved at once)")
    g.add_argument("--base-url", metavar="URL", default=None,
                   help="server base URL for --backend openai, e.g. http://127.0.0.1:8000/v1 (default: OpenAI)")
    g.add_argument("--model", metavar="NAME", default=None,
                   help="model name for --backend openai (required with --base-url; default gpt-4o-mini on OpenAI)")
    g.add_argument("--api-key-env", metavar="VAR", default=None,
                   help=f"environment variable holding the API key; None = the backend's own ({_key_envs()}). The "
                        "key is never written or printed; local servers may need none")
    g.add_argument("--doc-type", required=True, metavar="TEXT",
                   help='document type with its article, e.g. "a medical record" or "a news article"')
    g.add_argument("--template", metavar="TEXT", default=None,
                   help="custom prompt template with {doc_type} and {keyphrases} (and {label}, unless "
                        "--no-class-names)")
    g.add_argument("--few-shot", metavar="FILE", default=None,
                   help="PUBLIC example documents (.csv/.jsonl with a 'text' and optional 'keyphrases' column, or "
                        ".txt with blank-line-separated examples); never the private corpus")
    g.add_argument("--few-shot-count", type=int, default=6, metavar="N", help="most few-shot examples to use")
    g.add_argument("--private-corpus", metavar="FILE", default=None,
                   help="the private corpus file, so that a few-shot file identical to it is refused (also read "
                        "from run_config.json when present)")
    names = g.add_mutually_exclusive_group()
    names.add_argument("--class-names", "--include-labels", dest="include_labels", action="store_true",
                       default=True,
                       help="put each sequence's class name in its prompt (the default: the declared class names "
                            "are public and released with the data)")
    names.add_argument("--no-class-names", dest="include_labels", action="store_false",
                       help="leave the class names out of the prompts")
    g.add_argument("--drafts", type=int, default=DEFAULT_DRAFTS, metavar="K",
                   help="drafts written per sequence; the one that best fits its sequence is kept (passes the "
                        "non-document screen, assigned to its class by a classifier trained only on the DP "
                        "sequences, uses the most keyphrases) — post-processing, no privacy cost; K times the "
                        "prompts (the others are kept in audit_log.jsonl)")
    g.add_argument("--concurrency", type=int, default=4, metavar="N",
                   help="requests in flight for remote backends (the offline backend runs one at a time)")
    g.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds one request may take")
    g.add_argument("--retries", type=int, default=4, metavar="N",
                   help="retries per document on rate limits, server errors, timeouts, connection errors and "
                        "empty or malformed replies (exponential backoff with jitter)")
    g.add_argument("--backoff-base", type=float, default=1.0, metavar="S",
                   help="first retry delay in seconds (doubles each retry, randomised, at most 30 s)")
    _add_decoding_args(g)
    g.add_argument("--limit", type=int, default=None, metavar="N", help="only the first N sequences")
    g.add_argument("--estimate-only", action="store_true",
                   help="print the token, cost and time estimate and the first prompt, then stop (no LLM call)")
    g.add_argument("--price-per-1k", type=float, default=None, metavar="P",
                   help="price per 1,000 tokens (prompt + completion) for the cost estimate")
    g.add_argument("--out", metavar="DIR", default=None, help="run folder to write into (default: the sequences' folder)")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    g.set_defaults(func=cmd_generate)

    e = subparsers.add_parser(
        "export",
        help="package the release bundle (ZIP and/or folder)",
        description=(
            "Build the release bundle from an allowlist of run-folder files: synthetic documents (CSV, JSONL, "
            "Parquet), sequences, privacy report (JSON + Markdown), run configuration, private vocabulary, prompt "
            "audit log. Never private text, split.json, evaluation.json or API keys."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    e.add_argument("--run", required=True, metavar="DIR", help="the run folder")
    e.add_argument("--zip", required=True, metavar="FILE", help="ZIP file to write")
    e.add_argument("--folder", metavar="DIR2", default=None, help="also write the same files into this folder")
    e.set_defaults(func=cmd_export)


def _private_corpus_hints(run_dir: Path) -> tuple[str | None, list[str]]:
    """Private corpus path / fingerprint recorded by the sampling step (the run folder owns the keys)."""
    return RunFolder(run_dir).private_corpus_hints()


def _private_texts(private_corpus: str | None, *run_dirs: Path) -> list[str] | None:
    """The private documents few-shot examples are checked against, on this machine (docs/DESIGN.md §2.5): those of
    ``--private-corpus``, else of the corpus the run was sampled from (``run_config.json``: its local path or demo
    spec, with its text and label columns). None when no corpus is known."""
    from dpkps_core.method.config import load_limits_of
    from dpkps_core.corpus import load_corpus_spec
    from dpkps_core.errors import DPKPSError

    cfg: dict[str, Any] = {}
    for d in run_dirs:
        try:
            cfg = RunFolder(d).read_config() or {}
        except (OSError, ValueError):
            cfg = {}
        if cfg:
            break
    spec = private_corpus or cfg.get("corpus_path") or cfg.get("corpus")
    if not isinstance(spec, str) or not spec:
        return None
    try:
        corpus = load_corpus_spec(spec, text_column=cfg.get("text_column"), label_column=cfg.get("label_column"),
                                  **load_limits_of(cfg))  # the run's own size limits (corpus/limits.py)
    except DPKPSError:
        if private_corpus:
            raise
        return None
    return list(corpus.texts)


def _generation_settings(args: argparse.Namespace, *, local: bool) -> Any:
    """The run's public generation settings from the command line (refusals on the options come first)."""
    from dpkps_core.llm import GenerationSettings

    takes_folder = "model_path" in backend_spec(args.backend).settings
    if args.model_path and not takes_folder:
        folders = [k for k in backend_kinds() if "model_path" in backend_spec(k).settings]
        raise ParameterError(f"--model-path is for --backend {' or '.join(folders)}.")
    if takes_folder and not args.model_path:
        raise ParameterError(f"--backend {args.backend} needs --model-path DIR (a Hugging Face model folder on disk).")
    ngram, penalty = args.no_repeat_ngram, args.repetition_penalty
    if not local and (ngram, penalty) != (DEFAULT_NO_REPEAT_NGRAM, DEFAULT_REPETITION_PENALTY):
        print("note: --no-repeat-ngram and --repetition-penalty apply to the models that run here; --backend "
              f"{args.backend} ignores them.", file=sys.stderr)
    return GenerationSettings(
        max_tokens=args.max_tokens or (256 if local else 512), temperature=args.temperature, timeout=args.timeout,
        retries=args.retries, concurrency=args.concurrency, backoff_base=args.backoff_base,
        backoff_max=max(30.0, args.backoff_base), limit=args.limit, batch_size=args.batch_size,
        drafts=args.drafts, no_repeat_ngram=ngram, repetition_penalty=penalty,
    )


def _few_shot(args: argparse.Namespace, seq_path: Path, out: Path) -> tuple[Any, ...]:
    """The PUBLIC few-shot examples (docs/DESIGN.md §2.5), refused when they are the private corpus or hold its documents."""
    from dpkps_core.llm import load_few_shot
    from dpkps_core.llm.prompts import check_not_private

    if not args.few_shot:
        if args.private_corpus:
            raise ParameterError("--private-corpus is only used to check --few-shot; give --few-shot too or leave it "
                                 "out.")
        return ()
    hint_path, hint_hashes = _private_corpus_hints(seq_path.parent)
    if out != seq_path.parent:
        p2, h2 = _private_corpus_hints(out)
        hint_path, hint_hashes = hint_path or p2, hint_hashes + h2
    for candidate in (args.private_corpus, hint_path):
        if candidate:
            check_not_private(args.few_shot, private_corpus_path=candidate, private_fingerprints=hint_hashes)
    private_texts = _private_texts(args.private_corpus, seq_path.parent, out)
    if private_texts is None:
        print("warning: the few-shot examples could not be checked against the private corpus's documents (no "
              "corpus known for this run); give --private-corpus FILE", file=sys.stderr)
    return load_few_shot(args.few_shot, private_fingerprints=hint_hashes, max_examples=args.few_shot_count,
                         private_texts=private_texts)


def _sigint_cancels(cancel: threading.Event) -> Any:
    """Ctrl-C sets ``cancel`` (requests in flight finish; a second Ctrl-C stops now); returns the previous handler
    to restore (None off the main thread, where signals cannot be handled)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def _on_sigint(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        print("\ncancelling: finishing the requests in flight (Ctrl-C again to stop now)…", file=sys.stderr)

    return signal.signal(signal.SIGINT, _on_sigint)


def _progress_bar(total: int, *, quiet: bool) -> tuple[Any, Callable[[Any], None]]:
    """A tqdm bar on stderr (None when ``quiet``) and the progress callback that moves it."""
    bar = None
    if not quiet:
        from tqdm import tqdm

        # the time left is the runner's ETA (this run's measured speed, retries included), not tqdm's items/s
        bar = tqdm(total=total, unit="doc", desc="generate", file=sys.stderr, dynamic_ncols=True,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")

    def on_progress(p: Any) -> None:
        if bar is None:
            return
        bar.n = p.done + p.failed
        left = {"left": format_duration(p.eta_s)} if p.eta_s is not None else {}
        if p.in_flight:
            bar.set_postfix(failed=p.failed, batch=f"{p.in_flight} docs, {p.in_flight_fraction:.0%} of tokens",
                            **left, refresh=False)
        else:
            bar.set_postfix(failed=p.failed, **left, refresh=False)
        bar.refresh()

    return bar, on_progress


def _report_summary(summary: Any, out: Path) -> int:
    """Print what the run wrote, and return the documented exit status: 0, 130 when cancelled, 1 when documents
    failed after every retry."""
    print(
        f"{summary.done}/{summary.total} documents in {out / 'documents.jsonl'} "
        f"({summary.written} new, {summary.already_done} from before), {summary.failed} failed",
        file=sys.stderr,
    )
    if summary.failed:  # replies that never became a document, after every retry (docs/ARCHITECTURE.md, llm/quality)
        from dpkps_core.llm import read_failures
        from dpkps_core.llm.quality import is_non_document_failure

        bad = sum(1 for f in read_failures(out) if is_non_document_failure(f.get("error", "")))
        attempted = summary.done + summary.failed
        if bad:
            print(f"non-documents: {bad} of {attempted} item(s) ({bad / attempted:.0%}) got only replies that were not "
                  "documents (a request for input, a bare preamble, a repetition loop)", file=sys.stderr)
    if summary.cancelled:
        print("cancelled: re-run the same command to continue.", file=sys.stderr)
        return 130
    if summary.failed:
        print(
            f"error: {summary.failed} document(s) failed; see {out / 'generation_failures.jsonl'} and re-run to retry.",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    """Run the LLM writing step."""
    from dpkps_core.llm import PromptConfig, estimate_cost, make_backend, preview, read_sequences, run_generation
    from dpkps_core.llm.prompts import DEFAULT_TEMPLATE

    seq_path = check_input_path(args.sequences, "--sequences", kind="file")
    out = check_output_dir(args.out or seq_path.parent, "--out")
    check_input_path(args.few_shot, "--few-shot", kind="file")
    check_input_path(args.private_corpus, "--private-corpus", kind="any")
    check_input_path(args.model_path, "--model-path", kind="folder")
    sequences = read_sequences(seq_path)
    local = backend_spec(args.backend).runs_here  # the model runs here: device, engine, threads, batches
    if args.threads is None:
        args.threads = default_threads()
    settings = _generation_settings(args, local=local)
    config = PromptConfig(
        doc_type=args.doc_type, template=args.template or DEFAULT_TEMPLATE, few_shot=_few_shot(args, seq_path, out),
        include_label=bool(args.include_labels),
    )
    backend = make_backend(
        args.backend, model=args.model, base_url=args.base_url, api_key_env=args.api_key_env,
        timeout=args.timeout, concurrency=args.concurrency, threads=args.threads,
        device=args.device if local else None, model_path=args.model_path,
        engine=args.engine if local else None,
    )
    if local and getattr(backend, "engine_note", None):
        print(backend.engine_note, file=sys.stderr)
    job = sequences[: settings.limit] if settings.limit else sequences
    est = estimate_cost(  # K drafts: K prompts per sequence; retries at the measured rejection rate (llm/speed.py)
        [s for s in job for _ in range(settings.drafts)], prompt_config=config, backend=backend,
        max_tokens=settings.max_tokens, concurrency=settings.concurrency, price_per_1k=args.price_per_1k, batch_size=settings.batch_size,
        retries=settings.retries, temperature=settings.temperature, drafts=settings.drafts, timeout=settings.timeout,
        repetition=settings.repetition_kwargs(),
    )
    print(f"estimate: {est.summary()}", file=sys.stderr)
    print("class names in the prompt: " + ("yes (public; --no-class-names leaves them out)" if config.include_label
                                            else "no (--no-class-names)")
          + (f"; best of {settings.drafts} drafts per sequence" if settings.drafts > 1 else ""), file=sys.stderr)
    if local:
        engine = backend.describe().get("engine") or {"engine": "torch"}
        kind = engine["engine"] + (f" {engine['compute_type']}" if engine.get("compute_type") else "")
        print(f"model: {backend.model} on {backend.device}, {settings.batch_size} prompt(s) per batch, "
              f"{args.threads} thread(s), engine {kind}; repetition control: no-repeat n-gram "
              f"{settings.no_repeat_ngram or 'off'}, penalty {settings.repetition_penalty:g}", file=sys.stderr)
    if args.estimate_only:
        print("first prompt:\n" + preview(job[0], config))
        return 0
    cancel = threading.Event()
    previous = _sigint_cancels(cancel)
    bar, on_progress = _progress_bar(len(job), quiet=args.quiet)
    try:
        summary = run_generation(
            sequences, backend=backend, prompt_config=config, run_dir=out, settings=settings,
            progress=on_progress, cancel=cancel,
        )
    finally:
        if bar is not None:
            bar.close()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        backend.close()
    return _report_summary(summary, out)


def cmd_export(args: argparse.Namespace) -> int:
    """Write the release bundle."""
    from dpkps_core.dossier.export import build_bundle

    check_input_path(args.run, "--run", kind="folder")
    check_output_file(args.zip, "--zip")
    check_output_dir(args.folder, "--folder")
    secrets = [os.environ[v] for v in api_key_envs() if os.environ.get(v)]  # every registered backend's key
    manifest = build_bundle(args.run, out_zip=args.zip, out_dir=args.folder, secrets=secrets)
    where = args.zip + (f" and {args.folder}" if args.folder else "")
    print(f"wrote {len(manifest.files)} files to {where}", file=sys.stderr)
    for f in manifest.files:
        print(f"{f.sha256}  {f.name}")
    return 0
