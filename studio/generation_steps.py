"""The page-6 actions: the LLM writes one document per DP keyphrase sequence (post-processing: no ε), through the
core's runner (``dpkps_core.llm``) in a :class:`~studio.jobs.Job` thread; the runner's per-document checkpoint keeps
what was finished before a cancel, and a new start resumes.

The pure helpers (:func:`interleave_by_class`, :func:`check_few_shot_not_private`) do not touch Streamlit and are
unit-tested directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from dpkps_core.corpus import Corpus
from dpkps_core.errors import ParameterError
from dpkps_core.llm.factory import BackendSpec, backend_kinds, backend_spec, make_backend
from dpkps_core.llm.local import DEFAULT_BATCH_SIZE
from dpkps_core.llm.model_queue import ordinal
from dpkps_core.method.sampling import SamplingOutcome
from dpkps_core.progress import format_duration
from studio import page_ref, run_view
from studio.jobs import Job, running_job_of_run, start_job
from studio.resources import shared_backend, wait_for_warm_up
from studio.session import corpus, generation_secrets, run_dir
from studio.steps import write_run
from studio.state import SessionState

# ============================================================================================ pure helpers

def interleave_by_class(sequences: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Sequences reordered round-robin over classes (so "the first k" covers every class); ids unchanged."""
    by_class: dict[str, list[dict[str, Any]]] = {}
    for s in sequences:
        by_class.setdefault(str(s.get("label", "")), []).append(dict(s))
    out: list[dict[str, Any]] = []
    queues = [by_class[c] for c in sorted(by_class)]
    i = 0
    while any(i < len(q) for q in queues):
        out.extend(q[i] for q in queues if i < len(q))
        i += 1
    return out


def check_few_shot_not_private(texts: Iterable[str], corpus: Corpus | None) -> None:
    """Refuse few-shot examples that contain a document of the private corpus or share a run of 8 or more tokens
    with one (``dpkps_core.llm.prompts.PrivateSpanIndex``: checked locally, the message quotes nothing)."""
    from dpkps_core.llm.prompts import check_examples_not_private

    if corpus is None:
        return
    check_examples_not_private(list(texts), corpus.texts)



# ============================================================================================ 6. LLM

def backend_options() -> list[str]:
    """The kinds page 6 offers: every registered backend, default first (:mod:`dpkps_core.llm.factory`)."""
    return list(backend_kinds())


def backend_label(kind: str) -> str:
    """The page's text for one kind (its spec's label)."""
    return backend_spec(kind).label


def chosen_backend(state: SessionState) -> BackendSpec:
    """The spec of the session's chosen backend."""
    return backend_spec(state.settings.backend)


def prompt_config(state: SessionState) -> Any:
    from dpkps_core.llm import PromptConfig

    return PromptConfig(doc_type=state.settings.doc_type or "a document", few_shot=tuple(state.settings.few_shot or ()),
                        include_label=bool(state.settings.include_label))


def parse_few_shot_upload(state: SessionState, data: bytes, filename: str) -> tuple[Any, ...]:
    """PUBLIC few-shot examples from a separate upload; refuses the private corpus file and its documents."""
    from dpkps_core.llm import parse_few_shot

    fps = [state.loaded.corpus_fingerprint] if state.loaded.corpus_fingerprint else []
    examples = parse_few_shot(data, filename=filename, private_fingerprints=fps)
    check_few_shot_not_private((e.text for e in examples), corpus(state))
    state.settings.few_shot, state.settings.few_shot_name = tuple(examples), Path(filename).name
    return examples


def llm_backend(state: SessionState) -> Any:
    """The chosen backend: one that runs here is cached per server (public weights, :func:`studio.resources.
    shared_backend`); any other is built per session from the fields its spec takes (the key stays in memory)."""
    spec = chosen_backend(state)
    if spec.runs_here:
        return shared_backend(spec.name, model_path=state.settings.local_model_path or "", device=state.settings.device)
    return make_backend(spec.name, model=(state.settings.llm_model or "").strip() or None,
                        base_url=(state.settings.base_url or "").strip() or None,
                        api_key=state.settings.api_key or None,
                        concurrency=int(state.settings.concurrency))


