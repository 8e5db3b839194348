"""What keeps one client from taking the built-in server from the others: UDP answers limited per
source prefix (core/delegation_dns/rrl.py: every ``rrl_slip``-th answer over the rate sent
truncated, the rest dropped), and TCP connections capped per source address, in all, and in time.

Sources are addresses of 127.0.0.0/8, all this machine's: 127.0.0.1 and 127.0.1.1 are in two /24s.
The limiter's clock is stopped (``monotonic``), so a burst is a burst however slowly the machine
sends it."""

from __future__ import annotations

import socket

import dns.flags
import dns.message
import dns.rcode
import pytest

from tests.delegation_dns.conftest import ZONE, ask_tcp
from tests.delegation_dns.test_server import NAME, TOKEN, values

pytestmark = pytest.mark.parametrize("store_backend", ["sqlite"])
STOPPED = {"monotonic": lambda: 1000.0}


def burst(server, count: int, source: str = "127.0.0.1") -> list[dns.message.Message]:
    """``count`` queries sent at once from ``source``: the answers that came back."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((source, 0))
        for n in range(count):
            sock.sendto(dns.message.make_query(f"n{n}.{ZONE}", "TXT").to_wire(), ("127.0.0.1", server.port))
        sock.settimeout(1.0)
        answers = []
        try:
            while True:
                answers.append(dns.message.from_wire(sock.recv(65535)))
        except TimeoutError:
            return answers


def test_a_burst_over_the_rate_is_answered_up_to_the_rate_then_every_nth_truncated_and_the_rest_dropped(serve):
    server = serve(rrl_responses_per_second=5, rrl_slip=2, **STOPPED)
    answers = burst(server, 25)
    whole = [answer for answer in answers if not answer.flags & dns.flags.TC]
    slipped = [answer for answer in answers if answer.flags & dns.flags.TC]
    assert len(whole) == 5 and all(answer.rcode() == dns.rcode.NXDOMAIN for answer in whole)
    assert len(slipped) == 10  # of the 20 over the rate: every second one; 10 dropped
    assert all(not answer.answer and not answer.authority and len(answer.question) == 1 for answer in slipped)


def test_a_slip_of_0_drops_every_answer_over_the_rate(serve):
    server = serve(rrl_responses_per_second=5, rrl_slip=0, **STOPPED)
    assert len(burst(server, 25)) == 5


def test_a_flooded_prefix_leaves_another_prefix_answered(serve, zone):
    server = serve(rrl_responses_per_second=5, **STOPPED)
    zone.publish(NAME, TOKEN)
    burst(server, 50, source="127.0.0.1")
    answer = server.udp(NAME, source="127.0.1.1")
    assert values(answer) == [TOKEN] and not answer.flags & dns.flags.TC


def test_a_rate_of_0_limits_nothing(serve):
    server = serve(rrl_responses_per_second=0, **STOPPED)
    answers = burst(server, 100)  # 20 times the rate the other tests set
    assert len(answers) == 100 and not [answer for answer in answers if answer.flags & dns.flags.TC]


def test_tcp_answers_are_not_rate_limited(serve):
    """A TCP client has shown its address; its connections are what is capped."""
    server = serve(rrl_responses_per_second=1, rrl_slip=0, **STOPPED)
    with server.connect() as sock:
        for _ in range(5):
            assert ask_tcp(sock, dns.message.make_query(ZONE, "SOA")).rcode() == dns.rcode.NOERROR


def test_tcp_connections_past_the_cap_per_source_are_closed_while_another_source_is_served(serve):
    server = serve(tcp_max_per_source=2)
    with server.connect() as first, server.connect() as second, server.connect() as third:
        ask_tcp(first, dns.message.make_query(ZONE, "SOA"))
        ask_tcp(second, dns.message.make_query(ZONE, "SOA"))
        assert third.recv(1) == b""
        with server.connect(source="127.0.1.1") as elsewhere:
            assert ask_tcp(elsewhere, dns.message.make_query(ZONE, "SOA")).rcode() == dns.rcode.NOERROR


def test_a_source_whose_connections_closed_may_connect_again(serve):
    server = serve(tcp_max_per_source=1)
    with server.connect() as sock:
        ask_tcp(sock, dns.message.make_query(ZONE, "SOA"))
    answer = None
    for _ in range(100):  # the server sees the close a moment after the client made it
        with server.connect() as sock:
            try:
                answer = ask_tcp(sock, dns.message.make_query(ZONE, "SOA"))
                break
            except (EOFError, ConnectionError):
                continue
    assert answer is not None and answer.rcode() == dns.rcode.NOERROR


def test_a_tcp_connection_idle_for_tcp_idle_seconds_is_closed(serve):
    server = serve(tcp_idle_seconds=0.1)
    with server.connect() as sock:
        assert sock.recv(1) == b""
