"""An in-process edge provider for development and tests: no account, no network.

It speaks in Cloudflare's words, so every path of ours can be shown without a network:

- a new hostname is ``pending`` / ``pending_validation``; a refresh at least
  ``activation_delay_seconds`` after issuance finds it ``active`` / ``active`` with a 90-day
  certificate from "Sandbox CA";
- a hostname matching ``fail_patterns`` stays ``pending`` with ``ssl.status``
  ``validation_timed_out`` and a validation error;
- a hostname matching ``block_patterns`` is ``blocked``.

Issuing again adopts the same hostname, as Cloudflare's duplicate handling does. Hostnames live in
memory: after a restart a refresh of a hostname it does not know treats it as issued just now.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import logging
import uuid
from typing import Any

from core.clock import Clock
from core.config import CLOUDFLARE_CAA_ISSUERS, SandboxConfig
from core.crypto import Keyring
from core.dns import caa
from core.edge import ProviderState

log = logging.getLogger(__name__)

#: ``.invalid`` is reserved (RFC 2606): a sandbox target can never collide with a real zone.
SANDBOX_DCV_ZONE = "dcv.sandbox.invalid"
SANDBOX_ISSUER = "Sandbox CA"
CERTIFICATE_DAYS = 90


class SandboxProvider:
    name = "edge_provider_for_saas"

    def __init__(self, keyring: Keyring, config: SandboxConfig, clock: Clock, *,
                 caa_issuers: list[str] | None = None) -> None:
        # Stable across restarts of one installation, different between installations,
        # like Cloudflare's per-zone delegation id.
        self.delegation_id = keyring.mac("sandbox-dcv", "delegation")[:16]
        self.config = config
        self.clock = clock
        self._caa_issuers = caa.terms(caa_issuers if caa_issuers is not None else CLOUDFLARE_CAA_ISSUERS)
        self._issued: dict[str, tuple[str, dt.datetime]] = {}  # hostname id -> (apex, issued at)
        log.warning(
            "edge provider: SANDBOX; certificates are SIMULATED and none is publicly trusted "
            "([provider] kind = \"sandbox\")"
        )

    async def delegation_target(self, apex: str) -> str:
        return f"{apex}.{self.delegation_id}.{SANDBOX_DCV_ZONE}"

    async def caa_issuers(self) -> list[caa.CaaIssuer]:
        """As Cloudflare's: the pre-flight behaves as it will in production."""
        return self._caa_issuers

    def _hostname_id(self, apex: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{self.delegation_id}.{apex}"))

    async def issue(self, apex: str, *, trace_id: uuid.UUID) -> ProviderState:
        hostname_id = self._hostname_id(apex)
        self._issued.setdefault(hostname_id, (apex, self.clock.now()))
        log.info("sandbox issue %s -> %s (trace %s)", apex, hostname_id, trace_id)
        return await self._state(hostname_id, apex)

    async def refresh(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        self._issued.setdefault(hostname_id, (apex, self.clock.now()))
        log.info("sandbox refresh %s (trace %s)", apex, trace_id)
        return await self._state(hostname_id, apex)

    async def revalidate(self, hostname_id: str, *, apex: str, trace_id: uuid.UUID) -> ProviderState:
        """The sandbox's failures are fixed by its configuration, not by validating again: a
        plain read, never ``revalidated``."""
        log.info("sandbox revalidate %s (trace %s)", apex, trace_id)
        return await self.refresh(hostname_id, apex=apex, trace_id=trace_id)

    def close(self) -> None:
        """Nothing to release: the sandbox holds no connections."""

    def _matches(self, apex: str, patterns: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(apex, p) for p in patterns)

    async def _state(self, hostname_id: str, apex: str) -> ProviderState:
        issued_at = self._issued[hostname_id][1]
        common: dict[str, Any] = {
            "hostname_id": hostname_id,
            "ssl_id": str(uuid.uuid5(uuid.NAMESPACE_URL, hostname_id)),
            "delegation_target": await self.delegation_target(apex),
        }
        if self._matches(apex, self.config.block_patterns):
            return ProviderState(
                hostname_status="blocked",
                ssl_status="pending_validation",
                errors=("This hostname is blocked by the sandbox (provider.sandbox.block_patterns).",),
                **common,
            )
        if self._matches(apex, self.config.fail_patterns):
            return ProviderState(
                hostname_status="pending",
                ssl_status="validation_timed_out",
                errors=("DCV failed: the sandbox fails this hostname (provider.sandbox.fail_patterns).",),
                **common,
            )
        activate_at = issued_at + dt.timedelta(seconds=self.config.activation_delay_seconds)
        if self.clock.now() < activate_at:
            return ProviderState(hostname_status="pending", ssl_status="pending_validation", **common)
        return ProviderState(
            hostname_status="active",
            ssl_status="active",
            certificate_id=str(uuid.uuid5(uuid.NAMESPACE_OID, f"{hostname_id}/{issued_at.isoformat()}")),
            issuer=SANDBOX_ISSUER,
            issued_at=activate_at,
            expires_at=activate_at + dt.timedelta(days=CERTIFICATE_DAYS),
            **common,
        )
