"""Issue 39: certificates straight from an ACME CA (Pebble), validated by DNS-01 through the
delegation CNAME the service hands out; renewed on the CA's schedule; revoked when their domain
is deleted; never exportable through the API. See tests/acme/conftest.py for the parts."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid
from pathlib import Path

import attrs
import pytest
from cryptography import x509

from core.acme import keys, upkeep
from tests.acme.conftest import ZONE, needs_lab
from tests.helpers import mark_verified
from tests.patience import PATIENCE_SECONDS

pytestmark = needs_lab


@attrs.frozen
class Caller:
    workspace: object
    token: str


async def add(api, world, apex):
    """A domain of a new workspace, through the API with a key (the fake clock may move years)."""
    actor = world.owner()
    caller = Caller(actor.workspace, world.key(actor.workspace, ["*"]))
    r = await api.post("/v1/domains", {"apex": apex}, token=caller.token)
    assert r.status == 201, r.body
    return caller, r.body


async def verify(api, caller, created):
    r = await api.post(f"/v1/domains/{created['id']}/verify-delegation", token=caller.token)
    assert r.status == 200, r.body
    return r.body


async def verify_until_issued(api, caller, created):
    """verify-delegation until it answers with an active certificate, as a user presses "Check now"
    again: on a busy machine one lookup of the check can miss its timeout, and that check learns
    nothing. Every test that needs a certificate issued first gets it so; only the tests of what one
    check answers call ``verify`` alone. The last answer is shown if none came."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while (result := await verify(api, caller, created)).get("certificate", {}).get("status") != "active":
        assert time.monotonic() < deadline, result
        await asyncio.sleep(0.5)
    return result


async def read(api, caller, created):
    return (await api.get(f"/v1/domains/{created['id']}", token=caller.token)).body


def served(services, apex):
    return services.store.acme.served(apex)


