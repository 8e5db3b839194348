"""Issue 46, item 6f: with the service as the ACME client, the diagnosis names the certificate
authority (by name: "Pebble") where it would name an edge provider. See tests/acme/conftest.py for the parts."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.acme.conftest import CUSTOMER_ZONE, needs_lab
from tests.acme.test_issuing import add, verify_until_issued

pytestmark = needs_lab


@pytest.mark.gen_test
async def test_a_certificate_whose_cname_went_is_at_risk_because_the_ca_cannot_validate_its_renewal(
        api, world, acme_lab, services):
    services.authority.port = acme_lab.lab.nsd_port
    caller, created = await add(api, world, "words.lab.com")
    acme_lab.publish_records(created, ttl=1)
    await verify_until_issued(api, caller, created)
    acme_lab.lab.remove(CUSTOMER_ZONE, "_acme-challenge.words.lab.com")
    deadline = time.monotonic() + 10
    while (await services.dns.lookup("_acme-challenge.words.lab.com", "CNAME")).outcome == "found":
        assert time.monotonic() < deadline, "the resolver still holds the CNAME"
        await asyncio.sleep(0.2)  # until the resolver forgets the CNAME it held (TTL 1)
    report = (await api.get(f"/v1/domains/{created['id']}/diagnosis", token=caller.token)).body
    [finding] = [f for f in report["findings"] if f["code"] == "renewal_at_risk"]
    assert "Pebble cannot validate its renewal" in finding["message"]
    assert "provider" not in finding["message"]
