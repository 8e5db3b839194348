"""The delegation zone's DNS in the service: the challenge records the services hold for the ACME
client (``kind = "acme"``), the server a serving process starts and stops, the purge of values
nobody withdrew, and what check-config says of either mode."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import socket
import urllib.request
from pathlib import Path

import attrs
import dns.message
import dns.opcode
import dns.query
import dns.rcode
import dns.tsig
import pytest

from core.config import AcmeConfig, Config, DelegationDnsConfig, ProviderConfig
from core.delegation_dns import TXT_TTL
from core.delegation_dns.records import purge_expired
from core.runtime.assembly import build_services
from core.runtime.commands import CommandError, check_config
from core.runtime.jobs import start_jobs
from tests.delegation_dns.conftest import NAMESERVERS, ZONE
from tests.patience import PATIENCE_SECONDS
from tests.servers import knot
from tests.servers.service import ServiceProcess, free_port, run_app

NAME = f"k7q2x.{ZONE}"
TOKEN = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"
needs_knot = pytest.mark.skipif(knot.missing(), reason="needs knotd (Debian package knot)")


def acme(config: Config, **delegation: object) -> Config:
    """``config`` with the ACME provider and the delegation zone, answered by the service unless said."""
    return attrs.evolve(
        config,
        provider=ProviderConfig(kind="acme", acme=AcmeConfig(directory_url="https://acme.invalid/directory")),
        delegation_dns=DelegationDnsConfig(zone=ZONE, nameservers=NAMESERVERS, **delegation),
    )


def rfc2136(config: Config, nameserver: knot.KnotServer, **changed: str) -> Config:
    settings = {"server": nameserver.address, "tsig_key_name": knot.KEY_NAME, "tsig_secret": nameserver.secret,
                "tsig_algorithm": knot.ALGORITHM, **changed}
    return acme(config, mode="rfc2136", **settings)


def test_the_services_have_no_challenge_records_for_another_provider(services):
    assert services.challenge_records is None


def test_the_services_publish_challenge_values_where_the_built_in_server_reads_them(config, clock):
    services = build_services(acme(config), clock=clock)
    try:
        asyncio.run(services.challenge_records.publish(NAME, TOKEN))
        assert services.store.delegation_zone.values(NAME, clock.now()) == [TOKEN]
    finally:
        services.close()


@needs_knot
def test_the_services_publish_to_the_operators_nameserver_in_rfc2136_mode(config, clock, nameserver):
    name = f"wiring.{ZONE}"
    services = build_services(rfc2136(config, nameserver), clock=clock)
    try:
        asyncio.run(services.challenge_records.publish(name, TOKEN))
    finally:
        services.close()
    assert [rrset.to_text() for rrset in nameserver.query(name, "TXT").answer] == [f'{name}. {TXT_TTL} IN TXT "{TOKEN}"']


def test_values_nobody_withdrew_are_purged_after_their_hour(config, clock):
    services = build_services(acme(config), clock=clock)
    try:
        asyncio.run(services.challenge_records.publish(NAME, TOKEN))
        published_at = clock.now()
        clock.advance(3600)
        assert purge_expired(services.store, clock) == 1
        assert services.store.delegation_zone.values(NAME, published_at) == []
    finally:
        services.close()


def acme_service(folder: Path, port: int, extra: str = "") -> ServiceProcess:
    """The service as an operator runs it, answering for the zone on ``port``."""
    extra = (f'[provider]\nkind = "acme"\n[provider.acme]\ndirectory_url = "https://acme.invalid/directory"\n'
             f'[delegation_dns]\nzone = "{ZONE}"\nnameservers = {NAMESERVERS!r}\nlisten = "127.0.0.1:{port}"\n'
             ).replace("'", '"') + extra
    return ServiceProcess(folder, dns_address="127.0.0.1:9", extra=extra)


def test_a_serving_process_answers_for_the_zone_until_it_stops(tmp_path):
    port = free_port()
    service = acme_service(tmp_path, port).start()
    try:
        answer = dns.query.udp(dns.message.make_query(ZONE, "SOA"), "127.0.0.1", port=port, timeout=5)
        assert answer.rcode() == dns.rcode.NOERROR and answer.answer
    finally:
        service.stop()
    assert service.process.returncode == 0
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # let go at shutdown
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_the_serving_process_counts_its_dns_queries_on_metrics(tmp_path):
    port = free_port()
    service = acme_service(tmp_path, port, '[metrics]\nbearer_token = "scrape-token"\n').start()
    try:
        dns.query.udp(dns.message.make_query(ZONE, "SOA"), "127.0.0.1", port=port, timeout=5)
        scrape = urllib.request.Request(service.base_url + "/metrics", headers={"Authorization": "Bearer scrape-token"})
        with urllib.request.urlopen(scrape, timeout=PATIENCE_SECONDS) as response:
            lines = response.read().decode().splitlines()
    finally:
        service.stop()
    assert 'cps_dns_queries_total{transport="udp"} 1.0' in lines


def test_a_listen_address_another_program_holds_stops_start_up_with_one_line(tmp_path):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        started = run_app(acme_service(tmp_path, port).config)
    assert started.returncode == 2
    assert started.stderr.splitlines()[-1] == (f"start-up error: delegation_dns.listen: 127.0.0.1:{port} is already in use by another "
                              "program (the service's processes share it only when they run as one user); stop that "
                              "program or choose another address")


def test_check_config_says_the_listen_address_can_be_bound(config):
    port = free_port()
    lines = check_config(acme(config, listen=f"127.0.0.1:{port}"))
    assert (f"  delegation zone {ZONE}: answered by the service on 127.0.0.1:{port} (UDP and TCP, can be bound) "
            f"as {', '.join(NAMESERVERS)}") in lines


def test_check_config_refuses_a_listen_address_another_program_holds(config):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        listen = f"127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(CommandError, match=rf"^check-config: delegation_dns\.listen: {listen} is already in use"):
            check_config(acme(config, listen=listen))


@needs_knot
def test_check_config_asks_the_operators_nameserver_with_the_key(config, nameserver):
    lines = check_config(rfc2136(config, nameserver))
    assert (f"  delegation zone {ZONE}: challenge records sent by RFC 2136 update; the nameserver "
            f"{nameserver.address} answers for {ZONE} and accepts the TSIG key {knot.KEY_NAME}") in lines


@needs_knot
def test_check_config_refuses_a_key_the_nameserver_does_not_take(config, nameserver):
    with pytest.raises(CommandError, match=r"^check-config: delegation_dns\.server: Cannot ask for the SOA .*\(BADKEY\)"):
        check_config(rfc2136(config, nameserver, tsig_key_name="someone-else"))


def test_check_config_says_nothing_of_the_zone_for_another_provider(config):
    assert not [line for line in check_config(config) if "delegation zone" in line]


@pytest.mark.gen_test
async def test_the_periodic_purge_notifies_the_secondaries_when_it_removes_values(config, clock):
    secret = base64.b64encode(os.urandom(32)).decode()
    key = dns.tsig.Key("cps-acme-transfer", secret, "hmac-sha256")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as secondary:  # a secondary that acknowledges each NOTIFY
        secondary.bind(("127.0.0.1", 0))
        secondary.setblocking(False)
        services = build_services(acme(config, secondaries=[f"127.0.0.1:{secondary.getsockname()[1]}"],
                                       tsig_key_name="cps-acme-transfer", tsig_secret=secret), clock=clock)
        jobs, _ = start_jobs(services)
        try:
            await services.challenge_records.publish(NAME, TOKEN)
            clock.advance(3600)
            await jobs["delegation-zone-purge"].callback()
            purged = services.store.delegation_zone.serial() % 2**32
            told: list[int] = []
            async with asyncio.timeout(PATIENCE_SECONDS):
                while purged not in told:
                    wire, sender = await asyncio.get_running_loop().sock_recvfrom(secondary, 65535)
                    notify = dns.message.from_wire(wire, keyring={key.name: key})
                    assert notify.opcode() == dns.opcode.NOTIFY and notify.had_tsig
                    told.extend(rdata.serial for rrset in notify.answer for rdata in rrset)
                    await asyncio.get_running_loop().sock_sendto(secondary, dns.message.make_response(notify).to_wire(),
                                                                 sender)
            await services.challenge_records.notifier.wait()
            assert services.store.delegation_zone.values(NAME, clock.now() - dt.timedelta(hours=2)) == []
        finally:
            for job in jobs.values():
                job.stop()
            services.close()
