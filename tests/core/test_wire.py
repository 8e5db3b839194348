"""core.wire: the API's JSON shape."""

from __future__ import annotations

import datetime as dt
import uuid

import attrs
import pytest

from core.errors import ValidationError
from core.wire import INTERNAL, dump, format_timestamp, parse_uuid, structure_body
from tests.helpers import OTHER_SPELLINGS


@attrs.frozen
class Thing:
    id: uuid.UUID
    created_at: dt.datetime
    secret_hash: str = attrs.field(metadata={INTERNAL: True})
    last_used_at: dt.datetime | None = None
    tags: list[str] = attrs.Factory(list)


@attrs.frozen
class Page:
    limit: int = 10


@attrs.frozen
class Request:
    name: str
    count: int | None = None
    tags: list[str] | None = None
    page: Page | None = None


THING = Thing(
    id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
    created_at=dt.datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=dt.UTC),
    secret_hash="h",
)


class TestDump:
    """Records to JSON."""

    def test_camel_case_keys_and_millisecond_utc_timestamps(self):
        assert dump(THING) == {
            "id": "12345678-1234-5678-1234-567812345678",
            "createdAt": "2026-11-22T10:00:00.123Z",
            "tags": [],
        }

    def test_other_offsets_are_shown_in_utc(self):
        local = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
        assert dump(attrs.evolve(THING, last_used_at=local))["lastUsedAt"] == "2026-11-22T10:00:00.000Z"


class TestStructure:
    """JSON to request records."""

    @pytest.mark.parametrize("value", [250.0, -3.0, 0.0, 1e3])
    def test_an_integral_number_is_the_integer_it_equals(self, value):
        """JSON Schema 2020-12 counts 250.0 as an integer: it is taken as 250, an int."""
        request = structure_body({"name": "a", "count": value}, Request)
        assert request.count == int(value) and type(request.count) is int

    def test_unknown_keys_are_ignored(self):
        assert structure_body({"name": "a", "extra": 1}, Request) == Request(name="a")

    @pytest.mark.parametrize(
        ("body", "field", "message"),
        [
            ({}, "name", "Required"),
            ({"name": 1}, "name", "Expected string, received number"),
            ({"name": "a", "count": "1"}, "count", "Expected integer, received string"),
            ({"name": "a", "count": True}, "count", "Expected integer, received boolean"),
            ({"name": "a", "tags": "x"}, "tags", "Expected array, received string"),
            ({"name": "a", "tags": ["x", 2]}, "tags", "[1]: Expected string, received number"),
            ({"name": "a", "page": {"limit": "5"}}, "page", "limit: Expected integer, received string"),
            ({"name": "a", "count": 2.5}, "count", "Expected integer, received number"),
        ],
    )
    def test_field_errors(self, body, field, message):
        with pytest.raises(ValidationError) as info:
            structure_body(body, Request)
        assert info.value.field_errors == {field: [message]}

    @pytest.mark.parametrize(("value", "kind"), [([], "array"), ("x", "string"), (5, "number"), (True, "boolean")])
    def test_a_nested_object_that_is_not_an_object_is_refused(self, value, kind):
        with pytest.raises(ValidationError) as info:
            structure_body({"name": "a", "page": value}, Request)
        assert info.value.field_errors == {"page": [f"Expected object, received {kind}"]}


@attrs.frozen
class Filed:
    client_id: uuid.UUID


class TestUuids:
    """Issue 45, item 3: one spelling, the one the service writes and the document's patterns state."""

    ID = "0b9f3a44-6f4e-4c1e-9d55-1f6f0a3f8e21"

    def test_the_lowercase_hyphenated_form_is_read(self):
        assert parse_uuid(self.ID) == uuid.UUID(self.ID) == structure_body({"clientId": self.ID}, Filed).client_id

    @pytest.mark.parametrize("spell", [*OTHER_SPELLINGS.values(), lambda i: i + "\n", lambda i: " " + i,
                                       lambda i: i.replace("0", "\uff10")], ids=[*OTHER_SPELLINGS, "newline", "space", "fullwidth"])
    def test_any_other_spelling_is_malformed(self, spell):
        with pytest.raises(ValueError, match="Invalid uuid"):
            parse_uuid(spell(self.ID))
        with pytest.raises(ValidationError) as info:
            structure_body({"clientId": spell(self.ID)}, Filed)
        assert info.value.field_errors == {"clientId": ["Invalid uuid"]}


class TestTimestamps:
    @pytest.mark.parametrize(("value", "written"), [
        (dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC), "2026-11-22T10:00:00.000Z"),
        (dt.datetime(2026, 11, 22, 10, 0, 0, 999_999, tzinfo=dt.UTC), "2026-11-22T10:00:00.999Z"),  # truncated, not rounded
        (dt.datetime(2026, 11, 22, 11, 30, 5, 120_000, tzinfo=dt.timezone(dt.timedelta(hours=1, minutes=30))),
         "2026-11-22T10:00:05.120Z"),
    ])
    def test_written_in_utc_with_milliseconds(self, value, written):
        assert format_timestamp(value) == written
