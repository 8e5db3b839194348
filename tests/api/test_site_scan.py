"""POST /v1/site-scan/https against real TLS and TCP servers on 127.0.0.1 (tests/servers/tls.py).

Scanned names are published in the test DNS server as A 127.0.0.1, which ``[network]
allow_private_ranges`` lets through; ``[site_scan] port`` points at the server under test and the
trusted CAs (a generic one and one named "Sandbox CA", like the sandbox provider's issuer) are the
``[network] ca_bundle``.
"""

from __future__ import annotations

import datetime as dt

import attrs
import pytest
import trustme

from core.config import NetworkConfig, RateLimitsConfig, SiteScanConfig
from core.wire import format_timestamp
from tests.helpers import active_domain
from tests.servers.tls import TcpServer, TlsServer, closed_port, self_signed

SCAN = "/v1/site-scan/https"
UTC = dt.UTC
EXPIRED_ON = dt.datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def cas():
    return {"trusted": trustme.CA(), "sandbox": trustme.CA(organization_name="Sandbox CA"), "unknown": trustme.CA()}


@pytest.fixture(scope="module")
def ca_bundle(cas, tmp_path_factory):
    path = tmp_path_factory.mktemp("scan-ca") / "bundle.pem"
    path.write_bytes(cas["trusted"].cert_pem.bytes() + cas["sandbox"].cert_pem.bytes())
    return str(path)


@pytest.fixture(scope="module")
def tls():
    with TlsServer() as server:
        yield server


@pytest.fixture(scope="module")
def plain():
    with TcpServer() as server:
        yield server


@pytest.fixture(scope="module")
def silent():
    with TcpServer(answer=None) as server:
        yield server


@pytest.fixture
def scan_port(tls):
    return tls.port


@pytest.fixture
def config(config, scan_port, ca_bundle):
    return attrs.evolve(
        config,
        site_scan=SiteScanConfig(port=scan_port, timeout_seconds=1),
        network=NetworkConfig(allow_private_ranges=["127.0.0.0/8"], ca_bundle=ca_bundle),
    )


@pytest.fixture
def site(tls, dns):
    """Serve a certificate for a name and publish the name as A 127.0.0.1."""

    def publish(hostname, leaf=None):
        if leaf is not None:
            tls.serve(hostname, leaf)
        dns.publish(hostname, "A", "127.0.0.1")
        return hostname

    return publish


async def scan(api, target, **kw):
    return await api.post(SCAN, {"urlOrDomain": target}, **kw)


class TestSecure:
    """A trusted, current certificate for the name."""

    @pytest.mark.gen_test
    async def test_a_valid_certificate_is_secure_with_its_expiry(self, api, site, cas):
        leaf = cas["trusted"].issue_cert("valid.scan-test.com", not_after=dt.datetime(2027, 5, 1, 12, tzinfo=UTC))
        host = site("valid.scan-test.com", leaf)
        r = await scan(api, host)
        assert r.status == 200
        assert r.body == {
            "input": host, "normalizedHost": host, "status": "secure",
            "details": {
                "httpsReachable": True, "certificateValid": True, "chainOk": True,
                "certificateExpiresAt": "2027-05-01T12:00:00.000Z",
            },
        }

    @pytest.mark.gen_test
    async def test_no_application_data_is_sent(self, api, site, cas, tls):
        host = site("quiet.scan-test.com", cas["trusted"].issue_cert("quiet.scan-test.com"))
        before = len([c for c in tls.connections if c[0] == host])  # the module's server saw the other backend's run
        assert (await scan(api, host)).body["status"] == "secure"
        assert (await tls.connections_to(host, before + 1))[before:] == [(host, 0)]

    @pytest.mark.gen_test
    async def test_a_url_is_reduced_to_its_host_and_the_port_ignored(self, api, site, cas):
        site("shop.example.com", cas["trusted"].issue_cert("shop.example.com"))
        r = await scan(api, "https://Shop.Example.com:8443/path?x")
        assert (r.body["input"], r.body["normalizedHost"]) == ("https://Shop.Example.com:8443/path?x", "shop.example.com")
        assert r.body["status"] == "secure"


