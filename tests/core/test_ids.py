"""core.domains.ids: version 7 UUIDs, ordered by creation time, still random enough to be unique."""

from __future__ import annotations

import time
import uuid

from core.domains.ids import uuid7


def test_the_id_is_a_version_7_rfc_9562_uuid():
    value = uuid7()
    assert (value.version, value.variant) == (7, uuid.RFC_4122)


def test_the_id_starts_with_its_creation_time_in_milliseconds():
    before = time.time_ns() // 1_000_000
    value = uuid7()
    after = time.time_ns() // 1_000_000
    assert before <= value.int >> 80 <= after


def test_ids_of_later_milliseconds_sort_after_earlier_ones():
    first = uuid7()
    time.sleep(0.002)
    assert str(uuid7()) > str(first)  # as the id index compares them: text


def test_a_hundred_thousand_ids_are_all_different():
    assert len({uuid7() for _ in range(100_000)}) == 100_000
