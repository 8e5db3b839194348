"""The diagnosis's look at what only the ACME provider (``[provider] kind = "acme"``) knows: what
the CA said of the hostname's validations, whether the service holds its next order back and
why, the CA's explanation of a renewal window, and the delegation target itself, asked the way a
CA asks for it.

| code | severity | when |
|---|---|---|
| ``ca_paused`` | error | the CA paused the hostname for the service's account: its link unpauses it |
| ``orders_stopped`` | error | validations failed so often in a row that the background checks order no more |
| ``orders_waiting`` | info | the next order waits (the resolvers' negative cache, the CA's hourly limit), or the order under way waits for a server of the delegation zone that does not answer its value yet |
| ``delegation_zone_broken`` | error | the last check of the delegation zone's own delegation found it not delegated, delegated to other nameservers, or lame (core/dns/zone_check.py) |
| ``delegation_zone_unreachable`` | error | resolvers cannot read the delegation zone, where the TXT values are |
| ``renewal_explained`` | info | the CA explains the renewal window it suggests (RFC 9773 ``explanationURL``) |

The CA's last refusal also gives the fix of ``provider_error``, in place of a pointer to findings
there may not be. A broken delegation zone is every domain's problem and no customer's to fix: it is
said to the operator, and the probes of the target that it explains are not made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from core.acme import failures
from core.acme.problems import TRANSIENT
from core.delegation_dns.view import NEGATIVE_TTL
from core.dns.probe import ask, ask_resolver
from core.dns.zone_check import last_check
from core.verification.record_findings import Finding
from store.acme import AcmeCertificate
from store.acme_validations import AcmeValidations
from store.records import Certificate, DomainRow

if TYPE_CHECKING:
    from core.services import Services

#: How the diagnosis asks the built-in server: on the machine, whatever address it listens on.
_ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]"}


@attrs.frozen
class AcmeView:
    findings: list[Finding]
    fix: str | None = None
    "What to do about the CA's last refusal (``provider_error``'s fix)."
    waiting: bool = False
    "The refusal is one time passes, and the service orders again by itself."


async def acme_view(services: Services, row: DomainRow, certificate: Certificate | None) -> AcmeView | None:
    """The ACME provider's findings for the domain; None with another provider."""
    if services.config.provider.kind != "acme":
        return None
    validations, acme = await services.store.run(_stored, services, row, certificate)
    findings: list[Finding] = []
    await _target_findings(services, findings, row)
    if acme is not None and acme.chain_pem is not None and acme.ari_explanation_url:
        findings.append(Finding(
            "renewal_explained", "info",
            f"The certificate authority explains the renewal window it suggests for this certificate at "
            f"{acme.ari_explanation_url}; the certificate is renewed inside it"
            + (f", from {acme.renew_at:%Y-%m-%d %H:%M} UTC." if acme.renew_at else ".")))
    if acme is not None and acme.order_url is not None and acme.error:
        # The order under way waits: not every server of the zone answers its value (core/acme/orders.py).
        findings.append(Finding("orders_waiting", "info", acme.error))
    if not validations or (certificate is not None and certificate.status == "active"):
        return AcmeView(findings)
    last = validations[0]
    config = services.config
    limits = failures.Limits(per_hour=config.provider.acme.failed_validations_per_hour,
                             stop_after=config.provider.acme.stop_after_failed_validations,
                             negative_ttl=NEGATIVE_TTL)
    held = failures.held(last, now=services.clock.now(), person=False, records=None, limits=limits)
    fix = _fix(last.kind, row)
    if last.stopped == "paused":
        findings.append(Finding("ca_paused", "error", last.reason,
                                fix=f"Unpause {row.apex} at {last.link or 'the page the certificate authority links to'}, "
                                    f"then {_RECHECK}."))
        return AcmeView(findings, fix=findings[-1].fix)
    if held is not None and held.until is None:
        findings.append(Finding("orders_stopped", "error", held.why, fix=f"{fix} A check asked for orders again."))
        return AcmeView(findings, fix=fix)
    if held is not None:
        findings.append(Finding("orders_waiting", "info", held.why))
    return AcmeView(findings, fix=fix, waiting=held is not None and last.kind in TRANSIENT)


_RECHECK = "check again (POST /v1/domains/:id/recheck)"


