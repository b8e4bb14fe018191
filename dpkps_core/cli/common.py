"""What several commands share: the corpus, privacy and method options of a sampling run, the declared
public class names, and the :class:`~dpkps_core.method.config.SamplingConfig` built from them."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

from dpkps_core.cli.options import add_setting_options, names_in_group, settings_from_args
from dpkps_core.method.config import CORPUS, METHOD, PRIVACY, VOCABULARY, SamplingConfig, build_sampling_config
from dpkps_core.corpus import ENCODINGS, check_class_names
from dpkps_core.corpus.limits import (DEFAULT_MAX_BYTES, DEFAULT_MAX_DOCUMENTS, ENV_MAX_BYTES, ENV_MAX_DOCUMENTS,
                                     parse_limit)
from dpkps_core.errors import ParameterError


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
    """Options shared by ``sample`` and the commands that run sampling (sweep, forecast…): each setting's option is
    generated from :class:`SamplingConfig`'s field metadata (:mod:`dpkps_core.cli.options`); the columns, the class
    names, the encoding and the load limits keep their own parsing, and ``--paper-settings`` is not a setting but a
    preset."""
    g = p.add_argument_group(CORPUS)
    add_setting_options(g, ["corpus"])
    add_file_arguments(g)
    add_setting_options(g, names_in_group(CORPUS)[1:])
    add_setting_options(p.add_argument_group(VOCABULARY), names_in_group(VOCABULARY))
    add_setting_options(p.add_argument_group(PRIVACY), names_in_group(PRIVACY))
    g = p.add_argument_group(METHOD)
    method = names_in_group(METHOD)
    add_setting_options(g, method[:2])
    g.add_argument("--paper-settings", action="store_true", help="the DP-KPS paper's configuration (RFF, σ = 1, "
                   "I = 2000, no junk filter) for comparisons")
    add_setting_options(g, method[2:])


def config_from_args(args: argparse.Namespace) -> SamplingConfig:
    """The run's :class:`SamplingConfig` from the sampling options, through the one builder
    (:func:`~dpkps_core.method.config.build_sampling_config`; checked once, before anything is loaded or charged)."""
    return build_sampling_config(
        **settings_from_args(args), text_column=args.text_column, label_column=args.label_column,
        classes=parse_classes(args.classes, args.classes_file), paper_settings=bool(args.paper_settings),
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


def open_streamed_corpus(config: SamplingConfig, progress: Any = None) -> Any:
    """The corpus FILE (or folder of parts) a sampling configuration names, read in chunks and never held whole
    (issue 31; :class:`~dpkps_core.method.training_source.StreamedCorpus`): its columns, encoding and limits from
    ``config``, prepared by one pass (split, units, training part of the declared classes). Refuses locally,
    before anything is spent, a missing file or undeclared classes. ``demo:`` corpora are loaded, not streamed."""
    from dpkps_core.method.config import load_limits_of
    from dpkps_core.corpus.stream import CorpusStream
    from dpkps_core.errors import CorpusError
    from dpkps_core.method.training_source import StreamedCorpus

    if not Path(config.corpus).exists():
        raise CorpusError(f"The corpus file {config.corpus!r} does not exist.")
    stream = CorpusStream(config.corpus, text_column=config.text_column, label_column=config.label_column,
                          person_column=config.person_column, encoding=config.encoding, **load_limits_of(config))
    return StreamedCorpus.open(stream, config, progress=progress)
