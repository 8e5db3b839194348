"""Issue 47, item 5: the delegation zone's own delegation checked, against real DNS (the lab's NSD
and Unbound, tests/servers/dns_lab.py): at start-up and in the periodic checks (a warning in the
log, kept for every process), in check-config (a warning line that does not fail it), on
``/metrics`` and in every ACME domain's diagnosis.

Zones of the lab play the delegation zone, each delegated by lab.com to nameservers named in
lab.com (as the config requires: the built-in server answers no address records):
``served.lab.com`` to ns1.lab.com (NSD, answering for it); ``partly.lab.com`` to ns1.lab.com and
ns-silent.lab.com (a socket that never answers); ``lame.lab.com`` to ns-silent.lab.com and
ns-closed.lab.com (nothing listens); and ``missing.lab.com``, which lab.com does not delegate. Each
nameserver is asked where the lab runs them (``nsd_port``), as production asks port 53.
"""

from __future__ import annotations

import asyncio
import logging

import attrs
import pytest

from core.config import DelegationDnsConfig, DnsConfig, ProviderConfig
from core.dns import zone_check
from core.runtime.commands import check_config
from core.runtime.jobs import start_jobs
from tests.acme.conftest import acme_config, needs_lab
from tests.acme.test_issuing import add, verify
from tests.patience import PATIENCE_SECONDS
from tests.servers.dns_lab import CLOSED, LAB, SILENT

pytestmark = needs_lab
SERVED, PARTLY, LAME, MISSING = "served.lab.com", "partly.lab.com", "lame.lab.com", "missing.lab.com"
NS, NS_SILENT, NS_CLOSED = "ns1.lab.com", "ns-silent.lab.com", "ns-closed.lab.com"


@pytest.fixture(scope="module", autouse=True)
def zones(acme_lab):
    """This module's zones in the lab (see the module's docstring)."""
    lab = acme_lab.lab
    lab.nameservers[SERVED] = [(NS, LAB)]
    lab.nameservers[PARTLY] = [(NS, LAB), (NS_SILENT, SILENT)]
    lab.unserved[LAME] = [(NS_SILENT, SILENT), (NS_CLOSED, CLOSED)]
    lab.records[PARTLY] = []
    lab.delegate(SERVED)  # restarts NSD and Unbound with all of them


def zone_config(config, acme_lab, zone: str, nameservers: list[str]):
    """The ACME provider with ``zone`` as its delegation zone, said to be served by ``nameservers``
    (a silent one is given up on after 2 s)."""
    config = acme_config(config, acme_lab, dns_timeout_seconds=2)
    return attrs.evolve(config, delegation_dns=attrs.evolve(config.delegation_dns, zone=zone, nameservers=nameservers))


def checked_line(config, acme_lab) -> str:
    lines = check_config(config, nameserver_port=acme_lab.lab.nsd_port)
    assert lines[0] == "configuration OK"
    [line] = [line for line in lines if line.startswith(f"  delegation zone {config.delegation_dns.zone}: ")
              and "can be bound" not in line]
    return line


class TestCheckConfig:
    def test_a_zone_delegated_to_its_nameservers_that_answer_for_it_is_said_ok(self, config, acme_lab):
        line = checked_line(zone_config(config, acme_lab, SERVED, [NS]), acme_lab)
        assert line == f"  delegation zone {SERVED}: delegated to {NS}, each answering for it authoritatively"

    def test_a_zone_its_parent_does_not_delegate_is_a_warning_naming_the_parent_and_the_fix(self, config, acme_lab):
        line = checked_line(zone_config(config, acme_lab, MISSING, ["ns1.saas.test"]), acme_lab)
        assert f"WARNING: The delegation zone {MISSING} is not delegated: its parent zone lab.com" in line
        assert f"Fix: At the registrar or DNS host of lab.com, add NS records for {MISSING} naming ns1.saas.test" in line

    def test_a_zone_delegated_to_other_nameservers_says_which(self, config, acme_lab):
        line = checked_line(zone_config(config, acme_lab, SERVED, ["ns1.saas.test"]), acme_lab)
        assert f"The delegation zone {SERVED} is delegated to other nameservers" in line
        assert f"names {NS}, but [delegation_dns] nameservers lists ns1.saas.test" in line

    def test_a_nameserver_that_does_not_answer_for_the_zone_is_named(self, config, acme_lab):
        line = checked_line(zone_config(config, acme_lab, PARTLY, [NS, NS_SILENT]), acme_lab)
        assert f"WARNING: The delegation zone {PARTLY} is delegated to nameservers not all of which answer" in line
        assert f"{NS_SILENT} ({SILENT}): no answer within 2 s" in line
        assert f"Fix: Have {NS_SILENT} answer for {PARTLY}" in line

    def test_a_zone_none_of_whose_nameservers_answers_is_named_from_its_parents_referral(self, config, acme_lab):
        line = checked_line(zone_config(config, acme_lab, LAME, [NS_CLOSED, NS_SILENT]), acme_lab)
        assert f"The delegation zone {LAME} is delegated to nameservers none of which answers for it" in line
        assert f"{NS_CLOSED} ({CLOSED}): nothing listens on its DNS port" in line
        assert f"Fix: Have {NS_CLOSED}, {NS_SILENT} answer for {LAME}" in line

    def test_a_resolver_that_does_not_answer_is_unknown_not_undelegated(self, config, acme_lab):
        config = zone_config(config, acme_lab, MISSING, ["ns1.saas.test"])
        config = attrs.evolve(config, dns=DnsConfig(nameservers=[f"{SILENT}:{acme_lab.lab.nsd_port}"], timeout_seconds=1))
        line = checked_line(config, acme_lab)
        assert line.startswith(f"  delegation zone {MISSING}: WARNING: its delegation could not be checked:")
        assert "not delegated" not in line


