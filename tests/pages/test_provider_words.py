"""Issue 48, items 3 and 8: the portal's words follow the configured provider. With ``kind = "acme"``
the pages name the CA (from its directory URL) and the service's own TLS terminator, never "the
edge provider"; the delete page says what deleting does for each provider; a verified domain with
drift does not say that both records were found; the "Diagnose" button and a simulated DNS's
diagnosis say what the page says. (The ACME pages here read no CA: the directory is never asked.)"""

from __future__ import annotations

import re
import uuid

import attrs
import pytest

from core.config import AcmeConfig, DelegationDnsConfig, ProviderConfig, SandboxConfig
from store.records import DriftProblem
from tests.helpers import mark_verified
from tests.pages.portal_client import new_domain, sign_in


def acme(config):
    return attrs.evolve(
        config,
        provider=ProviderConfig(kind="acme", acme=AcmeConfig(directory_url="https://acme-v02.api.letsencrypt.org/directory")),
        delegation_dns=DelegationDnsConfig(zone="acme.saas.test", nameservers=["ns1.saas.test"]),
    )


def text_of(page: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(?:p|small|a|h3)>', page, re.DOTALL)
    assert found, f"no #{element_id}"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).replace("&#39;", "'").strip()


def with_domain(services, d, **changes) -> None:
    with services.store.transaction():
        row = services.store.domains.get(uuid.UUID(d["orgId"]), uuid.UUID(d["id"]))
        services.store.domains.update(attrs.evolve(row, **changes))


class TestAcme:
    @pytest.fixture
    def config(self, config):
        return acme(config)

    @pytest.mark.gen_test
    async def test_the_dns_page_says_the_ca_validates_through_the_cname(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert "lets Let's Encrypt validate the certificate and each renewal" in page.replace("&#39;", "'")

    @pytest.mark.gen_test
    async def test_the_dns_page_never_names_an_edge_provider(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        with_domain(services, d, cert_status="pending")
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert "edge provider" not in page

    @pytest.mark.gen_test
    async def test_a_certificate_being_issued_is_issued_by_the_ca(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        with_domain(services, d, cert_status="pending")
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns")).body.decode()
        assert text_of(page, "cert-summary").startswith("Let's Encrypt is issuing the certificate")

    @pytest.mark.gen_test
    async def test_the_delete_page_says_the_certificate_is_revoked_at_the_ca_and_no_longer_served(
            self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/delete")).body.decode()
        assert text_of(page, "delete-certificate") == (
            "Its certificate is no longer served by this service's TLS terminator from that moment, and is "
            "revoked at Let's Encrypt within a minute.")

    @pytest.mark.gen_test
    async def test_the_delete_page_does_not_say_the_certificate_is_kept(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/delete")).body.decode()
        assert "not revoked" not in page and "edge provider" not in page


class TestSandbox:
    @pytest.mark.gen_test
    async def test_the_delete_page_says_the_certificate_was_simulated(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/delete")).body.decode()
        assert text_of(page, "delete-certificate").startswith("Its certificate was simulated")


class TestDrift:
    DRIFT = (DriftProblem("delegation_missing", "No record exists at _acme-challenge.shop.example.com (NXDOMAIN).",
                          "Publish the CNAME again."),)

    async def drifted(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        mark_verified(services, d)
        with_domain(services, d, drift=self.DRIFT, drift_since=services.clock.now(),
                    validation_error=self.DRIFT[0].message,
                    validation_checked_at=services.clock.now())
        sign_in(browser, services, owner)
        return (await browser.get(f"/site/{d['id']}/dns")).body.decode()

    @pytest.mark.gen_test
    async def test_a_verified_domain_with_drift_does_not_say_both_records_were_found(self, browser, services, world, api):
        page = await self.drifted(browser, services, world, api)
        assert "Both records were found" not in page and "found what <a href=\"#drift\">the notice above</a>" in page

    @pytest.mark.gen_test
    async def test_the_drift_is_said_once_on_the_page(self, browser, services, world, api):
        page = await self.drifted(browser, services, world, api)
        assert page.count("No record exists at _acme-challenge.shop.example.com") == 1


class TestSimulatedDns:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, provider=ProviderConfig(
            kind="sandbox", sandbox=SandboxConfig(simulate_dns=True, simulate_dns_delay_seconds=5)))

    @pytest.mark.gen_test
    async def test_a_diagnosis_before_the_records_appear_says_to_wait_not_to_publish(self, browser, services, world, api):
        owner = world.owner()
        d = await new_domain(api, owner)
        sign_in(browser, services, owner)
        page = (await browser.get(f"/site/{d['id']}/dns?diagnose=1")).body.decode()
        verdict = text_of(page, "verdict")
        assert verdict.startswith("Nothing to change: it needs time. DNS is simulated on this service: both records "
                                  "count as published at 10:00:05 UTC")
        assert "Publish a CNAME" not in page


class TestDiagnoseButton:
    @pytest.mark.gen_test
    async def test_the_status_fragment_carries_the_diagnose_button_in_the_words_of_the_status(
            self, browser, services, world, api, clock):
        owner = world.owner()
        d = await new_domain(api, owner)
        mark_verified(services, d)
        with_domain(services, d, cert_status="active", ops_status="active")
        sign_in(browser, services, owner)
        fragment = (await browser.get(f"/site/{d['id']}/status")).body.decode()
        assert re.search(r'id="diagnose" data-live>Run a diagnosis</a>', fragment)
