"""The one cattrs converter between attrs records and the API's JSON.

Out: camelCase keys, ``None`` fields omitted (the spec omits unavailable optional fields),
timestamps ``2026-11-22T10:00:00.123Z``, UUIDs as strings, fields marked ``internal`` never
shown. In: strict types (a number is not a string), text that can be stored (no NUL, no lone
surrogate), unknown keys ignored whatever they hold, the way the spec's validation shape (Zod's
flattened errors) does, and every failure collected per field.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs
import cattrs
import orjson
from cattrs.cols import is_sequence, list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from core.errors import ValidationError
from core.text import unstorable

T = TypeVar("T")

#: attrs metadata key for fields that never leave the service (hashes, foreign keys).
INTERNAL = "internal"


def camel(name: str) -> str:
    """``last_used_at`` -> ``lastUsedAt``."""
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


#: Remembered: the rows a bulk create writes share their timestamps, written 2,000 times for 500.
@functools.lru_cache(maxsize=1024)
def format_timestamp(value: dt.datetime) -> str:
    """UTC with milliseconds, the only timestamp shape the API and the database use."""
    if value.tzinfo is not dt.UTC:
        value = value.astimezone(dt.UTC)
    # isoformat truncates to milliseconds, in C: a page of 100 domains formats 300 and more of these.
    return value.isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


def parse_timestamp(value: str) -> dt.datetime:
    """Read an ISO 8601 timestamp that names its offset; naive times are ambiguous."""
    parsed = dt.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError("Timestamp must include a UTC offset, for example 2026-12-31T00:00:00Z")
    return parsed.astimezone(dt.UTC)


_JSON_KIND = {
    str: "string",
    bool: "boolean",
    int: "number",
    float: "number",
    list: "array",
    dict: "object",
    type(None): "null",
}


def json_kind(value: Any) -> str:
    """The JSON type name of a decoded value, for 'Expected X, received Y' messages."""
    return _JSON_KIND.get(type(value), type(value).__name__)


def _expect(value: Any, kinds: tuple[type, ...], name: str) -> Any:
    # bool is an int in Python but not in JSON, so it is checked by exact type.
    if type(value) not in kinds:
        raise TypeError(f"Expected {name}, received {json_kind(value)}")
    return value


def _structure_integer(value: Any, _: type) -> int:
    # JSON Schema 2020-12 counts a number with a zero fractional part as an integer: 250.0 is 250.
    if type(value) is float and value.is_integer():
        return int(value)
    integer: int = _expect(value, (int,), "integer")
    return integer


def _structure_datetime(value: Any, _: type) -> dt.datetime:
    _expect(value, (str,), "string")
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        message = str(exc)
        if not message.startswith("Timestamp"):
            message = "Invalid ISO 8601 timestamp"
        raise ValueError(message) from None


#: The one spelling of a UUID the API takes, the one it writes and static/openapi.json's patterns state.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@functools.lru_cache(maxsize=4096)
def parse_uuid(value: str) -> uuid.UUID:
    """A UUID sent to the service (a path, a header, a body, a form, a command), in the one form the
    OpenAPI document's patterns allow and the service writes: ``uuid.UUID`` alone also takes braces,
    ``urn:uuid:``, no hyphens and capitals, so that one id would have many spellings the contract
    refuses. Anything else is a ``ValueError``, which each caller answers as its malformed value.

    The ids a client polls are parsed once (``uuid.UUID`` is Python code, a measurable part of a
    GET by key); a refusal is not kept, and UUIDs are immutable, so one object serves every caller."""
    if _CANONICAL_UUID.fullmatch(value) is None:
        raise ValueError("Invalid uuid")
    return uuid.UUID(value)


def _structure_uuid(value: Any, _: type) -> uuid.UUID:
    _expect(value, (str,), "string")
    return parse_uuid(value)


def _structure_text(value: Any, _: type) -> str:
    # Every string a request record takes, checked as it is structured: what a record does not
    # take is never stored, so an unknown field may hold anything.
    text: str = _expect(value, (str,), "string")
    if problem := unstorable(text):
        raise ValueError(problem)
    return text


def _unstructure_attrs_factory(converter: cattrs.Converter) -> Callable[[type], Any]:
    def factory(cls: type) -> Any:
        overrides: dict[str, Any] = {}
        for a in attrs.fields(cls):
            overrides[a.name] = override(
                rename=camel(a.name),
                omit=bool(a.metadata.get(INTERNAL)),
                omit_if_default=a.default is None,
            )
        return make_dict_unstructure_fn(cls, converter, **overrides)

    return factory


def _structure_attrs_factory(converter: cattrs.Converter) -> Callable[[type], Any]:
    def factory(cls: type) -> Any:
        overrides: dict[str, Any] = {a.name: override(rename=camel(a.name)) for a in attrs.fields(cls)}
        inner: Callable[[Any, type], Any] = make_dict_structure_fn(cls, converter, _cattrs_forbid_extra_keys=False, **overrides)

        def structure(value: Any, type_: type) -> Any:
            # cattrs looks keys up with `in`: an array or a string holds none of them and would
            # quietly become a record of defaults, and a number would fail with Python's words.
            return inner(_expect(value, (dict,), "object"), type_)

        return structure

    return factory


def _strict_list_factory(converter: cattrs.Converter) -> Callable[[type], Any]:
    def factory(cls: type) -> Any:
        inner = list_structure_factory(cls, converter)

        def structure(value: Any, type_: type) -> Any:
            # A JSON string is iterable in Python; it must not become a list of characters.
            return inner(_expect(value, (list,), "array"), type_)

        return structure

    return factory


def register_strict_primitives(c: cattrs.Converter) -> None:
    """No coercion: ``"8080"`` is not an integer and ``1`` is not a string."""
    c.register_structure_hook(str, lambda v, _: _expect(v, (str,), "string"))
    c.register_structure_hook(bool, lambda v, _: _expect(v, (bool,), "boolean"))
    c.register_structure_hook(int, _structure_integer)
    c.register_structure_hook(float, lambda v, _: float(_expect(v, (int, float), "number")))
    c.register_structure_hook_factory(is_sequence, _strict_list_factory(c))


def make_converter() -> cattrs.Converter:
    """Build the converter; one instance (``converter``) serves the whole service."""
    c = cattrs.Converter()
    register_strict_primitives(c)
    c.register_structure_hook(str, _structure_text)
    c.register_unstructure_hook(dt.datetime, format_timestamp)
    c.register_unstructure_hook(uuid.UUID, str)
    c.register_structure_hook(dt.datetime, _structure_datetime)
    c.register_structure_hook(uuid.UUID, _structure_uuid)
    c.register_unstructure_hook_factory(attrs.has, _unstructure_attrs_factory(c))
    c.register_structure_hook_factory(attrs.has, _structure_attrs_factory(c))
    return c


converter = make_converter()


def dump(value: Any) -> Any:
    """Records (or lists of them) to JSON-ready data."""
    return converter.unstructure(value)


def dumps(value: Any) -> str:
    # orjson: compact UTF-8 JSON like json.dumps(separators=(",", ":"), ensure_ascii=False), about
    # fifteen times faster; a page of 100 domains is 100 of these (5.8 -> 0.3 us each).
    return orjson.dumps(dump(value)).decode()


def iter_errors(
    exc: BaseException, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], BaseException]]:
    """Walk a cattrs exception tree, yielding (path, leaf exception) pairs."""
    if isinstance(exc, (ClassValidationError, IterableValidationError)):
        for sub in exc.exceptions:
            step: tuple[str | int, ...] = ()
            for note in getattr(sub, "__notes__", []):
                if isinstance(note, AttributeValidationNote):
                    step = (note.name,)
                elif isinstance(note, IterableValidationNote):
                    step = (note.index,)
            yield from iter_errors(sub, path + step)
    else:
        yield path, exc


def describe(exc: BaseException) -> str:
    """One short sentence for a leaf structuring error."""
    if isinstance(exc, KeyError):
        return "Required"
    if isinstance(exc, (TypeError, ValueError)) and exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return "Invalid value"


def structure_body(data: Any, cls: type[T]) -> T:
    """Structure a decoded JSON body into a request record or raise a ``ValidationError``."""
    if not isinstance(data, dict):
        raise ValidationError(form_errors=[f"Expected object, received {json_kind(data)}"])
    try:
        return converter.structure(data, cls)
    except (ClassValidationError, IterableValidationError) as exc:
        field_errors: dict[str, list[str]] = {}
        form_errors: list[str] = []
        for path, leaf in iter_errors(exc):
            message = describe(leaf)
            if not path:
                form_errors.append(message)
                continue
            name = camel(str(path[0]))
            suffix = "".join(f"[{p}]" if isinstance(p, int) else f".{camel(p)}" for p in path[1:])
            entry = f"{suffix.lstrip('.')}: {message}" if suffix else message
            field_errors.setdefault(name, []).append(entry)
        raise ValidationError(form_errors=form_errors, field_errors=field_errors) from None
