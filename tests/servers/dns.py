"""A real authoritative DNS server on 127.0.0.1 (UDP and TCP), built on dnslib.

Tests publish and remove records while it runs. Names listed in ``silent`` are never answered
(the resolver times out), nor any name below those in ``silent_below`` (a dead zone); names in
``servfail`` get SERVFAIL. ``publish_sequence`` gives a name
an answer that changes from one query to the next (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import threading

from dnslib import AAAA, CAA, CNAME, NS, QTYPE, RCODE, RR, TXT, A, DNSLabel
from dnslib.dns import DNSError
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from core.config import DnsConfig
from tests.patience import PATIENCE_SECONDS


class _Dropped(DNSError):
    """Raised for a silent name: dnslib's handler catches a DNSError and sends nothing. (An answer
    sent late instead raced the resolver's timeout on a loaded machine, and sometimes won.)"""


class _QuietLogger(DNSLogger):
    def __init__(self) -> None:
        super().__init__(log="-request,-reply,-truncated,-error,-recv,-send,-data")


class _Zone(BaseResolver):
    def __init__(self) -> None:
        self.records: dict[str, dict[str, list[RR]]] = {}
        "By name, then type: a query looks up its name (benchmarks publish thousands)."
        self.silent: set[str] = set()
        self.silent_below: set[str] = set()
        self.servfail: set[str] = set()
        self.sequences: dict[str, dict[str, list[RR]]] = {}
        "Answers given one per query, the last one repeated (see ``DnsServer.publish_sequence``)."
        self.queries: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def resolve(self, request, handler):  # dnslib's interface
        name = str(request.q.qname).rstrip(".").lower()
        qtype = QTYPE[request.q.qtype]
        reply = request.reply()
        with self.lock:
            self.queries.append((name, qtype))
            silent = name in self.silent or any(name.endswith("." + zone) for zone in self.silent_below)
            if name in self.servfail:
                reply.header.rcode = RCODE.SERVFAIL
                return reply
            at_name = dict(self.records.get(name, {}))
            for t, answers in self.sequences.get(name, {}).items():  # only a query of this type moves it on
                at_name[t] = [answers.pop(0) if t == qtype and len(answers) > 1 else answers[0]]
        if silent:
            raise _Dropped(name)  # never answered: the resolver times out
        if not at_name:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        # A CNAME answers every query type at its name, as a real server does.
        for rr in at_name.get(qtype, []) or at_name.get("CNAME", []):
            reply.add_answer(rr)
        return reply


class DnsServer:
    def __init__(self, host: str = "127.0.0.1") -> None:
        """On ``host`` (any 127.x.y.z: tests stand up authoritative servers beside the resolver)."""
        self.zone = _Zone()
        self.host = host
        for attempt in range(20):
            self._udp = DNSServer(self.zone, port=0, address=host, logger=_QuietLogger())
            self.port = self._udp.server.server_address[1]
            try:
                self._tcp = DNSServer(self.zone, port=self.port, address=host, tcp=True, logger=_QuietLogger())
                break
            except OSError:  # the port is free for UDP but taken for TCP: try another one
                self._udp.server.server_close()
                if attempt == 19:
                    raise
        self.address = f"{host}:{self.port}"

    def config(self, *, timeout_seconds: float = PATIENCE_SECONDS) -> DnsConfig:
        """``[dns]`` asking this server. Its bound is by default one only a hang reaches, which costs
        nothing when the answer comes: for the names it answers. A test of names it leaves
        unanswered (``silent``) passes a short one, so that it does not wait that long for each."""
        return DnsConfig(nameservers=[self.address], timeout_seconds=timeout_seconds)

    def start(self) -> DnsServer:
        self._udp.start_thread()
        self._tcp.start_thread()
        return self

    def stop(self) -> None:
        for server in (self._udp, self._tcp):
            server.stop()
            server.server.server_close()

    def publish(self, name: str, rtype: str, *values: str, ttl: int = 300) -> None:
        """Add one record per value."""
        rrs = [self._record(name, rtype, v, ttl) for v in values]
        with self.zone.lock:
            self.zone.records.setdefault(name.lower(), {}).setdefault(rtype, []).extend(rrs)

    def publish_sequence(self, name: str, rtype: str, values: list[str], *, ttl: int = 0) -> None:
        """Answer the n-th query for ``rtype`` at ``name`` with ``values[n]`` (the last one from then on).

        E.g. ``publish_sequence("x.test-site.com", "A", ["127.0.0.1", "127.0.0.2"])`` for DNS rebinding.
        """
        rrs = [self._record(name, rtype, v, ttl) for v in values]
        with self.zone.lock:
            self.zone.sequences.setdefault(name.lower(), {})[rtype] = rrs

    @staticmethod
    def _record(name: str, rtype: str, value: str, ttl: int) -> RR:
        if rtype == "AAAA":
            value = ipaddress.IPv6Address(value).exploded  # dnslib reads hex groups only (not ::ffff:1.2.3.4)
        make = {"A": A, "AAAA": AAAA, "CNAME": CNAME, "TXT": TXT, "NS": NS}[rtype]
        return RR(DNSLabel(name), getattr(QTYPE, rtype), rdata=make(value), ttl=ttl)

    def publish_caa(self, name: str, tag: str, value: str, *, flags: int = 0) -> None:
        """One CAA record (RFC 8659), e.g. ``publish_caa("example.com", "issue", "letsencrypt.org")``."""
        rr = RR(DNSLabel(name), QTYPE.CAA, rdata=CAA(flags, tag, value), ttl=300)
        with self.zone.lock:
            self.zone.records.setdefault(name.lower(), {}).setdefault("CAA", []).append(rr)

    def publish_txt_strings(self, name: str, *strings: str) -> None:
        """One TXT record made of several character-strings."""
        rr = RR(DNSLabel(name), QTYPE.TXT, rdata=TXT(list(strings)), ttl=300)
        with self.zone.lock:
            self.zone.records.setdefault(name.lower(), {}).setdefault("TXT", []).append(rr)

    def remove(self, name: str) -> None:
        with self.zone.lock:
            self.zone.records.pop(name.lower(), None)
            self.zone.sequences.pop(name.lower(), None)

    def clear(self) -> None:
        with self.zone.lock:
            self.zone.records.clear()
            self.zone.sequences.clear()
            self.zone.silent.clear()
            self.zone.silent_below.clear()
            self.zone.servfail.clear()
