"""Behind a real reverse proxy: Debian's Caddy on loopback, running deploy/Caddyfile (the
configuration docs/operating/reverse-proxy.md shows) in front of ``python app.py``, HTTPS from
Caddy's local CA, which the clients here trust.

Through it: the portal's sign-in with a real OpenID Connect provider (oidc-provider-mock) and its
``Secure`` cookies; client IPs taken from ``X-Forwarded-For`` because, and only because, the proxy
is in ``server.trusted_proxies`` (two clients, two buckets; a client cannot pass for another);
the service's ``X-Request-Id`` reaching the client; and the 1 MiB body limit answered as it is
directly. The clients are 127.0.0.2, 127.0.0.3, ... (see tests/servers/caddy.py); each test uses
addresses of its own, so the rate-limit buckets of one test never meet another's. And the docs
show deploy/Caddyfile and deploy/nginx.conf as they are.

deploy/Caddyfile.portal-and-customers, one Caddy for both the service and the customers' hostnames
(ACME mode), runs here too: the portal at its own name as through deploy/Caddyfile, and a
customer's hostname with the certificate the service stored, as deploy/Caddyfile.customers serves it.
"""

from __future__ import annotations

import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest
import trustme
from oidc_provider_mock import User, run_server_in_thread

from core.crypto import Keyring, load_or_create_master_key
from handlers.limits import MAX_BODY_BYTES
from store import Store
from tests.patience import PATIENCE_SECONDS
from tests.servers.caddy import CADDY, CADDYFILE, ROOT, CaddyProxy, Response, fetch
from tests.servers.service import ServiceProcess, free_port
from tests.servers.terminators import CADDYFILE_2_8, SECRET, issue, presented

needs_caddy = pytest.mark.skipif(CADDY is None, reason="caddy is not installed (apt-get install caddy)")
NGINX_CONF = ROOT / "deploy" / "nginx.conf"
BOTH = ROOT / "deploy" / "Caddyfile.portal-and-customers"
CUSTOMER = "shop.customer.test"

CLIENT_ID = "certificate-service"
CLIENT_SECRET = "s3cret"
ALICE = User(sub="alice", claims={"email": "alice@example.com", "email_verified": True})
AUTH_QUOTA = 4  # [rate_limits] auth: a handful of cheap requests spends it


class Stack(NamedTuple):
    service: ServiceProcess
    caddy: CaddyProxy

    def via_proxy(self, method: str, path: str, **kwargs) -> Response:
        return fetch(self.caddy.url, method, path, context=self.caddy.ssl_context(), **kwargs)

    def direct(self, method: str, path: str, **kwargs) -> Response:
        return fetch(self.service.base_url, method, path, **kwargs)

    def log_line(self, request_id: str) -> str:
        """The service's access-log line of one request (lines are flushed within 0.1 s)."""
        deadline = time.monotonic() + PATIENCE_SECONDS
        while True:
            for line in self.service.log.read_text().splitlines():
                if re.search(rf"\brid={request_id}\b", line):
                    return line
            if time.monotonic() > deadline:
                raise AssertionError(f"no log line for request {request_id}")
            time.sleep(0.05)


def behind_caddy(folder: Path, *, dns_address: str, issuer: str, trusted_proxies: bool) -> Stack:
    """The service on its own loopback port, its public address the HTTPS one Caddy serves."""
    service = ServiceProcess(
        folder, dns_address=dns_address,
        extra=f'[oidc]\nissuer = "{issuer}"\nclient_id = "{CLIENT_ID}"\nclient_secret = "{CLIENT_SECRET}"\n'
              f"[rate_limits]\nauth = {AUTH_QUOTA}\n[lifecycle]\nenabled = false\n",
    )
    caddy = CaddyProxy(folder / "caddy", upstream=f"127.0.0.1:{service.port}")
    server = f'base_url = "{caddy.url}"\nportal_url = "{caddy.url}"\n'
    if trusted_proxies:
        server += 'trusted_proxies = ["127.0.0.1/32"]\n'  # the address Caddy connects to the service from
    head = f"[server]\nport = {service.port}\n"
    config = service.config.read_text()
    assert config.startswith(head)
    service.config.write_text(head + server + config[len(head):])
    service.start()
    try:
        caddy.start()
    except BaseException:
        service.stop()
        raise
    return Stack(service, caddy)


