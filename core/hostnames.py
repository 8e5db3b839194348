"""Hostname rules, in one place for every entry point (create, bulk, sign-up).

A hostname is stored in its canonical ASCII form: lower case, no trailing dot, internationalised
labels as IDNA 2008 A-labels (UTS 46 mapping, non-transitional). It must be a name a public CA
can issue for: at least two labels within DNS limits, not an IP address, and registrable under
a public suffix without being one itself. The Public Suffix List comes bundled with the
``publicsuffixlist`` package, so no list is downloaded at run time.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import string
import unicodedata

import idna
from publicsuffixlist import PublicSuffixList

from core.text import shown

MAX_LENGTH = 253
MAX_LABEL = 63
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_ASCII_NAME = re.compile(r"[a-z0-9.-]+")
_PUNCTUATION = re.compile(r"[\x21-\x2c\x2f\x3a-\x40\x5b-\x60\x7b-\x7e]")  # ASCII, but not a letter, digit, "-" or "."
_ASCII_UPPER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_SPACE = re.compile(r"\s")  # the same characters as str.isspace (both use Py_UNICODE_ISSPACE)
#: Top-level labels no public CA issues for (RFC 6761, 6762, 7686, 8375, 9476; ICANN's .internal).
SPECIAL_USE = frozenset({"arpa", "alt", "example", "internal", "invalid", "local", "localhost", "onion", "test"})
#: Scripts with many letters that look alike: a label mixing them is how lookalike names are made.
CONFUSABLE_SCRIPTS = ("LATIN", "CYRILLIC", "GREEK")


@functools.cache
def public_suffixes() -> PublicSuffixList:
    """The list, parsed once per process and shared. Parsed on first use, not on import: parsing
    takes 0.1 s that start-up would otherwise wait for (the service parses it in a thread once it
    listens: handlers/server.py)."""
    return PublicSuffixList()


class HostnameError(ValueError):
    """Why a hostname is refused, worded for the caller."""


def normalise(raw: str) -> str:
    """The canonical form of ``raw``, or ``HostnameError`` saying exactly what is wrong."""
    name = canonical(raw)
    _check_special_use(name)
    _check_registrable(name)
    return name


def canonical(raw: str) -> str:
    """``raw`` as a well-formed DNS name in its canonical ASCII form, or ``HostnameError``: the
    rules of a name, without those of a name a public CA issues for (special-use, public
    suffixes), which is what the domain of an e-mail address must be (core/text.py)."""
    given = shown(raw.strip())
    name = raw.strip().lower()
    name = name.removesuffix(".")
    if not name:
        raise HostnameError("Hostname is empty.")
    if name.startswith("*"):
        raise HostnameError(
            "Wildcard hostnames are not supported; add each exact hostname (one certificate per hostname)."
        )
    if _is_ip_address(name):
        raise HostnameError(f"'{given}' is an IP address; a hostname is required.")
    if "/" in name or ":" in name:
        raise HostnameError(f"'{given}' is not a bare hostname; leave out the scheme, port and path.")
    if "_" in name:
        raise HostnameError(f"'{given}' contains an underscore, which hostnames may not.")
    if _SPACE.search(name):
        raise HostnameError(f"'{given}' contains white space.")
    if punctuation := _PUNCTUATION.search(name):  # named plainly, not as IDNA's "Codepoint U+002C ..."
        raise HostnameError(f"'{given}' contains '{punctuation.group()}', which hostnames may not: only letters, "
                            "digits, hyphens and dots.")
    plain = _plain_ascii(name)
    try:
        if not plain:
            name = idna.encode(name, uts46=True, transitional=False).decode("ascii")
    except idna.IDNAError as exc:
        raise HostnameError(f"'{given}' is not a valid hostname: {exc}.") from None
    except UnicodeError:
        raise HostnameError(f"'{given}' is not a valid hostname: a label is empty or too long.") from None
    if plain and "." in name and not name[name.rfind(".") + 1:].isdigit():
        # Its labels passed _plain_ascii's checks, which hold all of _check_labels' but these two,
        # and it has no A-label for _check_scripts to read: a bulk create of 500 checked each twice.
        return name
    _check_labels(name)
    _check_scripts(name)
    return name


def match_key(name: str) -> str | None:
    """A hostname a peer sends (a TLS ``server_name``, Caddy's ``ask``) in the stored form it is
    looked up by, or None when it is not a valid hostname, which then matches nothing. Unlike
    ``normalise``, which reads what a person types, it maps nothing but the case of ASCII letters
    and one trailing dot: strict IDNA 2008, no UTS 46 mapping nor Unicode ``lower()``, so that no
    other character becomes an ASCII one (the KELVIN SIGN U+212A is not ``k``, nor a fullwidth
    letter or U+3002 a letter or a dot) and a name nobody stored never reaches a stored name's
    certificate. A U-label is taken as its A-label. Costs a translate and a regex for most names."""
    name = name.removesuffix(".").translate(_ASCII_UPPER)
    if _plain_ascii(name):
        return name
    try:
        key = idna.encode(name, uts46=False, strict=True).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return None
    return key if not key.endswith(".") else None  # "a.com.." had one dot too many


def _plain_ascii(name: str) -> bool:
    """A name IDNA would give back unchanged: valid labels of ASCII letters, digits and hyphens,
    no A-label (``xn--``) to check, no hyphens in the 3rd and 4th places. Most names are, and
    skipping the IDNA library for them halves the time of a 500-name bulk create."""
    if len(name) > MAX_LENGTH or not _ASCII_NAME.fullmatch(name):
        return False
    return all(len(label) <= MAX_LABEL and _LABEL.match(label) and label[2:4] != "--" for label in name.split("."))


def _check_special_use(name: str) -> None:
    tld = name.rsplit(".", 1)[-1]
    if tld in SPECIAL_USE:
        raise HostnameError(f"'{name}' is a special-use name (.{tld}): no public certificate authority issues for it.")


def _check_scripts(name: str) -> None:
    """Refuse a label mixing Latin, Cyrillic or Greek letters (``pаypal`` with a Cyrillic ``а``);
    a label in one script, or mixing others (Japanese kana and kanji), is fine."""
    for label in name.split("."):
        if not label.startswith("xn--"):
            continue
        text = idna.decode(label)
        scripts = {unicodedata.name(ch, "").split(" ")[0] for ch in text if ch.isalpha()}
        mixed = [s for s in CONFUSABLE_SCRIPTS if s in scripts]
        if len(mixed) > 1:
            raise HostnameError(
                f"The label '{text}' mixes {' and '.join(s.title() for s in mixed)} letters, as lookalikes of other "
                "names do; use one script per label."
            )


def _is_ip_address(name: str) -> bool:
    if ":" not in name and not name[-1].isdigit():
        return False  # no IPv6 colon, and an IPv4 address ends in a digit: most names, answered at once
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def _check_labels(name: str) -> None:
    if len(name) > MAX_LENGTH:
        raise HostnameError(f"Hostname is {len(name)} characters long; the limit is {MAX_LENGTH}.")
    labels = name.split(".")
    if len(labels) < 2:
        raise HostnameError(f"'{name}' has a single label; a hostname needs at least two (like shop.example.com).")
    for label in labels:
        if not label:
            raise HostnameError(f"'{name}' has an empty label (two dots in a row).")
        if len(label) > MAX_LABEL:
            raise HostnameError(f"The label '{label[:20]}…' is {len(label)} characters long; the limit is {MAX_LABEL}.")
        if not _LABEL.match(label):
            raise HostnameError(
                f"The label '{label}' may hold only letters, digits and inner hyphens."
            )
    if labels[-1].isdigit():
        raise HostnameError(f"'{name}' ends in a numeric label, which no top-level domain is.")


def _check_registrable(name: str) -> None:
    suffix = public_suffixes().publicsuffix(name, accept_unknown=False)
    if suffix is None:
        tld = name.rsplit(".", 1)[-1]
        raise HostnameError(f"'.{tld}' is not a public top-level domain.")
    if name == suffix:
        raise HostnameError(f"'{name}' is a public suffix; add a name registered under it.")


def zone_of(apex: str) -> str:
    """The registrable domain holding ``apex`` (``shop.example.co.uk`` -> ``example.co.uk``): the
    zone most customers manage at their DNS host."""
    return public_suffixes().privatesuffix(apex) or apex


def relative_name(host: str, zone: str) -> str:
    """``host`` as a DNS panel for ``zone`` asks for it (``_acme-challenge.shop``); ``@`` for the apex."""
    if host == zone:
        return "@"
    return host.removesuffix("." + zone)