class TestCertificateProblems:
    """A certificate that does not verify is not_secure, with the reason spelled out."""

    @pytest.mark.gen_test
    async def test_an_expired_certificate_names_the_date(self, api, site, cas):
        leaf = cas["trusted"].issue_cert(
            "expired.scan-test.com", not_before=dt.datetime(2025, 1, 1, tzinfo=UTC), not_after=EXPIRED_ON
        )
        r = await scan(api, site("expired.scan-test.com", leaf))
        assert r.body["status"] == "not_secure"
        assert r.body["details"] == {
            "httpsReachable": True, "certificateValid": False, "chainOk": True,
            "certificateExpiresAt": format_timestamp(EXPIRED_ON),
            "reason": "The certificate expired on 2026-01-01.",
        }

    @pytest.mark.gen_test
    async def test_a_certificate_for_another_name_names_both(self, api, site, cas):
        r = await scan(api, site("wrong.scan-test.com", cas["trusted"].issue_cert("other.example.net")))
        assert (r.body["status"], r.body["details"]["chainOk"]) == ("not_secure", True)
        assert r.body["details"]["reason"] == "The certificate is for other.example.net, not wrong.scan-test.com."

    @pytest.mark.gen_test
    async def test_an_unknown_ca_breaks_the_chain(self, api, site, cas):
        r = await scan(api, site("unknown-ca.scan-test.com", cas["unknown"].issue_cert("unknown-ca.scan-test.com")))
        details = r.body["details"]
        assert (r.body["status"], details["chainOk"], details["certificateValid"], details["httpsReachable"]) == (
            "not_secure", False, False, True)
        assert details["reason"] == "The certificate is not signed by a trusted authority (self-signed or an unknown CA)."

    @pytest.mark.gen_test
    async def test_a_self_signed_certificate_breaks_the_chain(self, api, site):
        r = await scan(api, site("self.scan-test.com", self_signed("self.scan-test.com")))
        assert (r.body["status"], r.body["details"]["chainOk"]) == ("not_secure", False)
        assert "self-signed" in r.body["details"]["reason"]


class TestNoTls:
    """A server that answers in plain HTTP does not speak TLS."""

    @pytest.fixture
    def scan_port(self, plain):
        return plain.port

    @pytest.mark.gen_test
    async def test_plain_http_is_not_secure(self, api, site, plain):
        r = await scan(api, site("plain.scan-test.com"))
        assert r.body["status"] == "not_secure"
        assert r.body["details"] == {
            "httpsReachable": False, "certificateValid": False,
            "reason": f"The server on port {plain.port} does not speak TLS.",
        }


class TestSilentServer:
    """A server that never answers runs into the scan's timeout."""

    @pytest.fixture
    def scan_port(self, silent):
        return silent.port

    @pytest.mark.gen_test
    async def test_no_answer_is_not_secure(self, api, site):
        r = await scan(api, site("silent.scan-test.com"))
        assert (r.body["status"], r.body["details"]["reason"]) == ("not_secure", "The server did not answer within 1 s.")


class TestClosedPort:
    """Nothing listening on the port."""

    @pytest.fixture
    def scan_port(self):
        return closed_port()

    @pytest.mark.gen_test
    async def test_a_refused_connection_is_not_secure(self, api, site, scan_port):
        r = await scan(api, site("closed.scan-test.com"))
        assert r.body["status"] == "not_secure"
        assert r.body["details"]["reason"] == f"Nothing accepts connections on port {scan_port}."
        assert r.body["details"]["httpsReachable"] is False


