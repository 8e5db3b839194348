"""core.outbound.guard, the outbound guard: URL checks, the address table, resolution through the real DNS
test server, and HTTPS posts to a real receiver (tests/servers/https.py) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time

import pytest
import trustme

from core.config import ConfigError, DnsConfig, NetworkConfig
from core.outbound.guard import (
    AddressPolicy,
    DestinationRefused,
    OutboundClient,
    OutboundError,
    Target,
    check_url,
)
from tests.servers.https import Answer, HttpsReceiver
from tests.servers.tls import TlsServer

HOST = "hooks.receiver-test.com"
LOOPBACK = ["127.0.0.0/8"]


@pytest.fixture
def receiver(dns):
    with HttpsReceiver(HOST) as receiver:
        dns.publish(HOST, "A", "127.0.0.1")
        yield receiver


@pytest.fixture
def outbound(dns):
    """Make an OutboundClient using the DNS test server; closed after the test."""
    clients = []

    def make(allow=(), ca_bundle="", **kwargs):
        network = NetworkConfig(allow_private_ranges=list(allow), ca_bundle=ca_bundle)
        clients.append(OutboundClient(network, dns.config(), **kwargs))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def client(outbound, receiver):
    """A client that may reach the receiver: loopback allowed, the receiver's CA trusted."""
    return outbound(LOOPBACK, receiver.ca_pem_path)


def refusal(url):
    with pytest.raises(DestinationRefused) as caught:
        check_url(url, policy=AddressPolicy())
    return caught.value.reason


class TestCheckUrl:
    """Static checks of a URL, before any DNS."""

    def test_a_url_with_port_and_path_passes_normalised(self):
        assert check_url("https://Hooks.Receiver-Test.COM.:8443/in/hook?x=1", policy=AddressPolicy()) == Target(
            url="https://hooks.receiver-test.com:8443/in/hook?x=1",
            host="hooks.receiver-test.com",
            port=8443,
            path_and_query="/in/hook?x=1",
        )

    def test_the_default_port_is_443(self):
        assert check_url("https://hooks.receiver-test.com", policy=AddressPolicy()).port == 443

    def test_an_idn_host_becomes_a_labels(self):
        assert check_url("https://bücher.de/hook", policy=AddressPolicy()).url == "https://xn--bcher-kva.de/hook"

    def test_non_ascii_in_the_path_is_percent_encoded(self):
        assert check_url("https://hooks.example.com/ü?q=ß", policy=AddressPolicy()).path_and_query == "/%C3%BC?q=%C3%9F"

    def test_http_is_refused(self):
        assert refusal("http://hooks.example.com/") == "The URL must use https."

    def test_user_info_is_refused(self):
        assert refusal("https://user:pass@hooks.example.com/") == "The URL must not contain a user name or password."

    def test_a_fragment_is_refused(self):
        assert "fragment" in refusal("https://hooks.example.com/#top")

    def test_a_missing_host_is_refused(self):
        assert refusal("https:///hook") == "The URL must name a host."

    @pytest.mark.parametrize("port", ["0", "65536", ""])
    def test_a_port_out_of_range_is_refused(self, port):
        assert refusal(f"https://hooks.example.com:{port}/") == "The port must be a number from 1 to 65535."

    @pytest.mark.parametrize("url", ["https://hooks.example.com/a b", "https://hooks.exam\tple.com/", "https://a.com\\@b.com/"])
    def test_spaces_controls_and_backslashes_are_refused(self, url):
        assert "spaces, control characters or backslashes" in refusal(url)

    @pytest.mark.parametrize(
        "url",
        [
            "https://localhost/",
            "https://ⓛocalhost/",
            "https://api.localhost/",
            "https://printer.local/",
            "https://vault.internal/",
            "https://abc.onion/",
            "https://hooks.test/",
            "https://hooks.example/",
            "https://nas.home.arpa/",
            "https://1.0.0.127.in-addr.arpa/",
            "https://router.lan/",
        ],
    )
    def test_special_use_names_are_refused(self, url):
        assert "is a special-use name" in refusal(url)

    def test_a_single_label_is_refused(self):
        assert "not the single label hooks" in refusal("https://hooks/")

    def test_an_unknown_top_level_domain_is_refused(self):
        assert "not under a public top-level domain (.nosuchtld)" in refusal("https://hooks.nosuchtld/")

    @pytest.mark.parametrize("host", ["a_b.example.com", "-a.example.com", "a..example.com", "xn--zz.example.com"])
    def test_invalid_names_are_refused(self, host):
        assert "is not a valid DNS name" in refusal(f"https://{host}/")

    @pytest.mark.parametrize(
        "host",
        [
            "127.0.0.1",
            "[::1]",
            "2130706433",
            "0x7f000001",
            "127.1",
            "0x7f.1",
            "0177.0.0.1",
            "[::ffff:127.0.0.1]",
            "169.254.169.254",
            "８.８.８.８",
            "8.8.8.8",
        ],
    )
    def test_ip_literals_are_refused_in_every_spelling(self, host):
        assert refusal(f"https://{host}/").startswith("The host must be a DNS name, not an IP address")

    def test_an_ip_literal_refusal_says_what_the_address_is(self):
        assert refusal("https://169.254.169.254/latest/meta-data/") == (
            "The host must be a DNS name, not an IP address (169.254.169.254 is a link-local (cloud metadata) address)."
        )


