"""Issue 38, item 2: the background checks are fair between workspaces. One workspace's backlog of
hostnames in a zone whose nameservers never answer (names the test DNS server leaves unanswered)
delays another workspace's checks by one turn, not by all of them; a workspace runs at most
``[lifecycle] checks_per_workspace`` checks at once; and a zone that gave no answer is left alone
for a while, its other hostnames' checks deferred without a lookup."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from core.lifecycle.quiet_zones import quiet_seconds
from core.lifecycle.watcher import LifecycleWatcher

DEAD_ZONE = "dead-zone.com"
NOISY = 40  # more than the checks that run at once (32)


@pytest.fixture
def dns_timeout():
    return 0.5  # each lookup in the dead zone is given up on this soon


async def noisy_backlog(api, world, dns, count=NOISY):
    """A workspace with ``count`` pending domains in a zone whose DNS never answers."""
    owner = world.owner()
    apexes = [f"h{n}.{DEAD_ZONE}" for n in range(count)]
    r = await api.post("/v1/domains/bulk", {"apexList": apexes}, token=owner.token)
    assert r.status == 200 and len(r.body["created"]) == count, r.body
    dns.zone.silent_below.add(DEAD_ZONE)
    return owner


async def quiet_domain(api, world, dns):
    """Another workspace's domain, both records published."""
    owner = world.owner()
    r = await api.post("/v1/domains", {"apex": "shop.quiet-tenant.com"}, token=owner.token)
    assert r.status == 201, r.body
    created = r.body
    dns.publish(f"_acme-challenge.{created['apex']}", "CNAME", created["validation"]["delegation"]["value"])
    dns.publish(f"_service-verify.{created['apex']}", "TXT", created["validation"]["ownership"]["value"])
    return owner, created


def rows_of(services, owner):
    ids = services.store.sql.execute("SELECT id FROM domains WHERE workspace_id = ?", [str(owner.workspace.id)]).fetchall()
    return [services.store.domains.get(owner.workspace.id, uuid.UUID(d)) for (d,) in ids]


def lookups_of(dns, zone, since=0):
    """The CNAME lookups of names in ``zone`` the test DNS server heard, from its ``since``-th query on."""
    return [name for name, qtype in dns.zone.queries[since:] if name.endswith("." + zone) and qtype == "CNAME"]


@pytest.mark.gen_test
async def test_a_quiet_workspace_is_checked_while_a_noisy_ones_backlog_waits(api, world, services, clock, dns):
    noisy = await noisy_backlog(api, world, dns)
    clock.advance(1)  # the noisy workspace's checks fall due first
    quiet, created = await quiet_domain(api, world, dns)
    clock.advance(80)
    sweep = asyncio.ensure_future(LifecycleWatcher(services).tick())
    while services.store.domains.get(quiet.workspace.id, uuid.UUID(created["id"])).validation_status != "verified":
        assert not sweep.done(), "the sweep ended without verifying the quiet workspace's domain"
        await asyncio.sleep(0.01)
    checked = sum(1 for row in rows_of(services, noisy) if row.validation_checked_at is not None)
    await sweep
    assert checked == 0  # every noisy check still waiting for its lookups when the quiet one was done


@pytest.mark.gen_test
async def test_a_workspace_runs_at_most_its_cap_of_checks_at_once(api, world, services, clock, dns):
    await noisy_backlog(api, world, dns)
    clock.advance(80)
    heard = len(dns.zone.queries)
    await LifecycleWatcher(services).tick()
    # The first checks, at the cap, spend the timeout; the zone is then left alone.
    assert len(lookups_of(dns, DEAD_ZONE, heard)) == services.config.lifecycle.checks_per_workspace


@pytest.mark.gen_test
async def test_a_zone_that_gave_no_answer_defers_its_other_hostnames_checks(api, world, services, clock, dns):
    noisy = await noisy_backlog(api, world, dns)
    clock.advance(80)
    await LifecycleWatcher(services).tick()
    deferred = [row for row in rows_of(services, noisy) if row.validation_checked_at is None]
    assert len(deferred) == NOISY - services.config.lifecycle.checks_per_workspace
    assert all((row.next_check_at - clock.now()).total_seconds() >= quiet_seconds(services.config.lifecycle) - 1 for row in deferred)


@pytest.mark.gen_test
async def test_a_zone_is_asked_again_once_its_quiet_spell_is_over(api, world, services, clock, dns):
    await noisy_backlog(api, world, dns, count=2)
    watcher = LifecycleWatcher(services)
    clock.advance(80)
    await watcher.tick()
    heard = len(dns.zone.queries)
    clock.advance(quiet_seconds(services.config.lifecycle) * 1.3)  # past the quiet spell and the checks' next turn, jitter included
    await watcher.tick()
    assert len(lookups_of(dns, DEAD_ZONE, heard)) == 2
