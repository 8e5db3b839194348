"""Domain Connect discovery (core/domain_connect/discovery.py) against a real DNS host: the test DNS
server publishes ``_domainconnect.<zone>`` and the DNS host's name (127.0.0.1), and a real HTTPS
receiver (tests/servers/https.py, test CA) plays the DNS host's server. The receiver answers any
path, so each test plans its answers in request order: the settings first, then the template check.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from core.config import DnsConfig, DomainConnectConfig, NetworkConfig
from core.dns.lookups import DnsChecker
from core.domain_connect.discovery import SETTINGS_MAX_BYTES, Discoverer, Offer
from core.outbound.guard import OutboundClient
from tests.servers.https import Answer, HttpsReceiver
from tests.servers.service import free_port

ZONE = "customer-dc.com"
HOST = "dc.dnshost-test.com"
SLOW_HOST = "slow.dnshost-test.com"
LOOPBACK = ["127.0.0.0/8"]
WORKSPACE = "workspace-a"


@pytest.fixture(scope="module")
def receiver():
    server = HttpsReceiver(HOST)
    yield server
    server.stop()


@pytest.fixture
def dns_host(receiver, dns):
    """The DNS host's HTTPS server, reachable by name, with no request seen yet."""
    receiver.reset()
    dns.publish(HOST, "A", "127.0.0.1")
    return receiver


@pytest.fixture
def make(dns, dns_host, clock):
    """Make a Discoverer with real DNS lookups and a real outbound guard; its clients closed after the test."""
    clients = []

    def build(*, allow=LOOPBACK, ca_bundle=dns_host.ca_pem_path, timeout=2.0, cache=600.0, pool=64, sharing=None):
        """``pool``: the connections the outbound client runs at once; ``sharing``: use that
        Discoverer's outbound client (and pool) instead of a new one."""
        # No test here waits on a lookup that goes unanswered: a bound a busy machine does not miss.
        resolver = DnsConfig(nameservers=[dns.address], timeout_seconds=5.0)
        if sharing is None:
            clients.append(OutboundClient(NetworkConfig(allow_private_ranges=list(allow), ca_bundle=ca_bundle),
                                          resolver, max_clients=pool, max_body_bytes=SETTINGS_MAX_BYTES))
        config = DomainConnectConfig(provider_id="certs.operator-test.com", service_id="tls-hostname",
                                     private_key_file="x", key_host="operator-test.com",
                                     timeout_seconds=timeout, cache_seconds=cache)
        return Discoverer(config, DnsChecker(resolver), sharing.outbound if sharing else clients[-1], clock)

    yield build
    for client in clients:
        client.close()


@pytest.fixture
def slow_host(receiver, dns):
    """A second DNS host's server (its certificate from the same test CA), answering after 5 s."""
    server = HttpsReceiver(SLOW_HOST, ca=receiver.ca)
    server.respond_with(200, delay=5)
    dns.publish(SLOW_HOST, "A", "127.0.0.1")
    yield server
    server.stop()


def zones_at(dns, server, count, prefix="zone"):
    """``count`` zones whose ``_domainconnect`` record names ``server``."""
    zones = [f"{prefix}{i}-test.com" for i in range(count)]
    for zone in zones:
        dns.publish(f"_domainconnect.{zone}", "TXT", f"{server.hostname}:{server.port}/dc")
    return zones


def publish(dns, dns_host, value=None):
    """The zone's ``_domainconnect`` record, naming the DNS host's server with a path by default."""
    dns.publish(f"_domainconnect.{ZONE}", "TXT", value or f"{HOST}:{dns_host.port}/dc")


def settings(dns_host, **fields):
    """A settings document (the fields given added, or removed when None), as the DNS host sends it."""
    base = f"https://{HOST}:{dns_host.port}"
    doc = {"providerId": "dnshost-test.com", "providerName": "DNS Host", "urlSyncUX": f"{base}/sync",
           "urlAPI": f"{base}/api", "width": 750, "height": 750}
    doc.update(fields)
    return json.dumps({key: value for key, value in doc.items() if value is not None}).encode()


def settings_url(dns_host):
    return f"https://{HOST}:{dns_host.port}/dc/v2/{ZONE}/settings"