DENIED = [
    "10.254.0.0", "192.168.10.65", "172.16.10.65", "0.1.2.3", "0.0.0.0", "127.0.0.1", "169.254.45.1",
    "169.254.169.254", "255.255.255.255", "192.0.2.255", "198.51.100.65", "203.0.113.6", "100.100.0.0",
    "100.100.100.200", "100.64.0.1", "192.0.0.0", "192.0.0.255", "192.88.99.1", "250.10.20.30", "198.18.0.0",
    "224.0.0.1", "::1", "::", "fd00:ec2::254", "fc00::1", "fe80::1", "fe80::1%eth0", "fec0::1", "ff02::1",
    "100::1", "2001:db8::1", "3fff::1", "2001::1", "2001:2::1", "2002:7f00:1::1", "5f00::1", "4000::1",
    "64:ff9b::7f00:1", "64:ff9b::a00:1", "64:ff9b:1::8.8.8.8", "::ffff:127.0.0.1", "::ffff:0.0.0.1",
    "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "::8.8.8.8",
]
ALLOWED = ["1.1.1.1", "8.8.8.8", "2001:4860:4860::8888", "2606:4700:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808"]


class TestAddressPolicy:
    """The address table and the operator's allow list."""

    @pytest.mark.parametrize("address", DENIED)
    def test_non_public_addresses_are_refused(self, address):
        assert AddressPolicy().refusal(ipaddress.ip_address(address)) is not None

    @pytest.mark.parametrize("address", ALLOWED)
    def test_public_addresses_are_allowed(self, address):
        assert AddressPolicy().refusal(ipaddress.ip_address(address)) is None

    def test_a_refusal_names_the_address_and_its_kind(self):
        assert AddressPolicy().refusal(ipaddress.ip_address("10.0.0.5")) == "10.0.0.5 is a private address"

    def test_a_mapped_refusal_names_the_ipv4_address(self):
        why = AddressPolicy().refusal(ipaddress.ip_address("::ffff:10.0.0.1"))
        assert why.endswith("stands for 10.0.0.1, a private address")

    def test_an_allowed_range_lets_its_addresses_through(self):
        assert AddressPolicy(LOOPBACK).refusal(ipaddress.ip_address("127.0.0.1")) is None

    def test_an_allowed_range_lets_nothing_else_through(self):
        assert AddressPolicy(LOOPBACK).refusal(ipaddress.ip_address("10.0.0.1")) is not None

    def test_an_allowed_ipv6_range_lets_its_addresses_through(self):
        assert AddressPolicy(["::1/128"]).refusal(ipaddress.ip_address("::1")) is None

    @pytest.mark.parametrize("address", ["::ffff:127.0.0.1", "64:ff9b::127.0.0.1"])
    def test_an_allowed_range_applies_to_the_ipv4_an_address_stands_for(self, address):
        assert AddressPolicy(LOOPBACK).refusal(ipaddress.ip_address(address)) is None