@pytest.fixture(scope="module")
def provider():
    with run_server_in_thread(user_claims=[ALICE]) as server:
        yield f"http://127.0.0.1:{server.server_port}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory, dns_server, provider):
    running = behind_caddy(tmp_path_factory.mktemp("trusted"), dns_address=dns_server.address, issuer=provider,
                           trusted_proxies=True)
    yield running
    running.caddy.stop()
    running.service.stop()


def attributes(set_cookie: str) -> dict[str, str]:
    """A Set-Cookie line's attributes, lower-cased names (``secure``, ``httponly``, ``samesite``, ...)."""
    pairs = [part.strip().split("=", 1) for part in set_cookie.split(";")[1:]]
    return {pair[0].lower(): pair[1] if len(pair) > 1 else "" for pair in pairs}


def cookie_value(set_cookie: str) -> str:
    return set_cookie.split(";", 1)[0].split("=", 1)[1]


def assert_portal_cookie(set_cookie: str) -> None:
    found = attributes(set_cookie)
    assert "secure" in found and "httponly" in found and found.get("samesite", "").lower() == "lax", set_cookie


def remaining(response: Response, bucket: str) -> int:
    """``r`` of the RateLimit header, which names the bucket closest to exhaustion."""
    match = re.fullmatch(rf'"{bucket}";r=(\d+);t=\d+', response.headers["RateLimit"] or "")
    assert match, response.headers["RateLimit"]
    return int(match.group(1))


def provider_signs_in(authorize_url: str, sub: str) -> str:
    """The browser's part at the identity provider: its form, submitted; the redirect back (not followed)."""
    form = urllib.request.Request(authorize_url, data=urllib.parse.urlencode({"sub": sub}).encode(), method="POST")

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    try:
        urllib.request.build_opener(Stay).open(form, timeout=10)
    except urllib.error.HTTPError as redirected:
        with redirected:
            assert redirected.code == 302
            return redirected.headers["Location"]
    raise AssertionError("the identity provider did not redirect back")


