"""Issue 50, items 4 and 5: the chain served is the one the CA returned, the alternate chain
``[provider.acme] preferred_chain`` names is picked, a renewal from another intermediate is
recorded, shown and announced (``cert.chain_changed``), and a certificate past two thirds of its
life without a successor is announced once (``cert.renewal_overdue``), both in ``"transitions"``
mode only. Pebble here offers one alternate chain (``PEBBLE_ALTERNATE_ROOTS=1``): the same
certificate, chaining to another root; a second Pebble, with intermediates of its own, renews
while the first is down."""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid

import attrs
import pytest
from cryptography import x509
from tornado.testing import bind_unused_port

from core.acme import chains, keys
from core.config import TlsTerminatorConfig
from core.lifecycle.watcher import LifecycleWatcher
from core.tls_terminator.files import CertificateFiles
from core.tls_terminator.index import CertificateIndex
from handlers import tls_terminator
from handlers.limits import LimitedHTTPServer
from tests.acme.conftest import acme_config, make_lab, needs_lab
from tests.acme.test_issuing import Caller, add, served, verify, verify_until_issued
from tests.pages.portal_client import Browser, sign_in
from tests.patience import PATIENCE_SECONDS
from tests.servers.pebble import Directory, Pebble

pytestmark = needs_lab
SECRET = "terminator-secret-for-the-chain-tests"


@pytest.fixture(scope="module")
def acme_lab(tmp_path_factory):
    yield from make_lab(tmp_path_factory, alternate_roots=1)


def root_name(acme_lab, index):
    root = x509.load_pem_x509_certificate(acme_lab.pebble.root_pem(index).encode())
    return root.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value


def downloaded(front, chain_pem):
    """The download the CA answered with exactly this chain (its URL's path), or None."""
    return next((path for path, body in front.downloads.items() if body.strip() == chain_pem.strip()), None)


def transitions(config):
    return attrs.evolve(config, lifecycle=attrs.evolve(config.lifecycle, events="transitions"))


def events_of(services, kind):
    rows = services.store.sql.execute("SELECT type, data FROM outbox_events ORDER BY created_at, id").fetchall()
    return [json.loads(data) if isinstance(data, str) else data for t, data in rows if t == kind]


@pytest.fixture
def terminator(services, clock, io_loop):
    """Caddy's ``get_certificate`` endpoint on a port of its own, on the service's certificates."""
    index = CertificateIndex(services.store, services.keyring, clock)
    sock, port = bind_unused_port()
    server = LimitedHTTPServer(tls_terminator.make_app(index, SECRET))
    server.add_sockets([sock])
    yield attrs.make_class("Terminator", ["url", "index"])(f"http://127.0.0.1:{port}", index)
    server.stop()
    io_loop.run_sync(server.close_all_connections, timeout=PATIENCE_SECONDS)


async def caddy_gets(http_client, terminator, host):
    r = await http_client.fetch(f"{terminator.url}/caddy/certificate?server_name={host}&secret={SECRET}",
                                raise_error=False)
    assert r.code == 200, r.code
    return r.body