async def refusal(make, dns, dns_host, body=None, *, answer=None):
    """The discovery when the settings are ``body`` (or the answer is ``answer``), expected ignored."""
    publish(dns, dns_host)
    dns_host.plan([answer or Answer(200, body)])
    found = await make().discover(ZONE, workspace=WORKSPACE)
    assert (found.outcome, found.offer) == ("ignored", None), found
    assert len(found.problem) <= 300
    return found


class TestSupported:
    @pytest.mark.gen_test
    async def test_a_deployed_template_gives_an_offer_from_the_settings(self, make, dns, dns_host):
        publish(dns, dns_host)
        body = settings(dns_host, providerDisplayName="Host Brand", width="800", height=600, market="de",
                        urlSyncUX=f"https://DC.dnshost-test.com:{dns_host.port}/sync/")
        dns_host.plan([Answer(200, body), Answer(200, b'{"version": 1}')])
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert (found.zone, found.outcome, found.problem) == (ZONE, "supported", None)
        assert found.offer == Offer(provider_id="dnshost-test.com", provider_name="Host Brand",
                                    url_sync_ux=f"https://{HOST}:{dns_host.port}/sync", width=800, height=600)

    @pytest.mark.gen_test
    async def test_the_settings_are_asked_for_as_json(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host))])
        await make().discover(ZONE, workspace=WORKSPACE)
        assert [r.headers.get("Accept") for r in dns_host.received] == ["application/json"] * 2

    @pytest.mark.gen_test
    async def test_an_empty_200_from_the_template_check_means_supported(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host)), Answer(200, b"")])
        assert (await make().discover(ZONE, workspace=WORKSPACE)).outcome == "supported"

    @pytest.mark.gen_test
    async def test_popup_sizes_are_clamped_and_nonsense_gets_the_default(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host, width=5000, height="tall")), Answer(200)])
        offer = (await make().discover(ZONE, workspace=WORKSPACE)).offer
        assert (offer.width, offer.height) == (2000, 750)


class TestNotOffered:
    @pytest.mark.gen_test
    async def test_a_zone_without_a_domainconnect_record_has_no_record(self, make, dns_host):
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert (found.outcome, found.offer, found.problem) == ("no_record", None, None)
        assert dns_host.received == []

    @pytest.mark.gen_test
    async def test_settings_answering_404_mean_the_host_does_not_serve_the_zone(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([404])
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert (found.outcome, found.offer) == ("not_supported", None)
        assert "does not host this zone" in found.problem
        assert len(dns_host.received) == 1

    @pytest.mark.gen_test
    async def test_a_template_check_answering_404_means_not_supported(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host)), 404])
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert (found.outcome, found.offer) == ("not_supported", None)
        assert "certs.operator-test.com/tls-hostname" in found.problem

    @pytest.mark.gen_test
    async def test_settings_without_urlsyncux_mean_not_supported_and_no_template_check(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host, urlSyncUX=None))])
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert (found.outcome, found.offer) == ("not_supported", None)
        assert len(dns_host.received) == 1

    @pytest.mark.gen_test
    async def test_a_template_check_answering_500_is_unknown(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host)), 500])
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert (found.outcome, found.offer) == ("unknown", None)
        assert "HTTP 500" in found.problem


