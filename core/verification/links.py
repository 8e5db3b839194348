"""Shareable verification links: a DNS administrator sees both records and verifies, no account.

A link's token (``vl_`` + 43 URL-safe characters, 256 random bits) is a credential for exactly
two things: reading the domain's records and statuses, and running verify-delegation (which may
start issuance). It is stored twice, never in clear: an HMAC-SHA256 under a subkey of the secret
key file to find the link (so a lookup compares keyed digests, not the token, and a copy of the
database cannot confirm a guessed token), and AES-GCM encrypted under another subkey, bound to
the link's id, so that listing can show the URL again (the spec says listing returns URLs; that is
why listing needs ``domains:read`` on top of both write scopes).

A link is ``active`` until ``expiresAt`` (1 to 30 days after creation, 7 by default) or until it
is revoked. A dead link answers 410 with a code saying which (``link_expired``,
``link_revoked``); an unknown token 404.

The plain functions that read or write (``create``, ``list_links``, ``revoke``, ``view``) are units
of work, called with ``await store.run(...)``; the async ones run their own units around the
e-mail and the DNS checks.
"""

from __future__ import annotations

import datetime as dt
import hmac
import logging
import re
import secrets
import uuid
from typing import TYPE_CHECKING

import attrs

from core import cursors, logs
from core.dns.traffic import TrafficTarget
from core.domains import shape
from core.domains.records import DnsRecord, row_traffic_records
from core.domains.shape import CertSummary, Validation
from core.errors import ApiError, Conflict, NotFound, UpstreamError, ValidationError
from core.outbound import mail
from core.text import EMAIL_MESSAGE, email_address, normalise_email
from core.verification import checks as verification
from core.verification import diagnosis, reminders
from core.verification.checks import VerifyResult
from core.verification.reminders import human_time
from core.wire import INTERNAL
from store.records import DomainRow, VerificationLinkRow, Workspace

if TYPE_CHECKING:
    from core.services import Services

log = logging.getLogger(__name__)

TOKEN_PREFIX = "vl_"
_TOKEN_SHAPE = re.compile(r"vl_[A-Za-z0-9_-]{43}")
_HASH_PURPOSE = "verification-link"
_TOKEN_PURPOSE = "verification-link-token"
DEFAULT_DAYS = 7
MIN_DAYS = 1
MAX_DAYS = 30
STATUSES = ("active", "expired", "revoked")
LIMIT_DEFAULT = 50
LIMIT_MAX = 250


class LinkGone(ApiError):
    """410: a link that existed but no longer works; ``code`` says why."""

    status = 410
    code = "link_gone"

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


@attrs.frozen
class CreateLink:
    domain_id: uuid.UUID
    recipient_email: str | None = None
    expires_in_days: int | None = None


@attrs.frozen
class VerificationLink:
    """A link as its workspace sees it."""

    id: uuid.UUID
    domain_id: uuid.UUID
    apex: str
    url: str
    "``{portal_url}/verify/<token>``: whoever holds it can see the records and verify."
    created_at: dt.datetime
    expires_at: dt.datetime
    status: str
    recipient_email: str | None = None
    last_reminded_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = None


@attrs.frozen
class LinkPage:
    items: list[VerificationLink]
    total: int
    next_cursor: str | None = None


@attrs.frozen
class PublicView:
    """What a link's holder sees: the records and the statuses, nothing else of the workspace."""

    apex: str
    expires_at: dt.datetime
    validation: Validation
    cert: CertSummary
    ops_status: str
    next_check_at: dt.datetime | None = attrs.field(default=None, metadata={INTERNAL: True})
    "For the link's page (\"next check at ...\"); not in the public JSON, which the spec shapes."
    traffic_records: list[DnsRecord] | None = None
    "Where the hostname itself points, while ``[tls_terminator] traffic_*`` is set (core/domains/records.py)."


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def _digest(services: Services, token: str) -> str:
    return services.keyring.mac(_HASH_PURPOSE, token)


def _token_of(services: Services, row: VerificationLinkRow) -> str:
    return services.keyring.decrypt(_TOKEN_PURPOSE, row.token_ciphertext, bound_to=str(row.id))


def url_for(services: Services, token: str) -> str:
    return f"{services.config.server.portal_url.rstrip('/')}/verify/{token}"


def status_of(row: VerificationLinkRow, now: dt.datetime) -> str:
    if row.revoked_at is not None:
        return "revoked"
    return "expired" if now >= row.expires_at else "active"


def present(services: Services, row: VerificationLinkRow) -> VerificationLink:
    return VerificationLink(
        id=row.id,
        domain_id=row.domain_id,
        apex=row.apex,
        url=url_for(services, _token_of(services, row)),
        created_at=row.created_at,
        expires_at=row.expires_at,
        status=status_of(row, services.clock.now()),
        recipient_email=row.recipient_email,
        last_reminded_at=row.last_reminded_at,
        revoked_at=row.revoked_at,
    )


