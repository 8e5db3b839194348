"""core.dns.lookups: resolver channels are shared by different questions, never asked one twice."""

from __future__ import annotations

import asyncio

import pytest

from core.dns.lookups import DnsChecker, Lookup
from core.verification.answers import check_ownership

NAME = "_acme-challenge.shop.example.com"


@pytest.fixture
def checker(dns):
    return DnsChecker(dns.config())


@pytest.mark.gen_test
async def test_lookups_of_different_names_share_one_channel(checker, dns):
    for n in range(5):
        await checker.lookup(f"_service-verify.shop{n}.example.com", "TXT")
    assert checker.channels_opened == 1


@pytest.mark.gen_test
async def test_a_question_asked_again_is_answered_by_dns_as_it_is_now_not_from_a_cache(checker, dns):
    dns.publish(NAME, "CNAME", "old.dcv.example.net", ttl=3600)
    assert (await checker.lookup(NAME, "CNAME")).values == ("old.dcv.example.net",)
    dns.clear()
    dns.publish(NAME, "CNAME", "new.dcv.example.net", ttl=3600)
    assert (await checker.lookup(NAME, "CNAME")).values == ("new.dcv.example.net",)
    assert checker.channels_opened == 2


@pytest.mark.gen_test
async def test_a_name_that_was_missing_is_found_once_published(checker, dns):
    assert (await checker.lookup(NAME, "CNAME")).outcome == "nxdomain"
    dns.publish(NAME, "CNAME", "shop.example.com.dcv.example.net", ttl=3600)
    assert (await checker.lookup(NAME, "CNAME")).outcome == "found"


@pytest.mark.gen_test
async def test_a_public_suffix_may_be_asked_again_on_the_same_channel(checker, dns):
    await checker.lookup("com", "CAA")
    await checker.lookup("com", "CAA")
    assert checker.channels_opened == 1


@pytest.mark.gen_test
async def test_addresses_asked_for_at_the_same_time_share_one_lookup(checker, dns):
    dns.publish("hooks.example.com", "A", "192.0.2.7")
    answers = await asyncio.gather(*(checker.addresses("hooks.example.com") for _ in range(50)))
    assert all(found == ["192.0.2.7"] for found, _ in answers)
    assert checker.channels_opened == 1


@pytest.mark.gen_test
async def test_addresses_asked_for_again_later_are_looked_up_again(checker, dns):
    dns.publish("hooks.example.com", "A", "192.0.2.7")
    await checker.addresses("hooks.example.com")
    dns.clear()
    dns.publish("hooks.example.com", "A", "192.0.2.8")
    assert (await checker.addresses("hooks.example.com"))[0] == ["192.0.2.8"]


@pytest.mark.gen_test
async def test_a_lookup_that_got_no_answer_says_how_long_it_waited(dns):
    dns.zone.silent.add(NAME)
    found = await DnsChecker(dns.config(timeout_seconds=0.5)).lookup(NAME, "CNAME")
    assert found.outcome == "timeout" and found.waited is not None and 0.4 < found.waited < 2


def test_a_timeout_is_told_by_the_time_waited_not_the_configured_timeout():
    """c-ares may give up before ``[dns] timeout_seconds`` (its wait adapts to the server): say what happened."""
    check = check_ownership(Lookup(name="_service-verify.shop.example.com", rtype="TXT", outcome="timeout",
                                   waited=1.04), "service-domain-verification=x")
    assert "the DNS client gave up after 1.0 s (its tries ran out)" in check.message
