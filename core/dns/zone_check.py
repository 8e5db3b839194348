"""The delegation zone's own delegation checked (``[delegation_dns] zone``, ``kind = "acme"``):
every customer's certificate depends on the CA's resolvers reaching it, and nothing else tells
the operator when they cannot. A zone whose parent lost its NS records made every order fail at
the CA while every customer was told to check records that were right.

The configured resolvers (``[dns] nameservers``) are asked for the zone's NS, as a CA's would
be, by the delegation walk of core/dns/authority.py; the names are compared with ``[delegation_dns]
nameservers``, and each nameserver's address is asked directly for the zone's SOA, which it must
answer with the AA flag (core/dns/delegation.py). When the resolvers cannot answer for the zone at
all (every nameserver dead), the parent's servers are asked for their referral instead. The
states, worst first:

- ``not_delegated``: the name is its parent zone's own (no NS records there);
- ``other_nameservers``: delegated, but to NS names other than the configured ones;
- ``lame``: some nameserver does not answer for the zone authoritatively (named, with how);
- ``unknown``: a lookup failed (a resolver timed out): not a verdict, only a warning;
- ``ok``.

Run at start-up and every ``[lifecycle] active_check_seconds`` by each serving process (core/runtime/
jobs.py), and by check-config; the last result is stored (store/zone_check.py) so that every
process's diagnosis (core/verification/acme_findings.py) and ``/metrics`` say the same. A broken
delegation is a warning, never a refusal to start: the service runs without one in development,
and an operator fixing the registrar needs the service up to see the fix work.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Literal

import attrs

from core.dns.delegation import ServerCheck, check_server
from store.zone_check import ZoneCheckRow

if TYPE_CHECKING:
    from core.config import Config
    from core.dns.authority import Authority
    from core.dns.lookups import Lookup
    from core.services import Services
    from store import Store

log = logging.getLogger(__name__)

State = Literal["ok", "not_delegated", "other_nameservers", "lame", "unknown"]
BROKEN = ("not_delegated", "other_nameservers", "lame")
_DOCS = "docs/acme.md, \"The delegation zone's DNS\""


@attrs.frozen
class ZoneCheck:
    zone: str
    state: State
    message: str
    "What DNS says, in full sentences (``ok``: the nameservers that answer)."
    fix: str = ""
    "What to change, at the registrar or in the config (empty when nothing is to be done)."

    @property
    def broken(self) -> bool:
        return self.state in BROKEN

    def line(self) -> str:
        """check-config's line: a warning that does not fail the command."""
        said = f"  delegation zone {self.zone}: "
        if self.state == "ok":
            return said + self.message
        if self.state == "unknown":
            return said + f"WARNING: its delegation could not be checked: {self.message}"
        return said + f"WARNING: {self.message} Fix: {self.fix}"


def applies(config: Config) -> bool:
    """In development (another provider, or no zone) there is nothing to check."""
    return config.provider.kind == "acme" and bool(config.delegation_dns.zone)


