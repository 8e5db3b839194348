"""Stored records. Fields marked ``internal`` never appear in API output (see core/wire.py)."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import attrs

from core.wire import INTERNAL

_internal = {INTERNAL: True}


@attrs.frozen
class Workspace:
    """A customer account; every other record belongs to exactly one."""

    id: uuid.UUID
    name: str
    created_at: dt.datetime
    ownership_token: str = attrs.field(default="", metadata=_internal)
    "Published by customers in the ownership TXT record of every domain of this workspace."


@attrs.frozen
class User:
    """A human, known by e-mail until the first sign-in binds an issuer and subject."""

    id: uuid.UUID
    email: str
    created_at: dt.datetime
    issuer: str | None = None
    subject: str | None = None


@attrs.frozen
class Membership:
    """A user's role in one workspace."""

    workspace_id: uuid.UUID
    user_id: uuid.UUID
    role: str
    created_at: dt.datetime


@attrs.frozen
class ApiKey:
    """Metadata of an ``ac_live_`` key; the secret itself is never stored."""

    id: uuid.UUID
    name: str
    prefix: str
    "Leading characters of the key, for recognising it in a list."
    scopes: list[str]
    created_at: dt.datetime
    status: str
    "``active`` or ``revoked`` as stored; ``expired`` is derived from ``expires_at`` when shown."
    workspace_id: uuid.UUID = attrs.field(metadata=_internal)
    secret_hash: str = attrs.field(metadata=_internal)
    "HMAC-SHA256 of the full key under a subkey of the master secret."
    last_used_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = attrs.field(default=None, metadata=_internal)


@attrs.frozen
class Client:
    """A customer of the workspace's own business that domains can be filed under."""

    id: uuid.UUID
    name: str
    created_at: dt.datetime
    updated_at: dt.datetime
    workspace_id: uuid.UUID = attrs.field(metadata=_internal)
    notes: str | None = None


@attrs.frozen
class DomainRow:
    """A domain as stored: flat columns; core/domains/shape.py shapes it for the API."""

    id: uuid.UUID
    workspace_id: uuid.UUID
    apex: str
    tags: list[str]
    created_at: dt.datetime
    updated_at: dt.datetime
    delegation_target: str
    "CNAME target the edge provider assigned for ``_acme-challenge.<apex>``."
    validation_status: str
    cert_status: str
    ops_status: str
    ownership_token: str
    "The workspace's token (joined in, not a column of the domain)."
    client_id: uuid.UUID | None = None
    contact_email: str | None = None
    notes: str | None = None
    validation_checked_at: dt.datetime | None = None
    validation_error: str | None = None
    verified_at: dt.datetime | None = attrs.field(default=None, metadata=_internal)
    """When the domain last became verified: of two workspaces' verified domains for one hostname,
    the certificate of the one verified last is served (store/acme.py)."""
    cert_issuer: str | None = None
    cert_previous_issuer: str | None = attrs.field(default=None, metadata=_internal)
    "The latest certificate's ``previous_issuer``: the intermediate before its latest renewal, when it changed."
    cert_not_after: dt.datetime | None = None
    cert_next_renewal_at: dt.datetime | None = None
    cert_renew_at: dt.datetime | None = attrs.field(default=None, metadata=_internal)
    "When the provider itself means to renew the certificate (ACME: in the CA's window); the checks look then."
    cert_last_issued_at: dt.datetime | None = None
    cert_error: str | None = None
    cert_trace_id: uuid.UUID | None = None
    next_check_at: dt.datetime | None = None
    "When the background checks look at it next (None: not scheduled); pushed forward while one does."
    check_step: int = 0
    "The backoff step: the wait doubles with each background check that changed nothing."
    checks_since: dt.datetime | None = None
    "Creation or the last check a person asked for: pending domains are checked for ``pending_days`` from it."
    drift: tuple[DriftProblem, ...] = ()
    "What a check of the verified domain found wrong since (delegation CNAME, CAA); empty when nothing."
    drift_since: dt.datetime | None = None
    dns_host: DnsHostSeen | None = None
    "Where the domain's zone is hosted, as last found (core/verification/dns_host.py); None until then."


