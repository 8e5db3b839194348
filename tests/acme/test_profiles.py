"""Issue 50, item 1: ACME profiles (draft-ietf-acme-profiles). A new order names the profile
configured for the CA when the CA's directory offers it (``meta.profiles``); the certificate keeps
the profile its order names and the Certificate shows it. A CA that does not offer it issues its
default ("preferred"), or, with ``profile_required``, is not ordered from, in words naming the CA
and the profiles it offers. The CA offering profiles is Pebble behind its front, which lists them
(tests/servers/pebble.py ``Directory``: Debian's Pebble 2.4 has none); the one without is the
front listing none."""

from __future__ import annotations

import pytest

from tests.acme.conftest import acme_config, needs_lab
from tests.acme.test_issuing import add, served, verify
from tests.servers.pebble import Directory, Pebble

pytestmark = needs_lab
OFFERED = {"classic": "The same profile you're accustomed to", "shortlived": "A short-lived (six days) profile"}


@pytest.fixture
def offering(acme_lab):
    """The CA's directory lists ``OFFERED`` (the front forgets them after the test)."""
    acme_lab.directory.profiles = OFFERED
    return acme_lab.directory


async def issued(api, world, acme_lab, apex):
    caller, created = await add(api, world, apex)
    acme_lab.publish_records(created)
    return caller, await verify(api, caller, created)


class TestAnOfferedProfile:
    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab, profile="shortlived")

    @pytest.mark.gen_test
    async def test_the_new_order_names_the_profile(self, api, world, acme_lab, offering):
        await issued(api, world, acme_lab, "named.lab.com")
        assert offering.orders[-1]["profile"] == "shortlived"

    @pytest.mark.gen_test
    async def test_the_certificate_keeps_the_profile_its_order_names(self, api, world, acme_lab, services, offering):
        _, result = await issued(api, world, acme_lab, "kept.lab.com")
        assert result["certificate"]["status"] == "active"
        assert served(services, "kept.lab.com").profile == "shortlived"

    @pytest.mark.gen_test
    async def test_the_certificate_api_shows_the_profile(self, api, world, acme_lab, services, offering):
        caller, _ = await issued(api, world, acme_lab, "shown.lab.com")
        [row] = services.store.sql.execute(
            "SELECT id FROM certificates WHERE apex = 'shown.lab.com' AND status = 'active'").fetchall()
        r = await api.get(f"/v1/certificates/{row[0]}", token=caller.token)
        assert r.status == 200 and r.body["profile"] == "shortlived"


class TestNoProfileConfigured:
    @pytest.mark.gen_test
    async def test_the_new_order_names_none_and_the_certificate_none(self, api, world, acme_lab, services, offering):
        await issued(api, world, acme_lab, "default.lab.com")
        assert "profile" not in offering.orders[-1]
        assert served(services, "default.lab.com").profile is None


class TestAProfileNotOffered:
    """Pebble as Debian ships it: its directory lists no profiles."""

    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab, profile="shortlived")

    @pytest.mark.gen_test
    async def test_preferred_orders_the_cas_default(self, api, world, acme_lab, services):
        _, result = await issued(api, world, acme_lab, "preferred.lab.com")
        assert result["certificate"]["status"] == "active"
        assert "profile" not in acme_lab.directory.orders[-1]
        assert served(services, "preferred.lab.com").profile is None



class TestARequiredProfileNotOffered:
    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab, profile="shortlived", profile_required=True)

    @pytest.mark.gen_test
    async def test_no_order_goes_and_the_message_names_the_ca(self, api, world, acme_lab):
        before = len(acme_lab.directory.orders)
        _, result = await issued(api, world, acme_lab, "required.lab.com")
        assert result["certificate"]["status"] == "error"
        assert (f'The certificate authority {acme_lab.directory.directory_url} does not offer the profile "shortlived" '
                "(its directory lists no profiles)") in result["message"]
        assert len(acme_lab.directory.orders) == before

    @pytest.mark.gen_test
    async def test_the_message_names_the_profiles_the_ca_offers(self, api, world, acme_lab, offering, config):
        offering.profiles = {"classic": "The default", "tlsserver": "TLS server only"}
        _, result = await issued(api, world, acme_lab, "offers.lab.com")
        assert 'does not offer the profile "shortlived" (it offers "classic", "tlsserver")' in result["message"]


class TestEachFallbackCa:
    @pytest.fixture
    def second(self, acme_lab, tmp_path):
        """Another CA offering profiles, trusted through the same bundle as the first."""
        pebble = Pebble(tmp_path / "second", dns_server=acme_lab.lab.resolver, ca=acme_lab.pebble.ca).start()
        directory = Directory(pebble, profiles={"tlsserver": "TLS server certificates"}).start()
        yield directory
        directory.stop()
        pebble.stop()

    @pytest.fixture
    def config(self, config, acme_lab, second):
        return acme_config(config, acme_lab, profile="shortlived", profile_required=True,
                           fallback_directory_urls=[second.directory_url], fallback_profiles=["tlsserver"])

    @pytest.mark.gen_test
    async def test_a_fallback_ca_is_asked_for_its_own_profile(self, api, world, acme_lab, services, second):
        _, result = await issued(api, world, acme_lab, "fallback.lab.com")
        assert result["certificate"]["status"] == "active"
        assert second.orders[-1]["profile"] == "tlsserver"
        certificate = served(services, "fallback.lab.com")
        assert (certificate.directory_url, certificate.profile) == (second.directory_url, "tlsserver")