def _names(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(names) or "(none)"


async def check_zone(config: Config, authority: Authority) -> ZoneCheck:
    """The delegation of ``[delegation_dns] zone`` as DNS has it now; never raises."""
    zone = config.delegation_dns.zone.lower().rstrip(".")
    expected = tuple(sorted({ns.lower().rstrip(".") for ns in config.delegation_dns.nameservers}))
    walk = await authority.walk(zone)
    if walk.zone is not None and walk.zone.name != zone:
        return _not_delegated(zone, walk.zone.name, expected)
    if walk.zone is None and not walk.unanswered:
        return _not_delegated(zone, zone.partition(".")[2], expected)
    if walk.zone is not None:
        named, by = walk.zone.nameservers, "DNS (the resolvers of [dns] nameservers)"
        checks, problems, unanswered = await _ask_each(authority, zone, named)
    else:
        found = await authority.delegation(walk, zone)
        if found is None or found.zone != zone:
            return ZoneCheck(zone, "unknown", f"the resolvers did not answer for it ({_said(walk.unanswered)}).")
        named = tuple(sorted([c.nameserver for c in found.checks] + list(found.unasked)))
        by = f"its parent zone {found.parent}" if found.parent else "its parent zone"
        checks = list(found.checks)
        problems = [f"{ns}: the service found no address it may reach" for ns in found.unasked]
        unanswered = list(walk.unanswered)
    if expected and set(named) != set(expected):
        return ZoneCheck(
            zone, "other_nameservers",
            f"The delegation zone {zone} is delegated to other nameservers: {by} names {_names(named)}, but "
            f"[delegation_dns] nameservers lists {_names(expected)}. Certificate authorities ask the servers "
            "DNS names, which may not have the challenge values the service publishes.",
            fix=f"At the registrar or DNS host of the zone above {zone}, make the NS records of {zone} name "
                f"{_names(expected)}; or, if {_names(named)} are the right servers, list them in "
                f"[delegation_dns] nameservers ({_DOCS}).")
    timeout = config.dns.timeout_seconds
    silent = [check for check in checks if not check.answers]
    if silent or problems:
        said = "; ".join([check.said(timeout) for check in silent] + problems)
        lame = [check.nameserver for check in silent] + [p.partition(":")[0] for p in problems]
        none = not any(check.answers for check in checks)
        what = ("none of which answers for it" if none else "not all of which answer for it")
        harm = ("No certificate authority can read the challenge values the service publishes." if none else
                "A certificate authority validating from several places may ask one of them, and fail.")
        return ZoneCheck(
            zone, "lame", f"The delegation zone {zone} is delegated to nameservers {what}: {said}. {harm}",
            fix=f"Have {_names(lame)} answer for {zone} (the service's DNS server, [delegation_dns] listen, "
                "reachable at their addresses on port 53, UDP and TCP), or remove them from the NS records of "
                f"{zone} at the registrar and from [delegation_dns] nameservers ({_DOCS}).")
    if unanswered:
        return ZoneCheck(zone, "unknown", f"the resolvers did not answer ({_said(unanswered)}).")
    return ZoneCheck(zone, "ok", f"delegated to {_names(named)}, each answering for it authoritatively")


def _not_delegated(zone: str, parent: str, expected: tuple[str, ...]) -> ZoneCheck:
    servers = _names(expected) if expected else "the service's nameservers"
    return ZoneCheck(
        zone, "not_delegated",
        f"The delegation zone {zone} is not delegated: its parent zone {parent} has no NS records for it, so "
        f"resolvers take {parent}'s own answer for its names (they do not exist), and no certificate authority "
        "can read the challenge values the service publishes there.",
        fix=f"At the registrar or DNS host of {parent}, add NS records for {zone} naming {servers}, with "
            f"their addresses, which must lead to the service's DNS server ({_DOCS}).")


async def _ask_each(authority: Authority, zone: str,
                    names: tuple[str, ...]) -> tuple[list[ServerCheck], list[str], list[Lookup]]:
    """Each nameserver asked for the zone's SOA at its first address the service may reach: how
    each answered, those that could not be asked (said why), and the address lookups not answered."""
    timeout = authority.config.timeout_seconds
    found = await asyncio.gather(*(authority.resolvers.addresses(ns) for ns in names))
    checks: list[asyncio.Future[ServerCheck]] = []
    problems: list[str] = []
    unanswered: list[Lookup] = []
    for ns, (addresses, lookups) in zip(names, found):
        reachable = [address for address in addresses if authority.allowed(address)]
        if reachable:
            checks.append(asyncio.ensure_future(check_server(ns, reachable[0], authority.port, zone, timeout)))
        elif addresses:
            problems.append(f"{ns}: its addresses ({', '.join(addresses)}) are ones the service may not reach "
                            "([network] allow_private_ranges)")
        elif failed := [lookup for lookup in lookups if lookup.outcome in ("timeout", "error")]:
            unanswered += failed
        else:
            problems.append(f"{ns}: it has no address (no A or AAAA record)")
    return list(await asyncio.gather(*checks)), problems, unanswered


def _said(lookups: tuple[Lookup, ...] | list[Lookup]) -> str:
    return "; ".join(f"{lookup.rtype} {lookup.name}: {lookup.detail or lookup.outcome}" for lookup in lookups)


def check_lines(config: Config, authority: Authority) -> list[str]:
    """check-config's line (none in development): asked now, never stored (check-config writes nothing)."""
    if not applies(config):
        return []
    return [asyncio.run(check_zone(config, authority)).line()]


async def check_and_keep(services: Services) -> ZoneCheck:
    """The periodic check (and the one at start-up): asked, logged, and kept for every process."""
    checked = await check_zone(services.config, services.authority)
    row = ZoneCheckRow(zone=checked.zone, state=checked.state, message=checked.message, fix=checked.fix,
                       checked_at=services.clock.now())
    await services.store.run(_keep, services.store, row)
    if checked.state == "ok":
        log.info("the delegation zone %s is %s", checked.zone, checked.message)
    elif checked.state == "unknown":
        log.warning("the delegation of the zone %s could not be checked: %s", checked.zone, checked.message)
    else:
        log.warning("%s Fix: %s", checked.message, checked.fix)
    return checked


def _keep(store: Store, row: ZoneCheckRow) -> None:
    with store.transaction():
        store.zone_check.keep(row)


def last_check(store: Store, zone: str) -> ZoneCheck | None:
    """The last check kept (a unit of work), if it was of ``zone`` (the one configured now)."""
    row = store.zone_check.last()
    if row is None or row.zone != zone.lower().rstrip("."):
        return None
    return ZoneCheck(row.zone, row.state, row.message, row.fix)  # type: ignore[arg-type]  # written from a State
