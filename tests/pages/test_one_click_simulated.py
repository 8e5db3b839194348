"""One-click set-up tried on one machine (``[domain_connect] simulate = true``, docs/one-click.md):
the DNS page offers it at the stand-in DNS host the service serves itself, which checks the signed
apply URL, shows its SIMULATED consent screen, applies the records to the simulated DNS and sends
the browser back to ``/connect/done``, where the real return path checks DNS.

The whole click path runs through the portal as a browser without JavaScript follows it: the
button's form, the redirect to the stand-in, its form, the redirect back.
"""

from __future__ import annotations

import subprocess
from urllib.parse import parse_qsl, urlsplit

import attrs
import pytest

from core.config import DomainConnectConfig, ProviderConfig, SandboxConfig, ServerConfig, load_config
from tests.pages.portal_client import hidden_fields, sign_in
from tests.test_readme import ROOT, shell_blocks

APEX = "shop.example.com"
TRIAL = (ROOT / "docs" / "one-click.md").read_text().split("**Trying it on one machine.**", 1)[1]
[DOCUMENTED] = [line for line in shell_blocks(TRIAL)[0].splitlines() if line.endswith("> one-click.toml")]
"The documentation's configuration of the trial: ``SIMULATED`` below."


SIMULATED = {"provider": ProviderConfig(sandbox=SandboxConfig(simulate_dns=True)),
             "domain_connect": DomainConnectConfig(simulate=True)}


@pytest.fixture
def config(config, http_port):
    here = f"http://127.0.0.1:{http_port}"
    return attrs.evolve(config, server=ServerConfig(base_url=here, portal_url=here), **SIMULATED)


@pytest.fixture
def owner(world, browser, services):
    actor = world.owner()
    sign_in(browser, services, actor)
    return actor


async def new_domain(api, owner):
    r = await api.post("/v1/domains", {"apex": APEX}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def at_stand_in(browser, domain):
    """The DNS page's button pressed: the answer (a redirect to the stand-in's apply URL) and the stand-in's page."""
    started = await browser.submit(f"/site/{domain['id']}/dns", f"/site/{domain['id']}/one-click")
    assert started.code == 303, started.body
    return started.headers["Location"], await browser.get(started.headers["Location"])


async def decided(browser, apply_url, page, decision):
    """The stand-in's form sent with ``decision``: the redirect back to the portal."""
    path = urlsplit(apply_url).path
    answer = await browser.post(path, {**hidden_fields(page.body.decode(), path), "decision": decision})
    assert answer.code == 303, answer.body
    return answer.headers["Location"]


async def validation_status(api, owner, domain):
    return (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body["validation"]["status"]


class TestOffer:
    @pytest.mark.gen_test
    async def test_the_dns_page_offers_one_click_at_the_simulated_dns_host(self, api, browser, owner):
        domain = await new_domain(api, owner)
        page = (await browser.get(f"/site/{domain['id']}/dns")).body.decode()
        assert "Set up automatically at Simulated DNS host" in page

    @pytest.mark.gen_test
    async def test_the_button_leads_to_a_signed_apply_url_at_the_stand_in(self, api, browser, owner, config):
        apply_url, _ = await at_stand_in(browser, await new_domain(api, owner))
        parts = urlsplit(apply_url)
        assert f"{parts.scheme}://{parts.netloc}" == config.server.portal_url
        assert parts.path == "/simulated-dns-host/v2/domainTemplates/providers/localhost/services/tls-hostname/apply"
        params = dict(parse_qsl(parts.query))
        assert (params["domain"], params["host"], params["key"]) == ("example.com", "shop", "_dck1")
        assert params["redirect_uri"] == config.server.portal_url + "/connect/done" and params["sig"]

    @pytest.mark.gen_test
    async def test_the_consent_screen_is_labelled_simulated_and_lists_the_two_records(self, api, browser, owner):
        domain = await new_domain(api, owner)
        _, page = await at_stand_in(browser, domain)
        text = page.body.decode()
        assert page.code == 200 and "SIMULATED" in text
        assert domain["validation"]["delegation"]["value"] in text and domain["validation"]["ownership"]["value"] in text

    @pytest.mark.gen_test
    async def test_nothing_is_published_until_the_set_up_is_approved(self, api, owner, services):
        domain = await new_domain(api, owner)
        r = await api.post(f"/v1/domains/{domain['id']}/verify-delegation", token=owner.token)
        assert r.body["status"] != "verified"
        assert await validation_status(api, owner, domain) == "pending"


class TestClickPath:
    @pytest.mark.gen_test
    async def test_connect_publishes_the_records_and_the_return_page_finds_the_domain_verified(
            self, api, browser, owner):
        domain = await new_domain(api, owner)
        apply_url, page = await at_stand_in(browser, domain)
        back = await decided(browser, apply_url, page, "connect")
        state = dict(parse_qsl(urlsplit(apply_url).query))["state"]
        assert back == f"{dict(parse_qsl(urlsplit(apply_url).query))['redirect_uri']}?state={state}"
        done = await browser.get(back)
        assert done.code == 200 and "DNS records in place" in done.body.decode()
        assert await validation_status(api, owner, domain) == "verified"

    @pytest.mark.gen_test
    async def test_cancel_returns_access_denied_and_publishes_nothing(self, api, browser, owner):
        domain = await new_domain(api, owner)
        apply_url, page = await at_stand_in(browser, domain)
        back = await decided(browser, apply_url, page, "cancel")
        assert dict(parse_qsl(urlsplit(back).query))["error"] == "access_denied"
        done = (await browser.get(back)).body.decode()
        assert "not there yet" in done and "access_denied" in done
        assert await validation_status(api, owner, domain) == "pending"

    @pytest.mark.gen_test
    async def test_a_changed_apply_url_is_refused_and_changes_nothing(self, api, browser, owner):
        domain = await new_domain(api, owner)
        apply_url, page = await at_stand_in(browser, domain)
        target = domain["validation"]["delegation"]["value"]
        changed = apply_url.replace(target.split(".")[0], "attacker", 1)
        assert changed != apply_url
        refused = await browser.get(changed)
        assert refused.code == 400 and "signature does not verify" in refused.body.decode()
        path = urlsplit(apply_url).path
        posted = await browser.post(path, {**hidden_fields(page.body.decode(), path), "decision": "connect",
                                           "query": urlsplit(changed).query})
        assert posted.code == 400
        r = await api.post(f"/v1/domains/{domain['id']}/verify-delegation", token=owner.token)
        assert r.body["status"] != "verified"


def test_the_documented_configuration_is_the_one_tested(tmp_path):
    subprocess.run(["bash", "-c", DOCUMENTED], cwd=tmp_path, check=True)
    documented = load_config(tmp_path / "one-click.toml")
    assert {"provider": documented.provider, "domain_connect": documented.domain_connect} == SIMULATED


class TestOff:
    @pytest.fixture
    def config(self, config):
        return attrs.evolve(config, domain_connect=DomainConnectConfig())

    @pytest.mark.gen_test
    async def test_without_simulate_the_stand_in_is_not_served(self, browser):
        r = await browser.get("/simulated-dns-host/v2/domainTemplates/providers/localhost/services/tls-hostname/apply")
        assert r.code == 404
