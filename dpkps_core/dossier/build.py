"""``build_dossier(run_dir, edition=…)``: the release dossier of one run folder, in two editions (issue 34 §1, §3).

Both editions are built from the run folder ALONE (reopened runs too: nothing comes from a session's memory,
docs/DESIGN.md §2 "a run's report is derived from the events recorded for that run"). The release edition holds DP outputs
and public inputs only (:mod:`dpkps_core.dossier.release`) and goes into the bundle with ``reproduce.md`` and
``reproduce_config.json``; the internal edition adds what was computed on private data
(:mod:`dpkps_core.dossier.internal`) and a decision line from the organisation's policy
(:mod:`dpkps_core.dossier.policy`), and never leaves the machine (the export refuses it by name).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Mapping

from dpkps_core.records import runfolder
from dpkps_core.dossier import internal, release
from dpkps_core.dossier.policy import Policy, as_policy, decide
from dpkps_core.dossier.reproduce import command_lines, reproduce_config, reproduce_markdown
from dpkps_core.errors import DPKPSError

SCHEMA = "dpkps-dossier"
SCHEMA_VERSION = 1
EDITIONS = ("release", "internal")
#: The release edition's files (runfolder owns the names): they go into the bundle.
RELEASE_HTML: str = runfolder.DOSSIER_FILES[0]
RELEASE_JSON: str = runfolder.DOSSIER_FILES[1]
REPRODUCE_MD: str = runfolder.DOSSIER_FILES[2]
REPRODUCE_CONFIG: str = runfolder.DOSSIER_FILES[3]
#: The internal edition's files: PRIVATE, refused by the export by name.
INTERNAL_HTML: str = runfolder.INTERNAL_DOSSIER_FILES[0]
INTERNAL_JSON: str = runfolder.INTERNAL_DOSSIER_FILES[1]
INTERNAL_PDF: str = runfolder.INTERNAL_DOSSIER_FILES[2]
RELEASE_PDF = "dossier.pdf"
#: Private strings shorter than this are not searched for in the release edition (a 3-letter file name would
#: match ordinary words); they are kept out by construction instead.
_MIN_HINT_CHARS = 8


class DossierError(DPKPSError):
    """A dossier could not be built, or its release edition would contain something it must not."""


def software_version() -> str:
    """The installed ``dpkps-studio`` version, else the checkout's pyproject.toml version, else "unknown"."""
    from importlib import metadata

    try:
        return metadata.version("dpkps-studio")
    except metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        import tomllib

        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"]) + " (source checkout)"
    except (OSError, KeyError, ValueError):
        return "unknown"


@dataclasses.dataclass(frozen=True)
class Dossier:
    """One edition of a run's dossier: ``content`` is the versioned JSON (schema :data:`SCHEMA`)."""

    edition: str
    content: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return json.loads(self.to_json())

    def to_json(self) -> str:
        """The machine-readable dossier (UTF-8 JSON, schema ``dpkps-dossier`` version :data:`SCHEMA_VERSION`)."""
        return json.dumps(self.content, indent=2, ensure_ascii=False, default=runfolder.json_default) + "\n"

    def to_html(self) -> str:
        """ONE self-contained HTML file: inline CSS and SVG, no script, no link to load; prints to PDF cleanly."""
        from dpkps_core.dossier.render import render_html

        return render_html(self.content)

    @property
    def reproduce_markdown(self) -> str:
        return str(self.content["reproduce"]["markdown"])

    @property
    def reproduce_config(self) -> dict[str, Any]:
        return dict(self.content["reproduce"]["config"])

    def files(self) -> dict[str, bytes]:
        """The edition's files by name: release → dossier.html/.json, reproduce.md, reproduce_config.json (the
        bundle's); internal → dossier_internal.html/.json (PRIVATE)."""
        if self.edition == "internal":
            return {INTERNAL_HTML: self.to_html().encode("utf-8"), INTERNAL_JSON: self.to_json().encode("utf-8")}
        config = json.dumps(self.reproduce_config, indent=2, ensure_ascii=False) + "\n"
        return {RELEASE_HTML: self.to_html().encode("utf-8"), RELEASE_JSON: self.to_json().encode("utf-8"),
                REPRODUCE_MD: self.reproduce_markdown.encode("utf-8"), REPRODUCE_CONFIG: config.encode("utf-8")}


def _read(path: Path) -> dict[str, Any]:
    """A JSON object of the run folder ({} when absent); a damaged file is a one-sentence DossierError."""
    try:
        data = runfolder.read_json(path) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        raise DossierError(f"{path.name} in the run folder is not valid JSON.") from None
    return data if isinstance(data, dict) else {}


