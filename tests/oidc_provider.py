"""A minimal local OpenID Connect provider for the browser tests (tests/studio/test_browser_tenancy.py): enough of
OIDC for Streamlit's ``st.login`` (Authlib's Starlette client: discovery, the authorization-code flow with PKCE S256,
an RS256-signed ID token checked against the JWKS, issuer, audience, nonce and expiry).

It runs on a free ``127.0.0.1`` port in a background thread (``http.server``) and signs in without asking: the user
is, in order of precedence, the ``login_hint`` of the authorization request, the value of the ``test_user`` cookie
the browser holds for the provider's host (a browser context "signed in at the provider":
:meth:`OIDCProvider.cookie`), or the provider's :attr:`OIDCProvider.next_user`. Each user has a stable subject
(``sub``) that never changes with the display name or email.

Endpoints: ``/.well-known/openid-configuration``, ``/authorize``, ``/token``, ``/jwks``, ``/userinfo``. Nothing here is
meant for anything but tests on one machine (no consent, no client registration beyond one id and secret).
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import secrets
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any

from joserfc import jwt
from joserfc.jwk import RSAKey


@dataclass(frozen=True)
class User:
    sub: str
    email: str
    name: str


#: The test users: stable subjects, display names and emails (the officer is made an administrator by the app's
#: secrets, not here).
USERS: dict[str, User] = {
    "alice": User("alice-7f3a9c", "alice@example.org", "Alice Example"),
    "bob": User("bob-42d1e8", "bob@example.org", "Bob Example"),
    "officer": User("officer-0b5e61", "officer@example.org", "Privacy Officer"),
}


@dataclass
class OIDCProvider:
    """``with OIDCProvider() as idp:`` serves on ``idp.issuer`` until the block ends."""

    client_id: str = "dpkps-studio-test"
    client_secret: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    users: dict[str, User] = field(default_factory=lambda: dict(USERS))
    next_user: str = "alice"
    token_lifetime_s: int = 3600

    def __post_init__(self) -> None:
        self.key = RSAKey.generate_key(2048, parameters={"kid": secrets.token_hex(8), "use": "sig", "alg": "RS256"})
        self._codes: dict[str, dict[str, Any]] = {}
        self._access: dict[str, str] = {}
        self._lock = threading.Lock()
        #: (endpoint path, user key or None) of every request served, for the tests to look at.
        self.log: list[tuple[str, str | None]] = []
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> "OIDCProvider":
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "OIDCProvider":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "the provider is not started"
        return int(self._server.server_address[1])

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def discovery_url(self) -> str:
        return self.issuer + "/.well-known/openid-configuration"

    def subject(self, user: str) -> str:
        return self.users[user].sub

    def admin_id(self, user: str) -> str:
        """The issuer-qualified subject, as the app's ``[dpkps] admins`` list takes it."""
        return f"{self.issuer}|{self.subject(user)}"

    def cookie(self, user: str) -> dict[str, Any]:
        """A Playwright cookie that makes a browser context sign in at this provider as ``user``."""
        return {"name": "test_user", "value": user, "domain": "127.0.0.1", "path": "/"}

    def auth_secrets(self, redirect_uri: str, cookie_secret: str | None = None) -> dict[str, str]:
        """The app's ``[auth]`` section for this provider."""
        return {"redirect_uri": redirect_uri, "cookie_secret": cookie_secret or secrets.token_urlsafe(32),
                "client_id": self.client_id, "client_secret": self.client_secret,
                "server_metadata_url": self.discovery_url}

    # ------------------------------------------------------------------------------------------ protocol

    def metadata(self) -> dict[str, Any]:
        i = self.issuer
        return {"issuer": i, "authorization_endpoint": i + "/authorize", "token_endpoint": i + "/token",
                "jwks_uri": i + "/jwks", "userinfo_endpoint": i + "/userinfo",
                "response_types_supported": ["code"], "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"], "scopes_supported": ["openid", "email", "profile"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
                "code_challenge_methods_supported": ["S256"], "grant_types_supported": ["authorization_code"],
                "claims_supported": ["iss", "sub", "aud", "exp", "iat", "nonce", "email", "email_verified", "name"]}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.key.as_dict(private=False)]}

    def claims(self, user: str) -> dict[str, Any]:
        u = self.users[user]
        return {"sub": u.sub, "email": u.email, "email_verified": True, "name": u.name}

    def id_token(self, user: str, nonce: str | None) -> str:
        now = int(time.time())
        body = {"iss": self.issuer, "aud": self.client_id, "iat": now, "exp": now + self.token_lifetime_s,
                "auth_time": now, **self.claims(user)}
        if nonce:
            body["nonce"] = nonce
        return jwt.encode({"alg": "RS256", "kid": self.key.kid}, body, self.key)

    def pick_user(self, params: dict[str, str], cookie_header: str | None) -> str:
        hint = params.get("login_hint")
        if hint in self.users:
            return hint
        if cookie_header:
            jar = SimpleCookie()
            jar.load(cookie_header)
            if "test_user" in jar and jar["test_user"].value in self.users:
                return jar["test_user"].value
        return self.next_user

    def issue_code(self, user: str, params: dict[str, str]) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._codes[code] = {"user": user, "nonce": params.get("nonce"), "redirect_uri": params.get("redirect_uri"),
                                 "challenge": params.get("code_challenge"),
                                 "method": params.get("code_challenge_method"), "expires": time.time() + 120}
        return code

    def redeem(self, form: dict[str, str], basic: tuple[str, str] | None) -> tuple[int, dict[str, Any]]:
        client_id, client_secret = basic or (form.get("client_id", ""), form.get("client_secret", ""))
        if client_id != self.client_id or not secrets.compare_digest(client_secret, self.client_secret):
            return 401, {"error": "invalid_client"}
        if form.get("grant_type") != "authorization_code":
            return 400, {"error": "unsupported_grant_type"}
        with self._lock:
            grant = self._codes.pop(form.get("code", ""), None)  # one use only
        if grant is None or grant["expires"] < time.time():
            return 400, {"error": "invalid_grant"}
        if grant["redirect_uri"] != form.get("redirect_uri"):
            return 400, {"error": "invalid_grant", "error_description": "redirect_uri differs"}
        if grant["challenge"]:
            verifier = form.get("code_verifier", "")
            if grant["method"] == "S256":
                digest = hashlib.sha256(verifier.encode("ascii")).digest()
                computed = base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
            else:
                computed = verifier
            if not secrets.compare_digest(computed, grant["challenge"]):
                return 400, {"error": "invalid_grant", "error_description": "PKCE verifier does not match"}
        access = secrets.token_urlsafe(24)
        with self._lock:
            self._access[access] = grant["user"]
        return 200, {"access_token": access, "token_type": "Bearer", "expires_in": self.token_lifetime_s,
                     "scope": "openid email profile", "id_token": self.id_token(grant["user"], grant["nonce"])}