def job_sequences(state: SessionState) -> list[dict[str, Any]]:
    """All sequences, round-robin over classes (the first k cover every class)."""
    outcome: SamplingOutcome | None = run_view.outcome(state)
    if outcome is None:
        raise ParameterError(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    return interleave_by_class([q.to_dict() for q in outcome.sequences])


def generation_settings(state: SessionState, limit: int) -> Any:
    from dpkps_core.llm import GenerationSettings

    offline = chosen_backend(state).runs_here
    return GenerationSettings(max_tokens=int(state.settings.max_tokens),
                              temperature=float(state.settings.llm_temperature),
                              timeout=120.0 if offline else 60.0, retries=2 if offline else 4,
                              concurrency=1 if offline else int(state.settings.concurrency), limit=int(limit),
                              batch_size=int(state.settings.llm_batch_size or DEFAULT_BATCH_SIZE),
                              drafts=int(state.settings.llm_drafts or 1),
                              no_repeat_ngram=int(state.settings.llm_no_repeat_ngram),
                              repetition_penalty=float(state.settings.llm_repetition_penalty))


def model_line(state: SessionState) -> int:
    """The batches using or waiting for this session's local model now — every session's: the offline and local
    models are shared by the server (:mod:`dpkps_core.llm.model_queue`); 0 for a remote backend or an idle model."""
    from dpkps_core.llm.model_queue import model_queue_of

    if not chosen_backend(state).runs_here:
        return 0
    line = model_queue_of(llm_backend(state))
    return line.length if line is not None else 0


def model_line_note(busy: int) -> str:
    """One line for page 6 when the shared model is in use: how many batches are in line, and where a run
    started now would stand (the estimate never waits for the model: it uses the speed measured so far)."""
    if busy <= 0:
        return ""
    return (f"The model is shared by everyone on this server and busy now: {busy} batch(es) use it or wait for it, "
            f"so a run started now is {ordinal(busy + 1)} in line and takes turns with them batch by batch — "
            f"expect about {busy + 1}× the time below while they write. The estimate did not wait for the model.")


def estimate_generation(state: SessionState, limit: int, *, written: Iterable[str] = ()) -> Any:
    """The estimate of what remains of a job of ``limit`` documents: the first ``limit`` sequences whose document
    is not ``written`` yet (ids). It never writes a calibration batch (the page must be usable at once, and a
    calibration's replies are thrown away): speed and the share of refused replies come from what runs at these
    settings measured — the first batch of the first run measures them and keeps what it writes — else from the
    engine's own tokens/s (llm/estimate.py)."""
    from dpkps_core.llm import estimate_cost

    done = set(written)
    seqs = [q for q in job_sequences(state)[: int(limit)] if q["id"] not in done]
    settings = generation_settings(state, limit)
    price = float(state.settings.price_per_1k) or None
    seqs = [q for q in seqs for _ in range(settings.drafts)]  # K drafts: K prompts per sequence
    return estimate_cost(seqs, prompt_config=prompt_config(state), backend=llm_backend(state),
                         max_tokens=settings.max_tokens,
                         concurrency=settings.concurrency, price_per_1k=price, batch_size=settings.batch_size,
                         retries=settings.retries, temperature=settings.temperature, drafts=settings.drafts,
                         timeout=settings.timeout, repetition=settings.repetition_kwargs(),  # llm/speed.py
                         calibrate=False)


def start_generation(state: SessionState, limit: int) -> Job:
    """Write documents for the first ``limit`` sequences (resuming: finished ones are skipped)."""
    from dpkps_core.llm import run_generation

    if run_view.outcome(state) is None:
        raise ParameterError(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    seqs = job_sequences(state)
    backend = llm_backend(state)
    pconf = prompt_config(state)
    settings = generation_settings(state, limit)
    out = run_dir(state, create=False) or write_run(state)
    mask = generation_secrets(state)

    def work(job: Job) -> Any:
        def on_progress(p: Any) -> None:
            eta = f", about {format_duration(p.eta_s)} left" if p.eta_s is not None else ""
            if p.in_flight and p.queue_place:  # the model is shared by the server's sessions: batches take turns
                batch = (f"; the next batch of {p.in_flight} is {ordinal(p.queue_place)} in line for the model "
                         "(shared by everyone on this server; runs take turns batch by batch)")
            elif p.in_flight:
                batch = f"; writing a batch of {p.in_flight} ({p.in_flight_fraction:.0%} of its tokens)"
            else:
                batch = ""
            job.report((p.done + p.failed + p.in_flight * p.in_flight_fraction) / max(p.total, 1),
                       f"{p.done}/{p.total} documents written, {p.failed} failed{batch}{eta}")

        if hasattr(backend, "prepare"):  # local models: the engine's model, or the torch weights without one
            job.report(0.0, "loading the offline model (first time ~10–30 s)…")
            wait_for_warm_up("llm")
            backend.prepare()
        return run_generation(seqs, backend=backend, prompt_config=pconf, run_dir=out, settings=settings,
                              progress=on_progress, cancel=job.cancel, secrets=mask)

    job = start_job(state, "generation", "generation", work, run=out)
    job.target = int(limit)
    return job


def reattach_generation(state: SessionState) -> Job | None:
    """After a reload (a new session) on a run whose generation is still writing — started by the tab before the
    reload or by another tab — make it this session's generation job, so that page 6 shows its progress, its ETA
    and its Cancel again. Returns the job reattached, or ``None``."""
    rd, job = state.run.run_dir, state.jobs.generation
    if not rd or (isinstance(job, Job) and job.running):
        return None
    other = running_job_of_run("generation", rd)
    if other is not None:
        state.jobs.generation = other
        state.jobs.reattached_generation = other  # page 6 says so while it runs
        if other.target is not None:  # the box "write documents for the first … sequences" shows what it writes
            state.settings.n_documents = other.target
    return other

