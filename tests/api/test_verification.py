"""verify-delegation and recheck against a real DNS server on 127.0.0.1."""

from __future__ import annotations

import uuid

import pytest

BOTH = ["domains:write", "certificates:write"]


DIAGNOSIS_POINTER = (
    "The diagnosis names the exact fix: GET /v1/domains/:id/diagnosis, or \"Diagnose\" on the DNS page or "
    "the verification link's page."
)


async def make_domain(api, world):
    owner = world.owner()
    created = (await api.post("/v1/domains", {"apex": "shop.example.com"}, token=owner.token)).body
    return owner, created


def publish_both(dns, d, *, cname=None, txt=None):
    dns.publish("_acme-challenge.shop.example.com", "CNAME", cname or d["validation"]["delegation"]["value"])
    dns.publish("_service-verify.shop.example.com", "TXT", txt or d["validation"]["ownership"]["value"])


async def verify(api, owner, d):
    return await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=owner.token)


async def reload(api, owner, d):
    return (await api.get(f"/v1/domains/{d['id']}", token=owner.token)).body


class TestVerified:
    """Both records right."""

    @pytest.mark.gen_test
    async def test_both_records_verify_the_domain(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        r = await verify(api, owner, d)
        assert r.status == 200
        assert (r.body["status"], r.body["checkedAt"]) == ("verified", "2026-11-22T10:00:00.000Z")
        assert r.body["message"].startswith("Both DNS records are in place; the domain is verified.")
        after = await reload(api, owner, d)
        assert after["validation"]["status"] == "verified" and after["opsStatus"] == "pending"
        assert after["validation"]["lastCheckedAt"] == "2026-11-22T10:00:00.000Z"
        assert "lastError" not in after["validation"]

    @pytest.mark.gen_test
    async def test_cname_case_and_trailing_dot_do_not_matter(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d, cname=d["validation"]["delegation"]["value"].upper() + ".")
        assert (await verify(api, owner, d)).body["status"] == "verified"

    @pytest.mark.gen_test
    async def test_the_token_may_be_one_of_several_txt_strings(self, api, world, dns):
        owner, d = await make_domain(api, world)
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", "v=spf1 -all", d["validation"]["ownership"]["value"])
        assert (await verify(api, owner, d)).body["status"] == "verified"

    @pytest.mark.gen_test
    async def test_a_key_needs_both_write_scopes(self, api, dns, world):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        path = f"/v1/domains/{d['id']}/verify-delegation"
        r = await api.post(path, token=world.key(owner.workspace, ["domains:write"]))
        assert (r.status, r.code) == (403, "insufficient_scope")
        assert "certificates:write" in r.body["message"]
        assert (await api.post(path, token=world.key(owner.workspace, BOTH))).status == 200

    @pytest.mark.gen_test
    async def test_read_only_may_not_verify(self, api, world):
        owner, d = await make_domain(api, world)
        reader = world.member(owner.workspace, "read_only")
        r = await api.post(f"/v1/domains/{d['id']}/verify-delegation", token=reader.token)
        assert r.code == "forbidden"


class TestDiagnosis:
    """Missing or wrong records: 200, a status, and a message saying what was found."""

    @pytest.mark.gen_test
    async def test_nothing_published_stays_pending_with_nxdomain(self, api, world):
        owner, d = await make_domain(api, world)
        r = await verify(api, owner, d)
        assert r.status == 200 and r.body["status"] == "pending"
        assert "No record exists at _acme-challenge.shop.example.com (NXDOMAIN)" in r.body["message"]
        assert "No record exists at _service-verify.shop.example.com (NXDOMAIN)" in r.body["message"]
        after = await reload(api, owner, d)
        assert after["validation"]["status"] == "pending"
        assert "NXDOMAIN" in after["validation"]["lastError"]
        assert after["opsStatus"] == "action_needed"

    @pytest.mark.gen_test
    async def test_a_cname_pointing_elsewhere_is_named(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d, cname="elsewhere.example.net")
        r = await verify(api, owner, d)
        assert r.body["status"] == "error"
        expected = d["validation"]["delegation"]["value"]
        assert f"points to elsewhere.example.net; it must point to {expected}" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_txt_with_another_token_is_named(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d, txt="service-domain-verification=0000")
        r = await verify(api, owner, d)
        assert r.body["status"] == "error"
        assert "holds another token (service-domain-verification=0000)" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_token_split_over_two_txt_records_is_named(self, api, world, dns):
        owner, d = await make_domain(api, world)
        value = d["validation"]["ownership"]["value"]
        dns.publish("_acme-challenge.shop.example.com", "CNAME", d["validation"]["delegation"]["value"])
        dns.publish("_service-verify.shop.example.com", "TXT", value[:28], value[28:])
        r = await verify(api, owner, d)
        assert r.body["status"] == "error"
        assert (
            f"The ownership value at _service-verify.shop.example.com is split over two TXT records; put the whole "
            f"value {value} in one TXT record."
        ) in r.body["message"]
        assert "another token" not in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_failed_check_points_to_the_diagnosis(self, api, world, dns):
        """The check asks the resolvers only; the diagnosis knows the common mistakes (a doubled zone,
        the zone's own name used) and says what to change."""
        owner, d = await make_domain(api, world)
        dns.publish("_acme-challenge.shop.example.com.example.com", "CNAME", d["validation"]["delegation"]["value"])
        r = await verify(api, owner, d)
        assert r.body["message"].endswith(DIAGNOSIS_POINTER)

    @pytest.mark.gen_test
    async def test_a_passed_check_does_not(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        assert DIAGNOSIS_POINTER not in (await verify(api, owner, d)).body["message"]

    @pytest.mark.gen_test
    async def test_txt_records_without_the_token_are_shown(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d, txt="something else")
        r = await verify(api, owner, d)
        assert "(something else) do not include" in r.body["message"]

    @pytest.mark.gen_test
    async def test_only_one_record_published_names_the_missing_one(self, api, world, dns):
        owner, d = await make_domain(api, world)
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        r = await verify(api, owner, d)
        assert r.body["status"] == "pending"
        assert "_acme-challenge.shop.example.com" in r.body["message"]
        assert "_service-verify" not in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_leftover_txt_hiding_the_cname_is_explained(self, api, world, dns):
        owner, d = await make_domain(api, world)
        dns.publish("_acme-challenge.shop.example.com", "TXT", "old-acme-token")
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        r = await verify(api, owner, d)
        assert r.body["status"] == "error"
        assert "has TXT records but no CNAME; remove them" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_timeout_is_reported(self, api, world, dns):
        owner, d = await make_domain(api, world)
        dns.zone.silent.add("_acme-challenge.shop.example.com")
        dns.publish("_service-verify.shop.example.com", "TXT", d["validation"]["ownership"]["value"])
        r = await verify(api, owner, d)
        assert r.body["status"] == "pending"  # the check learnt nothing: no fault of the records (issue 46)
        assert "CNAME at _acme-challenge.shop.example.com got no answer: the resolver did not reply" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_server_failure_is_reported(self, api, world, dns):
        owner, d = await make_domain(api, world)
        dns.zone.servfail.add("_service-verify.shop.example.com")
        r = await verify(api, owner, d)
        assert "TXT at _service-verify.shop.example.com failed" in r.body["message"]

    @pytest.mark.gen_test
    async def test_fixing_the_records_verifies_on_the_next_check(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d, cname="wrong.example.net")
        assert (await verify(api, owner, d)).body["status"] == "error"
        dns.clear()
        publish_both(dns, d)
        assert (await verify(api, owner, d)).body["status"] == "verified"

    @pytest.mark.gen_test
    async def test_a_cname_removed_after_verification_is_drift_and_the_domain_stays_verified(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        await verify(api, owner, d)
        dns.clear()
        r = await verify(api, owner, d)
        assert r.body["status"] == "verified"
        assert r.body["message"].startswith("The domain stays verified, but the next renewal of its certificate will fail")
        after = await reload(api, owner, d)
        assert [p["code"] for p in after["validation"]["drift"]["problems"]] == ["delegation_missing"]
        assert after["opsStatus"] == "action_needed"

    @pytest.mark.gen_test
    async def test_drift_is_cleared_by_the_check_that_finds_the_cname_back(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        await verify(api, owner, d)
        dns.clear()
        await verify(api, owner, d)
        publish_both(dns, d)
        await verify(api, owner, d)
        after = await reload(api, owner, d)
        assert "drift" not in after["validation"] and after["opsStatus"] != "action_needed"

    @pytest.mark.gen_test
    async def test_the_ownership_record_is_not_required_once_verified(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        await verify(api, owner, d)
        dns.remove("_service-verify.shop.example.com")
        r = await verify(api, owner, d)
        assert r.body["status"] == "verified" and "drift" not in (await reload(api, owner, d))["validation"]

    @pytest.mark.gen_test
    async def test_a_timeout_does_not_undo_a_verification(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        await verify(api, owner, d)
        dns.zone.silent.add("_acme-challenge.shop.example.com")
        r = await verify(api, owner, d)
        assert r.body["status"] == "verified"
        assert r.body["message"].startswith("The domain stays verified, but this check was inconclusive.")
        assert (await reload(api, owner, d))["validation"]["status"] == "verified"


class TestOwnershipMoved:
    """A verified domain whose ownership TXT holds another workspace's token now: the customer moved
    the hostname (issue 46). The TXT may go once verified; another token may not."""

    async def moved(self, api, world, dns):
        """Verified in one workspace; the TXT switched to another workspace's token (the CNAME stays:
        its target is the same in every workspace). The owner, the domain, and the other one's."""
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        assert (await verify(api, owner, d)).body["status"] == "verified"
        other, moved = await make_domain(api, world)
        assert moved["validation"]["delegation"] == d["validation"]["delegation"]
        dns.remove("_service-verify.shop.example.com")
        dns.publish("_service-verify.shop.example.com", "TXT", moved["validation"]["ownership"]["value"])
        return owner, d, (other, moved)

    @pytest.mark.gen_test
    async def test_the_domain_leaves_verified_as_a_failed_verification_naming_the_other_token(self, api, world, dns):
        owner, d, (_, moved) = await self.moved(api, world, dns)
        r = await verify(api, owner, d)
        theirs, ours = moved["validation"]["ownership"]["value"], d["validation"]["ownership"]["value"]
        said = f"The TXT record at _service-verify.shop.example.com holds another token ({theirs}); it must be {ours}."
        assert (r.body["status"], r.body["message"]) == ("error", f"DNS verification failed. {said} {DIAGNOSIS_POINTER}")
        after = await reload(api, owner, d)
        assert (after["validation"]["status"], after["validation"]["lastError"]) == ("error", said)
        assert after["opsStatus"] == "action_needed"

    @pytest.mark.gen_test
    async def test_leaving_verified_queues_no_event(self, api, world, dns, services):
        owner, d, _ = await self.moved(api, world, dns)
        queued = services.store.sql.execute("SELECT count(*) FROM outbox_events").fetchone()
        await verify(api, owner, d)
        assert services.store.sql.execute("SELECT count(*) FROM outbox_events").fetchone() == queued  # spec, Events

    @pytest.mark.gen_test
    async def test_a_txt_lookup_that_fails_keeps_the_domain_verified(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        await verify(api, owner, d)
        dns.zone.servfail.add("_service-verify.shop.example.com")
        r = await verify(api, owner, d)
        assert r.body["status"] == "verified"
        assert r.body["message"].startswith("The domain stays verified, but this check was inconclusive.")
        assert "TXT at _service-verify.shop.example.com failed" in r.body["message"]

    @pytest.mark.gen_test
    async def test_a_txt_with_other_values_only_keeps_the_domain_verified(self, api, world, dns):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        await verify(api, owner, d)
        dns.remove("_service-verify.shop.example.com")
        dns.publish("_service-verify.shop.example.com", "TXT", "v=spf1 -all")
        r = await verify(api, owner, d)
        assert r.body["status"] == "verified" and "lastError" not in (await reload(api, owner, d))["validation"]

    @pytest.mark.gen_test
    async def test_the_other_workspace_verifying_has_this_one_checked_at_once(self, api, world, dns, services, clock):
        owner, d, (other, moved) = await self.moved(api, world, dns)
        clock.advance(60)
        assert (await verify(api, other, moved)).body["status"] == "verified"
        assert services.store.domains.get(owner.workspace.id, uuid.UUID(d["id"])).next_check_at == clock.now()


class TestRecheck:
    """POST /v1/domains/:id/recheck."""

    @pytest.mark.gen_test
    async def test_recheck_reports_ops_status_and_cert_status(self, api, world, dns, clock):
        owner, d = await make_domain(api, world)
        publish_both(dns, d)
        clock.advance(30)
        r = await api.post(f"/v1/domains/{d['id']}/recheck", token=owner.token)
        assert r.status == 200
        # DNS verified, so issuance started: the sandbox certificate is pending.
        assert r.body == {"status": "pending", "checkedAt": "2026-11-22T10:00:30.000Z", "certStatus": "pending"}

    @pytest.mark.gen_test
    async def test_recheck_without_records_needs_action(self, api, world):
        owner, d = await make_domain(api, world)
        r = await api.post(f"/v1/domains/{d['id']}/recheck", token=owner.token)
        assert (r.body["status"], r.body["certStatus"]) == ("action_needed", "none")
