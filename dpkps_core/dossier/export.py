"""Release bundle: the DP outputs of a run folder as a ZIP (and/or a folder), built from an ALLOWLIST.

Only these run-folder files are ever read for the bundle: ``sequences.jsonl``, ``privacy_report.json``,
``private_vocabulary.json``, ``run_config.json``, ``documents.jsonl``, ``generation_failures.jsonl`` and
``audit_log.jsonl`` (docs/ARCHITECTURE.md). ``split.json``, ``evaluation.json``, the private corpus and any other
file are refused with :class:`~dpkps_core.errors.ExportError`. JSONL records are re-written with allowlisted
fields only, the private file's column names are left out of the report and the configuration, and every output
file is checked for secrets (API keys) before anything is written.

Bundle contents: ``documents.csv`` / ``documents.jsonl`` / ``documents.parquet`` (id, text, label, keyphrases,
model), ``sequences.jsonl``, ``privacy_report.json`` (+ a ``generation`` section), ``privacy_report.md`` (rendered by
:mod:`dpkps_core.records.report_markdown`), ``run_config.json``, ``private_vocabulary.json``, ``audit_log.jsonl``,
``generation_failures.jsonl``, the release dossier (``dossier.html`` / ``dossier.json``, ``reproduce.md``,
``reproduce_config.json``: :mod:`dpkps_core.dossier`) and ``manifest.json`` (sha256 of every other file). The internal
dossier is private (``runfolder.INTERNAL_DOSSIER_FILES``) and refused by name.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import os
import re
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping, Sequence

from dpkps_core.dossier.build import DossierError, build_dossier
from dpkps_core.errors import ExportError
from dpkps_core.records.report_markdown import render_report_markdown
from dpkps_core.records.runfolder import read_documents, read_failures
from dpkps_core.records.runfolder import (
    AUDIT_FILE,
    DOCUMENTS_FILE,
    FAILURES_FILE,
    PRIVACY_REPORT_FILE,
    PRIVATE_FILES,
    RELEASABLE_FILES,
    RUN_CONFIG_FILE,
    SEQUENCES_FILE,
    VOCABULARY_FILE,
    iter_jsonl,
)

#: Run-folder files the bundle may read (the run folder's releasable files). Everything else is refused.
ALLOWED_RUN_FILES: tuple[str, ...] = RELEASABLE_FILES
#: Run-folder files that hold private data: never exported, whatever is asked.
FORBIDDEN_RUN_FILES: tuple[str, ...] = PRIVATE_FILES
REQUIRED_RUN_FILES: tuple[str, ...] = (SEQUENCES_FILE, PRIVACY_REPORT_FILE)

DOC_FIELDS = ("id", "text", "label", "keyphrases", "model")
SEQ_FIELDS = ("id", "label", "keyphrases", "method")
FAILURE_FIELDS = ("id", "label", "keyphrases", "error", "attempts", "retryable", "backend", "model", "timestamp")
AUDIT_FIELDS = (
    "timestamp", "id", "attempt", "backend", "model", "backend_info", "parameters", "prompt_config", "messages",
)
#: An audit line that records a best-of-K choice (llm/selection.py): the drafts not kept, with their figures
#: (post-processing of the DP sequences, like the documents). It is no prompt: not counted as one.
DRAFTS_AUDIT_FIELDS = ("timestamp", "id", "attempt", "event", "kept", "drafts")
CSV_DANGEROUS_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
KEYPHRASE_CSV_SEPARATOR = "; "
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
_MIN_SECRET_CHARS = 8
_FINGERPRINT_KEY_PARTS = ("sha256", "fingerprint", "checksum")


@dataclasses.dataclass(frozen=True)
class BundleFile:
    """One file of the bundle."""

    name: str
    sha256: str
    size: int


@dataclasses.dataclass(frozen=True)
class BundleManifest:
    """Files written (name, sha256, size) and where."""

    files: tuple[BundleFile, ...]
    zip_path: str | None = None
    folder: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {"files": [dataclasses.asdict(f) for f in self.files]}


#: The bundle's members a user may also download one by one, with their media types (page 8).
DOCUMENTS_CSV = "documents.csv"
PRIVACY_REPORT_MARKDOWN = "privacy_report.md"
SINGLE_DOWNLOADS: tuple[tuple[str, str], ...] = (
    (DOCUMENTS_CSV, "text/csv"), (DOCUMENTS_FILE, "application/jsonl"), (SEQUENCES_FILE, "application/jsonl"),
    (PRIVACY_REPORT_MARKDOWN, "text/markdown"))


@dataclasses.dataclass(frozen=True)
class BundleContents:
    """A collected bundle (:func:`collect_bundle`) read back for display: its files, the released privacy report,
    the synthetic documents and the number of keyphrase sequences — the one reader of the bundle's members, so no
    caller parses member names itself."""

    files: Mapping[str, bytes]
    report: dict[str, Any]
    documents: tuple[dict[str, Any], ...]
    sequences: int

    @classmethod
    def of(cls, files: Mapping[str, bytes]) -> "BundleContents":
        docs = tuple(json.loads(line) for line in files[DOCUMENTS_FILE].decode("utf-8").splitlines() if line.strip())
        seqs = sum(1 for line in files[SEQUENCES_FILE].decode("utf-8").splitlines() if line.strip())
        return cls(files=dict(files), report=json.loads(files[PRIVACY_REPORT_FILE]), documents=docs, sequences=seqs)

    def single_downloads(self) -> list[tuple[str, bytes, str]]:
        """(name, bytes, media type) of each member offered on its own (:data:`SINGLE_DOWNLOADS`)."""
        return [(name, self.files[name], mime) for name, mime in SINGLE_DOWNLOADS if name in self.files]


# --------------------------------------------------------------------------------------------------------------
# Allowlist


def check_allowed(name: str) -> str:
    """Return ``name`` if it is an allowlisted run-folder file, else raise ExportError."""
    if not isinstance(name, str) or not name:
        raise ExportError("Export file names must be non-empty strings.")
    pure = PurePosixPath(name.replace("\\", "/"))
    base = pure.name
    if base in FORBIDDEN_RUN_FILES or name in FORBIDDEN_RUN_FILES:
        raise ExportError(f"{base} holds private data and is never exported.")
    if len(pure.parts) != 1 or name not in ALLOWED_RUN_FILES:
        raise ExportError(
            f"{name!r} is not on the export allowlist ({', '.join(ALLOWED_RUN_FILES)}); private files are never exported."
        )
    return name


def csv_safe(value: Any) -> str:
    """A CSV cell that spreadsheets will not run as a formula (leading = + - @ tab CR get a single quote)."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(CSV_DANGEROUS_PREFIXES) else text


