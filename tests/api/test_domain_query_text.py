"""What the query's ``q`` searches (review finding 2): the apex (also typed in its Unicode form),
the notes, and each tag as a value; never the stored JSON of the tags; no control characters."""

from __future__ import annotations

import pytest

from tests.api.test_domain_query import query, seed


class TestQ:
    """Free-text search."""

    @pytest.mark.gen_test
    async def test_a_nul_is_refused_instead_of_matching_everything(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com", "b.example.com"])
        r = await query(api, owner.token, q="a\u0000")
        assert (r.status, r.code) == (400, "validation_error") and "q" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_json_punctuation_does_not_match_the_tags_text(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], tags=["eu"])
        for q in ('["', '"', "[", "]", ","):
            assert (await query(api, owner.token, q=q)).body["total"] == 0, q

    @pytest.mark.gen_test
    async def test_a_non_ascii_tag_is_found_as_typed(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], tags=["café"])
        assert (await query(api, owner.token, q="café")).body["total"] == 1
        assert (await query(api, owner.token, q="u00e9")).body["total"] == 0

    @pytest.mark.gen_test
    async def test_a_tag_is_matched_by_substring(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], tags=["enterprise"])
        assert (await query(api, owner.token, q="terpr")).body["total"] == 1

    @pytest.mark.gen_test
    async def test_an_internationalised_name_is_found_in_its_unicode_form(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["bücher.example.com", "books.example.com"])
        r = await query(api, owner.token, q="bücher")
        assert [d["apex"] for d in r.body["items"]] == ["xn--bcher-kva.example.com"]
