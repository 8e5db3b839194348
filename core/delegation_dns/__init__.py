"""The DNS of the delegation zone (``[delegation_dns]``): where the DNS-01 challenge values the
ACME client (core/acme/) is asked for are published, and who answers for them.

Each domain's ``_acme-challenge`` CNAME points to a name of its own one label under the zone
(``<label>.<zone>``); the CA follows it and reads the TXT values published there. Two ways to
publish, behind one ``ChallengeRecords``:

- ``builtin``: the values are rows of the store (``records.StoredRecords``), and the service
  answers for the zone itself (``server.py`` on the sockets of ``sockets.py``, answers built in
  ``answers.py``): every process,
  on SQLite or PostgreSQL, reads the same rows and answers the same.
- ``rfc2136``: the values are written to the operator's own primary nameserver (BIND, Knot,
  PowerDNS) by dynamic update signed with TSIG (``rfc2136.py``).

May import: the base modules of core/ and store/. Nothing else in core/ is below it.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from core.config import Config

#: How long a published value is answered when nobody withdraws it (a process that stopped halfway).
CHALLENGE_LIFETIME = dt.timedelta(hours=1)
#: The most values expected at one name at once (an order's, a renewal's, one left by a process
#: that stopped halfway): more is said in the log, with the orders that left them.
MAX_VALUES_AT_A_NAME = 4
#: How long the zone's journal keeps a change: a secondary further behind is sent the whole zone.
JOURNAL_KEPT = dt.timedelta(days=1)
#: The TTL of challenge TXT records: none (RFC 2181: not to be cached). A value lives for one order;
#: a resolver that kept the name's values would hand the CA an earlier order's at the next one (a
#: renewal, a new order after a refused one) and fail it.
TXT_TTL = 0
#: The SOA's refresh, retry and expire, for the secondaries of a hidden primary (``secondaries``,
#: transfers.py), which NOTIFY (notify.py) keeps current within a second of each change. Refresh is
#: the fallback when every NOTIFY to a secondary was lost: a minute, so that a value reaches it before a
#: CA's order gives up, at the cost of one SOA query a minute. Retry: 10 s while the primary does not
#: answer. Expire: 14 days, so that the secondaries go on answering the zone's SOA and NS (its
#: delegation stays sound) through a long outage of the service, when no value changes anyway.
SOA_REFRESH, SOA_RETRY, SOA_EXPIRE = 60, 10, 1209600


class ChallengeRecordsError(Exception):
    """The records could not be written; the message is a sentence an operator can act on."""


class ChallengeRecords(Protocol):
    async def publish(self, name: str, value: str, *, order_url: str | None = None) -> None:
        """Publish the TXT ``value`` at ``name`` (``<label>.<zone>``), beside any others there,
        until it is withdrawn or ``CHALLENGE_LIFETIME`` passes; ``order_url``: the ACME order it
        answers (a value whose order is over is withdrawn)."""

    async def withdraw(self, name: str, value: str) -> None:
        """Withdraw that one value; withdrawing a value that is not there is not an error."""

    async def confirm(self, name: str, value: str, *, within: float) -> list[str]:
        """Wait up to ``within`` seconds for every authoritative server of the zone to answer the
        published ``value`` at ``name`` (confirm.py): those that do not, each named in words."""


def challenge_name(name: str, zone: str) -> str:
    """``name`` as stored and updated: lower case, no final dot. Only names one label under the
    zone are challenge names: the server then never has an empty non-terminal to answer for."""
    name, zone = name.lower().rstrip("."), zone.lower().rstrip(".")
    label, dot, parent = name.partition(".")
    if not label or not dot or parent != zone:
        raise ValueError(f"{name!r} is not a name one label under the delegation zone {zone}")
    return name


def challenge_value(value: str) -> str:
    """``value`` if one TXT string holds it (255 bytes; a DNS-01 value has 43 characters)."""
    if not 0 < len(value.encode()) <= 255:
        raise ValueError(f"a TXT value holds 1 to 255 bytes, not {len(value.encode())}")
    return value


def answers_itself(config: Config) -> bool:
    """Whether the service runs the zone's authoritative server (else there is none, or it is the
    operator's)."""
    return config.provider.kind == "acme" and config.delegation_dns.mode == "builtin"