@needs_caddy
class TestPortalSignIn:
    """The OpenID Connect code flow with PKCE, every step of the service's through Caddy."""

    def test_signs_in_with_a_real_provider_and_secure_cookies(self, stack, provider):
        signup = stack.via_proxy(
            "POST", "/v1/public/signup", body=b'{"email":"alice@example.com","domain":"alice.example.com"}',
            headers={"Content-Type": "application/json"},
        )
        assert signup.status == 201, signup.body

        home = stack.via_proxy("GET", "/")
        assert home.status == 200
        assert_portal_cookie(home.cookies()["_xsrf"])  # the forms' XSRF cookie, like every portal cookie

        login = stack.via_proxy("GET", "/login?next=/account")
        assert login.status == 302
        authorize = login.headers["Location"]
        assert authorize.startswith(provider + "/")
        sent = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(authorize).query))
        assert sent["redirect_uri"] == stack.caddy.url + "/auth/callback"  # {portal_url}/auth/callback
        assert sent["code_challenge_method"] == "S256"
        signin_cookie = login.cookies()["cps_signin"]
        assert_portal_cookie(signin_cookie)

        back = provider_signs_in(authorize, ALICE.sub)
        assert back.startswith(stack.caddy.url + "/auth/callback?")
        callback = stack.via_proxy("GET", back[len(stack.caddy.url):],
                                   headers={"Cookie": f"cps_signin={cookie_value(signin_cookie)}"})
        assert callback.status == 302, callback.body
        assert callback.headers["Location"] == "/account"
        session = callback.cookies()["cps_session"]
        assert_portal_cookie(session)

        account = stack.via_proxy("GET", "/account", headers={"Cookie": f"cps_session={cookie_value(session)}"})
        assert account.status == 200
        assert b"alice@example.com" in account.body

    def test_plain_http_is_only_redirected_to_https(self, stack):
        """Caddy's HTTP port proxies nothing, so a Secure cookie's request never travels in clear."""
        answer = fetch(f"http://{stack.caddy.site}:{stack.caddy.http_port}", "GET", "/account")
        assert answer.status == 308
        assert answer.headers["Location"].startswith(f"https://{stack.caddy.site}")
        assert answer.headers["Location"].endswith("/account")
        assert answer.headers["X-Request-Id"] is None  # Caddy's answer, not the service's

    def test_the_plain_http_redirect_names_no_server_software(self, stack):
        answer = fetch(f"http://{stack.caddy.site}:{stack.caddy.http_port}", "GET", "/account")
        assert answer.status == 308 and answer.headers["Server"] is None

    def test_the_redirect_keeps_the_https_port(self, stack):
        answer = fetch(f"http://{stack.caddy.site}:{stack.caddy.http_port}", "GET", "/domains?q=x")
        assert answer.headers["Location"] == f"{stack.caddy.url}/domains?q=x"

    def test_https_answers_tell_browsers_to_come_back_over_https_only(self, stack):
        answer = stack.via_proxy("GET", "/", source="127.0.0.7")
        assert answer.headers["Strict-Transport-Security"] == "max-age=31536000"


@needs_caddy
class TestClientAddresses:
    """``GET /v1/auth/session`` without a bearer: a cheap ``null`` that counts in the small ``auth`` bucket."""

    def test_two_clients_get_two_buckets_and_neither_can_pass_for_another(self, stack):
        first, second = "127.0.0.2", "127.0.0.3"
        for left in range(AUTH_QUOTA - 1, -1, -1):
            answer = stack.via_proxy("GET", "/v1/auth/session", source=first)
            assert (answer.status, remaining(answer, "auth")) == (200, left)
        spent = stack.via_proxy("GET", "/v1/auth/session", source=first)
        assert spent.status == 429 and b'"rate_limited"' in spent.body and int(spent.headers["Retry-After"]) > 0
        # The first client claims to be the second, or someone else: Caddy replaces the header with
        # the address it sees (and the service reads it right to left, believing only its trusted
        # proxies), so the first client's own, spent bucket answers.
        for claimed in (second, "198.51.100.7", f"{second}, 127.0.0.1"):
            spoofed = stack.via_proxy("GET", "/v1/auth/session", source=first, headers={"X-Forwarded-For": claimed})
            assert spoofed.status == 429, claimed
        other = stack.via_proxy("GET", "/v1/auth/session", source=second)
        assert (other.status, remaining(other, "auth")) == (200, AUTH_QUOTA - 1)
        assert f"(-@{second})" in stack.log_line(other.headers["X-Request-Id"])
        assert f"(-@{first})" in stack.log_line(spoofed.headers["X-Request-Id"])

    def test_a_peer_outside_trusted_proxies_is_not_believed(self, stack):
        """Straight to the service's port (an address not in trusted_proxies): its X-Forwarded-For is ignored."""
        claimed = stack.direct("GET", "/v1/auth/session", source="127.0.0.4", headers={"X-Forwarded-For": "127.0.0.5"})
        assert (claimed.status, remaining(claimed, "auth")) == (200, AUTH_QUOTA - 1)
        again = stack.direct("GET", "/v1/auth/session", source="127.0.0.4")
        assert remaining(again, "auth") == AUTH_QUOTA - 2
        assert "(-@127.0.0.4)" in stack.log_line(claimed.headers["X-Request-Id"])


