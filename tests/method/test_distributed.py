"""The counting passes' maps on a Dask cluster (issue 31 §6; :mod:`dpkps_core.method.distributed`): a LocalCluster
(threads, ``processes=False``: light) gives the same counts and keyphrases as the local run, the person unit
included; the terms are sent once; the deployment setting names the scheduler."""

from __future__ import annotations

import numpy as np
import pytest

from dpkps_core.method import distributed, streaming_counts
from dpkps_core.errors import ParameterError
from dpkps_core.method.streaming_counts import chunked, keyphrase_pass, occurrences_pass, vocabulary_pass

dask_distributed = pytest.importorskip("distributed")

TERMS = tuple(f"w{i}" for i in range(30)) + ("heart attack", "blood pressure")
CLASSES = ("a", "b")


def _docs(n: int = 120) -> tuple[list[str], list[str], list[str]]:
    rng = np.random.default_rng(4)
    texts = [" ".join(rng.choice(TERMS, size=rng.integers(0, 12))) + " end" for _ in range(n)]
    labels = ["ab"[i % 2] if i % 7 else "z" for i in range(n)]
    persons = [f"p{i % 17}" for i in range(n)]
    return texts, labels, persons


@pytest.fixture(scope="module")
def client():
    cluster = dask_distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                            dashboard_address=None)
    c = dask_distributed.Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


@pytest.mark.parametrize("by_person", [False, True])
def test_the_passes_on_a_cluster_equal_the_local_passes(client, by_person):
    texts, labels, persons = _docs()
    kw = dict(terms_per_doc=3, by_person=by_person)
    local = vocabulary_pass(chunked(texts, labels, persons, size=1000), TERMS, workers=1, **kw)
    remote = vocabulary_pass(chunked(texts, labels, persons, size=7), TERMS, engine=client, **kw)
    np.testing.assert_array_equal(local.counts, remote.counts)
    assert (local.documents, local.truncated) == (remote.documents, remote.truncated)
    hist_local = keyphrase_pass(chunked(texts, labels, persons, size=1000), TERMS, classes=CLASSES, max_per_doc=4,
                                by_person=by_person, workers=1)
    hist_remote = keyphrase_pass(chunked(texts, labels, persons, size=9), TERMS, classes=CLASSES, max_per_doc=4,
                                 by_person=by_person, engine=client)
    np.testing.assert_allclose(hist_remote, hist_local, rtol=1e-9, atol=1e-12)
    kp_local = occurrences_pass(chunked(texts, size=1000), TERMS, max_per_doc=4, workers=1)
    kp_remote = occurrences_pass(chunked(texts, size=11), TERMS, max_per_doc=4, engine=client)
    assert kp_local == kp_remote and len(kp_remote) == len(texts)


def test_the_scheduler_setting(monkeypatch, client):
    monkeypatch.delenv(distributed.ENV_SCHEDULER, raising=False)
    assert streaming_counts.default_engine() is None  # the local pool by default
    with pytest.raises(ParameterError, match="DPKPS_DASK_SCHEDULER"):
        distributed.cluster_client()
    monkeypatch.setenv(distributed.ENV_SCHEDULER, client.scheduler.address)
    engine = streaming_counts.default_engine()
    try:
        assert engine is distributed.cluster_client()  # one client per address
        texts, labels, persons = _docs(30)
        got = vocabulary_pass(chunked(texts, size=8), TERMS, terms_per_doc=2)
        want = vocabulary_pass(chunked(texts, size=8), TERMS, terms_per_doc=2, engine=streaming_counts.LOCAL,
                               workers=1)
        np.testing.assert_array_equal(got.counts, want.counts)
    finally:
        distributed._CLIENTS.pop(client.scheduler.address, None)
        engine.close()
