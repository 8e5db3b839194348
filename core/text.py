"""What text the API takes from people, and how it quotes their text back; and e-mail addresses
as the service compares and accepts them (one rule for sign-up, sign-in, team invitations, a
domain's contact and a verification link's recipient).

Short text (tags, the domain query ``q``, webhook event names) must be printable: no control
characters (C0, DEL, C1), no white space but the ASCII space (no NBSP, no U+2028), no format
characters (zero-width spaces, bidirectional overrides, the byte-order mark, and the code points
Unicode keeps for future ones), no surrogates, no private-use characters and no noncharacters.
Such characters are invisible or reorder what is shown, so a tag holding one looks like another
tag, and a search for it cannot be typed. ``REFUSED`` lists them; ``static/openapi.json`` states
the same set as its ``PrintableText`` schema.

The list is the service's own, as Unicode ``UNICODE_VERSION`` has them, and not the running
Python's tables (``str.isprintable``, as used before, also refused every code point its Unicode
version had not assigned, so a new emoji was refused on one Python and accepted on the next).
Code points Unicode has not assigned are accepted, but for those it keeps for future format
characters (unassigned default-ignorable code points) and its noncharacters, which stay
unassigned for good. Control characters, surrogates, private use and noncharacters are fixed by
Unicode's stability policy; the format and space characters are the list below, checked against
the running Python's tables by tests/core/test_text.py.

Every text field, free text such as notes included, must be storable: no NUL (PostgreSQL cannot
store it) and no lone surrogate (an escape like ``\\udc00``, which JSON allows and which is no
character at all). Notes keep everything else, newlines and tabs included.

An e-mail address is at most ``EMAIL_MAX`` characters as sent, holds exactly one ``@`` between a
non-empty local part and a domain that is a well-formed hostname (``core/hostnames.canonical``:
labels of letters, digits and hyphens, or international ones that have an IDNA 2008 form; no
trailing dot; a name under a special-use or unknown top-level domain is an address all the same),
and holds no character short text refuses and no space at all. ASCII spaces around it are
trimmed. The address is kept as given (the domain is not turned into its A-label form).
"""

from __future__ import annotations

import re

#: The Unicode version whose format (Cf) and space (Zs) characters ``REFUSED`` lists (Unicode 16.0
#: to 18.0 add none).
UNICODE_VERSION = "15.1.0"

#: Every code point short text refuses, as (first, last) ranges, and why.
REFUSED: tuple[tuple[int, int, str], ...] = (
    (0x0000, 0x001F, "control (C0)"),
    (0x007F, 0x009F, "control (DEL, C1)"),
    (0x00A0, 0x00A0, "space (NBSP)"),
    (0x00AD, 0x00AD, "format (soft hyphen)"),
    (0x0600, 0x0605, "format (Arabic number signs)"),
    (0x061C, 0x061C, "format (Arabic letter mark)"),
    (0x06DD, 0x06DD, "format (Arabic end of ayah)"),
    (0x070F, 0x070F, "format (Syriac abbreviation mark)"),
    (0x0890, 0x0891, "format (Arabic pound and piastre marks above)"),
    (0x08E2, 0x08E2, "format (Arabic disputed end of ayah)"),
    (0x1680, 0x1680, "space (Ogham)"),
    (0x180E, 0x180E, "format (Mongolian vowel separator)"),
    (0x2000, 0x200A, "space (en quad to hair space)"),
    (0x200B, 0x200F, "format (zero-width space, joiners, directional marks)"),
    (0x2028, 0x2029, "line and paragraph separators"),
    (0x202A, 0x202E, "format (bidirectional embeddings and overrides)"),
    (0x202F, 0x202F, "space (narrow NBSP)"),
    (0x205F, 0x205F, "space (medium mathematical space)"),
    (0x2060, 0x2064, "format (word joiner, invisible operators)"),
    (0x2065, 0x2065, "reserved for format characters"),
    (0x2066, 0x206F, "format (bidirectional isolates, deprecated format characters)"),
    (0x3000, 0x3000, "space (ideographic)"),
    (0xD800, 0xDFFF, "surrogates"),
    (0xE000, 0xF8FF, "private use"),
    (0xFDD0, 0xFDEF, "noncharacters"),
    (0xFEFF, 0xFEFF, "format (byte-order mark)"),
    (0xFFF0, 0xFFF8, "reserved for format characters"),
    (0xFFF9, 0xFFFB, "format (interlinear annotation)"),
    (0x110BD, 0x110BD, "format (Kaithi number sign)"),
    (0x110CD, 0x110CD, "format (Kaithi number sign above)"),
    (0x13430, 0x1343F, "format (Egyptian hieroglyph format controls)"),
    (0x1BCA0, 0x1BCA3, "format (shorthand format controls)"),
    (0x1D173, 0x1D17A, "format (musical symbol beams and phrasing)"),
    (0xE0000, 0xE0000, "reserved for format characters"),
    (0xE0001, 0xE0001, "format (language tag)"),
    (0xE0002, 0xE001F, "reserved for format characters"),
    (0xE0020, 0xE007F, "format (tag characters)"),
    (0xE0080, 0xE00FF, "reserved for format characters"),
    (0xE01F0, 0xE0FFF, "reserved for format characters"),
    (0xF0000, 0x10FFFF, "private use (planes 15 and 16, with their noncharacters)"),
    # The last two code points of every plane are noncharacters (planes 15 and 16: above).
    *((plane + 0xFFFE, plane + 0xFFFF, "noncharacters") for plane in range(0, 0xF0000, 0x10000)),
)


