"""POST /v1/domains/query: filters, sort, keyset pagination and cursors."""

from __future__ import annotations

import pytest

from core.domains import query as domain_query
from core.wire import dumps, structure_body
from tests.helpers import OTHER_SPELLINGS


async def query(api, token, **body):
    return await api.post("/v1/domains/query", body, token=token)


async def seed(api, owner, clock, apexes, **fields):
    ids = []
    for apex in apexes:
        clock.advance(1)
        ids.append((await api.post("/v1/domains", {"apex": apex, **fields}, token=owner.token)).body["id"])
    return ids


async def walk(api, token, limit, **body):
    seen, cursor, pages = [], None, 0
    while True:
        page = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        r = await query(api, token, page=page, **body)
        assert r.status == 200
        seen += [d["apex"] for d in r.body["items"]]
        pages += 1
        cursor = r.body.get("nextCursor")
        if cursor is None:
            return seen, pages


class TestFilters:
    """Each filter narrows the result; total counts every match."""

    @pytest.mark.gen_test
    async def test_default_is_newest_first_with_total(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com", "b.example.com", "c.example.com"])
        r = await query(api, owner.token)
        assert [d["apex"] for d in r.body["items"]] == ["c.example.com", "b.example.com", "a.example.com"]
        assert r.body["total"] == 3 and "nextCursor" not in r.body

    @pytest.mark.gen_test
    async def test_empty_body_works(self, api, world):
        r = await api.request("POST", "/v1/domains/query", token=world.owner().token)
        assert r.status == 200 and r.body == {"items": [], "total": 0}

    @pytest.mark.gen_test
    async def test_q_matches_apex_notes_and_tags_case_insensitively(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["alpha.example.com"])
        await seed(api, owner, clock, ["b.example.com"], notes="Contains ALPHA here")
        await seed(api, owner, clock, ["c.example.com"], tags=["AlphaTeam"])
        await seed(api, owner, clock, ["d.example.com"])
        r = await query(api, owner.token, q="Alpha")
        assert sorted(d["apex"] for d in r.body["items"]) == ["alpha.example.com", "b.example.com", "c.example.com"]

    @pytest.mark.gen_test
    async def test_q_treats_like_wildcards_literally(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], notes="100% done")
        await seed(api, owner, clock, ["b.example.com"], notes="100 done")
        r = await query(api, owner.token, q="100%")
        assert [d["apex"] for d in r.body["items"]] == ["a.example.com"]

    @pytest.mark.gen_test
    async def test_every_tag_must_match(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], tags=["eu", "vip"])
        await seed(api, owner, clock, ["b.example.com"], tags=["eu"])
        r = await query(api, owner.token, tags=["vip", "eu"])
        assert [d["apex"] for d in r.body["items"]] == ["a.example.com"] and r.body["total"] == 1

    @pytest.mark.gen_test
    async def test_status_filters(self, api, world, clock, dns):
        owner = world.owner()
        ids = await seed(api, owner, clock, ["a.example.com", "b.example.com"])
        a = (await api.get(f"/v1/domains/{ids[0]}", token=owner.token)).body
        dns.publish("_acme-challenge.a.example.com", "CNAME", a["validation"]["delegation"]["value"])
        dns.publish("_service-verify.a.example.com", "TXT", a["validation"]["ownership"]["value"])
        await api.post(f"/v1/domains/{ids[0]}/verify-delegation", token=owner.token)
        for body, expected in [
            ({"validationStatus": "verified"}, ["a.example.com"]),
            ({"validationStatus": "pending"}, ["b.example.com"]),
            ({"status": "pending"}, ["a.example.com"]),
            ({"status": "action_needed"}, ["b.example.com"]),
            ({"certStatus": "none"}, ["b.example.com"]),
            ({"certStatus": "pending"}, ["a.example.com"]),  # verification started issuance
            ({"certStatus": "active"}, []),
        ]:
            r = await query(api, owner.token, **body)
            assert [d["apex"] for d in r.body["items"]] == expected, body

    @pytest.mark.gen_test
    async def test_client_filter(self, api, world, clock):
        owner = world.owner()
        client = (await api.post("/v1/clients", {"name": "A"}, token=owner.token)).body
        await seed(api, owner, clock, ["a.example.com"], clientId=client["id"])
        await seed(api, owner, clock, ["b.example.com"])
        r = await query(api, owner.token, clientId=client["id"])
        assert [d["apex"] for d in r.body["items"]] == ["a.example.com"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_a_client_filter_in_another_spelling_is_refused(self, api, world, spell):
        """Issue 45, item 3: a UUID in a body is taken as the document's pattern writes it, only."""
        owner = world.owner()
        client = (await api.post("/v1/clients", {"name": "A"}, token=owner.token)).body
        r = await query(api, owner.token, clientId=spell(client["id"]))
        assert (r.status, r.code) == (400, "validation_error") and "clientId" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_only_own_workspace(self, api, world, clock):
        await seed(api, world.owner(), clock, ["theirs.example.com"])
        r = await query(api, world.owner().token)
        assert r.body == {"items": [], "total": 0}

    @pytest.mark.gen_test
    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"status": "broken"}, "status"),
            ({"validationStatus": "done"}, "validationStatus"),
            ({"certStatus": "issued"}, "certStatus"),
            ({"clientId": "x"}, "clientId"),
            ({"tags": "eu"}, "tags"),
            ({"sort": {"by": "name"}}, "sort"),
            ({"sort": {"dir": "up"}}, "sort"),
            ({"page": {"limit": 0}}, "page"),
            ({"page": {"limit": 251}}, "page"),
            ({"page": {"limit": "10"}}, "page"),
            ({"page": []}, "page"),
            ({"sort": "apex"}, "sort"),
        ],
    )
    async def test_bad_filters_sort_and_limits_are_validation_errors(self, api, world, body, field):
        r = await query(api, world.owner().token, **body)
        assert (r.status, r.code) == (400, "validation_error")
        assert field in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_a_key_needs_domains_read(self, api, world):
        owner = world.owner()
        assert (await query(api, world.key(owner.workspace, ["domains:read"]))).status == 200
        r = await query(api, world.key(owner.workspace, ["domains:write"]))
        assert r.code == "insufficient_scope"


