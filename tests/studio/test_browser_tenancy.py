"""Tenancy in the real browser (issue 35 "Done when"; docs/PRIVACY.md "Tenancy"; ``studio.tenancy``): two signed-in
users and a privacy officer, each in their own Chromium context (their own cookies), on one ``streamlit run app.py``
whose ``[auth]`` section points at a local OpenID Connect provider (tests/oidc_provider.py: discovery, the
authorization-code flow with PKCE, an RS256 ID token checked by Streamlit's Authlib client). Nothing of the login is
mocked: each user presses "Log in", goes through the provider and back through ``/oauth2callback``, and the app
reads the signed cookie's ``iss`` and ``sub``.

* alice builds a run (Ṽ, densities, sequences) on the demo corpus; bob's page 8 lists none of her runs and offers no
  reopen, download or delete of it; ``?run=<alice's run>`` answers exactly like a run name that does not exist;
* bob's sidebar and page 2 show nothing of alice's releases (0 spent, no release listed);
* caps are per account: bob raises his cap and builds his own Ṽ; alice's figures and cap do not move;
* the officer (``[dpkps] admins`` = the provider's issuer and the officer's subject) sees both accounts' runs on page
  8, read-only (no reopen, download or delete; ``?run=`` does not reopen another account's run either); nothing of
  alice's or bob's is changed or spent;
* one browser, another account: bob logs out, alice signs in (the provider now says alice): her runs and figures,
  nothing of bob's;
* on disk: each account's runs and ledger under its own digest-named folder, no shared ledger store; the ledger
  command (``dpkps ledger --json``) on each account's ledger folder lists that account's releases and cap only, and on
  the ledger root nothing of either.

The app's secrets are a temporary ``secrets.toml`` given through ``STREAMLIT_SECRETS_FILES`` (Streamlit's
``secrets.files`` option), so the repository's ``.streamlit`` folder is never touched. Test fast mode (N = 200).
Screenshots: ``test-artifacts/screenshots/tenancy_*.png``; the server log: ``test-artifacts/tenancy_streamlit.log``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
import zipfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from benchmarks.app_server import free_port
from browser_server import CHROMIUM, CHROMIUM_ARGS, ROOT, SHOTS, require_chromium, streamlit_server
from oidc_provider import OIDCProvider

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT_MS = 120_000
T0 = time.monotonic()
LOG = ROOT / "test-artifacts" / "tenancy_streamlit.log"
#: A name of the form run folders have, of no run at all.
NO_SUCH_RUN = "run-20000101-000000-abcd1234-0a0b0c"


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        raise TypeError("nested tables are written as sections")
    return json.dumps(value)  # JSON strings and lists of strings are valid TOML values


def write_secrets(path: Path, sections: dict[str, dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for name, body in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {_toml(v)}" for k, v in body.items()]
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    os.chmod(path, 0o600)
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The OIDC provider and the app, configured for it (login on; the officer an administrator)."""
    require_chromium()
    tmp = tmp_path_factory.mktemp("tenancy")
    port = free_port()
    with OIDCProvider() as idp:
        secrets_file = write_secrets(tmp / "secrets" / "secrets.toml", {
            "auth": idp.auth_secrets(f"http://localhost:{port}/oauth2callback", secrets.token_urlsafe(32)),
            "dpkps": {"admins": [idp.admin_id("officer")]}})
        env = dict(os.environ)
        env.update({"DPKPS_TEST_FAST": "1", "DPKPS_WARMUP": "0", "DPKPS_RUNS_DIR": str(tmp / "runs"),
                    "DPKPS_LEDGER_DIR": str(tmp / "ledgers"), "STREAMLIT_SECRETS_FILES": str(secrets_file),
                    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"})
        with streamlit_server(env, LOG, port=port) as url:
            yield {"url": url, "idp": idp, "runs": tmp / "runs", "ledgers": tmp / "ledgers", "tmp": tmp}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


class User:
    """One person in their own browser context (their own cookies at the app and at the provider)."""

    def __init__(self, browser: Any, stack: dict[str, Any], who: str) -> None:
        from playwright.sync_api import expect

        self.expect = expect
        self.who, self.url, self.idp = who, stack["url"], stack["idp"]
        self.context = browser.new_context(viewport={"width": 1400, "height": 1400}, accept_downloads=True)
        self.context.add_cookies([self.idp.cookie(who)])  # signed in at the provider as this user
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        expect.set_options(timeout=TIMEOUT_MS)
        SHOTS.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------------------ moves

    def idle(self) -> None:
        self.page.wait_for_timeout(300)
        self.page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]')
        self.page.wait_for_timeout(150)

    def see(self, text: str | re.Pattern[str]) -> None:
        self.expect(self.page.get_by_text(text).first).to_be_visible()

    def heading(self, text: str) -> None:
        """Wait for a page's heading; the app's "Something went wrong" box fails the test at once, with the
        server log's tail (the details are only there)."""
        broken = self.page.get_by_text(re.compile(r"^Something went wrong"))
        self.expect(self.page.get_by_role("heading", name=text).or_(broken).first).to_be_visible()
        if broken.count():
            self.shot("failure")
            pytest.fail(f"the app failed on {text!r}:\n" + LOG.read_text(errors="replace")[-3000:])
        self.idle()

    def sign_in(self) -> None:
        """The login screen, "Log in", the provider, back to page 1 signed in."""
        self.page.goto(self.url)
        self.see(re.compile("This deployment requires signing in"))
        assert "1 · Corpus" not in self.body()
        self.shot("login")
        self.idle()
        self.page.get_by_role("button", name="Log in").first.click()
        self.heading("1 · Corpus")
        self.see(f"Signed in as {self.idp.users[self.who].email}")

    def open(self, query: str = "") -> None:
        """A new tab of the same browser (a new app session, the same login cookie)."""
        self.page.close()
        self.page = self.context.new_page()
        self.page.goto(self.url + query)
        self.heading("1 · Corpus")

    def nav(self, title: str) -> None:
        self.idle()
        self.page.get_by_test_id("stSidebarNav").get_by_text(title, exact=False).first.click()
        self.heading(title)

    def click(self, name: str | re.Pattern[str]) -> None:
        self.idle()
        self.page.get_by_role("button", name=name).first.click()
        self.idle()

    def buttons(self, pattern: str) -> list[str]:
        return [t for t in self.page.get_by_role("button").all_inner_texts() if re.search(pattern, t)]

    def body(self) -> str:
        return self.page.inner_text("body")

    def sidebar(self) -> str:
        return self.page.get_by_test_id("stSidebar").inner_text()

    def grids(self) -> str:
        """The text of every dataframe on the page (Streamlit draws them on a canvas; the grid keeps an
        accessible copy of its cells in the DOM)."""
        return "\n".join(self.page.locator('[data-testid="stDataFrame"]').all_text_contents())

    def spent(self) -> str:
        """The sidebar's "most-used document: ε spent / cap" figure, once the sidebar's ledger is drawn."""
        metric = self.page.get_by_test_id("stSidebar").get_by_test_id("stMetric").filter(has_text="ε spent / cap")
        self.expect(metric.first).to_be_visible()
        self.idle()
        return metric.first.get_by_test_id("stMetricValue").inner_text().strip()

    def run_in_url(self) -> str:
        self.page.wait_for_function("() => /[?&]run=/.test(location.search)")
        m = re.search(r"[?&]run=([^&]+)", self.page.url)
        assert m, self.page.url
        return m.group(1)

    def releases(self) -> int:
        """Page 2: how many releases the ledger lists on this corpus's documents."""
        m = re.search(r"Every release that touched this corpus's documents \((\d+)\)", self.body())
        assert m, self.body()
        return int(m.group(1))

    def shot(self, label: str) -> None:
        print(f"{time.monotonic() - T0:6.1f}s {self.who} {label}", flush=True)
        self.page.screenshot(path=str(SHOTS / f"tenancy_{self.who}_{label}.png"), full_page=True)

    def build(self, *, densities: bool) -> str:
        """Ṽ (and the densities and 10 sequences) on the demo corpus; the run's name (from the URL)."""
        self.nav("Private vocabulary")
        self.click(re.compile(r"^Build Ṽ \(spends ε_voc"))
        self.see("Ṽ — the private vocabulary")
        if densities:
            self.nav("Keyphrase densities")
            self.click(re.compile(r"^Build densities \(spends ε_kde"))
            self.see("Highest-density terms per class")
            self.nav("Sequences")
            self.click("Sample 10 sequences (free)")
            self.see(re.compile(r"^10 sequences$"))
        return self.run_in_url()

    def close(self) -> None:
        self.context.close()


def tenant_folder(stack: dict[str, Any], root: str, who: str) -> Path:
    from studio.tenancy import TENANTS_DIR, tenant_id

    idp = stack["idp"]
    return stack[root] / TENANTS_DIR / tenant_id(idp.subject(who), idp.issuer)


def ledger_command(folder: Path) -> dict[str, Any]:
    """``dpkps ledger --corpus demo:bbc --json`` with ``$DPKPS_LEDGER_DIR`` = ``folder``."""
    import subprocess
    import sys

    env = {**os.environ, "DPKPS_LEDGER_DIR": str(folder), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", "import sys; from dpkps_core.cli import main; sys.exit(main())",
                          "ledger", "--corpus", "demo:bbc", "--json"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


def test_two_accounts_and_an_officer_through_a_real_login(stack: dict[str, Any], browser: Any, tmp_path: Path) -> None:
    from dpkps_core.ledger_store import STORE_FILE, LedgerStore

    global T0
    T0 = time.monotonic()
    users: dict[str, User] = {}

    def person(who: str) -> User:
        users[who] = User(browser, stack, who)
        return users[who]

    try:
        # ---------------------------------------------------------------- alice: a run with a bundle
        alice = person("alice")
        alice.sign_in()
        alice.shot("signed_in")
        assert alice.spent() == "0 / 20"
        alice_run = alice.build(densities=True)
        assert alice.spent() == "10 / 20"                               # ε_voc 5 + ε_kde 5
        alice_dir = tenant_folder(stack, "runs", "alice") / alice_run
        assert alice_dir.is_dir() and (alice_dir / "sequences.jsonl").is_file()
        assert "alice" not in str(alice_dir.relative_to(stack["runs"]))  # a digest, never the subject or email
        alice.nav("Vocabulary & budget")
        alice_releases = alice.releases()
        assert alice_releases > 0
        alice.nav("Export")
        alice.see("Your runs")
        assert alice_run in alice.grids()                                # the table's cells are read (see bob's)
        alice.page.get_by_text("Export this run without documents").first.click()  # no LLM documents: sequences
        alice.idle()
        with alice.page.expect_download() as info:
            alice.click("Download the release bundle (ZIP)")
        bundle = tmp_path / "alice.zip"
        info.value.save_as(bundle)
        with zipfile.ZipFile(bundle) as zf:
            assert json.loads(zf.read("privacy_report.json"))["epsilon_total"] == pytest.approx(10)
        alice.shot("export")

        # ---------------------------------------------------------------- bob: nothing of alice's
        bob = person("bob")
        bob.sign_in()
        assert bob.spent() == "0 / 20"                                   # the same demo documents, his own ledger
        assert "No release has used this corpus's documents yet." in bob.sidebar()
        assert "your own ledger" in bob.sidebar()
        bob.shot("signed_in")
        bob.nav("Export")
        bob.see("Nothing to export yet")
        assert alice_run not in bob.body() + bob.grids()
        assert not bob.buttons(r"^(Reopen|Delete|Download)")
        bob.shot("export_empty")
        bob.nav("Vocabulary & budget")
        bob.page.get_by_text(re.compile(r"^Every release that touched this corpus's documents \(0\)")).first.click()
        bob.see("Nothing has been released from this corpus yet.")
        assert alice_run not in bob.body() + bob.grids()
        bob.shot("budget")

        # ?run=<alice's run> answers like a name of no run at all
        said = {}
        for name in (alice_run, NO_SUCH_RUN):
            bob.open(f"/?run={name}")
            bob.see(re.compile(f"The run {name} named in this tab's address could not be reopened"))
            said[name] = [t.replace(name, "X") for t in bob.page.get_by_text(name).all_inner_texts()]
            assert "does not exist" in " ".join(said[name]), said[name]
            assert "Private vocabulary:" not in bob.sidebar()              # nothing was reopened
            bob.shot("url_" + ("alice" if name == alice_run else "missing"))
        assert said[alice_run] == said[NO_SUCH_RUN]
        bob.nav("Export")
        bob.see("Nothing to export yet")
        assert alice_run not in bob.body() + bob.grids()

        # caps are per account: bob raises his, then releases on the same documents
        bob.nav("Vocabulary & budget")
        box = bob.page.get_by_label(re.compile(r"^Cap on each document's total ε")).first
        box.fill("60")
        box.press("Enter")
        bob.idle()
        bob.click("Raise the cap to 60")
        bob.see(re.compile(r"Cap changed: 60"))
        assert bob.spent() == "0 / 60"
        bob_run = bob.build(densities=False)
        assert bob.spent() == "10 / 60"                                  # Ṽ 5 + the densities' 5 reserved with it
        bob.shot("own_release")

        alice.open()                                                    # a new tab of alice: her figures unmoved
        assert alice.spent() == "10 / 20"
        alice.nav("Vocabulary & budget")
        assert "Cap changes" not in alice.body()
        assert alice.releases() == alice_releases                        # bob's releases are not hers
        alice.nav("Export")
        seen = alice.body() + alice.grids()
        assert alice_run in seen and bob_run not in seen
        alice.shot("export_after_bob")

        # ---------------------------------------------------------------- the officer: both, read-only
        officer = person("officer")
        officer.sign_in()
        officer.see(re.compile("administrator"))
        assert officer.spent() == "0 / 20"                               # the officer's own ledger
        officer.nav("Export")
        officer.see("Every account (administrator, read-only)")
        officer.page.wait_for_timeout(1000)
        grids = officer.grids()
        assert alice_run in grids and bob_run in grids, grids
        assert not officer.buttons(r"^(Reopen|Delete|Download)")
        officer.shot("export_admin")
        officer.open(f"/?run={alice_run}")                               # read-only: not even by URL
        officer.see(re.compile(f"The run {alice_run} named in this tab's address could not be reopened"))
        assert "Private vocabulary:" not in officer.sidebar()

        # ---------------------------------------------------------------- one browser, another account
        # bob logs out and alice signs in in the same browser: alice's runs and figures, nothing of bob's
        bob.open()
        bob.click("Log out")
        bob.see(re.compile("This deployment requires signing in"))
        bob.context.add_cookies([stack["idp"].cookie("alice")])        # at the provider: now alice
        bob.page.get_by_role("button", name="Log in").first.click()
        bob.heading("1 · Corpus")
        bob.see("Signed in as alice@example.org")
        assert "bob@example.org" not in bob.sidebar()
        assert bob.spent() == "10 / 20"
        bob.nav("Export")
        seen = bob.body() + bob.grids()
        assert alice_run in seen and bob_run not in seen
        bob.shot("switched_to_alice")
    except Exception:
        for who, u in users.items():
            try:
                u.shot("failure")
            except Exception:  # noqa: BLE001 - the page may be gone
                pass
        raise
    finally:
        for u in users.values():
            u.close()

    # on disk: nothing of alice's or bob's changed by the others; one store per account, none shared
    assert alice_dir.is_dir() and (alice_dir / "sequences.jsonl").is_file()
    assert (tenant_folder(stack, "runs", "bob") / bob_run).is_dir()
    assert not (stack["ledgers"] / STORE_FILE).exists()
    for who in ("alice", "bob", "officer"):
        folder = tenant_folder(stack, "ledgers", who)
        assert (LedgerStore(folder).totals()["releases"] > 0) == (who != "officer"), who
    assert {p.name for p in stack["runs"].iterdir()} <= {"tenants"}     # no run outside a tenant's folder
    # the ledger command on each account's ledger folder: that account's releases and cap only; on the ledger root
    # (the shared store of the app without login): nothing of either
    runs = {"alice": alice_run, "bob": bob_run}
    for who, cap in (("alice", 20.0), ("bob", 60.0)):
        view = ledger_command(tenant_folder(stack, "ledgers", who))
        assert {r["run"] for r in view["releases"]} == {runs[who]}, (who, view["releases"])
        assert (view["cap_min"], view["cap_max"], view["largest_spend"]) == (cap, cap, 10.0), who
        assert bool(view["cap_history"]) == (who == "bob")
    shared = ledger_command(stack["ledgers"])
    assert shared["releases"] == [] and shared["largest_spend"] == 0 and shared["cap_history"] == []

    # every login went through the provider (authorize, token, keys)
    paths = [p for p, _ in stack["idp"].log]
    assert paths.count("/authorize") == 4 and paths.count("/token") == 4 and "/jwks" in paths


def test_the_provider_checks_what_a_real_one_checks() -> None:
    """The login above means something only if the provider refuses what a real one refuses: a wrong client
    secret, a replayed code, a wrong PKCE verifier, another redirect URI; and its ID token carries the nonce."""
    import base64
    import hashlib
    import urllib.error
    import urllib.parse
    import urllib.request

    from joserfc import jwt
    from joserfc.jwk import KeySet

    def get(url: str) -> tuple[int, dict[str, str]]:
        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a: Any, **k: Any) -> None:
                return None
        try:
            urllib.request.build_opener(NoRedirect).open(url)
        except urllib.error.HTTPError as exc:
            return exc.code, dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(exc.headers["Location"] or "").query))
        raise AssertionError("no redirect")

    def token(idp: OIDCProvider, **form: str) -> tuple[int, dict[str, Any]]:
        auth = base64.b64encode(f"{idp.client_id}:{form.pop('secret', idp.client_secret)}".encode()).decode()
        req = urllib.request.Request(idp.issuer + "/token", data=urllib.parse.urlencode(form).encode(),
                                     headers={"Authorization": f"Basic {auth}"})
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    redirect = "http://localhost:1/oauth2callback"
    with OIDCProvider() as idp:
        def code(user: str) -> str:
            status, back = get(idp.issuer + "/authorize?" + urllib.parse.urlencode({
                "response_type": "code", "client_id": idp.client_id, "redirect_uri": redirect, "state": "s1",
                "nonce": "n1", "login_hint": user, "code_challenge": challenge, "code_challenge_method": "S256"}))
            assert status == 302 and back["state"] == "s1"
            return back["code"]

        good = {"grant_type": "authorization_code", "redirect_uri": redirect, "code_verifier": verifier}
        assert token(idp, code=code("bob"), **{**good, "secret": "wrong"})[0] == 401
        assert token(idp, code=code("bob"), **{**good, "code_verifier": "x" * 43})[1]["error"] == "invalid_grant"
        assert token(idp, code=code("bob"), **{**good, "redirect_uri": "http://evil/cb"})[1]["error"] == "invalid_grant"
        c = code("bob")
        status, body = token(idp, code=c, **good)
        assert status == 200 and token(idp, code=c, **good)[1]["error"] == "invalid_grant"   # one use only
        with urllib.request.urlopen(idp.issuer + "/jwks") as r:
            claims = jwt.decode(body["id_token"], KeySet.import_key_set(json.loads(r.read()))).claims
        assert (claims["iss"], claims["aud"], claims["sub"], claims["nonce"]) == (
            idp.issuer, idp.client_id, idp.subject("bob"), "n1")
        req = urllib.request.Request(idp.issuer + "/userinfo",
                                     headers={"Authorization": "Bearer " + body["access_token"]})
        with urllib.request.urlopen(req) as r:
            assert json.loads(r.read())["sub"] == idp.subject("bob")
