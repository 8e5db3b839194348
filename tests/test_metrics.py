"""GET /metrics, scraped as Prometheus would: the bearer on the main port, the separate address,
and the figures it reports after real requests, lookups, provider calls and deliveries."""

from __future__ import annotations

import urllib.request

import attrs
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tornado.httpclient import HTTPRequest

from core.config import CloudflareConfig, MetricsConfig, NetworkConfig, ProviderConfig, WebhooksConfig
from core.webhooks.worker import WebhookWorker
from core.wire import parse_timestamp
from tests.helpers import active_domain, mark_verified, stored_deliveries
from tests.servers.cloudflare import TOKEN as CLOUDFLARE_TOKEN
from tests.servers.cloudflare import ZONE_ID, FakeCloudflare
from tests.servers.https import HttpsReceiver
from tests.servers.service import ServiceProcess, free_port

TOKEN = "scrape-me-3f9a"


@pytest.fixture
def config(config):
    return attrs.evolve(config, metrics=MetricsConfig(bearer_token=TOKEN))


async def scrape(http_client, base_url, token=TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return await http_client.fetch(HTTPRequest(f"{base_url}/metrics", headers=headers), raise_error=False)


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample as {(name, sorted labels): value}."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def figures(http_client, base_url) -> dict[tuple[str, tuple], float]:
    response = await scrape(http_client, base_url)
    assert response.code == 200
    return samples(response.body.decode())


class TestAccess:
    @pytest.mark.gen_test
    async def test_the_bearer_opens_it(self, http_client, base_url):
        response = await scrape(http_client, base_url)
        assert response.code == 200 and response.headers["Content-Type"].startswith("text/plain; version=0.0.4")

    @pytest.mark.gen_test
    async def test_without_or_with_a_wrong_bearer_it_is_401(self, http_client, base_url):
        for token in (None, "wrong"):
            response = await scrape(http_client, base_url, token)
            assert response.code == 401 and response.headers["WWW-Authenticate"].startswith("Bearer")

    @pytest.mark.gen_test
    async def test_it_is_off_the_api_rate_limits(self, http_client, base_url):
        response = await scrape(http_client, base_url)
        assert "RateLimit" not in response.headers


class TestOffByDefault:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, metrics=MetricsConfig())

    @pytest.mark.gen_test
    async def test_without_a_token_or_address_it_is_not_there(self, http_client, base_url):
        assert (await scrape(http_client, base_url, token="anything")).code == 404