class TestRefusedSettings:
    @pytest.mark.gen_test
    async def test_a_settings_document_over_64_kib_is_ignored(self, make, dns, dns_host):
        found = await refusal(make, dns, dns_host, settings(dns_host, padding="x" * 70_000))
        assert found.problem == (f"The Domain Connect settings at {settings_url(dns_host)} are larger than 64 KiB; "
                                 "they were ignored.")

    @pytest.mark.gen_test
    async def test_a_redirect_from_the_settings_is_not_followed(self, make, dns, dns_host):
        elsewhere = f"https://{HOST}:{dns_host.port}/elsewhere"
        found = await refusal(make, dns, dns_host, answer=Answer(302, settings(dns_host), location=elsewhere))
        assert "redirect (HTTP 302)" in found.problem
        assert len(dns_host.received) == 1

    @pytest.mark.gen_test
    async def test_settings_answering_500_are_ignored(self, make, dns, dns_host):
        found = await refusal(make, dns, dns_host, answer=Answer(500))
        assert "HTTP 500" in found.problem

    @pytest.mark.gen_test
    async def test_settings_that_are_not_json_are_ignored(self, make, dns, dns_host):
        found = await refusal(make, dns, dns_host, b"<html>Domain Connect</html>")
        assert "are not JSON" in found.problem

    @pytest.mark.gen_test
    async def test_settings_that_are_a_json_array_are_ignored(self, make, dns, dns_host):
        found = await refusal(make, dns, dns_host, b'[{"providerId": "dnshost-test.com"}]')
        assert "not a JSON object" in found.problem

    @pytest.mark.gen_test
    async def test_settings_without_urlapi_are_ignored(self, make, dns, dns_host):
        found = await refusal(make, dns, dns_host, settings(dns_host, urlAPI=None))
        assert "lack urlAPI" in found.problem

    @pytest.mark.gen_test
    async def test_a_urlsyncux_over_plain_http_is_ignored(self, make, dns, dns_host):
        found = await refusal(make, dns, dns_host, settings(dns_host, urlSyncUX=f"http://{HOST}/sync"))
        assert "urlSyncUX" in found.problem and "https" in found.problem
        assert len(dns_host.received) == 1

    @pytest.mark.gen_test
    async def test_a_name_longer_than_100_characters_is_ignored(self, make, dns, dns_host):
        found = await refusal(make, dns, dns_host, settings(dns_host, providerName="N" * 101))
        assert "providerName" in found.problem and "N" * 81 not in found.problem


class TestUnanswered:
    """Settings that could not be fetched say nothing of the template: ``unknown``, asked again in a minute."""

    @pytest.mark.gen_test
    async def test_settings_slower_than_the_timeout_are_unknown(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host), delay=1.5)])
        found = await make(timeout=0.5).discover(ZONE, workspace=WORKSPACE)
        assert (found.outcome, found.offer) == ("unknown", None)
        assert "timed out after 0.5 s" in found.problem

    @pytest.mark.gen_test
    async def test_settings_at_a_port_refusing_connections_are_unknown(self, make, dns, dns_host):
        publish(dns, dns_host, f"{HOST}:{free_port()}/dc")
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert found.outcome == "unknown" and "refused the connection" in found.problem

    @pytest.mark.gen_test
    async def test_an_untrusted_certificate_at_the_settings_host_is_unknown(self, make, dns, dns_host):
        publish(dns, dns_host)
        found = await make(ca_bundle="").discover(ZONE, workspace=WORKSPACE)
        assert found.outcome == "unknown" and "TLS" in found.problem

    @pytest.mark.gen_test
    async def test_settings_waiting_for_a_free_connection_past_the_timeout_are_unknown(self, make, dns, dns_host,
                                                                                        slow_host):
        [slow] = zones_at(dns, slow_host, 1)
        holding = make(timeout=3.0, pool=1)
        held = asyncio.ensure_future(holding.discover(slow, workspace="another"))  # the pool's one connection
        await slow_host.wait_for(1)
        publish(dns, dns_host)
        found = await make(timeout=0.5, sharing=holding).discover(ZONE, workspace=WORKSPACE)
        await held
        assert found.outcome == "unknown" and "waiting for a free connection" in found.problem
        assert dns_host.received == []

    @pytest.mark.gen_test
    async def test_unanswered_settings_are_asked_again_after_a_minute(self, make, dns, dns_host, clock):
        publish(dns, dns_host)
        # The fixture's timeout, which the answer asked again must also meet, not a shorter one.
        dns_host.plan([Answer(200, settings(dns_host), delay=5), Answer(200, settings(dns_host)), 200])
        discoverer = make()
        assert (await discoverer.discover(ZONE, workspace=WORKSPACE)).outcome == "unknown"
        clock.advance(60)
        assert (await discoverer.discover(ZONE, workspace=WORKSPACE)).outcome == "supported"


