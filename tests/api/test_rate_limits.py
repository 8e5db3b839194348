"""Rate limits over HTTP: headers on every /v1/ response, 429 with Retry-After, buckets, proxies."""

from __future__ import annotations

import attrs
import pytest

from core.config import RateLimitsConfig, ServerConfig


@pytest.fixture
def config(config):
    return attrs.evolve(
        config,
        rate_limits=RateLimitsConfig(api=5, auth=3),
        server=ServerConfig(trusted_proxies=["127.0.0.1"]),
    )


def from_ip(ip: str) -> dict[str, str]:
    return {"X-Forwarded-For": ip}


class TestHeaders:
    """RateLimit and RateLimit-Policy."""

    @pytest.mark.gen_test
    async def test_every_api_response_carries_both_headers(self, api, clock):
        r = await api.get("/v1/openapi.json", headers=from_ip("198.51.100.1"))
        assert r.headers["RateLimit-Policy"] == '"api";q=5;w=900'
        # The fake clock stands at 10:00:00, so the 15-minute window ends in 900 s.
        assert r.headers["RateLimit"] == '"api";r=4;t=900'

    @pytest.mark.gen_test
    async def test_auth_routes_report_both_policies_and_the_tighter_one(self, api):
        r = await api.get("/v1/auth/session", headers=from_ip("198.51.100.2"))
        assert r.headers["RateLimit-Policy"] == '"api";q=5;w=900, "auth";q=3;w=900'
        assert r.headers["RateLimit"] == '"auth";r=2;t=900'

    @pytest.mark.gen_test
    async def test_errors_carry_the_headers_too(self, api):
        r = await api.get("/v1/nothing-here", headers=from_ip("198.51.100.3"))
        assert r.status == 404
        assert r.headers["RateLimit"] == '"api";r=4;t=900'


class TestLimit:
    """The 429."""

    @pytest.mark.gen_test
    async def test_the_request_past_the_quota_is_429_with_retry_after(self, api, clock):
        clock.advance(300)
        for _ in range(5):
            assert (await api.get("/v1/openapi.json", headers=from_ip("198.51.100.4"))).status == 200
        r = await api.get("/v1/openapi.json", headers=from_ip("198.51.100.4"))
        assert (r.status, r.code) == (429, "rate_limited")
        assert r.headers["Retry-After"] == "600"
        assert r.headers["RateLimit"] == '"api";r=0;t=600'

    @pytest.mark.gen_test
    async def test_the_auth_bucket_is_smaller_than_the_shared_one(self, api):
        for _ in range(3):
            assert (await api.get("/v1/auth/session", headers=from_ip("198.51.100.5"))).status == 200
        r = await api.get("/v1/auth/session", headers=from_ip("198.51.100.5"))
        assert (r.status, r.code) == (429, "rate_limited")
        assert "'auth'" in r.body["message"]
        # The shared bucket still admits other routes.
        assert (await api.get("/v1/openapi.json", headers=from_ip("198.51.100.5"))).status == 200

    @pytest.mark.gen_test
    async def test_the_limit_applies_before_authentication(self, api):
        for _ in range(5):
            await api.get("/v1/api-keys", token="ac_live_bogus", headers=from_ip("198.51.100.6"))
        r = await api.get("/v1/api-keys", token="ac_live_bogus", headers=from_ip("198.51.100.6"))
        assert r.code == "rate_limited"

    @pytest.mark.gen_test
    async def test_a_new_window_starts_afresh(self, api, clock):
        for _ in range(6):
            await api.get("/v1/openapi.json", headers=from_ip("198.51.100.7"))
        clock.advance(900)
        assert (await api.get("/v1/openapi.json", headers=from_ip("198.51.100.7"))).status == 200

    @pytest.mark.gen_test
    async def test_clients_are_counted_apart(self, api):
        for _ in range(6):
            await api.get("/v1/openapi.json", headers=from_ip("198.51.100.8"))
        assert (await api.get("/v1/openapi.json", headers=from_ip("198.51.100.9"))).status == 200

    @pytest.mark.gen_test
    async def test_pages_are_not_counted(self, api, http_client, base_url):
        for _ in range(6):
            await http_client.fetch(base_url + "/", headers=from_ip("198.51.100.10"))
        assert (await api.get("/v1/openapi.json", headers=from_ip("198.51.100.10"))).status == 200