class TestFigures:
    @pytest.mark.gen_test
    async def test_requests_are_counted_by_route_and_status_with_latency(self, api, world, http_client, base_url):
        owner = world.owner()
        await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)
        await api.get("/v1/domains/not-a-uuid", token=owner.token)
        found = await figures(http_client, base_url)
        assert found[("cps_http_requests_total", (("method", "POST"), ("route", "/v1/domains"), ("status", "201")))] == 1
        assert found[("cps_http_requests_total", (("method", "GET"), ("route", "/v1/domains/:param"), ("status", "404")))] == 1
        assert found[("cps_http_request_duration_seconds_count", (("method", "POST"), ("route", "/v1/domains")))] == 1

    def test_latency_falls_in_the_first_bucket_at_or_above_it_and_buckets_are_cumulative(self, services):
        for seconds in (0.001, 0.003, 20.0):
            services.metrics.count_request("/x", "GET", 200, seconds)
        found = samples(services.metrics.render().decode())
        bucket = lambda le: found[("cps_http_request_duration_seconds_bucket", (("le", le), ("method", "GET"), ("route", "/x")))]
        assert (bucket("0.001"), bucket("0.0025"), bucket("0.005"), bucket("10.0"), bucket("+Inf")) == (1, 1, 2, 2, 3)
        assert found[("cps_http_request_duration_seconds_sum", (("method", "GET"), ("route", "/x")))] == pytest.approx(20.004)
        assert found[("cps_http_requests_total", (("method", "GET"), ("route", "/x"), ("status", "200")))] == 3

    @pytest.mark.gen_test
    async def test_unknown_methods_share_one_series(self, http_client, base_url):
        for method in ("XYZ1", "XYZ2"):
            await http_client.fetch(f"{base_url}/v1/domains", method=method, raise_error=False, allow_nonstandard_methods=True)
        found = await figures(http_client, base_url)
        methods = {dict(labels).get("method") for name, labels in found if name == "cps_http_requests_total"}
        assert "OTHER" in methods and not methods & {"XYZ1", "XYZ2"}

    @pytest.mark.gen_test
    async def test_counters_carry_no_created_series(self, api, world, http_client, base_url):
        owner = world.owner()
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)
        text = (await scrape(http_client, base_url)).body.decode()
        assert "cps_dns_lookups_total{" in text and "_created" not in text

    @pytest.mark.gen_test
    async def test_dns_lookups_are_counted_by_type_and_outcome(self, api, world, http_client, base_url):
        owner = world.owner()
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)
        found = await figures(http_client, base_url)
        assert found[("cps_dns_lookups_total", (("outcome", "nxdomain"), ("type", "CNAME")))] >= 1
        assert found[("cps_dns_lookups_total", (("outcome", "nxdomain"), ("type", "TXT")))] >= 1

    @pytest.mark.gen_test
    async def test_provider_calls_certificates_and_the_soonest_expiry(self, api, world, services, clock, http_client, base_url):
        _, cert = await active_domain(api, world, services, clock)
        found = await figures(http_client, base_url)
        assert found[("cps_provider_calls_total", (("operation", "issue"), ("outcome", "ok")))] == 1
        assert found[("cps_provider_calls_total", (("operation", "refresh"), ("outcome", "ok")))] >= 1
        assert found[("cps_certificates", (("status", "active"),))] == 1
        not_after = found[("cps_certificate_soonest_not_after_timestamp_seconds", ())]
        assert abs(not_after - clock.now().timestamp() - 90 * 86400) < 86400, cert["notAfter"]

    @pytest.mark.gen_test
    async def test_the_webhook_queue_depth_and_its_oldest_age(self, api, world, services, clock, http_client, base_url):
        stored_deliveries(services, world.owner().workspace, ("pending", 0), ("pending", 0))
        clock.advance(90)
        found = await figures(http_client, base_url)
        assert found[("cps_webhook_queue_depth", ())] == 2
        assert found[("cps_webhook_queue_oldest_age_seconds", ())] == 90


class TestWebhookOutcomes:
    """Attempts, and deliveries by how they ended, after real deliveries to an HTTPS receiver on loopback."""

    @pytest.fixture(scope="class")
    def receiver(self):
        with HttpsReceiver() as server:
            yield server

    @pytest.fixture
    def config(self, config, receiver, dns):
        receiver.reset()
        dns.publish(receiver.hostname, "A", "127.0.0.1")
        return attrs.evolve(
            config, network=NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=receiver.ca_pem_path),
            webhooks=WebhooksConfig(max_attempts=2, request_timeout_seconds=2),
        )

    async def one_event(self, api, world, services, receiver):
        """An endpoint on the receiver, and one event for it (a certificate requested)."""
        owner = world.owner()
        assert (await api.post("/v1/webhooks", {"url": receiver.url()}, token=owner.token)).status == 201
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        mark_verified(services, d)
        await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)

    @pytest.mark.gen_test
    async def test_a_delivery_accepted_at_once_is_one_attempt_and_one_delivered(self, api, world, services, receiver, http_client, base_url):
        await self.one_event(api, world, services, receiver)
        await WebhookWorker(services).tick()
        assert len(receiver.received) == 1
        found = await figures(http_client, base_url)
        assert found[("cps_webhook_attempts_total", (("outcome", "delivered"),))] == 1
        assert found[("cps_webhook_deliveries_total", (("outcome", "delivered"),))] == 1
        assert ("cps_webhook_deliveries_total", (("outcome", "failed"),)) not in found

    @pytest.mark.gen_test
    async def test_a_delivery_given_up_counts_each_failed_attempt_and_one_failed_delivery(self, api, world, services, clock, receiver, http_client, base_url):
        receiver.respond_with(500)
        await self.one_event(api, world, services, receiver)
        worker = WebhookWorker(services)
        await worker.tick()
        between = await figures(http_client, base_url)
        assert ("cps_webhook_deliveries_total", (("outcome", "failed"),)) not in between  # still to be retried
        clock.advance(3600)
        await worker.tick()
        assert len(receiver.received) == 2  # [webhooks] max_attempts
        found = await figures(http_client, base_url)
        assert found[("cps_webhook_attempts_total", (("outcome", "failed"),))] == 2
        assert found[("cps_webhook_deliveries_total", (("outcome", "failed"),))] == 1
        assert found[("cps_webhook_queue_depth", ())] == 0


