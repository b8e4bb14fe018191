"""How to re-run a release's DP steps (issue 34 §3): ``reproduce_config.json`` + ``reproduce.md`` for the bundle.

``reproduce_config.json`` is a flat JSON object of :class:`~dpkps_core.config.SamplingConfig`'s public fields, which
``python -m dpkps_core sample --config FILE`` reads back through :func:`~dpkps_core.config.build_sampling_config`
(:func:`read_config_file`). The private corpus is a placeholder only (:data:`CORPUS_PLACEHOLDER`): its file name,
path, column names and fingerprint are private (docs/PRIVACY.md) and are given on the command line by whoever holds
the corpus. The public inputs are named with their SHA-256 where the run recorded one (a user vocabulary file),
the way OpenDP's dp-wizard ships generated code with its results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from dpkps_core.dossier.labels import PRIVATE_PARAMETER_KEYS
from dpkps_core.errors import ParameterError

CORPUS_PLACEHOLDER = "<YOUR_CORPUS.csv>"
#: The options that name the private corpus's columns: placeholders in the commands, never the real names.
COLUMN_PLACEHOLDERS = {"text_column": "<TEXT_COLUMN>", "label_column": "<LABEL_COLUMN>",
                       "person_column": "<PERSON_COLUMN>"}
#: A flat config file may carry these descriptive keys beside the settings (ignored when read).
META_KEYS = ("format", "version", "note")
CONFIG_FORMAT = "dpkps-sampling-config"


def reproduce_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The run's public sampling settings as ``sample --config`` reads them: every SamplingConfig field except the
    corpus's location and columns; a demo corpus keeps its public name, any other is :data:`CORPUS_PLACEHOLDER`."""
    from dpkps_core.config import SETTING_NAMES

    out: dict[str, Any] = {"format": CONFIG_FORMAT, "version": 1,
                           "note": "Public settings of the release; give your private corpus and its columns on "
                                   "the command line (see reproduce.md)."}
    for name in SETTING_NAMES:
        if name in PRIVATE_PARAMETER_KEYS or name not in config:
            continue
        out[name] = config[name]
    spec = str(config.get("corpus") or "")
    out["corpus"] = spec if spec.startswith("demo:") else CORPUS_PLACEHOLDER
    return out


def command_lines(config: Mapping[str, Any], *, person_unit: bool, has_documents: bool) -> list[str]:
    """The exact ``dpkps`` command lines that re-run the DP steps (and the LLM step when the run had one)."""
    demo = str(config.get("corpus") or "").startswith("demo:")
    sample = ["python -m dpkps_core sample --config reproduce_config.json"]
    if not demo:
        sample += ["--corpus", CORPUS_PLACEHOLDER, "--text-column", COLUMN_PLACEHOLDERS["text_column"],
                   "--label-column", COLUMN_PLACEHOLDERS["label_column"]]
        if person_unit:
            sample += ["--person-column", COLUMN_PLACEHOLDERS["person_column"]]
    sample += ["--out", "<NEW_RUN_FOLDER>"]
    lines = [" ".join(sample)]
    if has_documents:
        lines.append("python -m dpkps_core generate --run <NEW_RUN_FOLDER>   # same LLM settings as in the dossier")
    lines.append("python -m dpkps_core report --run <NEW_RUN_FOLDER>")
    return lines


def reproduce_markdown(config: Mapping[str, Any], *, public_inputs: list[Mapping[str, str]], person_unit: bool,
                       has_documents: bool, seeded: bool) -> str:
    """``reproduce.md``: what to run, with which public inputs (SHA-256), and what a re-run costs."""
    lines = ["# How to re-run this release's DP steps", "",
             "1. Put `reproduce_config.json` (this bundle) in a working folder.",
             f"2. Replace `{CORPUS_PLACEHOLDER}` and the `<…>` column placeholders with YOUR private corpus file and "
             "its columns (they are private and were never part of this bundle).", "3. Run:", "", "```sh"]
    lines += command_lines(config, person_unit=person_unit, has_documents=has_documents)
    lines += ["```", "", "## Public inputs", "", "| input | name | SHA-256 | licence |", "|---|---|---|---|"]
    for row in public_inputs:
        cells = [row.get("input", ""), f"`{row.get('name', '')}`", f"`{row['sha256']}`" if row.get("sha256") else
                 "built in (pinned package)", row.get("licence", "")]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    vocab = str(config.get("vocabulary") or "")
    if config.get("vocabulary_sha256"):
        lines += ["", f"The vocabulary file `{vocab}` must be in the working folder or beside your corpus, with the "
                  "SHA-256 above (a file of that name with other content is refused)."]
    lines += ["", "## What a re-run is", ""]
    if seeded:
        lines.append("This run was SEEDED (a reproducible demo, not for release): the same corpus and settings give "
                     "the same outputs byte for byte.")
    else:
        lines.append("This run drew its noise from the operating system's entropy (no seed), as a release must: a "
                     "re-run with the same settings is a NEW release with fresh noise — different outputs of the "
                     "same distribution — and it is charged ε again in your privacy ledger.")
    return "\n".join(lines + [""])


def read_config_file(path: str | Path, **overrides: Any) -> Any:
    """A :class:`~dpkps_core.config.SamplingConfig` from a config file (``sample --config``): a JSON object of
    SamplingConfig fields (:data:`META_KEYS` ignored, an unknown key refused), with ``overrides`` (the corpus
    options given on the command line; None = not given) over it, built by ``build_sampling_config``."""
    from dpkps_core.config import SETTING_NAMES, build_sampling_config

    p = Path(path)
    if not p.is_file():
        raise ParameterError(f"The config file {str(path)!r} does not exist.")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ParameterError(f"The config file {p.name!r} is not a UTF-8 JSON file.") from None
    if not isinstance(data, dict):
        raise ParameterError(f"The config file {p.name!r} must hold a JSON object of sampling settings.")
    unknown = sorted(set(data) - set(SETTING_NAMES) - set(META_KEYS))
    if unknown:
        raise ParameterError(f"The config file {p.name!r} has unknown setting(s) {', '.join(unknown)}.")
    settings = {k: v for k, v in data.items() if k in SETTING_NAMES}
    if isinstance(settings.get("classes"), list):
        settings["classes"] = tuple(settings["classes"])
    settings.update({k: v for k, v in overrides.items() if v is not None})
    if str(settings.get("corpus") or "").startswith("<"):
        raise ParameterError(f"The config file's corpus is the placeholder {settings['corpus']}; give your corpus "
                             "with --corpus FILE.")
    return build_sampling_config(settings)