class TestNotDelegated:
    @pytest.fixture
    def config(self, config, acme_lab):
        return zone_config(config, acme_lab, MISSING, ["ns1.saas.test"])

    @pytest.fixture(autouse=True)
    def nameservers(self, services, acme_lab):
        services.authority.port = acme_lab.lab.nsd_port

    @pytest.mark.gen_test
    async def test_the_check_warns_in_the_log(self, services, caplog):
        with caplog.at_level(logging.WARNING, logger="core.dns.zone_check"):
            await zone_check.check_and_keep(services)
        assert f"The delegation zone {MISSING} is not delegated" in caplog.text

    @pytest.mark.gen_test
    async def test_the_metric_says_0_with_the_reason(self, services):
        await zone_check.check_and_keep(services)
        text = (await services.metrics.scrape()).decode()
        assert f'cps_delegation_zone_ok{{state="not_delegated",zone="{MISSING}"}} 0.0' in text

    @pytest.mark.gen_test
    async def test_every_domains_diagnosis_names_the_zone_for_the_operator(self, api, world, services):
        await zone_check.check_and_keep(services)
        for apex in ("first.lab.com", "second.lab.com"):
            caller, created = await add(api, world, apex)
            report = (await api.get(f"/v1/domains/{created['id']}/diagnosis", token=caller.token)).body
            [finding] = [f for f in report["findings"] if f["code"] == "delegation_zone_broken"]
            assert finding["message"].startswith(f"The delegation zone {MISSING} is not delegated: its parent zone lab.com")
            assert finding["fix"].startswith("For the service's operator: At the registrar or DNS host of lab.com")
            assert report["verdict"] == "action_needed"

    @pytest.mark.gen_test
    async def test_a_validation_the_ca_refuses_names_the_zone_beside_the_customers_records(
            self, api, world, services, acme_lab):
        await zone_check.check_and_keep(services)
        caller, created = await add(api, world, "refused.lab.com")
        acme_lab.publish_records(created)
        certificate = (await verify(api, caller, created))["certificate"]
        assert certificate["status"] == "error"
        assert f"The delegation zone {MISSING} is not delegated" in certificate["message"]
        assert "nothing in this domain's records can" in certificate["message"]

    @pytest.mark.gen_test
    async def test_the_check_runs_at_start_up_and_then_periodically(self, services):
        jobs, _ = start_jobs(services)
        try:
            assert "delegation-zone-check" in jobs
            for _ in range(int(PATIENCE_SECONDS * 10)):
                if (kept := await services.store.run(zone_check.last_check, services.store, MISSING)) is not None:
                    break
                await asyncio.sleep(0.1)
            assert kept is not None and kept.state == "not_delegated"
        finally:
            for job in jobs.values():
                job.stop()


class TestOk:
    @pytest.fixture
    def config(self, config, acme_lab):
        return zone_config(config, acme_lab, SERVED, [NS])

    @pytest.mark.gen_test
    async def test_the_metric_says_1(self, services, acme_lab):
        services.authority.port = acme_lab.lab.nsd_port
        await zone_check.check_and_keep(services)
        text = (await services.metrics.scrape()).decode()
        assert f'cps_delegation_zone_ok{{state="ok",zone="{SERVED}"}} 1.0' in text


@pytest.mark.gen_test
async def test_nothing_is_checked_in_development(services, config):
    services.config = attrs.evolve(config, provider=ProviderConfig(kind="sandbox"),
                                   delegation_dns=DelegationDnsConfig())
    jobs, _ = start_jobs(services)
    for job in jobs.values():
        job.stop()
    assert "delegation-zone-check" not in jobs
