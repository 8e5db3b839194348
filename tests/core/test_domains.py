"""core.domains: the one table of opsStatus, and a domain's JSON."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from core.domains.records import ops_status
from core.domains.shape import present, render
from core.wire import dumps
from store.records import DomainRow


@pytest.mark.parametrize(
    ("validation", "cert", "expected"),
    [
        ("pending", "none", "action_needed"),
        ("error", "none", "action_needed"),
        ("verified", "none", "pending"),
        ("verified", "pending", "pending"),
        ("verified", "error", "action_needed"),
        ("verified", "active", "active"),
        ("verified", "renewing", "active"),
        ("error", "active", "active"),
        ("verified", "blocked", "blocked"),
        ("pending", "blocked", "blocked"),
    ],
)
def test_ops_status_table(validation, cert, expected):
    assert ops_status(validation, cert) == expected


OPTIONAL = ("client_id", "contact_email", "notes", "validation_checked_at", "validation_error", "cert_issuer",
            "cert_not_after", "cert_next_renewal_at", "cert_last_issued_at", "cert_error", "cert_trace_id")


@pytest.mark.parametrize("present_fields", [(), OPTIONAL, *((name,) for name in OPTIONAL)])
def test_a_rendered_domain_is_the_domain_records_json(present_fields):
    now = dt.datetime(2026, 11, 23, 19, 5, 7, 123000, tzinfo=dt.UTC)
    values = {
        "client_id": uuid.uuid4(), "contact_email": "ops@example.com", "notes": "Ünïcode \"notes\"",
        "validation_checked_at": now, "validation_error": "No CNAME.", "cert_issuer": "Let's Encrypt",
        "cert_not_after": now + dt.timedelta(days=90), "cert_next_renewal_at": now + dt.timedelta(days=60),
        "cert_last_issued_at": now, "cert_error": "CAA forbids.", "cert_trace_id": uuid.uuid4(),
    }
    row = DomainRow(
        id=uuid.uuid4(), workspace_id=uuid.uuid4(), apex="shop.example.com", tags=["eu", "tier-1"],
        created_at=now, updated_at=now + dt.timedelta(seconds=1), delegation_target="x.acme.example.net",
        validation_status="verified", cert_status="active", ops_status="active", ownership_token="tok",
        **{name: values[name] for name in present_fields},
    )
    assert render(row) == dumps(present(row)).encode()
