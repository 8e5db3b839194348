"""core.domains: the one table of opsStatus, and a domain's JSON."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from core.domains.records import ops_status
from core.domains.shape import present, render, render_stored
from core.wire import dumps
from store.domain_rows import to_columns
from store.records import DnsHostSeen, DomainRow, DriftProblem, OneClickOffer


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
        ("error", "active", "action_needed"),
        ("pending", "renewing", "action_needed"),
        ("verified", "blocked", "blocked"),
        ("pending", "blocked", "blocked"),
    ],
)
def test_ops_status_table(validation, cert, expected):
    assert ops_status(validation, cert) == expected


OPTIONAL = ("client_id", "contact_email", "notes", "validation_checked_at", "validation_error", "cert_issuer",
            "cert_not_after", "cert_next_renewal_at", "cert_last_issued_at", "cert_error", "cert_trace_id",
            "next_check_at", "drift", "dns_host")
NOW = dt.datetime(2026, 11, 23, 19, 5, 7, 123000, tzinfo=dt.UTC)
VALUES = {
    "client_id": uuid.uuid4(), "contact_email": "ops@example.com", "notes": "Ünïcode \"notes\"",
    "validation_checked_at": NOW, "validation_error": "No CNAME.", "cert_issuer": "Let's Encrypt",
    "cert_not_after": NOW + dt.timedelta(days=90), "cert_next_renewal_at": NOW + dt.timedelta(days=60),
    "cert_last_issued_at": NOW, "cert_error": "CAA forbids.", "cert_trace_id": uuid.uuid4(),
    "next_check_at": NOW + dt.timedelta(minutes=5),
    "drift": {"drift": (DriftProblem(code="delegation_missing", message="The CNAME is gone.", fix="Publish it again."),),
              "drift_since": NOW},
    "dns_host": {"dns_host": DnsHostSeen(zone="example.com", host="cloudflare", checked_at=NOW, offer=OneClickOffer(
        provider_id="cloudflare.com", provider_name="Cloudflare", url_sync_ux="https://dash.example.net/dc"))},
}


def domain_row(present_fields: tuple[str, ...]) -> DomainRow:
    fields: dict = {}
    for name in present_fields:
        fields.update(VALUES[name] if isinstance(VALUES[name], dict) else {name: VALUES[name]})
    return DomainRow(
        id=uuid.uuid4(), workspace_id=uuid.uuid4(), apex="shop.example.com", tags=["eu", "tier-1"],
        created_at=NOW, updated_at=NOW + dt.timedelta(seconds=1), delegation_target="x.acme.example.net",
        validation_status="verified", cert_status="active", ops_status="active", ownership_token="tok", **fields,
    )


@pytest.mark.parametrize("present_fields", [(), OPTIONAL, *((name,) for name in OPTIONAL)])
def test_a_rendered_domain_is_the_domain_records_json(present_fields):
    row = domain_row(present_fields)
    assert render(row) == dumps(present(row)).encode()


@pytest.mark.parametrize("present_fields", [(), OPTIONAL, *((name,) for name in OPTIONAL)])
def test_a_domain_rendered_from_its_stored_row_is_the_domain_records_json(present_fields):
    row = domain_row(present_fields)
    stored = {**to_columns(row), "ownership_token": row.ownership_token}
    assert render_stored(stored) == dumps(present(row)).encode()


def test_a_stored_row_that_changed_is_rendered_again():
    row = domain_row(())
    stored = {**to_columns(row), "ownership_token": row.ownership_token}
    first = render_stored(stored)
    assert render_stored({**stored, "notes": "moved to the EU edge"}) != first
    assert render_stored(dict(stored)) == first
