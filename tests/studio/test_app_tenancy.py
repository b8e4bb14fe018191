"""AppTest: tenancy (issue 35 §1–§2; docs/DESIGN.md §2.0 "Tenancy"; docs/PRIVACY.md "Tenancy").

Two signed-in users, alice and bob (login mocked through ``AppTest.user``, as in test_app_auth.py: there is no OIDC
provider here, so a real-browser two-user test is not part of this suite), each in their own sessions, on one
server: one runs root and one ledger folder (``$DPKPS_RUNS_DIR``, ``$DPKPS_LEDGER_DIR``, per test).

* bob cannot list, reopen (page 8 or ``?run=``), download or delete alice's run; her run's name answers exactly like
  a name that does not exist;
* bob's sidebar and page 2 show nothing of alice's releases; caps are per account;
* an administrator named in ``[dpkps] admins`` sees both accounts' runs and ledgers, read-only;
* reopening compares the corpus's content fingerprint, not its file name;
* a session whose signed-in identity changes starts afresh.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_helpers import (state_of, APP, TIMEOUT, assert_clean, click, fast_env, goto, metrics, private_vocabulary,
                         # noqa: F401
                         toy_csv, upload_corpus, walk)
from dpkps_core.ledger_store import STORE_FILE, ledger_root
from dpkps_core.records.runfolder import RELEASABLE_FILES, list_runs
from studio.tenancy import TENANTS_DIR, tenant_id

pytestmark = [pytest.mark.model, pytest.mark.assets, pytest.mark.slow, pytest.mark.usefixtures("fast_env")]

ISSUER = "https://idp.example"
AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "not-a-real-secret-0123456789",
        "client_id": "studio", "client_secret": "xyz", "server_metadata_url": "https://idp.example/.well-known/x"}
SECRETS = {"auth": AUTH, "dpkps": {"admins": [f"{ISSUER}|officer-sub-3"]}}
ALICE = {"is_logged_in": True, "sub": "alice-sub-1", "iss": ISSUER, "email": "alice@example.org"}
BOB = {"is_logged_in": True, "sub": "bob-sub-2", "iss": ISSUER, "email": "bob@example.org"}
#: The administrator; a display name shared with alice changes nothing (the tenant is the subject).
OFFICER = {"is_logged_in": True, "sub": "officer-sub-3", "iss": ISSUER, "email": "alice@example.org"}
#: A name of the form run folders have, of no run at all.
NO_SUCH_RUN = "run-20000101-000000-abcd1234-0a0b0c"


def signed_in(user: dict, **query: str) -> AppTest:
    """A new browser session of ``user`` (on page 1, after its first run); ``query``: the URL's parameters."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.secrets.update(SECRETS)
    at.user = dict(user)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return assert_clean(at)


def spent(at: AppTest) -> str:
    found = [m.value for m in at.metric if m.label.endswith("ε spent / cap")]
    assert found, [m.label for m in at.metric]
    return found[0]


def texts(at: AppTest) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "success") for e in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def shown_tables(at: AppTest) -> str:
    return "\n".join(df.value.to_csv() for df in at.dataframe)


def table(at: AppTest, *columns: str):
    """The first table on the page that has every one of ``columns``."""
    for df in at.dataframe:
        if set(columns) <= set(df.value.columns):
            return df.value
    raise AssertionError(f"no table with {columns}")


def downloads(at: AppTest) -> list[str]:
    """The page's download buttons (a run without LLM documents offers its bundle after a tick-box)."""
    if [c for c in at.checkbox if c.key == "export_without_documents" and not c.value]:
        at.checkbox(key="export_without_documents").check().run()
    return [d.proto.label for d in at.get("download_button")]


def test_tenant_ids_are_one_way_digests_of_issuer_and_subject() -> None:
    a = tenant_id("alice-sub-1", ISSUER)
    assert a == tenant_id("alice-sub-1", ISSUER) and len(a) == 32 and int(a, 16) >= 0
    assert "alice" not in a and a != tenant_id("alice-sub-1", "https://other.example") != tenant_id("alice-sub-1")


