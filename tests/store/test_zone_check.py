"""Issue 47, item 5: the last check of the delegation zone's delegation is one row that every
process reads (migration 24, store/zone_check.py), on both backends."""

from __future__ import annotations

import datetime as dt

from store.zone_check import ZoneCheckRow

AT = dt.datetime(2026, 11, 28, 12, 0, tzinfo=dt.UTC)


def check(state: str, at: dt.datetime) -> ZoneCheckRow:
    return ZoneCheckRow(zone="acme.saas.example", state=state, message=f"{state} message", fix=f"{state} fix",
                        checked_at=at)


def test_no_check_is_known_before_the_first(store):
    assert store.zone_check.last() is None


def test_another_process_reads_the_last_check_kept(open_store):
    one, other = open_store(), open_store()
    for kept in (check("not_delegated", AT), check("ok", AT + dt.timedelta(days=1))):
        with one.transaction():
            one.zone_check.keep(kept)
    assert other.zone_check.last() == check("ok", AT + dt.timedelta(days=1))