class TestResolution:
    """Names resolved through the configured DNS, every address judged."""

    @pytest.mark.gen_test
    async def test_a_name_resolving_to_a_private_address_is_refused_without_revealing_it(self, outbound, dns):
        dns.publish("hooks.example.net", "A", "10.0.0.5")
        with pytest.raises(DestinationRefused) as caught:
            await outbound().check_destination("https://hooks.example.net/hook")
        assert caught.value.reason.startswith("hooks.example.net resolves only to non-public addresses")
        assert "10.0.0.5" not in caught.value.reason

    @pytest.mark.gen_test
    async def test_a_private_ipv6_address_is_refused(self, outbound, dns):
        dns.publish("hooks.example.net", "AAAA", "fd00:ec2::254")
        with pytest.raises(DestinationRefused, match="resolves only to non-public addresses"):
            await outbound().check_destination("https://hooks.example.net/hook")

    @pytest.mark.gen_test
    async def test_a_public_name_passes_the_check(self, outbound, dns):
        dns.publish("hooks.example.net", "A", "8.8.8.8")
        target = await outbound().check_destination("https://Hooks.Example.net/hook")
        assert target.url == "https://hooks.example.net/hook"

    @pytest.mark.gen_test
    async def test_only_the_allowed_addresses_are_returned(self, outbound, dns):
        dns.publish("hooks.example.net", "A", "10.0.0.1", "8.8.8.8", "127.0.0.1")
        dns.publish("hooks.example.net", "AAAA", "fe80::1", "2606:4700:4700::1111")
        assert await outbound().resolver.resolve("hooks.example.net", 443) == [
            (socket.AF_INET, ("8.8.8.8", 443)),
            (socket.AF_INET6, ("2606:4700:4700::1111", 443, 0, 0)),
        ]

    @pytest.mark.gen_test
    async def test_at_most_two_addresses_of_each_family_are_dialled(self, outbound, dns):
        """A name with hundreds of records costs one webhook attempt or one scan two connections per family."""
        dns.publish("many.example.net", "A", *(f"9.9.{n // 250}.{n % 250 + 1}" for n in range(300)))
        dns.publish("many.example.net", "AAAA", *(f"2606:4700::{n:x}" for n in range(1, 301)))
        resolved = await outbound().resolver.resolve("many.example.net", 443)
        assert resolved == [
            (socket.AF_INET, ("9.9.0.1", 443)), (socket.AF_INET, ("9.9.0.2", 443)),
            (socket.AF_INET6, ("2606:4700::1", 443, 0, 0)), (socket.AF_INET6, ("2606:4700::2", 443, 0, 0)),
        ]

    @pytest.mark.gen_test
    async def test_the_scan_gets_the_same_two_of_each_family(self, outbound, dns):
        dns.publish("many.example.net", "A", *(f"9.9.0.{n}" for n in range(1, 201)))
        assert await outbound().resolve("many.example.net") == [ipaddress.ip_address("9.9.0.1"), ipaddress.ip_address("9.9.0.2")]

    @pytest.mark.gen_test
    async def test_a_mapped_address_is_dialled_as_the_ipv4_address_it_was_judged_as(self, outbound, dns):
        dns.publish("hooks.example.net", "AAAA", "::ffff:127.0.0.1")
        resolved = await outbound(LOOPBACK).resolver.resolve("hooks.example.net", 8443)
        assert resolved == [(socket.AF_INET, ("127.0.0.1", 8443))]

    @pytest.mark.gen_test
    async def test_the_scan_resolves_through_the_guard(self, outbound, dns):
        dns.publish("shop.example.net", "A", "8.8.8.8", "192.168.1.1")
        assert await outbound().resolve("Shop.Example.net.") == [ipaddress.ip_address("8.8.8.8")]

    @pytest.mark.gen_test
    async def test_the_scan_refuses_a_special_use_name(self, outbound):
        with pytest.raises(DestinationRefused, match="special-use"):
            await outbound().resolve("localhost")

    @pytest.mark.gen_test
    async def test_nxdomain_is_a_clear_error(self, outbound):
        with pytest.raises(OutboundError, match=r"^nowhere.example.net does not exist in DNS \(NXDOMAIN\)\.$"):
            await outbound().resolver.resolve("nowhere.example.net", 443)

    @pytest.mark.gen_test
    async def test_nxdomain_refuses_the_destination_at_registration(self, outbound):
        with pytest.raises(DestinationRefused, match="does not exist in DNS"):
            await outbound().check_destination("https://nowhere.example.net/hook")

    @pytest.mark.gen_test
    async def test_a_name_without_addresses_is_a_clear_error(self, outbound, dns):
        dns.publish("hooks.example.net", "TXT", "v=spf1 -all")
        with pytest.raises(OutboundError, match=r"hooks.example.net has no address records \(A or AAAA\)\."):
            await outbound().resolver.resolve("hooks.example.net", 443)

    @pytest.mark.gen_test
    async def test_a_dns_failure_is_a_clear_error(self, outbound, dns):
        dns.zone.servfail.add("hooks.example.net")
        with pytest.raises(OutboundError, match=r"^The DNS lookup of hooks.example.net failed \("):
            await outbound().resolver.resolve("hooks.example.net", 443)


