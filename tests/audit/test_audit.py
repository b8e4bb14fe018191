"""Empirical privacy audit (issue 11 §5): it flags broken mechanisms and passes the real pipeline.

Small synthetic corpora and a tiny public vocabulary built here; a deterministic hashing embedder; seeded
audits (NumPy noise) so that the verdicts are reproducible. Each document starts with a term of its own, so
with S = 1 every document contributes exactly one distinct term to the vocabulary histogram.
"""

from __future__ import annotations

import dataclasses

import itertools
import json
import math
import re
import stat
import string
import threading
from pathlib import Path

import numpy as np
import pytest

from app_helpers import fast_env  # noqa: F401 (fixture)

from dpkps_core import audit
from dpkps_core.corpus import Corpus
from dpkps_core.dp.release import ReleaseContext
from dpkps_core.dp.rng import NoiseSource
from dpkps_core.embeddings import HashingEmbedder
from dpkps_core.errors import ParameterError
from dpkps_core.method.config import SamplingConfig
from dpkps_core.method.split import CorpusSplit
from dpkps_core.method.vocabulary import PublicVocabulary

CLASSES = ("blue", "red")


def _words(prefix: str, n: int) -> list[str]:
    return [prefix + "".join(t) for t in itertools.islice(itertools.product(string.ascii_lowercase, repeat=3), n)]


def synthetic(n_docs: int, *, test_fraction: float = 0.2, eps_voc: float = 0.5, eps_kde: float = 0.1
              ) -> tuple[Corpus, PublicVocabulary, SamplingConfig]:
    """``n_docs`` documents "<own term> <topic term> <topic term>." in two classes, V = own terms + topic terms +
    a pool of rare terms no document uses (the canaries' pool), N = |V| so that all of V is released."""
    own = _words("u", n_docs)
    topics = {"red": _words("r", 5), "blue": _words("b", 5)}
    texts, labels = [], []
    for i, term in enumerate(own):
        label = CLASSES[i % 2]
        t = topics[label]
        texts.append(f"{term} {t[i % 5]} {t[(i + 1) % 5]}.")
        labels.append(label)
    corpus = Corpus(texts=tuple(texts), labels=tuple(labels), name="synthetic", source="tests/audit/test_audit.py")
    if hasattr(corpus, "with_classes"):
        corpus = corpus.with_classes(CLASSES)
    terms = own + topics["red"] + topics["blue"] + _words("zq", 40)
    vocab = PublicVocabulary(name="tiny", terms=tuple(terms), licence="test data", source="tests/audit/test_audit.py")
    config = SamplingConfig(corpus="synthetic", vocabulary="tiny", eps_voc=eps_voc, eps_kde=eps_kde, terms_per_doc=1,
                            vocab_size=len(terms), length=3, per_class=4, bandwidth=0.0, test_fraction=test_fraction)
    return corpus, vocab, config


def settings(**kw) -> audit.AuditSettings:
    base = dict(trials=12, vocabulary_trials=1500, density_trials=60, seed=7, canary_documents=0)
    base.update(kw)
    return audit.AuditSettings(**base)


# ------------------------------------------------------------------------------------------- the statistics

def test_clopper_pearson_and_the_lower_bound() -> None:
    lo, up = audit.clopper_pearson(0, 10, 0.05)
    assert lo == 0.0 and up == pytest.approx(1 - 0.05 ** (1 / 10))
    lo, up = audit.clopper_pearson(10, 10, 0.05)
    assert up == 1.0 and lo == pytest.approx(0.05 ** (1 / 10))
    lo, up = audit.clopper_pearson(30, 100, 0.025)
    assert 0.21 < lo < 0.3 < up < 0.4
    expected = math.log(0.05 ** 0.1 / (1 - 0.05 ** 0.1))
    assert audit.epsilon_lower_bound(10, 10, 0, 10, 0.05) == pytest.approx(expected)
    assert audit.max_certifiable_epsilon(10, 0.05) == pytest.approx(expected)
    assert audit.epsilon_lower_bound(5, 10, 5, 10, 0.05) == 0.0  # equal rates: no evidence, floored at 0