def test_another_account_cannot_list_reopen_download_or_delete_a_run(fast_env: Path) -> None:
    alice = signed_in(ALICE)
    walk(alice, "sequences")                                  # Ṽ, densities, sequences
    run = Path(state_of(alice).run.run_dir)
    goto(alice, "export")
    assert run.name in shown_tables(alice) and "Download the release bundle (ZIP)" in downloads(alice)

    bob = signed_in(BOB)                                      # another account, on the same server
    goto(bob, "export")
    assert run.name not in shown_tables(bob) + texts(bob)
    assert not downloads(bob) and not [b for b in bob.button if b.label.startswith(("Reopen", "Delete"))]
    assert "Nothing to export yet" in texts(bob)
    assert not list_runs(fast_env / TENANTS_DIR / tenant_id(BOB["sub"], ISSUER))

    # ?run=<alice's run> answers exactly like a run that does not exist
    by_url = signed_in(BOB, run=run.name)
    missing = signed_in(BOB, run=NO_SUCH_RUN)
    assert state_of(by_url).run.run_dir is None and private_vocabulary(by_url) is None
    said = [i.value for i in by_url.info if run.name in i.value]
    said_missing = [i.value for i in missing.info if NO_SUCH_RUN in i.value]
    assert said and "does not exist" in said[0]
    assert [m.replace(run.name, "X") for m in said] == [m.replace(NO_SUCH_RUN, "X") for m in said_missing]
    goto(by_url, "export")
    assert run.name not in shown_tables(by_url) + texts(by_url) and not downloads(by_url)
    assert run.is_dir() and (run / "sequences.jsonl").is_file()   # nothing of alice's was deleted

    goto(alice, "export")                                     # alice still has her run, with its bundle
    assert run.name in shown_tables(alice) and "Download the release bundle (ZIP)" in downloads(alice)
    # alice's run is under her own folder, named by a digest of issuer and subject — never the subject or email
    assert run.parent == fast_env / TENANTS_DIR / tenant_id(ALICE["sub"], ISSUER)
    assert "alice" not in str(run.relative_to(fast_env))


def test_ledger_figures_and_caps_are_per_account() -> None:
    alice = signed_in(ALICE)
    goto(alice, "private-vocabulary")
    click(alice, "Build Ṽ (spends ε_voc = 5)")
    assert spent(alice) == "10 / 20"  # ε_voc 5 + ε_kde 5 reserved with it (login: issue 35 part 8)

    bob = signed_in(BOB)                                      # the same (demo) documents, another account
    assert state_of(bob).loaded.corpus_id == state_of(alice).loaded.corpus_id
    assert spent(bob) == "0 / 20"
    assert "No release has used this corpus's documents yet." in texts(bob)
    goto(bob, "budget")                                       # page 2: the release list and the cap history
    assert [e.label for e in bob.expander if e.label.startswith("Every release that touched")] == [
        "Every release that touched this corpus's documents (0) — the persistent ledger"]
    assert "Nothing has been released from this corpus yet." in texts(bob)
    assert state_of(alice).run.run_dir and Path(state_of(alice).run.run_dir).name not in texts(bob)
    assert "your own ledger" in texts(bob)

    # caps: bob lowers his, then raises it (asked, recorded) — alice's documents keep theirs
    bob.number_input(key="_w.cap_draft_value").set_value(5.0).run()
    assert spent(bob) == "0 / 5"
    bob.number_input(key="_w.cap_draft_value").set_value(60.0).run()
    click(bob, "Raise the cap to 60")
    assert spent(bob) == "0 / 60"
    again = signed_in(ALICE)                                  # a new session of alice
    assert spent(again) == "10 / 20"
    goto(again, "budget")
    assert not [e for e in again.expander if e.label.startswith("Cap changes")]
    assert [e.label for e in again.expander if e.label.startswith("Every release that touched")] == [
        "Every release that touched this corpus's documents (1) — the persistent ledger"]

    # two stores, one per account; no shared store was made
    root = ledger_root()
    for user in (ALICE, BOB):
        assert (root / TENANTS_DIR / tenant_id(user["sub"], ISSUER) / STORE_FILE).is_file()
    assert not (root / STORE_FILE).exists()


