"""Conversions between Python values and SQLite columns, shared by the repositories."""

from __future__ import annotations

import datetime as dt
import uuid

from core.wire import format_timestamp, parse_timestamp


def ts(value: dt.datetime | None) -> str | None:
    return None if value is None else format_timestamp(value)


def from_ts(value: str | None) -> dt.datetime | None:
    return None if value is None else parse_timestamp(value)


def uid(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)


def from_uid(value: str | None) -> uuid.UUID | None:
    return None if value is None else uuid.UUID(value)