class TestLimits:
    """One workspace cannot hold the pool, and no destination is asked more than its share
    (core/domain_connect/limits.py)."""

    @pytest.mark.gen_test
    async def test_a_workspace_has_at_most_two_discoveries_under_way(self, make, dns, slow_host):
        discoverer = make(timeout=1.0)
        found = await asyncio.gather(*(discoverer.discover(zone, workspace=WORKSPACE)
                                       for zone in zones_at(dns, slow_host, 3)))
        assert [f.outcome for f in found] == ["unknown"] * 3
        assert "this workspace has 2 under way" in found[2].problem
        assert len(slow_host.received) == 2

    @pytest.mark.gen_test
    async def test_another_workspace_is_answered_while_one_workspaces_slow_zones_are_under_way(
            self, make, dns, dns_host, slow_host):
        holding = make(timeout=3.0, pool=3)  # slow zones of one workspace, longer than the other waits
        held = [asyncio.ensure_future(holding.discover(zone, workspace="slow zones"))
                for zone in zones_at(dns, slow_host, 3)]
        await slow_host.wait_for(2)
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host))])
        found = await make(sharing=holding).discover(ZONE, workspace=WORKSPACE)
        await asyncio.gather(*held)
        assert found.outcome == "supported"

    @pytest.mark.gen_test
    async def test_a_workspace_starts_at_most_twenty_discoveries_a_minute(self, make, dns, dns_host):
        dns_host.respond_with(200, body=settings(dns_host))
        discoverer = make()
        found = [await discoverer.discover(zone, workspace=WORKSPACE) for zone in zones_at(dns, dns_host, 21)]
        assert [f.outcome for f in found] == ["supported"] * 20 + ["unknown"]
        assert "started 20 in the last minute" in found[20].problem and len(dns_host.received) == 40

    @pytest.mark.gen_test
    async def test_a_discovery_refused_by_a_limit_is_asked_again_at_the_next_look(self, make, dns, dns_host, clock):
        dns_host.respond_with(200, body=settings(dns_host))
        discoverer = make()
        zones = zones_at(dns, dns_host, 21)
        for zone in zones:
            await discoverer.discover(zone, workspace=WORKSPACE)
        clock.advance(60)
        assert (await discoverer.discover(zones[20], workspace=WORKSPACE)).outcome == "supported"

    @pytest.mark.gen_test
    async def test_one_workspaces_spent_minute_leaves_another_its_own(self, make, dns, dns_host):
        dns_host.respond_with(200, body=settings(dns_host))
        discoverer = make()
        zones = zones_at(dns, dns_host, 21)
        for zone in zones[:20]:
            await discoverer.discover(zone, workspace=WORKSPACE)
        assert (await discoverer.discover(zones[20], workspace="another")).outcome == "supported"

    @pytest.mark.gen_test
    async def test_a_destination_gets_at_most_sixty_requests_a_minute_from_all_workspaces(self, make, dns, dns_host):
        dns_host.respond_with(200, body=settings(dns_host))
        discoverer = make()
        found = [await discoverer.discover(zone, workspace=f"workspace {i}")
                 for i, zone in enumerate(zones_at(dns, dns_host, 31))]
        assert [f.outcome for f in found] == ["supported"] * 30 + ["unknown"]
        assert f"{HOST}:{dns_host.port} was not asked now" in found[30].problem
        assert len(dns_host.received) == 60

    @pytest.mark.gen_test
    async def test_a_destination_gets_at_most_four_requests_at_once(self, make, dns, slow_host):
        discoverer = make(timeout=1.0)
        found = await asyncio.gather(*(discoverer.discover(zone, workspace=f"workspace {i}")
                                       for i, zone in enumerate(zones_at(dns, slow_host, 6))))
        assert sorted("was not asked now" in f.problem for f in found) == [False] * 4 + [True] * 2
        assert len(slow_host.received) == 4


class TestPrivateDestinations:
    @pytest.mark.gen_test
    async def test_a_settings_host_resolving_to_a_private_address_is_never_contacted(self, make, dns, dns_host):
        publish(dns, dns_host)
        found = await make(allow=()).discover(ZONE, workspace=WORKSPACE)
        assert found.outcome == "ignored"
        assert "non-public addresses" in found.problem
        assert dns_host.received == []

    @pytest.mark.gen_test
    async def test_a_urlapi_resolving_to_a_private_address_is_ignored_and_never_contacted(self, make, dns, dns_host):
        dns.publish("api.dnshost-test.com", "A", "10.0.0.1")  # outside the loopback the test allows
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host, urlAPI="https://api.dnshost-test.com/dc"))])
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert found.outcome == "ignored"
        assert "urlAPI" in found.problem and "non-public addresses" in found.problem
        assert len(dns_host.received) == 1  # the settings only