def test_choose_event_separates_and_picks_the_direction() -> None:
    a, b = np.zeros(50), np.ones(50)
    assert audit.choose_event(a, b, 0.01) == {"threshold": 1.0, "side": "≥", "numerator": "B"}
    got = audit.choose_event(b, a, 0.01)  # same separation, the other neighbour on top
    assert got["numerator"] == "A" and got["side"] == "≥"
    rng = np.random.default_rng(0)
    same = audit.choose_event(rng.normal(size=40), rng.normal(size=40), 0.01)
    assert same["side"] in ("≥", "<")  # no separation: some event, its bound will be ≈ 0


def test_settings_are_validated() -> None:
    with pytest.raises(ParameterError, match="trials"):
        audit.AuditSettings(trials=2).validate()
    with pytest.raises(ParameterError, match="confidence"):
        audit.AuditSettings(confidence=1.5).validate()
    with pytest.raises(ParameterError, match="sampler"):
        audit.AuditSettings(noise_sampler="dice").validate()
    with pytest.raises(TypeError):
        audit.AuditSettings(50)  # keyword-only


# ------------------------------------------------------------------------------------------- the verdicts

def test_the_real_pipeline_passes() -> None:
    corpus, vocab, config = synthetic(120)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                             settings=settings(canary_documents=2))
    r = result.to_dict()
    assert not result.violation and result.verdict.startswith("consistent with ε = 0.6")
    assert result.lower_bound <= result.claimed_epsilon == pytest.approx(0.6)
    assert r["vocabulary_stage_lower_bound"] <= config.eps_voc
    assert re.fullmatch(r"empirical_epsilon_lower_bound: \d+\.\d{3} \(claimed: 0\.6\)", result.line())
    nb = r["neighbours"]
    assert nb["D⁻"]["training_documents_moved"] == 0 and nb["D⁺"]["training_documents_moved"] == 0
    assert nb["D⁺"]["canary_in_training_part"] and nb["D⁺"]["canary_terms"][0].startswith("zq")
    assert nb["D⁻"]["training_documents"] == nb["D"]["training_documents"] - 1
    assert "warnings" not in r
    assert r["trials_per_neighbour"] == 12 and r["vocabulary_trials_per_neighbour"] == 1500
    assert {e["stage"] for e in result.events} == {"vocabulary", "density", "release"} and len(result.events) == 8
    assert "charged nothing" in r["ledger"] and r["private"] is True
    ex = result.exposure
    assert ex is not None and ex["canaries"] == 2 and ex["planted_in_training_part"] == 2
    assert all(t.startswith("zq") for c in ex["per_canary"] for t in c["terms"])
    md = audit.render_markdown(result)
    assert "PRIVATE" in md and result.line() in md and "Canary exposure" in md and "LOWER bound" in md
    json.dumps(r)  # JSON-ready


def test_flags_noise_added_only_to_observed_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken mechanism (a): Laplace noise only on terms seen in D — a zero count is released exactly."""
    import dpkps_core.dp.vocabulary as dpv

    def leaky(counts, *, epsilon, terms_per_doc, noise):
        counts = np.asarray(counts, dtype=np.float64)
        out = counts.copy()
        seen = counts > 0
        out[seen] += noise.laplace(terms_per_doc / epsilon, int(seen.sum()))
        return out

    monkeypatch.setattr(dpv, "noisy_term_histogram", leaky)
    corpus, vocab, config = synthetic(60)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16), settings=settings())
    assert result.violation and result.verdict.startswith("VIOLATION")
    assert result.lower_bound > 3 * result.claimed_epsilon  # far above the claimed ε = 0.6
    best = result.best_event()
    assert best["stage"] == "vocabulary" and best["statistic"] == "vocabulary_score"


def test_flags_a_split_that_reshuffles_the_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken mechanism (b): the split depends on the corpus size, so one document more or less moves many."""
    import dpkps_core.method.pipeline as pl

    def reshuffling_split(first, *args, test_fraction=0.2, client_fraction=0.0, seed=0, **kwargs):
        n = len(first)
        perm = np.random.default_rng(n).permutation(n)
        k = int(round(test_fraction * n))
        return CorpusSplit(train=tuple(sorted(perm[k:].tolist())), test=tuple(sorted(perm[:k].tolist())))

    name = "split_documents" if hasattr(pl, "split_documents") else "split_corpus"  # the one run_sampling calls
    monkeypatch.setattr(pl, name, reshuffling_split)
    corpus, vocab, config = synthetic(400, test_fraction=0.5)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16), settings=settings())
    r = result.to_dict()
    assert result.violation and result.lower_bound > 3 * result.claimed_epsilon
    assert r["neighbours"]["D⁻"]["training_documents_moved"] > 50
    assert any("split" in w for w in r["warnings"])


