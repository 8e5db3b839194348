"""What a request costs the database: the units of work (``Store.run``) it takes.

Every request with credentials authenticates, and clients poll their domains, so these are the
service's hottest paths: on PostgreSQL each unit is a hop to a worker thread and a pooled
connection.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.patience import PATIENCE_SECONDS


@pytest.fixture
def units(services, monkeypatch):
    """The names of the functions run as units of work, in order (the real store runs them); not
    the rate limiter's count, a unit of its own on PostgreSQL (core/ratelimit.py), before any."""
    ran: list[str] = []
    run = services.store.run

    async def counted(fn, *args, **kwargs):
        if fn != services.limiter.lease:
            ran.append(fn.__name__)
        return await run(fn, *args, **kwargs)

    monkeypatch.setattr(services.store, "run", counted)
    return ran


@pytest.mark.gen_test
async def test_a_session_is_read_in_one_unit_with_its_workspaces(api, world, units):
    owner = world.owner()
    world.member(world.owner().workspace, "operator", owner.user.email)  # a second workspace
    r = await api.get("/v1/workspaces", token=owner.token)
    assert (r.status, len(r.body["workspaces"])) == (200, 2)
    assert units == ["_person"]  # the person, their memberships and workspaces; the list needs no other


@pytest.mark.gen_test
async def test_a_session_acting_in_another_of_its_workspaces_needs_no_second_unit(api, world, units):
    owner = world.owner()
    other = world.owner().workspace
    world.member(other, "operator", owner.user.email)
    r = await api.get("/v1/workspaces", token=owner.token, headers={"X-Workspace-Id": str(other.id)})
    assert r.status == 200
    assert units == ["_person"]


@pytest.mark.gen_test
async def test_a_key_not_cached_is_read_in_one_unit(api, world, units):
    key = world.key(world.owner().workspace, ["*"])
    assert (await api.get("/v1/auth/session", token=key)).status == 200
    assert units == ["_read_and_touch", "session_of"]  # the key (and its lastUsedAt), then the answer


@pytest.mark.gen_test
async def test_a_cached_key_needs_no_unit(api, world, units):
    key = world.key(world.owner().workspace, ["*"])
    await api.get("/v1/auth/session", token=key)
    units.clear()
    assert (await api.get("/v1/auth/session", token=key)).status == 200
    assert units == ["session_of"]  # the answer's own read only


@pytest.mark.gen_test
async def test_a_cached_key_due_for_last_used_at_takes_one_unit(api, world, units, clock):
    key = world.key(world.owner().workspace, ["*"])
    await api.get("/v1/auth/session", token=key)
    clock.advance(61)
    units.clear()
    assert (await api.get("/v1/auth/session", token=key)).status == 200
    assert units == ["_read_and_touch", "session_of"]


@pytest.mark.gen_test
async def test_a_malformed_key_costs_no_unit(api, units):
    r = await api.get("/v1/auth/session", token="ac_live_" + "x" * 38)
    assert r.status == 401
    assert units == []


@pytest.mark.gen_test
async def test_a_revoked_key_is_refused_from_the_cache_after_one_read(api, world, units):
    owner = world.owner()
    r = await api.post("/v1/api-keys", {"name": "ci", "scopes": ["*"]}, token=owner.token)
    await api.post(f"/v1/api-keys/{r.body['id']}/revoke", token=owner.token)
    units.clear()
    assert (await api.get("/v1/auth/session", token=r.body["secret"])).status == 401
    assert (await api.get("/v1/auth/session", token=r.body["secret"])).status == 401
    assert units == ["_read_and_touch"]


async def keeping(services) -> None:
    """Until the domain cache serves (on PostgreSQL, once the listener hears other processes)."""
    give_up = time.monotonic() + PATIENCE_SECONDS
    while not services.store.domains.cache.live():
        assert time.monotonic() < give_up
        await asyncio.sleep(0.01)


@pytest.mark.gen_test
async def test_a_domain_read_again_by_a_cached_key_needs_no_unit(api, world, units, services):
    key = world.key(world.owner().workspace, ["*"])
    created = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=key)).body
    await keeping(services)
    await api.get(f"/v1/domains/{created['id']}", token=key)  # read, and kept
    units.clear()
    r = await api.get(f"/v1/domains/{created['id']}", token=key)
    assert (r.status, r.body["apex"], units) == (200, "shop.example.com", [])


@pytest.mark.gen_test
async def test_a_domain_read_after_its_change_is_the_changed_one(api, world, services):
    key = world.key(world.owner().workspace, ["*"])
    created = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=key)).body
    await keeping(services)
    await api.get(f"/v1/domains/{created['id']}", token=key)
    await api.patch(f"/v1/domains/{created['id']}", {"notes": "changed"}, token=key)
    assert (await api.get(f"/v1/domains/{created['id']}", token=key)).body["notes"] == "changed"
