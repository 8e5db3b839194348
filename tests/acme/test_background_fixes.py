"""Issue 46, item 3: with the service as the ACME client, a fix the service asked for before any
order was placed (CAA, the CNAME) is picked up by the background checks alone: the next check that
finds it in place orders the certificate. See tests/acme/conftest.py for the parts."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import pytest

from core.lifecycle.watcher import LifecycleWatcher
from tests.acme.conftest import CUSTOMER_ZONE, ZONE, needs_lab
from tests.acme.test_issuing import add, read, served, verify
from tests.helpers import mark_verified
from tests.patience import PATIENCE_SECONDS

pytestmark = needs_lab


async def until_due(services, caller, created, clock):
    """Move the clock to the domain's next check and sweep."""
    row = services.store.domains.get(caller.workspace.id, uuid.UUID(created["id"]))
    clock.advance(max((row.next_check_at - clock.now()).total_seconds(), 0) + 0.001)
    await LifecycleWatcher(services).tick()


async def until_seen(services, name, rtype, value, timeout=PATIENCE_SECONDS):
    """Wait until the resolver answers ``value`` at ``name`` (its cache of the old answer expired)."""
    deadline = time.monotonic() + timeout
    while True:
        found = await services.dns.lookup(name, rtype)
        if any(value in v for v in found.values) or any(value in str(r) for r in found.caa):
            return
        assert time.monotonic() < deadline, f"the resolver still answers {found} at {name}"
        await asyncio.sleep(0.2)


class TestCaa:
    @pytest.mark.gen_test
    async def test_a_caa_fix_done_as_told_is_ordered_at_the_next_check(self, api, world, acme_lab, services, clock):
        caller, created = await add(api, world, "caa-fixed.lab.com")
        acme_lab.publish_records(created)
        acme_lab.lab.publish(CUSTOMER_ZONE, 'caa-fixed.lab.com. 1 IN CAA 0 issue "digicert.com"')
        result = await verify(api, caller, created)
        assert result["certificate"]["status"] == "error" and served(services, "caa-fixed.lab.com") is None
        told = re.findall(r'(\S+)\. CAA 0 issue "([^"]+)"', result["message"])
        assert told, result["message"]
        for name, value in told:
            acme_lab.lab.publish(CUSTOMER_ZONE, f'{name}. 1 IN CAA 0 issue "{value}"')
        await until_seen(services, "caa-fixed.lab.com", "CAA", told[0][1])
        await until_due(services, caller, created, clock)
        domain = await read(api, caller, created)
        assert (domain["cert"]["status"], domain["opsStatus"]) == ("active", "active")
        assert served(services, "caa-fixed.lab.com") is not None


class TestCname:
    @pytest.mark.gen_test
    async def test_the_cname_published_after_an_issue_request_refused_is_ordered_at_the_next_check(
            self, api, world, acme_lab, services, clock):
        caller, created = await add(api, world, "cname-fixed.lab.com")
        acme_lab.publish_records(created, cname=f"someone-else.{ZONE}", ttl=1)
        mark_verified(services, created)
        r = await api.post(f"/v1/domains/{created['id']}/certificates/issue", {}, token=caller.token)
        assert r.body["status"] == "error" and "no order was placed" in r.body["message"]
        target = created["validation"]["delegation"]["value"]
        acme_lab.lab.remove(CUSTOMER_ZONE, "_acme-challenge.cname-fixed.lab.com")
        acme_lab.lab.publish(CUSTOMER_ZONE, f"_acme-challenge.cname-fixed.lab.com. 1 IN CNAME {target}.")
        await until_seen(services, "_acme-challenge.cname-fixed.lab.com", "CNAME", target)
        await until_due(services, caller, created, clock)
        assert (await read(api, caller, created))["cert"]["status"] == "active"
