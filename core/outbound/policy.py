"""What a user-supplied destination may be, decided without any I/O: the rules behind core/outbound/guard.py.

A URL must be https to a public DNS name (``check_url``, ``check_host``: no IP literal in any
spelling, no localhost, single label or special-use name), and every address that name resolves
to must pass ``AddressPolicy``.

The address table is explicit, from the IANA IPv4 and IPv6 Special-Purpose Address Registries
(RFC 6890 and successors). ``ipaddress.is_private``/``is_global`` are not relied on: their tables
changed between CPython patch releases (CVE-2024-4032), and 100.64.0.0/10 is neither private nor
global. For IPv6 the rule is positive: only global unicast (2000::/3) is reachable, minus the
special blocks inside it.

IPv6 addresses that carry an IPv4 address (a classic way to smuggle 127.0.0.1 past a filter):

- IPv4-mapped ``::ffff:a.b.c.d``: a socket connecting to it reaches a.b.c.d over IPv4, so it is
  judged as that IPv4 address (``::ffff:10.0.0.1`` is refused, ``::ffff:8.8.8.8`` allowed), and
  ``dial_address`` turns it into the plain IPv4 address so what is dialled is what was judged.
- NAT64 well-known prefix ``64:ff9b::a.b.c.d`` (RFC 6052): a NAT64 gateway forwards it to
  a.b.c.d, so it is judged as that IPv4 address too.
- Every other form is refused outright: IPv4-compatible ``::a.b.c.d`` (deprecated, RFC 4291),
  local-use NAT64 64:ff9b:1::/48 (the embedded address's position depends on the operator's
  prefix), 6to4 2002::/16 and Teredo 2001::/32 (tunnels to a far end the service cannot judge).

The operator's allow list (``[network] allow_private_ranges``) is checked before the table, and
for the two unwrapped forms it is checked against both the IPv6 address and the IPv4 address it
stands for, so allowing 127.0.0.0/8 allows ``::ffff:127.0.0.1`` as well.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import quote, urlsplit

import attrs
import idna

from core.hostnames import public_suffixes
from core.text import shown

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _table(entries: list[tuple[str, str]]) -> list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]]:
    return [(ipaddress.ip_network(cidr), why) for cidr, why in entries]


_PRIVATE = "a private address"
_DOCUMENTATION = "a documentation address"
_RESERVED = "a reserved address"

# Narrow blocks come before the wider ones that contain them, for the more precise reason.
_IPV4_DENIED = _table([
    ("255.255.255.255/32", "the broadcast address"),
    ("0.0.0.0/8", "a 'this network' address"),
    ("10.0.0.0/8", _PRIVATE),
    ("100.64.0.0/10", "a shared (carrier-grade NAT) address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local (cloud metadata) address"),
    ("172.16.0.0/12", _PRIVATE),
    ("192.0.0.0/24", "an IETF protocol address"),
    ("192.0.2.0/24", _DOCUMENTATION),
    ("192.88.99.0/24", "a 6to4 relay address"),
    ("192.168.0.0/16", _PRIVATE),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", _DOCUMENTATION),
    ("203.0.113.0/24", _DOCUMENTATION),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", _RESERVED),
])

_IPV6_DENIED = _table([
    ("::/128", "the unspecified address"),
    ("::1/128", "a loopback address"),
    ("::/96", "an IPv4-compatible address (deprecated)"),
    ("64:ff9b:1::/48", "a local-use NAT64 address"),
    ("100::/64", "a discard-only address"),
    ("2001::/32", "a Teredo tunnel address"),
    ("2001::/23", "an IETF protocol address"),
    ("2001:db8::/32", _DOCUMENTATION),
    ("2002::/16", "a 6to4 tunnel address"),
    ("3fff::/20", _DOCUMENTATION),
    ("5f00::/16", "an SRv6 segment identifier"),
    ("fc00::/7", _PRIVATE),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address (deprecated)"),
    ("ff00::/8", "a multicast address"),
])

_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def parse_ip(text: str) -> IPAddress | None:
    """The address ``text`` spells in standard notation (an IPv6 zone id dropped), else None."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped or NAT64 (64:ff9b::/96) address stands for, else None."""
    if ip.version == 6 and (ip in _MAPPED or ip in _NAT64):
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def dial_address(ip: IPAddress) -> IPAddress:
    """The address to connect to: an IPv4-mapped address as the IPv4 address it was judged as."""
    if ip.version == 6 and ip in _MAPPED:
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return ip


