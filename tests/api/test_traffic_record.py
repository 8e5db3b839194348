"""The customer's traffic record (issue 48, item 2): ``[tls_terminator] traffic_cname`` and
``traffic_addresses`` say where customers point the hostname itself so that its visitors reach the
terminator serving its certificate.

The records' API (GET delegation-record, the verification link's public view) adds ``trafficRecords``
beside the spec's two records, which stay as they are; the HTTPS scan says whether the name leads
there and what it serves. Names are looked up on the test DNS server; the scan's handshake goes to a
real HTTPS receiver on 127.0.0.1 (tests/servers/https.py).
"""

from __future__ import annotations

import attrs
import pytest
import trustme

from core.config import NetworkConfig, SiteScanConfig, TlsTerminatorConfig
from tests.servers.https import HttpsReceiver

EDGE = "edge.traffic-test.com"
SHOP = "shop.traffic-test.com"
SCAN = "/v1/site-scan/https"
READ = ["domains:read"]


@pytest.fixture
def terminator():
    return TlsTerminatorConfig(traffic_cname=EDGE, traffic_addresses=["192.0.2.10", "2001:db8::10"])


@pytest.fixture
def config(config, terminator):
    return attrs.evolve(config, tls_terminator=terminator)


async def new_domain(api, owner, apex="shop.example.com"):
    r = await api.post("/v1/domains", {"apex": apex}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def records(api, world, owner, domain):
    r = await api.get(f"/v1/domains/{domain['id']}/delegation-record", token=world.key(owner.workspace, READ))
    assert r.status == 200, r.body
    return r.body


class TestTheRecords:
    @pytest.mark.gen_test
    async def test_a_hostname_below_its_zone_is_pointed_by_a_cname_to_the_terminator(self, api, world):
        owner = world.owner()
        body = await records(api, world, owner, await new_domain(api, owner))
        assert body["trafficRecords"] == [{"type": "CNAME", "host": "shop.example.com", "value": EDGE, "ttl": 300}]

    @pytest.mark.gen_test
    async def test_the_spec_s_two_records_are_unchanged_beside_it(self, api, world):
        owner = world.owner()
        domain = await new_domain(api, owner)
        body = await records(api, world, owner, domain)
        assert {k: v for k, v in body.items() if k != "trafficRecords"} == {
            **domain["validation"]["delegation"], "ownership": domain["validation"]["ownership"]}
        assert domain["validation"]["delegation"]["type"] == "CNAME"
        assert domain["validation"]["delegation"]["host"] == "_acme-challenge.shop.example.com"
        assert domain["validation"]["ownership"]["host"] == "_service-verify.shop.example.com"

    @pytest.mark.gen_test
    async def test_a_zone_s_apex_is_pointed_by_the_terminator_s_addresses(self, api, world):
        owner = world.owner()
        body = await records(api, world, owner, await new_domain(api, owner, apex="example.com"))
        assert body["trafficRecords"] == [
            {"type": "A", "host": "example.com", "value": "192.0.2.10", "ttl": 300},
            {"type": "AAAA", "host": "example.com", "value": "2001:db8::10", "ttl": 300},
        ]

    @pytest.mark.gen_test
    async def test_a_hostname_dns_shows_to_be_a_zone_of_its_own_gets_the_addresses(self, api, world, dns):
        dns.publish("shop.example.com", "NS", "ns1.dns-host-test.com", "ns2.dns-host-test.com")
        owner = world.owner()
        domain = await new_domain(api, owner)
        await api.post(f"/v1/domains/{domain['id']}/verify-delegation", token=owner.token)  # finds the zone
        body = await records(api, world, owner, domain)
        assert [r["type"] for r in body["trafficRecords"]] == ["A", "AAAA"]

    @pytest.mark.gen_test
    async def test_the_verification_link_s_public_view_has_them(self, api, world):
        owner = world.owner()
        domain = await new_domain(api, owner)
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body
        view = (await api.get("/v1/public/verification-links/" + link["url"].rsplit("/", 1)[1])).body
        assert view["trafficRecords"] == [{"type": "CNAME", "host": "shop.example.com", "value": EDGE, "ttl": 300}]
        assert set(view["validation"]) >= {"delegation", "ownership"}


class TestWithoutTheKeys:
    @pytest.fixture
    def terminator(self):
        return TlsTerminatorConfig()

    @pytest.mark.gen_test
    async def test_the_records_say_nothing_of_traffic(self, api, world):
        owner = world.owner()
        body = await records(api, world, owner, await new_domain(api, owner))
        assert "trafficRecords" not in body

    @pytest.mark.gen_test
    async def test_the_public_view_says_nothing_of_traffic(self, api, world):
        owner = world.owner()
        domain = await new_domain(api, owner)
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body
        view = (await api.get("/v1/public/verification-links/" + link["url"].rsplit("/", 1)[1])).body
        assert "trafficRecords" not in view


# -- the HTTPS scan ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def receiver():
    """The terminator: serves a certificate for SHOP (whatever name is asked) from "Edge Test CA"."""
    with HttpsReceiver(SHOP, ca=trustme.CA(organization_name="Edge Test CA")) as server:
        yield server


class TestTheScan:
    @pytest.fixture
    def terminator(self):
        return TlsTerminatorConfig(traffic_cname=EDGE)

    @pytest.fixture
    def config(self, config, terminator, receiver):
        return attrs.evolve(
            config, tls_terminator=terminator,
            site_scan=SiteScanConfig(port=receiver.port, timeout_seconds=2),
            network=NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=receiver.ca_pem_path),
        )

    @pytest.mark.gen_test
    async def test_a_cname_to_the_terminator_reaches_it_and_the_certificate_served_is_named(self, api, dns):
        dns.publish(SHOP, "CNAME", EDGE)
        dns.publish(SHOP, "A", "127.0.0.1")  # what a resolver answers for A, having followed the CNAME
        dns.publish(EDGE, "A", "127.0.0.1")
        r = await api.post(SCAN, {"urlOrDomain": SHOP})
        assert r.body["status"] == "secure"
        assert r.body["details"]["traffic"] == {
            "reachesTerminator": True, "found": [EDGE, "127.0.0.1"],
            "message": f"{SHOP} points at our TLS terminator: a CNAME to {EDGE}. "
                       f"It serves a certificate for {SHOP} issued by Edge Test CA.",
        }

    @pytest.mark.gen_test
    async def test_a_name_pointing_elsewhere_does_not_reach_it_and_says_what_it_serves(self, api, dns):
        moved = "moved.traffic-test.com"
        dns.publish(moved, "A", "127.0.0.1")
        dns.publish(EDGE, "A", "127.0.0.2")
        r = await api.post(SCAN, {"urlOrDomain": moved})
        assert r.body["status"] == "not_secure"
        assert r.body["details"]["traffic"] == {
            "reachesTerminator": False, "found": ["127.0.0.1"],
            "message": f"{moved} does not point at our TLS terminator: it resolves to 127.0.0.1. It should be a "
                       f"CNAME to {EDGE}. It serves a certificate for {SHOP}, not for {moved}.",
        }

    @pytest.mark.gen_test
    async def test_an_apex_with_the_addresses_of_the_terminator_s_name_reaches_it(self, api, dns):
        dns.publish(SHOP, "A", "127.0.0.1")  # a flattened CNAME: the apex answers the target's addresses
        dns.publish(EDGE, "A", "127.0.0.1")
        r = await api.post(SCAN, {"urlOrDomain": SHOP})
        assert r.body["details"]["traffic"]["reachesTerminator"] is True
        assert "the addresses of edge.traffic-test.com" in r.body["details"]["traffic"]["message"]

    @pytest.mark.gen_test
    async def test_a_name_with_no_public_address_tells_nothing_of_where_it_leads(self, api, dns):
        hidden = "hidden.traffic-test.com"
        dns.publish(hidden, "CNAME", "db.internal-test.com")
        dns.publish(hidden, "A", "10.0.0.5")
        r = await api.post(SCAN, {"urlOrDomain": hidden})
        traffic = r.body["details"]["traffic"]
        assert (traffic["reachesTerminator"], traffic["found"]) == (False, [])
        assert "no public address" in traffic["message"] and "internal" not in traffic["message"]
        assert "10.0.0.5" not in traffic["message"]


