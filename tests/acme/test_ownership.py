"""Issue 46: a hostname's certificate goes to the workspace that proves ownership now, with real parts
(tests/acme/conftest.py: Pebble validating through Unbound, the customer's zone in NSD, the
delegation zone answered by the service's own server).

- **A moved hostname.** Workspace A has ``<host>`` verified and issued; the customer moves to
  workspace B and replaces the ownership TXT with B's token (the CNAME stays: its target is the
  same in every workspace). B verifies; A's next check, at once (B's verification has it checked),
  finds B's token: A leaves ``verified`` as a failed verification does, renews nothing more, and
  the TLS terminator serves B's certificate only.
- **A deleted domain.** Its certificate is no longer served at the terminator's next look, and is
  revoked at the revoke job's next run (every ``upkeep.REVOKE_SECONDS``), with no grace; an order
  that finishes after the deletion is stored marked, never served, and revoked too.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import attrs
import pytest
from cryptography import x509

from core.acme import upkeep
from core.config import TlsTerminatorConfig
from core.lifecycle.watcher import LifecycleWatcher
from core.tls_terminator.index import CHECK_SECONDS
from tests.acme.conftest import CUSTOMER_ZONE, needs_lab
from tests.acme.test_issuing import add, read, verify, verify_until_issued
from tests.patience import PATIENCE_SECONDS

pytestmark = needs_lab


@pytest.fixture
def config(config):
    """With the TLS terminator's index (``services.tls_terminator``)."""
    return attrs.evolve(config, tls_terminator=TlsTerminatorConfig(secret="terminator-" + uuid.uuid4().hex))


def publish(acme_lab, created, token_of=None) -> None:
    """The delegation CNAME, and the ownership TXT with ``token_of``'s token (``created``'s by
    default), TTL 1: a switch is seen by the resolver a second later."""
    apex = created["apex"]
    acme_lab.lab.remove(CUSTOMER_ZONE, f"_service-verify.{apex}")
    acme_lab.lab.remove(CUSTOMER_ZONE, f"_acme-challenge.{apex}")
    acme_lab.lab.publish_many(CUSTOMER_ZONE, [
        f"_acme-challenge.{apex}. 1 IN CNAME {created['validation']['delegation']['value']}.",
        f'_service-verify.{apex}. 1 IN TXT "{(token_of or created)["validation"]["ownership"]["value"]}"',
    ])


async def resolver_sees(services, created, token_of) -> None:
    """Wait until the resolver answers the ownership TXT with ``token_of``'s token (its cached answer expired)."""
    value = token_of["validation"]["ownership"]["value"]
    deadline = time.monotonic() + 15
    while True:
        found = await services.dns.lookup(f"_service-verify.{created['apex']}", "TXT")
        if found.outcome == "found" and any(v.strip('"') == value for v in found.values):
            return
        assert time.monotonic() < deadline, found
        await asyncio.sleep(0.2)


def handle_of(services, caller, created) -> str:
    return services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"])).provider_hostname_id


def chain_of(services, handle) -> str:
    return services.store.acme.certificate(handle).chain_pem


async def served_chain(services, clock, apex) -> bytes | None:
    """What the TLS terminator's endpoints answer for ``apex`` once its index has looked again."""
    clock.advance(CHECK_SECONDS)
    await services.tls_terminator.refresh()
    found = await services.tls_terminator.lookup(apex)
    return None if found is None else found.chain


def pem(chain: str) -> bytes:
    """A chain as the terminator hands it."""
    return chain.strip().encode() + b"\n"


def serial(chain_pem: str) -> int:
    return x509.load_pem_x509_certificate(chain_pem.encode()).serial_number