def _load(services: Services, workspace_id: uuid.UUID, link_id: uuid.UUID) -> VerificationLinkRow:
    row = services.store.verification_links.get(workspace_id, link_id)
    if row is None:
        raise NotFound("Verification link not found.")
    return row


def _domain(services: Services, workspace_id: uuid.UUID, domain_id: uuid.UUID) -> DomainRow:
    row = services.store.domains.get(workspace_id, domain_id)
    if row is None:
        raise NotFound("Domain not found.")
    return row


# --- the workspace's side -----------------------------------------------------------------------


def create(services: Services, *, workspace: Workspace, request: CreateLink) -> VerificationLink:
    errors: dict[str, list[str]] = {}
    days = DEFAULT_DAYS if request.expires_in_days is None else request.expires_in_days
    if not MIN_DAYS <= days <= MAX_DAYS:
        errors["expiresInDays"] = [f"Must be {MIN_DAYS} to {MAX_DAYS} days (got {days})"]
    email = email_address(request.recipient_email) if request.recipient_email is not None else None
    if request.recipient_email is not None and email is None:
        errors["recipientEmail"] = [EMAIL_MESSAGE]
    if errors:
        raise ValidationError(field_errors=errors)
    now = services.clock.now()
    link_id = uuid.uuid4()
    token = new_token()
    with services.store.transaction():
        domain = _domain(services, workspace.id, request.domain_id)
        row = VerificationLinkRow(
            id=link_id,
            workspace_id=workspace.id,
            domain_id=domain.id,
            apex=domain.apex,
            token_hash=_digest(services, token),
            token_ciphertext=services.keyring.encrypt(_TOKEN_PURPOSE, token, bound_to=str(link_id)),
            recipient_email=email,
            created_at=now,
            expires_at=now + dt.timedelta(days=days),
        )
        services.store.verification_links.insert(row)
    return present(services, row)


def list_links(services: Services, *, workspace: Workspace, domain_id: uuid.UUID | None = None,
               status: str | None = None, limit: str | None = None, cursor: str | None = None) -> LinkPage:
    """A page of the workspace's links, newest first; with ``domain_id``, that domain's (404 if
    unknown), with ``status``, only those in it. Paged because links pile up as they expire."""
    size = cursors.page_size(limit, default=LIMIT_DEFAULT, maximum=LIMIT_MAX)
    if status is not None and status not in STATUSES:
        raise ValidationError.field("status", f"Must be one of: {', '.join(STATUSES)}")
    if domain_id is not None:
        _domain(services, workspace.id, domain_id)
    bound_to = cursors.binding(str(workspace.id), "verification-links", str(domain_id), status)
    after = cursors.decode(services.keyring, cursor, bound_to) if cursor is not None else None
    repo, now = services.store.verification_links, services.clock.now()
    rows = repo.page(workspace.id, domain_id=domain_id, status=status, now=now, after=after, limit=size + 1)
    next_cursor = cursors.encode(services.keyring, bound_to, rows[size - 1][1]) if len(rows) > size else None
    return LinkPage(
        items=[present(services, row) for row, _ in rows[:size]],
        total=repo.count(workspace.id, domain_id=domain_id, status=status, now=now),
        next_cursor=next_cursor,
    )


def revoke(services: Services, *, workspace: Workspace, link_id: uuid.UUID) -> None:
    """Revoke a link at once; revoking it again changes nothing."""
    with services.store.transaction():
        _load(services, workspace.id, link_id)
        services.store.verification_links.revoke(link_id, services.clock.now())


def _reminder_start(services: Services, workspace: Workspace,
                    link_id: uuid.UUID) -> tuple[VerificationLinkRow, DomainRow, int, str | None]:
    """A reminder's unit of work before its e-mail: the refusals, the recipient's count taken (its
    id, to take back), the domain and the workspace owner's e-mail."""
    link = _load(services, workspace.id, link_id)
    if not mail.configured(services.config.smtp):
        raise Conflict(
            "smtp_not_configured",
            "E-mail is not configured on this service ([smtp] host is empty); share the link's URL yourself.",
        )
    status = status_of(link, services.clock.now())
    if status != "active":
        raise Conflict("link_not_active", f"This link is {status}; create a new link to send one.")
    if not link.recipient_email:
        raise Conflict(
            "no_recipient", "This link has no recipientEmail; create a link with one, or share its URL yourself."
        )
    if link.last_reminded_at is not None and services.clock.now() - link.last_reminded_at < reminders.REMIND_INTERVAL:
        next_at = human_time(link.last_reminded_at + reminders.REMIND_INTERVAL)
        raise Conflict("reminded_recently", f"A reminder for this link was sent less than an hour ago; send another after {next_at}.")
    counted = reminders.count(services, normalise_email(link.recipient_email))
    domain = _domain(services, workspace.id, link.domain_id)
    return link, domain, counted, services.store.accounts.owner_email(workspace.id)


def _forget_reminder(services: Services, counted: int) -> None:
    with services.store.transaction():
        services.store.verification_links.forget_reminder(counted)