class TestRefusedTargets:
    """Addresses typed in, internal names and malformed destinations are a 400 naming why; nothing is dialled."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize("target", ["127.0.0.1", "https://127.0.0.1/", "https://[::1]:443/", "localhost", "http://localhost/"])
    async def test_ip_literals_and_localhost_are_refused(self, api, target):
        r = await scan(api, target)
        assert (r.status, r.code) == (400, "validation_error")
        assert r.body["details"]["fieldErrors"]["urlOrDomain"]

    @pytest.mark.gen_test
    async def test_other_schemes_are_refused(self, api):
        r = await scan(api, "ftp://files.example.com/")
        assert r.body["details"]["fieldErrors"]["urlOrDomain"] == [
            "Only http:// and https:// URLs (or a bare hostname) can be scanned."]

    @pytest.mark.gen_test
    async def test_the_field_is_required(self, api):
        r = await api.post(SCAN, {})
        assert (r.status, r.body["details"]["fieldErrors"]) == (400, {"urlOrDomain": ["Required"]})


class TestDnsFailure:
    """A name without a public address cannot be scanned: status error, in the same words whether
    it does not exist, has no address records or resolves only to addresses the service may not
    reach, so that the scan cannot tell an internal name from a missing one."""

    @staticmethod
    def expected(host):
        return {
            "httpsReachable": False, "certificateValid": False,
            "reason": f"{host} has no public address: it does not exist in DNS, has no address records, or resolves "
                      "only to addresses the service may not reach.",
        }

    @pytest.mark.gen_test
    async def test_nxdomain_is_an_error(self, api):
        r = await scan(api, "missing.scan-test.com")
        assert (r.status, r.body["status"], r.body["details"]) == (200, "error", self.expected("missing.scan-test.com"))

    @pytest.mark.gen_test
    async def test_a_name_without_address_records_is_the_same_error(self, api, dns):
        dns.publish("mail-only.scan-test.com", "TXT", "v=spf1 -all")
        r = await scan(api, "mail-only.scan-test.com")
        assert (r.status, r.body["status"], r.body["details"]) == (200, "error", self.expected("mail-only.scan-test.com"))

    @pytest.mark.gen_test
    async def test_a_name_resolving_only_to_private_addresses_is_the_same_error(self, api, dns):
        dns.publish("internal.scan-test.com", "A", "10.0.0.1")
        r = await scan(api, "internal.scan-test.com")
        assert (r.status, r.body["status"], r.body["details"]) == (200, "error", self.expected("internal.scan-test.com"))


class TestCredentials:
    """The bearer is optional, but one that is sent must be valid."""

    @pytest.mark.gen_test
    async def test_an_invalid_bearer_is_401(self, api, site, cas):
        host = site("valid.scan-test.com", cas["trusted"].issue_cert("valid.scan-test.com"))
        r = await scan(api, host, token="ac_live_notarealkey")
        assert r.status == 401

    @pytest.mark.gen_test
    async def test_an_api_key_without_scopes_may_scan(self, api, site, cas, world):
        host = site("valid.scan-test.com", cas["trusted"].issue_cert("valid.scan-test.com"))
        key = world.key(world.owner().workspace, [])
        assert (await scan(api, host, token=key)).body["status"] == "secure"

    @pytest.mark.gen_test
    async def test_a_workspace_header_that_is_not_a_uuid_is_404_without_a_bearer_too(self, api, world):
        """Checked the same way with or without credentials (issue 37, item 12); nothing is dialled."""
        for token in (None, world.key(world.owner().workspace, [])):
            r = await scan(api, "valid.scan-test.com", token=token, headers={"X-Workspace-Id": "abc"})
            assert (r.status, r.code) == (404, "not_found"), token

    @pytest.mark.gen_test
    async def test_a_session_of_someone_in_no_workspace_is_403(self, api, world):
        r = await scan(api, "valid.scan-test.com", token=world.session_token("nobody@example.com"))
        assert (r.status, r.code) == (403, "forbidden")


class TestRateLimit:
    """The scan counts against its own bucket."""

    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, rate_limits=RateLimitsConfig(site_scan=2))

    @pytest.mark.gen_test
    async def test_the_site_scan_bucket_applies(self, api):
        r = await scan(api, "missing.scan-test.com")
        assert '"site_scan";q=2;w=900' in r.headers["RateLimit-Policy"]
        await scan(api, "missing.scan-test.com")
        r = await scan(api, "missing.scan-test.com")
        assert (r.status, r.code) == (429, "rate_limited")


def not_after_of(cert):
    return dt.datetime.fromisoformat(cert["notAfter"])


class TestProviderMatch:
    """Beyond the spec: the caller's own domain is compared with the provider's certificate."""

    @pytest.mark.gen_test
    async def test_the_diagnosis_reports_a_served_certificate_that_is_not_the_providers(self, api, world, services, clock, site, cas):
        owner, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["trusted"].issue_cert("shop.example.com"))
        report = (await api.get(f"/v1/domains/{cert['domainId']}/diagnosis", token=owner.token)).body
        [finding] = [f for f in report["findings"] if f["code"] == "served_mismatch"]
        assert finding["severity"] == "warning" and "shop.example.com serves a certificate" in finding["message"]

    @pytest.mark.gen_test
    async def test_another_certificate_does_not_match(self, api, world, services, clock, site, cas):
        owner, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["sandbox"].issue_cert("shop.example.com"))
        details = (await scan(api, "shop.example.com", token=owner.token)).body["details"]
        assert (details["servedMatchesProvider"], details["providerNotAfter"]) == (False, cert["notAfter"])

    @pytest.mark.gen_test
    async def test_the_providers_certificate_matches(self, api, world, services, clock, site, cas):
        owner, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["sandbox"].issue_cert("shop.example.com", not_after=not_after_of(cert)))
        details = (await scan(api, "shop.example.com", token=owner.token)).body["details"]
        assert (details["servedMatchesProvider"], details["certificateExpiresAt"]) == (True, cert["notAfter"])

    @pytest.mark.gen_test
    async def test_the_same_expiry_from_another_issuer_does_not_match(self, api, world, services, clock, site, cas):
        owner, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["trusted"].issue_cert("shop.example.com", not_after=not_after_of(cert)))
        details = (await scan(api, "shop.example.com", token=owner.token)).body["details"]
        assert details["servedMatchesProvider"] is False

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_gets_no_comparison(self, api, world, services, clock, site, cas):
        _, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["sandbox"].issue_cert("shop.example.com", not_after=not_after_of(cert)))
        details = (await scan(api, "shop.example.com", token=world.owner().token)).body["details"]
        assert "servedMatchesProvider" not in details and "providerNotAfter" not in details

    @pytest.mark.gen_test
    async def test_a_key_without_certificates_read_gets_no_comparison(self, api, world, services, clock, site, cas):
        owner, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["sandbox"].issue_cert("shop.example.com", not_after=not_after_of(cert)))
        for scopes in ([], ["domains:read"]):
            details = (await scan(api, "shop.example.com", token=world.key(owner.workspace, scopes))).body["details"]
            assert "servedMatchesProvider" not in details and "providerNotAfter" not in details

    @pytest.mark.gen_test
    async def test_a_key_with_certificates_read_gets_the_comparison(self, api, world, services, clock, site, cas):
        owner, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["sandbox"].issue_cert("shop.example.com", not_after=not_after_of(cert)))
        details = (await scan(api, "shop.example.com", token=world.key(owner.workspace, ["certificates:read"]))).body["details"]
        assert (details["servedMatchesProvider"], details["providerNotAfter"]) == (True, cert["notAfter"])

    @pytest.mark.gen_test
    async def test_anonymous_callers_get_no_comparison(self, api, world, services, clock, site, cas):
        _, cert = await active_domain(api, world, services, clock)
        site("shop.example.com", cas["sandbox"].issue_cert("shop.example.com", not_after=not_after_of(cert)))
        details = (await scan(api, "shop.example.com")).body["details"]
        assert "servedMatchesProvider" not in details and "providerNotAfter" not in details
