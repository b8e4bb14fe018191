"""The page-7 actions: background jobs that evaluate the run on real data (PRIVATE, local) — downstream accuracy,
the method comparison, the t-SNE/UMAP overlay (kept in the run folder's PRIVATE ``projection.json`` for the internal
dossier), the disclosure test (``disclosure.json``, issue 34 §2) and the ε sweep — each a thin call of the ``dpkps_core`` function
the CLI runs, in a :class:`~studio.jobs.Job` thread (finished sweep cells are kept when cancelled)."""

from __future__ import annotations

import uuid
from typing import Any, Sequence

import numpy as np

from dpkps_core.embeddings import DEFAULT_MODEL, embed_texts
from dpkps_core.errors import CorpusError, ParameterError
from dpkps_core.ledger_store import PersistentLedger
from dpkps_core.llm.factory import DEFAULT_BACKEND, backend_spec
from studio import page_ref, run_view
from studio.jobs import Job, start_job
from studio.resources import embedder, embedding_cache, offline_backend, shared_backend
from studio.session import corpus, current_config, documents, memo_embedder, public_vocabulary, run_dir, split, term_counts, test_part, train_part
from studio.ledger_view import ledger
from studio.tenancy import runs_root
from studio.state import SessionState


def _embedding_model(state: SessionState) -> str:
    """The public embedding model of the open run's densities (the session's setting before they exist)."""
    return str((run_view.density_meta(state) or {}).get("embedding_model") or state.settings.embedding_model)


