"""What several commands share: the corpus, privacy and method options of a sampling run, the declared
public class names, and the :class:`~dpkps_core.config.SamplingConfig` built from them."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from dpkps_core.config import DEFAULT_EPSILON_CAP, DENSITIES, SamplingConfig, build_sampling_config
from dpkps_core.corpus import ENCODINGS, check_class_names
from dpkps_core.corpus.limits import (DEFAULT_MAX_BYTES, DEFAULT_MAX_DOCUMENTS, ENV_MAX_BYTES, ENV_MAX_DOCUMENTS,
                                     parse_limit)
from dpkps_core.dp.rng import SAMPLERS
from dpkps_core.embeddings import DEFAULT_MODEL, EMBEDDING_MODELS
from dpkps_core.errors import ParameterError
from dpkps_core.sampling import SAMPLING_METHODS


def add_class_arguments(g: argparse._ArgumentGroup) -> None:
    """``--classes`` / ``--classes-file``: the declared public class names (every command that releases)."""
    g.add_argument("--classes", help="the PUBLIC class names, comma-separated (required for your own corpus; demo "
                   "corpora carry theirs). Documents with other labels enter no DP step; a listed class without "
                   "documents still gets a (noise-only) density")
    g.add_argument("--classes-file", help="a UTF-8 file with one public class name per line (instead of --classes)")


def parse_classes(value: str | None, file: str | None) -> tuple[str, ...] | None:
    """``--classes a,b,c`` or ``--classes-file FILE`` (one public class name per line) → the declared list."""
    if value and file:
        raise ParameterError("Give the public class names either with --classes or with --classes-file, not both.")
    if file:
        path = Path(file)
        if not path.is_file():
            raise ParameterError(f"The class list file {file!r} does not exist.")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError as exc:
            raise ParameterError(f"The class list file {file!r} is not UTF-8 text; save it as UTF-8.") from exc
        return check_class_names([ln.strip() for ln in lines if ln.strip()])
    return None if not value else check_class_names(value)


def add_encoding_argument(g: Any) -> None:
    """``--encoding`` of a corpus file: every command that reads a corpus takes it (the loader's error names it)."""
    g.add_argument("--encoding", choices=ENCODINGS, default=SamplingConfig().encoding,
                   help="text encoding of a corpus FILE: the whole file is decoded with it (never guessed); "
                        "latin-1 or cp1252 for files saved in a Western European encoding (default %(default)s)")


def _limit_option(name: str, *, sizes: bool) -> Any:
    """An argparse ``type`` for a limit option: a whole number (with ``sizes`` also 640MB, 4GB), ``0`` or ``none``
    = no limit (returned as 0); a bad value is argparse's one-line usage error naming the option."""

    def parse(value: str) -> int:
        try:
            return parse_limit(value, name=name, sizes=sizes) or 0
        except ParameterError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name  # argparse names the type in its message
    return parse


def add_limit_arguments(g: Any) -> None:
    """``--max-corpus-bytes`` / ``--max-documents``: the loader's size limits (:mod:`dpkps_core.corpus.limits`);
    left out, the deployment's defaults apply (the options' value is then None)."""
    g.add_argument("--max-corpus-bytes", type=_limit_option("--max-corpus-bytes", sizes=True), default=None,
                   metavar="SIZE", help=f"refuse a corpus file (folder: all its files) larger than this, e.g. 4GB; "
                   f"0 or none = no limit (default: ${ENV_MAX_BYTES} if set, else {DEFAULT_MAX_BYTES // 2**20} MB)")
    g.add_argument("--max-documents", type=_limit_option("--max-documents", sizes=False), default=None,
                   metavar="N", help=f"refuse a corpus of more rows (.txt files) than this; 0 or none = no limit "
                   f"(default: ${ENV_MAX_DOCUMENTS} if set, else {DEFAULT_MAX_DOCUMENTS:,})")


def limits_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The loader's limit arguments (``max_bytes``, ``max_documents``) the options set; an option left out is not
    passed, so the deployment's default applies (:class:`~dpkps_core.corpus.limits.LoadLimits`)."""
    out: dict[str, Any] = {}
    if getattr(args, "max_corpus_bytes", None) is not None:
        out["max_bytes"] = args.max_corpus_bytes
    if getattr(args, "max_documents", None) is not None:
        out["max_documents"] = args.max_documents
    return out


def add_file_arguments(g: Any) -> None:
    """How a corpus file is read — its text and label columns, the declared class names, its encoding, the
    loader's size limits — the same options in every command that loads a corpus."""
    g.add_argument("--text-column", help="column holding the document text (when omitted: chosen from the column "
                   "NAMES only — text, document, notes, body, review… — and asked for when no name or several fit)")
    g.add_argument("--label-column", help="column holding the class label (when omitted: chosen from the column "
                   "NAMES only — label, class, category, target, specialty, topic…)")
    add_class_arguments(g)
    add_encoding_argument(g)
    add_limit_arguments(g)


def add_sampling_arguments(p: argparse.ArgumentParser) -> None:
    """Options shared by ``sample`` and the commands that run sampling (sweep, forecast…)."""
    d = SamplingConfig()
    g = p.add_argument_group("corpus (private)")
    g.add_argument("--corpus", default=d.corpus, help="demo:bbc (default), demo:drugs, demo:drugs-rating, or a path "
                   "to CSV/TSV/JSONL/Parquet/ZIP of .txt/folder of class sub-folders")
    add_file_arguments(g)
    g.add_argument("--person-column", help="unit of privacy = one PERSON: the column identifying whom each document "
                   "is about (ids stay private; every mechanism bounds each person's total contribution; the split "
                   "keeps a person's documents together). demo:drugs has 'drug' as a documented synthetic person")
    g.add_argument("--test-fraction", type=float, default=d.test_fraction,
                   help="share of documents held out for evaluation (each assigned on its own by a keyed hash of its "
                        "text; never touched by a DP step) (default %(default)s)")
    g.add_argument("--client-fraction", type=float, default=d.client_fraction,
                   help="share of the held-out part set aside as unlabelled client data for Deep CORAL (default %(default)s)")
    g.add_argument("--split-seed", type=int, default=d.split_seed, help="public seed of the hash split (default %(default)s)")
    g = p.add_argument_group("public vocabulary")
    g.add_argument("--vocabulary", default=d.vocabulary, help="glove (default), wordfreq, medical, or a path to a "
                   "UTF-8 file with one term per line")
    g.add_argument("--keep-stopwords", action="store_true", help="do not remove English stop words from V")
    g.add_argument("--no-junk-filter", action="store_true", help="keep terms without letters or with digits inside")
    g.add_argument("--vocab-max-terms", type=int, default=d.vocab_max_terms,
                   help="keep only the K most frequent terms of a frequency-ordered V (glove, wordfreq); 0 = all "
                        "(default %(default)s, chosen by measurement: docs/DEFAULTS.md)")
    g = p.add_argument_group("privacy")
    g.add_argument("--eps-voc", type=float, default=d.eps_voc, help="ε for the private vocabulary (default %(default)s)")
    g.add_argument("--eps-kde", type=float, default=d.eps_kde, help="ε for the per-class densities (default %(default)s)")
    g.add_argument("--epsilon-cap", type=float, default=DEFAULT_EPSILON_CAP,
                   help="cap on the total ε any one document (person) may spend over ALL releases, app and CLI "
                        "(default %(default)s, the app's too): documents new to the persistent ledger get it, and a "
                        "run whose own ε would exceed it is refused; documents already in the ledger keep their cap "
                        "(change it with `ledger --corpus … --epsilon-cap`)")
    g.add_argument("--seed", type=int, default=None, help="REPRODUCIBLE DEMO ONLY: seed all noise (not for release); "
                   "default: OS entropy")
    g.add_argument("--noise-sampler", choices=SAMPLERS, default=d.noise_sampler,
                   help="opendp: OpenDP's vetted samplers for every noisy release (default); numpy: NumPy's faster "
                        "floating-point samplers. A --seed always uses NumPy (OpenDP cannot be seeded)")
    g = p.add_argument_group("method")
    g.add_argument("--method", choices=SAMPLING_METHODS, default=d.method, help="sequence sampler (default %(default)s)")
    g.add_argument("--density", choices=DENSITIES, default=d.density, help="auto: exact smoothed DP histogram for "
                   "independent, RFF DP-KDE for iterative; rff: the paper's RFF DP-KDE")
    g.add_argument("--paper-settings", action="store_true", help="the DP-KPS paper's configuration (RFF, σ = 1, "
                   "I = 2000, no junk filter) for comparisons")
    g.add_argument("--length", "-L", type=int, default=d.length, help="keyphrases per sequence L (default %(default)s)")
    g.add_argument("--per-class", "-K", type=int, default=d.per_class, help="sequences per class (default %(default)s)")
    g.add_argument("--vocab-size", "-N", type=int, default=d.vocab_size, help="private vocabulary size N (default %(default)s)")
    g.add_argument("--terms-per-doc", "-S", type=int, default=d.terms_per_doc,
                   help="distinct terms counted per document S = sensitivity of the vocabulary histogram (default %(default)s)")
    g.add_argument("--selection-rule", choices=("top-n", "noise-floor"), default=d.selection_rule,
                   help="how Ṽ is cut from the noisy counts (default %(default)s)")
    g.add_argument("--features", "-I", type=int, default=None, help="random features I (RFF only; default: auto ≈ n_c·ε/2)")
    g.add_argument("--bandwidth", type=float, default=None, help="kernel bandwidth σ (default: auto from Ṽ's embeddings)")
    g.add_argument("--temperature", type=float, default=d.temperature, help="sampling temperature T (0 = argmax)")
    g.add_argument("--max-keyphrases", type=int, default=None, help="keyphrases kept per document M (default L)")
    g.add_argument("--class-size-estimate", type=float, default=None,
                   help="your estimate of documents per class, used to choose I (default: DP estimate)")
    g.add_argument("--embedding-model", choices=tuple(EMBEDDING_MODELS), default=DEFAULT_MODEL,
                   help="public embedding model (default %(default)s)")


def config_from_args(args: argparse.Namespace) -> SamplingConfig:
    """The run's :class:`SamplingConfig` from the sampling options, through the one builder
    (:func:`~dpkps_core.config.build_sampling_config`; checked once, before anything is loaded or charged)."""
    return build_sampling_config(
        corpus=args.corpus, text_column=args.text_column, label_column=args.label_column,
        vocabulary=args.vocabulary, remove_stopwords=not args.keep_stopwords, junk_filter=not args.no_junk_filter,
        vocab_max_terms=args.vocab_max_terms, eps_voc=args.eps_voc, eps_kde=args.eps_kde, method=args.method,
        density=args.density, length=args.length, per_class=args.per_class, vocab_size=args.vocab_size,
        terms_per_doc=args.terms_per_doc, selection_rule=args.selection_rule, features=args.features,
        bandwidth=args.bandwidth, temperature=args.temperature, max_keyphrases_per_doc=args.max_keyphrases,
        class_size_estimate=args.class_size_estimate, embedding_model=args.embedding_model, seed=args.seed,
        noise_sampler=getattr(args, "noise_sampler", SamplingConfig.noise_sampler),
        test_fraction=args.test_fraction, client_fraction=args.client_fraction, split_seed=args.split_seed,
        epsilon_cap=args.epsilon_cap, classes=parse_classes(args.classes, args.classes_file),
        person_column=args.person_column, paper_settings=bool(args.paper_settings),
        encoding=getattr(args, "encoding", SamplingConfig.encoding),
        max_corpus_bytes=getattr(args, "max_corpus_bytes", None), max_documents=getattr(args, "max_documents", None),
    )


# ------------------------------------------------------------------------------------------------ paths
# Every command checks its paths before it loads a model, reads the corpus or charges ε, so that a bad path is
# one line on stderr with exit status 2 (cli/main.py), never a traceback and never after ε was spent.


def _probe_writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (tried for real: permission bits say nothing for root or on
    read-only or special file systems)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _nearest_parent(path: Path) -> Path:
    parent = path.parent
    return parent if str(parent) else Path(".")


def check_output_dir(value: str | os.PathLike[str] | None, option: str) -> Path | None:
    """An output folder option (``--out DIR``): an existing writable folder, or a new one whose parent is an
    existing writable folder. ``None`` (option not given) passes through."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise ParameterError(f"{option} {str(value)!r} exists and is a file, not a folder; choose a folder path.")
    if path.is_dir():
        if not _probe_writable(path):
            raise ParameterError(f"{option} {str(value)!r} is not writable; choose a folder you can write to.")
        return path
    parent = _nearest_parent(path)
    if not parent.is_dir():
        raise ParameterError(f"{option} {str(value)!r}: the parent folder {str(parent)!r} does not exist; create it "
                             "first or choose another path.")
    if not _probe_writable(parent):
        raise ParameterError(f"{option} {str(value)!r} cannot be created: the folder {str(parent)!r} is not "
                             "writable.")
    return path


def check_output_file(value: str | os.PathLike[str] | None, option: str) -> Path | None:
    """An output file option (``--zip FILE``): not a folder; its parent folder exists and is writable (an existing
    file is replaced atomically)."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if path.is_dir():
        raise ParameterError(f"{option} {str(value)!r} is a folder; give a file name.")
    parent = _nearest_parent(path)
    if not parent.is_dir():
        raise ParameterError(f"{option} {str(value)!r}: the parent folder {str(parent)!r} does not exist; create it "
                             "first or choose another path.")
    if not _probe_writable(parent):
        raise ParameterError(f"{option} {str(value)!r} cannot be written: the folder {str(parent)!r} is not writable.")
    return path


def check_input_path(value: str | os.PathLike[str] | None, option: str, *, kind: str = "file") -> Path | None:
    """An input option: it must exist and be a ``kind`` ("file", "folder" or "any") that can be read.
    ``demo:…`` corpus specs pass through."""
    if value is None or (isinstance(value, str) and value.startswith("demo:")):
        return None
    path = Path(value).expanduser()
    if not path.exists():
        raise ParameterError(f"{option} {str(value)!r} does not exist; check the path.")
    if kind == "file" and not path.is_file():
        raise ParameterError(f"{option} {str(value)!r} is not a file.")
    if kind == "folder" and not path.is_dir():
        raise ParameterError(f"{option} {str(value)!r} is not a folder.")
    if not os.access(path, os.R_OK):
        raise ParameterError(f"{option} {str(value)!r} is not readable; check its permissions.")
    return path


def os_error_line(exc: OSError) -> str:
    """One line for an operating-system error the commands did not foresee (cli/main.py's guard)."""
    what = exc.strerror or type(exc).__name__
    where = f" {str(exc.filename)!r}" if exc.filename else ""
    return (f"could not use the path{where}: {what}; check the path and its permissions.").replace("\n", " ")