class TestIssuance:
    @pytest.mark.gen_test
    async def test_a_domain_gets_its_own_unguessable_target_under_the_delegation_zone(self, api, world):
        _, created = await add(api, world, "target.lab.com")
        label, zone = created["validation"]["delegation"]["value"].split(".", 1)
        assert zone == ZONE and len(label) == 26 and label.isalnum()

    @pytest.mark.gen_test
    async def test_a_verified_domain_gets_a_certificate_from_the_ca(self, api, world, acme_lab):
        caller, created = await add(api, world, "shop.lab.com")
        acme_lab.publish_records(created)
        result = await verify(api, caller, created)
        assert (result["status"], result["certificate"]["status"]) == ("verified", "active")
        domain = await read(api, caller, created)
        assert domain["cert"]["status"] == "active" and domain["opsStatus"] == "active"
        assert domain["cert"]["issuer"].startswith("Pebble Intermediate CA")

    @pytest.mark.gen_test
    async def test_the_certificate_chains_to_the_cas_root(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "chain.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        chain = x509.load_pem_x509_certificates(served(services, "chain.lab.com").chain_pem.encode())
        root = x509.load_pem_x509_certificate(acme_lab.pebble.root_pem().encode())
        leaf, intermediate = chain[0], chain[1]
        leaf.verify_directly_issued_by(intermediate)
        intermediate.verify_directly_issued_by(root)
        names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert names.get_values_for_type(x509.DNSName) == ["chain.lab.com"]

    @pytest.mark.gen_test
    async def test_the_issuance_event_is_queued_as_for_any_provider(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "events.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        rows = services.store.sql.execute("SELECT type FROM outbox_events").fetchall()
        assert [t for (t,) in rows] == ["cert.issued"]


class TestNoOrderWithoutTheDelegation:
    """An order is placed only once our own check finds the CNAME pointing at us."""

    @pytest.mark.gen_test
    async def test_a_cname_pointing_elsewhere_places_no_order(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "elsewhere.lab.com")
        acme_lab.publish_records(created, cname=f"someone-else.{ZONE}")
        assert (await verify(api, caller, created))["status"] == "error"
        assert services.store.sql.execute("SELECT count(*) FROM acme_certificates").fetchone() == (0,)

    @pytest.mark.gen_test
    async def test_a_missing_cname_places_no_order(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "nocname.lab.com")
        acme_lab.lab.publish("lab.com", f'_service-verify.nocname.lab.com. 300 IN TXT "{created["validation"]["ownership"]["value"]}"')
        assert (await verify(api, caller, created))["status"] == "pending"
        assert services.store.sql.execute("SELECT count(*) FROM acme_certificates").fetchone() == (0,)


class TestNoOrderWithoutTheDelegationStill:
    @pytest.mark.gen_test
    async def test_an_issue_request_after_the_cname_went_places_no_order(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "went.lab.com")
        acme_lab.publish_records(created, cname=f"someone-else.{ZONE}")
        mark_verified(services, created)  # verified once, the CNAME changed since
        r = await api.post(f"/v1/domains/{created['id']}/certificates/issue", {}, token=caller.token)
        assert (r.status, r.body["status"]) == (200, "error") and "no order was placed" in r.body["message"]
        assert services.store.sql.execute("SELECT count(*) FROM acme_certificates").fetchone() == (0,)


class TestKeys:
    """Keys never leave through the API; they are kept encrypted."""

    @pytest.mark.gen_test
    async def test_the_bundle_endpoint_answers_409_for_an_acme_certificate(self, api, world, acme_lab):
        caller, created = await add(api, world, "bundle.lab.com")
        acme_lab.publish_records(created)
        certificate_id = (await verify_until_issued(api, caller, created))["certificate"]["certificateId"]
        r = await api.get(f"/v1/certificates/{certificate_id}/bundle", token=caller.token)
        assert (r.status, r.body["code"]) == (409, "managed_certificate_bundle_unavailable")

    @pytest.mark.gen_test
    async def test_no_private_key_is_stored_in_clear(self, api, world, acme_lab, services, config):
        caller, created = await add(api, world, "sealed.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        services.store.sql.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert b"PRIVATE KEY" not in Path(config.storage.path).read_bytes()


class TestRenewal:
    """Renewals on the CA's schedule: inside its ARI window, else at two thirds of the lifetime."""

    @pytest.mark.gen_test
    async def test_a_certificate_is_renewed_inside_the_cas_window(self, api, world, acme_lab, services, clock):
        caller, created = await add(api, world, "ari.lab.com")
        acme_lab.publish_records(created)
        acme_lab.directory.window = (clock.now() + dt.timedelta(days=40), clock.now() + dt.timedelta(days=41))
        await verify_until_issued(api, caller, created)
        first = served(services, "ari.lab.com")
        assert first.renew_at is not None and dt.timedelta(days=40) <= first.renew_at - clock.now() <= dt.timedelta(days=41)
        clock.advance(41 * 86400)
        latest = services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"]))
        r = await api.post(f"/v1/certificates/{latest.id}/refresh", token=caller.token)
        assert r.status == 200, r.body
        renewed = served(services, "ari.lab.com")
        assert renewed.chain_pem != first.chain_pem and renewed.not_after >= first.not_after

    @pytest.mark.gen_test
    async def test_the_window_is_read_again_for_the_new_certificate(self, api, world, acme_lab, services, clock):
        caller, created = await add(api, world, "reread.lab.com")
        acme_lab.publish_records(created)
        acme_lab.directory.window = (clock.now() + dt.timedelta(days=40), clock.now() + dt.timedelta(days=41))
        await verify_until_issued(api, caller, created)
        first = served(services, "reread.lab.com")
        acme_lab.directory.windows[keys.ari_id(first.chain_pem)] = (clock.now(), clock.now() + dt.timedelta(days=1))
        clock.advance(86400)  # past the first certificate's window as the CA now says it (and ARI's six hours)
        latest = services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"]))
        await api.post(f"/v1/certificates/{latest.id}/refresh", token=caller.token)
        renewed = served(services, "reread.lab.com")
        assert renewed.chain_pem != first.chain_pem
        assert acme_lab.directory.asked[-1] == keys.ari_id(renewed.chain_pem)
        assert dt.timedelta(days=39) <= renewed.renew_at - clock.now() <= dt.timedelta(days=41)

    @pytest.mark.gen_test
    async def test_a_renewal_whose_delegation_is_gone_places_no_order(self, api, world, acme_lab, services, clock):
        caller, created = await add(api, world, "risk.lab.com")
        acme_lab.publish_records(created, ttl=1)
        acme_lab.directory.window = (clock.now() + dt.timedelta(days=40), clock.now() + dt.timedelta(days=41))
        await verify_until_issued(api, caller, created)
        first = served(services, "risk.lab.com")
        acme_lab.lab.remove("lab.com", "_acme-challenge.risk.lab.com")
        await asyncio.sleep(1.5)  # ordering, not timing: Unbound forgets the CNAME it held (TTL 1)
        clock.advance(41 * 86400)
        latest = services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"]))
        await api.post(f"/v1/certificates/{latest.id}/refresh", token=caller.token)
        assert served(services, "risk.lab.com").chain_pem == first.chain_pem  # no order: the one served stays

    @pytest.mark.gen_test
    async def test_without_ari_a_certificate_is_renewed_at_two_thirds_of_its_life(self, api, world, acme_lab, services,
                                                                                  clock):
        acme_lab.directory.window = None
        caller, created = await add(api, world, "thirds.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        first = served(services, "thirds.lab.com")
        life = first.not_after - first.not_before
        assert abs((first.renew_at - first.not_before) - life * 2 / 3) < dt.timedelta(seconds=1)

    @pytest.mark.gen_test
    async def test_the_domain_carries_the_renewal_time_its_checks_are_planned_by(self, api, world, acme_lab,
                                                                                 services, clock):
        acme_lab.directory.window = (clock.now() + dt.timedelta(days=50), clock.now() + dt.timedelta(days=51))
        caller, created = await add(api, world, "planned.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        row = services.store.domains.get(caller.workspace.id, uuid.UUID(created["id"]))
        assert row.cert_renew_at == served(services, "planned.lab.com").renew_at


class TestStagingThenProduction:
    @pytest.mark.gen_test
    async def test_a_certificate_from_a_ca_no_longer_configured_is_replaced_at_the_next_refresh(
            self, api, world, acme_lab, services):
        caller, created = await add(api, world, "staging.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        first = served(services, "staging.lab.com")

        def staged(store):
            with store.transaction():
                store.acme.put(attrs.evolve(first, directory_url="https://acme-staging.example/directory"))
        await services.store.run(staged, services.store)
        latest = services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"]))
        await api.post(f"/v1/certificates/{latest.id}/refresh", token=caller.token)
        renewed = served(services, "staging.lab.com")
        assert renewed.chain_pem != first.chain_pem and renewed.directory_url == acme_lab.directory.directory_url


class TestDeletedDomains:
    @pytest.mark.gen_test
    async def test_a_deleted_domains_certificate_is_revoked_and_forgotten(self, api, world, acme_lab, services, clock):
        caller, created = await add(api, world, "gone.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        serial = x509.load_pem_x509_certificate(served(services, "gone.lab.com").chain_pem.encode()).serial_number
        assert (await api.delete(f"/v1/domains/{created['id']}", token=caller.token)).status == 204
        clock.advance(upkeep.GRACE.total_seconds() + 1)
        assert await upkeep.revoke_deleted(services.provider.provider) == 1
        assert served(services, "gone.lab.com") is None
        assert acme_lab.pebble.certificate_status(serial) == "Revoked"

