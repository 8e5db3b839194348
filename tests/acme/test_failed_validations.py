"""Issue 46: a validation the CA refused is never ordered again into the same failure, nor past the
CA's limits of failed validations; what the CA met reaches the customer in words (never its raw
bytes); a hostname the CA paused is a reason of its own, with the CA's link. Real Pebble, validating
through Unbound (tests/acme/conftest.py): Unbound, asked for the TXT record before a value is
published, keeps "no such name" for the delegation zone's negative TTL, as a CA's resolver does."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import attrs
import dns.message
import dns.query
import dns.rcode
import pytest

from core.acme import failures
from core.delegation_dns.answers import NEGATIVE_TTL
from core.lifecycle.watcher import LifecycleWatcher
from tests.acme.conftest import Answering, acme_config, needs_lab
from tests.acme.test_issuing import add, read, verify
from tests.servers.service import free_port

pytestmark = needs_lab
PAUSE_LINK = "https://portal.ca.test/sfe/v1/unpause?jwt=abc.def.ghi"


def hold_negative_answer(acme_lab, apex: str) -> None:
    """Unbound, the CA's resolver, asked for the TXT record before any value is published: it now
    answers "no such name" for the delegation zone's negative TTL, whatever is published meanwhile."""
    host, port = acme_lab.lab.resolver.split(":")
    query = dns.message.make_query(f"_acme-challenge.{apex}", "TXT")
    assert dns.query.udp(query, host, port=int(port), timeout=3).rcode() == dns.rcode.NXDOMAIN


def orders_of(front, apex: str) -> list[dict]:
    """The new orders the CA was sent for ``apex``."""
    return [o for o in front.orders if any(i["value"] == apex for i in o["identifiers"])]


async def refused_once(api, world, acme_lab, apex: str):
    caller, created = await add(api, world, apex)
    acme_lab.publish_records(created)
    hold_negative_answer(acme_lab, apex)
    result = await verify(api, caller, created)
    assert result["certificate"]["status"] == "error", result
    return caller, created


async def background_checks(services, clock, caller, created, hours: float) -> None:
    """The lifecycle watcher's checks of the domain, each when it falls due, for ``hours``."""
    end = clock.now() + dt.timedelta(hours=hours)
    while True:
        row = services.store.domains.get(caller.workspace.id, uuid.UUID(created["id"]))
        if row.next_check_at is None or row.next_check_at > end:
            return
        clock.advance(max(0.0, (row.next_check_at - clock.now()).total_seconds()) + 0.001)
        await LifecycleWatcher(services).tick()


async def resolver_sees(services, name: str, value: str) -> None:
    """Until the resolver answers the CNAME at ``name`` with ``value`` (the old one's TTL is 1 s)."""
    for _ in range(100):
        if (await services.dns.lookup(name, "CNAME")).values == (value,):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the resolver still answers the old CNAME at {name}")


class TestARefusalOnACachedNegativeAnswer:
    @pytest.mark.gen_test
    async def test_the_customer_is_told_in_words_what_the_ca_met(self, api, world, acme_lab):
        caller, created = await refused_once(api, world, acme_lab, "cached.lab.com")
        error = (await read(api, caller, created))["cert"]["lastError"]
        assert "was told that the name does not exist (NXDOMAIN)" in error
        assert "\\x03" not in error and "\x03" not in error

    @pytest.mark.gen_test
    async def test_the_diagnosis_says_the_service_orders_again_by_itself_and_when(self, api, world, acme_lab,
                                                                               services):
        services.authority.port = acme_lab.lab.nsd_port  # the zone's servers, asked where the lab runs them
        caller, created = await refused_once(api, world, acme_lab, "diagnosed.lab.com")
        report = (await api.get(f"/v1/domains/{created['id']}/diagnosis", token=caller.token)).body
        found = {f["code"]: f for f in report["findings"]}
        assert report["verdict"] == "waiting" and "the next order goes after" in found["orders_waiting"]["message"]
        assert "orders again by itself" in found["provider_error"]["fix"]

    @pytest.mark.gen_test
    async def test_a_check_asked_for_inside_the_negative_ttl_places_no_order(self, api, world, acme_lab, front):
        caller, created = await refused_once(api, world, acme_lab, "again.lab.com")
        result = await verify(api, caller, created)
        assert len(orders_of(front, "again.lab.com")) == 1
        assert "the next order goes after" in result["message"]

    @pytest.mark.gen_test
    async def test_a_check_asked_for_once_the_negative_ttl_passed_orders_again(self, api, world, acme_lab, front,
                                                                             clock):
        caller, created = await refused_once(api, world, acme_lab, "later.lab.com")
        clock.advance(NEGATIVE_TTL + failures.MARGIN.total_seconds())
        await verify(api, caller, created)
        assert len(orders_of(front, "later.lab.com")) == 2


def answered_elsewhere(config, clock, tmp_path, acme_lab):
    """The CA's resolver asks a server of the delegation zone that answers from a database of its
    own, where no value is ever published: every validation is told NXDOMAIN, as while the CA's
    resolver holds a negative answer. The service's own server (``apart``) answers every value, so
    each is confirmed and the CA asked."""
    elsewhere = attrs.evolve(config, storage=attrs.evolve(config.storage, path=str(tmp_path / "elsewhere.sqlite3")),
                             delegation_dns=attrs.evolve(config.delegation_dns,
                                                         listen=f"127.0.0.1:{acme_lab.dns_port}"))
    servers = [Answering(elsewhere, clock).start(), Answering(config, clock).start()]
    yield servers[1]
    for server in servers:
        server.stop()


def apart(config):
    """``config`` with the service's own server on an address the CA's resolver does not ask."""
    return attrs.evolve(config, delegation_dns=attrs.evolve(config.delegation_dns, listen=f"127.0.0.1:{free_port()}"))