def start_evaluation(state: SessionState, seeds: int) -> Job:
    """Downstream accuracy + no-LLM check of the run folder (dpkps_core.evaluation.evaluate_run) — PRIVATE; the
    result goes into the run folder's ``evaluation.json`` as the CLI's ``evaluate`` writes it (never exported)."""
    from dpkps_core import evaluation

    out = run_dir(state, create=False)
    if out is None or run_view.outcome(state) is None:
        raise ParameterError(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    c = corpus(state)
    emb = memo_embedder(state, _embedding_model(state), state.settings.device)
    vocab = public_vocabulary(state)
    counts = term_counts(state, vocab, int(current_config(state).terms_per_doc))

    def work(job: Job) -> Any:
        result = evaluation.evaluate_run(out, seeds=seeds, embedder=emb, corpus=c, progress=job.report,
                                         vocabulary=vocab, counts=counts)
        evaluation.write_evaluation(result, out)  # PRIVATE, owner-only; page 7 reads it back after a reload
        return result

    return start_job(state, "evaluation", "evaluation", work)


def start_compare(state: SessionState, *, methods: Sequence[str], eps_total: float, delta: float, per_class: int,
                  max_tokens: int) -> Job:
    """DP-KPS vs private prediction vs AugPE+Ṽ at one privacy level on the same split (dpkps_core.baselines.compare).

    Its accuracies read real data (private, local); the synthetic documents it writes are DP releases, so their
    JOINT cost (every method on the same data) is checked against the cap here, before the job starts, and every
    method admits its units through the corpus's persistent ledger and charges its events there BEFORE its first
    noise or prompt (docs/DESIGN.md §2.0 "charge first"), as the CLI's ``compare`` does: a job that fails or is
    cancelled mid-run stays charged."""
    from dpkps_core.baselines import compare
    from dpkps_core.baselines.compare_settings import CompareSettings

    if not methods:
        raise ParameterError("Pick at least one method to compare.")
    c = corpus(state)
    led = ledger(state)
    settings = CompareSettings(  # validated here, in the page's thread: a bad value is a clear error
        eps_total=float(eps_total), methods=tuple(methods), delta=float(delta), per_class=int(per_class),
        max_tokens=int(max_tokens), doc_type=state.settings.doc_type or "a document",
        test_fraction=float(state.settings.test_fraction))
    joint_eps, _ = settings.joint_cost()
    led.require(joint_eps, f"this comparison of {len(methods)} method(s) on the same data (joint cost)")
    out = runs_root() / f"compare-{uuid.uuid4().hex[:8]}"  # the tenant's own runs root (docs/DESIGN.md §2.0)
    if isinstance(led, PersistentLedger):  # its releases are filed under the comparison, not the open run (issue 35 §4)
        led = led.for_run(out.name, tool="app compare", in_session=True)
    emb = memo_embedder(state, DEFAULT_MODEL, state.settings.device)
    vocab = public_vocabulary(state)
    # the model chosen on page 6 when it runs here (the user's own folder, SmolLM2…), else SmolLM2, on the device
    kind = str(state.settings.backend or DEFAULT_BACKEND)
    runs_here = kind != DEFAULT_BACKEND and backend_spec(kind).runs_here
    backend = (shared_backend(kind, model_path=state.settings.local_model_path or "", device=state.settings.device)
               if runs_here else offline_backend(state.settings.device))

    def work(job: Job) -> Any:
        return compare.compare_methods(c, settings, backend=backend, embedder=emb, vocabulary=vocab, out_dir=out,
                                       progress=job.report, cancel=job.cancel, ledger=led)

    return start_job(state, "compare", "method comparison", work)


def start_projection(state: SessionState, max_real: int) -> Job:
    """t-SNE and UMAP of real test documents (PRIVATE, in memory) and synthetic documents in one space."""
    from dpkps_core import evaluation

    docs = documents(state)
    if len(docs) < 2:
        raise ParameterError(f"Write at least two synthetic documents first ({page_ref('generate')}).")
    test = test_part(state)
    if len(test) == 0:
        raise ParameterError("The overlay needs held-out real documents; set a test fraction above 0 on "
                             f"{page_ref('corpus')}.")
    idx = evaluation.subsample(len(test), int(max_real), np.random.default_rng(0))
    real_texts = [test.texts[i] for i in idx]
    real_labels = [test.labels[i] for i in idx]
    emb_model = memo_embedder(state, _embedding_model(state))
    out = run_dir(state, create=False)

    def work(job: Job) -> Any:
        # how many real test documents there are is an exact private size: the message does not say it
        job.report(0.05, "embedding the real test documents (in memory only)")
        real = embed_texts(real_texts, emb_model, progress=lambda f, m: job.report(0.05 + 0.3 * f, m))
        if job.cancelled:
            return None
        job.report(0.35, f"embedding {len(docs)} synthetic documents")
        syn = embed_texts([d["text"] for d in docs], emb_model)
        frames = {}
        for k, method in enumerate(("tsne", "umap")):
            if job.cancelled:
                break
            job.report(0.4 + 0.3 * k, f"{method.upper()} projection")
            frames[method] = evaluation.projection_frame(real, real_labels, syn, [d["label"] for d in docs],
                                                         method=method)
            job.partial.append(method)
        if out is not None and frames:
            write_projection(out, frames.get("tsne", next(iter(frames.values()))))
        job.report(1.0, "projections done")
        return frames

    return start_job(state, "projection", "projection", work)


def write_projection(run: Any, df: Any) -> None:
    """Keep the overlay's points in the run folder (``projection.json``, owner-only, PRIVATE: real documents'
    positions; not on the export allowlist) so the internal dossier can draw it from the run folder alone."""
    import json
    import os
    from pathlib import Path

    from dpkps_core.dossier.internal import PROJECTION_FILE

    points = [{"x": float(x), "y": float(y), "source": str(src), "label": str(lab)}
              for x, y, src, lab in zip(df["x"], df["y"], df["source"], df["label"])]
    data = {"private": True, "method": str(df.attrs.get("method", "tsne")), "points": points}
    path = Path(run) / PROJECTION_FILE
    tmp = path.with_name(f".{PROJECTION_FILE}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _claimed_epsilon(run: Any) -> float | None:
    """The run's total ε as its privacy report states it (None before the report exists)."""
    from pathlib import Path

    from dpkps_core.records import runfolder

    path = runfolder.RunFolder(Path(run)).privacy_report
    try:
        report = runfolder.read_json(path) if path.is_file() else {}
    except (OSError, ValueError):
        return None
    value = report.get("epsilon_total") if isinstance(report, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def start_disclosure(state: SessionState, *, identifiers: Sequence[str] = (), confidence: float = 0.95) -> Job:
    """The disclosure test of the open run (issue 34 §2; dpkps_core.evaluation.disclosure, [Phantoms], [OneRun]):
    its synthetic documents against its training part and as many held-out documents — PRIVATE, local; the
    result goes into the run folder's ``disclosure.json`` (owner-only, never exported; the identifiers themselves
    are not written) for the internal dossier."""
    from dpkps_core.evaluation.disclosure import DisclosureSettings, disclosure_test, write_disclosure

    docs = documents(state)
    if not docs:
        raise ParameterError(f"Write some synthetic documents first ({page_ref('generate')}).")
    out = run_dir(state, create=False)
    if out is None:
        raise ParameterError(f"Sample keyphrase sequences first ({page_ref('sequences')}).")
    train, test = train_part(state), test_part(state)
    if len(test) == 0:
        raise ParameterError("The disclosure test needs held-out documents as its control; set a test fraction "
                             f"above 0 on {page_ref('corpus')}.")
    settings = DisclosureSettings(identifiers=tuple(identifiers), confidence=float(confidence))
    claimed = _claimed_epsilon(out)
    synthetic = [d["text"] for d in docs]
    train_texts, test_texts = list(train.texts), list(test.texts)

    def work(job: Job) -> Any:
        # sizes of the private parts are not said in the progress message (exact private counts)
        job.report(0.1, f"matching {len(synthetic)} synthetic documents against training and held-out documents")
        result = disclosure_test(synthetic, train_texts, test_texts, settings=settings, claimed_epsilon=claimed)
        write_disclosure(result, out)
        job.report(1.0, "disclosure test done")
        return result

    return start_job(state, "disclosure", "disclosure test", work)


def start_sweep(state: SessionState, *, eps_voc: Sequence[float], eps_kde: Sequence[float], methods: Sequence[str],
                seeds: int,
                per_class: int) -> Job:
    """ε sweep without the LLM; finished cells are kept when cancelled (PRIVATE, local experiment)."""
    from dpkps_core import evaluation

    if not eps_voc or not eps_kde or not methods:
        raise ParameterError("Choose at least one ε_voc, one ε_kde and one method for the sweep.")
    c = corpus(state)
    if c is None:
        raise CorpusError(f"Load a corpus first ({page_ref('corpus')}).")
    base = current_config(state, epsilon_cap=None, seed=None)
    vocab = public_vocabulary(state)
    emb = embedder(base.embedding_model)
    cache = embedding_cache()
    sp = split(state)

    def work(job: Job) -> Any:
        # the core's sweep (the same numbers as `python -m dpkps_core sweep`); finished cells land in job.partial
        ev_ = evaluation.NoLLMEvaluator(c, config=base, vocabulary=vocab, embedder=emb, cache=cache, split=sp)
        return evaluation.run_sweep(c, config=base, vocabulary=vocab, embedder=emb, evaluator=ev_,
                                    eps_voc_grid=[float(e) for e in eps_voc], eps_kde_grid=[float(e) for e in eps_kde],
                                    methods=list(methods), seeds=int(seeds), per_class=int(per_class),
                                    progress=job.report, cancel=job.cancel, rows=job.partial)

    return start_job(state, "sweep", "sweep", work)


def start_memorisation(state: SessionState, *, by_embedding: bool) -> Any:
    """The local memorisation check on this run's documents against the REAL training documents (PRIVATE)."""
    from dpkps_core.embeddings import embed_texts
    from dpkps_core.evaluation.memorisation import memorisation_check

    docs = documents(state)
    if not docs:
        raise ParameterError(f"Write some synthetic documents first ({page_ref('generate')}).")
    train = train_part(state)
    if len(train) == 0:
        raise ParameterError("There are no training documents to compare with.")
    emb = memo_embedder(state,
                        (run_view.density_meta(state) or {}).get("embedding_model") or state.settings.embedding_model,
                                state.settings.device) if by_embedding else None
    syn_texts = [d["text"] for d in docs]
    real_texts = list(train.texts)

    def work(job: Any) -> Any:
        syn_emb = real_emb = None
        if emb is not None:
            job.report(0.05, f"embedding {len(real_texts):,} real training documents (in memory only)")
            real_emb = embed_texts(real_texts, emb, progress=lambda f, m: job.report(0.05 + 0.8 * f, m))
            syn_emb = embed_texts(syn_texts, emb)
        job.report(0.9, "comparing long word sequences")
        rows = memorisation_check(syn_texts, real_texts, synthetic_embeddings=syn_emb, real_embeddings=real_emb)
        job.report(1.0, "memorisation check done")
        return {"rows": rows, "documents": docs, "real_texts": real_texts}

    return start_job(state, "memorisation", "memorisation check", work)