async def moved(api, world, services, acme_lab, clock, apex):
    """A verified and issued in A; the TXT switched to B's token; B verified and issued a minute later."""
    a, created_a = await add(api, world, apex)
    publish(acme_lab, created_a)
    await verify_until_issued(api, a, created_a)
    b, created_b = await add(api, world, apex)
    assert created_b["validation"]["delegation"] == created_a["validation"]["delegation"]  # one target per hostname
    publish(acme_lab, created_b)
    await resolver_sees(services, created_b, created_b)
    clock.advance(60)
    await verify_until_issued(api, b, created_b)
    return (a, created_a), (b, created_b)


class TestMovedHostname:
    @pytest.mark.gen_test
    async def test_the_old_workspace_leaves_verified_at_the_next_sweep_naming_the_other_token(
            self, api, world, services, acme_lab, clock):
        (a, created_a), (_, created_b) = await moved(api, world, services, acme_lab, clock, "moved.lab.com")
        await LifecycleWatcher(services).tick()  # no time passes: B's verification had A checked at once
        domain = await read(api, a, created_a)
        assert domain["validation"]["status"] == "error" and domain["opsStatus"] == "action_needed"
        other = created_b["validation"]["ownership"]["value"]
        assert f"holds another token ({other})" in domain["validation"]["lastError"]

    @pytest.mark.gen_test
    async def test_verify_delegation_in_the_old_workspace_answers_error_naming_the_other_token(
            self, api, world, services, acme_lab, clock):
        (a, created_a), (_, created_b) = await moved(api, world, services, acme_lab, clock, "asked.lab.com")
        result = await verify(api, a, created_a)
        assert result["status"] == "error"
        assert f"holds another token ({created_b['validation']['ownership']['value']})" in result["message"]
        assert "certificate" not in result

    @pytest.mark.gen_test
    async def test_the_terminator_serves_the_new_workspaces_certificate_only(self, api, world, services, acme_lab,
                                                                            clock):
        acme_lab.directory.window = None  # renewals at two thirds of the lifetime
        (a, created_a), (b, created_b) = await moved(api, world, services, acme_lab, clock, "serve.lab.com")
        handle_a, handle_b = handle_of(services, a, created_a), handle_of(services, b, created_b)
        # Before A's check, A renews (a renewal was due): A's certificate now expires after B's.
        clock.advance((services.store.acme.certificate(handle_a).not_after - clock.now()).total_seconds() - 3600)
        latest = services.store.certificates.latest(a.workspace.id, uuid.UUID(created_a["id"]))
        await api.post(f"/v1/certificates/{latest.id}/refresh", token=a.token)
        assert services.store.acme.certificate(handle_a).not_after > services.store.acme.certificate(handle_b).not_after
        assert await served_chain(services, clock, "serve.lab.com") == pem(chain_of(services, handle_b))
        await LifecycleWatcher(services).tick()
        assert services.store.domains.get(a.workspace.id, uuid.UUID(created_a["id"])).validation_status == "error"
        assert await served_chain(services, clock, "serve.lab.com") == pem(chain_of(services, handle_b))

    @pytest.mark.gen_test
    async def test_the_old_workspace_renews_nothing_more(self, api, world, services, acme_lab, clock):
        acme_lab.directory.window = None  # renewals at two thirds of the lifetime
        (a, created_a), _ = await moved(api, world, services, acme_lab, clock, "renew.lab.com")
        await LifecycleWatcher(services).tick()
        handle = handle_of(services, a, created_a)
        before = services.store.acme.certificate(handle)
        clock.advance((before.not_after - clock.now()).total_seconds() - 3600)  # well past two thirds
        latest = services.store.certificates.latest(a.workspace.id, uuid.UUID(created_a["id"]))
        assert (await api.post(f"/v1/certificates/{latest.id}/refresh", token=a.token)).status == 200
        assert (await api.post(f"/v1/domains/{created_a['id']}/recheck", token=a.token)).body["status"] == "action_needed"
        await LifecycleWatcher(services).tick()
        after = services.store.acme.certificate(handle)
        assert (after.chain_pem, after.order_url) == (before.chain_pem, None)

    @pytest.mark.gen_test
    async def test_the_old_workspace_verified_again_gets_the_hostname_back(self, api, world, services, acme_lab, clock):
        (a, created_a), _ = await moved(api, world, services, acme_lab, clock, "back.lab.com")
        await LifecycleWatcher(services).tick()
        publish(acme_lab, created_a)
        await resolver_sees(services, created_a, created_a)
        clock.advance(60)  # the customer changed their mind a minute later
        assert (await verify(api, a, created_a))["status"] == "verified"
        old = chain_of(services, handle_of(services, a, created_a))
        assert await served_chain(services, clock, "back.lab.com") == pem(old)


