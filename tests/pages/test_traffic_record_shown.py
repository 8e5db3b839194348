"""The customer's traffic record (issue 48, item 2) on the portal's DNS page and on the verification
link's page: a third record "for your visitors' traffic" while ``[tls_terminator] traffic_cname`` or
``traffic_addresses`` is set, and not a word of it otherwise."""

from __future__ import annotations

import attrs
import pytest

from core.config import TlsTerminatorConfig
from tests.pages.portal_client import new_domain, sign_in

EDGE = "edge.saas-test.com"


@pytest.fixture
def terminator():
    return TlsTerminatorConfig(traffic_cname=EDGE, traffic_addresses=["192.0.2.10"])


@pytest.fixture
def config(config, terminator):
    return attrs.evolve(config, tls_terminator=terminator)


async def dns_page(api, world, browser, services, apex="shop.example.com"):
    owner = world.owner()
    domain = await new_domain(api, owner, apex)
    sign_in(browser, services, owner)
    return (await browser.get(f"/site/{domain['id']}/dns")).body.decode()


@pytest.mark.gen_test
async def test_the_dns_page_shows_the_cname_for_the_visitors_traffic(api, world, browser, services):
    page = await dns_page(api, world, browser, services)
    assert "for your visitors' traffic" in page
    assert 'id="traffic-1-type">CNAME<' in page
    assert f'id="traffic-1-value" class="value" data-value="{EDGE}"' in page
    assert 'id="traffic-1-relative" class="value" data-value="shop"' in page


@pytest.mark.gen_test
async def test_the_dns_page_of_a_zone_s_apex_shows_the_terminator_s_address(api, world, browser, services):
    page = await dns_page(api, world, browser, services, apex="example.com")
    assert 'id="traffic-1-type">A<' in page and 'data-value="192.0.2.10"' in page
    assert 'id="traffic-1-relative" class="value" data-value="@"' in page


class TestWithACnameOnly:
    @pytest.fixture
    def terminator(self):
        return TlsTerminatorConfig(traffic_cname=EDGE)

    @pytest.mark.gen_test
    async def test_the_dns_page_of_a_zone_s_apex_asks_for_a_flattened_cname(self, api, world, browser, services):
        page = await dns_page(api, world, browser, services, apex="example.com")
        assert 'id="traffic-apex"' in page and "ALIAS" in page


@pytest.mark.gen_test
async def test_the_verification_link_page_shows_it(api, world, browser):
    owner = world.owner()
    domain = await new_domain(api, owner)
    link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body
    page = (await browser.get("/verify/" + link["url"].rsplit("/", 1)[1])).body.decode()
    assert "for your visitors' traffic" in page and f'data-value="{EDGE}"' in page


class TestWithoutTheKeys:
    @pytest.fixture
    def terminator(self):
        return TlsTerminatorConfig()

    @pytest.mark.gen_test
    async def test_the_dns_page_says_nothing_of_traffic(self, api, world, browser, services):
        page = await dns_page(api, world, browser, services)
        assert "traffic" not in page.lower()

    @pytest.mark.gen_test
    async def test_the_verification_link_page_says_nothing_of_traffic(self, api, world, browser):
        owner = world.owner()
        domain = await new_domain(api, owner)
        link = (await api.post("/v1/verification-links", {"domainId": domain["id"]}, token=owner.token)).body
        page = (await browser.get("/verify/" + link["url"].rsplit("/", 1)[1])).body.decode()
        assert "traffic" not in page.lower()