class TestRebinding:
    """A name is resolved for every request, and only the addresses judged are dialled.

    127.0.0.1 (allowed) stands for a public address and 127.0.0.2 (not allowed) for a private
    one, so that nothing outside loopback could be contacted even if the guard failed.
    """

    @pytest.mark.gen_test
    async def test_a_name_that_rebinds_after_the_check_is_refused_at_send_time(self, outbound, dns, receiver):
        client = outbound(["127.0.0.1/32"], receiver.ca_pem_path)
        dns.remove(HOST)
        dns.publish_sequence(HOST, "A", ["127.0.0.1", "127.0.0.2"])
        await client.check_destination(receiver.url())
        with pytest.raises(DestinationRefused, match="resolves only to non-public addresses"):
            await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert receiver.received == []

    @pytest.mark.gen_test
    async def test_the_address_dialled_is_the_one_checked(self, outbound, dns, receiver):
        client = outbound(["127.0.0.1/32"], receiver.ca_pem_path)
        dns.remove(HOST)
        dns.publish_sequence(HOST, "A", ["127.0.0.1", "127.0.0.2"])
        before = len(dns.zone.queries)
        response = await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert response.status_code == 200 and len(receiver.received) == 1
        assert dns.zone.queries[before:].count((HOST, "A")) == 1  # one lookup, judged and dialled


