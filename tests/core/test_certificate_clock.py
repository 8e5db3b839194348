"""Issue 50, item 2: a certificate is watched and renewed on its own clock (core/lifetimes.py): the
background checks' cadence, its renewal time and ``nextRenewalAt`` are fractions of its lifetime,
so a six-day certificate is looked at every few hours and renewed at four days, and a 90-day one as
before (daily, 30 days before expiry)."""

from __future__ import annotations

import datetime as dt
import uuid

from core import lifetimes
from core.acme.orders import renewal_due
from core.config import LifecycleConfig
from core.domains import schedule
from store.acme import AcmeCertificate
from store.records import DomainRow

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)
HOUR, DAY = dt.timedelta(hours=1), dt.timedelta(days=1)
JITTER = 1 + schedule.JITTER


def active(issued: dt.datetime, life: dt.timedelta, **fields: object) -> DomainRow:
    """An active domain serving a certificate issued at ``issued`` that lives ``life``."""
    return DomainRow(
        id=uuid.uuid4(), workspace_id=uuid.uuid4(), apex="shop.example.com", tags=[], created_at=issued,
        updated_at=issued, delegation_target="x.acme.example.net", ownership_token="t",
        validation_status="verified", cert_status="active", ops_status="active",
        cert_not_after=issued + life, cert_last_issued_at=issued,
        cert_next_renewal_at=lifetimes.planned_renewal(issued + life, not_before=issued), **fields)


def next_wait(row: DomainRow, now: dt.datetime = NOW) -> dt.timedelta:
    planned = schedule.after_check(row, row, LifecycleConfig(), now)
    assert planned.next_check_at is not None
    return planned.next_check_at - now


def acme_certificate(life: dt.timedelta) -> AcmeCertificate:
    return AcmeCertificate(handle="h", apex="shop.example.com", directory_url="https://ca.test/dir",
                           status="valid", created_at=NOW, updated_at=NOW, chain_pem="-----BEGIN CERTIFICATE-----",
                           not_before=NOW, not_after=NOW + life)


def test_a_six_day_certificate_is_next_checked_in_hours_not_a_day():
    assert next_wait(active(NOW, 6 * DAY)) <= 6 * HOUR * JITTER


def test_a_ninety_day_certificate_is_next_checked_after_active_check_seconds():
    assert DAY <= next_wait(active(NOW, 90 * DAY)) <= DAY * JITTER


def test_a_six_day_certificate_past_its_renewal_time_is_checked_every_hour_or_two():
    assert next_wait(active(NOW - 4 * DAY, 6 * DAY)) <= 6 * DAY / 90 * JITTER


def test_a_shorter_active_check_seconds_is_kept_for_a_six_day_certificate():
    row = active(NOW, 6 * DAY)
    planned = schedule.after_check(row, row, LifecycleConfig(active_check_seconds=600), NOW)
    assert planned.next_check_at is not None and planned.next_check_at - NOW <= dt.timedelta(seconds=600 * JITTER)


def test_a_six_day_certificates_next_renewal_is_four_days_after_issuance():
    assert lifetimes.planned_renewal(NOW + 6 * DAY, not_before=NOW) == NOW + 4 * DAY


def test_a_ninety_day_certificates_next_renewal_is_thirty_days_before_expiry():
    assert lifetimes.planned_renewal(NOW + 90 * DAY, not_before=NOW) == NOW + 60 * DAY


def test_the_providers_own_renewal_time_is_the_next_renewal():
    renew_at = NOW + 3 * DAY
    assert lifetimes.planned_renewal(NOW + 6 * DAY, not_before=NOW, renew_at=renew_at) == renew_at


def test_a_six_day_acme_certificate_without_a_window_is_not_renewed_before_four_days():
    assert not renewal_due(acme_certificate(6 * DAY), NOW + 4 * DAY - dt.timedelta(seconds=1))


def test_a_six_day_acme_certificate_without_a_window_is_renewed_at_four_days():
    assert renewal_due(acme_certificate(6 * DAY), NOW + 4 * DAY)


def test_the_last_third_of_a_six_day_certificate_starts_at_four_days():
    assert lifetimes.last_third_starts(NOW, NOW + 6 * DAY) == NOW + 4 * DAY
