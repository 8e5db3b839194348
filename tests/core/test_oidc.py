"""The OIDC verifier's fetches of the issuer's discovery document and JWKS."""

from __future__ import annotations

import asyncio

import pytest
from tornado.httpclient import AsyncHTTPClient

from core.identity.oidc import CACHE_SECONDS, OidcVerifier
from tests.servers.oidc import CLIENT_ID


@pytest.fixture
def verifier(oidc_issuer, clock):
    verifier = OidcVerifier(issuer=oidc_issuer.issuer, client_id=CLIENT_ID, clock=clock)
    yield verifier
    verifier.close()


def fetches(oidc_issuer):
    return oidc_issuer.discovery_fetches, oidc_issuer.jwks_fetches


async def verify_concurrently(verifier, oidc_issuer, clock, times=50):
    token = oidc_issuer.mint(now=clock.now(), email="a@example.com")
    results = await asyncio.gather(*(verifier.verify(token) for _ in range(times)))
    assert all(claims["email"] == "a@example.com" for claims in results)


class TestOneFetchInFlight:
    """Concurrent verifications share one fetch of each document instead of each making its own."""

    @pytest.mark.gen_test
    async def test_a_fresh_verifier_fetches_discovery_and_jwks_once(self, verifier, oidc_issuer, clock):
        before = fetches(oidc_issuer)
        await verify_concurrently(verifier, oidc_issuer, clock)
        assert fetches(oidc_issuer) == (before[0] + 1, before[1] + 1)

    @pytest.mark.gen_test
    async def test_an_expired_cache_is_refetched_once(self, verifier, oidc_issuer, clock):
        await verify_concurrently(verifier, oidc_issuer, clock)
        clock.advance(CACHE_SECONDS + 1)
        before = fetches(oidc_issuer)
        await verify_concurrently(verifier, oidc_issuer, clock)
        assert fetches(oidc_issuer) == (before[0] + 1, before[1] + 1)

    @pytest.mark.gen_test
    async def test_a_fresh_cache_is_not_refetched(self, verifier, oidc_issuer, clock):
        await verify_concurrently(verifier, oidc_issuer, clock)
        clock.advance(CACHE_SECONDS - 1)
        before = fetches(oidc_issuer)
        await verify_concurrently(verifier, oidc_issuer, clock)
        assert fetches(oidc_issuer) == before

    @pytest.mark.gen_test
    async def test_tokens_signed_with_a_new_key_share_one_jwks_refetch(self, verifier, oidc_issuer, clock):
        await verify_concurrently(verifier, oidc_issuer, clock)
        oidc_issuer.rotate()
        before = fetches(oidc_issuer)
        await verify_concurrently(verifier, oidc_issuer, clock)
        assert fetches(oidc_issuer) == (before[0], before[1] + 1)


class TestOwnHttpClient:
    """Identity-provider calls do not queue behind the service's other HTTP calls."""

    @pytest.mark.gen_test
    async def test_a_saturated_shared_client_does_not_delay_verification(self, verifier, oidc_issuer, clock):
        release = asyncio.Event()

        async def never_answer(reader, writer):
            await release.wait()
            writer.close()

        server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        shared = AsyncHTTPClient()
        stuck = [
            asyncio.ensure_future(shared.fetch(f"http://127.0.0.1:{port}/slow", request_timeout=15))
            for _ in range(shared.max_clients)
        ]
        try:
            token = oidc_issuer.mint(now=clock.now(), email="a@example.com")
            claims = await asyncio.wait_for(verifier.verify(token), 5)
            assert claims["email"] == "a@example.com"
        finally:
            release.set()
            await asyncio.gather(*stuck, return_exceptions=True)
            server.close()
            await server.wait_closed()
