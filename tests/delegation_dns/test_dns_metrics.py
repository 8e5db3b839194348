"""The built-in server's counts on ``/metrics`` (core/metrics.py ``DnsMetrics``), this process's:
queries by transport, answers by rcode, answers rate-limited and queries dropped, TCP connections."""

from __future__ import annotations

import socket

import dns.message
import pytest

from core.metrics import Metrics
from tests.delegation_dns.conftest import ZONE, ask_tcp
from tests.delegation_dns.test_limits import STOPPED, burst

pytestmark = pytest.mark.parametrize("store_backend", ["sqlite"])


@pytest.fixture
def scraped(serve, open_store, clock):
    """Starts a server counting into a service's metrics; then the scrape's lines."""
    metrics = Metrics(open_store(), clock)

    def start(**options):
        return serve(metrics=metrics, **options)

    def lines() -> list[str]:
        return metrics.render().decode().splitlines()

    return start, lines


def test_queries_are_counted_by_transport(scraped):
    start, lines = scraped
    server = start()
    server.udp(ZONE, "SOA")
    server.tcp(ZONE, "SOA")
    server.udp(ZONE, "NS")
    assert {'cps_dns_queries_total{transport="udp"} 2.0', 'cps_dns_queries_total{transport="tcp"} 1.0'} <= set(lines())


def test_answers_are_counted_by_rcode(scraped):
    start, lines = scraped
    server = start()
    server.udp(f"nothing.{ZONE}")
    server.udp("example.com", "A")
    server.udp(ZONE, "SOA", use_edns=1)
    assert {'cps_dns_answers_total{rcode="NXDOMAIN"} 1.0', 'cps_dns_answers_total{rcode="REFUSED"} 1.0',
            'cps_dns_answers_total{rcode="BADVERS"} 1.0', 'cps_dns_answers_total{rcode="NOERROR"} 0.0'} <= set(lines())


def test_rate_limited_answers_are_counted_slipped_and_dropped(scraped):
    start, lines = scraped
    burst(start(rrl_responses_per_second=5, rrl_slip=2, **STOPPED), 25)
    assert {'cps_dns_rate_limited_total{action="slipped"} 10.0', 'cps_dns_rate_limited_total{action="dropped"} 10.0',
            'cps_dns_dropped_total{reason="rate_limited"} 10.0'} <= set(lines())


def test_bytes_that_are_no_query_are_counted_dropped(scraped):
    start, lines = scraped
    server = start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"\x12\x34\x01", ("127.0.0.1", server.port))
    server.udp(ZONE, "SOA")  # answered after the bytes before it were looked at
    assert 'cps_dns_dropped_total{reason="not_a_query"} 1.0' in lines()


def test_open_and_refused_tcp_connections_are_counted(scraped):
    start, lines = scraped
    server = start(tcp_max_per_source=1)
    with server.connect() as sock:
        ask_tcp(sock, dns.message.make_query(ZONE, "SOA"))
        with server.connect() as refused:
            assert refused.recv(1) == b""
        scrape = set(lines())
    assert {"cps_dns_tcp_connections 1.0", 'cps_dns_tcp_connections_refused_total{cap="per_source"} 1.0'} <= scrape
