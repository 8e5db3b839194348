"""What to tell a customer whose zone's nameservers do not answer for it (core/dns/delegation.py).

Said alike by a check (``validation.lastError``, drift) and the diagnosis: which zone, who
delegated it, each nameserver with its address and how it failed, and the fix, which is always
in the NS records (at the registrar, or the parent zone's DNS host), never in our records.
"""

from __future__ import annotations

from collections.abc import Iterable

from core.dns.delegation import Delegation, ServerCheck


def _names(checks: Iterable[ServerCheck]) -> str:
    return ", ".join(check.nameserver for check in checks)


def message(delegation: Delegation, timeout: float) -> str:
    """A lame delegation: none of the zone's nameservers answers for it."""
    by = f" by its parent zone {delegation.parent}" if delegation.parent else ""
    said = "; ".join(check.said(timeout) for check in delegation.checks)
    return (f"The zone {delegation.zone} is delegated{by} to nameservers that do not answer for it: {said}. "
            "No resolver can look up its records, and no certificate authority can either, until the zone's "
            "delegation is fixed: waiting does not help.")


def fix(delegation: Delegation) -> str:
    where = f"the registrar of {delegation.zone}" + (f" (the NS records in {delegation.parent})" if delegation.parent else "")
    return (f"At {where}, list as the zone's nameservers only servers that serve {delegation.zone}; or have "
            f"{_names(delegation.checks)} serve the zone. Then check again.")


def partly_message(delegation: Delegation, timeout: float) -> str:
    """A partly lame delegation: some of the zone's nameservers do not answer for it."""
    said = "; ".join(check.said(timeout) for check in delegation.silent)
    answering = [check for check in delegation.checks if check.answers]
    return (f"Not every nameserver of the zone {delegation.zone} answers for it: {said}. Resolvers fall back to "
            f"{_names(answering)}, but a certificate authority validating from several places may ask one that "
            "does not answer, and fail.")


def partly_fix(delegation: Delegation) -> str:
    silent = _names(delegation.silent)
    return (f"Remove {silent} from the NS records of {delegation.zone} (at its registrar and in the zone itself), "
            "or have them serve the zone.")