@needs_caddy
class TestWithoutTrustedProxies:
    """The same Caddy and service, but ``server.trusted_proxies`` left empty: every client is the proxy."""

    @pytest.fixture(scope="class")
    def untrusted(self, tmp_path_factory, dns_server, provider):
        running = behind_caddy(tmp_path_factory.mktemp("untrusted"), dns_address=dns_server.address, issuer=provider,
                               trusted_proxies=False)
        yield running
        running.caddy.stop()
        running.service.stop()

    def test_every_client_shares_the_proxys_bucket(self, untrusted):
        first = untrusted.via_proxy("GET", "/v1/auth/session", source="127.0.0.2")
        second = untrusted.via_proxy("GET", "/v1/auth/session", source="127.0.0.3")
        assert (remaining(first, "auth"), remaining(second, "auth")) == (AUTH_QUOTA - 1, AUTH_QUOTA - 2)
        assert "(-@127.0.0.1)" in untrusted.log_line(second.headers["X-Request-Id"])


@needs_caddy
class TestRequestIds:
    @pytest.mark.parametrize("path", ["/v1/auth/session", "/", "/no-such-page", "/static/openapi.json"])
    def test_the_services_request_id_reaches_the_client(self, stack, path):
        answer = stack.via_proxy("GET", path, source="127.0.0.6")
        request_id = answer.headers["X-Request-Id"]
        assert request_id and re.fullmatch(r"[0-9a-f]{32}", request_id)
        assert f"GET {path} " in stack.log_line(request_id)  # the access log names the same id
        assert answer.headers["Server"] is None  # no server software named, Caddy's included
        assert answer.headers["X-Content-Type-Options"] == "nosniff"

    def test_a_client_cannot_choose_its_request_id(self, stack):
        answer = stack.via_proxy("GET", "/v1/auth/session", source="127.0.0.6", headers={"X-Request-Id": "mine"})
        assert answer.headers["X-Request-Id"] != "mine"
        assert "/v1/auth/session" in stack.log_line(answer.headers["X-Request-Id"])


def chunks(total: int, size: int = 64 * 1024):
    while total > 0:
        yield b"x" * min(size, total)
        total -= size


@needs_caddy
class TestBodyLimits:
    """The service's 1 MiB limit, answered by the service in its envelope, whichever way the body comes."""

    @pytest.mark.parametrize("framing", ["content-length", "chunked"])
    def test_a_body_over_the_limit_is_the_same_413(self, stack, framing):
        def over():
            return b"x" * (MAX_BODY_BYTES + 1) if framing == "content-length" else chunks(MAX_BODY_BYTES + 256 * 1024)

        headers = {"Content-Type": "application/json"}
        direct = stack.direct("POST", "/v1/domains", source="127.0.0.7", body=over(), headers=headers)
        proxied = stack.via_proxy("POST", "/v1/domains", source="127.0.0.7", body=over(), headers=headers)
        assert direct.status == proxied.status == 413
        assert direct.body == proxied.body
        assert b'"code":"payload_too_large"' in proxied.body
        assert proxied.headers["Content-Type"] == "application/json; charset=UTF-8"
        assert "413 POST /v1/domains" in stack.log_line(proxied.headers["X-Request-Id"])

    def test_a_body_at_the_limit_passes_both_ways(self, stack):
        """Exactly 1 MiB is not refused for its size: it reaches authentication (no bearer: 401)."""
        body = b"x" * MAX_BODY_BYTES
        direct = stack.direct("POST", "/v1/domains", source="127.0.0.7", body=body)
        proxied = stack.via_proxy("POST", "/v1/domains", source="127.0.0.7", body=body)
        assert direct.status == proxied.status == 401
        assert b'"code":"unauthorized"' in proxied.body


class Both(NamedTuple):
    service: ServiceProcess
    caddy: CaddyProxy
    serial: int
    "The serial number of the customer's certificate the service stored."


