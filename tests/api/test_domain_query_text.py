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

    @pytest.mark.gen_test
    async def test_notes_in_capitals_are_found_by_lower_case_accented_letters(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], notes="ÉCOLE du centre")
        await seed(api, owner, clock, ["b.example.com"], notes="ecole sans accent")
        for q in ("école", "ÉCOLE", "École"):
            r = await query(api, owner.token, q=q)
            assert [d["apex"] for d in r.body["items"]] == ["a.example.com"], q

    @pytest.mark.gen_test
    async def test_a_capitalised_non_ascii_tag_is_found_in_lower_case(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], tags=["Über"])
        assert (await query(api, owner.token, q="über")).body["total"] == 1
        assert (await query(api, owner.token, q="ÜBER")).body["total"] == 1

    @pytest.mark.gen_test
    async def test_case_folding_matches_sharp_s_with_ss(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], notes="Hauptstraße 1")
        assert (await query(api, owner.token, q="HAUPTSTRASSE")).body["total"] == 1

    @pytest.mark.gen_test
    async def test_an_accent_typed_as_a_combining_mark_matches_the_precomposed_letter(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], notes="café")
        assert (await query(api, owner.token, q="CAFE\u0301")).body["total"] == 1

    @pytest.mark.gen_test
    async def test_an_underscore_is_a_literal_character_not_any_one_character(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], notes="user_1")
        await seed(api, owner, clock, ["b.example.com"], notes="userX1")
        r = await query(api, owner.token, q="user_1")
        assert [d["apex"] for d in r.body["items"]] == ["a.example.com"]

    @pytest.mark.gen_test
    async def test_a_percent_sign_is_a_literal_character_not_any_text(self, api, world, clock):
        owner = world.owner()
        await seed(api, owner, clock, ["a.example.com"], tags=["50%off"])
        await seed(api, owner, clock, ["b.example.com"], tags=["50-then-off"])
        r = await query(api, owner.token, q="50%off")
        assert [d["apex"] for d in r.body["items"]] == ["a.example.com"]

    @pytest.mark.gen_test
    async def test_changed_notes_and_tags_are_searched_in_their_new_form(self, api, world, clock):
        owner = world.owner()
        [domain_id] = await seed(api, owner, clock, ["a.example.com"], notes="alt", tags=["Ärger"])
        r = await api.patch(f"/v1/domains/{domain_id}", {"notes": "NEU", "tags": ["Öl"]}, token=owner.token)
        assert r.status == 200
        assert [(await query(api, owner.token, q=q)).body["total"] for q in ("ärger", "alt", "neu", "öl")] == [0, 0, 1, 1]
