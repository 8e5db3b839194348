"""A verification link's reminder e-mail: its text, and the cap on reminders to one address.

Kept apart from the links themselves (core/verification/links.py), which send it: the text needs
the domain, its DNS host and the workspace's owner, all read in the reminder's one unit of work
before the e-mail is sent.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from core.domains.dns_host_view import dns_host_view
from core.domains.records import delegation_record, ownership_record
from core.errors import Conflict
from store.records import DomainRow, VerificationLinkRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

#: One e-mail per link per this long: the service's mail server is no megaphone.
REMIND_INTERVAL = dt.timedelta(hours=1)
#: Reminders one address receives at most in ``RECIPIENT_WINDOW``, whatever the links and workspaces.
REMINDERS_PER_RECIPIENT = 5
RECIPIENT_WINDOW = dt.timedelta(days=1)


def human_time(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def text(*, workspace: Workspace, domain: DomainRow, link: VerificationLinkRow, url: str, owner: str | None) -> str:
    """The plain-text reminder: both records, the link (``url``) and its expiry; no other secret.
    ``owner``: the workspace owner's e-mail, on whose behalf it is sent."""
    view = dns_host_view(domain)
    known = view if view is not None and view.name else None
    records = []
    for number, record in enumerate((delegation_record(domain), ownership_record(domain)), start=1):
        panel = (known.records.delegation if number == 1 else known.records.ownership) if known else None
        name = (f"   Name:  {panel.name or '(leave empty)'}   (in full: {record.host})" if panel
                else f"   Host:  {record.host}")
        records.append(f"{number}. Type:  {record.type}\n{name}\n"
                       f"   Value: {panel.value if panel else record.value}\n   TTL:   {record.ttl}")
    where = "The host names are complete; some DNS hosts want only the part before the zone name.\n"
    if known:
        where = (f"Your DNS is at {known.name}: the names below are in the form its panel asks for.\n"
                 + "".join(f"- {gotcha}\n" for gotcha in known.gotchas)
                 + (f"Its guide to adding a record: {known.help_url}\n" if known.help_url else "")
                 + (f"The link below can also set both up at {known.one_click.provider_name} in one click.\n"
                    if known.one_click else ""))
    on_behalf = f"{owner}, owner of the workspace \"{workspace.name}\"" if owner else f"the owner of the workspace \"{workspace.name}\""
    return (
        "Hello,\n\n"
        f"To get a TLS certificate for {domain.apex}, please publish these two DNS records at the DNS\n"
        f"host of the domain. {where}\n"
        + "\n\n".join(records)
        + "\n\n"
        "Once both are published, open this link to check them and start the certificate (no account\n"
        "needed):\n\n"
        f"{url}\n\n"
        f"The link works until {human_time(link.expires_at)}. Anyone who has it can see these records and run the\n"
        "check, so do not forward it further.\n\n"
        f"This message was sent on behalf of {on_behalf}.\n"
        "If you did not expect it, ask them before changing DNS.\n"
    )


def count(services: Services, recipient: str) -> int:
    """Count one more reminder to ``recipient`` before it is sent (so two at once cannot both pass),
    or refuse it: links are cheap to make, and one address must not receive a flood of them.
    Returns the count's id, to forget it if the e-mail cannot be sent."""
    now = services.clock.now()
    with services.store.transaction():
        sent = services.store.verification_links.reminders_since(recipient, now - RECIPIENT_WINDOW)
        if len(sent) >= REMINDERS_PER_RECIPIENT:
            next_at = human_time(sent[len(sent) - REMINDERS_PER_RECIPIENT] + RECIPIENT_WINDOW)
            raise Conflict(
                "reminded_recently",
                f"{recipient} has had {REMINDERS_PER_RECIPIENT} reminders in the last 24 hours, the most the service "
                f"sends to one address; send another after {next_at}.",
            )
        return services.store.verification_links.record_reminder(recipient, now, forget_before=now - RECIPIENT_WINDOW)