class TestEdgeProviderFigures:
    """Against the fake Cloudflare API on loopback, which can refuse and renew."""

    @pytest.fixture(scope="class")
    def fake(self):
        server = FakeCloudflare().start()
        yield server
        server.stop()

    @pytest.fixture
    def config(self, config, fake):
        fake.reset()
        cloudflare = CloudflareConfig(api_base=fake.api_base, zone_id=ZONE_ID, api_token=CLOUDFLARE_TOKEN,
                                      timeout_seconds=1, retry_seconds=1)
        return attrs.evolve(config, provider=ProviderConfig(kind="cloudflare", cloudflare=cloudflare))

    async def verified_domain(self, api, world, services):
        owner = world.owner()
        d = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
        mark_verified(services, d)
        return owner, d

    @pytest.mark.gen_test
    async def test_a_provider_that_is_down_is_counted_unavailable(self, api, world, services, fake, http_client, base_url):
        owner, d = await self.verified_domain(api, world, services)
        fake.fail_next(1, status=503, retry_after=30)  # longer than retry_seconds: no retry
        await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)
        found = await figures(http_client, base_url)
        assert found[("cps_provider_calls_total", (("operation", "issue"), ("outcome", "unavailable")))] == 1
        assert ("cps_provider_calls_total", (("operation", "issue"), ("outcome", "ok"))) not in found

    @pytest.mark.gen_test
    async def test_a_renewing_certificate_counts_for_the_soonest_expiry(self, api, world, services, fake, http_client, base_url):
        owner, d = await self.verified_domain(api, world, services)
        fake.auto_activate = True
        summary = (await api.post(f"/v1/domains/{d['id']}/certificates/issue", {}, token=owner.token)).body
        fake.set_state("shop.example.com", ssl_status="pending_deployment")  # the provider renews it
        await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        cert = (await api.get(f"/v1/certificates/{summary['certificateId']}", token=owner.token)).body
        found = await figures(http_client, base_url)
        assert found[("cps_certificates", (("status", "renewing"),))] == 1
        soonest = found[("cps_certificate_soonest_not_after_timestamp_seconds", ())]
        assert soonest == parse_timestamp(cert["notAfter"]).timestamp()


class TestSeparateAddress:
    def test_a_private_address_serves_it_without_a_token(self, tmp_path, dns):
        port = free_port()
        service = ServiceProcess(tmp_path, dns_address=dns.address, extra=f'[metrics]\nlisten = "127.0.0.1:{port}"\n').start()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                text = response.read().decode()
            assert "cps_webhook_queue_depth 0.0" in text
            main = urllib.request.Request(service.base_url + "/metrics")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(main, timeout=5)
            refused.value.close()
            assert refused.value.code == 404  # not on the main port without a bearer token
        finally:
            service.stop()
