"""The TLS terminator's endpoints (handlers/tls_terminator.py) on their own listener, on SQLite and
PostgreSQL: what Caddy's ``get_certificate http`` and ``ask`` receive for the certificates core/acme/
stored, the secret they take, and that none of it exists on the main port or in the log.

Certificates are ``trustme`` leaves stored as the ACME client stores them (tests/servers/terminators.py).
"""

from __future__ import annotations

import io
import logging
import secrets
import urllib.parse

import attrs
import pytest
import trustme
from tornado.httpclient import HTTPRequest
from tornado.testing import bind_unused_port

from core import logs
from core.config import LoggingConfig, TlsTerminatorConfig
from core.tls_terminator.index import CHECK_SECONDS
from handlers import tls_terminator
from handlers.limits import LimitedHTTPServer
from handlers.server import make_app
from store.acme import AcmeCertificate
from tests.helpers import Api, mark_verified
from tests.patience import PATIENCE_SECONDS
from tests.servers.terminators import NOW, issue

SECRET = "terminator-" + secrets.token_urlsafe(24)
HOST = "shop.customer.test"


@pytest.fixture(scope="module")
def ca():
    return trustme.CA()


@pytest.fixture
def config(config):
    return attrs.evolve(config, tls_terminator=TlsTerminatorConfig(secret=SECRET))


@pytest.fixture
def app(services):
    return tls_terminator.make_app(services.tls_terminator, SECRET)


@pytest.fixture
def main_port(services, io_loop):
    """The service's main application on a port of its own, beside the terminator's."""
    sock, port = bind_unused_port()
    server = LimitedHTTPServer(make_app(services))
    server.add_sockets([sock])
    yield f"http://127.0.0.1:{port}"
    server.stop()
    io_loop.run_sync(server.close_all_connections, timeout=PATIENCE_SECONDS)


@pytest.fixture
def get(http_client, base_url):
    async def get(path: str, secret: str | None = SECRET, method: str = "GET", headers: dict[str, str] | None = None, **query: str):
        if secret is not None:
            query["secret"] = secret
        url = f"{base_url}{path}?{urllib.parse.urlencode(query)}"
        return await http_client.fetch(HTTPRequest(url, method=method, headers=headers, allow_nonstandard_methods=True),
                                       raise_error=False)
    return get


class TestCertificate:
    @pytest.mark.gen_test
    async def test_a_hostname_with_a_certificate_gets_its_chain_then_its_key(self, get, services, ca):
        issued = issue(services.store, services.keyring, ca, HOST)
        r = await get("/caddy/certificate", server_name=HOST)
        assert r.code == 200
        assert r.body == issued.body
        assert r.headers["Content-Type"] == "application/x-pem-file"
        assert r.headers["Cache-Control"] == "no-store"

    @pytest.mark.gen_test
    async def test_the_newest_certificate_of_a_hostname_is_served(self, get, services, ca):
        issue(services.store, services.keyring, ca, HOST, not_after=NOW.replace(month=3))
        renewed = issue(services.store, services.keyring, ca, HOST, not_after=NOW.replace(month=5))
        issue(services.store, services.keyring, ca, HOST, not_after=NOW.replace(month=4))
        assert (await get("/caddy/certificate", server_name=HOST)).body == renewed.body

    @pytest.mark.gen_test
    async def test_names_match_without_case_and_without_a_trailing_dot(self, get, services, ca):
        issued = issue(services.store, services.keyring, ca, HOST)
        for name in ("SHOP.Customer.TEST", "shop.customer.test."):
            assert (await get("/caddy/certificate", server_name=name)).body == issued.body

    @pytest.mark.gen_test
    async def test_an_unknown_hostname_is_404_never_204(self, get, services, ca):
        issue(services.store, services.keyring, ca, HOST)
        r = await get("/caddy/certificate", server_name="other.customer.test")
        assert r.code == 404 and r.body == b""
        assert (await get("/caddy/certificate")).code == 404  # no server_name at all (a client without SNI)

    @pytest.mark.gen_test
    async def test_an_order_not_issued_yet_is_404(self, get, services):
        services.store.acme.put(AcmeCertificate(handle="acme-pending", apex=HOST, directory_url="https://acme.test/directory",
                                                status="pending", created_at=NOW, updated_at=NOW, order_url="https://acme.test/order/1"))
        assert (await get("/caddy/certificate", server_name=HOST)).code == 404

    @pytest.mark.gen_test
    async def test_a_key_that_does_not_decrypt_is_not_served(self, get, services, ca):
        issued = issue(services.store, services.keyring, ca, HOST)
        row = services.store.acme.certificate(issued.handle)
        services.store.acme.delete(issued.handle)
        services.store.acme.put(attrs.evolve(row, handle="acme-moved"))  # the ciphertext is bound to the old handle
        assert (await get("/caddy/certificate", server_name=HOST)).code == 404

    @pytest.mark.gen_test
    async def test_a_certificate_stored_after_the_index_loaded_is_served_a_moment_later(self, get, services, ca, clock):
        issue(services.store, services.keyring, ca, "first.customer.test")
        assert (await get("/caddy/certificate", server_name="first.customer.test")).code == 200  # the index is loaded
        issued = issue(services.store, services.keyring, ca, HOST)  # by the ACME client, in this process or another
        clock.advance(CHECK_SECONDS)
        r = await get("/caddy/certificate", server_name=HOST)
        assert r.code == 200 and r.body == issued.body

    @pytest.mark.gen_test
    async def test_a_renewal_stored_after_the_index_loaded_is_served_a_moment_later(self, get, services, ca, clock):
        issue(services.store, services.keyring, ca, HOST, not_after=NOW.replace(month=3))
        await get("/caddy/certificate", server_name=HOST)
        renewed = issue(services.store, services.keyring, ca, HOST, not_after=NOW.replace(month=5))
        clock.advance(CHECK_SECONDS)
        await get("/caddy/certificate", server_name=HOST)  # answers what it has, and looks for changes meanwhile
        await services.tls_terminator.refresh()  # the look under way, finished
        assert (await get("/caddy/certificate", server_name=HOST)).body == renewed.body


