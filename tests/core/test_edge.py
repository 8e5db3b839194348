"""Edge providers: the sandbox and the Cloudflare adapter meet the same contract."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import logging
import re
import time
import uuid
from unittest.mock import ANY

import pytest
from tornado.httpclient import HTTPRequest, HTTPResponse
from tornado.httputil import HTTPHeaders
from tornado.simple_httpclient import SimpleAsyncHTTPClient

from core.config import CloudflareConfig, SandboxConfig
from core.crypto import Keyring
from core.edge import HostnameGone, ProviderBusy, ProviderRejected, ProviderUnavailable
from core.edge.cloudflare import CloudflareProvider, _result, parse_state, parse_time
from core.edge.sandbox import SandboxProvider
from core.errors import UpstreamError
from tests.fakes import FakeClock
from tests.servers.cloudflare import TOKEN, ZONE_ID, FakeCloudflare

TRACE = uuid.UUID("00000000-0000-4000-8000-000000000001")
CREATE_PATH = f"/client/v4/zones/{ZONE_ID}/custom_hostnames"


@pytest.fixture(scope="module")
def cloudflare_server():
    fake = FakeCloudflare().start()
    yield fake
    fake.stop()


@pytest.fixture
def cloudflare(cloudflare_server):
    cloudflare_server.reset()
    return cloudflare_server


def cloudflare_provider(fake: FakeCloudflare, token: str = TOKEN, **settings) -> CloudflareProvider:
    return CloudflareProvider(CloudflareConfig(api_base=fake.api_base, zone_id=ZONE_ID, api_token=token, **settings))


class SandboxHarness:
    """The sandbox, activated by moving its clock past the activation delay."""

    name = "sandbox"

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.provider = SandboxProvider(Keyring(b"k" * 32), SandboxConfig(activation_delay_seconds=10), self.clock)

    def activate(self, apex: str) -> None:
        self.clock.advance(10)

    def activate_at_once(self) -> None:
        self.provider = SandboxProvider(Keyring(b"k" * 32), SandboxConfig(activation_delay_seconds=0), self.clock)


class CloudflareHarness:
    """The Cloudflare adapter, activated by moving the fake's hostname to active / active."""

    name = "cloudflare"

    def __init__(self, fake: FakeCloudflare) -> None:
        self.fake = fake
        self.provider = cloudflare_provider(fake)

    def activate(self, apex: str) -> None:
        self.fake.set_state(apex, status="active", ssl_status="active")

    def activate_at_once(self) -> None:
        self.fake.auto_activate = True


@pytest.fixture(params=["sandbox", "cloudflare"])
def harness(request, cloudflare):
    return SandboxHarness() if request.param == "sandbox" else CloudflareHarness(cloudflare)


@pytest.fixture
def provider(harness):
    return harness.provider


