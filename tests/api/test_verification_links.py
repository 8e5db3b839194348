"""Verification links: create, list, remind by e-mail, revoke, and the public view and verify.

Reminders go to a real SMTP server on loopback (tests/servers/smtp.py); public verification
looks records up on the test DNS server, like tests/api/test_verification.py.
"""

from __future__ import annotations

import logging
import re
import uuid
from pathlib import Path
from urllib.parse import urlencode

import attrs
import pytest

from core.config import ConfigError, SmtpConfig, config_from_dict
from tests.helpers import OTHER_SPELLINGS, UNPRINTABLE_EMAILS
from tests.servers.smtp import SmtpServer

BOTH = ["domains:write", "certificates:write"]
ALL_THREE = [*BOTH, "domains:read"]
APEX = "shop.example.com"
PORTAL = "http://127.0.0.1:8080"
RECIPIENT = "dns-admin@example.net"
LINKS = "/v1/verification-links"
PUBLIC = "/v1/public/verification-links"
DAY = 86400


@pytest.fixture(scope="module")
def smtp_server():
    server = SmtpServer().start()
    yield server
    server.stop()


@pytest.fixture
def smtp(smtp_server):
    smtp_server.reset()
    return smtp_server


@pytest.fixture
def starttls():
    return False


@pytest.fixture
def smtp_settings(smtp, starttls):
    return SmtpConfig(host=smtp.host, port=smtp.port, starttls=starttls, timeout_seconds=2)


@pytest.fixture
def config(config, smtp_settings):
    return attrs.evolve(config, smtp=smtp_settings)


async def make_domain(api, owner, **fields):
    r = await api.post("/v1/domains", {"apex": APEX, **fields}, token=owner.token)
    assert r.status == 201, r.body
    return r.body


async def make_link(api, token, domain_id, **fields):
    r = await api.post(LINKS, {"domainId": domain_id, **fields}, token=token)
    assert r.status == 201, r.body
    return r.body


async def owner_with_link(api, world, **fields):
    owner = world.owner()
    domain = await make_domain(api, owner)
    return owner, domain, await make_link(api, owner.token, domain["id"], **fields)


def token_of(link):
    return link["url"].rsplit("/", 1)[1]


def publish_both(dns, domain):
    dns.publish(domain["validation"]["delegation"]["host"], "CNAME", domain["validation"]["delegation"]["value"])
    dns.publish(domain["validation"]["ownership"]["host"], "TXT", domain["validation"]["ownership"]["value"])