class TestPost:
    """HTTPS posts to the real receiver."""

    @pytest.mark.gen_test
    async def test_the_exact_body_and_headers_are_delivered(self, client, receiver):
        body = b'{"event": "certificate.active", "raw": "\xff\x00"}'
        headers = {"Content-Type": "application/json", "X-Webhook-Signature": "v1=abc123"}
        response = await client.post(receiver.url(), body=body, headers=headers, timeout=2)
        assert response.status_code == 200
        [(got_headers, got_body, _)] = receiver.received
        assert got_body == body
        assert got_headers["Content-Type"] == "application/json"
        assert got_headers["X-Webhook-Signature"] == "v1=abc123"
        assert got_headers["Host"] == f"{HOST}:{receiver.port}"

    @pytest.mark.gen_test
    async def test_the_answer_body_and_duration_are_reported(self, client, receiver):
        receiver.respond_with(202, body=b"queued")
        response = await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert (response.status_code, response.body, response.truncated) == (202, b"queued", False)
        assert 0 < response.duration_ms < 2000

    @pytest.mark.gen_test
    async def test_a_redirect_is_returned_not_followed(self, client, receiver):
        receiver.respond_with(302, location="https://169.254.169.254/latest/meta-data/")
        response = await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert response.status_code == 302
        assert len(receiver.received) == 1

    @pytest.mark.gen_test
    async def test_a_redirect_to_a_reachable_place_is_not_followed_either(self, client, receiver):
        receiver.respond_with(307, location=receiver.url("/followed"))
        response = await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert response.status_code == 307
        await asyncio.sleep(0.1)  # time for a followed request to arrive
        assert len(receiver.received) == 1

    @pytest.mark.gen_test
    async def test_a_slow_receiver_times_out(self, client, receiver):
        receiver.respond_with(200, delay=3)
        started = time.monotonic()
        with pytest.raises(OutboundError, match=r"timed out after 0\.5 s"):
            await client.post(receiver.url(), body=b"{}", headers={}, timeout=0.5)
        assert time.monotonic() - started < 1.5

    @pytest.mark.gen_test
    async def test_a_closed_port_is_an_error(self, client, receiver):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        with pytest.raises(OutboundError, match="refused the connection"):
            await client.post(f"https://{HOST}:{port}/hook", body=b"{}", headers={}, timeout=2)

    @pytest.mark.gen_test
    async def test_without_the_ca_bundle_the_certificate_is_not_trusted(self, outbound, receiver):
        with pytest.raises(OutboundError, match="^TLS certificate verification failed: unable to get local issuer"):
            await outbound(LOOPBACK).post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert receiver.received == []

    @pytest.mark.gen_test
    async def test_a_certificate_for_another_name_is_not_trusted(self, client, dns, receiver):
        dns.publish("other.receiver-test.com", "A", "127.0.0.1")
        with pytest.raises(OutboundError, match="^TLS certificate verification failed: Hostname mismatch"):
            await client.post(f"https://other.receiver-test.com:{receiver.port}/hook", body=b"{}", headers={}, timeout=2)

    @pytest.mark.gen_test
    async def test_a_long_answer_is_truncated_and_its_status_kept(self, outbound, receiver):
        client = outbound(LOOPBACK, receiver.ca_pem_path, max_body_bytes=1000)
        receiver.respond_with(500, body=b"x" * 300_000)
        response = await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert (response.status_code, response.body, response.truncated) == (500, b"x" * 1000, True)

    @pytest.mark.gen_test
    async def test_an_answer_at_the_cap_is_whole(self, outbound, receiver):
        client = outbound(LOOPBACK, receiver.ca_pem_path, max_body_bytes=1000)
        receiver.respond_with(200, body=b"y" * 1000)
        response = await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert (response.body, response.truncated) == (b"y" * 1000, False)

    @pytest.mark.gen_test
    async def test_a_refused_url_is_never_requested(self, client, receiver):
        with pytest.raises(DestinationRefused, match="must use https"):
            await client.post(receiver.url().replace("https:", "http:"), body=b"{}", headers={}, timeout=2)

    @pytest.mark.gen_test
    async def test_the_pool_is_bounded(self, outbound, receiver):
        client = outbound(LOOPBACK, receiver.ca_pem_path, max_clients=2)
        receiver.respond_with(200, delay=0.3)
        started = time.monotonic()
        posts = [client.post(receiver.url(), body=b"{}", headers={}, timeout=5) for _ in range(4)]
        responses = await asyncio.gather(*posts)
        assert [r.status_code for r in responses] == [200] * 4
        assert receiver.peak_in_flight == 2
        assert time.monotonic() - started >= 0.55

    def test_an_unreadable_ca_bundle_stops_start_up(self, tmp_path, dns):
        with pytest.raises(ConfigError, match="^network.ca_bundle: cannot load"):
            OutboundClient(NetworkConfig(ca_bundle=str(tmp_path / "missing.pem")), DnsConfig())


