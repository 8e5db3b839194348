"""Failed validations, paced (core/acme/failures.py): after a refusal the next order waits out the
resolvers' negative cache, never passes the CA's hourly limit, and stops after repeated refusals
until the records change or a person asks; on a clock the tests move."""

from __future__ import annotations

import datetime as dt

from core.acme import failures
from core.acme.problems import Problem, explain

START = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.UTC)
LIMITS = failures.Limits(per_hour=5, stop_after=8, negative_ttl=60)
NXDOMAIN = explain(Problem("dns", "NXDOMAIN"), apex="shop.example.com", target="t.acme.example", negative_ttl=60)
PAUSED = explain(Problem("rateLimited", "temporarily prevented ... Please visit: https://ca.example/unpause?jwt=x"),
                 apex="shop.example.com", target="t.acme.example", negative_ttl=60)
RECORDS = "_acme-challenge.shop.example.com → t.acme.example"


def refused(before, at, refusal=NXDOMAIN, limits=LIMITS, records=RECORDS):
    return failures.failed(before, refusal, directory_url="https://ca.example/dir", apex="shop.example.com", now=at,
                           limits=limits, records=records)


def held(v, at, *, person=False, records=RECORDS, limits=LIMITS):
    return failures.held(v, now=at, person=person, records=records, limits=limits)


def test_the_next_order_waits_out_the_negative_ttl():
    v = refused(None, START)
    assert held(v, START + dt.timedelta(seconds=21), person=True) is not None
    assert held(v, START + dt.timedelta(seconds=60 + 5), person=True) is None


def test_the_background_checks_wait_twice_as_long_after_each_refusal_in_a_row():
    v = refused(refused(refused(None, START), START + dt.timedelta(minutes=2)), START + dt.timedelta(minutes=5))
    assert v.next_order_at == START + dt.timedelta(minutes=5 + 4)


def test_an_hour_of_attempts_every_ten_seconds_fails_no_more_than_the_ca_allows():
    v, failed, at = None, 0, START
    while at < START + failures.HOUR:
        if held(v, at, person=failed % 2 == 0) is None:  # a person and the background checks in turn
            v, failed = refused(v, at), failed + 1
        at += dt.timedelta(seconds=10)
    assert failed == LIMITS.per_hour


def test_after_repeated_refusals_the_background_checks_stop():
    v, at = None, START
    for _ in range(LIMITS.stop_after):
        v, at = refused(v, at), at + failures.HOUR
    stopped = held(v, at + dt.timedelta(days=1))
    assert v.stopped == "failures" and stopped is not None and stopped.until is None


def test_a_person_asking_lifts_the_stop():
    v, at = None, START
    for _ in range(LIMITS.stop_after):
        v, at = refused(v, at), at + failures.HOUR
    assert held(v, at + dt.timedelta(days=1), person=True) is None


def test_records_that_change_lift_the_stop():
    v, at = None, START
    for _ in range(LIMITS.stop_after):
        v, at = refused(v, at), at + failures.HOUR
    assert held(v, at + dt.timedelta(days=1), records="_acme-challenge.shop.example.com → hop → t.acme.example") is None


def test_a_person_asking_still_waits_for_the_hourly_limit():
    v, at = None, START
    for _ in range(LIMITS.per_hour):
        v, at = refused(v, at), at + dt.timedelta(minutes=2)
    wait = held(v, at, person=True)
    assert wait is not None and wait.until == START + failures.HOUR and "the most the certificate authority" in wait.why


def test_a_hostname_the_ca_paused_waits_for_a_person():
    v = refused(None, START, PAUSED)
    assert held(v, START + dt.timedelta(days=3)).until is None
    assert held(v, START + dt.timedelta(days=3), person=True) is None


def test_an_issued_certificate_ends_the_run_but_not_the_hours_count():
    v = failures.issued(refused(refused(None, START), START + dt.timedelta(minutes=2)), START + dt.timedelta(minutes=3))
    assert v.consecutive == 0 and len(v.recent) == 2 and v.stopped is None


def test_an_issued_certificate_an_hour_after_the_last_refusal_forgets_them():
    assert failures.issued(refused(None, START), START + failures.HOUR + dt.timedelta(seconds=1)) is None
