"""What text the API takes from people, and how it quotes their text back; and e-mail addresses
as the service compares and accepts them (one rule for sign-up, sign-in, team invitations, a
domain's contact and a verification link's recipient).

Short text (tags, the domain query ``q``, webhook event names) must be printable, as Python's
``str.isprintable`` says: no control characters (C0, DEL, C1), no format characters (zero-width
spaces, bidirectional overrides, the byte-order mark), no surrogates, no private-use or unassigned
code points, and no white space but the ASCII space (no NBSP, no U+2028). Such characters are
invisible or reorder what is shown, so a tag holding one looks like another tag, and a search for
it cannot be typed. ``static/openapi.json`` states the rule as its ``PrintableText`` schema.

Every text field, free text such as notes included, must be storable: no NUL (PostgreSQL cannot
store it) and no lone surrogate (an escape like ``\\udc00``, which JSON allows and which is no
character at all). Notes keep everything else, newlines and tabs included.
"""

from __future__ import annotations

import re

#: ``PrintableText.pattern`` in the OpenAPI document: every assigned character of the Basic
#: Multilingual Plane that ``printable`` refuses, as ranges JSON Schema (ECMA-262) can write.
#: Its description names the rest: unassigned code points, surrogates, and those beyond U+FFFF.
PATTERN = (
    "^[^\\u0000-\\u001f\\u007f-\\u00a0\\u00ad\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u0890\\u0891"
    "\\u08e2\\u1680\\u180e\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u2064\\u2066-\\u206f\\u3000"
    "\\ue000-\\uf8ff\\ufeff\\ufff9-\\ufffb]*$"
)
SHOWN_MAX = 80


def printable(text: str) -> str | None:
    """``text`` without leading and trailing spaces if it is printable, else ``None``.

    Only the ASCII space is trimmed, the one space the rule allows: ``str.strip`` would also take
    a NBSP, U+0085 or U+2028 off the ends, and so accept there what it refuses inside."""
    return text.strip(" ") if text.isprintable() else None


def unstorable(text: str) -> str | None:
    """Why no text field can hold ``text``, or ``None``."""
    if text.isprintable():  # the common case, in C: neither a NUL nor a surrogate is printable
        return None
    if "\x00" in text:
        return "Contains a NUL character (\\u0000), which no text field can hold"
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        return "Contains a lone UTF-16 surrogate (an escape like \\udc00 that is not a character)"
    return None


def shown(text: str, limit: int = SHOWN_MAX) -> str:
    """``text`` as a message may quote it: cut to ``limit`` characters, and every character that is
    not printable escaped (``\\x1b``, ``\\u202e``), so that an answer or a log line shown in a
    terminal carries no escape sequence and no invisible or reordering character."""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def normalise_email(email: str) -> str:
    """E-mail addresses compare case-insensitively here (providers differ on the local part)."""
    return email.strip().lower()


def valid_email(email: str) -> bool:
    """A deliberately loose check: one @, a dot in the domain, no spaces, at most 254 characters."""
    return len(email) <= 254 and bool(_EMAIL.match(email))
