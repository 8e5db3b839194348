"""What one DNS answer says about one of a domain's two records, in a customer's words.

Judged here for verify-delegation, recheck and the background checks (core/verification/checks.py,
which looks again at what a resolver's answer alone does not tell); the diagnosis judges CNAME
chains and split TXT values with the same functions (core/verification/record_findings.py), so both
say the same of them.
"""

from __future__ import annotations

from typing import Literal

import attrs

from core.dns import chain
from core.dns.lookups import Lookup, Resolver

State = Literal["ok", "missing", "wrong", "unknown"]


@attrs.frozen
class RecordCheck:
    state: State
    message: str
    dnssec: bool = False
    "Wrong because the zone's DNSSEC does not validate."
    lame: str | None = None
    "Wrong because the zone's nameservers do not answer for it: the fix (core/verification/lame.py)."
    cached_for: int | None = None
    "For a missing record: how many more seconds the resolver keeps saying so, when it says."
    published: bool = False
    "Missing at the resolvers only: the zone's own nameservers publish it, a cached answer hides it."
    other_token: str | None = None
    "Wrong because the TXT record holds another ownership token (this one) and not ours."


def same_name(a: str, b: str) -> bool:
    return a.rstrip(".").lower() == b.rstrip(".").lower()


def failed(lookup: Lookup) -> RecordCheck:
    if lookup.outcome == "timeout":
        waited = f" after {lookup.waited:.1f} s" if lookup.waited is not None else ""
        return RecordCheck("unknown", f"The DNS lookup of {lookup.rtype} at {lookup.name} got no answer: the resolver "
                                      f"did not reply, and the DNS client gave up{waited} (its tries ran out); try "
                                      "again shortly.")
    return RecordCheck("unknown", f"The DNS lookup of {lookup.rtype} at {lookup.name} failed ({lookup.detail or 'server error'}); try again shortly.")


def chain_check(followed: chain.Chain, target: str) -> RecordCheck:
    """A CNAME that does not point straight at ``target``, judged by where its chain ends."""
    host, first = followed.names[0], followed.names[1]
    if followed.end == "target":
        return RecordCheck("ok", f"The CNAME at {host} points to {first}, and the chain ({followed}) ends at "
                                 f"{target}: certificate authorities follow it.")
    if followed.end == "loop":
        return RecordCheck("wrong", f"The CNAME at {host} leads into a loop ({followed}): no resolver can follow "
                                    f"it. Point it straight to {target}.")
    if followed.end == "unknown":
        return RecordCheck("unknown", f"The CNAME at {host} points to {first}, and the chain ({followed}) could not "
                                      f"be followed past {followed.last}; try again shortly.")
    if len(followed.names) == 2:
        return RecordCheck("wrong", f"The CNAME at {host} points to {first}; it must point to {target}.")
    ends = "is too long for resolvers to follow" if followed.end == "too_long" else f"ends at {followed.last}"
    return RecordCheck("wrong", f"The CNAME at {host} points to {first}, and the chain ({followed}) {ends}, not at "
                                f"{target}; point it straight to {target}.")


async def check_delegation(dns: Resolver, lookup: Lookup, target: str) -> RecordCheck:
    """Judge the CNAME ``lookup``; a name with no CNAME is asked for TXT records that would block one."""
    host = lookup.name
    if lookup.outcome == "found":
        if any(same_name(v, target) for v in lookup.values):
            return RecordCheck("ok", f"The CNAME at {host} points to {target}.")
        return chain_check(await chain.follow(dns, host, lookup.values[0], target), target)
    if lookup.outcome == "nxdomain":
        return RecordCheck("missing", f"No record exists at {host} (NXDOMAIN); publish a CNAME to {target}.")
    if lookup.outcome == "nodata":
        # A leftover TXT at the same name is the classic reason a CNAME cannot be published.
        others = await dns.lookup(host, "TXT")
        if others.outcome == "found":
            return RecordCheck(
                "wrong",
                f"{host} has TXT records but no CNAME; remove them and publish a CNAME to {target} "
                "(a CNAME cannot share its name with other records).",
            )
        return RecordCheck("missing", f"{host} exists but has no CNAME record; publish a CNAME to {target}.")
    return failed(lookup)


def split_over_records(values: list[str], expected: str) -> bool:
    """Two TXT records that together make the value (a panel that cut it, or a person who did):
    each record is compared whole, so the token is not found, though it looks published."""
    wanted = expected.lower()
    texts = [v.strip().strip('"').lower() for v in values]
    return any(a + b == wanted for a in texts for b in texts if a is not b)


def check_ownership(lookup: Lookup, expected: str) -> RecordCheck:
    """Judge the TXT ``lookup``."""
    host = lookup.name
    if lookup.outcome == "found":
        values = [v.strip().strip('"') for v in lookup.values]
        if any(v.lower() == expected.lower() for v in values):
            return RecordCheck("ok", f"The TXT record at {host} holds the ownership token.")
        if split_over_records(values, expected):
            return RecordCheck("wrong", f"The ownership value at {host} is split over two TXT records; put the whole "
                                        f"value {expected} in one TXT record.")
        prefix = expected.split("=", 1)[0] + "="
        other = [v for v in values if v.lower().startswith(prefix)]
        if other:
            return RecordCheck("wrong", f"The TXT record at {host} holds another token ({other[0]}); it must be {expected}.",
                               other_token=other[0])
        shown = ", ".join(values[:3])
        return RecordCheck("wrong", f"The TXT records at {host} ({shown}) do not include {expected}.")
    if lookup.outcome == "nxdomain":
        return RecordCheck("missing", f"No record exists at {host} (NXDOMAIN); publish a TXT record {expected}.")
    if lookup.outcome == "nodata":
        return RecordCheck("missing", f"{host} exists but has no TXT record; publish a TXT record {expected}.")
    return failed(lookup)


def holds(lookup: Lookup, expected: str) -> bool:
    if lookup.outcome != "found":
        return False
    if lookup.rtype == "CNAME":
        return any(same_name(v, expected) for v in lookup.values)
    return any(v.strip().strip('"').lower() == expected.lower() for v in lookup.values)
