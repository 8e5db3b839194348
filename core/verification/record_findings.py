"""The diagnosis's first question: are the two records published, right, where they belong, and
visible to every resolver? Each problem becomes a ``Finding`` (codes in core/verification/diagnosis.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection
from typing import Literal

import attrs

from core.config import Config
from core.dns.authority import Walk, Zone
from core.dns.chain import Chain
from core.dns.delegation import Delegation
from core.dns.lookups import Lookup
from core.dns.probe import dnssec_fix, is_servfail
from core.domains.records import OWNERSHIP_VALUE_PREFIX
from core.verification import lame
from core.verification.answers import chain_check, split_over_records
from store.records import DomainRow

#: What was asked, (name, type), and the answer, from the zone's own servers or a resolver.
Answers = dict[tuple[str, str], Lookup]
Severity = Literal["error", "warning", "info"]
#: Said of every DNSSEC failure: why a certificate depends on it.
_DNSSEC_STAKES = ("Certificate authorities validate DNSSEC, so no certificate can be issued or renewed for it "
                  "until this is fixed.")


@attrs.frozen
class Finding:
    code: str
    severity: Severity
    message: str
    "What is wrong, in words a DNS administrator understands."
    fix: str | None = None
    "Exactly what to change."


@attrs.frozen
class Seen:
    """What one record looks like from everywhere it was asked."""

    name: str
    rtype: str
    expected: str
    authoritative: Lookup | None
    resolvers: list[tuple[str, Lookup]]

    def best(self) -> Lookup | None:
        """The truth as published: the zone's answer, else the first resolver that answered."""
        if self.authoritative is not None:
            return self.authoritative
        answered = [lookup for _, lookup in self.resolvers if lookup.outcome not in ("timeout", "error")]
        return answered[0] if answered else None


def authority_findings(findings: list[Finding], apex: str, walk: Walk) -> None:
    """Why the zone's own servers were not asked: a step of the walk unanswered, none found, or
    none answering. The first is a warning: the report then leans on the resolvers alone."""
    for step in walk.unanswered:
        said = f", {step.detail}" if step.outcome == "error" and step.detail else ""
        findings.append(Finding(
            "lookup_failed", "warning",
            f"The resolvers did not answer {step.rtype} at {step.name} ({step.outcome}{said}) while the zone's own "
            f"nameservers were being looked for, so the walk to the zone stopped there.",
            fix=f"Try again in a minute; if it persists, check that the resolvers can resolve {step.rtype} at {step.name}.",
        ))
    if walk.zone is None and not walk.unanswered:
        why = f"No NS records were found at or above {apex}, so the zone's own nameservers are not known"
    elif walk.zone is None:
        why = "The zone's own nameservers could not be found"
    elif not walk.zone.servers and walk.refused:
        why = (f"The zone's own nameservers ({', '.join(walk.refused)}) are not publicly reachable, so the service "
               "does not ask them")
    elif not walk.zone.servers:
        why = f"The addresses of the zone's nameservers ({', '.join(walk.zone.nameservers)}) could not be found"
    else:
        why = f"The zone's own nameservers ({', '.join(walk.zone.nameservers)}) did not answer"
    findings.append(Finding("authority_unknown", "info", f"{why}; the answers below are the resolvers' only."))


def dnssec_findings(findings: list[Finding], walk: Walk) -> None:
    """A step of the walk that validating resolvers refuse (SERVFAIL) but answer unchecked."""
    if not walk.bogus:
        return
    step = walk.bogus[0]
    zone = walk.zone.name if walk.zone is not None else step.name
    findings.append(Finding(
        "dnssec_failure", "error",
        f"The zone {zone} fails DNSSEC validation: the resolvers answer SERVFAIL for {step.rtype} at {step.name}, "
        "and answer it when asked with DNSSEC checking disabled (expired signatures, or a DS record at the parent "
        f"that matches no key). {_DNSSEC_STAKES}",
        fix=f"{dnssec_fix(zone)} Then check again.",
    ))


def lame_findings(findings: list[Finding], delegation: Delegation, timeout: float) -> None:
    """Nameservers of the zone that do not answer for it: all of them (no one can resolve the
    records, for good), or some (a certificate authority may hit one)."""
    if delegation.lame:
        findings.append(Finding("lame_delegation", "error", lame.message(delegation, timeout), fix=lame.fix(delegation)))
    elif delegation.partly_lame:
        findings.append(Finding("partly_lame_delegation", "warning", lame.partly_message(delegation, timeout),
                                fix=lame.partly_fix(delegation)))