def _release_content(run_dir: Path, *, sample_documents: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(release content, the run's raw config) from the run folder's releasable files."""
    folder = runfolder.RunFolder(run_dir)
    for name in runfolder.RELEASABLE_FILES + runfolder.LOCAL_FILES:  # what a dossier reads: the folder's own files
        if (run_dir / name).is_symlink():
            raise DossierError(f"{name} in the run folder is a symbolic link; a dossier is built only from the run "
                               "folder's own files.")
    report, config = _read(folder.privacy_report), _read(folder.config)
    if not report:
        raise DossierError(f"The run folder {run_dir.name} has no privacy report; run the sampling step first.")
    state = folder.read_state()
    g = release.guarantee(report)
    mech = release.mechanisms(report)
    noise = release.noise_words(report)
    docs, n_docs = release.sample_documents(run_dir, limit=sample_documents)
    n_seq = sum(1 for _ in runfolder.iter_jsonl(folder.sequences))
    vocab = _read(folder.vocabulary)
    public_v = report.get("vocabulary") if isinstance(report.get("vocabulary"), Mapping) else {}
    counts = {"sequences": n_seq, "documents": n_docs,
              "failed_generations": len(runfolder.read_failures(run_dir)),
              "private_vocabulary_terms": len(vocab.get("terms") or []),
              "public_vocabulary_terms": public_v.get("public_size")}
    settings, unlabelled = release.settings(report, config)
    rconfig = config or dict(report.get("parameters") or {})  # the settings, from the report when no config is left
    inputs = release.public_inputs(report, rconfig)
    classes = report.get("classes") or config.get("classes") or []
    person = release.is_person_unit(report)
    gen = release.generation(run_dir)
    content = {
        "run": {"id": release.safe_run_id(run_dir), "created": release.run_created(run_dir),
                "software_version": software_version(), "method": str(report.get("method") or "—"),
                "corpus": release.corpus_words(config, state), "classes": [str(c) for c in classes]},
        "guarantee": g, "mechanisms": mech, "noise": noise, "settings": settings,
        "settings_left_out": unlabelled, "generation": gen, "counts": counts,
        "sample_documents": docs, "public_inputs": inputs,
        "nist_checklist": release.nist_checklist(g, mech, noise, counts),
        "reproduce": {"config": reproduce_config(rconfig),
                      "commands": command_lines(rconfig, person_unit=person, generation=gen),
                      "markdown": reproduce_markdown(rconfig, public_inputs=inputs, person_unit=person,
                                                     generation=gen, seeded=noise["seeded"])},
    }
    return content, {**config, "_state": state}


def _private_hints(config: Mapping[str, Any]) -> list[str]:
    """Strings that name or fingerprint the private corpus, as the run folder recorded them (local only)."""
    hints: list[str] = []
    state = config.get("_state") or {}
    specs = [v for v in (config.get("corpus"), state.get("corpus_spec")) if isinstance(v, str)]
    if any(v.startswith("demo:") for v in specs):  # a public demo corpus: its name is public
        return []
    for value in (config.get("corpus_path"), config.get("corpus"), state.get("corpus_name"), state.get("corpus_spec")):
        if isinstance(value, str) and value:
            hints += [value, Path(value).name, Path(value.split(":", 1)[-1]).name]  # "upload:<file name>" too
    for key in ("corpus_sha256",):
        if isinstance(config.get(key), str):
            hints.append(config[key])
    return [h for h in dict.fromkeys(hints) if len(h) >= _MIN_HINT_CHARS]


def check_release_edition(dossier: Dossier, hints: list[str]) -> None:
    """Fail closed: refuse a release edition whose files contain the private corpus's path, file name or digest."""
    for name, data in dossier.files().items():
        text = data.decode("utf-8")
        for hint in hints:
            if hint in text:
                raise DossierError(f"The release dossier's {name} would contain the private corpus's name or "
                                   "fingerprint; nothing was written.")


def build_dossier(run_dir: str | Path, *, edition: str = "release",
                  policy: Policy | Mapping[str, Any] | str | Path | None = None,
                  sample_documents: int = release.SAMPLE_DOCUMENTS, ledger_view: Any | None = None,
                  run_name: str | None = None) -> Dossier:
    """The dossier of ``run_dir`` in ``edition`` ("release" or "internal"); ``policy`` (internal edition: a
    :class:`Policy`, a mapping or a JSON/TOML file) decides the share line; ``sample_documents`` synthetic documents
    are shown (0 for none). ``ledger_view`` (internal edition only: the run's corpus's
    :class:`~dpkps_core.ledger_store.CorpusView`, PRIVATE) adds the left-out counts of the releases of the run named
    ``run_name`` (default: the folder's name) and the corpus's ε to date per unit; the release edition ignores it."""
    if edition not in EDITIONS:
        raise DossierError(f"Unknown dossier edition {edition!r}; choose release or internal.")
    if isinstance(sample_documents, bool) or not isinstance(sample_documents, int) or not 0 <= sample_documents <= 50:
        raise DossierError("sample_documents must be a whole number from 0 to 50.")
    path = Path(run_dir)
    if not path.is_dir():
        raise DossierError(f"The run folder {path.name} does not exist.")
    content, config = _release_content(path, sample_documents=sample_documents)
    head = {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "edition": edition,
            "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    if edition == "release":
        dossier = Dossier("release", {**head, **content})
        check_release_edition(dossier, _private_hints(config))
        return dossier
    extra = internal.internal_content(path, config, ledger_view=ledger_view, run_name=run_name)
    chosen = as_policy(policy)
    g = content["guarantee"]
    utility = extra["utility"] or {}
    decision = decide(chosen, epsilon_total=g["epsilon_total"], epsilon_cap=g["cap"],
                      seeded=content["noise"]["seeded"], audit=extra.pop("audit_raw"),
                      utility_ratio=(utility.get("ratio") or {}).get("estimate"), disclosure=extra["disclosure"])
    extra["run_folder"] = path.name
    return Dossier("internal", {**head, **content, "internal": extra, "policy": chosen.to_dict(),
                                "decision": decision.to_dict()})