class TestDeletedDomain:
    @pytest.mark.gen_test
    async def test_its_certificate_is_no_longer_served_at_the_terminators_next_look(self, api, world, services,
                                                                                   acme_lab, clock):
        caller, created = await add(api, world, "deleted.lab.com")
        publish(acme_lab, created)
        await verify_until_issued(api, caller, created)
        assert await served_chain(services, clock, "deleted.lab.com") is not None
        assert (await api.delete(f"/v1/domains/{created['id']}", token=caller.token)).status == 204
        assert await served_chain(services, clock, "deleted.lab.com") is None

    @pytest.mark.gen_test
    async def test_its_certificate_is_revoked_at_the_revoke_jobs_next_run(self, api, world, services, acme_lab):
        caller, created = await add(api, world, "revoked.lab.com")
        publish(acme_lab, created)
        await verify_until_issued(api, caller, created)
        number = serial(chain_of(services, handle_of(services, caller, created)))
        assert (await api.delete(f"/v1/domains/{created['id']}", token=caller.token)).status == 204
        assert await upkeep.revoke_deleted(services.provider.provider, orphans=False) == 1  # no time has passed
        assert acme_lab.pebble.certificate_status(number) == "Revoked"


class TestOrderFinishedAfterTheDeletion:
    @pytest.fixture
    def config(self, config):
        """Each call takes an order one step (``wait_seconds = 0``): a test finishes it later."""
        return attrs.evolve(config, provider=attrs.evolve(
            config.provider, acme=attrs.evolve(config.provider.acme, wait_seconds=0.0)))

    @pytest.mark.gen_test
    async def test_is_stored_unserved_and_revoked(self, api, world, services, acme_lab, clock):
        provider = services.provider.provider
        caller, created = await add(api, world, "late.lab.com")
        publish(acme_lab, created)
        await verify(api, caller, created)
        handle = handle_of(services, caller, created)
        await finish(provider, handle)  # the first certificate
        first = services.store.acme.certificate(handle)
        clock.advance((first.not_after - clock.now()).total_seconds() - 3600)  # a renewal is due
        await provider.refresh(handle, apex="late.lab.com", trace_id=uuid.uuid4())
        assert services.store.acme.certificate(handle).order_url is not None  # the renewal's order, under way
        assert (await api.delete(f"/v1/domains/{created['id']}", token=caller.token)).status == 204
        await finish(provider, handle)  # a refresh under way when the domain was deleted takes it to the end
        renewed = services.store.acme.certificate(handle)
        assert renewed.chain_pem != first.chain_pem and renewed.deleted_at is not None
        assert await served_chain(services, clock, "late.lab.com") is None
        assert await upkeep.revoke_deleted(provider, orphans=False) == 1
        assert acme_lab.pebble.certificate_status(serial(renewed.chain_pem)) == "Revoked"


async def finish(provider, handle) -> None:
    """Refresh until the order under way is done (one step a call), a second apart: Pebble marks an
    answered challenge ``processing`` a moment after the answer, and a step reading it ``pending``
    before would answer it again (which Pebble refuses)."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while provider.store.acme.certificate(handle).order_url is not None:
        assert time.monotonic() < deadline
        await asyncio.sleep(1.0)
        await provider.refresh(handle, apex=provider.store.acme.certificate(handle).apex, trace_id=uuid.uuid4())