def same_name(a: str, b: str) -> bool:
    return a.rstrip(".").lower() == b.rstrip(".").lower()


def _txt_value(value: str) -> str:
    """A TXT value as verification compares it (one layer of quotes tolerated)."""
    return value.strip().strip('"').lower()


def delegation_findings(findings: list[Finding], record: Seen, source: Answers, zone: Zone | None, *,
                        zone_is_a_domain: bool, chain: Chain | None = None) -> bool | None:
    """Findings about the CNAME; whether it is right where it is published, None when no server
    answered (not known: never taken for "wrong"). ``chain``: where a CNAME that does not point
    straight at the target leads (core/dns/chain.py)."""
    lookup = record.best()
    fix = f"Publish a CNAME record named {record.name} with the value {record.expected}."
    if lookup is None:
        return None  # nobody answered: the lookup_failed findings say so, nothing is known to be missing
    if lookup.outcome == "found":
        target = lookup.values[0]
        if any(same_name(v, record.expected) for v in lookup.values):
            return True
        if zone is not None and same_name(target, f"{record.expected}.{zone.name}"):
            findings.append(Finding(
                "delegation_target_zone_appended", "error",
                f"The CNAME at {record.name} points to {target}: the DNS host appended the zone {zone.name} to the "
                "value, which happens when the value is entered without a final dot.",
                fix=f"Set the value to {record.expected}. (with a final dot), or as the panel shows it, exactly {record.expected}.",
            ))
            return False
        if chain is not None and len(chain.names) > 2:
            return _chain_findings(findings, record, chain)
        findings.append(Finding("delegation_wrong", "error", f"The CNAME at {record.name} points to {target}, not to {record.expected}.",
                                fix=f"Change the CNAME's value to {record.expected}."))
        return False
    blockers = [source.get((record.name, t)) for t in ("TXT", "A", "AAAA")]
    blocking = [b for b in blockers if b is not None and b.outcome == "found"]
    if blocking:
        kinds = " and ".join(sorted({b.rtype for b in blocking}))
        findings.append(Finding(
            "delegation_blocked", "error",
            f"{record.name} has {kinds} records, and a CNAME cannot share its name with other records.",
            fix=f"Delete the {kinds} records at {record.name}, then {fix[0].lower()}{fix[1:]}",
        ))
        return False
    if not _misplaced(findings, record, source, zone, "CNAME", lambda v: same_name(v, record.expected),
                      zone_is_a_domain=zone_is_a_domain):
        findings.append(Finding("delegation_missing", "error", f"No CNAME record is published at {record.name}.", fix=fix))
    return False


def _chain_findings(findings: list[Finding], record: Seen, chain: Chain) -> bool | None:
    """A CNAME leading on through other CNAMEs: fine when the chain ends at the target."""
    said = chain_check(chain, record.expected).message
    fix = f"Change the CNAME at {record.name} to point straight to {record.expected}."
    if chain.end == "target":
        findings.append(Finding("delegation_chain", "info", said + " Pointing it straight there saves a lookup."))
        return True
    if chain.end == "unknown":
        findings.append(Finding("lookup_failed", "warning", said, fix=f"Try again in a minute. {fix}"))
        return None
    code = "delegation_loop" if chain.end == "loop" else "delegation_wrong"
    findings.append(Finding(code, "error", said, fix=fix))
    return False


def claimed_tokens(record: Seen) -> list[str]:
    """The ownership tokens the TXT record holds, whoever's: ``ownership_findings`` is told which
    belong to another workspace (read beforehand, in the diagnosis's unit of work)."""
    lookup = record.best()
    if lookup is None or lookup.outcome != "found":
        return []
    return [_txt_value(v)[len(OWNERSHIP_VALUE_PREFIX):] for v in lookup.values
            if _txt_value(v).startswith(OWNERSHIP_VALUE_PREFIX)]