class TestTheChainAsReturned:
    @pytest.mark.gen_test
    async def test_caddy_gets_the_chain_the_ca_returned_then_the_key(self, api, world, acme_lab, services,
                                                                      terminator, http_client):
        caller, created = await add(api, world, "returned.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        stored = served(services, "returned.lab.com")
        returned = acme_lab.directory.downloads[downloaded(acme_lab.directory, stored.chain_pem)]
        body = await caddy_gets(http_client, terminator, "returned.lab.com")
        assert body.startswith(returned.strip().encode() + b"\n-----BEGIN PRIVATE KEY-----")

    @pytest.mark.gen_test
    async def test_the_files_hold_the_chain_the_ca_returned(self, api, world, acme_lab, services, clock, tmp_path):
        caller, created = await add(api, world, "files.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        index = CertificateIndex(services.store, services.keyring, clock)
        await index.refresh()
        files = CertificateFiles(TlsTerminatorConfig(files_dir=str(tmp_path / "certs"), files_format="nginx"))
        files.sync(index.served)
        returned = acme_lab.directory.downloads[downloaded(acme_lab.directory,
                                                           served(services, "files.lab.com").chain_pem)]
        assert (tmp_path / "certs" / "files.lab.com.crt").read_text() == returned.strip() + "\n"

    @pytest.mark.gen_test
    async def test_without_a_preference_the_cas_default_chain_is_served(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "default.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        assert chains.top_issuer(served(services, "default.lab.com").chain_pem) == root_name(acme_lab, 0)


class TestPreferredChain:
    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab, preferred_chain=root_name(acme_lab, 1))

    @pytest.mark.gen_test
    async def test_the_alternate_chain_to_the_preferred_issuer_is_served(self, api, world, acme_lab, services,
                                                                         terminator, http_client):
        caller, created = await add(api, world, "preferred.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        stored = served(services, "preferred.lab.com").chain_pem
        assert chains.top_issuer(stored) == root_name(acme_lab, 1)
        path = downloaded(acme_lab.directory, stored)
        assert path is not None and "/alternate/" in path  # /certZ/<serial>/alternate/1, as returned
        body = await caddy_gets(http_client, terminator, "preferred.lab.com")
        assert body.startswith(acme_lab.directory.downloads[path].strip().encode() + b"\n")


class TestUnknownPreferredChain:
    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab, preferred_chain="No Such Root CA")

    @pytest.mark.gen_test
    async def test_a_name_no_chain_has_serves_the_default_chain_and_says_so(self, api, world, acme_lab, services,
                                                                           caplog):
        caller, created = await add(api, world, "unknown.lab.com")
        acme_lab.publish_records(created)
        with caplog.at_level(logging.WARNING, logger="core.acme.orders"):
            result = await verify(api, caller, created)
        assert result["certificate"]["status"] == "active"
        assert chains.top_issuer(served(services, "unknown.lab.com").chain_pem) == root_name(acme_lab, 0)
        assert any("offers no chain to 'No Such Root CA' (preferred_chain)" in r.getMessage() for r in caplog.records)


@pytest.fixture
def second(acme_lab, tmp_path):
    """Another CA, with intermediates of its own, trusted through the same bundle as the first."""
    pebble = Pebble(tmp_path / "second", dns_server=acme_lab.lab.resolver, ca=acme_lab.pebble.ca).start()
    directory = Directory(pebble).start()
    yield directory
    directory.stop()
    pebble.stop()


async def renewed_elsewhere(api, world, acme_lab, services, clock, apex):
    """A certificate from the first CA, due at once, renewed by the second while the first is down:
    its owner, the caller's key, the domain, the certificate's id and the first intermediate."""
    owner = world.owner()
    caller = Caller(owner.workspace, world.key(owner.workspace, ["*"]))
    r = await api.post("/v1/domains", {"apex": apex}, token=caller.token)
    assert r.status == 201, r.body
    created = r.body
    acme_lab.publish_records(created)
    acme_lab.directory.window = (clock.now() - dt.timedelta(hours=2), clock.now() - dt.timedelta(hours=1))
    try:
        await verify_until_issued(api, caller, created)
    finally:
        acme_lab.directory.window = None
    first = served(services, apex)
    latest = services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"]))
    acme_lab.pebble.stop()
    try:
        r = await api.post(f"/v1/certificates/{latest.id}/refresh", token=caller.token)
    finally:
        acme_lab.pebble.start()
    assert r.status == 200, r.body
    assert keys.issuer_name(served(services, apex).chain_pem) != keys.issuer_name(first.chain_pem)
    return owner, caller, created, latest.id, keys.issuer_name(first.chain_pem)


class TestChainChanged:
    @pytest.fixture
    def config(self, config, acme_lab, second):
        return transitions(acme_config(config, acme_lab, fallback_directory_urls=[second.directory_url]))

    @pytest.mark.gen_test
    async def test_a_renewal_from_another_intermediate_is_announced_once(self, api, world, acme_lab, services,
                                                                          clock):
        _, caller, _, certificate_id, before = await renewed_elsewhere(api, world, acme_lab, services, clock,
                                                                          "changed.lab.com")
        await api.post(f"/v1/certificates/{certificate_id}/refresh", token=caller.token)  # read again: no news
        [event] = events_of(services, "cert.chain_changed")
        after = keys.issuer_name(served(services, "changed.lab.com").chain_pem)
        assert (event["certificateId"], event["previousIssuer"], event["issuer"]) == (str(certificate_id), before, after)

    @pytest.mark.gen_test
    async def test_the_portal_says_which_intermediate_issued_it_before(self, api, world, acme_lab, services, clock,
                                                                       http_client, base_url):
        owner, _, created, _, before = await renewed_elsewhere(api, world, acme_lab, services, clock,
                                                               "portal-chain.lab.com")
        browser = Browser(http_client, base_url)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{created['id']}/dns")).body.decode()
        assert f'id="cert-previous-issuer">was {before}</span>' in page


class TestChainChangedInSpecMode:
    @pytest.fixture
    def config(self, config, acme_lab, second):
        return acme_config(config, acme_lab, fallback_directory_urls=[second.directory_url])

    @pytest.mark.gen_test
    async def test_a_renewal_from_another_intermediate_is_recorded_but_not_announced(self, api, world, acme_lab,
                                                                                      services, clock):
        _, caller, _, certificate_id, before = await renewed_elsewhere(api, world, acme_lab, services, clock,
                                                                    "spec-chain.lab.com")
        assert events_of(services, "cert.chain_changed") == []
        assert services.store.certificates.get(caller.workspace.id, certificate_id).previous_issuer == before


async def past_two_thirds(api, world, acme_lab, services, clock, apex):
    """A certificate whose renewal window opens only after it expires, and the clock at 70 % of its
    life: nothing renews it, and the background checks read it."""
    caller, created = await add(api, world, apex)
    acme_lab.publish_records(created)
    acme_lab.directory.window = (clock.now() + dt.timedelta(days=4000), clock.now() + dt.timedelta(days=4001))
    try:
        await verify_until_issued(api, caller, created)
        issued = served(services, apex)
        clock.current = issued.not_before + (issued.not_after - issued.not_before) * 0.7
        await LifecycleWatcher(services).tick()
        clock.advance(3 * 86400)
        await LifecycleWatcher(services).tick()  # a second look at the same certificate
    finally:
        acme_lab.directory.window = None
    return caller, created, issued


class TestRenewalOverdue:
    @pytest.fixture
    def config(self, config, acme_lab):
        return transitions(acme_config(config, acme_lab))

    @pytest.mark.gen_test
    async def test_a_certificate_past_two_thirds_without_a_successor_is_announced_once(
            self, api, world, acme_lab, services, clock):
        _, created, issued = await past_two_thirds(api, world, acme_lab, services, clock, "overdue.lab.com")
        [event] = events_of(services, "cert.renewal_overdue")
        assert served(services, "overdue.lab.com").chain_pem == issued.chain_pem  # no successor
        assert (event["domainId"], event["apex"]) == (created["id"], "overdue.lab.com")
        assert event["notAfter"] == issued.not_after.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class TestRenewalOverdueInSpecMode:
    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab)

    @pytest.mark.gen_test
    async def test_no_expiry_notice_is_sent(self, api, world, acme_lab, services, clock):
        await past_two_thirds(api, world, acme_lab, services, clock, "overdue-spec.lab.com")
        assert events_of(services, "cert.renewal_overdue") == []
