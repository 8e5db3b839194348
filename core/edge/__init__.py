"""The edge provider that issues and installs certificates, behind one small interface.

``[provider] kind`` picks the implementation (core/runtime/assembly.py): ``cloudflare``
(Cloudflare for SaaS custom hostnames), ``sandbox`` (in-process, for development and tests), or
``acme`` (the service as an ACME CA's client, core/acme/). Each reports in Cloudflare's words
(``hostname_status``, ``ssl_status``); what they mean for our states is decided in one place,
``core/certificates/states.py``, so an adapter never invents a status of ours.

Also here: the provider with its calls counted for the metrics (``counted``) and, for development
with the sandbox, DNS answers simulated from the stored domains (``simulated_dns``).

May import: core.domains, core.outbound (the HTTP client pools), core.dns, the base modules of
core/ and store/.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import TYPE_CHECKING, Protocol

import attrs

from core.errors import UpstreamError

if TYPE_CHECKING:
    from core.dns.caa import CaaIssuer


@attrs.frozen
class ProviderState:
    """What the provider reported about one custom hostname at one moment."""

    hostname_id: str
    "The provider's id of the custom hostname (Cloudflare: a UUID string)."
    hostname_status: str
    "The hostname's ``status`` as the provider wrote it (``pending``, ``active``, ``blocked``, ...)."
    ssl_id: str | None = None
    ssl_status: str | None = None
    "``ssl.status`` as the provider wrote it (``pending_validation``, ``active``, ...)."
    certificate_id: str | None = None
    "Id of the issued certificate, once there is one (Cloudflare: ``ssl.certificates[0].id``)."
    issuer: str | None = None
    issued_at: dt.datetime | None = None
    expires_at: dt.datetime | None = None
    delegation_target: str | None = None
    "The DCV delegation CNAME target, when the provider states it for this hostname."
    errors: tuple[str, ...] = ()
    "The provider's validation errors, in its words (hostname first, then certificate)."
    revalidated: bool = False
    "This is the answer to a request to validate again (``revalidate`` sent one), not a plain read."
    renew_at: dt.datetime | None = None
    "When the provider itself means to renew the certificate (ACME: inside the CA's renewal window)."
    notice: str | None = None
    "What the provider says of the certificate beyond errors (ACME: where the CA explains its renewal window)."
    profile: str | None = None
    "The CA's profile the issued certificate is under (ACME profiles), when the provider names one."


class ProviderError(UpstreamError):
    """The provider could not give a result; the message is a sentence a user can act on."""


class ProviderUnavailable(ProviderError):
    """Nothing was learnt about the hostname: timeout, 5xx, refused credentials, bad answers.

    Transient or operator-side; no result is stored for the hostname.
    """


class ProviderBusy(ProviderUnavailable):
    """The shared request budget is spent (ours, or the provider said so): retry later."""

    status = 503
    code = "provider_busy"

    def __init__(self, retry_after: int, message: str | None = None) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(
            message
            or f"The edge provider's request budget is spent; retry after {self.retry_after} seconds.",
            headers={"Retry-After": str(self.retry_after)},
        )


class ShareSpent(ProviderBusy):
    """The budget has room, but not for this workspace now: its share of it is used, or (``common``)
    the part every workspace shares beyond what its hostnames earn (core/edge/pacing.py)."""

    def __init__(self, retry_after: int, message: str, *, common: bool) -> None:
        super().__init__(retry_after, message)
        self.common = common


class ProviderRejected(ProviderError):
    """The provider refused this hostname for good (invalid name, quota, not allowed, ...).

    This is a result about the hostname, stored as a failed certificate.
    """

    def __init__(self, message: str, *, provider_code: int | None = None, asked: bool = True) -> None:
        self.provider_code = provider_code
        self.asked = asked
        """False when the adapter refused before asking the provider anything, on a DNS check of its
        own (ACME: the CNAME does not lead to the target yet): a background check that finds the
        fix asks again (core/lifecycle/watcher.py). A refusal the provider made is not asked again."""
        super().__init__(message)


class HostnameGone(ProviderRejected):
    """The provider no longer knows the custom hostname (Cloudflare 1436)."""


class EdgeProvider(Protocol):
    name: str
    "Identifier shown as the Certificate's ``provider``."

    async def delegation_target(self, apex: str) -> str:
        """The CNAME target of ``_acme-challenge.<apex>`` that delegates DCV to the provider."""

    async def caa_issuers(self) -> list[CaaIssuer]:
        """The issuer domains (and accounts, RFC 8657) CAA must allow for the provider to issue."""

    async def issue(self, apex: str, *, trace_id: uuid.UUID) -> ProviderState:
        """Ask for a DV certificate for ``apex``; an existing custom hostname is adopted.

        Raises ``ProviderRejected`` for a refusal about the hostname, ``ProviderUnavailable``
        (or ``ProviderBusy``) when no result could be had.
        """

    async def refresh(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        """Read the hostname's current state, as the provider reports it (a failure included).

        Raises ``HostnameGone`` when the provider no longer has it, otherwise as ``issue``.
        """

    async def revalidate(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        """Read the hostname and, while it is still in a failure validating again can fix (a
        timed-out certificate, a moved hostname), ask the provider to validate again; answer its
        state, ``revalidated`` when it was asked (otherwise this was a plain read).

        Never part of a new issuance request's first answer, which is stored as the provider gave
        it: called only for a certificate already stored as failed, by a later DNS check that
        found both records in place (core/certificates/issuance.py). Raises as ``refresh``.
        """

    def close(self) -> None:
        """Release connections at shutdown."""
