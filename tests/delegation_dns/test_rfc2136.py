"""``mode = "rfc2136"``: the challenge values written to a real Debian nameserver (Knot DNS) by
dynamic update signed with TSIG, and what the operator is told when the server will not take them."""

from __future__ import annotations

import asyncio
import base64

import attrs
import dns.rcode
import pytest

from core.config import DelegationDnsConfig
from core.delegation_dns import TXT_TTL, ChallengeRecordsError
from core.delegation_dns.rfc2136 import DynamicUpdate
from tests.delegation_dns.conftest import ZONE
from tests.servers import knot
from tests.servers.knot import KnotServer
from tests.servers.service import free_port

pytestmark = pytest.mark.skipif(knot.missing(), reason="needs knotd (Debian package knot)")
NAME = f"k7q2x.{ZONE}"
TOKEN = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"


@pytest.fixture
def delegation(nameserver) -> DelegationDnsConfig:
    return DelegationDnsConfig(zone=ZONE, mode="rfc2136", server=nameserver.address, tsig_key_name=knot.KEY_NAME,
                               tsig_secret=nameserver.secret, tsig_algorithm=knot.ALGORITHM)


def txt(nameserver: KnotServer, name: str) -> list[str]:
    answer = nameserver.query(name, "TXT")
    return sorted(b"".join(rdata.strings).decode() for rrset in answer.answer for rdata in rrset)


def test_a_published_value_is_served_by_the_nameserver(delegation, nameserver):
    asyncio.run(DynamicUpdate(delegation).publish(NAME, TOKEN))
    answer = nameserver.query(NAME, "TXT")
    assert txt(nameserver, NAME) == [TOKEN] and answer.answer[0].ttl == TXT_TTL == 0


def test_a_withdrawn_value_is_gone_from_the_nameserver(delegation, nameserver):
    name = f"withdrawn.{ZONE}"
    records = DynamicUpdate(delegation)
    asyncio.run(records.publish(name, TOKEN))
    asyncio.run(records.withdraw(name, TOKEN))
    assert nameserver.query(name, "TXT").rcode() == dns.rcode.NXDOMAIN


def test_withdrawing_one_value_keeps_the_others(delegation, nameserver):
    name = f"two.{ZONE}"
    records = DynamicUpdate(delegation)
    asyncio.run(records.publish(name, TOKEN))
    asyncio.run(records.publish(name, "other"))
    asyncio.run(records.withdraw(name, TOKEN))
    assert txt(nameserver, name) == ["other"]


def test_a_wrong_secret_is_refused_with_what_to_check(delegation, nameserver):
    wrong = attrs.evolve(delegation, tsig_secret=base64.b64encode(b"not the key's secret, 32 bytes!!").decode())
    with pytest.raises(ChallengeRecordsError) as refused:
        asyncio.run(DynamicUpdate(wrong).publish(f"wrong.{ZONE}", TOKEN))
    assert str(refused.value) == (
        f"Cannot publish the challenge record at wrong.{ZONE}: the nameserver {nameserver.address} refused the TSIG "
        "signature (BADSIG): check tsig_key_name, tsig_secret and tsig_algorithm against its configuration.")
    assert nameserver.query(f"wrong.{ZONE}", "TXT").rcode() == dns.rcode.NXDOMAIN


def test_a_key_name_the_server_does_not_know_is_refused(delegation):
    with pytest.raises(ChallengeRecordsError, match=r"refused the TSIG signature \(BADKEY\)"):
        asyncio.run(DynamicUpdate(attrs.evolve(delegation, tsig_key_name="someone-else")).publish(NAME, TOKEN))


def test_a_zone_the_server_does_not_serve_is_refused_with_its_answer(delegation):
    other = attrs.evolve(delegation, zone="elsewhere.example")
    with pytest.raises(ChallengeRecordsError, match=r"answered NOTAUTH: .*and that it serves the zone\.$"):
        asyncio.run(DynamicUpdate(other).publish("k7q2x.elsewhere.example", TOKEN))


def test_an_unreachable_server_is_said(delegation):
    closed = attrs.evolve(delegation, server=f"127.0.0.1:{free_port()}")
    with pytest.raises(ChallengeRecordsError, match=r"cannot reach the nameserver 127\.0\.0\.1:\d+: Connection refused\.$"):
        asyncio.run(DynamicUpdate(closed).withdraw(NAME, TOKEN))


def test_the_check_says_the_server_answers_for_the_zone_with_the_key(delegation, nameserver):
    said = asyncio.run(DynamicUpdate(delegation).check())
    assert said == f"the nameserver {nameserver.address} answers for {ZONE} and accepts the TSIG key {knot.KEY_NAME}"


def test_the_check_says_why_a_wrong_key_fails(delegation):
    wrong = attrs.evolve(delegation, tsig_secret=base64.b64encode(b"x" * 32).decode())
    with pytest.raises(ChallengeRecordsError, match=r"^Cannot ask for the SOA of acme\.saas\.example: .*\(BADSIG\)"):
        asyncio.run(DynamicUpdate(wrong).check())