class TestPortalSignInCallback:
    """GET /auth/callback redeems a code, as POST /v1/auth/oidc/exchange does: it counts in the
    ``auth`` bucket (limit 3 here), so the portal is no way around that limit."""

    @pytest.mark.gen_test
    async def test_the_callback_past_the_auth_quota_is_429_with_retry_after(self, http_client, base_url):
        for _ in range(3):
            r = await http_client.fetch(f"{base_url}/auth/callback?code=x&state=y", headers=from_ip("198.51.100.30"),
                                        raise_error=False)
            assert r.code == 400  # a stale sign-in, but counted
        refused = await http_client.fetch(f"{base_url}/auth/callback?code=x&state=y", headers=from_ip("198.51.100.30"),
                                          raise_error=False)
        assert refused.code == 429 and int(refused.headers["Retry-After"]) > 0
        assert refused.headers["Content-Type"].startswith("text/html") and refused.body

    @pytest.mark.gen_test
    async def test_callbacks_spend_the_same_auth_bucket_as_the_api(self, api, http_client, base_url):
        for _ in range(3):
            await http_client.fetch(f"{base_url}/auth/callback?code=x&state=y", headers=from_ip("198.51.100.31"),
                                    raise_error=False)
        r = await api.get("/v1/auth/session", headers=from_ip("198.51.100.31"))
        assert (r.status, r.code) == (429, "rate_limited") and "'auth'" in r.body["message"]


class TestUntrustedPeer:
    """Without trusted proxies, X-Forwarded-For is ignored."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, server=ServerConfig(trusted_proxies=[]))

    @pytest.mark.gen_test
    async def test_a_client_cannot_dodge_the_limit_with_forwarded_for(self, api):
        for n in range(5):
            await api.get("/v1/openapi.json", headers=from_ip(f"203.0.113.{n}"))
        r = await api.get("/v1/openapi.json", headers=from_ip("203.0.113.99"))
        assert r.code == "rate_limited"


class TestEachBucketUnderABurst:
    """A burst from one client stops at its bucket's limit, with the headers; another client goes on."""

    @pytest.fixture
    def config(self, config):
        limits = RateLimitsConfig(api=50, auth=3, signup=3, public_verification_links=3, verification_links=3, site_scan=3)
        return attrs.evolve(config, rate_limits=limits, server=ServerConfig(trusted_proxies=["127.0.0.1"]))

    @pytest.mark.gen_test
    @pytest.mark.parametrize(("bucket", "method", "path", "body"), [
        ("auth", "GET", "/v1/auth/session", None),
        ("signup", "POST", "/v1/public/signup", {}),
        ("public_verification_links", "GET", "/v1/public/verification-links/vl_unknown", None),
        ("verification_links", "GET", "/v1/verification-links", None),
        ("site_scan", "POST", "/v1/site-scan/https", {}),
    ])
    async def test_the_fourth_request_is_refused_for_that_client_only(self, api, bucket, method, path, body):
        for _ in range(3):
            r = await api.request(method, path, json_body=body, headers=from_ip("198.51.100.20"))
            assert r.status != 429
        refused = await api.request(method, path, json_body=body, headers=from_ip("198.51.100.20"))
        assert (refused.status, refused.code) == (429, "rate_limited")
        assert f'"{bucket}";q=3;w=900' in refused.headers["RateLimit-Policy"]
        assert int(refused.headers["Retry-After"]) > 0 and "RateLimit" in refused.headers
        other = await api.request(method, path, json_body=body, headers=from_ip("198.51.100.21"))
        assert other.status != 429