def _reminded(services: Services, workspace: Workspace, link_id: uuid.UUID) -> VerificationLink:
    with services.store.transaction():
        _load(services, workspace.id, link_id)  # deleted meanwhile (with its domain): 404
        services.store.verification_links.set_reminded(link_id, services.clock.now())
        link = _load(services, workspace.id, link_id)
    return present(services, link)


async def remind(services: Services, *, workspace: Workspace, link_id: uuid.UUID) -> VerificationLink:
    """E-mail the link to its recipient, then record ``lastRemindedAt``."""
    link, domain, counted, owner = await services.store.run(_reminder_start, services, workspace, link_id)
    assert link.recipient_email is not None  # refused otherwise
    smtp = services.config.smtp
    message = mail.new_message(
        smtp,
        to=link.recipient_email,
        subject=f"DNS records needed for {domain.apex}",
        body=reminders.text(workspace=workspace, domain=domain, link=link,
                            url=url_for(services, _token_of(services, link)), owner=owner),
        date=services.clock.now(),
        reply_to=owner,
    )
    try:
        await mail.send(smtp, message, ca_bundle=services.config.network.ca_bundle)
    except mail.MailError as exc:
        log.warning("verification link %s: reminder not sent: %s", link.id, exc)
        await services.store.run(_forget_reminder, services, counted)
        raise UpstreamError(str(exc)) from None
    log.info("verification link %s: reminder sent", link.id)
    return await services.store.run(_reminded, services, workspace, link_id)


# --- the link holder's side ---------------------------------------------------------------------


def _unknown() -> NotFound:
    return NotFound(
        "This verification link does not exist. Check that the whole link was copied, or ask the "
        "domain's owner for a new one."
    )


def _find(services: Services, token: str) -> VerificationLinkRow | None:
    """The link a token names, whatever its status; None for a token of no link."""
    if not _TOKEN_SHAPE.fullmatch(token):
        return None
    digest = _digest(services, token)
    row = services.store.verification_links.by_hash(digest)
    # Found by its keyed digest; compared again in constant time all the same.
    return row if row is not None and hmac.compare_digest(row.token_hash, digest) else None


def _live(services: Services, row: VerificationLinkRow | None) -> VerificationLinkRow:
    """The link if it still works: 404 when there is none, 410 when expired or revoked."""
    if row is None:
        raise _unknown()
    # The token is the only credential of these requests: from here on their log lines (the
    # access line included) carry the link's workspace, as an authenticated request's do.
    logs.workspace.set(str(row.workspace_id))
    status = status_of(row, services.clock.now())
    if status == "revoked":
        raise LinkGone(
            "link_revoked",
            f"This verification link for {row.apex} was revoked by the domain's owner. Ask them for a new one.",
        )
    if status == "expired":
        raise LinkGone(
            "link_expired",
            f"This verification link for {row.apex} expired on {human_time(row.expires_at)}. Ask the domain's "
            "owner for a new one.",
        )
    return row


def _found(services: Services, token: str) -> tuple[VerificationLinkRow | None, Workspace | None, DomainRow | None]:
    row = _find(services, token)
    if row is None:
        return None, None, None
    return (row, services.store.accounts.get_workspace(row.workspace_id),
            services.store.domains.get(row.workspace_id, row.domain_id))


async def holder(services: Services, token: str) -> tuple[VerificationLinkRow, Workspace, DomainRow]:
    """The live link behind a token, its workspace and its domain, read in one unit of work; 404
    and 410 when expired or revoked (a workspace or domain deleted meanwhile: 404)."""
    row, workspace, domain = await services.store.run(_found, services, token)
    link = _live(services, row)
    if workspace is None or domain is None:  # went with everything in it
        raise _unknown()
    return link, workspace, domain


def _public(services: Services, link: VerificationLinkRow, row: DomainRow) -> PublicView:
    domain = shape.present(row)
    return PublicView(
        apex=domain.apex, expires_at=link.expires_at, validation=domain.validation, cert=domain.cert,
        ops_status=domain.ops_status, next_check_at=domain.next_check_at,
        traffic_records=row_traffic_records(row, TrafficTarget.from_config(services.config.tls_terminator)),
    )


async def show(services: Services, token: str) -> PublicView:
    """What the link's holder sees, read in one unit of work."""
    link, _, domain = await holder(services, token)
    return _public(services, link, domain)


async def diagnose(services: Services, token: str) -> diagnosis.Diagnosis:
    """The diagnosis of the link's domain, for the DNS administrator holding the link."""
    link, workspace, _ = await holder(services, token)
    return await diagnosis.diagnose(services, workspace=workspace, domain_id=link.domain_id)


async def verify(services: Services, token: str) -> VerifyResult:
    """verify-delegation for the link's domain: checks DNS and may start issuance."""
    link, workspace, _ = await holder(services, token)
    log.info("verification link %s: verify", link.id)
    return await verification.verify(services, workspace=workspace, domain_id=link.domain_id)
