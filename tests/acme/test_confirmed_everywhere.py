"""Issue 47, items 3 and 6: the CA is asked to validate a DNS-01 value only once every server of the
delegation zone answers it (each process's built-in server says which serial it answers from); a
server that does not is named, and the order waits rather than fail at the CA. A value goes as
soon as its authorization is settled. Real Pebble and the built-in server (tests/acme/conftest.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
import uuid

import attrs
import pytest

from core.delegation_dns.confirm import wall_clock
from tests.acme.conftest import acme_config, needs_lab
from tests.acme.test_issuing import add, read, verify, verify_until_issued
from tests.patience import PATIENCE_SECONDS

pytestmark = needs_lab
STUCK = "stuck-host pid 7"


def heard_from(services, process: str, serial: int, *, ago: float = -60.0) -> None:
    """``process``'s server says it answers from ``serial``, ``ago`` seconds ago (a negative time:
    its word stays fresh while the test runs)."""
    with services.store.transaction():
        services.store.delegation_zone.answering(process, serial, wall_clock() - dt.timedelta(seconds=ago))


def handle_of(services, caller, created) -> str:
    return services.store.certificates.latest(caller.workspace.id, uuid.UUID(created["id"])).provider_hostname_id


async def challenge_at_the_ca(services, handle):
    """The DNS-01 challenge of the certificate's order under way, as the CA sees it."""
    provider = services.provider.provider
    certificate = services.store.acme.certificate(handle)
    ca = provider._ca(certificate.directory_url)
    order = await ca.call(ca.client.order, certificate.order_url)
    return await ca.call(ca.client.challenge, order.authorizations[0])


class TestAServerBehind:
    @pytest.fixture
    def config(self, config, acme_lab):
        config = acme_config(config, acme_lab, wait_seconds=3.0)
        return attrs.evolve(config, delegation_dns=attrs.evolve(config.delegation_dns, confirm_timeout_seconds=1.0))

    @pytest.mark.gen_test
    async def test_the_order_waits_and_says_which_server_is_behind(self, api, world, acme_lab, services):
        heard_from(services, STUCK, 1)
        caller, created = await add(api, world, "behind.lab.com")
        acme_lab.publish_records(created)
        result = await verify(api, caller, created)
        assert result["certificate"]["status"] == "pending"
        assert f"the built-in server of process {STUCK} answers from serial 1" in result["certificate"]["message"]

    @pytest.mark.gen_test
    async def test_the_diagnosis_says_the_order_waits_for_that_server(self, api, world, acme_lab, services):
        heard_from(services, STUCK, 1)
        caller, created = await add(api, world, "diagnosed-behind.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        report = (await api.get(f"/v1/domains/{created['id']}/diagnosis", token=caller.token)).body
        [waiting] = [f for f in report["findings"] if f["code"] == "orders_waiting"]
        assert f"the built-in server of process {STUCK} answers from serial 1" in waiting["message"]

    @pytest.mark.gen_test
    async def test_the_ca_is_not_asked_to_validate_meanwhile(self, api, world, acme_lab, services):
        heard_from(services, STUCK, 1)
        caller, created = await add(api, world, "unasked.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        challenge = await challenge_at_the_ca(services, handle_of(services, caller, created))
        assert challenge.challenge_status == "pending"

    @pytest.mark.gen_test
    async def test_the_order_goes_on_once_the_server_catches_up(self, api, world, acme_lab, services):
        heard_from(services, STUCK, 1)
        caller, created = await add(api, world, "caught-up.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)
        handle = handle_of(services, caller, created)
        assert services.store.acme.certificate(handle).chain_pem is None  # waiting for it
        heard_from(services, STUCK, services.store.delegation_zone.serial())
        await services.provider.provider.refresh(handle, apex="caught-up.lab.com", trace_id=uuid.uuid4())
        assert services.store.acme.certificate(handle).chain_pem is not None

    @pytest.mark.gen_test
    async def test_a_server_not_heard_from_lately_is_not_waited_for(self, api, world, acme_lab, services):
        heard_from(services, STUCK, 1, ago=60)  # its process crashed a minute ago
        caller, created = await add(api, world, "crashed.lab.com")
        acme_lab.publish_records(created)
        await verify_until_issued(api, caller, created)
        assert (await read(api, caller, created))["cert"]["status"] == "active"


class TestASettledAuthorization:
    @pytest.fixture
    def config(self, config, acme_lab):
        """Each call takes an order one step (``wait_seconds = 0``): the test takes the next."""
        return acme_config(config, acme_lab, wait_seconds=0.0)

    @pytest.mark.gen_test
    async def test_its_value_is_withdrawn_before_the_order_is_finished(self, api, world, acme_lab, services):
        caller, created = await add(api, world, "settled.lab.com")
        acme_lab.publish_records(created)
        await verify(api, caller, created)  # the value published, confirmed, the CA asked to validate
        handle, target = handle_of(services, caller, created), created["validation"]["delegation"]["value"]
        provider = services.provider.provider
        certificate = services.store.acme.certificate(handle)
        ca = provider._ca(certificate.directory_url)
        deadline = time.monotonic() + PATIENCE_SECONDS
        while (await ca.call(ca.client.order, certificate.order_url)).status != "ready":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.2)
        assert services.store.delegation_zone.values(target, services.clock.now())  # still there: not yet read
        await provider.orders.step(ca, certificate, target)
        assert services.store.delegation_zone.values(target, services.clock.now()) == []
        assert services.store.acme.certificate(handle).chain_pem is None  # finalized, not yet issued