#: The CA's budget of new orders out of the way: these tests run an hour of checks in seconds.
UNPACED = {"orders_per_window": 1_000_000}


class TestAnHourWhileTheCaCannotSeeTheValue:
    @pytest.fixture
    def answering(self, services, config, clock, tmp_path, acme_lab):
        yield from answered_elsewhere(config, clock, tmp_path, acme_lab)

    @pytest.fixture
    def config(self, config, acme_lab):
        return apart(acme_config(config, acme_lab, **UNPACED))

    @pytest.mark.gen_test
    async def test_an_hour_of_checks_fails_no_more_validations_than_the_ca_allows(self, api, world, acme_lab, front,
                                                                                 services, clock):
        caller, created = await add(api, world, "hour.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        for seconds in (8, 13):  # a person checking again at +8 s and +21 s, as in the issue
            clock.advance(seconds)
            await verify(api, caller, created)
        await background_checks(services, clock, caller, created, hours=1 - 21 / 3600)
        assert 1 < len(orders_of(front, "hour.lab.com")) <= 5


class TestStoppingAfterRepeatedFailures:
    @pytest.fixture
    def answering(self, services, config, clock, tmp_path, acme_lab):
        yield from answered_elsewhere(config, clock, tmp_path, acme_lab)

    @pytest.fixture
    def config(self, config, acme_lab):
        return apart(acme_config(config, acme_lab, stop_after_failed_validations=3, **UNPACED))

    @pytest.mark.gen_test
    async def test_the_background_checks_stop_ordering_and_say_why(
            self, api, world, acme_lab, front, services, clock):
        caller, created = await add(api, world, "stop.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        await background_checks(services, clock, caller, created, hours=3)
        assert len(orders_of(front, "stop.lab.com")) == 3
        assert "the service stopped ordering for stop.lab.com" in (await read(api, caller, created))["cert"]["lastError"]

    @pytest.mark.gen_test
    async def test_a_person_checking_again_after_the_stop_orders_once_more(self, api, world, acme_lab, front,
                                                                         services, clock):
        caller, created = await add(api, world, "asked.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        await background_checks(services, clock, caller, created, hours=3)
        await verify(api, caller, created)
        assert len(orders_of(front, "asked.lab.com")) == 4

    @pytest.mark.gen_test
    async def test_records_that_change_after_the_stop_let_orders_go_again(self, api, world, acme_lab, front,
                                                                        services, clock):
        caller, created = await add(api, world, "changed.lab.com")
        acme_lab.publish_records(created, ttl=1)
        await verify(api, caller, created)
        await background_checks(services, clock, caller, created, hours=3)
        # The CNAME now leads to the target through a name of the customer's own.
        target = created["validation"]["delegation"]["value"]
        acme_lab.lab.remove("lab.com", "_acme-challenge.changed.lab.com")
        acme_lab.lab.publish_many("lab.com", [f"hop.changed.lab.com. 300 IN CNAME {target}.",
                                              "_acme-challenge.changed.lab.com. 1 IN CNAME hop.changed.lab.com."])
        await resolver_sees(services, "_acme-challenge.changed.lab.com", "hop.changed.lab.com")
        await background_checks(services, clock, caller, created, hours=2)
        assert len(orders_of(front, "changed.lab.com")) == 4


class TestTheDelegationZoneUnreachable:
    @pytest.fixture
    def answering(self):
        """Nobody answers for the delegation zone."""
        yield None

    @pytest.mark.gen_test
    async def test_the_diagnosis_asks_the_target_itself_and_names_the_zone(self, api, world, acme_lab):
        caller, created = await add(api, world, "unreached.lab.com")
        acme_lab.publish_records(created)
        report = (await api.get(f"/v1/domains/{created['id']}/diagnosis", token=caller.token)).body
        [finding] = [f for f in report["findings"] if f["code"] == "delegation_zone_unreachable"]
        assert "acme.saas.test" in finding["message"] and "operator" in finding["fix"]


class TestPausedByTheCa:
    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab, **UNPACED)

    @pytest.fixture(autouse=True)
    def paused(self, front):
        front.refuse_orders = (429, {
            "type": "urn:ietf:params:acme:error:rateLimited",
            "detail": "Your account is temporarily prevented from requesting certificates for paused.lab.com and "
                      f"possibly others. Please visit: {PAUSE_LINK}"})

    @pytest.mark.gen_test
    async def test_the_refusal_says_the_hostname_is_paused_with_the_cas_link(self, api, world, acme_lab):
        caller, created = await add(api, world, "paused-a.lab.com")
        acme_lab.publish_records(created)
        result = await verify(api, caller, created)
        assert result["certificate"]["status"] == "error"
        assert "paused issuance for paused-a.lab.com" in result["certificate"]["message"]
        assert PAUSE_LINK in result["certificate"]["message"]

    @pytest.mark.gen_test
    async def test_the_diagnosis_names_the_pause_as_a_reason_of_its_own(self, api, world, acme_lab):
        caller, created = await add(api, world, "paused-b.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        report = (await api.get(f"/v1/domains/{created['id']}/diagnosis", token=caller.token)).body
        [finding] = [f for f in report["findings"] if f["code"] == "ca_paused"]
        assert PAUSE_LINK in finding["fix"] and report["verdict"] == "action_needed"

    @pytest.mark.gen_test
    async def test_the_background_checks_order_nothing_for_a_paused_hostname(self, api, world, acme_lab, front,
                                                                           services, clock):
        caller, created = await add(api, world, "paused-c.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        await background_checks(services, clock, caller, created, hours=2)
        assert len(orders_of(front, "paused-c.lab.com")) == 1