def _without_zone(ip: IPAddress) -> IPAddress:
    return ipaddress.IPv6Address(int(ip)) if ip.version == 6 and ip.scope_id else ip


class AddressPolicy:
    """Judges an IP address a user-supplied destination resolved to: allowed, or why not."""

    def __init__(self, allow_private_ranges: Iterable[str] = ()) -> None:
        self.allowed = tuple(ipaddress.ip_network(cidr, strict=False) for cidr in allow_private_ranges)

    def allows(self, address: str) -> bool:
        """Whether the service may connect to ``address`` (text, as DNS answers it)."""
        ip = parse_ip(address)
        return ip is not None and self.refusal(ip) is None

    def refusal(self, ip: IPAddress) -> str | None:
        """None if the service may connect to ``ip``, else why not (``"10.0.0.5 is a private address"``)."""
        ip = _without_zone(ip)
        inner = embedded_ipv4(ip)
        # The operator's allow list wins, for an address and the IPv4 address it stands for alike.
        if any(address in network for network in self.allowed for address in (ip, inner) if address is not None):
            return None
        if inner is not None:
            why = _denied(inner, _IPV4_DENIED)
            return None if why is None else f"{ip} stands for {inner}, {why}"
        if ip.version == 4:
            why = _denied(ip, _IPV4_DENIED)
        else:
            # Positive rule for IPv6: global unicast only, minus the special blocks inside it.
            why = _denied(ip, _IPV6_DENIED) or (None if ip in _GLOBAL_UNICAST else "not a global unicast address")
        return None if why is None else f"{ip} is {why}"


def _denied(ip: IPAddress, table: list[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]]) -> str | None:
    return next((why for network, why in table if ip in network), None)


# -- names and URLs -------------------------------------------------------------------------

MAX_URL_LENGTH = 2048

#: Top-level names that never lead to a public host: RFC 2606/6761 (localhost, invalid, test,
#: example), RFC 6762 (local, and the private-use names of its appendix G), RFC 7686 (onion),
#: RFC 9476 (alt), arpa (reverse DNS, home.arpa of RFC 8375, ipv4only.arpa, ...), internal
#: (reserved for private use by ICANN, 2024) and localdomain.
SPECIAL_USE_TLDS = frozenset({
    "alt", "arpa", "corp", "example", "home", "internal", "intranet", "invalid", "lan", "local",
    "localdomain", "localhost", "onion", "private", "test",
})

_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
# A last label of digits or 0x-hex makes browsers and inet_aton read the host as an IPv4 address
# (127.1, 0x7f.1, 2130706433, 0177.0.0.1); no top-level domain looks like that.
_NUMERIC = re.compile(r"^(?:0x[0-9a-f]*|[0-9]+)$")
_NETLOC = re.compile(r"^(?P<host>\[[^\]]*\]|[^\[\]:]*)(?::(?P<port>[0-9]*))?$")
# Printable ASCII stays as written (existing %-escapes included); anything else is %-encoded.
_PATH_SAFE = "".join(chr(c) for c in range(0x21, 0x7F))