def test_an_administrator_sees_every_account_read_only() -> None:
    runs = {}
    for user in (ALICE, BOB):
        at = signed_in(user)
        walk(at, "private-vocabulary")                        # Ṽ on the demo corpus (ε_voc = 5)
        runs[user["sub"]] = Path(state_of(at).run.run_dir).name
    officer = signed_in(OFFICER)
    assert any("administrator" in c.value for c in officer.sidebar.caption)
    assert spent(officer) == "0 / 20"                         # the officer's own ledger: nothing of theirs
    goto(officer, "export")
    assert "Every account (administrator, read-only)" in [s.value for s in officer.subheader]
    every = table(officer, "tenant", "run")
    assert set(every["run"]) == set(runs.values())
    accounts = table(officer, "ledger releases")
    releases = dict(zip(accounts["tenant"], accounts["ledger releases"]))
    assert {"alice@example.org", "bob@example.org"} <= set(accounts["account"])
    assert [releases[tenant_id(u["sub"], ISSUER)[:12]] for u in (ALICE, BOB, OFFICER)] == [1, 1, 0]
    corpus = table(officer, "most-used document: ε")
    # the officer, alice, bob (each Ṽ reserved ε_kde 5 for its run's densities: issue 35 part 8)
    assert sorted(corpus["most-used document: ε"]) == [0.0, 10.0, 10.0]
    assert metrics(officer)["Across accounts: the most-used document's total ε"] == "20"
    # read-only: nothing to reopen, download or delete, and nothing of the others' was changed or spent
    assert not [b for b in officer.button if b.label.startswith(("Reopen", "Delete"))]
    assert not downloads(officer)
    assert spent(signed_in(ALICE)) == "10 / 20"
    bob = signed_in(BOB)                                      # not an administrator: no such section
    goto(bob, "export")
    assert "Every account" not in texts(bob) + " ".join(s.value for s in bob.subheader)
    assert runs[ALICE["sub"]] not in shown_tables(bob)


def test_reopening_needs_the_same_content_not_the_same_file_name(fast_env: Path) -> None:
    """Without login (one local user: the folders as they always were) — the run records its corpus's content
    fingerprint in a private file; a different file under the same name is refused, the same content under another
    name is accepted, and the fingerprint never enters the bundle."""
    from app_helpers import new_app
    from dpkps_core.dossier.export import collect_bundle

    a = new_app()
    upload_corpus(a, toy_csv(20), "mine.csv")
    walk(a, "sequences")
    run = Path(state_of(a).run.run_dir)

    b = new_app()                                             # another file, the same name and columns
    upload_corpus(b, toy_csv(20, seed=5), "mine.csv")
    goto(b, "export")
    b.selectbox(key="_w.export_run").set_value(str(run)).run()
    click(b, "Reopen this run in the app", clean=False)
    assert any("content is not that corpus's" in e.value for e in b.error), texts(b)
    assert state_of(b).run.run_dir is None and private_vocabulary(b) is None

    c = new_app()                                             # the same content under another name
    upload_corpus(c, toy_csv(20), "renamed-copy.csv")
    goto(c, "export")
    c.selectbox(key="_w.export_run").set_value(str(run)).run()
    click(c, "Reopen this run in the app")
    assert state_of(c).run.run_dir == str(run) and private_vocabulary(c).terms == private_vocabulary(a).terms

    assert run.parent == fast_env and not (fast_env / TENANTS_DIR).exists()   # no login: nothing changes
    assert (ledger_root() / STORE_FILE).is_file()
    recorded = run / "corpus_fingerprint.json"                # private (0600), never in the bundle
    assert recorded.is_file() and oct(recorded.stat().st_mode & 0o777) == "0o600"
    digest = json.loads(recorded.read_text())["content_sha256"]
    parts = collect_bundle(run)
    assert "corpus_fingerprint.json" not in parts and "corpus_fingerprint.json" not in RELEASABLE_FILES
    assert not any(digest in b.decode("utf-8", "replace") for b in parts.values())


def test_a_session_whose_account_changes_starts_afresh() -> None:
    at = signed_in(ALICE)
    goto(at, "private-vocabulary")
    click(at, "Build Ṽ (spends ε_voc = 5)")
    run = state_of(at).run.run_dir
    assert run and spent(at) == "10 / 20"  # ε_voc 5 + ε_kde 5 reserved with it (login: issue 35 part 8)
    at.user = dict(BOB)                                       # another identity in the same browser session
    at.run()
    assert_clean(at)
    assert state_of(at).run.run_dir is None and str(run) not in state_of(at).run.run_dirs
    assert spent(at) == "0 / 20" and "No release has used this corpus's documents yet." in texts(at)
