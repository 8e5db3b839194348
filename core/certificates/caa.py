"""CAA pre-flight (RFC 8659): would the provider's certificate authorities be allowed to issue?

The relevant record set is the first one found climbing from the hostname towards the root. A
set with ``issue`` records must name one of ``[provider] caa_issuers``; a critical flag on a
property no CA understands forbids issuance. A lookup that fails (SERVFAIL, timeout) does not
block: the provider checks CAA again itself, and the message says what could not be checked. A
SERVFAIL that the resolver answers with DNSSEC checking disabled does block: the zone's DNSSEC
does not validate, and the certificate authority's validating resolvers will fail the same way, so
handing the domain to the provider would only spend its validation attempts.
"""

from __future__ import annotations

import attrs

from core.dns.lookups import CaaRecord, Resolver
from core.dns.probe import dnssec_fix, unchecked

#: Properties RFC 8659 and its extensions define; a critical unknown one forbids issuance.
KNOWN_TAGS = frozenset({"issue", "issuewild", "iodef", "contactemail", "contactphone", "issuemail", "issuevmc"})
CRITICAL = 128


@attrs.frozen
class CaaVerdict:
    allowed: bool
    message: str | None = None
    "Why issuance is blocked, with the records to add; or what could not be checked."
    dnssec: bool = False
    "Blocked because the zone's DNSSEC does not validate, not by CAA records."


def _issuer_domain(value: str) -> str:
    return value.split(";", 1)[0].strip().lower().rstrip(".")


def _judge(name: str, records: tuple[CaaRecord, ...], issuers: list[str]) -> CaaVerdict:
    shown = ", ".join(str(r) for r in records)
    critical = [r for r in records if r.flags & CRITICAL and r.tag not in KNOWN_TAGS]
    if critical:
        return CaaVerdict(
            False,
            f"The CAA record {critical[0]} at {name} is marked critical with a property no certificate "
            f"authority understands, so none may issue; remove it.",
        )
    issue = [r for r in records if r.tag == "issue"]
    if not issue or any(_issuer_domain(r.value) in issuers for r in issue):
        return CaaVerdict(True)
    wanted = "; ".join(f'{name}. CAA 0 issue "{issuer}"' for issuer in issuers)
    return CaaVerdict(
        False,
        f"The CAA records at {name} ({shown}) allow none of the certificate authorities the edge provider "
        f"uses, so the certificate cannot be issued. Add these records at {name}: {wanted}.",
    )


async def preflight(dns: Resolver, hostname: str, issuers: list[str]) -> CaaVerdict:
    """Check CAA for ``hostname`` and its parents, all looked up at once."""
    labels = hostname.split(".")
    names = [".".join(labels[i:]) for i in range(len(labels))]
    lookups = await dns.lookup_many([(name, "CAA") for name in names])
    for name, lookup in zip(names, lookups):
        if lookup.outcome == "found":
            return _judge(name, lookup.caa, [i.lower() for i in issuers])
        if await unchecked(dns, lookup) is not None:
            return CaaVerdict(False, f"DNSSEC validation fails at {name}: the resolvers answer SERVFAIL for its CAA "
                                     "records, which they do answer with DNSSEC checking disabled. The certificate "
                                     "authority's resolvers validate DNSSEC and would fail the same way, so the domain "
                                     f"is not handed to the edge provider. {dnssec_fix(name)}", dnssec=True)
        if lookup.outcome in ("timeout", "error"):
            why = "timed out" if lookup.outcome == "timeout" else f"failed ({lookup.detail or 'server error'})"
            return CaaVerdict(True, f"The CAA lookup at {name} {why}, so CAA was not checked before issuing.")
    return CaaVerdict(True)
