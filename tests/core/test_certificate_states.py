"""The one mapping from the provider's two status fields to ours."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from core.certificates.states import Classified, classify, retriggerable, revalidation_can_fix
from core.edge import ProviderState
from store.records import Certificate


def state(hostname: str, ssl: str | None) -> ProviderState:
    return ProviderState(hostname_id="h", hostname_status=hostname, ssl_status=ssl)


@pytest.mark.parametrize(
    ("hostname", "ssl", "was_active", "expected"),
    [
        ("active", "active", False, Classified("active", "active")),
        ("active_redeploying", "active", True, Classified("active", "active")),
        ("pending", "pending_validation", False, Classified("pending", "pending")),
        ("pending", "active", False, Classified("pending", "pending")),  # pre-validated certificate
        ("active", "pending_validation", False, Classified("pending", "pending")),
        ("active", "pending_deployment", True, Classified("pending", "renewing")),
        ("active", "pending_issuance", True, Classified("pending", "renewing")),
        ("active", "validation_timed_out", False, Classified("error", "error")),
        ("pending", "issuance_timed_out", True, Classified("error", "error")),
        ("active", "expired", True, Classified("error", "error")),
        ("moved", "active", True, Classified("error", "error")),
        ("deleted", None, False, Classified("error", "error")),
        ("test_failed", "pending_validation", False, Classified("error", "error")),
        ("blocked", "pending_validation", False, Classified("error", "blocked")),
        ("test_blocked", None, False, Classified("error", "blocked")),
        ("some_future_state", "another_future_state", False, Classified("pending", "pending")),
        ("provisioned", "backup_issued", False, Classified("pending", "pending")),
    ],
)
def test_classify(hostname, ssl, was_active, expected):
    assert classify(state(hostname, ssl), was_active=was_active) == expected


@pytest.mark.parametrize(
    ("hostname", "ssl", "expected"),
    [
        ("pending", "validation_timed_out", True),
        ("active", "deployment_timed_out", True),
        ("moved", "pending_validation", True),
        ("blocked", "pending_validation", False),
        ("active", "expired", False),
        ("pending", "pending_validation", False),
    ],
)
def test_retriggerable_failures(hostname, ssl, expected):
    assert retriggerable(state(hostname, ssl)) is expected


def certificate(status: str, hostname: str | None, ssl: str | None, hostname_id: str | None = "h") -> Certificate:
    return Certificate(id=uuid.uuid4(), workspace_id=uuid.uuid4(), domain_id=uuid.uuid4(), apex="shop.example.com",
                       wildcard=False, issuer="CA", status=status, provider="p", bundle_available=False,
                       created_at=dt.datetime.now(dt.UTC), provider_hostname_id=hostname_id,
                       provider_hostname_status=hostname, provider_status=ssl)


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        (certificate("error", "pending", "validation_timed_out"), True),
        (certificate("error", "moved", "active"), True),
        (certificate("error", "active", "expired"), False),
        (certificate("error", None, None, hostname_id=None), False),  # refused, or stopped by the CAA pre-flight
        (certificate("pending", "pending", "validation_timed_out"), False),  # not stored as failed
    ],
)
def test_a_stored_failure_is_validated_again_only_where_that_can_fix_it(stored, expected):
    assert revalidation_can_fix(stored) is expected
