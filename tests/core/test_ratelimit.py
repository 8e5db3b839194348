"""core.ratelimit: buckets per path, the client address, fixed windows."""

from __future__ import annotations

import ipaddress

import pytest

from core.config import RateLimitsConfig
from core.ratelimit import RateLimiter, buckets_for, client_ip
from tests.fakes import FakeClock

PROXIES = [ipaddress.ip_network("10.0.0.0/8")]


class TestBuckets:
    """Which bucket a path counts against (the spec's Limits table)."""

    def test_api_routes_share_the_api_bucket(self):
        assert buckets_for("/v1/domains/query") == ("api",)

    def test_auth_routes_count_within_the_shared_bucket(self):
        assert buckets_for("/v1/auth/oidc/exchange") == ("api", "auth")

    def test_signup_has_a_separate_bucket(self):
        assert buckets_for("/v1/public/signup") == ("signup",)

    def test_public_verification_links(self):
        assert buckets_for("/v1/public/verification-links/abc") == ("api", "public_verification_links")

    def test_verification_links(self):
        assert buckets_for("/v1/verification-links") == ("api", "verification_links")
        assert buckets_for("/v1/verification-links/abc/remind") == ("api", "verification_links")

    def test_site_scan(self):
        assert buckets_for("/v1/site-scan/https") == ("api", "site_scan")

    def test_pages_are_outside_every_bucket(self):
        assert buckets_for("/site/abc/dns") == ()


class TestClientIp:
    """X-Forwarded-For is believed only from trusted proxies."""

    def test_direct_peer(self):
        assert client_ip("198.51.100.1", "1.2.3.4", PROXIES) == "198.51.100.1"

    def test_behind_a_trusted_proxy(self):
        assert client_ip("10.0.0.2", "198.51.100.7", PROXIES) == "198.51.100.7"

    def test_spoofed_hops_left_of_the_real_client_are_ignored(self):
        assert client_ip("10.0.0.2", "6.6.6.6, 198.51.100.7, 10.0.0.9", PROXIES) == "198.51.100.7"

    def test_a_malformed_hop_falls_back_to_the_peer(self):
        assert client_ip("10.0.0.2", "not-an-ip", PROXIES) == "10.0.0.2"


class TestLimiter:
    """Counting."""

    def test_ipv6_clients_share_a_slash_64(self):
        limiter = RateLimiter(RateLimitsConfig(api=1), FakeClock())
        assert limiter.hit("/v1/x", "2001:db8::1").exceeded is None
        assert limiter.hit("/v1/x", "2001:db8::2").exceeded is not None

    @pytest.mark.parametrize("one, other", [("::ffff:192.0.2.1", "::ffff:192.0.2.2"), ("64:ff9b::c000:201", "64:ff9b::c000:202")])
    def test_ipv4_clients_seen_over_ipv6_are_counted_one_by_one(self, one, other):
        limiter = RateLimiter(RateLimitsConfig(api=1), FakeClock())
        assert limiter.hit("/v1/x", one).exceeded is None
        assert limiter.hit("/v1/x", other).exceeded is None

    def test_an_ipv4_mapped_client_shares_the_bucket_of_its_ipv4_address(self):
        limiter = RateLimiter(RateLimitsConfig(api=1), FakeClock())
        limiter.hit("/v1/x", "192.0.2.1")
        assert limiter.hit("/v1/x", "::ffff:192.0.2.1").exceeded is not None

    def test_a_request_refused_by_the_shared_bucket_does_not_count_in_the_inner_one(self):
        limiter = RateLimiter(RateLimitsConfig(api=1, auth=5), FakeClock())
        limiter.hit("/v1/x", "192.0.2.1")
        decision = limiter.hit("/v1/auth/session", "192.0.2.1")
        assert decision.exceeded.bucket == "api"
        assert decision.usages[1].remaining == 5