def test_flags_a_density_with_too_little_noise(monkeypatch: pytest.MonkeyPatch) -> None:
    """Broken mechanism (c): the keyphrase density charges ε_kde but adds noise for 1000·ε_kde (a scale bug: the
    noise drawn is 1000× too small; charging 1000·ε_kde instead is refused by the admission ticket); the density
    stage sees the removed document's own term vanish from its class's sequences."""
    import dpkps_core.method.pipeline as pl

    real = pl.build_smoothed_histogram_density

    class Quieter(NoiseSource):
        """The release's noise source with every Laplace scale divided by 1000 (a NoiseSource, so that it travels in
        a ReleaseContext; everything else is the wrapped source's)."""

        def __init__(self, inner):  # no super().__init__: every other attribute is the inner source's
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self._inner, name)

        def add_laplace(self, values, *, scale, **kw):
            return self._inner.add_laplace(values, scale=scale / 1000, **kw)

    def too_little_noise(*args, context, **kwargs):
        return real(*args, context=ReleaseContext(noise=Quieter(context.noise), ledger=context.ledger), **kwargs)

    monkeypatch.setattr(pl, "build_smoothed_histogram_density", too_little_noise)
    corpus, vocab, config = synthetic(60)
    config = dataclasses.replace(config, per_class=20)
    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=16),
                             settings=settings(trials=6, vocabulary_trials=200, density_trials=300))
    r = result.to_dict()
    assert result.violation and "density step" in result.verdict
    assert r["density_stage_lower_bound"] > 5 * config.eps_kde
    assert r["stages"]["density"]["violation"] and not r["stages"]["vocabulary"]["violation"]


# ------------------------------------------------------------------------------------------- side effects

def test_embeddings_stay_in_memory_and_nothing_is_written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import dpkps_core.embeddings as emb

    monkeypatch.setenv("DPKPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)

    def no_cache(*args, **kwargs):
        raise AssertionError("the audit must not open the persistent embedding cache")

    monkeypatch.setattr(emb.EmbeddingCache, "__init__", no_cache)
    calls: list[str] = []

    class Counting(HashingEmbedder):
        def encode(self, texts, batch_size=0):
            calls.extend(texts)
            return super().encode(texts, batch_size)

    corpus, vocab, config = synthetic(40)
    audit.run_audit(corpus, config, vocabulary=vocab, embedder=Counting(dim=8),
                    settings=settings(trials=4, vocabulary_trials=20, canary_documents=1))
    assert len(calls) == len(set(calls))  # every term embedded once, then served from memory
    assert not list(tmp_path.rglob("*"))  # no cache, no run folder, no report


def test_cancel_keeps_finished_rounds_or_says_it_was_too_early() -> None:
    corpus, vocab, config = synthetic(40)
    cancel = threading.Event()
    seen: list[str] = []

    def progress(frac: float, message: str) -> None:
        seen.append(message)
        if "trial 6/" in message:
            cancel.set()

    result = audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=8),
                             settings=settings(trials=50, vocabulary_trials=50), progress=progress, cancel=cancel)
    assert result.info["cancelled"] and 4 <= result.info["trials_per_neighbour"] < 50
    early = threading.Event()
    early.set()
    with pytest.raises(ParameterError, match="stopped"):
        audit.run_audit(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=8),
                        settings=settings(trials=50, vocabulary_trials=50), cancel=early)


def test_time_estimate_extrapolates_a_measured_trial() -> None:
    corpus, vocab, config = synthetic(40)
    est = audit.estimate_audit_time(corpus, config, vocabulary=vocab, embedder=HashingEmbedder(dim=8),
                                    settings=audit.AuditSettings(trials=30, canary_documents=2))
    assert est["neighbours"] == 3 and est["trials"] == 30
    assert est["estimated_seconds"] >= est["seconds_per_trial"] * 3 * 29 and est["vocabulary_trials"] >= 60


