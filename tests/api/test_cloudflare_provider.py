"""Domains created with [provider] kind = "cloudflare", against the fake Cloudflare API."""

from __future__ import annotations

import attrs
import pytest

from core.config import CloudflareConfig, ProviderConfig
from tests.servers.cloudflare import TOKEN, ZONE_ID, FakeCloudflare


@pytest.fixture(scope="module")
def cloudflare():
    fake = FakeCloudflare().start()
    yield fake
    fake.stop()


class TestWorking:
    """A reachable, accepting API."""

    @pytest.fixture
    def config(self, config, cloudflare):
        cf = CloudflareConfig(api_base=cloudflare.api_base, zone_id=ZONE_ID, api_token=TOKEN)
        return attrs.evolve(config, provider=ProviderConfig(kind="cloudflare", cloudflare=cf))

    @pytest.mark.gen_test
    async def test_the_delegation_cname_points_at_cloudflare(self, api, world):
        r = await api.post("/v1/domains", {"apex": "shop.example.com"}, token=world.owner().token)
        assert r.body["validation"]["delegation"]["value"] == "shop.example.com.98f23a08960b326c.dcv.cloudflare.com"


class TestRefusing:
    """An API that refuses the token."""

    @pytest.fixture
    def config(self, config, cloudflare):
        cf = CloudflareConfig(api_base=cloudflare.api_base, zone_id=ZONE_ID, api_token="revoked")
        return attrs.evolve(config, provider=ProviderConfig(kind="cloudflare", cloudflare=cf))

    @pytest.mark.gen_test
    async def test_create_is_a_502_and_stores_nothing(self, api, world):
        owner = world.owner()
        r = await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)
        assert (r.status, r.code) == (502, "upstream_error")
        assert (await api.post("/v1/domains/query", {}, token=owner.token)).body["total"] == 0