def ownership_findings(findings: list[Finding], record: Seen, source: Answers, zone: Zone | None,
                       foreign: Collection[str], *, zone_is_a_domain: bool) -> bool:
    """``foreign``: the ``claimed_tokens`` that are another workspace's."""
    lookup = record.best()
    expected = _txt_value(record.expected)
    fix = f"Publish a TXT record named {record.name} with the value {record.expected}."
    if lookup is None:
        return False
    if lookup.outcome == "found":
        if any(_txt_value(v) == expected for v in lookup.values):
            quoted = [v for v in lookup.values if _txt_value(v) == expected and v.strip() != record.expected]
            if quoted:
                findings.append(Finding(
                    "value_quoted", "warning",
                    f"The TXT record at {record.name} holds {quoted[0]}, with literal quote characters; it is accepted, "
                    "but many tools would not match it.",
                    fix=f"Set the TXT record at {record.name} to {record.expected}, without quote characters.",
                ))
            return True
        if split_over_records(list(lookup.values), record.expected):
            findings.append(Finding(
                "ownership_split", "error",
                f"The TXT records at {record.name} hold the ownership value cut in two: each TXT record is "
                "compared whole, so neither holds it.",
                fix=f"Replace the two TXT records at {record.name} with one holding the whole value {record.expected}.",
            ))
            return False
        theirs = [token for token in claimed_tokens(record) if token in foreign]
        if theirs:
            findings.append(Finding(
                "ownership_other_workspace", "error",
                f"The TXT record at {record.name} holds {OWNERSHIP_VALUE_PREFIX}{theirs[0]}, the ownership token of "
                "another account on this service, not of this workspace (was the hostname verified there since, or "
                "added there first?).",
                fix=f"Replace the value of the TXT record at {record.name} with {record.expected}.",
            ))
            return False
        quoted_wrong = [v for v in lookup.values if _txt_value(v.replace('\\"', "").replace('"', "")) == expected]
        if quoted_wrong:
            findings.append(Finding("value_quoted", "error",
                                    f"The TXT record at {record.name} holds {quoted_wrong[0]}: the quotes make it another value.",
                                    fix=f"Set the TXT record at {record.name} to {record.expected}, without quote characters."))
            return False
        shown = ", ".join(lookup.values[:3])
        findings.append(Finding("ownership_wrong", "error", f"The TXT records at {record.name} ({shown}) do not hold {record.expected}.",
                                fix=f"Add a TXT record at {record.name} with the value {record.expected} (other TXT records may stay)."))
        return False
    if not _misplaced(findings, record, source, zone, "TXT", lambda v: _txt_value(v) == expected,
                      zone_is_a_domain=zone_is_a_domain):
        findings.append(Finding("ownership_missing", "error", f"No TXT record is published at {record.name}.", fix=fix))
    return False


def _misplaced(findings: list[Finding], record: Seen, source: Answers, zone: Zone | None, rtype: str,
               right: Callable[[str], bool], *, zone_is_a_domain: bool) -> bool:
    """A missing record found where DNS hosts commonly put it by mistake. True when that is the
    whole story (the zone appended twice: the record is there under a wrong name). A record at the
    zone's own name is named beside the missing one, with "add", never "move": and not at all when
    the zone itself is a domain of this workspace, whose own record that is (the ownership token is
    the workspace's, so it looks right for this domain too)."""
    if zone is None:
        return False
    label = record.name.split(".", 1)[0]
    doubled = source.get((f"{record.name}.{zone.name}", rtype))
    if doubled is not None and doubled.outcome == "found":
        findings.append(Finding(
            "zone_appended_twice", "error",
            f"The {rtype} record was published as {record.name}.{zone.name}: the DNS host appended the zone "
            f"{zone.name} to a name that already ended with it.",
            fix=f"Delete the {rtype} record {record.name}.{zone.name} and create it as {record.name}: in the panel, "
            f"with the name {relative_to_zone(record.name, zone)} (relative to the zone).",
        ))
        return True
    at_zone = f"{label}.{zone.name}"
    parent = source.get((at_zone, rtype))
    if (not zone_is_a_domain and record.name != at_zone and parent is not None and parent.outcome == "found"
            and any(map(right, parent.values))):
        findings.append(Finding(
            "record_at_parent", "error",
            f"The {rtype} record was published at {at_zone}, the zone's own name, instead of at {record.name}.",
            fix=f"Add the {rtype} record at {record.name} (in the panel: {relative_to_zone(record.name, zone)}); "
            f"the one at {at_zone} does not count for {record.name.split('.', 1)[1]}.",
        ))
    return False