class TestKeptConnections:
    """A finished connection is reused for the next request to the same place, but never against the guard."""

    @pytest.mark.gen_test
    async def test_requests_one_after_another_share_one_connection(self, client, receiver):
        for _ in range(3):
            assert (await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)).status_code == 200
        assert receiver.connections == 1

    @pytest.mark.gen_test
    async def test_every_request_still_looks_the_name_up(self, client, dns, receiver):
        await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        before = len(dns.zone.queries)
        await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert dns.zone.queries[before:].count((HOST, "A")) == 1

    @pytest.mark.gen_test
    async def test_a_kept_connection_is_not_used_once_the_name_points_elsewhere(self, client, dns, receiver):
        await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        dns.remove(HOST)
        dns.publish(HOST, "A", "127.0.0.3")  # allowed, but nothing listens there
        with pytest.raises(OutboundError, match="refused the connection"):
            await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert len(receiver.received) == 1

    @pytest.mark.gen_test
    async def test_a_kept_connection_is_not_used_once_the_address_is_refused(self, outbound, dns, receiver):
        client = outbound(["127.0.0.1/32"], receiver.ca_pem_path)
        await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        dns.remove(HOST)
        dns.publish(HOST, "A", "127.0.0.2")
        with pytest.raises(DestinationRefused):
            await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert len(receiver.received) == 1

    @pytest.mark.gen_test
    async def test_an_answer_with_connection_close_ends_the_connection(self, client, receiver):
        receiver.plan([Answer(200, close=True)])
        for _ in range(2):
            await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert receiver.connections == 2

    @pytest.mark.gen_test
    async def test_a_truncated_answer_ends_the_connection(self, outbound, receiver):
        client = outbound(LOOPBACK, receiver.ca_pem_path, max_body_bytes=10)
        receiver.plan([Answer(200, body=b"z" * 100)])
        assert (await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)).truncated
        assert (await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)).status_code == 200
        assert receiver.connections == 2

    @pytest.mark.gen_test
    async def test_a_connection_idle_too_long_is_not_reused(self, outbound, receiver):
        client = outbound(LOOPBACK, receiver.ca_pem_path)
        client.pool.idle_seconds = 0.1
        await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        await asyncio.sleep(0.2)
        await client.post(receiver.url(), body=b"{}", headers={}, timeout=2)
        assert receiver.connections == 2

    @pytest.mark.gen_test
    async def test_a_connection_the_receiver_closed_is_replaced_and_the_request_sent_once(self, outbound, dns):
        with HttpsReceiver(HOST, idle_timeout=0.1) as receiver:
            dns.publish(HOST, "A", "127.0.0.1")
            client = outbound(LOOPBACK, receiver.ca_pem_path)
            await client.post(receiver.url(), body=b"1", headers={}, timeout=2)
            await asyncio.sleep(0.4)  # the receiver has closed the kept connection by now
            response = await client.post(receiver.url(), body=b"2", headers={}, timeout=2)
            assert response.status_code == 200
            assert [r.body for r in receiver.received] == [b"1", b"2"]
            assert receiver.connections == 2

    @pytest.mark.gen_test
    async def test_a_kept_connection_closed_before_any_answer_is_replaced_once(self, client, receiver):
        receiver.plan([200, Answer(drop=True)])
        await client.post(receiver.url(), body=b"1", headers={}, timeout=2)
        response = await client.post(receiver.url(), body=b"2", headers={}, timeout=2)
        assert response.status_code == 200
        assert [r.body for r in receiver.received] == [b"1", b"2", b"2"]
        assert receiver.connections == 2

    @pytest.mark.gen_test
    async def test_a_new_connection_closed_before_any_answer_is_an_error(self, client, receiver):
        receiver.plan([Answer(drop=True)])
        with pytest.raises(OutboundError, match="closed the connection before answering"):
            await client.post(receiver.url(), body=b"1", headers={}, timeout=2)
        assert len(receiver.received) == 1

    @pytest.mark.gen_test
    async def test_a_timeout_says_what_was_under_way(self, client, receiver):
        receiver.respond_with(200, delay=3)
        with pytest.raises(OutboundError, match=r"timed out after 0\.5 s \(waiting for the answer\)"):
            await client.post(receiver.url(), body=b"{}", headers={}, timeout=0.5)


class TestAnswersThatAreNotHttp:
    """A receiver that does not answer in readable HTTP: the attempt's error says so in words,
    never a library's internals."""

    @pytest.fixture
    def receiver_answering(self, dns, tmp_path):
        ca = trustme.CA()
        ca_file = tmp_path / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_file))
        servers = []

        def make(answer: bytes):
            server = TlsServer(answer)
            server.serve("odd.example.net", ca.issue_cert("odd.example.net"))
            servers.append(server)
            dns.publish("odd.example.net", "A", "127.0.0.1")
            return server, str(ca_file)

        yield make
        for server in servers:
            server.stop()

    async def post(self, outbound, receiver_answering, answer):
        server, ca_file = receiver_answering(answer)
        with pytest.raises(OutboundError) as caught:
            await outbound(LOOPBACK, ca_file).post(f"https://odd.example.net:{server.port}/hook", body=b"{}",
                                                   headers={}, timeout=5)
        return caught.value.reason.replace(f":{server.port}", ":PORT")

    @pytest.mark.gen_test
    async def test_headers_that_never_end_are_named(self, outbound, receiver_answering):
        reason = await self.post(outbound, receiver_answering, b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70_000)
        assert reason == "odd.example.net:PORT sent response headers longer than 64 KiB."

    @pytest.mark.gen_test
    async def test_an_answer_that_is_not_http_is_said_in_words(self, outbound, receiver_answering):
        reason = await self.post(outbound, receiver_answering, b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        assert reason == "odd.example.net:PORT closed the connection before answering, or answered in something other than HTTP."