# --------------------------------------------------------------------------------------------------------------
# Reading the run folder (allowlisted names only)


def _path(run: Path, name: str) -> Path:
    return run / check_allowed(name)


def check_run_files(run: Path, names: Iterable[str]) -> None:
    """Refuse a bundle whose allowlisted run-folder files are not the run folder's own regular files.

    A file name on the allowlist says nothing about what a symbolic link of that name points to (a private
    corpus, ``split.json``, a file outside the run folder), so every allowlisted file present must be a regular
    file that is not a link (docs/PRIVACY.md, "What never leaves the private side")."""
    for name in names:
        p = _path(run, name)
        if p.is_symlink():
            raise ExportError(f"{name} in the run folder is a symbolic link; a bundle is built only from the run "
                              "folder's own files. Nothing was exported.")
        if p.exists() and not p.is_file():
            raise ExportError(f"{name} in the run folder is not a regular file. Nothing was exported.")


def _read_json(run: Path, name: str, *, required: bool) -> dict[str, Any] | None:
    p = _path(run, name)
    if not p.is_file():
        if required:
            raise ExportError(f"The run folder has no {name}; run the sampling step first.")
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ExportError(f"{name} in the run folder is not valid JSON.") from None
    if not isinstance(data, dict):
        raise ExportError(f"{name} in the run folder is not a JSON object.")
    return data


def _pick(obj: Mapping[str, Any], fields: Sequence[str]) -> dict[str, Any]:
    return {k: obj[k] for k in fields if k in obj}


def _jsonl_bytes(objs: Iterable[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs).encode("utf-8")


def _json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=False) + "\n").encode("utf-8")