def _merged() -> list[tuple[int, int]]:
    """``REFUSED`` in order, adjacent ranges joined: the shortest class to write."""
    ranges: list[tuple[int, int]] = []
    for first, last, _ in sorted(REFUSED):
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], max(last, ranges[-1][1]))
        else:
            ranges.append((first, last))
    return ranges


def _class() -> str:
    """``REFUSED`` as the inside of a regular-expression class. As JSON Schema (ECMA-262) and
    Python read alike: a character of the Basic Multilingual Plane as ``\\uXXXX``, one beyond it
    as itself (ECMA-262 has no escape Python reads for it; with the ``u`` flag, as JSON Schema
    validators use, it is one character)."""
    def one(cp: int) -> str:
        return f"\\u{cp:04x}" if cp <= 0xFFFF else chr(cp)
    return "".join(one(a) if a == b else f"{one(a)}-{one(b)}" for a, b in _merged())


#: ``PrintableText.pattern`` in the OpenAPI document: exactly what ``printable`` accepts.
PATTERN = f"^[^{_class()}]*$"
#: One refused character, anywhere.
_REFUSED = re.compile(f"[{_class()}]")
SHOWN_MAX = 80
EMAIL_MAX = 254
#: The e-mail addresses the OpenAPI document admits (its ``EmailAddress`` schema, with ``maxLength``
#: ``EMAIL_MAX``): spaces around, one ``@``, neither part empty nor holding a space or a refused
#: character. The rest (the domain is a hostname) a pattern cannot say; ``email_address`` does.
EMAIL_PATTERN = f"^ *[^@ {_class()}]+@[^@ {_class()}]+ *$"
EMAIL_MESSAGE = ("Must be an e-mail address: at most 254 characters, one @ between a name and a hostname, "
                 "and no space, control or format character")


def printable(text: str) -> str | None:
    """``text`` without leading and trailing spaces if it is printable, else ``None``.

    Only the ASCII space is trimmed, the one space the rule allows: ``str.strip`` would also take
    a NBSP, U+0085 or U+2028 off the ends, and so accept there what it refuses inside."""
    if text.isascii() and text.isprintable():  # the common case, in C; ASCII is the same in every Unicode
        return text.strip(" ")
    return None if _REFUSED.search(text) else text.strip(" ")


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


def normalise_email(email: str) -> str:
    """E-mail addresses compare case-insensitively here (providers differ on the local part).
    Only ASCII spaces are trimmed, as for short text: any other space is refused, not trimmed."""
    return email.strip(" ").lower()


def email_address(raw: str) -> str | None:
    """``raw`` without the ASCII spaces around it if it is an e-mail address by the rule above,
    else ``None``. The limit counts what was sent, spaces included, as the OpenAPI document's
    ``maxLength`` does."""
    email = raw.strip(" ")
    local, at, domain = email.partition("@")
    if len(raw) > EMAIL_MAX or not local or not at or "@" in domain or " " in email or domain.endswith(".") \
            or _REFUSED.search(email):
        return None
    # Imported here: core.hostnames quotes names with this module's ``shown``.
    from core import hostnames

    try:
        hostnames.canonical(domain)
    except hostnames.HostnameError:
        return None
    return email
