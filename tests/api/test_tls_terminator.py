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
import uuid

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
from tests.servers.terminators import NOW, issue, owned

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
    @pytest.mark.parametrize("name", ["\u212aiosk.customer.test", "\uff4biosk.customer.test", "kiosk\u3002customer.test"],
                             ids=["kelvin-sign", "fullwidth-k", "ideographic-full-stop"])
    async def test_only_ascii_letters_match_without_case(self, get, services, ca, name):
        """Issue 45, item 6: Unicode lower() made the KELVIN SIGN a k, and kiosk's key went to that name."""
        issue(services.store, services.keyring, ca, "kiosk.customer.test")
        assert (await get("/caddy/certificate", server_name="KIOSK.customer.test")).code == 200
        for path, query in (("/caddy/certificate", {"server_name": name}), ("/caddy/ask", {"domain": name})):
            r = await get(path, **query)
            assert r.code == 404 and r.body == b"", path

    @pytest.mark.gen_test
    @pytest.mark.parametrize("name", [" " + HOST, HOST + " ", HOST + "\x00", "\t" + HOST, HOST + "\n", HOST + ".."])
    async def test_a_name_with_anything_around_it_is_not_found(self, get, services, ca, name):
        """Issue 45, item 6: the query was read stripped, so ``<host>%00`` was the host."""
        issue(services.store, services.keyring, ca, HOST)
        for path, query in (("/caddy/certificate", {"server_name": name}), ("/caddy/ask", {"domain": name})):
            r = await get(path, **query)
            assert r.code == 404 and r.body == b"", path

    @pytest.mark.gen_test
    async def test_a_u_label_is_served_the_certificate_of_its_a_label(self, get, services, ca):
        """Names match as core/hostnames.py reads them: IDNA 2008, the case of ASCII letters aside."""
        issued = issue(services.store, services.keyring, ca, "xn--bcher-kva.customer.test")
        for name in ("b\u00fccher.customer.test", "XN--BCHER-KVA.Customer.test", "B\u00fccher.customer.test."):
            assert (await get("/caddy/certificate", server_name=name)).body == issued.body, name
        assert (await get("/caddy/certificate", server_name="bu\u0308cher.customer.test")).code == 404  # not NFC

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
        with services.store.transaction():
            services.store.acme.put(attrs.evolve(row, handle="acme-moved"))  # the ciphertext is bound to the old handle
            owned(services.store, HOST, "acme-moved")
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


class TestServedToTheWorkspaceProvingOwnership:
    """Issue 46: a hostname's certificate is served to one workspace, the one that proves ownership now."""

    @pytest.mark.gen_test
    async def test_a_certificate_no_record_names_is_404(self, get, services, ca):
        issued = issue(services.store, services.keyring, ca, HOST)
        with services.store.transaction():  # an order stored before its record, whose record was never stored
            services.store.sql.execute("DELETE FROM certificates WHERE provider_hostname_id = ?", [issued.handle])
        assert (await get("/caddy/certificate", server_name=HOST)).code == 404

    @pytest.mark.gen_test
    async def test_a_deleted_domains_certificate_is_404_at_the_next_look(self, get, services, ca, clock, http_client,
                                                                        main_port, world):
        owner = world.owner()
        api = Api(http_client, main_port)
        created = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        mark_verified(services, created)
        issue(services.store, services.keyring, ca, "shop.example.com", domain=services.store.domains.get(
            owner.workspace.id, uuid.UUID(created["id"])))
        assert (await get("/caddy/certificate", server_name="shop.example.com")).code == 200  # the index is loaded
        assert (await api.delete(f"/v1/domains/{created['id']}", token=owner.token)).status == 204
        clock.advance(CHECK_SECONDS)
        await get("/caddy/certificate", server_name="shop.example.com")  # answers what it has, and looks for changes meanwhile
        await services.tls_terminator.refresh()  # the look under way, finished
        assert (await get("/caddy/certificate", server_name="shop.example.com")).code == 404
        assert (await get("/caddy/ask", domain="shop.example.com")).code == 404


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
    @pytest.mark.parametrize("secret", [" " + SECRET, SECRET + " ", SECRET + "\x00", "\t" + SECRET, SECRET + "\n"],
                             ids=["space-before", "space-after", "nul-after", "tab-before", "newline-after"])
    async def test_the_secret_with_anything_around_it_is_403(self, get, services, ca, secret):
        """Issue 45, item 6: compared exactly as sent; ``%20<secret>`` and ``<secret>%00`` answered 200."""
        issue(services.store, services.keyring, ca, HOST)
        for path, query in (("/caddy/certificate", {"server_name": HOST}), ("/caddy/ask", {"domain": HOST})):
            r = await get(path, secret=secret, **query)
            assert r.code == 403 and r.body == b"", path

    @pytest.mark.gen_test
    async def test_a_bearer_with_anything_around_the_secret_is_403(self, get, services, ca):
        issue(services.store, services.keyring, ca, HOST)
        for header in (f"Bearer  {SECRET}", f"Bearer \t{SECRET}", f"Bearer {SECRET} x"):  # a NUL is a 400 before
            r = await get("/caddy/certificate", secret=None, headers={"Authorization": header}, server_name=HOST)
            assert r.code == 403, header

    @pytest.mark.gen_test
    async def test_a_secret_sent_twice_is_403(self, http_client, base_url, services, ca):
        """One value or none: which of two would count is a guess no refusal should depend on."""
        issue(services.store, services.keyring, ca, HOST)
        query = urllib.parse.urlencode([("secret", "wrong"), ("secret", SECRET), ("server_name", HOST)])
        assert (await http_client.fetch(f"{base_url}/caddy/certificate?{query}", raise_error=False)).code == 403

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