def visibility_findings(findings: list[Finding], record: Seen, zone: Zone | None, *,
                        visible_by: dict[str, str] | None = None) -> None:
    """Published at the zone, yet answered otherwise by a resolver: a cache, or DNSSEC (named once:
    every record of the zone fails the same way). ``visible_by``: for a resolver still holding a
    negative answer, the time (``HH:MM UTC``) it says it will forget it, by resolver label."""
    published = record.authoritative
    for label, lookup in record.resolvers:
        if is_servfail(lookup) and published is not None and published.outcome in ("found", "nxdomain", "nodata"):
            if any(f.code == "dnssec_failure" for f in findings):
                continue
            findings.append(Finding(
                "dnssec_failure", "error",
                f"The resolver {label} answers SERVFAIL for {record.rtype} at {record.name} although the zone's own "
                "servers answer it: this is what a DNSSEC validation failure looks like (expired signatures, or a "
                f"DS record at the parent that matches no key). {_DNSSEC_STAKES}",
                fix=f"{dnssec_fix(zone.name if zone else record.name)} Then check {record.name} again.",
            ))
        elif lookup.outcome in ("timeout", "error"):
            said = f", {lookup.detail}" if lookup.outcome == "error" and lookup.detail else ""
            findings.append(Finding("lookup_failed", "warning",
                                    f"The resolver {label} did not answer {record.rtype} at {record.name} ({lookup.outcome}{said}).",
                                    fix=f"Try again in a minute; if it persists, check the resolver {label}."))
        elif published is not None and published.outcome in ("nxdomain", "nodata") and lookup.outcome == "found":
            until = f"up to {lookup.ttl} s" if lookup.ttl is not None else "until its TTL runs out"
            within = f"within {lookup.ttl} s" if lookup.ttl is not None else "when its TTL runs out"
            findings.append(Finding(
                "still_cached", "warning",
                f"The resolver {label} still serves a {record.rtype} record at {record.name} "
                f"({', '.join(lookup.values[:2])}) that the zone no longer has; it may keep serving it for {until}.",
                fix=f"If it was removed by mistake, publish it again at {record.name}; otherwise nothing to change: "
                f"the resolver {label} forgets it {within}.",
            ))
        elif published is not None and published.outcome == "found" and set(lookup.values) != set(published.values):
            if lookup.outcome == "found":
                wait = f"it may keep that answer for up to {lookup.ttl} s more" if lookup.ttl is not None else "it keeps it until its TTL runs out"
                shown = f"still answers {', '.join(lookup.values[:2])}; {wait}"
                until = f"up to {lookup.ttl} s" if lookup.ttl is not None else "until its TTL runs out"
            elif (visible_by or {}).get(label):
                by = (visible_by or {})[label]
                shown = f"still holds its earlier \"no such record\" answer, and will see it by {by}"
                until = f"until {by}"
            else:
                shown = "does not see it yet (a negative answer is cached for up to the zone's SOA minimum TTL)"
                until = "up to the zone's SOA minimum TTL"
            findings.append(Finding(
                "not_yet_visible", "warning",
                f"The {record.rtype} record at {record.name} is published, but the resolver {label} {shown}.",
                fix=f"Nothing to change at {record.name}: wait {until} for the resolver {label} to forget its cached "
                "answer, then check again.",
            ))


def relative_to_zone(name: str, zone: Zone | None) -> str | None:
    if zone is None:
        return None
    if same_name(name, zone.name):
        return "@"
    suffix = "." + zone.name
    return name[: -len(suffix)] if name.lower().endswith(suffix) else None


#: What the record findings say of records not found: with simulated DNS, said once as a wait instead.
_ABOUT_RECORDS = ("delegation_", "ownership_", "record_at_parent", "zone_appended_twice", "value_quoted",
                  "not_yet_visible", "still_cached", "authority_unknown", "lookup_failed")


def simulated_not_yet(findings: list[Finding], row: DomainRow, config: Config, now: dt.datetime) -> None:
    """DEVELOPMENT ONLY (``[provider.sandbox] simulate_dns``): a domain younger than the simulation's
    delay has no records yet, and will have them by themselves. The page says nothing needs doing;
    the diagnosis says the same, with the moment, instead of asking to publish what nobody publishes."""
    provider = config.provider
    if provider.kind != "sandbox" or not provider.sandbox.simulate_dns or config.domain_connect.simulate:
        return
    appears = row.created_at + dt.timedelta(seconds=provider.sandbox.simulate_dns_delay_seconds)
    if now >= appears:
        return
    findings[:] = [f for f in findings if not f.code.startswith(_ABOUT_RECORDS)]
    findings.append(Finding(
        "not_yet_visible", "warning",
        f"DNS is simulated on this service: both records count as published at {appears:%H:%M:%S} UTC, "
        f"{provider.sandbox.simulate_dns_delay_seconds:g} s after the domain was added. Nothing needs publishing.",
    ))