class TestRefusedRecord:
    @pytest.mark.gen_test
    @pytest.mark.parametrize(("value", "why"), [
        ("https://dc.dnshost-test.com/dc", "scheme"),
        ("dc.dnshost-test.com/dc?zone=x", "query"),
        ("dc.dnshost-test.com/dc#top", "fragment"),
        ("user@dc.dnshost-test.com/dc", "user name"),
        ("127.0.0.1/dc", "not an IP address"),
        ("[::1]/dc", "not an IP address"),
    ])
    async def test_a_value_that_is_not_a_host_with_a_path_is_ignored_unrequested(self, make, dns, dns_host, value, why):
        publish(dns, dns_host, value)
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert found.outcome == "ignored"
        assert why in found.problem and f"_domainconnect.{ZONE}" in found.problem
        assert dns_host.received == []

    @pytest.mark.gen_test
    async def test_several_domainconnect_records_are_ignored(self, make, dns, dns_host):
        publish(dns, dns_host)
        publish(dns, dns_host, "dc.other-host-test.com")
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert found.outcome == "ignored"
        assert "2 different TXT records" in found.problem
        assert dns_host.received == []

    @pytest.mark.gen_test
    async def test_a_long_value_is_shortened_in_the_problem(self, make, dns, dns_host):
        value = "dc.dnshost-test.com/" + "p" * 200 + "?x"
        publish(dns, dns_host, value)
        found = await make().discover(ZONE, workspace=WORKSPACE)
        assert found.outcome == "ignored"
        assert "p" * 80 not in found.problem and len(found.problem) <= 300


class TestCache:
    @pytest.mark.gen_test
    async def test_a_second_discovery_within_cache_seconds_makes_no_request(self, make, dns, dns_host, clock):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host))])
        discoverer = make()
        first = await discoverer.discover(ZONE, workspace=WORKSPACE)
        clock.advance(599)
        assert await discoverer.discover(ZONE.upper() + ".", workspace=WORKSPACE) == first
        assert len(dns_host.received) == 2

    @pytest.mark.gen_test
    async def test_after_cache_seconds_the_zone_is_discovered_again(self, make, dns, dns_host, clock):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host)), 404, Answer(200, settings(dns_host)), 200])
        discoverer = make()
        assert (await discoverer.discover(ZONE, workspace=WORKSPACE)).outcome == "not_supported"
        clock.advance(600)
        assert (await discoverer.discover(ZONE, workspace=WORKSPACE)).outcome == "supported"
        assert len(dns_host.received) == 4

    @pytest.mark.gen_test
    async def test_an_unknown_answer_is_kept_for_a_minute_only(self, make, dns, dns_host, clock):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host)), 500, Answer(200, settings(dns_host)), 200])
        discoverer = make()
        assert (await discoverer.discover(ZONE, workspace=WORKSPACE)).outcome == "unknown"
        clock.advance(59)
        assert (await discoverer.discover(ZONE, workspace=WORKSPACE)).outcome == "unknown"
        assert len(dns_host.received) == 2
        clock.advance(1)
        assert (await discoverer.discover(ZONE, workspace=WORKSPACE)).outcome == "supported"
        assert len(dns_host.received) == 4

    @pytest.mark.gen_test
    async def test_concurrent_discoveries_of_one_zone_share_one_set_of_requests(self, make, dns, dns_host):
        publish(dns, dns_host)
        dns_host.plan([Answer(200, settings(dns_host), delay=0.2)])
        discoverer = make(timeout=10.0)  # twenty at once on a busy machine
        found = await asyncio.gather(*(discoverer.discover(ZONE, workspace=WORKSPACE) for _ in range(20)))
        assert {f.outcome for f in found} == {"supported"}
        assert len(dns_host.received) == 2