@needs_caddy
class TestOneCaddyForThePortalAndTheCustomers:
    """deploy/Caddyfile.portal-and-customers in front of a service with ``[tls_terminator]`` on,
    which is also the customers' application here."""

    @pytest.fixture(scope="class")
    def ca(self):
        return trustme.CA()

    @pytest.fixture(scope="class")
    def both(self, tmp_path_factory, dns_server, ca):
        folder = tmp_path_factory.mktemp("both")
        terminator = free_port()
        service = ServiceProcess(folder, dns_address=dns_server.address, extra=(
            f'[tls_terminator]\nlisten = "127.0.0.1:{terminator}"\nsecret = "{SECRET}"\n[lifecycle]\nenabled = false\n'))
        store = Store(service.database)  # the ACME client's side: a certificate stored by another process
        try:
            issued = issue(store, Keyring(load_or_create_master_key(folder / "secret.key")), ca, CUSTOMER)
        finally:
            store.close()
        upstream = f"127.0.0.1:{service.port}"
        caddy = CaddyProxy(folder / "caddy", upstream=upstream, caddyfile=BOTH, env={
            "CPS_TLS_TERMINATOR": f"http://127.0.0.1:{terminator}", "CPS_TLS_SECRET": SECRET,
            "CPS_APP_UPSTREAM": upstream, "CPS_PORTAL_ISSUER": "internal"})
        service.start()
        try:
            caddy.start()
        except BaseException:
            service.stop()
            raise
        yield Both(service, caddy, issued.serial)
        caddy.stop()
        service.stop()

    def test_the_portal_is_served_at_its_own_name_with_caddys_certificate(self, both):
        answer = fetch(both.caddy.url, "GET", "/", context=both.caddy.ssl_context())
        assert answer.status == 200
        assert answer.headers["X-Request-Id"] and answer.headers["Server"] is None
        assert answer.headers["Strict-Transport-Security"] == "max-age=31536000"

    def test_the_portal_over_plain_http_is_redirected(self, both):
        answer = fetch(f"http://{both.caddy.site}:{both.caddy.http_port}", "GET", "/account")
        assert answer.status == 308 and answer.headers["Location"] == f"{both.caddy.url}/account"

    def test_a_customers_hostname_gets_the_certificate_the_service_stored(self, both, ca):
        assert presented(both.caddy.https_port, CUSTOMER, ca).serial_number == both.serial

    def test_a_request_to_a_customers_hostname_reaches_the_application(self, both, ca):
        context = ssl.create_default_context(cadata=ca.cert_pem.bytes().decode())
        answer = fetch(f"https://{CUSTOMER}:{both.caddy.https_port}", "GET", "/healthz", context=context)
        assert answer.status == 200

    def test_a_name_the_service_has_no_certificate_for_fails_the_handshake(self, both, ca):
        with pytest.raises(ssl.SSLError):
            presented(both.caddy.https_port, "unknown.customer.test", ca)
        obtained = [line for line in both.caddy.log.read_text().splitlines() if '"msg":"obtaining certificate"' in line]
        assert obtained and all('"identifier":"cps.localhost"' in line for line in obtained)  # the portal's only


def test_the_docs_show_the_proxy_configurations_as_they_are():
    """What an operator copies from "Behind a reverse proxy" (docs/operating/reverse-proxy.md) is what this
    file and tests/test_tls_terminator_caddy.py run."""
    page = (ROOT / "docs" / "operating" / "reverse-proxy.md").read_text()
    shown = {path: f"```{fence}\n{path.read_text()}```\n" in page
             for path, fence in ((CADDYFILE, "caddyfile"), (NGINX_CONF, "nginx"), (BOTH, "caddyfile"),
                                 (CADDYFILE_2_8, "caddyfile"))}
    assert [str(path.relative_to(ROOT)) for path, found in shown.items() if not found] == []