class TestCreate:
    """POST /v1/verification-links."""

    @pytest.mark.gen_test
    async def test_a_new_link_is_active_for_seven_days(self, api, world):
        _, domain, link = await owner_with_link(api, world)
        assert re.fullmatch(re.escape(PORTAL) + r"/verify/vl_[A-Za-z0-9_-]{43}", link["url"])
        assert (link["domainId"], link["apex"], link["status"]) == (domain["id"], APEX, "active")
        assert (link["createdAt"], link["expiresAt"]) == ("2026-11-22T10:00:00.000Z", "2026-11-29T10:00:00.000Z")
        assert not {"recipientEmail", "lastRemindedAt", "revokedAt"} & set(link)

    @pytest.mark.gen_test
    async def test_expiry_and_recipient_are_taken(self, api, world):
        _, _, link = await owner_with_link(api, world, expiresInDays=30, recipientEmail=f" {RECIPIENT} ")
        assert (link["expiresAt"], link["recipientEmail"]) == ("2026-12-22T10:00:00.000Z", RECIPIENT)

    @pytest.mark.gen_test
    async def test_an_integral_number_of_days_written_as_a_float_is_taken(self, api, world):
        _, _, link = await owner_with_link(api, world, expiresInDays=23.0)
        assert link["expiresAt"] == "2026-12-15T10:00:00.000Z"

    @pytest.mark.gen_test
    @pytest.mark.parametrize("days", [0, 31, -1])
    async def test_expiry_outside_one_to_thirty_days_is_refused(self, api, world, days):
        owner = world.owner()
        domain = await make_domain(api, owner)
        r = await api.post(LINKS, {"domainId": domain["id"], "expiresInDays": days}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error")
        assert "1 to 30 days" in r.body["details"]["fieldErrors"]["expiresInDays"][0]

    @pytest.mark.gen_test
    async def test_a_bad_recipient_is_refused(self, api, world):
        owner = world.owner()
        domain = await make_domain(api, owner)
        r = await api.post(LINKS, {"domainId": domain["id"], "recipientEmail": "not an address"}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error") and "recipientEmail" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("email", UNPRINTABLE_EMAILS)
    async def test_a_recipient_with_a_control_format_or_space_character_is_refused(self, api, world, email):
        owner = world.owner()
        domain = await make_domain(api, owner)
        r = await api.post(LINKS, {"domainId": domain["id"], "recipientEmail": email}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error") and "recipientEmail" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_an_unknown_domain_is_not_found(self, api, world):
        r = await api.post(LINKS, {"domainId": str(uuid.uuid4())}, token=world.owner().token)
        assert (r.status, r.code, r.body["message"]) == (404, "not_found", "Domain not found.")

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_not_found(self, api, world):
        domain = await make_domain(api, world.owner())
        r = await api.post(LINKS, {"domainId": domain["id"]}, token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")


class TestList:
    """GET /v1/verification-links."""

    @pytest.mark.gen_test
    async def test_newest_first_with_their_urls(self, api, world, clock):
        owner, domain, first = await owner_with_link(api, world)
        clock.advance(60)
        second = await make_link(api, owner.token, domain["id"])
        r = await api.get(LINKS, token=owner.token)
        assert r.status == 200
        assert [(x["id"], x["url"]) for x in r.body["items"]] == [(second["id"], second["url"]), (first["id"], first["url"])]

    @pytest.mark.gen_test
    async def test_links_of_the_same_millisecond_are_newest_first_too(self, api, world):
        owner, domain, first = await owner_with_link(api, world)
        second = await make_link(api, owner.token, domain["id"])
        assert [x["id"] for x in (await api.get(LINKS, token=owner.token)).body["items"]] == [second["id"], first["id"]]

    @pytest.mark.gen_test
    async def test_the_domain_filter(self, api, world):
        owner, _, _ = await owner_with_link(api, world)
        other = (await api.post("/v1/domains", {"apex": "www.example.org"}, token=owner.token)).body
        wanted = await make_link(api, owner.token, other["id"])
        r = await api.get(f"{LINKS}?domainId={other['id']}", token=owner.token)
        assert [x["id"] for x in r.body["items"]] == [wanted["id"]]

    @pytest.mark.gen_test
    async def test_a_malformed_domain_filter_is_refused(self, api, world):
        r = await api.get(f"{LINKS}?domainId=nope", token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error") and "domainId" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_a_domain_filter_in_another_spelling_is_refused(self, api, world, spell):
        """Issue 45, item 3: refused as ``nope`` is, though it names one of the workspace's domains."""
        owner = world.owner()
        domain = await make_domain(api, owner)
        r = await api.get(f"{LINKS}?{urlencode({'domainId': spell(domain['id'])})}", token=owner.token)
        assert (r.status, r.code) == (400, "validation_error") and "domainId" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_a_foreign_domain_filter_is_not_found(self, api, world):
        domain = await make_domain(api, world.owner())
        r = await api.get(f"{LINKS}?domainId={domain['id']}", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_expired_and_revoked_links_are_listed_with_their_status(self, api, world, clock):
        owner, domain, revoked = await owner_with_link(api, world)
        await api.post(f"{LINKS}/{revoked['id']}/revoke", token=owner.token)
        expired = await make_link(api, owner.token, domain["id"], expiresInDays=1)
        clock.advance(DAY)
        r = await api.get(LINKS, token=world.session_token(owner.user.email))
        statuses = {x["id"]: (x["status"], x.get("revokedAt")) for x in r.body["items"]}
        assert statuses == {expired["id"]: ("expired", None), revoked["id"]: ("revoked", "2026-11-22T10:00:00.000Z")}

    @pytest.mark.gen_test
    async def test_the_status_filter(self, api, world, clock):
        owner, domain, revoked = await owner_with_link(api, world)
        await api.post(f"{LINKS}/{revoked['id']}/revoke", token=owner.token)
        expired = await make_link(api, owner.token, domain["id"], expiresInDays=1)
        clock.advance(DAY)
        session = world.session_token(owner.user.email)
        active = await make_link(api, session, domain["id"])
        for status, link in (("active", active), ("expired", expired), ("revoked", revoked)):
            r = await api.get(f"{LINKS}?status={status}", token=session)
            assert ([x["id"] for x in r.body["items"]], r.body["total"]) == ([link["id"]], 1)

    @pytest.mark.gen_test
    async def test_pages_walk_every_link_once_newest_first(self, api, world):
        owner, domain, first = await owner_with_link(api, world)
        made = [first] + [await make_link(api, owner.token, domain["id"]) for _ in range(4)]
        seen, path = [], f"{LINKS}?domainId={domain['id']}&limit=2"
        while True:
            r = await api.get(path, token=owner.token)
            assert r.body["total"] == 5
            seen += [x["id"] for x in r.body["items"]]
            if "nextCursor" not in r.body:
                break
            path = f"{LINKS}?domainId={domain['id']}&limit=2&cursor={r.body['nextCursor']}"
        assert seen == [link["id"] for link in reversed(made)]

    @pytest.mark.gen_test
    async def test_a_cursor_is_refused_with_other_filters(self, api, world):
        owner, domain, _ = await owner_with_link(api, world)
        await make_link(api, owner.token, domain["id"])
        cursor = (await api.get(f"{LINKS}?limit=1", token=owner.token)).body["nextCursor"]
        r = await api.get(f"{LINKS}?limit=1&status=active&cursor={cursor}", token=owner.token)
        assert (r.status, r.code) == (400, "invalid_cursor")

    @pytest.mark.gen_test
    @pytest.mark.parametrize(("query", "field"), [("limit=0", "limit"), ("limit=251", "limit"), ("limit=two", "limit"),
                                                  ("status=gone", "status")])
    async def test_a_bad_limit_or_status_is_refused(self, api, world, query, field):
        r = await api.get(f"{LINKS}?{query}", token=world.owner().token)
        assert (r.status, r.code) == (400, "validation_error") and field in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_another_workspaces_links_are_not_listed(self, api, world):
        await owner_with_link(api, world)
        assert (await api.get(LINKS, token=world.owner().token)).body == {"items": [], "total": 0}


class TestAccess:
    """Roles and scopes (spec, Authentication rules 2 and 4)."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize("role", ["owner", "admin", "operator"])
    async def test_writer_roles_may_use_every_endpoint(self, api, world, smtp, role):
        owner = world.owner()
        domain = await make_domain(api, owner)
        actor = owner if role == "owner" else world.member(owner.workspace, role)
        link = await make_link(api, actor.token, domain["id"], recipientEmail=RECIPIENT)
        assert (await api.get(LINKS, token=actor.token)).status == 200
        assert (await api.post(f"{LINKS}/{link['id']}/remind", token=actor.token)).status == 200
        assert (await api.post(f"{LINKS}/{link['id']}/revoke", token=actor.token)).status == 204

    @pytest.mark.gen_test
    @pytest.mark.parametrize(("method", "path"), [("POST", ""), ("GET", ""), ("POST", "/{id}/remind"), ("POST", "/{id}/revoke")])
    async def test_read_only_may_not_create_list_remind_or_revoke(self, api, world, method, path):
        owner, domain, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        reader = world.member(owner.workspace, "read_only")
        body = {"domainId": domain["id"]} if (method, path) == ("POST", "") else None
        r = await api.request(method, LINKS + path.format(id=link["id"]), json_body=body, token=reader.token)
        assert (r.status, r.code) == (403, "forbidden")

    @pytest.mark.gen_test
    async def test_a_key_with_domains_write_alone_may_not_create(self, api, world):
        owner = world.owner()
        domain = await make_domain(api, owner)
        r = await api.post(LINKS, {"domainId": domain["id"]}, token=world.key(owner.workspace, ["domains:write"]))
        assert (r.status, r.code) == (403, "insufficient_scope") and "certificates:write" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_key_with_both_write_scopes_may_create_remind_and_revoke(self, api, world, smtp):
        owner = world.owner()
        domain = await make_domain(api, owner)
        key = world.key(owner.workspace, BOTH)
        link = await make_link(api, key, domain["id"], recipientEmail=RECIPIENT)
        assert (await api.post(f"{LINKS}/{link['id']}/remind", token=key)).status == 200
        assert (await api.post(f"{LINKS}/{link['id']}/revoke", token=key)).status == 204

    @pytest.mark.gen_test
    async def test_listing_also_needs_domains_read(self, api, world):
        owner = world.owner()
        r = await api.get(LINKS, token=world.key(owner.workspace, BOTH))
        assert (r.status, r.code) == (403, "insufficient_scope") and "domains:read" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_key_with_all_three_scopes_may_list(self, api, world):
        owner, _, link = await owner_with_link(api, world)
        r = await api.get(LINKS, token=world.key(owner.workspace, ALL_THREE))
        assert [x["url"] for x in r.body["items"]] == [link["url"]]

    @pytest.mark.gen_test
    async def test_a_star_key_may_create_and_list(self, api, world):
        owner = world.owner()
        domain = await make_domain(api, owner)
        key = world.key(owner.workspace, ["*"])
        link = await make_link(api, key, domain["id"])
        assert [x["id"] for x in (await api.get(LINKS, token=key)).body["items"]] == [link["id"]]

    @pytest.mark.gen_test
    async def test_no_bearer_is_unauthorized(self, api):
        assert (await api.get(LINKS)).code == "unauthorized"


class TestRemind:
    """POST /v1/verification-links/:id/remind sends the link through SMTP."""

    @pytest.mark.gen_test
    async def test_the_email_names_both_records_the_link_and_its_expiry(self, api, world, smtp):
        owner, domain, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        [message] = smtp.messages
        assert (message["Subject"], message["To"], message["From"]) == (
            f"DNS records needed for {APEX}", RECIPIENT, "certificates@localhost",
        )
        assert (message.envelope_to, message["Reply-To"]) == ([RECIPIENT], owner.user.email)
        body = message.get_content().replace("\r\n", "\n")  # SMTP carries CRLF line ends
        for record in (domain["validation"]["delegation"], domain["validation"]["ownership"]):
            assert f"Type:  {record['type']}\n   Host:  {record['host']}\n   Value: {record['value']}\n   TTL:   300" in body
        assert link["url"] in body and "until 2026-11-29 10:00 UTC" in body
        assert f'on behalf of {owner.user.email}, owner of the workspace "Acme"' in body

    @pytest.mark.gen_test
    async def test_the_answer_records_when_it_was_sent(self, api, world, smtp, clock):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        clock.advance(90)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (r.status, r.body["lastRemindedAt"], r.body["url"]) == (200, "2026-11-22T10:01:30.000Z", link["url"])

    @pytest.mark.gen_test
    async def test_one_reminder_per_link_per_hour(self, api, world, smtp, clock):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        assert (await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)).status == 200
        clock.advance(3599)
        again = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (again.status, again.code) == (409, "reminded_recently") and len(smtp.messages) == 1
        clock.advance(1)
        assert (await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)).status == 200

    @pytest.mark.gen_test
    async def test_one_recipient_gets_at_most_five_reminders_a_day_across_links(self, api, world, smtp, clock):
        owner, domain, first = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        links = [first] + [await make_link(api, owner.token, domain["id"], recipientEmail=RECIPIENT.upper())
                           for _ in range(19)]
        answers = [await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token) for link in links]
        assert [a.status for a in answers] == [200] * 5 + [409] * 15 and len(smtp.messages) == 5
        assert answers[5].code == "reminded_recently"
        assert answers[5].body["message"] == (
            "dns-admin@example.net has had 5 reminders in the last 24 hours, the most the service sends to one "
            "address; send another after 2026-11-23 10:00 UTC."
        )

    @pytest.mark.gen_test
    async def test_the_daily_count_is_per_recipient_and_frees_up_after_a_day(self, api, world, smtp, clock):
        owner, domain, first = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        links = [first] + [await make_link(api, owner.token, domain["id"], recipientEmail=RECIPIENT) for _ in range(5)]
        for link in links[:5]:
            assert (await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)).status == 200
        other = await make_link(api, owner.token, domain["id"], recipientEmail="someone-else@example.net")
        assert (await api.post(f"{LINKS}/{other['id']}/remind", token=owner.token)).status == 200
        assert (await api.post(f"{LINKS}/{links[5]['id']}/remind", token=owner.token)).status == 409
        clock.advance(DAY)
        key = world.key(owner.workspace, BOTH)  # the owner's session ended meanwhile
        assert (await api.post(f"{LINKS}/{links[5]['id']}/remind", token=key)).status == 200

    @pytest.mark.gen_test
    async def test_a_reminder_that_could_not_be_sent_does_not_count(self, api, world, smtp):
        owner, domain, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        smtp.refuse_recipients(550, "5.1.1 No such mailbox")
        assert (await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)).status == 502
        smtp.reset()
        for _ in range(5):
            extra = await make_link(api, owner.token, domain["id"], recipientEmail=RECIPIENT)
            assert (await api.post(f"{LINKS}/{extra['id']}/remind", token=owner.token)).status == 200

    @pytest.mark.gen_test
    @pytest.mark.parametrize("smtp_settings", [SmtpConfig()])
    async def test_without_smtp_it_is_a_conflict(self, api, world):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (r.status, r.code) == (409, "smtp_not_configured") and "[smtp] host" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_link_without_recipient_is_a_conflict(self, api, world, smtp):
        owner, _, link = await owner_with_link(api, world)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (r.status, r.code) == (409, "no_recipient") and smtp.messages == []

    @pytest.mark.gen_test
    async def test_an_expired_link_is_not_sent(self, api, world, smtp, clock):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT, expiresInDays=1)
        clock.advance(DAY)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=world.session_token(owner.user.email))
        assert (r.status, r.code) == (409, "link_not_active") and "expired" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_revoked_link_is_not_sent(self, api, world, smtp):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        await api.post(f"{LINKS}/{link['id']}/revoke", token=owner.token)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (r.status, r.code) == (409, "link_not_active") and smtp.messages == []

    @pytest.mark.gen_test
    async def test_a_refusing_mail_server_is_an_upstream_error(self, api, world, smtp):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        smtp.refuse_recipients(550, "5.1.1 No such mailbox")
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (r.status, r.code) == (502, "upstream_error")
        assert f"{smtp.host}:{smtp.port}" in r.body["message"] and "refused the recipient (550 5.1.1 No such mailbox)" in r.body["message"]
        assert "lastRemindedAt" not in (await api.get(LINKS, token=world.key(owner.workspace, ["*"]))).body["items"][0]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("smtp_settings", [SmtpConfig(host="127.0.0.1", port=1, starttls=False, timeout_seconds=2)])
    async def test_an_unreachable_mail_server_is_an_upstream_error(self, api, world):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (r.status, r.code) == (502, "upstream_error") and "127.0.0.1:1" in r.body["message"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("starttls", [True])
    async def test_a_server_without_starttls_is_never_used_in_clear(self, api, world, smtp):
        owner, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=owner.token)
        assert (r.status, r.code) == (502, "upstream_error") and "STARTTLS" in r.body["message"]
        assert smtp.messages == []

    @pytest.mark.gen_test
    async def test_another_workspaces_link_is_not_found(self, api, world, smtp):
        _, _, link = await owner_with_link(api, world, recipientEmail=RECIPIENT)
        r = await api.post(f"{LINKS}/{link['id']}/remind", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found") and smtp.messages == []


class TestRevoke:
    """POST /v1/verification-links/:id/revoke."""

    @pytest.mark.gen_test
    async def test_revoking_twice_answers_204_and_keeps_the_first_time(self, api, world, clock):
        owner, _, link = await owner_with_link(api, world)
        assert (await api.post(f"{LINKS}/{link['id']}/revoke", token=owner.token)).status == 204
        clock.advance(60)
        assert (await api.post(f"{LINKS}/{link['id']}/revoke", token=owner.token)).status == 204
        [listed] = (await api.get(LINKS, token=owner.token)).body["items"]
        assert (listed["status"], listed["revokedAt"]) == ("revoked", "2026-11-22T10:00:00.000Z")

    @pytest.mark.gen_test
    # A fixed id: it is in the test's id, which every pytest-xdist worker must collect alike.
    @pytest.mark.parametrize("link_id", ["not-a-uuid", "823e15f8-f541-429b-9e57-4a1c280d2a9c"])
    async def test_an_unknown_link_is_not_found(self, api, world, link_id):
        r = await api.post(f"{LINKS}/{link_id}/revoke", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_another_workspaces_link_is_not_found(self, api, world):
        _, _, link = await owner_with_link(api, world)
        r = await api.post(f"{LINKS}/{link['id']}/revoke", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")
        assert (await api.get(f"{PUBLIC}/{token_of(link)}")).status == 200


class TestPublicView:
    """GET /v1/public/verification-links/:token, without a bearer."""

    @pytest.mark.gen_test
    async def test_it_shows_both_records_and_the_statuses(self, api, world):
        _, domain, link = await owner_with_link(api, world)
        r = await api.get(f"{PUBLIC}/{token_of(link)}")
        assert r.status == 200
        assert r.body == {
            "apex": APEX,
            "expiresAt": link["expiresAt"],
            "validation": domain["validation"],
            "cert": {"status": "none"},
            "opsStatus": "action_needed",
        }

    @pytest.mark.gen_test
    async def test_nothing_else_about_the_workspace_is_shown(self, api, world):
        owner = world.owner()
        client = (await api.post("/v1/clients", {"name": "Big Customer"}, token=owner.token)).body
        domain = await make_domain(
            api, owner, notes="internal notes", tags=["vip"], contactEmail="ops@example.com", clientId=client["id"],
        )
        link = await make_link(api, owner.token, domain["id"], recipientEmail=RECIPIENT)
        r = await api.get(f"{PUBLIC}/{token_of(link)}")
        shown = str(r.body)
        for private in (str(owner.workspace.id), domain["id"], client["id"], "internal notes", "vip", "ops@example.com",
                        RECIPIENT, owner.user.email, "Acme", link["id"]):
            assert private not in shown

    @pytest.mark.gen_test
    async def test_a_bearer_is_not_needed_and_a_bad_one_is_ignored(self, api, world):
        _, _, link = await owner_with_link(api, world)
        r = await api.get(f"{PUBLIC}/{token_of(link)}", token="ac_live_nonsense")
        assert r.status == 200


class TestPublicVerify:
    """POST /v1/public/verification-links/:token/verify is verify-delegation for the link's domain."""

    @pytest.mark.gen_test
    async def test_both_records_published_verify_the_domain_and_start_issuance(self, api, world, dns):
        owner, domain, link = await owner_with_link(api, world)
        publish_both(dns, domain)
        r = await api.post(f"{PUBLIC}/{token_of(link)}/verify")
        assert (r.status, r.body["status"], r.body["certificate"]["status"]) == (200, "verified", "pending")
        after = (await api.get(f"/v1/domains/{domain['id']}", token=owner.token)).body
        assert (after["validation"]["status"], after["cert"]["status"]) == ("verified", "pending")

    @pytest.mark.gen_test
    async def test_nothing_published_stays_pending_and_says_why(self, api, world):
        _, _, link = await owner_with_link(api, world)
        r = await api.post(f"{PUBLIC}/{token_of(link)}/verify")
        assert (r.status, r.body["status"]) == (200, "pending") and "NXDOMAIN" in r.body["message"]
        assert "certificate" not in r.body

    @pytest.mark.gen_test
    async def test_the_view_shows_the_outcome(self, api, world, dns):
        _, domain, link = await owner_with_link(api, world)
        publish_both(dns, domain)
        await api.post(f"{PUBLIC}/{token_of(link)}/verify")
        view = (await api.get(f"{PUBLIC}/{token_of(link)}")).body
        assert (view["validation"]["status"], view["validation"]["lastCheckedAt"], view["opsStatus"]) == (
            "verified", "2026-11-22T10:00:00.000Z", "pending",
        )


class TestDeadLinks:
    """Expired, revoked and unknown tokens say so clearly."""

    @pytest.mark.gen_test
    @pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("POST", "/verify")])
    async def test_an_expired_link_is_gone(self, api, world, clock, method, suffix):
        _, _, link = await owner_with_link(api, world)
        clock.advance(7 * DAY - 1)
        assert (await api.get(f"{PUBLIC}/{token_of(link)}")).status == 200
        clock.advance(1)
        r = await api.request(method, f"{PUBLIC}/{token_of(link)}{suffix}")
        assert (r.status, r.code) == (410, "link_expired")
        assert "expired on 2026-11-29 10:00 UTC" in r.body["message"] and "new one" in r.body["message"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("POST", "/verify")])
    async def test_a_revoked_link_is_gone(self, api, world, method, suffix):
        owner, _, link = await owner_with_link(api, world)
        await api.post(f"{LINKS}/{link['id']}/revoke", token=owner.token)
        r = await api.request(method, f"{PUBLIC}/{token_of(link)}{suffix}")
        assert (r.status, r.code) == (410, "link_revoked") and "revoked" in r.body["message"]

    @pytest.mark.gen_test
    @pytest.mark.parametrize("token", ["vl_" + "A" * 43, "vl_short", "ac_live_x"])
    async def test_an_unknown_token_is_not_found(self, api, token):
        r = await api.get(f"{PUBLIC}/{token}")
        assert (r.status, r.code) == (404, "not_found") and "does not exist" in r.body["message"]

    @pytest.mark.gen_test
    async def test_an_unknown_token_cannot_be_verified(self, api):
        r = await api.post(f"{PUBLIC}/vl_{'A' * 43}/verify")
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_a_link_goes_with_its_domain(self, api, world):
        owner, domain, link = await owner_with_link(api, world)
        await api.delete(f"/v1/domains/{domain['id']}", token=owner.token)
        assert (await api.get(f"{PUBLIC}/{token_of(link)}")).code == "not_found"
        assert (await api.get(LINKS, token=owner.token)).body == {"items": [], "total": 0}


class TestSecrecy:
    """The token is a credential: it is kept out of the database and the log."""

    @pytest.mark.gen_test
    async def test_the_links_row_never_holds_the_token(self, api, world, services):
        owner, _, link = await owner_with_link(api, world)
        row = services.store.verification_links.get(owner.workspace.id, uuid.UUID(link["id"]))
        assert token_of(link)[3:] not in repr(row)

    @pytest.mark.sqlite_only
    @pytest.mark.gen_test
    async def test_the_token_is_never_stored_in_clear(self, api, world, services):
        _, _, link = await owner_with_link(api, world)
        services.store.db.conn.execute("PRAGMA wal_checkpoint(FULL)")
        path = Path(services.config.storage.path)
        stored = path.read_bytes() + Path(f"{path}-wal").read_bytes()
        assert token_of(link).encode() not in stored and token_of(link)[3:].encode() not in stored

    @pytest.mark.gen_test
    async def test_the_access_log_shows_no_token(self, api, world, caplog):
        _, _, link = await owner_with_link(api, world)
        with caplog.at_level(logging.INFO, logger="access"):
            await api.get(f"{PUBLIC}/{token_of(link)}")
            await api.post(f"{PUBLIC}/{token_of(link)}/verify")
        lines = [rec.getMessage() for rec in caplog.records if rec.name == "access"]
        assert any(f"GET {PUBLIC}/vl_<redacted> " in line for line in lines)
        assert any(f"POST {PUBLIC}/vl_<redacted>/verify " in line for line in lines)
        assert not any(token_of(link) in line for line in lines)

    @pytest.mark.gen_test
    async def test_a_mistyped_path_under_a_token_keeps_it_out_of_the_log_too(self, api, world, caplog):
        _, _, link = await owner_with_link(api, world)
        with caplog.at_level(logging.INFO, logger="access"):
            r = await api.post(f"{PUBLIC}/{token_of(link)}/verify/now")
        assert (r.status, r.code) == (404, "not_found") and token_of(link) not in r.body["message"]
        lines = [rec.getMessage() for rec in caplog.records if rec.name == "access"]
        assert lines and not any(token_of(link) in line for line in lines)


class TestRateLimits:
    """Both link families count in their own bucket within the shared one."""

    @pytest.mark.gen_test
    async def test_the_workspace_endpoints_use_the_verification_links_bucket(self, api, world):
        r = await api.get(LINKS, token=world.owner().token)
        assert r.headers["RateLimit-Policy"] == '"api";q=600;w=900, "verification_links";q=60;w=900'

    @pytest.mark.gen_test
    async def test_the_public_endpoints_use_their_own_bucket(self, api):
        r = await api.get(f"{PUBLIC}/vl_unknown")
        assert r.headers["RateLimit-Policy"] == '"api";q=600;w=900, "public_verification_links";q=60;w=900'


class TestSmtpConfig:
    """[smtp] in the configuration file."""

    def test_a_password_is_never_sent_in_clear_across_the_network(self):
        with pytest.raises(ConfigError, match="^smtp.starttls: must be true when smtp.username is set"):
            config_from_dict({"smtp": {"host": "mail.example.com", "username": "u", "starttls": False}})

    def test_a_loopback_relay_may_take_a_login_without_starttls(self):
        config = config_from_dict({"smtp": {"host": "127.0.0.1", "username": "u", "starttls": False}})
        assert config.smtp.username == "u"
