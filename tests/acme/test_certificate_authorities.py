"""Issue 39: the CAs the service orders from. A second CA (another Pebble) takes the order when the
first is down, or is the only one the hostname's CAA allows; External Account Binding; each CA's
orders paced like a provider's budget; a renewal due is noticed by the background checks."""

from __future__ import annotations

import datetime as dt
import uuid

import attrs
import pytest

from core.lifecycle.watcher import LifecycleWatcher
from tests.acme.conftest import acme_config, needs_lab
from tests.acme.test_issuing import add, served, verify, verify_until_issued
from tests.helpers import mark_active
from tests.servers.pebble import Directory, Pebble

pytestmark = needs_lab
EAB_KID = "kid-1"
EAB_KEY = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"


@pytest.fixture
def second(acme_lab, tmp_path):
    """Another CA, trusted through the same bundle as the first, with its own CAA identity."""
    pebble = Pebble(tmp_path / "second", dns_server=acme_lab.lab.resolver, ca=acme_lab.pebble.ca).start()
    directory = Directory(pebble, caa_identities=["second-ca.test"]).start()
    yield directory
    directory.stop()
    pebble.stop()


@pytest.fixture
def config(config, acme_lab, second):
    acme_lab.directory.caa_identities = ["first-ca.test"]
    yield acme_config(config, acme_lab, fallback_directory_urls=[second.directory_url])
    acme_lab.directory.caa_identities = None


def issuer_of(services, apex):
    return served(services, apex).directory_url


class TestFallback:
    @pytest.mark.gen_test
    async def test_the_first_ca_issues_when_it_can(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "first.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        assert issuer_of(services, "first.lab.com") == acme_lab.directory.directory_url

    @pytest.mark.gen_test
    async def test_the_second_ca_issues_while_the_first_is_down(self, api, world, acme_lab, services, second):
        caller, created = await add(api, world, "outage.lab.com")
        acme_lab.publish_records(created)
        acme_lab.pebble.stop()
        try:
            result = await verify(api, caller, created)
        finally:
            acme_lab.pebble.start()
        assert result["certificate"]["status"] == "active"
        assert issuer_of(services, "outage.lab.com") == second.directory_url

    @pytest.mark.gen_test
    async def test_the_ca_the_hostnames_caa_allows_issues(self, api, world, acme_lab, services, second):
        caller, created = await add(api, world, "caa.lab.com")
        acme_lab.publish_records(created)
        acme_lab.lab.publish("lab.com", 'caa.lab.com. 300 IN CAA 0 issue "second-ca.test"')
        await verify_until_issued(api, caller, created)
        assert issuer_of(services, "caa.lab.com") == second.directory_url

    @pytest.mark.gen_test
    async def test_caa_allowing_no_configured_ca_orders_nothing_and_names_the_records(self, api, world, acme_lab,
                                                                                  services):
        caller, created = await add(api, world, "nobody.lab.com")
        acme_lab.publish_records(created)
        acme_lab.lab.publish("lab.com", 'nobody.lab.com. 300 IN CAA 0 issue "digicert.com"')
        result = await verify(api, caller, created)
        assert result["certificate"]["status"] == "error"
        assert 'nobody.lab.com. CAA 0 issue "first-ca.test"' in result["message"]
        assert services.store.sql.execute("SELECT count(*) FROM acme_certificates").fetchone() == (0,)


class TestPacing:
    @pytest.fixture
    def config(self, config, acme_lab):
        return acme_config(config, acme_lab, orders_per_window=1, window_seconds=3600)

    @pytest.mark.gen_test
    async def test_past_its_orders_a_ca_is_not_asked_and_the_caller_is_told_when_to_come_back(
            self, api, world, acme_lab):
        for apex in ("paced-one.lab.com", "paced-two.lab.com"):
            caller, created = await add(api, world, apex)
            acme_lab.publish_records(created)
            await verify(api, caller, created)
        r = await api.post(f"/v1/domains/{created['id']}/certificates/issue", {}, token=caller.token)
        assert (r.status, r.body["code"]) == (503, "provider_busy") and int(r.headers["Retry-After"]) > 0


class TestWorkspaceShareOfOrders:
    """8 orders an hour; a workspace's share of them starts at 1 and grows by one for each of its
    hostnames verified and serving a certificate issued an hour ago or more."""

    @pytest.fixture
    def config(self, config, acme_lab):
        paced = acme_config(config, acme_lab, orders_per_window=8, window_seconds=3600)
        return attrs.evolve(paced, provider=attrs.evolve(paced.provider, workspace_share=0.5))

    @pytest.mark.gen_test
    async def test_a_new_workspace_orders_once_and_one_with_a_serving_hostname_again(self, api, world, acme_lab,
                                                                                      services):
        caller, first = await add(api, world, "share-new.lab.com")
        acme_lab.publish_records(first)
        await verify_until_issued(api, caller, first)
        second = (await api.post("/v1/domains", {"apex": "share-new-two.lab.com"}, token=caller.token)).body
        acme_lab.publish_records(second)
        await verify(api, caller, second)  # verified; the order waits
        r = await api.post(f"/v1/domains/{second['id']}/certificates/issue", {}, token=caller.token)
        assert (r.status, r.body["code"]) == (503, "provider_busy")  # the certificate just issued earns nothing yet
        assert "this workspace has used its share of the service's order budget" in r.body["message"]
        assert int(r.headers["Retry-After"]) > 0

        grown, third = await add(api, world, "share-grown.lab.com")
        serving = (await api.post("/v1/domains", {"apex": "share-serving.lab.com"}, token=grown.token)).body
        mark_active(services, serving)
        acme_lab.publish_records(third)
        await verify_until_issued(api, grown, third)
        r = await api.post(f"/v1/domains/{third['id']}/certificates/issue", {}, token=grown.token)
        assert r.status == 200  # its second order: one earned, one a new workspace's


class TestBackgroundRenewal:
    @pytest.mark.gen_test
    async def test_the_background_checks_renew_when_the_window_opens(self, api, world, acme_lab, services, clock):
        caller, created = await add(api, world, "background.lab.com")
        acme_lab.publish_records(created)
        acme_lab.directory.window = (clock.now() + dt.timedelta(days=30), clock.now() + dt.timedelta(days=30, hours=1))
        await verify_until_issued(api, caller, created)
        first = served(services, "background.lab.com")
        row = services.store.domains.get(caller.workspace.id, uuid.UUID(created["id"]))
        assert row.next_check_at <= first.renew_at  # the schedule looks by the renewal time at the latest
        clock.advance((first.renew_at - clock.now()).total_seconds() + 1)
        await LifecycleWatcher(services).tick()
        assert served(services, "background.lab.com").chain_pem != first.chain_pem


class TestExternalAccountBinding:
    @pytest.fixture
    def config(self, config, acme_lab, tmp_path):
        pebble = Pebble(tmp_path / "eab", dns_server=acme_lab.lab.resolver, eab={EAB_KID: EAB_KEY}).start()
        self.pebble = pebble
        yield acme_config(config, acme_lab, directory_url=pebble.directory_url, ca_bundle=str(pebble.ca_bundle),
                          eab_kid=EAB_KID, eab_hmac_key=EAB_KEY)
        pebble.stop()

    @pytest.mark.gen_test
    async def test_a_ca_requiring_binding_gets_the_configured_key(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "bound.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        [account] = services.store.sql.execute("SELECT account_url FROM acme_accounts").fetchall()
        assert account[0].startswith(self.pebble.directory_url.rsplit("/", 1)[0])