class TestTheScanAgainstAddresses:
    @pytest.fixture
    def terminator(self):
        return TlsTerminatorConfig(traffic_addresses=["127.0.0.1"])

    @pytest.fixture
    def config(self, config, terminator, receiver):
        return attrs.evolve(
            config, tls_terminator=terminator,
            site_scan=SiteScanConfig(port=receiver.port, timeout_seconds=2),
            network=NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=receiver.ca_pem_path),
        )

    @pytest.mark.gen_test
    async def test_a_name_at_the_terminator_s_address_reaches_it(self, api, dns):
        dns.publish(SHOP, "A", "127.0.0.1")
        r = await api.post(SCAN, {"urlOrDomain": SHOP})
        assert r.body["details"]["traffic"] == {
            "reachesTerminator": True, "found": ["127.0.0.1"],
            "message": f"{SHOP} points at our TLS terminator: it resolves to 127.0.0.1, the terminator's address. "
                       f"It serves a certificate for {SHOP} issued by Edge Test CA.",
        }

    @pytest.mark.gen_test
    async def test_a_name_at_another_address_does_not(self, api, dns):
        dns.publish(SHOP, "A", "127.0.0.1")
        dns.publish(SHOP, "AAAA", "::1")  # one address that is not the terminator's is enough to miss it
        r = await api.post(SCAN, {"urlOrDomain": SHOP})
        traffic = r.body["details"]["traffic"]
        assert traffic["reachesTerminator"] is False
        assert traffic["message"].startswith(f"{SHOP} does not point at our TLS terminator: it resolves to 127.0.0.1")
        assert "It should be the address records 127.0.0.1." in traffic["message"]
