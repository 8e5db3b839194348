"""Edge providers: the sandbox and the Cloudflare adapter meet the same contract."""

from __future__ import annotations

import re

import pytest

from core.config import CloudflareConfig, SandboxConfig
from core.crypto import Keyring
from core.edge.cloudflare import CloudflareProvider
from core.edge.sandbox import SandboxProvider
from core.errors import UpstreamError
from tests.fakes import FakeClock
from tests.servers.cloudflare import TOKEN, ZONE_ID, FakeCloudflare


@pytest.fixture(scope="module")
def cloudflare():
    fake = FakeCloudflare().start()
    yield fake
    fake.stop()


def cloudflare_provider(fake: FakeCloudflare, token: str = TOKEN) -> CloudflareProvider:
    return CloudflareProvider(CloudflareConfig(api_base=fake.api_base, zone_id=ZONE_ID, api_token=token))


@pytest.fixture(params=["sandbox", "cloudflare"])
def provider(request, cloudflare):
    if request.param == "sandbox":
        return SandboxProvider(Keyring(b"k" * 32), SandboxConfig(), FakeClock())
    return cloudflare_provider(cloudflare)


class TestContract:
    """What every provider promises."""

    @pytest.mark.gen_test
    async def test_the_delegation_target_is_under_the_hostname(self, provider):
        target = await provider.delegation_target("shop.example.com")
        assert re.fullmatch(r"shop\.example\.com\.[0-9a-z]{16}\.dcv\.[a-z.]+", target)

    @pytest.mark.gen_test
    async def test_the_target_is_stable(self, provider):
        assert await provider.delegation_target("a.example.com") == await provider.delegation_target("a.example.com")

    def test_the_provider_identifier(self, provider):
        assert provider.name == "edge_provider_for_saas"


class TestCloudflare:
    """The Cloudflare adapter against the fake API."""

    @pytest.mark.gen_test
    async def test_the_target_uses_the_zone_delegation_uuid(self, cloudflare):
        target = await cloudflare_provider(cloudflare).delegation_target("shop.example.com")
        assert target == "shop.example.com.98f23a08960b326c.dcv.cloudflare.com"

    @pytest.mark.gen_test
    async def test_the_uuid_is_fetched_once(self, cloudflare):
        provider = cloudflare_provider(cloudflare)
        before = len(cloudflare.requests)
        for name in ("a.example.com", "b.example.com"):
            await provider.delegation_target(name)
        assert len(cloudflare.requests) == before + 1

    @pytest.mark.gen_test
    async def test_a_refused_token_is_an_upstream_error(self, cloudflare):
        with pytest.raises(UpstreamError):
            await cloudflare_provider(cloudflare, token="wrong").delegation_target("a.example.com")

    @pytest.mark.gen_test
    async def test_an_unreachable_api_is_an_upstream_error(self):
        provider = CloudflareProvider(CloudflareConfig(api_base="http://127.0.0.1:9/client/v4", zone_id=ZONE_ID, api_token=TOKEN))
        with pytest.raises(UpstreamError):
            await provider.delegation_target("a.example.com")


class TestSandbox:
    """The sandbox."""

    @pytest.mark.gen_test
    async def test_installations_get_different_targets(self):
        one = await SandboxProvider(Keyring(b"a" * 32), SandboxConfig(), FakeClock()).delegation_target("x.example.com")
        two = await SandboxProvider(Keyring(b"b" * 32), SandboxConfig(), FakeClock()).delegation_target("x.example.com")
        assert one != two