def is_utc(value: dt.datetime | None) -> bool:
    return value is not None and value.utcoffset() == dt.timedelta(0)


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

    @pytest.mark.gen_test
    async def test_issuing_reports_a_hostname_id_and_a_pending_status(self, provider):
        state = await provider.issue("shop.customer-a.com", trace_id=TRACE)
        assert state.hostname_id
        assert (state.hostname_status, state.ssl_status) == ("pending", "pending_validation")

    @pytest.mark.gen_test
    async def test_a_hostname_validated_at_once_is_active_on_issue(self, harness):
        harness.activate_at_once()
        state = await harness.provider.issue("shop.customer-a.com", trace_id=TRACE)
        assert (state.hostname_status, state.ssl_status) == ("active", "active")

    @pytest.mark.gen_test
    async def test_issuing_twice_adopts_the_same_hostname(self, provider):
        first = await provider.issue("shop.customer-a.com", trace_id=TRACE)
        second = await provider.issue("shop.customer-a.com", trace_id=TRACE)
        assert second.hostname_id == first.hostname_id

    @pytest.mark.gen_test
    async def test_a_refresh_after_activation_reports_an_active_certificate(self, harness):
        issued = await harness.provider.issue("shop.customer-a.com", trace_id=TRACE)
        harness.activate("shop.customer-a.com")
        state = await harness.provider.refresh(issued.hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (state.hostname_id, state.hostname_status, state.ssl_status) == (issued.hostname_id, "active", "active")
        assert state.certificate_id and state.issuer
        assert state.issued_at < state.expires_at

    @pytest.mark.gen_test
    async def test_timestamps_are_aware_utc(self, harness):
        issued = await harness.provider.issue("shop.customer-a.com", trace_id=TRACE)
        harness.activate("shop.customer-a.com")
        state = await harness.provider.refresh(issued.hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert is_utc(state.issued_at) and is_utc(state.expires_at)

    @pytest.mark.gen_test
    async def test_a_hostname_the_provider_does_not_know_is_gone(self, harness):
        if harness.name == "sandbox":
            pytest.skip("the sandbox keeps hostnames in memory and adopts unknown ids (as after a restart)")
        with pytest.raises(HostnameGone):
            await harness.provider.refresh(str(uuid.uuid4()), apex="shop.customer-a.com", trace_id=TRACE)


class TestCloudflareDelegation:
    """The zone's DCV delegation target."""

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
        config = CloudflareConfig(api_base="http://127.0.0.1:9/client/v4", zone_id=ZONE_ID, api_token=TOKEN, retry_seconds=1)
        with pytest.raises(UpstreamError):
            await CloudflareProvider(config).delegation_target("a.example.com")


class TestCloudflareIssue:
    """Creating a custom hostname."""

    @pytest.mark.gen_test
    async def test_the_create_body_is_the_hostname_with_txt_dv_only(self, cloudflare):
        await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        assert cloudflare.bodies == [("POST", CREATE_PATH, {"hostname": "shop.customer-a.com", "ssl": {"method": "txt", "type": "dv"}})]

    @pytest.mark.gen_test
    async def test_a_new_hostname_reports_its_ids_delegation_target_and_errors(self, cloudflare):
        state = await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        record = cloudflare.find("shop.customer-a.com")
        assert (state.hostname_id, state.ssl_id) == (record["id"], record["ssl"]["id"])
        assert state.delegation_target == "shop.customer-a.com.98f23a08960b326c.dcv.cloudflare.com"
        assert state.errors == ("custom hostname does not CNAME to this zone.",)
        assert state.certificate_id is None and state.expires_at is None

    @pytest.mark.gen_test
    async def test_a_create_answer_without_validation_records_is_used_as_it_is(self, cloudflare):
        cloudflare.records_on_create = False
        state = await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        assert state.delegation_target is None
        assert cloudflare.requests == [("POST", CREATE_PATH)]

    @pytest.mark.gen_test
    async def test_a_duplicate_is_adopted_through_an_exact_hostname_lookup(self, cloudflare):
        first = await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        cloudflare.requests.clear()
        again = await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        assert again.hostname_id == first.hostname_id
        assert cloudflare.requests == [("POST", CREATE_PATH), ("GET", CREATE_PATH)]
        assert cloudflare.statuses[-2:] == [409, 200]

    @pytest.mark.gen_test
    @pytest.mark.parametrize(
        ("apex", "code", "said"),
        [
            ("10.0.0.1", 1407, "invalid custom hostname (Cloudflare error 1407)"),
            ("nodots", 1407, "invalid custom hostname (Cloudflare error 1407)"),
            ("shop.customer.test", 1409, "custom hostname uses a reserved top-level domain (Cloudflare error 1409)"),
        ],
    )
    async def test_a_refused_hostname_is_rejected_with_cloudflare_s_code(self, cloudflare, apex, code, said):
        with pytest.raises(ProviderRejected) as caught:
            await cloudflare_provider(cloudflare).issue(apex, trace_id=TRACE)
        assert caught.value.provider_code == code
        assert caught.value.message == f"The edge provider refused the hostname: {said}."
        assert len(cloudflare.requests) == 1


class TestCloudflareRefresh:
    """Reading a custom hostname again, and re-triggering validation where that is the fix."""

    @pytest.fixture
    def provider(self, cloudflare):
        return cloudflare_provider(cloudflare)

    async def issued(self, provider, apex: str = "shop.customer-a.com") -> str:
        return (await provider.issue(apex, trace_id=TRACE)).hostname_id

    @pytest.mark.gen_test
    async def test_an_unknown_id_is_gone(self, provider):
        with pytest.raises(HostnameGone) as caught:
            await provider.refresh(str(uuid.uuid4()), apex="shop.customer-a.com", trace_id=TRACE)
        assert caught.value.provider_code == 1436

    @pytest.mark.gen_test
    async def test_a_pending_hostname_is_only_read(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        state = await provider.refresh(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert state.ssl_status == "pending_validation"
        assert [method for method, _ in cloudflare.requests] == ["POST", "GET"]

    @pytest.mark.gen_test
    async def test_a_refresh_reads_a_timed_out_certificate_as_the_provider_reports_it(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        cloudflare.set_state("shop.customer-a.com", ssl_status="validation_timed_out", ssl_errors=["CAA forbids"])
        state = await provider.refresh(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (state.ssl_status, state.errors[-1]) == ("validation_timed_out", "CAA forbids")
        assert cloudflare.revalidations == 0 and not [b for b in cloudflare.bodies if b[0] == "PATCH"]

    @pytest.mark.gen_test
    async def test_a_timed_out_certificate_is_validated_again_with_one_patch(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        cloudflare.set_state("shop.customer-a.com", ssl_status="validation_timed_out")
        state = await provider.revalidate(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (state.ssl_status, state.revalidated) == ("pending_validation", True)
        assert [b for b in cloudflare.bodies if b[0] == "PATCH"] == [
            ("PATCH", f"{CREATE_PATH}/{hostname_id}", {"ssl": {"method": "txt", "type": "dv"}})
        ]
        assert cloudflare.revalidations == 1

    @pytest.mark.gen_test
    async def test_a_hostname_no_longer_failing_is_only_read_when_asked_to_validate_again(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        state = await provider.revalidate(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (state.ssl_status, state.revalidated) == ("pending_validation", False)
        assert [method for method, _ in cloudflare.requests] == ["POST", "GET"]

    @pytest.mark.gen_test
    async def test_the_patch_repeats_the_hostname_s_own_method(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        cloudflare.edit("shop.customer-a.com", lambda r: r["ssl"].update(method="http", status="issuance_timed_out"))
        await provider.revalidate(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert cloudflare.bodies[-1][2] == {"ssl": {"method": "http", "type": "dv"}}
        assert cloudflare.revalidations == 1

    @pytest.mark.gen_test
    async def test_a_moved_hostname_is_validated_again(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        cloudflare.set_state("shop.customer-a.com", status="moved")
        state = await provider.revalidate(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert state.hostname_status == "pending"
        assert cloudflare.revalidations == 1

    @pytest.mark.gen_test
    async def test_unknown_states_pass_through_as_written(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        cloudflare.set_state("shop.customer-a.com", status="some_future_state", ssl_status="some_future_ssl_state")
        state = await provider.refresh(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (state.hostname_status, state.ssl_status) == ("some_future_state", "some_future_ssl_state")

    @pytest.mark.gen_test
    async def test_the_certificate_is_read_from_ssl_certificates(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        certificate = cloudflare.set_state("shop.customer-a.com", status="active", ssl_status="active")["ssl"]["certificates"][0]
        state = await provider.refresh(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (state.certificate_id, state.issuer) == (certificate["id"], "LetsEncrypt")
        assert state.expires_at == parse_time(certificate["expires_on"])
        assert state.issued_at == parse_time(certificate["issued_on"])

    @pytest.mark.gen_test
    async def test_ssl_issuer_and_expires_on_are_the_fallback(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        cloudflare.set_state("shop.customer-a.com", status="active", ssl_status="active")
        cloudflare.edit("shop.customer-a.com", lambda r: r["ssl"].update(certificates=[], expires_on="2027-02-18T10:02:10Z"))
        state = await provider.refresh(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (state.certificate_id, state.issuer) == (None, "LetsEncrypt")
        assert state.expires_at == dt.datetime(2027, 2, 18, 10, 2, 10, tzinfo=dt.UTC)

    @pytest.mark.gen_test
    async def test_errors_are_the_hostname_s_then_the_certificate_s(self, provider, cloudflare):
        hostname_id = await self.issued(provider)
        cloudflare.set_state("shop.customer-a.com", verification_errors=["Zone does not have a fallback origin set."],
                             ssl_errors=["SERVFAIL looking up CAA for shop.customer-a.com"])
        state = await provider.refresh(hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert state.errors == ("Zone does not have a fallback origin set.", "SERVFAIL looking up CAA for shop.customer-a.com")


class TestCloudflareParsing:
    """Odd answers become ``None`` fields or a clear error, never a crash."""

    @pytest.mark.parametrize(
        "result",
        [
            {"id": "h1"},
            {"id": "h1", "status": 7, "ssl": "active", "verification_errors": "no"},
            {"id": "h1", "ssl": {"certificates": "x", "dcv_delegation_records": [None], "validation_errors": [{"code": 1}, "x"]}},
            {"id": "h1", "ssl": {"certificates": [{"expires_on": "soon", "issued_on": 5}], "expires_on": None}},
        ],
    )
    def test_odd_fields_are_left_out(self, result):
        state = parse_state(result)
        assert (state.hostname_id, state.hostname_status) == ("h1", "pending")
        assert (state.ssl_status, state.issuer, state.expires_at, state.delegation_target, state.errors) == (None, None, None, None, ())

    @pytest.mark.parametrize("result", [None, [], {}, {"id": 5}, {"id": ""}])
    def test_an_answer_without_a_hostname_id_is_unavailable(self, result):
        with pytest.raises(ProviderUnavailable):
            parse_state(result)

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("2020-02-06T18:11:23.531995Z", dt.datetime(2020, 2, 6, 18, 11, 23, 531995, tzinfo=dt.UTC)),
            ("2027-02-18T10:02:10Z", dt.datetime(2027, 2, 18, 10, 2, 10, tzinfo=dt.UTC)),
            ("2027-02-18T10:02:10.123456789Z", dt.datetime(2027, 2, 18, 10, 2, 10, 123456, tzinfo=dt.UTC)),
            ("2027-02-18T11:02:10+01:00", dt.datetime(2027, 2, 18, 10, 2, 10, tzinfo=dt.UTC)),
            ("2027-02-18T10:02:10", dt.datetime(2027, 2, 18, 10, 2, 10, tzinfo=dt.UTC)),
            ("next tuesday", None),
            (1700000000, None),
            (None, None),
        ],
    )
    def test_timestamps_are_read_leniently_as_utc(self, text, expected):
        parsed = parse_time(text)
        assert parsed == expected
        assert parsed is None or parsed.tzinfo == dt.UTC

    @pytest.mark.parametrize("body", [b"<html>bad gateway</html>", b"", b"[1, 2]"])
    def test_an_unreadable_body_is_unavailable(self, body):
        with pytest.raises(ProviderUnavailable, match="could not be read"):
            _result(HTTPResponse(HTTPRequest("http://api.invalid/"), 200, headers=HTTPHeaders(), buffer=io.BytesIO(body)))

    def test_success_false_on_a_200_is_an_error(self):
        body = b'{"success": false, "errors": [{"code": 1405, "message": "Quota exceeded."}], "result": null}'
        with pytest.raises(ProviderRejected) as caught:
            _result(HTTPResponse(HTTPRequest("http://api.invalid/"), 200, headers=HTTPHeaders(), buffer=io.BytesIO(body)))
        assert caught.value.provider_code == 1405


class TestCloudflareFailures:
    """Retries within ``retry_seconds``, and sentences for what cannot be retried."""

    @pytest.mark.gen_test
    async def test_two_server_errors_then_success_is_a_success(self, cloudflare):
        cloudflare.fail_next(2, status=500)
        state = await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        assert state.hostname_id == cloudflare.find("shop.customer-a.com")["id"]
        assert cloudflare.statuses == [500, 500, 201]

    @pytest.mark.gen_test
    async def test_server_errors_beyond_the_retry_budget_are_unavailable(self, cloudflare):
        cloudflare.fail_next(5, status=503)
        with pytest.raises(ProviderUnavailable, match="answered HTTP 503"):
            await cloudflare_provider(cloudflare, retry_seconds=1).issue("shop.customer-a.com", trace_id=TRACE)
        assert len(cloudflare.requests) == 2  # the next wait (1 s) would pass the budget

    @pytest.mark.gen_test
    async def test_a_429_with_a_short_retry_after_is_waited_out(self, cloudflare):
        cloudflare.fail_next(1, status=429, retry_after=1)
        started = time.monotonic()
        await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        assert 0.9 <= time.monotonic() - started < 2
        assert cloudflare.statuses == [429, 201]

    @pytest.mark.gen_test
    async def test_a_429_with_a_long_retry_after_is_busy_at_once(self, cloudflare):
        cloudflare.fail_next(1, status=429, retry_after=120)
        started = time.monotonic()
        with pytest.raises(ProviderBusy) as caught:
            await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        assert caught.value.retry_after == 120
        assert time.monotonic() - started < 0.5

    @pytest.mark.gen_test
    async def test_a_long_retry_after_holds_every_later_call(self, cloudflare):
        provider = cloudflare_provider(cloudflare)
        cloudflare.fail_next(1, status=429, retry_after=120)
        with pytest.raises(ProviderBusy):
            await provider.issue("shop.customer-a.com", trace_id=TRACE)
        with pytest.raises(ProviderBusy) as caught:
            await provider.issue("other.customer-a.com", trace_id=TRACE)
        assert 118 <= caught.value.retry_after <= 120
        assert len(cloudflare.requests) == 1

    @pytest.mark.gen_test
    async def test_an_unreachable_api_is_unavailable_within_the_budget(self):
        config = CloudflareConfig(api_base="http://127.0.0.1:9/client/v4", zone_id=ZONE_ID, api_token=TOKEN, retry_seconds=1)
        started = time.monotonic()
        with pytest.raises(ProviderUnavailable, match="could not be reached"):
            await CloudflareProvider(config).issue("shop.customer-a.com", trace_id=TRACE)
        assert time.monotonic() - started < 1.5

    @pytest.mark.gen_test
    async def test_consecutive_calls_share_one_kept_connection(self, cloudflare):
        provider, before = cloudflare_provider(cloudflare), cloudflare.connections  # the fake outlives a test
        state = await provider.issue("shop.customer-a.com", trace_id=TRACE)
        for _ in range(3):
            await provider.refresh(state.hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert (len(cloudflare.requests), cloudflare.connections - before) == (4, 1)

    @pytest.mark.gen_test
    async def test_a_kept_connection_the_api_closed_is_replaced_and_the_call_still_answers(self, cloudflare):
        provider, before = cloudflare_provider(cloudflare), cloudflare.connections
        state = await provider.issue("shop.customer-a.com", trace_id=TRACE)
        cloudflare.drop_idle_connections()
        refreshed = await provider.refresh(state.hostname_id, apex="shop.customer-a.com", trace_id=TRACE)
        assert refreshed.hostname_id == state.hostname_id and cloudflare.connections - before == 2

    @pytest.mark.gen_test
    async def test_a_slow_api_is_unavailable_after_the_timeout(self, cloudflare):
        cloudflare.latency = 0.5
        with pytest.raises(ProviderUnavailable, match="did not answer in time"):
            await cloudflare_provider(cloudflare, timeout_seconds=0.1, retry_seconds=0).issue("shop.customer-a.com", trace_id=TRACE)

    @pytest.mark.gen_test
    async def test_a_refused_token_is_unavailable_and_names_the_setting(self, cloudflare):
        with pytest.raises(ProviderUnavailable) as caught:
            await cloudflare_provider(cloudflare, token="revoked").issue("shop.customer-a.com", trace_id=TRACE)
        assert not isinstance(caught.value, ProviderRejected)
        assert "provider.cloudflare.api_token" in caught.value.message
        assert "Cloudflare error 10000" in caught.value.message
        assert len(cloudflare.requests) == 1

    @pytest.mark.gen_test
    async def test_a_wrong_zone_is_unavailable_and_names_the_setting(self, cloudflare):
        config = CloudflareConfig(api_base=cloudflare.api_base, zone_id="f" * 32, api_token=TOKEN)
        with pytest.raises(ProviderUnavailable, match="provider.cloudflare.zone_id"):
            await CloudflareProvider(config).issue("shop.customer-a.com", trace_id=TRACE)

    @pytest.mark.gen_test
    async def test_each_call_is_logged_once_with_its_trace_and_never_the_token(self, cloudflare, caplog):
        caplog.set_level(logging.INFO, logger="core.edge.cloudflare")
        await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        lines = [r.getMessage() for r in caplog.records if r.name == "core.edge.cloudflare"]
        assert len(lines) == 1
        assert re.fullmatch(rf"cloudflare POST /custom_hostnames -> 201 in \d+ ms \(trace {TRACE}\)", lines[0])
        assert TOKEN not in caplog.text


class TestCloudflarePacing:
    """One request budget per provider, and the provider's own word on what is left."""

    @pytest.mark.gen_test
    async def test_concurrent_issues_beyond_the_budget_are_busy_without_reaching_the_api(self, cloudflare):
        cloudflare.latency = 0.05
        provider = cloudflare_provider(cloudflare, requests_per_window=5, window_seconds=60)
        outcomes = await asyncio.gather(
            *(provider.issue(f"shop{i}.customer-a.com", trace_id=TRACE) for i in range(8)), return_exceptions=True
        )
        busy = [o for o in outcomes if isinstance(o, ProviderBusy)]
        assert len(busy) == 3 and all(58 <= b.retry_after <= 60 for b in busy)
        assert len(cloudflare.requests) == 5
        assert 429 not in cloudflare.statuses

    @pytest.mark.gen_test
    async def test_a_spent_provider_budget_is_busy_without_a_request(self, cloudflare):
        cloudflare.quota, cloudflare.window = 1, 30
        provider = cloudflare_provider(cloudflare)
        await provider.issue("shop.customer-a.com", trace_id=TRACE)
        with pytest.raises(ProviderBusy) as caught:
            await provider.issue("other.customer-a.com", trace_id=TRACE)
        assert 29 <= caught.value.retry_after <= 30
        assert len(cloudflare.requests) == 1


class TestFakeCloudflare:
    """The fake speaks the documented API where the adapter does not go (so other tests can rely on it)."""

    async def call(self, fake: FakeCloudflare, method: str, path: str, body: object = None, zone: str = ZONE_ID):
        client = SimpleAsyncHTTPClient(force_instance=True)
        try:
            response = await client.fetch(
                f"{fake.api_base}/zones/{zone}{path}", method=method, raise_error=False,
                headers={"Authorization": f"Bearer {TOKEN}"}, body=None if body is None else json.dumps(body),
            )
        finally:
            client.close()
        return response.code, json.loads(response.body), response.headers

    @pytest.mark.gen_test
    async def test_a_patch_with_ssl_lacking_type_is_1440(self, cloudflare):
        await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        hostname_id = cloudflare.find("shop.customer-a.com")["id"]
        code, body, _ = await self.call(cloudflare, "PATCH", f"/custom_hostnames/{hostname_id}", {"ssl": {"method": "txt"}})
        assert (code, body["success"], body["errors"][0]["code"]) == (400, False, 1440)

    @pytest.mark.gen_test
    async def test_a_delete_answers_a_bare_id(self, cloudflare):
        await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        hostname_id = cloudflare.find("shop.customer-a.com")["id"]
        assert await self.call(cloudflare, "DELETE", f"/custom_hostnames/{hostname_id}") == (200, {"id": hostname_id}, ANY)
        assert cloudflare.hostnames == {}

    @pytest.mark.gen_test
    async def test_the_list_is_an_array_with_result_info(self, cloudflare):
        await cloudflare_provider(cloudflare).issue("shop.customer-a.com", trace_id=TRACE)
        code, body, _ = await self.call(cloudflare, "GET", "/custom_hostnames?hostname=other.customer-a.com")
        assert (code, body["result"], body["result_info"]["total_count"]) == (200, [], 0)

    @pytest.mark.gen_test
    async def test_every_answer_states_the_rate_limit(self, cloudflare):
        cloudflare.quota, cloudflare.window = 2, 300
        answers = [await self.call(cloudflare, "GET", "/dcv_delegation/uuid") for _ in range(3)]
        assert [a[2]["Ratelimit"].split(";t=")[0] for a in answers] == ['"default";r=1', '"default";r=0', '"default";r=0']
        assert answers[0][2]["Ratelimit-Policy"] == '"default";q=2;w=300'
        assert (answers[2][0], answers[2][1]["errors"][0]["code"], answers[2][2]["Retry-After"]) == (429, 971, "300")

    @pytest.mark.gen_test
    async def test_a_wrong_zone_is_a_404(self, cloudflare):
        code, body, _ = await self.call(cloudflare, "GET", "/custom_hostnames", zone="f" * 32)
        assert (code, body["success"]) == (404, False)

    @pytest.mark.gen_test
    async def test_a_request_still_in_flight_does_not_land_in_the_account_a_reset_made(self, cloudflare):
        cloudflare.latency = 0.3
        with pytest.raises(ProviderUnavailable):  # its client gives up; the fake still sleeps on it
            await cloudflare_provider(cloudflare, timeout_seconds=0.05, retry_seconds=0).issue("shop.customer-a.com", trace_id=TRACE)
        cloudflare.reset()
        await asyncio.sleep(0.6)  # past the latency: the leftover create would have landed by now
        assert cloudflare.hostnames == {}