@attrs.frozen
class OneClickOffer:
    """A DNS host's Domain Connect settings, where it applies our template (core/domain_connect/)."""

    provider_id: str
    provider_name: str
    url_sync_ux: str
    width: int = 750
    height: int = 750


@attrs.frozen
class DnsHostSeen:
    """What the zone's NS records and its Domain Connect discovery said, when last asked."""

    zone: str
    host: str
    "A key of core/domains/dns_hosts.py, or empty when the nameservers match no host known there."
    checked_at: dt.datetime
    offer: OneClickOffer | None = None
    problem: str | None = None
    "Why the zone's Domain Connect settings were ignored (a diagnosis note), when they were."
    offer_unknown: bool = False
    "Whether one-click set-up is offered is not known: never asked, or not answered (``offer`` is None)."


@attrs.frozen
class OneClickStart:
    """One offer of one-click set-up: its ``state`` (hashed) works once, for its domain only."""

    state_hash: str
    workspace_id: uuid.UUID
    domain_id: uuid.UUID
    created_at: dt.datetime
    expires_at: dt.datetime
    started_by: str
    "Who asked: ``user:<id>``, ``key:<id>`` or ``link:<id>`` (logged with it)."
    used_at: dt.datetime | None = None


@attrs.frozen
class DriftProblem:
    """One problem found with a verified domain's DNS: a renewal would fail until it is fixed."""

    code: str
    "``delegation_missing``, ``delegation_wrong``, ``dnssec_failure``, ``lame_delegation`` or ``caa_forbids``."
    message: str
    fix: str
    waiting: bool = attrs.field(default=False, metadata=_internal)
    """Only a resolver's cache hides the fix: the record is published at the zone's own nameservers
    again, and there is nothing to change (core/domains/drift.py)."""


@attrs.frozen
class Invitation:
    """An offer of membership to an e-mail: it becomes one when its invitee accepts it."""

    id: uuid.UUID
    email: str
    role: str
    created_at: dt.datetime
    workspace_id: uuid.UUID = attrs.field(metadata=_internal)
    invited_by: uuid.UUID | None = attrs.field(default=None, metadata=_internal)


@attrs.frozen
class Member:
    """A membership joined with its user, as the team endpoints show it."""

    user_id: uuid.UUID
    email: str
    role: str
    joined_at: dt.datetime


#: A certificate's ``issuer`` until the provider names the certificate authority.
DEFAULT_ISSUER = "Edge Provider Managed CA"


@attrs.frozen
class Certificate:
    """One certificate request to the edge provider for one domain, as the API shows it."""

    id: uuid.UUID
    domain_id: uuid.UUID
    apex: str
    wildcard: bool
    issuer: str
    "As the provider reports it; ``Edge Provider Managed CA`` until it does."
    status: str
    "``pending``, ``active`` or ``error`` (core/certificates/states.py decides)."
    provider: str
    bundle_available: bool
    "Always false: the provider manages the key, nothing is exportable."
    workspace_id: uuid.UUID = attrs.field(metadata=_internal)
    created_at: dt.datetime = attrs.field(metadata=_internal)
    not_before: dt.datetime | None = None
    "When the service first stored an active state."
    not_after: dt.datetime | None = None
    provider_certificate_id: str | None = None
    provider_hostname_id: str | None = None
    provider_ssl_id: str | None = None
    provider_status: str | None = None
    "The provider's ``ssl.status``."
    provider_hostname_status: str | None = None
    "The provider's hostname ``status``."
    last_checked_at: dt.datetime | None = None
    profile: str | None = None
    "The CA's certificate profile it was issued under (ACME profiles), as the provider reports it; beyond the spec."
    last_error: str | None = attrs.field(default=None, metadata=_internal)
    "Why the certificate failed, shown through the domain's ``cert.lastError`` and summaries."
    announced: tuple[str, ...] = attrs.field(default=(), metadata=_internal)
    "The event types queued for it: a transition is announced once ([lifecycle] events)."
    previous_issuer: str | None = attrs.field(default=None, metadata=_internal)
    "The issuer (intermediate) before its latest renewal, when that renewal changed it; else None."
    overdue_announced_for: str | None = attrs.field(default=None, metadata=_internal)
    "The ``provider_certificate_id`` whose passing two thirds of its life was announced (``cert.renewal_overdue``)."