# ------------------------------------------------------------------------------------------- the command line

def test_cli_audit_prints_the_bound_and_writes_a_private_report(tmp_path: Path, capsys,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from dpkps_core.cli import audit as cli_audit
    from dpkps_core.cli import main

    monkeypatch.setattr(cli_audit, "get_embedder", lambda name: HashingEmbedder(dim=16))  # no model load here

    corpus, vocab, _ = synthetic(60)
    csv = tmp_path / "private.csv"
    rows = (f"{t} Written for the audit test.,{y}" for t, y in zip(corpus.texts, corpus.labels))
    csv.write_text("text,label\n" + "\n".join(rows) + "\n")
    vfile = tmp_path / "vocab.txt"
    vfile.write_text("\n".join(vocab.terms) + "\n")
    out = tmp_path / "audit"
    argv = ["audit", "--corpus", str(csv), "--vocabulary", str(vfile), "--eps-voc", "0.5", "--eps-kde", "0.5",
            "-S", "1", "-N", str(len(vocab)), "--length", "3", "--per-class", "3", "--bandwidth", "0",
            "--trials", "6", "--vocabulary-trials", "100", "--density-trials", "20", "--canaries", "1",
            "--audit-seed", "1", "--quiet",
            "--out", str(out)]
    argv += ["--classes", ",".join(CLASSES)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^empirical_epsilon_lower_bound: \d+\.\d{3} \(claimed: 1\)$", printed, re.M)
    assert "consistent with ε = 1" in printed and "charged nothing" in printed
    report = json.loads((out / "audit_report.json").read_text())
    assert report["private"] is True and report["trials_per_neighbour"] == 6
    for name in ("audit_report.json", "audit_report.md"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600
    assert sorted(p.name for p in out.iterdir()) == ["audit_report.json", "audit_report.md"]
    assert corpus.texts[0] not in printed  # no document text


def test_audit_reports_can_never_enter_a_release_bundle() -> None:
    from dpkps_core.errors import ExportError
    from dpkps_core.dossier.export import check_allowed

    for name in ("audit_report.json", "audit_report.md"):
        with pytest.raises(ExportError):
            check_allowed(name)


# ------------------------------------------------------------------------------------------- the app page

@pytest.mark.model
@pytest.mark.assets
@pytest.mark.slow
def test_app_audit_page_estimates_runs_in_the_background_and_charges_nothing(fast_env: Path) -> None:
    from app_helpers import click, goto, ledger_total, new_app, wait_job

    at = new_app()
    spent = ledger_total(at)
    goto(at, "audit")
    assert any("charges nothing to the privacy ledger" in c for c in at.caption.values)
    assert any("private — local only" in md.value for md in at.markdown)
    click(at, "Estimate the time")
    assert any("estimated" in c and "trials on each of 3" in c for c in at.caption.values)
    click(at, "Run the audit")
    job = wait_job(at, "audit", timeout=300)
    assert job.error is None, job.error
    result = job.result["result"]
    assert result.info["trials_per_neighbour"] == 4 and result.info["vocabulary_trials_per_neighbour"] == 40
    assert result.info["rows"]["origin"].startswith("demo:")  # neighbours built on the demo's raw records
    assert all(p["documents_changed"] == 0 for p in result.info["loader_probes"])
    assert [c.value for c in at.code] == [result.line()]
    # 4 trials cannot reach the claimed ε = 10: no green tick, an inconclusive warning that says what it would need
    assert result.kind == audit.INCONCLUSIVE and not any(s.value == result.verdict for s in at.success)
    assert any(w.value == result.verdict and "evaluation trials per neighbour" in w.value for w in at.warning)
    assert any(m.label == "Empirical ε lower bound" for m in at.metric)
    assert len(at.get("plotly_chart")) == 3 and len(at.get("download_button")) == 2
    assert ledger_total(at) == spent  # the audit charged nothing
    assert not any(p.name.startswith("audit") for p in fast_env.rglob("*"))  # nothing in a run folder
