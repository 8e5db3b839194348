"""Certificates with the sandbox provider: issue, refresh, query, get, bundle, events, CAA.

DNS is the real test server on 127.0.0.1; time moves only when a test advances the clock.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

import pytest

from tests.helpers import OTHER_SPELLINGS, mark_verified

WRITE = ["certificates:write"]
READ = ["certificates:read"]


async def new_domain(api, owner, apex="shop.example.com"):
    return (await api.post("/v1/domains", {"apex": apex}, token=owner.token)).body


async def verified_domain(api, world, services, apex="shop.example.com"):
    owner = world.owner()
    d = await new_domain(api, owner, apex)
    mark_verified(services, d)
    return owner, d


async def issue(api, owner, d, body=None, *, path="certificates/issue", **kw):
    return await api.post(f"/v1/domains/{d['id']}/{path}", body, token=kw.pop("token", owner.token), **kw)


def events(services, owner):
    return [(e.type, e.data) for e in services.store.outbox.for_workspace(owner.workspace.id)]


async def domain(api, owner, d):
    return (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body


class TestIssue:
    """POST /v1/domains/:id/certificates/issue."""

    @pytest.mark.gen_test
    async def test_an_unverified_domain_is_a_conflict(self, api, world):
        owner = world.owner()
        d = await new_domain(api, owner)
        r = await issue(api, owner, d, {})
        assert (r.status, r.code) == (409, "delegation_not_verified")

    @pytest.mark.gen_test
    @pytest.mark.parametrize("path", ["certificates/issue", "issue"])
    async def test_the_alias_path_refuses_the_same_way(self, api, world, services, path):
        owner = world.owner()
        d = await new_domain(api, owner)
        assert (await issue(api, owner, d, {}, path=path)).code == "delegation_not_verified"
        mark_verified(services, d)
        assert (await issue(api, owner, d, {"wildcard": "yes"}, path=path)).code == "validation_error"

    @pytest.mark.gen_test
    async def test_wildcard_is_refused_on_a_verified_domain(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        r = await issue(api, owner, d, {"wildcard": True})
        assert (r.status, r.code) == (400, "wildcard_not_supported_in_minimal_edge_provider_mode")

    @pytest.mark.gen_test
    async def test_an_unverified_wildcard_request_is_still_a_conflict(self, api, world):
        owner = world.owner()
        d = await new_domain(api, owner)
        assert (await issue(api, owner, d, {"wildcard": True})).code == "delegation_not_verified"

    @pytest.mark.gen_test
    async def test_issuance_starts_pending(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        r = await issue(api, owner, d, {})
        assert r.status == 200
        assert r.body["status"] == "pending"
        assert "issuing the certificate" in r.body["message"]
        after = await domain(api, owner, d)
        assert after["cert"]["status"] == "pending" and after["opsStatus"] == "pending"
        assert uuid.UUID(after["cert"]["traceId"])

    @pytest.mark.gen_test
    async def test_ca_chain_and_wildcard_false_are_accepted(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        r = await issue(api, owner, d, {"wildcard": False, "ca": "digicert", "chain": "long"})
        assert (r.status, r.body["status"]) == (200, "pending")

    @pytest.mark.gen_test
    async def test_no_body_is_the_supported_flow(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        assert (await issue(api, owner, d)).status == 200

    @pytest.mark.gen_test
    async def test_the_alias_path_issues_too(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        r = await issue(api, owner, d, {}, path="issue")
        assert (r.status, r.body["status"]) == (200, "pending")

    @pytest.mark.gen_test
    async def test_the_certificate_is_recorded(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        c = (await api.get(f"/v1/certificates/{summary['certificateId']}", token=owner.token)).body
        assert c["domainId"] == d["id"] and c["apex"] == "shop.example.com"
        assert (c["status"], c["wildcard"], c["bundleAvailable"]) == ("pending", False, False)
        assert c["provider"] == "edge_provider_for_saas" and c["issuer"] == "Edge Provider Managed CA"
        assert (c["providerHostnameStatus"], c["providerStatus"]) == ("pending", "pending_validation")
        assert "notBefore" not in c and "nextRenewalAt" not in c

    @pytest.mark.gen_test
    async def test_an_already_active_domain_is_not_issued_again(self, api, world, services, clock):
        owner, d = await verified_domain(api, world, services)
        first = (await issue(api, owner, d, {})).body
        clock.advance(10)
        await api.post(f"/v1/certificates/{first['certificateId']}/refresh", token=owner.token)
        before = events(services, owner)
        again = (await issue(api, owner, d, {})).body
        assert (again["certificateId"], again["status"]) == (first["certificateId"], "active")
        assert "already active" in again["message"]
        assert events(services, owner) == before

    @pytest.mark.gen_test
    async def test_reissuing_while_pending_keeps_one_certificate(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        one = (await issue(api, owner, d, {})).body
        two = (await issue(api, owner, d, {})).body
        assert one["certificateId"] == two["certificateId"]
        page = (await api.post(f"/v1/domains/{d['id']}/certificates/query", {}, token=owner.token)).body
        assert page["total"] == 1

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_not_found(self, api, world, services):
        _, d = await verified_domain(api, world, services)
        r = await issue(api, world.owner(), d, {})
        assert (r.status, r.code) == (404, "not_found")


class TestStates:
    """What the provider reports becomes the Certificate's and the Domain's state."""

    @pytest.mark.gen_test
    async def test_refresh_after_activation_makes_both_active(self, api, world, services, clock):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        clock.advance(10)
        r = await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        assert (r.status, r.body["status"]) == (200, "active")
        assert r.body["nextRenewalAt"] == "2027-01-21T10:00:10.000Z"  # 90-day certificate, 30 days before
        c = (await api.get(f"/v1/certificates/{summary['certificateId']}", token=owner.token)).body
        assert (c["status"], c["issuer"], c["notBefore"]) == ("active", "Sandbox CA", "2026-11-22T10:00:10.000Z")
        assert c["notAfter"] == "2027-02-20T10:00:10.000Z" and "nextRenewalAt" not in c
        cert = (await domain(api, owner, d))["cert"]
        assert cert["status"] == "active" and cert["issuer"] == "Sandbox CA"
        assert (cert["notAfter"], cert["nextRenewalAt"]) == ("2027-02-20T10:00:10.000Z", "2027-01-21T10:00:10.000Z")
        assert cert["lastIssuedAt"] == "2026-11-22T10:00:10.000Z" and "lastError" not in cert
        assert (await domain(api, owner, d))["opsStatus"] == "active"

    @pytest.mark.gen_test
    async def test_refresh_before_activation_stays_pending(self, api, world, services, clock):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        clock.advance(5)
        r = await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        assert r.body["status"] == "pending"

    @pytest.mark.gen_test
    async def test_a_failing_hostname_is_an_error_needing_action(self, api, world, services):
        owner, d = await verified_domain(api, world, services, "fail.example.com")
        r = await issue(api, owner, d, {})
        # The provider's state in words (issue 48): the raw value is the Certificate's providerStatus.
        assert r.body["status"] == "error" and "certificate timed out: the validation records were not found" in r.body["message"]
        after = await domain(api, owner, d)
        assert (after["cert"]["status"], after["opsStatus"]) == ("error", "action_needed")
        assert after["cert"]["lastError"] == r.body["message"]

    @pytest.mark.gen_test
    async def test_a_blocked_hostname_blocks_the_domain(self, api, world, services):
        owner, d = await verified_domain(api, world, services, "blocked.example.com")
        r = await issue(api, owner, d, {})
        assert r.body["status"] == "error" and "blocked" in r.body["message"]
        after = await domain(api, owner, d)
        assert (after["cert"]["status"], after["opsStatus"]) == ("blocked", "blocked")

    @pytest.mark.gen_test
    async def test_a_new_request_after_a_failure_is_a_new_certificate(self, api, world, services):
        owner, d = await verified_domain(api, world, services, "fail.example.com")
        one = (await issue(api, owner, d, {})).body
        two = (await issue(api, owner, d, {})).body
        assert one["certificateId"] != two["certificateId"]


class TestEvents:
    """Exactly one outbox event per stored result of a new issuance request."""

    @pytest.mark.gen_test
    async def test_a_pending_result_queues_issue_pending(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        assert events(services, owner) == [
            (
                "cert.issue_pending",
                {"domainId": d["id"], "apex": "shop.example.com", "certificateId": summary["certificateId"],
                 "status": "pending", "provider": "edge_provider_for_saas"},
            )
        ]

    @pytest.mark.gen_test
    async def test_a_failed_result_queues_issue_failed(self, api, world, services):
        owner, d = await verified_domain(api, world, services, "fail.example.com")
        await issue(api, owner, d, {})
        assert [t for t, _ in events(services, owner)] == ["cert.issue_failed"]

    @pytest.mark.gen_test
    async def test_an_active_result_queues_issued(self, api, world, services, clock):
        owner, d = await verified_domain(api, world, services)
        await issue(api, owner, d, {})
        clock.advance(10)
        await issue(api, owner, d, {})  # the provider now reports it active
        assert [(t, data["status"]) for t, data in events(services, owner)] == [
            ("cert.issue_pending", "pending"), ("cert.issued", "active")
        ]

    @pytest.mark.gen_test
    async def test_refresh_queues_none(self, api, world, services, clock):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        clock.advance(10)
        await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        assert len(events(services, owner)) == 1

    @pytest.mark.gen_test
    async def test_refused_requests_queue_none(self, api, world, services):
        owner = world.owner()
        d = await new_domain(api, owner)
        await issue(api, owner, d, {})
        mark_verified(services, d)
        await issue(api, owner, d, {"wildcard": True})
        assert events(services, owner) == []


class TestIdempotency:
    """The Idempotency-Key header."""

    @pytest.mark.gen_test
    async def test_a_completed_request_is_replayed_without_a_second_request(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        first = await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-1"})
        again = await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-1"})
        assert again.status == 200 and again.body == first.body
        assert again.headers.get("Idempotent-Replayed") == "true" and "Idempotent-Replayed" not in first.headers
        assert len(events(services, owner)) == 1

    @pytest.mark.gen_test
    async def test_the_body_is_compared_as_json(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        await issue(api, owner, d, raw=b'{"ca": "x", "wildcard": false}', headers={"Idempotency-Key": "k"})
        r = await issue(api, owner, d, raw=b'{ "wildcard":false,"ca":"x" }', headers={"Idempotency-Key": "k"})
        assert r.headers.get("Idempotent-Replayed") == "true"

    @pytest.mark.gen_test
    async def test_another_body_with_the_same_key_is_refused(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-2"})
        r = await issue(api, owner, d, {"ca": "other"}, headers={"Idempotency-Key": "k-2"})
        assert (r.status, r.code) == (409, "idempotency_key_reused")

    @pytest.mark.gen_test
    async def test_the_alias_path_keeps_its_own_records(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-3"})
        r = await issue(api, owner, d, {}, path="issue", headers={"Idempotency-Key": "k-3"})
        assert r.status == 200 and "Idempotent-Replayed" not in r.headers
        assert len(events(services, owner)) == 2

    @pytest.mark.gen_test
    async def test_the_domain_id_escaped_differently_is_the_same_request(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        first = await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-5"})
        escaped = "".join(f"%{ord(c):02X}" for c in d["id"])
        again = await api.post(f"/v1/domains/{escaped}/certificates/issue", {},
                               token=owner.token, headers={"Idempotency-Key": "k-5"})
        assert (again.status, again.body) == (200, first.body)
        assert again.headers.get("Idempotent-Replayed") == "true" and len(events(services, owner)) == 1

    @pytest.mark.gen_test
    @pytest.mark.parametrize("spell", OTHER_SPELLINGS.values(), ids=OTHER_SPELLINGS.keys())
    async def test_the_domain_id_in_another_spelling_is_not_found_and_replays_nothing(self, api, world, services, spell):
        """Issue 45, item 3: was the same request (a replay); now malformed, as the path's pattern has it."""
        owner, d = await verified_domain(api, world, services)
        await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-5"})
        again = await api.post(f"/v1/domains/{quote(spell(d['id']), safe='')}/certificates/issue", {},
                               token=owner.token, headers={"Idempotency-Key": "k-5"})
        assert (again.status, again.code, again.body["message"]) == (404, "not_found", "Domain not found.")
        assert "Idempotent-Replayed" not in again.headers and len(events(services, owner)) == 1

    @pytest.mark.gen_test
    async def test_a_null_member_is_the_same_body_as_an_omitted_one(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-6"})
        r = await issue(api, owner, d, {"wildcard": None, "ca": None}, headers={"Idempotency-Key": "k-6"})
        assert (r.status, r.headers.get("Idempotent-Replayed")) == (200, "true")

    @pytest.mark.gen_test
    async def test_keys_are_at_most_200_characters(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        assert (await issue(api, owner, d, {}, headers={"Idempotency-Key": "k" * 200})).status == 200
        r = await issue(api, owner, d, {}, headers={"Idempotency-Key": "k" * 201})
        assert (r.status, r.code) == (400, "validation_error")
        assert "Idempotency-Key" in r.body["details"]["fieldErrors"]

    @pytest.mark.gen_test
    async def test_a_refused_request_stores_nothing(self, api, world):
        owner = world.owner()
        d = await new_domain(api, owner)
        assert (await issue(api, owner, d, {}, headers={"Idempotency-Key": "k-4"})).code == "delegation_not_verified"
        r = await issue(api, owner, d, {"ca": "changed"}, headers={"Idempotency-Key": "k-4"})
        assert r.code == "delegation_not_verified"  # not idempotency_key_reused: nothing was kept

    @pytest.mark.gen_test
    async def test_keys_of_another_workspace_do_not_collide(self, api, world, services):
        a, da = await verified_domain(api, world, services)
        b, db = await verified_domain(api, world, services)
        await issue(api, a, da, {}, headers={"Idempotency-Key": "shared"})
        r = await issue(api, b, db, {}, headers={"Idempotency-Key": "shared"})
        assert r.status == 200 and "Idempotent-Replayed" not in r.headers


class TestRefresh:
    """POST /v1/certificates/:id/refresh."""

    @pytest.mark.gen_test
    async def test_an_unknown_certificate_is_not_found(self, api, world):
        r = await api.post(f"/v1/certificates/{uuid.uuid4()}/refresh", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_a_certificate_stopped_before_the_provider_is_not_sent_to_it(self, api, world, services, dns):
        owner, d = await verified_domain(api, world, services)
        dns.publish_caa("example.com", "issue", "digicert.com")
        summary = (await issue(api, owner, d, {})).body
        r = await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        assert (r.status, r.body["status"]) == (200, "error")
        assert "CAA" in r.body["message"]


class TestQuery:
    """POST /v1/domains/:id/certificates/query and GET /v1/certificates/:id."""

    async def three_certificates(self, api, world, services, clock):
        owner, d = await verified_domain(api, world, services, "fail.example.com")
        ids = []
        for _ in range(3):
            ids.append((await issue(api, owner, d, {})).body["certificateId"])
            clock.advance(1)
        return owner, d, ids

    @pytest.mark.gen_test
    async def test_newest_first(self, api, world, services, clock):
        owner, d, ids = await self.three_certificates(api, world, services, clock)
        r = await api.post(f"/v1/domains/{d['id']}/certificates/query", {}, token=owner.token)
        assert [c["id"] for c in r.body["items"]] == ids[::-1] and r.body["total"] == 3
        assert "nextCursor" not in r.body

    @pytest.mark.gen_test
    async def test_pages_by_cursor(self, api, world, services, clock):
        owner, d, ids = await self.three_certificates(api, world, services, clock)
        path = f"/v1/domains/{d['id']}/certificates/query"
        first = (await api.post(path, {"page": {"limit": 2}}, token=owner.token)).body
        rest = (await api.post(path, {"page": {"limit": 2, "cursor": first["nextCursor"]}}, token=owner.token)).body
        assert [c["id"] for c in first["items"] + rest["items"]] == ids[::-1]
        assert "nextCursor" not in rest and rest["total"] == 3

    @pytest.mark.gen_test
    async def test_a_cursor_of_another_domain_is_invalid(self, api, world, services, clock):
        owner, d, _ = await self.three_certificates(api, world, services, clock)
        other = await new_domain(api, owner, "other.example.com")
        cursor = (await api.post(f"/v1/domains/{d['id']}/certificates/query", {"page": {"limit": 1}}, token=owner.token)).body["nextCursor"]
        r = await api.post(f"/v1/domains/{other['id']}/certificates/query", {"page": {"cursor": cursor}}, token=owner.token)
        assert (r.status, r.code) == (400, "invalid_cursor")

    @pytest.mark.gen_test
    async def test_limits_are_validated(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        for limit in (0, 251):
            r = await api.post(f"/v1/domains/{d['id']}/certificates/query", {"page": {"limit": limit}}, token=owner.token)
            assert (r.status, r.code) == (400, "validation_error")

    @pytest.mark.gen_test
    async def test_a_page_that_is_not_an_object_is_a_validation_error(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        r = await api.post(f"/v1/domains/{d['id']}/certificates/query", {"page": [{"limit": 1}]}, token=owner.token)
        assert (r.status, r.code) == (400, "validation_error")
        assert r.body["details"]["fieldErrors"] == {"page": ["Expected object, received array"]}

    @pytest.mark.gen_test
    async def test_another_workspaces_domain_is_not_found(self, api, world, services):
        _, d = await verified_domain(api, world, services)
        r = await api.post(f"/v1/domains/{d['id']}/certificates/query", {}, token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_another_workspaces_certificate_is_not_found(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        for path in ("", "/refresh", "/bundle"):
            method = api.post if path == "/refresh" else api.get
            r = await method(f"/v1/certificates/{summary['certificateId']}{path}", token=world.owner().token)
            assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_a_malformed_id_is_not_found(self, api, world):
        r = await api.get("/v1/certificates/not-a-uuid", token=world.owner().token)
        assert (r.status, r.code) == (404, "not_found")

    @pytest.mark.gen_test
    async def test_deleting_the_domain_removes_its_certificates(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        await api.delete(f"/v1/domains/{d['id']}", token=owner.token)
        assert (await api.get(f"/v1/certificates/{summary['certificateId']}", token=owner.token)).status == 404


class TestBundle:
    """GET /v1/certificates/:id/bundle always answers 409."""

    @pytest.mark.gen_test
    async def test_pending_is_not_yet_issued(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        r = await api.get(f"/v1/certificates/{summary['certificateId']}/bundle", token=owner.token)
        assert (r.status, r.code) == (409, "cert_not_yet_issued")

    @pytest.mark.gen_test
    async def test_failed_is_not_yet_issued(self, api, world, services):
        owner, d = await verified_domain(api, world, services, "fail.example.com")
        summary = (await issue(api, owner, d, {})).body
        r = await api.get(f"/v1/certificates/{summary['certificateId']}/bundle", token=owner.token)
        assert r.code == "cert_not_yet_issued"

    @pytest.mark.gen_test
    async def test_active_is_managed_by_the_provider(self, api, world, services, clock):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        clock.advance(10)
        await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=owner.token)
        r = await api.get(f"/v1/certificates/{summary['certificateId']}/bundle", token=owner.token)
        assert (r.status, r.code) == (409, "managed_certificate_bundle_unavailable")


class TestAccess:
    """Scopes and roles, exactly as the spec's Authentication table."""

    @pytest.mark.gen_test
    async def test_read_only_reads_but_may_not_issue_or_refresh(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        summary = (await issue(api, owner, d, {})).body
        reader = world.member(owner.workspace, "read_only")
        assert (await api.get(f"/v1/certificates/{summary['certificateId']}", token=reader.token)).status == 200
        assert (await api.post(f"/v1/domains/{d['id']}/certificates/query", {}, token=reader.token)).status == 200
        assert (await issue(api, owner, d, {}, token=reader.token)).code == "forbidden"
        r = await api.post(f"/v1/certificates/{summary['certificateId']}/refresh", token=reader.token)
        assert r.code == "forbidden"

    @pytest.mark.gen_test
    async def test_an_operator_may_issue(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        operator = world.member(owner.workspace, "operator")
        assert (await issue(api, owner, d, {}, token=operator.token)).status == 200

    @pytest.mark.gen_test
    async def test_write_scope_issues_but_does_not_read(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        key = world.key(owner.workspace, WRITE)
        summary = (await issue(api, owner, d, {}, token=key)).body
        r = await api.get(f"/v1/certificates/{summary['certificateId']}", token=key)
        assert (r.status, r.code) == (403, "insufficient_scope")

    @pytest.mark.gen_test
    async def test_read_scope_reads_but_does_not_issue(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        key = world.key(owner.workspace, READ)
        assert (await issue(api, owner, d, {}, token=key)).code == "insufficient_scope"
        assert (await api.post(f"/v1/domains/{d['id']}/certificates/query", {}, token=key)).status == 200

    @pytest.mark.gen_test
    async def test_domain_scopes_do_not_reach_certificates(self, api, world, services):
        owner, d = await verified_domain(api, world, services)
        key = world.key(owner.workspace, ["domains:read", "domains:write"])
        assert (await issue(api, owner, d, {}, token=key)).code == "insufficient_scope"

    @pytest.mark.gen_test
    async def test_no_bearer_is_unauthorized(self, api, world, services):
        _, d = await verified_domain(api, world, services)
        r = await api.post(f"/v1/domains/{d['id']}/certificates/issue", {})
        assert (r.status, r.code) == (401, "unauthorized")
