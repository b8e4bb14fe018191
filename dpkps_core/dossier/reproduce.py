"""How to re-run a release's DP steps (issue 34 §3): ``reproduce_config.json`` + ``reproduce.md`` for the bundle.

``reproduce_config.json`` is a flat JSON object of :class:`~dpkps_core.method.config.SamplingConfig`'s public fields, which
``python -m dpkps_core sample --config FILE`` reads back through :func:`~dpkps_core.method.config.build_sampling_config`
(:func:`read_config_file`). The private corpus is a placeholder only (:data:`CORPUS_PLACEHOLDER`): its file name,
path, column names and fingerprint are private (docs/PRIVACY.md) and are given on the command line by whoever holds
the corpus. The public inputs are named with their SHA-256 where the run recorded one (a user vocabulary file),
the way OpenDP's dp-wizard ships generated code with its results.
"""

from __future__ import annotations

import json
import shlex
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
    from dpkps_core.method.config import SETTING_NAMES

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


_OPENAI_DEFAULT_URL = "https://api.openai.com/v1"


def generate_command(generation: Mapping[str, Any]) -> str:
    """The ``generate`` command line with the LLM settings the run's prompts were sent with (audit log): backend,
    model, document type, template, class names, few-shot file (a placeholder), decoding settings. Post-processing:
    it costs no ε, but the documents differ from run to run wherever the temperature is above 0."""
    from dpkps_core.llm.factory import backend_kinds, backend_spec
    from dpkps_core.llm.prompts import DEFAULT_TEMPLATE

    backend = str(generation.get("backend") or "")
    if backend not in backend_kinds():  # `generate --backend` offers the registered kinds
        return (f"# the documents were written by the backend {backend!r}, which `generate` does not offer: "
                "write them again with it, with the prompt shown in the dossier")
    spec = backend_spec(backend)
    q = shlex.quote
    parts = ["python -m dpkps_core generate --sequences <NEW_RUN_FOLDER>/sequences.jsonl --backend", backend]
    models = list(generation.get("models") or [])
    if "model_path" in spec.settings:
        parts += ["--model-path", "<MODEL_FOLDER>"]  # a folder on the writer's machine: the dossier names the model
    if "model" in spec.settings:
        parts += ["--model", q(models[-1])] if models else []
    if "base_url" in spec.settings:
        url = str(generation.get("base_url") or "")
        parts += ["--base-url", q(url)] if url and url != _OPENAI_DEFAULT_URL else []
    parts += ["--doc-type", q(str(generation.get("document_type") or "a document"))]
    template = str(generation.get("template") or "")
    if template and template != DEFAULT_TEMPLATE:
        parts += ["--template", q(template)]
    parts.append("--class-names" if generation.get("class_names_in_prompts") else "--no-class-names")
    if int(generation.get("few_shot_examples") or 0) > 0:
        parts += ["--few-shot", "<PUBLIC_FEW_SHOT_FILE>", "--few-shot-count", str(generation["few_shot_examples"])]
    params = dict(generation.get("parameters") or {})
    if spec.runs_here:  # repetition control is the local models'; absent from the log = it was off
        params.setdefault("no_repeat_ngram", 0)
        params.setdefault("repetition_penalty", 1.0)
    else:
        params.pop("batch_size", None)
    for key in ("max_tokens", "temperature", "drafts", "batch_size", "no_repeat_ngram", "repetition_penalty"):
        if params.get(key) is not None:
            parts += [f"--{key.replace('_', '-')}", f"{params[key]:g}" if isinstance(params[key], float)
                      else str(params[key])]
    return " ".join(parts + ["--out", "<NEW_RUN_FOLDER>"])


def command_lines(config: Mapping[str, Any], *, person_unit: bool, generation: Mapping[str, Any] | None = None
                  ) -> list[str]:
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
    if generation:
        lines.append(generate_command(generation))
    lines.append("python -m dpkps_core report --run <NEW_RUN_FOLDER>")
    return lines


def reproduce_markdown(config: Mapping[str, Any], *, public_inputs: list[Mapping[str, str]], person_unit: bool,
                       generation: Mapping[str, Any] | None, seeded: bool) -> str:
    """``reproduce.md``: what to run, with which public inputs (SHA-256), and what a re-run costs."""
    lines = ["# How to re-run this release's DP steps", "",
             "1. Put `reproduce_config.json` (this bundle) in a working folder.",
             f"2. Replace `{CORPUS_PLACEHOLDER}` and the `<…>` column placeholders with YOUR private corpus file and "
             "its columns (they are private and were never part of this bundle).", "3. Run:", "", "```sh"]
    lines += command_lines(config, person_unit=person_unit, generation=generation)
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
    """A :class:`~dpkps_core.method.config.SamplingConfig` from a config file (``sample --config``): a JSON object of
    SamplingConfig fields (:data:`META_KEYS` ignored, an unknown key refused), with ``overrides`` (the corpus
    options given on the command line; None = not given) over it, built by ``build_sampling_config``."""
    from dpkps_core.method.config import SETTING_NAMES, build_sampling_config

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