class OutboundFailure(Exception):
    """A request to a user-supplied destination did not happen or did not complete."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        "A sentence for the user, e.g. ``The URL must use https.``"


class DestinationRefused(OutboundFailure):
    """The service will not contact this destination (its URL, name or addresses)."""


@attrs.frozen
class Target:
    url: str
    "The URL as normalised: this, never the string the user typed, is what gets requested."
    host: str
    "Lower case A-labels, no trailing dot."
    port: int
    path_and_query: str


def check_host(raw: str) -> str:
    """The host's canonical form (lower case, A-labels, no trailing dot) if it is a public DNS name."""
    if not raw:
        raise DestinationRefused("A host name is required.")
    literal = "The host must be a DNS name, not an IP address."
    # IP literals are refused in every spelling: an address cannot be told apart from an
    # internal one by the user's intent, and the odd spellings exist to slip past filters.
    if raw.startswith("["):
        raise DestinationRefused(literal)
    name = raw.lower().removesuffix(".")
    if parse_ip(name) is not None:
        raise DestinationRefused(literal)
    try:
        # UTS 46 maps look-alikes first (fullwidth digits and dots, circled letters), so every
        # check below sees the name that DNS will be asked about.
        name = idna.encode(name, uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        raise DestinationRefused(f"The host '{shown(raw)}' is not a valid DNS name.") from None
    labels = name.split(".")
    if _NUMERIC.match(labels[-1]) or parse_ip(name) is not None:
        raise DestinationRefused(literal)
    if len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise DestinationRefused(f"The host '{shown(raw)}' is not a valid DNS name.")
    if labels[-1] in SPECIAL_USE_TLDS:
        raise DestinationRefused(f"The host {name} is a special-use name, not reachable on the public internet.")
    if len(labels) < 2:
        raise DestinationRefused(f"The host must be a full DNS name like hooks.example.com, not the single label {name}.")
    if public_suffixes().publicsuffix(name, accept_unknown=False) is None:
        raise DestinationRefused(f"The host {name} is not under a public top-level domain (.{labels[-1]}).")
    return name


def check_url(url: str, *, policy: AddressPolicy | None = None) -> Target:
    """The URL's parts, normalised, if it may name a user-supplied destination; no DNS involved.

    ``policy`` only words the refusal of an IP literal (which is refused whatever it allows).
    """
    if len(url) > MAX_URL_LENGTH:
        raise DestinationRefused(f"The URL is longer than {MAX_URL_LENGTH} characters.")
    # urlsplit quietly drops tabs and newlines and strips spaces, and some parsers read a
    # backslash as a slash: a URL with any of them means different things to different readers.
    if any(ch <= " " or ch in "\x7f\\" for ch in url):
        raise DestinationRefused("The URL must not contain spaces, control characters or backslashes.")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise DestinationRefused("The URL cannot be read.") from None
    if parts.scheme != "https":
        raise DestinationRefused("The URL must use https.")
    if "#" in url:
        raise DestinationRefused("The URL must not contain a fragment (#...).")
    if "@" in parts.netloc:
        raise DestinationRefused("The URL must not contain a user name or password.")
    match = _NETLOC.match(parts.netloc)
    if match is None:
        raise DestinationRefused("The URL's host and port cannot be read.")
    port = match["port"]
    if not match["host"]:
        raise DestinationRefused("The URL must name a host.")
    if port is not None and not (port and 1 <= int(port) <= 65535):
        raise DestinationRefused("The port must be a number from 1 to 65535.")
    try:
        host = check_host(match["host"])
    except DestinationRefused as exc:
        ip = parse_ip(match["host"].strip("[]"))
        why = policy.refusal(ip) if policy is not None and ip is not None else None
        raise DestinationRefused(exc.reason[:-1] + f" ({why}).") if why else exc from None
    path_and_query = quote(parts.path or "/", safe=_PATH_SAFE)
    if parts.query:
        path_and_query += "?" + quote(parts.query, safe=_PATH_SAFE)
    port_number = int(port) if port else 443
    shown_port = "" if port_number == 443 else f":{port_number}"
    return Target(url=f"https://{host}{shown_port}{path_and_query}", host=host, port=port_number,
                  path_and_query=path_and_query)
