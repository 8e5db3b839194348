"""Our Domain Connect template, and the values one apply URL fills it with.

The template is submitted once by each operator (it names the operator's own providerId, key host
and portal), so the service prints it from configuration rather than shipping a file. Its two
records are the same two the manual instructions ask for (core/domains/records.py).
"""

from __future__ import annotations

from typing import Any

from core.config import DomainConnectConfig
from core.domains.records import (
    DELEGATION_PREFIX,
    DELEGATION_TTL,
    OWNERSHIP_PREFIX,
    OWNERSHIP_TTL,
    OWNERSHIP_VALUE_PREFIX,
)

#: Lowercase: the spec calls variable names case-sensitive, some DNS hosts treat them as not.
DELEGATION_VARIABLE = "dcvtarget"
OWNERSHIP_VARIABLE = "verifytoken"
#: Bump on every change to the template: DNS hosts' updaters compare it.
TEMPLATE_VERSION = 1


def template(config: DomainConnectConfig, *, redirect_domain: str) -> dict[str, Any]:
    """The template JSON for the operator's pull request to the Domain Connect templates repository.

    Always signed (``syncPubKeyDomain``), hence no ``warnPhishing``; the variable parts sit behind a
    fixed prefix or form a whole target, and the host is relative, so one template serves the zone
    apex and any name below it.
    """
    doc: dict[str, Any] = {
        "providerId": config.provider_id,
        "providerName": config.provider_name or config.provider_id,
        "serviceId": config.service_id,
        "serviceName": config.service_name,
        "version": TEMPLATE_VERSION,
    }
    if config.logo_url:
        doc["logoUrl"] = config.logo_url
    doc |= {
        "description": "Delegates ACME DNS validation for one hostname and proves ownership of it.",
        "variableDescription": f"{DELEGATION_VARIABLE}: ACME delegation target assigned to this hostname; "
                               f"{OWNERSHIP_VARIABLE}: workspace ownership token",
        "syncPubKeyDomain": config.key_host,
        "syncRedirectDomain": redirect_domain,
        "records": [
            {"groupId": "delegation", "type": "CNAME", "host": DELEGATION_PREFIX.rstrip("."),
             "pointsTo": f"%{DELEGATION_VARIABLE}%", "ttl": DELEGATION_TTL},
            {"groupId": "ownership", "type": "TXT", "host": OWNERSHIP_PREFIX.rstrip("."),
             "data": f"{OWNERSHIP_VALUE_PREFIX}%{OWNERSHIP_VARIABLE}%",
             # Replaces an earlier token at the label instead of piling them up (where hosts honour it).
             "txtConflictMatchingMode": "Prefix", "txtConflictMatchingPrefix": OWNERSHIP_VALUE_PREFIX,
             "ttl": OWNERSHIP_TTL},
        ],
    }
    return doc


def split(apex: str, zone: str) -> tuple[str, str]:
    """The protocol's (``domain``, ``host``): the zone the DNS host serves, and our labels below it.

    ``host`` is "" for the zone itself; the URL then leaves it out.
    """
    apex, zone = apex.rstrip(".").lower(), zone.rstrip(".").lower()
    if not zone or not apex:
        raise ValueError(f"{apex!r} is not at or below the zone {zone!r}")
    if apex == zone:
        return zone, ""
    if not apex.endswith("." + zone):
        raise ValueError(f"{apex!r} is not at or below the zone {zone!r}")
    return zone, apex[: -len(zone) - 1]


def variables(delegation_target: str, ownership_token: str) -> dict[str, str]:
    """The template's own variables for one domain (apply URL parameters besides domain and host)."""
    return {DELEGATION_VARIABLE: delegation_target, OWNERSHIP_VARIABLE: ownership_token}