def _handler(idp: OIDCProvider) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            url = urllib.parse.urlsplit(self.path)
            params = dict(urllib.parse.parse_qsl(url.query))
            if url.path == "/.well-known/openid-configuration":
                idp.log.append((url.path, None))
                return self._json(200, idp.metadata())
            if url.path == "/jwks":
                idp.log.append((url.path, None))
                return self._json(200, idp.jwks())
            if url.path == "/authorize":
                redirect = params.get("redirect_uri", "")
                if params.get("client_id") != idp.client_id or not redirect or params.get("response_type") != "code":
                    return self._json(400, {"error": "invalid_request"})
                user = idp.pick_user(params, self.headers.get("Cookie"))
                idp.log.append((url.path, user))
                back = {"code": idp.issue_code(user, params)}
                if "state" in params:
                    back["state"] = params["state"]
                sep = "&" if urllib.parse.urlsplit(redirect).query else "?"
                self.send_response(302)
                self.send_header("Location", redirect + sep + urllib.parse.urlencode(back))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            if url.path == "/userinfo":
                auth = self.headers.get("Authorization", "")
                user = idp._access.get(auth[7:]) if auth.startswith("Bearer ") else None
                idp.log.append((url.path, user))
                if user is None:
                    return self._json(401, {"error": "invalid_token"})
                return self._json(200, idp.claims(user))
            return self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/token":
                return self._json(404, {"error": "not_found"})
            length = int(self.headers.get("Content-Length") or 0)
            form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode("utf-8")))
            basic = None
            auth = self.headers.get("Authorization", "")
            if auth.startswith("Basic "):
                try:
                    cid, _, csecret = base64.b64decode(auth[6:]).decode("utf-8").partition(":")
                    basic = (urllib.parse.unquote_plus(cid), urllib.parse.unquote_plus(csecret))
                except ValueError:
                    return self._json(401, {"error": "invalid_client"})
            status, body = idp.redeem(form, basic)
            idp.log.append((url.path, None))
            return self._json(status, body)

    return Handler