class TestSort:
    """sort {by, dir}."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize("by", ["createdAt", "updatedAt", "apex", "opsStatus", "validationStatus", "certStatus"])
    @pytest.mark.parametrize("direction", ["asc", "desc"])
    async def test_every_field_in_both_directions_with_id_tie_breaker(self, api, world, clock, by, direction):
        owner = world.owner()
        await seed(api, owner, clock, ["c.example.com", "a.example.com", "b.example.com"])
        r = await query(api, owner.token, sort={"by": by, "dir": direction})
        items = r.body["items"]
        keys = [(d["validation"]["status"] if by == "validationStatus" else d["cert"]["status"] if by == "certStatus" else d[by], d["id"]) for d in items]
        assert keys == sorted(keys, reverse=direction == "desc")

    @pytest.mark.gen_test
    async def test_apex_ascending(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["c.example.com", "a.example.com", "b.example.com"])
        r = await query(api, owner.token, sort={"by": "apex", "dir": "asc"})
        assert [d["apex"] for d in r.body["items"]] == ["a.example.com", "b.example.com", "c.example.com"]


class TestPagination:
    """page {limit, cursor}."""

    @pytest.mark.gen_test
    async def test_walking_pages_yields_every_domain_once(self, api, world, clock):
        owner = world.owner()
        apexes = [f"h{n:02d}.example.com" for n in range(7)]
        await seed(api, owner, clock, apexes)
        seen, pages = await walk(api, owner.token, 3)
        assert seen == list(reversed(apexes)) and pages == 3

    @pytest.mark.gen_test
    async def test_ties_on_the_sort_value_are_broken_by_id(self, api, world):
        owner = world.owner()  # the clock stands still: every createdAt is equal
        apexes = [f"h{n}.example.com" for n in range(5)]
        for apex in apexes:
            await api.post("/v1/domains", {"apex": apex}, token=owner.token)
        seen, _ = await walk(api, owner.token, 2, sort={"by": "opsStatus", "dir": "asc"})
        assert sorted(seen) == apexes

    @pytest.mark.gen_test
    async def test_no_duplicates_while_rows_are_inserted(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, [f"h{n}.example.com" for n in range(6)])
        first = await query(api, owner.token, page={"limit": 2})
        await seed(api, owner, clock, ["new1.example.com", "new2.example.com"])
        seen = [d["apex"] for d in first.body["items"]]
        cursor = first.body["nextCursor"]
        while cursor:
            r = await query(api, owner.token, page={"limit": 2, "cursor": cursor})
            seen += [d["apex"] for d in r.body["items"]]
            cursor = r.body.get("nextCursor")
        assert len(seen) == len(set(seen)) == 6

    @pytest.mark.gen_test
    async def test_total_counts_all_matches_on_every_page(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, [f"h{n}.example.com" for n in range(5)])
        first = await query(api, owner.token, page={"limit": 2})
        second = await query(api, owner.token, page={"limit": 2, "cursor": first.body["nextCursor"]})
        assert first.body["total"] == second.body["total"] == 5

    @pytest.mark.gen_test
    async def test_a_tampered_cursor_is_invalid(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com", "b.example.com"])
        cursor = (await query(api, owner.token, page={"limit": 1})).body["nextCursor"]
        tampered = ("A" if cursor[0] != "A" else "B") + cursor[1:]
        r = await query(api, owner.token, page={"limit": 1, "cursor": tampered})
        assert (r.status, r.code) == (400, "invalid_cursor")
        r = await query(api, owner.token, page={"limit": 1, "cursor": "garbage"})
        assert r.code == "invalid_cursor"

    @pytest.mark.gen_test
    async def test_a_cursor_reused_with_other_filters_or_sort_is_invalid(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com", "b.example.com"])
        cursor = (await query(api, owner.token, page={"limit": 1})).body["nextCursor"]
        for other in [{"q": "a"}, {"sort": {"by": "apex", "dir": "desc"}}, {"certStatus": "none"}]:
            r = await query(api, owner.token, page={"limit": 1, "cursor": cursor}, **other)
            assert r.code == "invalid_cursor", other

    @pytest.mark.gen_test
    async def test_the_limit_may_change_between_pages(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com", "b.example.com", "c.example.com"])
        cursor = (await query(api, owner.token, page={"limit": 1})).body["nextCursor"]
        r = await query(api, owner.token, page={"limit": 5, "cursor": cursor})
        assert len(r.body["items"]) == 2

    @pytest.mark.gen_test
    async def test_another_workspaces_cursor_is_invalid(self, api, world, clock):
        theirs = world.owner()
        await seed(api, theirs, clock, ["a.example.com", "b.example.com"])
        cursor = (await query(api, theirs.token, page={"limit": 1})).body["nextCursor"]
        r = await query(api, world.owner().token, page={"limit": 1, "cursor": cursor})
        assert r.code == "invalid_cursor"


class TestServedBytes:
    """The API writes a page from each domain's kept JSON; it must be the very document the general
    serialisation writes, and follow changes to a domain at once."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize("body", [{}, {"page": {"limit": 2}}, {"tags": ["vip"]}, {"q": "nothing-matches"},
                                      {"sort": {"by": "apex", "dir": "asc"}, "page": {"limit": 3}}])
    async def test_a_page_is_byte_for_byte_what_the_general_serialisation_writes(self, api, world, clock, services, body):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com", "b.example.com", "c.example.com"], tags=["vip"])
        await seed(api, owner, clock, ["d.example.com"])
        request = structure_body(body, domain_query.QueryDomains)
        expected = dumps(domain_query.query(services, workspace=owner.workspace, request=request)).encode()
        assert domain_query.page_json(domain_query.query_rows(services, workspace=owner.workspace, request=request)) == expected

    @pytest.mark.gen_test
    async def test_a_changed_domain_shows_its_change_on_the_next_page_read(self, api, world, clock):
        owner = world.owner()
        [domain_id] = await seed(api, owner, clock, ["a.example.com"])
        assert (await query(api, owner.token)).body["items"][0].get("notes") is None
        await api.patch(f"/v1/domains/{domain_id}", {"notes": "moved to the new DNS host"}, token=owner.token)
        assert (await query(api, owner.token)).body["items"][0]["notes"] == "moved to the new DNS host"
