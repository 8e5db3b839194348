"""CAA pre-flight (RFC 8659): would the provider's certificate authorities be allowed to issue?

The relevant record set is the first one found climbing from the hostname towards the root. A
set with ``issue`` records must name one of the provider's issuers (``[provider] caa_issuers``, or
an ACME CA's ``caaIdentities``); a critical flag on a property no CA understands forbids issuance.
An ``issue`` record may also bind its CA to one account (``accounturi``) and to validation methods
(``validationmethods``, RFC 8657): it then permits only that account, and only DNS-01 (the one
method the service uses) when it lists it. A lookup that fails (SERVFAIL, timeout) does not
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


#: The validation method of every certificate the service has issued (RFC 8657 ``validationmethods``).
METHOD = "dns-01"


@attrs.frozen
class CaaIssuer:
    """A certificate authority as CAA names it, and the account it issues for (RFC 8657)."""

    domain: str
    "Its issuer domain (``letsencrypt.org``)."
    account_uri: str | None = None
    "The ACME account it issues for, when known (an ``accounturi`` parameter must name it)."


@attrs.frozen
class CaaVerdict:
    allowed: bool
    message: str | None = None
    "Why issuance is blocked, with the records to add; or what could not be checked."
    dnssec: bool = False
    "Blocked because the zone's DNSSEC does not validate, not by CAA records."
    permitted: tuple[str, ...] | None = None
    "The issuer domains the records permit; None when no record restricts issuance (every one may)."


def _parts(value: str) -> tuple[str, dict[str, str]]:
    """An ``issue`` value's issuer domain and its parameters (``key=value`` separated by ``;``)."""
    domain, *rest = value.split(";")
    params = {}
    for part in rest:
        key, sep, param = part.strip().partition("=")
        if sep:
            params[key.strip().lower()] = param.strip()
    return domain.strip().lower().rstrip("."), params


def _permits(record: CaaRecord, issuer: CaaIssuer) -> bool:
    domain, params = _parts(record.value)
    if domain != issuer.domain.lower():
        return False
    if "accounturi" in params and params["accounturi"] != issuer.account_uri:
        return False
    methods = params.get("validationmethods")
    return methods is None or METHOD in [m.strip().lower() for m in methods.split(",")]


def _wanted(name: str, issuers: list[CaaIssuer], strict: bool) -> str:
    """The records to add, in the style of those there (bound to accounts and methods, or not)."""
    records = []
    for issuer in issuers:
        value = issuer.domain
        if strict and issuer.account_uri:
            value += f"; accounturi={issuer.account_uri}; validationmethods={METHOD}"
        records.append(f'{name}. CAA 0 issue "{value}"')
    return "; ".join(dict.fromkeys(records))


def _judge(name: str, records: tuple[CaaRecord, ...], issuers: list[CaaIssuer]) -> CaaVerdict:
    shown = ", ".join(str(r) for r in records)
    critical = [r for r in records if r.flags & CRITICAL and r.tag not in KNOWN_TAGS]
    if critical:
        return CaaVerdict(
            False,
            f"The CAA record {critical[0]} at {name} is marked critical with a property no certificate "
            f"authority understands, so none may issue; remove it.",
            permitted=(),
        )
    issue = [r for r in records if r.tag == "issue"]
    if not issue:
        return CaaVerdict(True)
    permitted = tuple(dict.fromkeys(i.domain for i in issuers if any(_permits(r, i) for r in issue)))
    if permitted:
        return CaaVerdict(True, permitted=permitted)
    strict = any(_parts(r.value)[1].keys() & {"accounturi", "validationmethods"} for r in issue)
    return CaaVerdict(
        False,
        f"The CAA records at {name} ({shown}) allow none of the certificate authorities the service uses "
        f"(for its account, by DNS-01), so the certificate cannot be issued. Add at {name}: "
        f"{_wanted(name, issuers, strict)}.",
        permitted=(),
    )


def terms(issuers: list[str] | list[CaaIssuer]) -> list[CaaIssuer]:
    """Issuer domains as issuers with no account named."""
    return [i if isinstance(i, CaaIssuer) else CaaIssuer(i) for i in issuers]


async def preflight(dns: Resolver, hostname: str, issuers: list[str] | list[CaaIssuer]) -> CaaVerdict:
    """Check CAA for ``hostname`` and its parents, all looked up at once."""
    labels = hostname.split(".")
    names = [".".join(labels[i:]) for i in range(len(labels))]
    lookups = await dns.lookup_many([(name, "CAA") for name in names])
    for name, lookup in zip(names, lookups):
        if lookup.outcome == "found":
            return _judge(name, lookup.caa, terms(issuers))
        if await unchecked(dns, lookup) is not None:
            return CaaVerdict(False, f"DNSSEC validation fails at {name}: the resolvers answer SERVFAIL for its CAA "
                                     "records, which they do answer with DNSSEC checking disabled. The certificate "
                                     "authority's resolvers validate DNSSEC and would fail the same way, so no certificate "
                                     f"is requested for the domain. {dnssec_fix(name)}", dnssec=True)
        if lookup.outcome in ("timeout", "error"):
            why = "timed out" if lookup.outcome == "timeout" else f"failed ({lookup.detail or 'server error'})"
            return CaaVerdict(True, f"The CAA lookup at {name} {why}, so CAA was not checked before issuing.")
    return CaaVerdict(True)