def _fix(kind: str, row: DomainRow) -> str:
    """What to do about a refusal of this kind (core/acme/problems.py), in the diagnosis's words."""
    owner, target = f"_acme-challenge.{row.apex}", row.delegation_target
    return {
        "nxdomain": f"Nothing to change while the CNAME at {owner} points to {target}: the service orders again by "
                    f"itself once the certificate authority's resolvers have forgotten the name's absence.",
        "no_record": f"Keep the CNAME at {owner} pointing to {target} at every nameserver of the zone: the service "
                     "orders again by itself.",
        "limited": "Nothing to change: the service orders again by itself once the certificate authority's hourly "
                   "limit allows.",
        "timeout": f"Make sure every nameserver of the zone of {row.apex} answers, then {_RECHECK}.",
        "servfail": f"Make sure every nameserver of the zone of {row.apex} answers for {owner} and that the zone's "
                    f"DNSSEC validates, then {_RECHECK}.",
        "dnssec": f"Fix the DNSSEC of the zone of {row.apex} (re-sign it, or remove the DS record at the registrar), "
                  f"then {_RECHECK}.",
        "wrong_value": f"Keep only the CNAME at {owner} (value {target}) and remove any TXT record there, then "
                       f"{_RECHECK}.",
        "caa": f"Add a CAA record that allows the certificate authority (see caa_forbids, when listed), then {_RECHECK}.",
        "rejected": "Nothing in DNS changes this: the certificate authority does not issue for this name.",
    }.get(kind, f"Nothing the checks can see is wrong now: {_RECHECK} to have the certificate authority validate "
                "again.")


def _stored(services: Services, row: DomainRow,
            certificate: Certificate | None) -> tuple[list[AcmeValidations], AcmeCertificate | None]:
    store = services.store
    acme = (store.acme.certificate(certificate.provider_hostname_id)
            if certificate is not None and certificate.provider_hostname_id else None)
    return store.acme_validations.of_hostname(row.apex), acme


async def _target_findings(services: Services, findings: list[Finding], row: DomainRow) -> None:
    """The TXT record at ``_acme-challenge.<apex>`` asked as a CA asks: through a resolver, which
    follows the CNAME into the delegation zone; and the zone's own server asked for its SOA. A
    resolver that cannot read the zone (no delegation, no answer) means no CA can either."""
    zone = services.config.delegation_dns.zone.lower().rstrip(".")
    target = row.delegation_target
    if not zone or not target or not target.lower().endswith(f".{zone}"):
        return
    checked = await services.store.run(last_check, services.store, zone)
    if checked is not None and checked.broken:
        findings.append(Finding("delegation_zone_broken", "error", checked.message,
                                fix=f"For the service's operator: {checked.fix}"))
        return
    owner = f"_acme-challenge.{row.apex}"
    for label, resolver in services.authority.each_resolver():
        probe = await ask_resolver(resolver, owner, "TXT")
        if probe is None:
            return
        found = probe.lookup
        if found.outcome in ("nxdomain", "nodata") and probe.zone is not None and zone.endswith(f".{probe.zone}"):
            findings.append(Finding(
                "delegation_zone_unreachable", "error",
                f"The resolver {label} is told by the zone {probe.zone} that {target} does not exist: the "
                f"delegation zone {zone}, where the service publishes the TXT values the certificate authority "
                "reads, is not delegated to the service's nameservers, so no certificate authority can validate.",
                fix=f"For the service's operator: delegate {zone} in {probe.zone} to the service's nameservers "
                    "(NS records and their addresses; docs/acme.md, \"The delegation zone's DNS\")."))
            return
        if found.outcome in ("timeout", "error"):
            findings.append(Finding(
                "delegation_zone_unreachable", "error",
                f"The resolver {label} gets no answer for the TXT record at {owner} (which leads to {target}): "
                f"{found.detail or found.outcome}. The delegation zone {zone}, where the service publishes the "
                "values the certificate authority reads, does not answer it, so no certificate authority can "
                "validate.",
                fix="For the service's operator: make the service's DNS server reachable on port 53, UDP and TCP, "
                    "at the addresses the zone is delegated to (docs/acme.md, \"The delegation zone's DNS\")."))
            return
    if services.config.delegation_dns.mode != "builtin":
        return
    listen = services.config.delegation_dns.listen
    host, _, port = listen.rpartition(":")
    answered = await ask(f"{_ANY_ADDRESS.get(host, host)}:{port}", zone, "SOA", timeout=services.dns.timeout)
    if answered.lookup.outcome != "found":
        findings.append(Finding(
            "delegation_zone_unreachable", "error",
            f"The service's own DNS server ({listen}) does not answer for the delegation zone {zone} "
            f"({answered.lookup.detail or answered.lookup.outcome}): the certificate authority cannot read the TXT "
            "values it publishes there.",
            fix="For the service's operator: check that the service's DNS server is running ([delegation_dns] "
                "listen) and that check-config accepts its address."))