@attrs.frozen
class OutboxEvent:
    """An event waiting to become webhook deliveries (transactional outbox)."""

    id: uuid.UUID
    workspace_id: uuid.UUID
    type: str
    data: dict[str, Any]
    "The flat summary the spec names: domainId, apex, certificateId, status, provider (drift events: domainId, apex, drift)."
    created_at: dt.datetime
    dispatched_at: dt.datetime | None = None


@attrs.frozen
class IdempotencyRecord:
    """A claimed Idempotency-Key: in progress under a lease, or completed with its response."""

    workspace_id: uuid.UUID
    method: str
    path: str
    key: str
    fingerprint: str
    "SHA-256 of the request body in canonical JSON form."
    state: str
    created_at: dt.datetime
    locked_until: dt.datetime | None = None
    status_code: int | None = None
    response: str | None = None


@attrs.frozen
class WebhookEndpoint:
    """A workspace's HTTPS receiver of events; its secret is stored encrypted, never shown again."""

    id: uuid.UUID
    url: str
    events: list[str]
    "As registered; empty, or containing ``*``, means every event."
    created_at: dt.datetime
    status: str
    "``active`` or ``disabled``."
    workspace_id: uuid.UUID = attrs.field(metadata=_internal)
    secret_ciphertext: str = attrs.field(metadata=_internal)
    "AES-GCM under a subkey of the secret key file, bound to this endpoint's id."
    updated_at: dt.datetime = attrs.field(metadata=_internal)
    last_delivery_at: dt.datetime | None = None
    last_status_code: int | None = None


@attrs.frozen
class WebhookDelivery:
    """One event for one endpoint: the envelope ``id`` receivers deduplicate by."""

    id: uuid.UUID
    event_id: uuid.UUID
    type: str
    status: str
    "``pending`` (queued or retrying), ``delivered``, or ``failed`` (every attempt failed)."
    attempt_count: int
    "Attempts in the current round (a redelivery starts a new round)."
    created_at: dt.datetime
    data: dict[str, Any]
    endpoint_id: uuid.UUID = attrs.field(metadata=_internal)
    workspace_id: uuid.UUID = attrs.field(metadata=_internal)
    next_attempt_at: dt.datetime | None = None
    last_attempt_at: dt.datetime | None = None
    last_status_code: int | None = None
    last_error: str | None = None


@attrs.frozen
class WebhookAttempt:
    """One try at sending a delivery."""

    number: int
    started_at: dt.datetime
    duration_ms: int
    status_code: int | None = None
    error: str | None = None


@attrs.frozen
class VerificationLinkRow:
    """A shareable verification link as stored; core/verification/links.py shapes it for the API."""

    id: uuid.UUID
    workspace_id: uuid.UUID
    domain_id: uuid.UUID
    apex: str
    "The domain's hostname (joined in, not a column of the link)."
    token_hash: str
    "HMAC-SHA256 of the token under a subkey of the secret key file: the lookup key."
    token_ciphertext: str
    "The token, AES-GCM encrypted under another subkey and bound to this link's id."
    created_at: dt.datetime
    expires_at: dt.datetime
    recipient_email: str | None = None
    last_reminded_at: dt.datetime | None = None
    revoked_at: dt.datetime | None = None