def _documents_csv(docs: Sequence[Mapping[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    w.writerow(DOC_FIELDS)
    for d in docs:
        kps = KEYPHRASE_CSV_SEPARATOR.join(str(k) for k in d.get("keyphrases", []))
        w.writerow([csv_safe(d.get("id")), csv_safe(d.get("text")), csv_safe(d.get("label")), csv_safe(kps), csv_safe(d.get("model"))])
    return buf.getvalue().encode("utf-8")


def _documents_parquet(docs: Sequence[Mapping[str, Any]]) -> bytes:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - pinned dependency
        raise ExportError("pyarrow is needed for the Parquet file; run `pip install -r requirements.txt`.") from exc
    table = pa.table(
        {
            "id": pa.array([str(d.get("id", "")) for d in docs], pa.string()),
            "text": pa.array([str(d.get("text", "")) for d in docs], pa.string()),
            "label": pa.array([str(d.get("label", "")) for d in docs], pa.string()),
            "keyphrases": pa.array([[str(k) for k in d.get("keyphrases", [])] for d in docs], pa.list_(pa.string())),
            "model": pa.array([str(d.get("model", "")) for d in docs], pa.string()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _generation_section(
    audit: Sequence[Mapping[str, Any]], docs: Sequence[Mapping[str, Any]], failures: Sequence[Mapping[str, Any]],
    n_sequences: int,
) -> dict[str, Any]:
    """The report's ``generation`` section (JSON) from the prompts sent (audit lines), the documents and failures:
    the LLM configuration(s), the document models and the counts — post-processing of the DP sequences (docs/DESIGN.md §1)."""
    # One configuration per distinct (backend, model, settings, prompt): the per-call batch size (a run's last
    # batch is smaller) is not a configuration of its own — the largest one is reported.
    configs: list[dict[str, Any]] = []
    for entry in audit:
        params = dict(entry.get("parameters") or {})
        batch = params.pop("batch_size", None)
        cfg = {
            "backend": entry.get("backend"),
            "model": entry.get("model"),
            "backend_info": entry.get("backend_info", {}),
            "parameters": params,
            "prompt_config": entry.get("prompt_config", {}),
        }
        same = next((c for c in configs if {**c, "parameters": {k: v for k, v in c["parameters"].items()
                                                                if k != "batch_size"}} == cfg), None)
        if same is None:
            configs.append({**cfg, "parameters": {**params, **({"batch_size": batch} if batch is not None else {})}})
        elif isinstance(batch, int) and batch > int(same["parameters"].get("batch_size") or 0):
            same["parameters"]["batch_size"] = batch
    last = configs[-1] if configs else {}
    return {
        "post_processing": True,
        "note": "Documents are written by an LLM from the DP keyphrase sequences only (DP post-processing): "
        "no further privacy cost.",
        "backend": last.get("backend"),
        "model": last.get("model"),
        "backend_info": last.get("backend_info", {}),
        "parameters": last.get("parameters", {}),
        "prompt_config": last.get("prompt_config", {}),
        "configurations": configs,
        "document_models": sorted({str(d.get("model", "")) for d in docs}),
        "counts": {
            "sequences": n_sequences,
            "documents": len(docs),
            "failed": len(failures),
            "prompts_sent": len(audit),
        },
    }


# --------------------------------------------------------------------------------------------------------------
# Building


def _without_fingerprints(obj: Any) -> Any:
    """Drop hashes of private files (e.g. ``corpus_sha256``): a hash of the private corpus is not DP."""
    if isinstance(obj, Mapping):
        return {
            k: _without_fingerprints(v) for k, v in obj.items()
            if not any(t in str(k).lower() for t in _FINGERPRINT_KEY_PARTS)
        }
    if isinstance(obj, list):
        return [_without_fingerprints(v) for v in obj]
    return obj


#: Run-configuration keys that name columns of the private file: not needed to read the release, so left out.
PRIVATE_COLUMN_KEYS = ("text_column", "label_column", "person_column")
_PERSON_COLUMN_NOTE = re.compile(r"\s*\(identified by column '[^']*'\)")


def without_column_names(report: Mapping[str, Any]) -> dict[str, Any]:
    """The privacy report as released: the private file's column names (text, label, person) left out of its
    parameters and of its unit-of-privacy sentence — they are not needed to read the release (docs/PRIVACY.md)."""
    out = dict(report)
    if isinstance(out.get("parameters"), Mapping):
        out["parameters"] = {k: v for k, v in out["parameters"].items() if k not in PRIVATE_COLUMN_KEYS}
    if isinstance(out.get("neighbouring"), str):
        out["neighbouring"] = _PERSON_COLUMN_NOTE.sub("", out["neighbouring"])
    if isinstance(out.get("events"), list):  # each ledger event repeats the unit sentence, column name included
        out["events"] = [{**e, "neighbouring": _PERSON_COLUMN_NOTE.sub("", e["neighbouring"])}
                         if isinstance(e, Mapping) and isinstance(e.get("neighbouring"), str) else e
                         for e in out["events"]]
    return out


PRIVATE_CORPUS_PLACEHOLDER = "private corpus (its path and file name stay in the local run folder)"
_PRIVATE_LOCATION_KEYS = ("corpus_path", "private_corpus_path", "corpus_file", "source", "filename", "upload")


def public_run_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The run configuration as released (docs/PRIVACY.md): no hash of a private file, no private path or file name
    and none of its column names (:data:`PRIVATE_COLUMN_KEYS`) — a user's corpus is named by the fixed public
    phrase :data:`PRIVATE_CORPUS_PLACEHOLDER` (the local run folder keeps the path and columns for re-runs); a
    bundled public demo corpus keeps its ``demo:…`` name."""
    out = {k: v for k, v in _without_fingerprints(config).items() if k not in PRIVATE_COLUMN_KEYS}
    corpus = out.get("corpus")
    if not (isinstance(corpus, str) and corpus.startswith("demo:")):
        out["corpus"] = PRIVATE_CORPUS_PLACEHOLDER
    for key in list(out):
        if any(part in str(key).lower() for part in _PRIVATE_LOCATION_KEYS):
            del out[key]
    return out


def _secrets(extra: Iterable[str]) -> list[str]:
    found = [s for s in extra if isinstance(s, str) and len(s) >= _MIN_SECRET_CHARS]
    env = os.environ.get("OPENAI_API_KEY", "")
    if len(env) >= _MIN_SECRET_CHARS:
        found.append(env)
    return found


def collect_bundle(
    run_dir: str | os.PathLike[str], *, files: Iterable[str] | None = None, secrets: Iterable[str] = ()
) -> dict[str, bytes]:
    """The bundle's files as ``{name: bytes}`` (in memory), from allowlisted run-folder files only.

    ``files`` restricts which run-folder files are used (each must be on the allowlist, else ExportError);
    ``sequences.jsonl`` and ``privacy_report.json`` are always needed.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise ExportError(f"Run folder {run} does not exist.")
    wanted = tuple(ALLOWED_RUN_FILES) if files is None else tuple(check_allowed(f) for f in files)
    for name in REQUIRED_RUN_FILES:
        if name not in wanted:
            raise ExportError(f"{name} is required in every bundle.")
    check_run_files(run, wanted)
    if not _path(run, SEQUENCES_FILE).is_file():
        raise ExportError(f"The run folder has no {SEQUENCES_FILE}; run the sampling step first.")
    report = _read_json(run, PRIVACY_REPORT_FILE, required=True) or {}

    sequences = [_pick(o, SEQ_FIELDS) for o in iter_jsonl(_path(run, SEQUENCES_FILE)) if "id" in o]
    order = {s["id"]: i for i, s in enumerate(sequences)}
    docs = [_pick(d, DOC_FIELDS) for d in read_documents(run)] if DOCUMENTS_FILE in wanted else []
    docs.sort(key=lambda d: order.get(d["id"], len(order)))  # sequence order, whatever the completion order
    failures = [_pick(f, FAILURE_FIELDS) for f in read_failures(run)] if FAILURES_FILE in wanted else []
    audit_lines = list(iter_jsonl(_path(run, AUDIT_FILE))) if AUDIT_FILE in wanted else []
    audit = [_pick(a, AUDIT_FIELDS) for a in audit_lines if a.get("event") != "drafts"]  # the prompts sent
    audit_out = [_pick(a, DRAFTS_AUDIT_FIELDS) if a.get("event") == "drafts" else _pick(a, AUDIT_FIELDS)
                 for a in audit_lines]

    out: dict[str, bytes] = {}
    out[DOCUMENTS_CSV] = _documents_csv(docs)
    out[DOCUMENTS_FILE] = _jsonl_bytes(docs)
    out["documents.parquet"] = _documents_parquet(docs)
    out[SEQUENCES_FILE] = _jsonl_bytes(sequences)
    report = without_column_names(report)
    report["generation"] = _generation_section(audit, docs, failures, len(sequences))
    out[PRIVACY_REPORT_FILE] = _json_bytes(report)
    out[PRIVACY_REPORT_MARKDOWN] = render_report_markdown(report).encode("utf-8")
    for name in (RUN_CONFIG_FILE, VOCABULARY_FILE):
        if name in wanted:
            data = _read_json(run, name, required=False)
            if data is not None:
                out[name] = _json_bytes(public_run_config(data) if name == RUN_CONFIG_FILE else data)
    if AUDIT_FILE in wanted:
        out[AUDIT_FILE] = _jsonl_bytes(audit_out)
    if FAILURES_FILE in wanted:
        out[FAILURES_FILE] = _jsonl_bytes(failures)
    try:  # the release dossier (docs/DOSSIER.md), from the run folder's releasable files: DP outputs, public inputs
        out.update(build_dossier(run, edition="release", sample_documents=5 if DOCUMENTS_FILE in wanted else 0).files())
    except DossierError as exc:
        raise ExportError(f"{exc} Nothing was exported.") from None

    for secret in _secrets(secrets):
        needle = secret.encode("utf-8")
        for name, data in out.items():
            if needle in data:
                raise ExportError(f"{name} would contain an API key; nothing was exported.")
    manifest = {
        "files": [
            {"name": n, "sha256": hashlib.sha256(b).hexdigest(), "size": len(b)} for n, b in sorted(out.items())
        ]
    }
    out["manifest.json"] = _json_bytes(manifest)
    return out


def _manifest(contents: Mapping[str, bytes], *, zip_path: str | None, folder: str | None) -> BundleManifest:
    return BundleManifest(
        files=tuple(
            BundleFile(name=n, sha256=hashlib.sha256(b).hexdigest(), size=len(b)) for n, b in sorted(contents.items())
        ),
        zip_path=zip_path,
        folder=folder,
    )


def _zip_bytes(contents: Mapping[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(contents):
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, contents[name])
    return buf.getvalue()


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def build_bundle(
    run_dir: str | os.PathLike[str],
    *,
    out_zip: str | os.PathLike[str] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    files: Iterable[str] | None = None,
    secrets: Iterable[str] = (),
) -> BundleManifest:
    """Write the release bundle as a ZIP and/or a folder; return the file list with SHA-256.

    Args:
        run_dir: the run folder.
        out_zip: ZIP file to write.
        out_dir: folder to write the same files into (must not be the run folder).
        files: allowlisted run-folder files to use (default: all present); others raise ExportError.
        secrets: strings (API keys) that must appear in no file; ``$OPENAI_API_KEY`` is always checked.
    """
    if out_zip is None and out_dir is None:
        raise ExportError("Say where to write the bundle: a ZIP file, a folder, or both.")
    run = Path(run_dir)
    if out_dir is not None:
        folder = Path(out_dir)
        if folder.exists() and run.exists() and folder.resolve() == run.resolve():
            raise ExportError("The bundle folder must not be the run folder; choose another folder.")
        if folder.exists() and not folder.is_dir():
            raise ExportError(f"{folder} exists and is not a folder.")
    contents = collect_bundle(run, files=files, secrets=secrets)
    zip_str = dir_str = None
    try:
        if out_zip is not None:
            zp = Path(out_zip)
            zp.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(zp, _zip_bytes(contents))
            zip_str = str(zp)
        if out_dir is not None:
            folder = Path(out_dir)
            folder.mkdir(parents=True, exist_ok=True)
            for name, data in contents.items():
                _atomic_write(folder / name, data)
            dir_str = str(folder)
    except OSError as exc:
        raise ExportError(f"Could not write the bundle ({exc.strerror or type(exc).__name__}).") from None
    return _manifest(contents, zip_path=zip_str, folder=dir_str)


def bundle_bytes(run_dir: str | os.PathLike[str], *, secrets: Iterable[str] = ()) -> bytes:
    """The release bundle as ZIP bytes (for the app's download button)."""
    return _zip_bytes(collect_bundle(run_dir, secrets=secrets))