class TestAsk:
    @pytest.mark.gen_test
    async def test_a_hostname_with_a_certificate_is_allowed(self, get, services, ca):
        issue(services.store, services.keyring, ca, HOST)
        r = await get("/caddy/ask", domain=HOST)
        assert r.code == 200 and r.body == b""

    @pytest.mark.gen_test
    async def test_a_verified_domain_without_a_certificate_is_refused(self, get, http_client, main_port, world, services):
        """Caddy asks before obtaining a certificate itself: a yes would make it a second issuer."""
        owner = world.owner()
        domain = (await Api(http_client, main_port).post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        mark_verified(services, domain)
        assert (await get("/caddy/ask", domain="shop.example.com")).code == 404

    @pytest.mark.gen_test
    async def test_an_unknown_hostname_is_refused(self, get):
        assert (await get("/caddy/ask", domain="other.customer.test")).code == 404


class TestSecret:
    @pytest.mark.gen_test
    async def test_a_wrong_secret_is_403(self, get, services, ca):
        issue(services.store, services.keyring, ca, HOST)
        for path, query in (("/caddy/certificate", {"server_name": HOST}), ("/caddy/ask", {"domain": HOST})):
            r = await get(path, secret=SECRET + "x", **query)
            assert r.code == 403 and r.body == b""

    @pytest.mark.gen_test
    async def test_a_missing_secret_is_403(self, get, services, ca):
        issue(services.store, services.keyring, ca, HOST)
        assert (await get("/caddy/certificate", secret=None, server_name=HOST)).code == 403
        assert (await get("/caddy/ask", secret=None, domain=HOST)).code == 403

    @pytest.mark.gen_test
    async def test_the_secret_may_come_as_a_bearer_token(self, get, services, ca):
        issued = issue(services.store, services.keyring, ca, HOST)
        r = await get("/caddy/certificate", secret=None, headers={"Authorization": f"Bearer {SECRET}"}, server_name=HOST)
        assert r.body == issued.body
        wrong = await get("/caddy/certificate", secret=None, headers={"Authorization": "Bearer nope"}, server_name=HOST)
        assert wrong.code == 403

    @pytest.mark.gen_test
    async def test_the_secret_never_reaches_the_log(self, get, services, ca):
        buffer = io.StringIO()
        logs.configure(LoggingConfig(level="debug"), stream=buffer)
        try:
            issue(services.store, services.keyring, ca, HOST)
            await get("/caddy/certificate", server_name=HOST)
            await get("/caddy/certificate", server_name="other.customer.test")
            await get("/caddy/ask", domain=HOST)
            await get("/caddy/certificate", secret=SECRET + "wrong", server_name=HOST)
            await get("/caddy/certificate", method="POST", server_name=HOST)
        finally:
            logging.getLogger().handlers[0].flush()
            logs.configure(LoggingConfig(level="warning"), stream=io.StringIO())
        text = buffer.getvalue()
        assert "/caddy/certificate" in text  # the lines were written, at debug level included
        assert SECRET not in text and SECRET[-12:] not in text


class TestMethods:
    @pytest.mark.gen_test
    async def test_only_get_is_served(self, get, services, ca):
        issue(services.store, services.keyring, ca, HOST)
        for method in ("HEAD", "POST", "PUT", "DELETE", "OPTIONS"):
            r = await get("/caddy/certificate", method=method, server_name=HOST)
            assert r.code == 405 and r.headers["Allow"] == "GET" and not r.body, method

    @pytest.mark.gen_test
    async def test_another_path_is_404(self, get):
        assert (await get("/v1/domains")).code == 404


class TestMainPort:
    @pytest.mark.gen_test
    async def test_the_endpoints_do_not_exist_on_the_main_port(self, services, ca, http_client, main_port):
        issue(services.store, services.keyring, ca, HOST)
        for path, query in (("/caddy/certificate", f"server_name={HOST}"), ("/caddy/ask", f"domain={HOST}")):
            r = await http_client.fetch(f"{main_port}{path}?{query}&secret={SECRET}", raise_error=False)
            assert r.code == 404, path
            assert b"PRIVATE KEY" not in r.body
